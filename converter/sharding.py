"""Meshes and partition specs: reading them from a module's Shardy attributes, building the
JAX mesh a module needs, and sharding a converted model's parameters (:func:`shard_params`).

A module lowered from a sharded JAX program carries Shardy (``sdy``) attributes: one
``sdy.mesh @mesh = <["x"=4, "y"=2]>`` symbol, ``sdy.sharding`` on ``@main``'s arguments and
results, ``sdy.sharding_constraint`` ops and ``sdy.manual_computation`` regions (``shard_map``).
The signature keeps, in plain JSON (:class:`converter.signature.Signature`):

- ``Signature.mesh``: the mesh as ``{axis name: size}`` in mesh order, or None;
- ``LeafSpec.sharding``: one entry per dimension, each None (not sharded), an axis name, or a
  tuple of axis names (sharded over their product, major to minor), the
  ``jax.sharding.PartitionSpec`` of that leaf; None for a leaf without a sharding
  (replicated).

See ``docs/sharding.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from jaxlib.mlir import ir

from . import sdy
from .errors import ShardingError

#: A leaf's partition spec as stored in a signature: one entry per dimension.
Spec = tuple


# --------------------------------------------------------------------------- reading sdy


def module_meshes(module: ir.Module) -> dict[str, dict[str, int]]:
    """Every ``sdy.mesh`` symbol of ``module`` with axes: ``{symbol name: {axis: size}}``
    (axis order kept), read by :func:`converter.sdy.meshes`. Maximal meshes (one device, no
    axes: ``<[], device_ids=[3]>``) shard nothing and are left out.

    Raises:
        ShardingError: a mesh with explicit ``device_ids`` (a device order other than
            ``0..N-1``): a signature's mesh is ``{axis: size}`` over devices in order, so
            the converter does not reproduce another order.
    """
    out: dict[str, dict[str, int]] = {}
    for name, mesh in sdy.meshes(module).items():
        if mesh.maximal:
            continue
        if mesh.device_ids is not None:
            raise ShardingError(
                f"sdy.mesh @{name} has device_ids={list(mesh.device_ids)}: only meshes over devices "
                "0..N-1 in order are supported"
            )
        out[name] = mesh.shape
    return out


def module_mesh(module: ir.Module) -> dict[str, int] | None:
    """The one mesh of a sharded module as ``{axis: size}``, or None when it has no mesh with
    axes (maximal meshes, one device, carry none).

    Raises:
        ShardingError: the module has several different meshes.
    """
    meshes = module_meshes(module)
    shapes = {tuple(v.items()) for v in meshes.values()}
    if len(shapes) > 1:
        raise ShardingError(f"the module uses several meshes {meshes}; one mesh is supported")
    return dict(next(iter(shapes))) if shapes else None


def decode_sharding(attr: ir.Attribute) -> Spec:
    """A ``#sdy.sharding<@mesh, [{"x"}, {}, {"y", "z"}]>`` attribute as a spec tuple
    (``("x", None, ("y", "z"))``), read by :func:`converter.sdy.parse_sharding`. Open
    dimensions (``{?}``, ``{"x", ?}``) read as their axes; the ``replicated`` axes as not
    sharded.

    Raises:
        ShardingError: a dimension over a sub-axis (``"x":(1)2``), ``unreduced`` axes or an
            inline mesh.
    """
    return sdy.parse_sharding(attr).spec


def decode_shardings(attr: ir.Attribute) -> list[Spec]:
    """The specs of a ``#sdy.sharding_per_value<[...]>`` attribute (manual computations)."""
    return [s.spec for s in sdy.parse_sharding_list(attr)]


def decode_manual_axes(attr: ir.Attribute) -> list[str]:
    """The axis names of a ``#sdy<manual_axes{"x", "y"}>`` attribute."""
    return list(sdy.manual_axes(attr))


def func_shardings(fn: ir.Operation, key: str, count: int) -> list[Spec | None]:
    """The ``sdy.sharding`` of each argument (``key="arg_attrs"``) or result
    (``"res_attrs"``) of a ``func.func``; None where there is none."""
    out: list[Spec | None] = [None] * count
    if key not in fn.attributes:
        return out
    for i, d in enumerate(ir.ArrayAttr(fn.attributes[key])):
        d = ir.DictAttr(d)
        if i < count and "sdy.sharding" in d:
            out[i] = decode_sharding(d["sdy.sharding"])
    return out


def spec_to_json(spec: Spec | None) -> list | None:
    """A spec as JSON (tuples of axes become lists)."""
    return None if spec is None else [list(e) if isinstance(e, tuple) else e for e in spec]


def spec_from_json(value: list | None) -> Spec | None:
    """The inverse of :func:`spec_to_json`."""
    return None if value is None else tuple(tuple(e) if isinstance(e, list) else e for e in value)


def is_replicated(spec: Spec | None) -> bool:
    """Whether ``spec`` shards no dimension."""
    return spec is None or all(e is None for e in spec)


def format_spec(spec: Spec | None) -> str:
    """``P('x', None)``-style text of a spec (``P()`` for a replicated leaf)."""
    if spec is None:
        return "P()"
    return "P(" + ", ".join(repr(e) if not isinstance(e, tuple) else repr(e) for e in spec) + ")"


# --------------------------------------------------------------------------- JAX meshes


def partition_spec(spec: Spec | None) -> Any:
    """A ``jax.sharding.PartitionSpec`` of a stored spec (``P()`` for None)."""
    from jax.sharding import PartitionSpec

    return PartitionSpec() if spec is None else PartitionSpec(*spec)


def jax_mesh(axes: dict[str, int], devices: Sequence[Any] | None = None) -> Any:
    """A ``jax.sharding.Mesh`` of shape ``axes`` over the first ``prod(sizes)`` devices of
    ``devices`` (default ``jax.devices()``), in order, with Auto axis types (device ``k`` of
    the mesh is logical device ``k`` of the module's collectives).

    Raises:
        ShardingError: fewer devices than the mesh needs, naming the mesh and the count.
    """
    import jax

    devices = list(jax.devices() if devices is None else devices)
    n = math.prod(axes.values())
    if len(devices) < n:
        raise ShardingError(
            f"the module is partitioned over the mesh {axes} ({n} devices) but only {len(devices)} "
            f"device(s) are available ({jax.default_backend()}); on CPU set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={n} before JAX starts"
        )
    grid = np.empty(n, dtype=object)
    grid[:] = devices[:n]
    return jax.sharding.Mesh(grid.reshape(tuple(axes.values())), tuple(axes))


def auto_mesh(mesh: Any) -> Any:
    """``mesh`` with every axis of type ``Auto`` (same devices and names). ``jax.make_mesh``
    makes ``Explicit`` axes by default, whose sharding-in-types would make each converted op
    (a ``dot_general`` contracting a sharded dimension...) name its output sharding; on Auto
    axes XLA propagates the shardings, as for the source program."""
    from jax.sharding import AxisType, Mesh

    if all(t == AxisType.Auto for t in getattr(mesh, "axis_types", ())):
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names))


def check_mesh(mesh: Any, axes: dict[str, int]) -> None:
    """Check that a user's ``jax.sharding.Mesh`` has the module's axis names and sizes.

    Raises:
        ShardingError: naming both shapes.
    """
    got = dict(mesh.shape)
    if got != axes:
        raise ShardingError(f"the module needs a mesh {axes}, got a mesh {got}")


# --------------------------------------------------------------------------- shard_params

#: Megatron-style tensor parallelism: (pattern on the parameter name, kind). Column-parallel
#: layers split their output features, row-parallel ones their input features; names match
#: PyTorch/Hugging Face (``q_proj``, ``c_attn``, ``fc1``...) and Flax conventions.
_COLUMN = re.compile(
    r"(^|[._\['/])(q_proj|k_proj|v_proj|qkv_proj|query|key|value|qkv|c_attn|in_proj|"
    r"c_fc|fc1|fc_in|up_proj|gate_proj|gate_up_proj|w1|w3|wi|wi_0|wi_1|intermediate|"
    r"lm_head|Wqkv)([._\]'/]|$)"
)
_ROW = re.compile(
    r"(^|[._\['/])(o_proj|out_proj|c_proj|fc2|fc_out|down_proj|w2|wo|dense_4h_to_h|"
    r"attention\.output\.dense|output\.dense|proj_out)([._\]'/]|$)"
)
_EMBED = re.compile(
    r"(^|[._\['/])(wte|embed_tokens|word_embeddings|tok_embeddings|embedding|Embed_\d+)([._\]'/]|$)"
)
# layers stored (in_features, out_features): Flax kernels, Hugging Face GPT-2 Conv1D
_IN_OUT = re.compile(r"(kernel['\]]*$)|(^|[._\['/])(c_attn|c_fc|c_proj)\.weight$")


def _axes_for(mesh: Any, rule: str) -> tuple[str, ...]:
    names = tuple(mesh.axis_names)
    aliases = {"fsdp": ("fsdp", "data", "dp"), "tp": ("tp", "model", "mp")}[rule]
    for a in aliases:
        if a in names:
            return (a,)
    return names


def _entry(axes: tuple[str, ...]) -> Any:
    return axes[0] if len(axes) == 1 else axes


def _fsdp_spec(shape: tuple, axes: tuple[str, ...], n: int) -> Spec | None:
    """The largest dimension divisible by ``n`` sharded over ``axes``; None if none is."""
    fits = [d for d in range(len(shape)) if shape[d] % n == 0 and shape[d] >= n]
    dims = sorted(fits, key=lambda d: -shape[d])
    if not dims:
        return None
    return tuple(_entry(axes) if d == dims[0] else None for d in range(len(shape)))


def _tp_spec(name: str, shape: tuple, axes: tuple[str, ...], n: int) -> Spec | None:
    """Megatron column/row split of a recognised transformer parameter, else None."""
    rank = len(shape)
    in_out = bool(_IN_OUT.search(name))
    dim = None
    if _COLUMN.search(name):
        # weight: output features (torch (out, in): dim 0; (in, out) kernels: dim 1); bias: dim 0
        dim = 0 if rank == 1 else (rank - 1 if in_out else rank - 2)
    elif _ROW.search(name):
        if rank == 1:
            return None  # a row-parallel layer's bias is added after the reduction: replicated
        dim = rank - 2 if in_out else rank - 1
    elif _EMBED.search(name) and rank == 2:
        dim = 0  # vocabulary-parallel embedding
    if dim is None or dim < 0 or shape[dim] % n:
        return None
    return tuple(_entry(axes) if d == dim else None for d in range(rank))


def param_specs(
    params: dict[str, Any], mesh: Any, rules: str | Iterable[tuple[str, Any]]
) -> dict[str, Spec | None]:
    """The spec :func:`shard_params` gives each parameter (None: replicated).

    Raises:
        ShardingError: an unknown rule name; a regex rule whose spec does not fit the
            parameter (rank, divisibility, unknown axis), naming the parameter.
    """
    out: dict[str, Spec | None] = {}
    if isinstance(rules, str):
        if rules not in ("fsdp", "tp"):
            raise ShardingError(
                f"unknown sharding rules {rules!r}: use 'fsdp', 'tp' or a list of (regex, PartitionSpec)"
            )
        axes = _axes_for(mesh, rules)
        n = math.prod(mesh.shape[a] for a in axes)
        for name, v in params.items():
            shape = tuple(np.shape(v))
            out[name] = _fsdp_spec(shape, axes, n) if rules == "fsdp" else _tp_spec(name, shape, axes, n)
        return out
    compiled = [(re.compile(pattern), tuple(spec)) for pattern, spec in rules]
    for name, v in params.items():
        shape = tuple(np.shape(v))
        out[name] = None
        for pattern, spec in compiled:
            if pattern.search(name):
                _check_fits(name, shape, spec, mesh)
                out[name] = spec + (None,) * (len(shape) - len(spec))
                break
    return out


def _check_fits(name: str, shape: tuple, spec: Spec, mesh: Any) -> None:
    if len(spec) > len(shape):
        raise ShardingError(
            f"{name}: spec {format_spec(spec)} has more entries than the parameter's shape {list(shape)}"
        )
    for d, e in enumerate(spec):
        axes = () if e is None else (e,) if isinstance(e, str) else tuple(e)
        unknown = [a for a in axes if a not in mesh.shape]
        if unknown:
            raise ShardingError(
                f"{name}: spec {format_spec(spec)} names axes {unknown} not in the mesh {dict(mesh.shape)}"
            )
        n = math.prod(mesh.shape[a] for a in axes)
        if shape[d] % n:
            raise ShardingError(
                f"{name}: dimension {d} of size {shape[d]} is not divisible by {n} (spec {format_spec(spec)})"
            )


def shard_params(
    params: dict[str, Any], mesh: Any, rules: str | Iterable[tuple[str, Any]] = "fsdp"
) -> dict[str, Any]:
    """Place a converted model's parameters on ``mesh``, sharded by ``rules``.

    ``jax.jit(f.apply)(shard_params(f.params, mesh, "fsdp"), x)`` then runs SPMD: XLA
    partitions the program from the parameters' shardings (and inserts the collectives).

    Args:
        params: parameters by name (``JaxFunction.params``, or any flat dict of arrays).
        mesh: a ``jax.sharding.Mesh``.
        rules: ``"fsdp"``: each parameter's largest dimension divisible by the mesh size is
            sharded over the mesh's ``fsdp``/``data``/``dp`` axis if it has one, else over all
            its axes; other parameters are replicated. ``"tp"``: Megatron-style tensor
            parallelism over the ``tp``/``model``/``mp`` axis (else all axes), recognised
            from transformer parameter names: column-parallel layers (``q_proj``, ``c_attn``,
            ``fc1``, ``up_proj``, ``lm_head``...) split their output features, row-parallel
            ones (``o_proj``, ``out_proj``, ``c_proj``, ``fc2``, ``down_proj``...) their input
            features, embeddings (``wte``, ``embed_tokens``...) their vocabulary; torch
            ``weight`` is read as (out, in), Flax ``kernel`` and GPT-2 ``Conv1D`` weights as
            (in, out); everything else (norms, a dimension not divisible) is replicated.
            Or a list of ``(regex, PartitionSpec)``: the first pattern found (``re.search``)
            in a parameter's name gives its spec (missing trailing entries: not sharded);
            unmatched parameters are replicated.

    Returns:
        A new dict of ``jax.Array``s with ``NamedSharding(mesh, spec)``, on ``mesh`` with its
        axes made ``Auto`` (:func:`auto_mesh`: XLA propagates the shardings through the
        converted program; ``jax.make_mesh``'s default ``Explicit`` axes would need every op
        to name its output sharding).

    Raises:
        ShardingError: an unknown rule name, or a regex rule's spec that does not fit its
            parameter (names the parameter).
    """
    import jax
    from jax.sharding import NamedSharding

    specs = param_specs(params, mesh, rules)
    mesh = auto_mesh(mesh)
    return {
        name: jax.device_put(v, NamedSharding(mesh, partition_spec(specs[name])))
        for name, v in params.items()
    }


__all__ = [
    "check_mesh",
    "decode_sharding",
    "format_spec",
    "func_shardings",
    "jax_mesh",
    "module_mesh",
    "param_specs",
    "partition_spec",
    "shard_params",
]
