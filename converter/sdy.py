"""Reading Shardy meshes and shardings from a StableHLO module (for the backends that run
a partitioned module one partition per process).

JAX lowers ``jax.jit(shard_map(f, mesh, in_specs, out_specs))`` with Shardy: the module has
``mhlo.num_partitions = N``, an ``sdy.mesh @name = <["x"=2, "y"=2]>`` symbol and, in
``@main``, an ``sdy.manual_computation`` whose ``in_shardings``/``out_shardings`` say how
each operand and result is split over the mesh axes (``<@mesh, [{"x"}, {}]>``: dimension 0
split over ``x``, dimension 1 whole). The MLIR bindings expose these attributes only as their
text, so this module decodes that text (Shardy dialect reference: openxla.org/shardy).

Partition ``p`` (the value of ``stablehlo.partition_id``, and the ids in ``replica_groups``
and ``source_target_pairs``) sits at the mesh position whose device id is ``p``: position
``p`` itself for a mesh without ``device_ids``, else ``device_ids.index(p)``; positions are
row-major over the mesh axes (the order of ``jax.sharding.Mesh.devices.flat``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from jaxlib.mlir import ir

from .errors import DistributedError

_AXIS = re.compile(r'"([^"]*)"\s*=\s*(\d+)')
_DEVICE_IDS = re.compile(r"device_ids\s*=\s*\[([^\]]*)\]")
_QUOTED = re.compile(r'"([^"]*)"')


@dataclass(frozen=True)
class Mesh:
    """A Shardy mesh: ``axes`` as ``(name, size)`` pairs, major to minor, and the device id
    at each row-major position (``device_ids``; ``None`` means position ``i`` is device
    ``i``)."""

    axes: tuple[tuple[str, int], ...]
    device_ids: tuple[int, ...] | None = None

    @property
    def size(self) -> int:
        return math.prod(s for _, s in self.axes)

    def coordinates(self, partition: int) -> dict[str, int]:
        """The mesh coordinate of partition ``partition``, by axis name."""
        pos = partition if self.device_ids is None else self.device_ids.index(partition)
        out = {}
        for name, size in reversed(self.axes):
            pos, out[name] = divmod(pos, size)
        return out


@dataclass(frozen=True)
class Sharding:
    """How one value is split over a mesh: ``dims[d]`` names the mesh axes dimension ``d``
    is split over, major to minor (``()``: not split)."""

    mesh: str
    dims: tuple[tuple[str, ...], ...]

    def counts(self, mesh: Mesh) -> tuple[int, ...]:
        """Number of shards along each dimension."""
        sizes = dict(mesh.axes)
        return tuple(math.prod(sizes[a] for a in axes) for axes in self.dims)

    def local_shape(self, shape: tuple[int, ...], mesh: Mesh, what: str) -> tuple[int, ...]:
        """The shape of one shard of a value of global ``shape``.

        Raises:
            DistributedError: a dimension is not divisible by its number of shards (names
                ``what``).
        """
        if len(shape) != len(self.dims):
            raise DistributedError(
                f"{what}: sharding {self} has {len(self.dims)} dimensions, the value {len(shape)}"
            )
        out = []
        for d, (n, k) in enumerate(zip(shape, self.counts(mesh), strict=True)):
            if n % k:
                raise DistributedError(
                    f"{what}: dimension {d} of size {n} does not split into {k} equal shards"
                )
            out.append(n // k)
        return tuple(out)

    def shard_index(self, mesh: Mesh, partition: int) -> tuple[int, ...]:
        """Which shard partition ``partition`` holds along each dimension."""
        coord = mesh.coordinates(partition)
        sizes = dict(mesh.axes)
        out = []
        for axes in self.dims:
            idx = 0
            for a in axes:
                idx = idx * sizes[a] + coord[a]
            out.append(idx)
        return tuple(out)

    def __str__(self) -> str:
        dims = ", ".join("{" + ", ".join(f'"{a}"' for a in axes) + "}" for axes in self.dims)
        return f"<@{self.mesh}, [{dims}]>"


def meshes(module: ir.Module) -> dict[str, Mesh]:
    """The ``sdy.mesh`` symbols of ``module`` by name.

    Raises:
        DistributedError: a mesh the text cannot be read from.
    """
    out = {}
    for op in module.body.operations:
        op = op.operation
        if op.name != "sdy.mesh":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        out[name] = parse_mesh(str(op.attributes["mesh"]), name)
    attrs = module.operation.attributes
    if "mhlo.frontend_attributes" in attrs:  # Shardy's round-trip form (a serialized module)
        frontend = ir.DictAttr(attrs["mhlo.frontend_attributes"])
        if "xla.sdy.meshes" in frontend:
            text = ir.StringAttr(frontend["xla.sdy.meshes"]).value.strip()
            for item in _split_top(text[1:-1]):
                name, _, mesh = item.partition("=")
                out[name.strip()] = parse_mesh(mesh.strip(), name.strip())
    return out


def parse_mesh(text: str, name: str = "mesh") -> Mesh:
    """A :class:`Mesh` from its attribute text (``#sdy.mesh<["x"=2], device_ids=[1, 0]>``)."""
    ids = _DEVICE_IDS.search(text)
    body = text[: ids.start()] if ids else text
    axes = tuple((a, int(s)) for a, s in _AXIS.findall(body))
    device_ids = None
    if ids:
        device_ids = tuple(int(v) for v in ids.group(1).replace(" ", "").split(",") if v)
        if sorted(device_ids) != list(range(math.prod(s for _, s in axes))):
            raise DistributedError(
                f"mesh @{name}: device_ids {list(device_ids)} are not a permutation of the mesh"
            )
    return Mesh(axes, device_ids)


def _split_top(text: str) -> list[str]:
    """The comma-separated items of ``text`` at bracket depth 0."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<[{(":
            depth += 1
        elif ch in ">]})":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        items.append(text[start:].strip())
    return items


def parse_sharding(text: str) -> Sharding:
    """A :class:`Sharding` from a tensor sharding's text (``<@mesh, [{"x"}, {}]>``, with or
    without ``#sdy.sharding``).

    Raises:
        DistributedError: forms this reader does not handle: an inline mesh, sub-axes
            (``"x":(1)2``) or ``unreduced`` axes, each named.
    """
    body = text.strip()
    body = body.removeprefix("#sdy.sharding")
    if not (body.startswith("<") and body.endswith(">")):
        raise DistributedError(f"cannot read the sharding {text!r}")
    items = _split_top(body[1:-1])
    if not items or not items[0].startswith("@"):
        raise DistributedError(f"sharding {text!r}: only shardings over a named mesh (@name) are supported")
    mesh = items[0][1:]
    dims_text = items[1] if len(items) > 1 else "[]"
    for extra in items[2:]:
        if extra.startswith("unreduced") and _QUOTED.search(extra):
            raise DistributedError(f"sharding {text!r}: unreduced axes are not supported")
    dims = []
    for dim in _split_top(dims_text.strip()[1:-1]):
        inner = dim[dim.index("{") + 1 : dim.rindex("}")]
        axes = []
        for tok in _split_top(inner):
            if tok == "?":
                continue
            if ":" in tok:
                raise DistributedError(f"sharding {text!r}: sub-axes ({tok}) are not supported")
            axes.append(_QUOTED.fullmatch(tok).group(1))
        dims.append(tuple(axes))
    return Sharding(mesh, tuple(dims))


def parse_sharding_list(text: str) -> list[Sharding]:
    """The shardings of ``#sdy.sharding_per_value<[<...>, <...>]>`` (an op's
    ``in_shardings``/``out_shardings``)."""
    body = text.strip().removeprefix("#sdy.sharding_per_value")
    body = body[body.index("[") + 1 : body.rindex("]")]
    return [parse_sharding(item) for item in _split_top(body)]


def manual_axes(text: str) -> tuple[str, ...]:
    """The axis names of ``#sdy<manual_axes{"x", "y"}>``."""
    return tuple(_QUOTED.findall(text))


def num_partitions(module: ir.Module) -> int:
    """``mhlo.num_partitions`` of the module (1 when absent)."""
    attrs = module.operation.attributes
    return int(ir.IntegerAttr(attrs["mhlo.num_partitions"]).value) if "mhlo.num_partitions" in attrs else 1


def num_replicas(module: ir.Module) -> int:
    """``mhlo.num_replicas`` of the module (1 when absent)."""
    attrs = module.operation.attributes
    return int(ir.IntegerAttr(attrs["mhlo.num_replicas"]).value) if "mhlo.num_replicas" in attrs else 1


__all__ = [
    "Mesh",
    "Sharding",
    "manual_axes",
    "meshes",
    "num_partitions",
    "num_replicas",
    "parse_mesh",
    "parse_sharding",
    "parse_sharding_list",
]
