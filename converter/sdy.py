"""Reading Shardy meshes and shardings from a StableHLO module: the converter's one reader of
the ``sdy`` dialect's attributes, through jaxlib's Shardy bindings (Shardy dialect reference:
openxla.org/shardy, ``MeshAttr``/``TensorShardingAttr``).

JAX lowers a sharded program with Shardy: the module has ``mhlo.num_partitions = N``, an
``sdy.mesh @name = <["x"=2, "y"=2]>`` symbol, ``sdy.sharding`` attributes on ``@main``'s
arguments and results, and ``sdy.manual_computation`` ops (``shard_map``) whose
``in_shardings``/``out_shardings`` say how each operand and result is split over the mesh
axes (``<@mesh, [{"x"}, {}]>``: dimension 0 split over ``x``, dimension 1 whole). A module
exported in Shardy's round-trip form keeps the same attributes as text in
``mhlo.frontend_attributes`` (``xla.sdy.meshes``, ``xla.sdy.sharding``...); the functions
below take an attribute or its text.

Device ids follow Shardy's ``MeshAttr``: a mesh without ``device_ids`` has the devices
``iota(product of axis sizes)`` in row-major order over its axes (the order of
``jax.sharding.Mesh.devices.flat``); with ``device_ids`` (a permutation of that iota, never
iota itself), position ``i`` holds device ``device_ids[i]``. A mesh without axes is maximal:
one device, ``device_ids[0]`` (any non-negative id) or 0. Partition ``p`` (the value of
``stablehlo.partition_id``, and the ids in ``replica_groups`` and ``source_target_pairs``)
runs on the mesh position holding device ``p``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import sdy as _sdy

from .errors import DistributedError, ShardingError

_QUOTED = re.compile(r'"([^"]*)"')


@dataclass(frozen=True)
class Mesh:
    """A Shardy mesh: ``axes`` as ``(name, size)`` pairs, major to minor, and the device id
    at each row-major position (``device_ids``; ``None`` means position ``i`` is device
    ``i``). A maximal mesh has no axes and one device id."""

    axes: tuple[tuple[str, int], ...]
    device_ids: tuple[int, ...] | None = None

    @property
    def size(self) -> int:
        """The number of devices."""
        return math.prod(s for _, s in self.axes)

    @property
    def maximal(self) -> bool:
        """True for a mesh of one device without axes (``<[], device_ids=[3]>``)."""
        return not self.axes

    @property
    def shape(self) -> dict[str, int]:
        """``{axis name: size}`` in mesh order."""
        return dict(self.axes)

    def coordinates(self, partition: int) -> dict[str, int]:
        """The mesh coordinate of the device ``partition``, by axis name.

        Raises:
            ShardingError: the mesh has no device ``partition``.
        """
        ids = self.device_ids if self.device_ids is not None else range(self.size)
        if partition not in ids:
            raise ShardingError(f"device {partition} is not in the mesh {self}")
        pos = list(ids).index(partition)
        out = {}
        for name, size in reversed(self.axes):
            pos, out[name] = divmod(pos, size)
        return out

    def __str__(self) -> str:
        axes = ", ".join(f'"{a}"={s}' for a, s in self.axes)
        ids = "" if self.device_ids is None else f", device_ids={list(self.device_ids)}"
        return f"<[{axes}]{ids}>"


@dataclass(frozen=True)
class Sharding:
    """How one value is split over a mesh: ``dims[d]`` names the mesh axes dimension ``d``
    is split over, major to minor (``()``: not split)."""

    mesh: str
    dims: tuple[tuple[str, ...], ...]

    @property
    def spec(self) -> tuple:
        """The ``jax.sharding.PartitionSpec`` entries: per dimension None (not split), an
        axis name, or a tuple of axis names."""
        return tuple(None if not a else a[0] if len(a) == 1 else a for a in self.dims)

    def counts(self, mesh: Mesh) -> tuple[int, ...]:
        """Number of shards along each dimension."""
        sizes = dict(mesh.axes)
        return tuple(math.prod(sizes[a] for a in axes) for axes in self.dims)

    def local_shape(self, shape: tuple[int, ...], mesh: Mesh, what: str) -> tuple[int, ...]:
        """The shape of one shard of a value of global ``shape``.

        Raises:
            DistributedError: the ranks differ or a dimension is not divisible by its number
                of shards (names ``what``).
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
        """Which shard the device ``partition`` holds along each dimension."""
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


def _attribute(value: ir.Attribute | str, prefix: str) -> ir.Attribute:
    """``value`` as an attribute: text is parsed (``prefix`` added to Shardy's short form,
    ``<@mesh, [...]>`` → ``#sdy.sharding<@mesh, [...]>``) in the current MLIR context, or
    the converter's when there is none."""
    if isinstance(value, ir.Attribute):
        return value
    text = str(value).strip()
    if text.startswith("<"):
        text = prefix + text
    ctx = ir.Context.current  # None outside any context (jaxlib 0.10)
    if ctx is None:
        from .mlir import context

        ctx = context()
    with ctx:
        try:
            return ir.Attribute.parse(text)
        except ir.MLIRError as e:
            raise ShardingError(f"cannot read the Shardy attribute {text!r}: {e}") from None


def parse_mesh(value: ir.Attribute | str, name: str = "mesh") -> Mesh:
    """A :class:`Mesh` from an ``#sdy.mesh<...>`` attribute or its text
    (``#sdy.mesh<["x"=2], device_ids=[1, 0]>``).

    Raises:
        ShardingError: the text is no Shardy mesh (named with ``name``), or device ids
            that Shardy's parser refuses (a maximal mesh of several devices, ids that are not
            a permutation of the mesh's devices), with its message.
    """
    attr = _attribute(value, "#sdy.mesh")
    if not _sdy.MeshAttr.isinstance(attr):
        raise ShardingError(f"mesh @{name}: {attr} is not an #sdy.mesh")
    mesh = _sdy.MeshAttr(attr)
    axes = tuple((_sdy.MeshAxisAttr(a).name, int(_sdy.MeshAxisAttr(a).size)) for a in mesh.axes)
    ids = tuple(int(i) for i in mesh.device_ids)  # Shardy's parser: a permutation of the devices
    if not ids:
        return Mesh(axes)
    n = math.prod(s for _, s in axes)
    return Mesh(axes, None if axes and list(ids) == list(range(n)) else ids)


def meshes(module: ir.Module) -> dict[str, Mesh]:
    """The ``sdy.mesh`` symbols of ``module`` by name, from the ops or from Shardy's round-trip
    form (``mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh = #sdy.mesh<...>}"}``).

    Raises:
        ShardingError: a mesh :func:`parse_mesh` refuses.
    """
    out = {}
    for op in module.body.operations:
        op = op.operation
        if op.name == "sdy.mesh":
            name = ir.StringAttr(op.attributes["sym_name"]).value
            out[name] = parse_mesh(op.attributes["mesh"], name)
    attrs = module.operation.attributes
    if "mhlo.frontend_attributes" in attrs:
        frontend = ir.DictAttr(attrs["mhlo.frontend_attributes"])
        if "xla.sdy.meshes" in frontend:
            with module.context:
                table = ir.DictAttr(ir.Attribute.parse(ir.StringAttr(frontend["xla.sdy.meshes"]).value))
            for i in range(len(table)):
                out[table[i].name] = parse_mesh(table[i].attr, table[i].name)
    return out


def parse_sharding(value: ir.Attribute | str) -> Sharding:
    """A :class:`Sharding` from an ``#sdy.sharding<@mesh, [{"x"}, {}]>`` attribute or its text
    (with or without ``#sdy.sharding``). Open dimensions (``{?}``, ``{"x", ?}``) read as their
    axes; ``replicated`` axes as not splitting anything.

    Raises:
        ShardingError: forms the converter does not run, each named: an inline mesh,
            sub-axes (``"x":(1)2``), ``unreduced`` axes.
    """
    attr = _attribute(value, "#sdy.sharding")
    if not _sdy.TensorShardingAttr.isinstance(attr):
        raise ShardingError(f"{attr} is not an #sdy.sharding")
    sharding = _sdy.TensorShardingAttr(attr)
    mesh = sharding.mesh_or_ref
    if not isinstance(mesh, ir.FlatSymbolRefAttr):
        raise ShardingError(f"sharding {attr}: only shardings over a named mesh (@name) are supported")
    if len(list(sharding.unreduced_axes)):
        raise ShardingError(f"sharding {attr}: unreduced axes are not supported")
    dims = []
    for dim in sharding.dimension_shardings:
        axes = []
        for a in _sdy.DimensionShardingAttr(dim).axes:
            ref = _sdy.AxisRefAttr(a)
            if ref.sub_axis_info is not None:
                raise ShardingError(f"sharding {attr}: sub-axes ({ref}) are not supported")
            axes.append(ref.name)
        dims.append(tuple(axes))
    return Sharding(mesh.value, tuple(dims))


def parse_sharding_list(value: ir.Attribute | str) -> list[Sharding]:
    """The shardings of an ``#sdy.sharding_per_value<[<...>, <...>]>`` attribute or its text
    (an op's ``in_shardings``/``out_shardings``).

    Raises:
        ShardingError: as :func:`parse_sharding`.
    """
    attr = _attribute(value, "#sdy.sharding_per_value")
    if not _sdy.TensorShardingPerValueAttr.isinstance(attr):
        raise ShardingError(f"{attr} is not an #sdy.sharding_per_value")
    return [parse_sharding(s) for s in _sdy.TensorShardingPerValueAttr(attr).shardings]


def manual_axes(value: ir.Attribute | str) -> tuple[str, ...]:
    """The axis names of ``#sdy<manual_axes{"x", "y"}>`` (the bindings expose this attribute
    only as its text: its quoted axis names, in order)."""
    return tuple(_QUOTED.findall(str(value)))


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
