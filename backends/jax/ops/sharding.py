"""Shardy ops and collectives: a partitioned module (``sdy.mesh``) runs SPMD on a
``jax.sharding.Mesh`` of its shape (``interp.mesh``).

- ``sdy.sharding_constraint`` → ``jax.lax.with_sharding_constraint`` (JAX also lowers
  ``jax.sharding.reshard`` to it).
- ``sdy.manual_computation`` (``shard_map``) → ``jax.shard_map`` over its manual axes, the
  body interpreted per shard.
- Inside it the collectives become JAX's named-axis collectives: ``all_reduce`` →
  ``psum``/``pmax``/``pmin``, ``all_gather`` → ``all_gather(tiled=True)``, ``reduce_scatter``
  → ``psum_scatter(tiled=True)``, ``all_to_all`` → ``all_to_all(tiled=True)``,
  ``collective_permute`` → ``ppermute``, ``partition_id`` → the device's index from
  ``axis_index``. The mesh axes are recovered from the ops' device groups
  (``replica_groups``/``source_target_pairs`` over logical device ids, which are positions in
  the row-major mesh): the StableHLO spec's "use_global_device_ids" mode
  (https://openxla.org/stablehlo/spec#all_reduce, #collective_permute).

A module without a mesh (one device) runs the collectives over singleton groups as identities,
and so over "every process" (empty ``replica_groups``) when it has one partition and one replica.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from converter import mlir, regions, sharding
from converter.errors import ShardingError
from converter.sdy import num_partitions, num_replicas

from ..registry import register

# --------------------------------------------------------------------------- mesh helpers


def _mesh_axes(interp) -> dict[str, int]:
    mesh = getattr(interp, "mesh", None)
    return {} if mesh is None else dict(mesh.shape)


def _groups(op: mlir.Op) -> list[list[int]] | None:
    """The op's ``replica_groups`` as lists of logical device ids; None for "all devices"."""
    arr = np.asarray(op.attr("replica_groups"))  # required by the verifier of every collective
    if arr.size == 0:
        return None
    return [[int(d) for d in g if d >= 0] for g in arr.reshape(arr.shape[0], -1)]


def _subset_groups(axes: dict[str, int], subset: tuple[str, ...]) -> list[tuple[int, ...]]:
    names, sizes = list(axes), list(axes.values())
    ids = np.arange(math.prod(sizes)).reshape(sizes)
    order = [names.index(a) for a in names if a not in subset] + [names.index(a) for a in subset]
    moved = np.transpose(ids, order).reshape(-1, math.prod(axes[a] for a in subset))
    return sorted(tuple(int(d) for d in row) for row in moved)


def _one_process(interp) -> bool:
    """The module runs as one process (``mhlo.num_partitions`` and ``mhlo.num_replicas`` 1 or
    absent): empty ``replica_groups`` (all processes) then name a group of one."""
    module = getattr(interp, "module", None)
    return module is not None and num_partitions(module) == num_replicas(module) == 1


def _axes_of_groups(interp, op: mlir.Op) -> tuple[str, ...] | None:
    """The mesh axes (in the order the groups enumerate them) over which ``op``'s device
    groups run; ``()`` when every group is one device (nothing to communicate).

    Raises:
        ShardingError: the groups match no set of mesh axes, naming the op.
    """
    groups = _groups(op)
    axes = _mesh_axes(interp)
    if groups is not None and all(len(g) == 1 for g in groups):
        return ()
    if groups is None and not axes and _one_process(interp):
        return ()  # every process: the one there is
    if not axes:
        raise ShardingError("a collective over several devices in a module without a mesh")
    if groups is None:
        return tuple(axes)
    want = sorted(tuple(g) for g in groups)
    for r in range(1, len(axes) + 1):
        for subset in itertools.permutations(axes, r):
            if _subset_groups(axes, subset) == want:
                return subset
    raise ShardingError(f"device groups {groups} match no axes of the mesh {axes}")


def _name(axes: tuple[str, ...]) -> Any:
    return axes[0] if len(axes) == 1 else axes


def _reduction(op: mlir.Op) -> str | None:
    """The combiner of a collective's body (``add``, ``max``...), seen through the
    ``sdy.sharding_constraint`` JAX may put on its result."""
    return regions.classify_combiner(op.regions[0])


# --------------------------------------------------------------------------- sdy ops


@register("sdy.sharding_constraint")
def _sharding_constraint(interp, op, x):
    """``with_sharding_constraint(x, NamedSharding(mesh, spec))``: the value is laid out as
    the source asked; numbers unchanged. Inside a manual computation (per-shard values) and
    in a module without a mesh it constrains nothing."""
    mesh = getattr(interp, "mesh", None)
    if mesh is None or getattr(interp, "manual_axes", ()):
        return x
    spec = sharding.decode_sharding(op.mlir.attributes["sharding"])
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, sharding.partition_spec(spec)))


def _manual_spec(spec: tuple, manual: set[str]) -> Any:
    """A manual computation's spec restricted to its manual axes (``shard_map``'s specs
    name only those)."""
    out = []
    for e in spec:
        names = () if e is None else (e,) if isinstance(e, str) else tuple(e)
        names = tuple(a for a in names if a in manual)
        out.append(None if not names else names[0] if len(names) == 1 else names)
    return sharding.partition_spec(tuple(out))


@register("sdy.manual_computation")
def _manual_computation(interp, op, *operands):
    """``jax.shard_map`` of the body over the op's ``manual_axes``, with its
    ``in_shardings``/``out_shardings`` as ``in_specs``/``out_specs`` (``check_vma=False``:
    the body is already checked StableHLO)."""
    mesh = getattr(interp, "mesh", None)
    if mesh is None:
        raise ShardingError("the module has no mesh")
    attrs = op.mlir.attributes
    manual = set(sharding.decode_manual_axes(attrs["manual_axes"]))
    in_specs = tuple(_manual_spec(s, manual) for s in sharding.decode_shardings(attrs["in_shardings"]))
    out_specs = tuple(_manual_spec(s, manual) for s in sharding.decode_shardings(attrs["out_shardings"]))
    body = interp.region_fn(op.regions[0])

    def per_shard(*xs):
        saved = getattr(interp, "manual_axes", ())
        interp.manual_axes = tuple(a for a in mesh.axis_names if a in manual or a in saved)
        try:
            return tuple(body(*xs))
        finally:
            interp.manual_axes = saved

    kwargs = {} if manual == set(mesh.axis_names) else {"axis_names": manual}
    f = jax.shard_map(per_shard, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False, **kwargs)
    return list(f(*operands))


# --------------------------------------------------------------------------- collectives

_PREDUCE = {"add": jax.lax.psum, "max": jax.lax.pmax, "min": jax.lax.pmin}


@register("stablehlo.all_reduce")
def _all_reduce(interp, op, *xs):
    """``psum``/``pmax``/``pmin`` over the group's mesh axes (StableHLO spec ``all_reduce``).

    Raises:
        ShardingError: a combiner other than add/max/min."""
    axes = _axes_of_groups(interp, op)
    if not axes:
        return list(xs)
    kind = _reduction(op)
    if kind not in _PREDUCE:
        raise ShardingError(f"combiner {kind or 'custom'} is not supported")
    return [_PREDUCE[kind](x, _name(axes)) for x in xs]


@register("stablehlo.all_gather")
def _all_gather(interp, op, *xs):
    """``all_gather(x, axes, axis=all_gather_dim, tiled=True)``."""
    axes = _axes_of_groups(interp, op)
    if not axes:
        return list(xs)
    dim = op.attr("all_gather_dim")
    return [jax.lax.all_gather(x, _name(axes), axis=dim, tiled=True) for x in xs]


@register("stablehlo.reduce_scatter")
def _reduce_scatter(interp, op, x):
    """``psum_scatter(x, axes, scatter_dimension=d, tiled=True)``.

    Raises:
        ShardingError: a combiner other than add."""
    axes = _axes_of_groups(interp, op)
    if not axes:
        return x
    kind = _reduction(op)
    if kind != "add":
        raise ShardingError(f"combiner {kind or 'custom'} is not supported")
    return jax.lax.psum_scatter(x, _name(axes), scatter_dimension=op.attr("scatter_dimension"), tiled=True)


@register("stablehlo.all_to_all")
def _all_to_all(interp, op, *xs):
    """``all_to_all(x, axes, split_dimension, concat_dimension, tiled=True)``."""
    axes = _axes_of_groups(interp, op)
    if not axes:
        return list(xs)
    split, concat = op.attr("split_dimension"), op.attr("concat_dimension")
    return [jax.lax.all_to_all(x, _name(axes), split, concat, tiled=True) for x in xs]


@register("stablehlo.collective_permute")
def _collective_permute(interp, op, x):
    """``ppermute(x, axes, perm)``: the source/target device pairs as one permutation of
    the positions along the fewest mesh axes, the same for every position along the others;
    over every axis (the pairs themselves, device ids being row-major mesh positions) when no
    smaller set of axes fits. The verifier makes sources and targets each unique.

    Raises:
        ShardingError: pairs that move values in a module without a mesh."""
    pairs = [(int(s), int(t)) for s, t in np.asarray(op.attr("source_target_pairs")).reshape(-1, 2)]
    if all(s == t for s, t in pairs):
        return x
    axes = _mesh_axes(interp)
    if not axes:
        raise ShardingError("the module has no mesh")
    names, sizes = list(axes), list(axes.values())
    coords = lambda d: dict(zip(names, np.unravel_index(d, sizes), strict=True))  # noqa: E731
    for r in range(1, len(names)):
        for subset in itertools.combinations(names, r):
            rest = [a for a in names if a not in subset]
            perms: dict[tuple, set] = {}
            ok = True
            for s, t in pairs:
                cs, ct = coords(s), coords(t)
                if any(cs[a] != ct[a] for a in rest):
                    ok = False
                    break
                pair = (_linear(cs, subset, axes), _linear(ct, subset, axes))
                perms.setdefault(tuple(cs[a] for a in rest), set()).add(pair)
            n_outer = math.prod(axes[a] for a in rest)
            if ok and len(perms) == n_outer and len({frozenset(p) for p in perms.values()}) == 1:
                perm = sorted(next(iter(perms.values())))
                return jax.lax.ppermute(x, _name(subset), perm)
    return jax.lax.ppermute(x, _name(tuple(names)), sorted(pairs))


def _linear(coords: dict[str, int], subset: tuple[str, ...], axes: dict[str, int]) -> int:
    """The row-major position of ``coords`` along the axes ``subset``."""
    return int(np.ravel_multi_index([coords[a] for a in subset], [axes[a] for a in subset]))


@register("stablehlo.partition_id")
def _partition_id(interp, op):
    """The device's logical id, ``sum(axis_index(a) * stride(a))`` over the mesh axes, as
    ``ui32`` (0 in a module without a mesh).

    Raises:
        ShardingError: outside a manual computation over every mesh axis."""
    axes = _mesh_axes(interp)
    if not axes:
        return jnp.zeros((), jnp.uint32)
    manual = getattr(interp, "manual_axes", ())
    if set(manual) != set(axes):
        raise ShardingError(
            "only supported inside a manual computation over "
            f"every mesh axis {list(axes)} (manual here: {list(manual)})"
        )
    out = jnp.zeros((), jnp.uint32)
    stride = 1
    for a in reversed(list(axes)):
        out = out + jax.lax.axis_index(a).astype(jnp.uint32) * jnp.uint32(stride)
        stride *= axes[a]
    return out
