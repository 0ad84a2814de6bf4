"""Cross-partition collectives and ``sdy.manual_computation`` (StableHLO spec sections
``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``, ``collective_permute``,
``partition_id``; Shardy's ``sdy.manual_computation``).

Each partition of a partitioned module runs as one rank of ``torch.distributed``'s default
process group (rank = partition id, see :mod:`converter.sdy`); the collectives become
``torch.distributed._functional_collectives`` calls, which ``make_fx`` traces into
``_c10d_functional`` ops of the graph (gloo on CPU, nccl on CUDA). The communicator
(:class:`Communicator`, ``interp.comm``) creates one process group per distinct replica group,
on every rank in the same order (``new_group`` is itself collective). Outside a distributed
module (``interp.comm`` is ``None``) only one-partition collectives run: identities.

torch's process groups order their members by rank, StableHLO's ``replica_groups`` by their
listing: results are put in the listing's order (the chunks of ``all_gather``, what each
member of ``reduce_scatter``/``all_to_all`` receives). Modules with more than one replica
(``mhlo.num_replicas``) are refused before tracing (:mod:`converter.backends.torch.distributed`).
"""

from __future__ import annotations

import numpy as np
import torch

from converter.errors import DistributedError
from converter.regions import classify_combiner

from .._util import operand_name, storage_dtype
from ..registry import register

_REDUCE_OPS = {
    "add": "sum",
    "mul": "product",
    "max": "max",
    "min": "min",
    "and": "band",
    "or": "bor",
    "xor": "bxor",
}


class Communicator:
    """The rank's view of ``torch.distributed`` while a partitioned module is traced.

    Args:
        rank: this process's rank in the default process group (= its partition id).
        world_size: the default group's size (= the module's number of partitions).
    """

    def __init__(self, rank: int, world_size: int):
        self.rank = rank
        self.world_size = world_size
        self._groups: dict[tuple[int, ...], object] = {}

    def group(self, members: list[int]):
        """The process group of ``members`` (already created by :meth:`members`)."""
        import torch.distributed as dist

        key = tuple(sorted(members))
        if key == tuple(range(self.world_size)):
            return dist.group.WORLD
        return self._groups[key]

    def members(self, groups: list[list[int]], what: str) -> list[int]:
        """The group (in listing order) that this rank belongs to, out of the partition
        ``groups`` of partition ids; creates the process groups of all of them the first
        time they are seen (every rank traces the same ops in the same order, so each rank
        creates the same groups in the same order, as ``new_group`` requires).

        Raises:
            DistributedError: this rank is in no group or in several, or an id is out of
                range (names ``what``).
        """
        import torch.distributed as dist

        flat = [p for g in groups for p in g]
        if any(not 0 <= p < self.world_size for p in flat) or len(set(flat)) != len(flat):
            raise DistributedError(
                f"{what}: replica groups {groups} are not disjoint partition ids < {self.world_size}"
            )
        mine = [g for g in groups if self.rank in g]
        if len(mine) != 1:
            raise DistributedError(f"{what}: partition {self.rank} is in none of the replica groups {groups}")
        for g in groups:
            key = tuple(sorted(g))
            if len(key) > 1 and key != tuple(range(self.world_size)) and key not in self._groups:
                self._groups[key] = dist.new_group(list(key))
        return list(mine[0])


def _groups(interp, op) -> list[list[int]]:
    """The op's process groups as lists of partition ids (StableHLO spec, "collective ops":
    with a ``channel_handle`` or ``use_global_device_ids`` the ids are partition ids, the
    one replica's; without, replica ids, so every partition is alone)."""
    comm = interp.comm
    n = 1 if comm is None else comm.world_size
    cross_partition = op.attr("channel_handle") is not None or op.attr("use_global_device_ids", False)
    groups = np.asarray(op.attr("replica_groups", np.zeros((0, 0), np.int64)))
    if not cross_partition:
        if np.any(groups > 0):  # replica ids (-1 pads rows)
            raise DistributedError(
                f"{op.name}: replica groups {groups.tolist()} name replicas other than 0: "
                "the module has one replica"
            )
        return [[p] for p in range(n)]
    if groups.size == 0:
        return [list(range(n))]
    return [[int(p) for p in row if p >= 0] for row in groups.reshape(groups.shape[0], -1)]


def _my_group(interp, op) -> list[int]:
    """This partition's group, in listing order."""
    groups = _groups(interp, op)
    comm = interp.comm
    if comm is None:
        if any(len(g) > 1 for g in groups):
            raise DistributedError(
                f"{op.name}: a collective over partitions {groups}: the module is partitioned; "
                "to_torch of it gives a module run by each rank of torch.distributed"
            )
        comm = Communicator(0, 1)  # one partition: the groups must be [[0]] (no process group is made)
    return comm.members(groups, op.name)


def _reorder(chunks: list[torch.Tensor], members: list[int], to_sorted: bool) -> list[torch.Tensor]:
    """Chunks indexed by position in ``members`` (listing order) → by rank order
    (``to_sorted``), or back."""
    order = sorted(members)
    if order == members:
        return chunks
    if to_sorted:
        return [chunks[members.index(r)] for r in order]
    return [chunks[order.index(r)] for r in members]


def _reduce_kind(op) -> str:
    kind = classify_combiner(op.regions[0])
    if kind not in _REDUCE_OPS:
        raise DistributedError(
            f"{op.name}: reduction body not supported (add, multiply, max, min, and, or, xor are)"
        )
    return kind


def _all_reduce(x: torch.Tensor, kind: str, name: str, group) -> torch.Tensor:
    """``x`` reduced over ``group`` with StableHLO's semantics: ``max``/``min`` propagate
    NaN (gloo's do not, so NaNs are carried by a second reduction), booleans reduce as
    bytes."""
    import torch.distributed._functional_collectives as funcol

    x = x.contiguous()  # collectives take dense tensors (a parameter's shard is a view)
    if name == "uint64" and kind in ("max", "min"):
        raise DistributedError(f"{kind} reduction of uint64 across partitions is not supported")
    if x.dtype == torch.bool:
        bool_kind = {"add": "max", "mul": "min", "and": "min", "or": "max", "max": "max", "min": "min"}.get(
            kind
        )
        if bool_kind is None:  # xor
            return funcol.all_reduce(x.to(torch.uint8), "sum", group).remainder(2).to(torch.bool)
        return funcol.all_reduce(x.to(torch.uint8), bool_kind, group).to(torch.bool)
    out = funcol.all_reduce(x, _REDUCE_OPS[kind], group)
    if kind in ("max", "min") and (x.is_floating_point() or x.is_complex()):
        nan = funcol.all_reduce(torch.isnan(x).to(torch.uint8), "max", group).to(torch.bool)
        out = torch.where(nan, torch.full_like(out, float("nan")), out)
    return out


@register("stablehlo.all_reduce")
def all_reduce(interp, op, *operands):
    """Each operand reduced elementwise over this partition's group (any operand count)."""
    members = _my_group(interp, op)
    kind = _reduce_kind(op)
    if len(members) == 1:
        return list(operands)
    group = interp.comm.group(members)
    return [_all_reduce(x, kind, operand_name(op, i), group) for i, x in enumerate(operands)]


@register("stablehlo.all_gather")
def all_gather(interp, op, *operands):
    """Operands concatenated along ``all_gather_dim`` over the group, in listing order."""
    import torch.distributed._functional_collectives as funcol

    members = _my_group(interp, op)
    dim = op.attr("all_gather_dim")
    if len(members) == 1:
        return list(operands)
    group = interp.comm.group(members)
    out = []
    for x in operands:
        gathered = funcol.all_gather_single(x.contiguous(), 0, group)  # stacked on dim 0, rank order
        chunks = _reorder(list(gathered.chunk(len(members), 0)), members, to_sorted=False)
        out.append(torch.cat(chunks, dim=dim))
    return out


@register("stablehlo.reduce_scatter")
def reduce_scatter(interp, op, x):
    """``x`` reduced over the group and split along ``scatter_dimension``: the member at
    listing position ``k`` keeps chunk ``k``."""
    import torch.distributed._functional_collectives as funcol

    members = _my_group(interp, op)
    kind = _reduce_kind(op)
    dim = op.attr("scatter_dimension")
    if len(members) == 1:
        return x
    chunks = _reorder(list(x.chunk(len(members), dim)), members, to_sorted=True)
    send = torch.stack([c.contiguous() for c in chunks], 0)  # chunk j goes to group rank j
    group = interp.comm.group(members)
    if (
        kind in ("max", "min") or x.dtype == torch.bool
    ):  # NaN-propagating/bool forms: reduce all, keep own chunk
        return _all_reduce(send, kind, operand_name(op), group)[sorted(members).index(interp.comm.rank)]
    return funcol.reduce_scatter_single(send, _REDUCE_OPS[kind], 0, group)[0]


@register("stablehlo.all_to_all")
def all_to_all(interp, op, *operands):
    """Each operand split into ``split_count`` chunks along ``split_dimension``, chunk ``k``
    sent to the member at listing position ``k``; received chunks concatenated along
    ``concat_dimension`` in listing order of their senders."""
    import torch.distributed._functional_collectives as funcol

    members = _my_group(interp, op)  # split_count members (the verifier checks the groups' size)
    split, concat = op.attr("split_dimension"), op.attr("concat_dimension")
    if len(members) == 1:
        return list(operands)
    group = interp.comm.group(members)
    out = []
    for x in operands:
        chunks = _reorder(list(x.chunk(len(members), split)), members, to_sorted=True)
        send = torch.stack([c.contiguous() for c in chunks], 0)
        recv = funcol.all_to_all_single(send, None, None, group)
        received = _reorder(list(recv.unbind(0)), members, to_sorted=False)
        out.append(torch.cat(received, dim=concat))
    return out


@register("stablehlo.collective_permute")
def collective_permute(interp, op, x):
    """``x`` sent from each source partition to its target; a partition no pair targets
    gets zeros (one ``all_to_all_single`` over every rank, empty where nothing is sent)."""
    import torch.distributed._functional_collectives as funcol

    pairs = [(int(s), int(t)) for s, t in np.asarray(op.attr("source_target_pairs")).reshape(-1, 2)]
    comm = interp.comm
    cross_partition = op.attr("channel_handle") is not None
    if comm is None or not cross_partition:
        # one process in the pairs' terms: the only partition, or (without a channel, the ids
        # are replica ids) this partition's one replica, id 0 on every rank
        if any((s, t) != (0, 0) for s, t in pairs):
            raise DistributedError(
                f"{op.name}: pairs {pairs} name other {'partitions' if cross_partition else 'replicas'} "
                f"than 0: {'the module is partitioned' if cross_partition else 'the module has one replica'}"
            )
        return x if pairs else torch.zeros_like(x)
    n, rank = comm.world_size, comm.rank
    if any(not (0 <= s < n and 0 <= t < n) for s, t in pairs):
        raise DistributedError(f"{op.name}: source_target_pairs {pairs} name partitions outside 0..{n - 1}")
    target = [t for s, t in pairs if s == rank]
    source = [s for s, t in pairs if t == rank]
    send = x.unsqueeze(0) if target else x.unsqueeze(0)[:0]
    in_splits = [1 if target and r == target[0] else 0 for r in range(n)]
    out_splits = [1 if source and r == source[0] else 0 for r in range(n)]
    recv = funcol.all_to_all_single(send.contiguous(), out_splits, in_splits, comm.group(list(range(n))))
    return recv[0] if source else torch.zeros_like(x)


@register("stablehlo.partition_id")
def partition_id(interp, op):
    """This rank (``ui32``; 0 outside a distributed module)."""
    rank = 0 if interp.comm is None else interp.comm.rank
    return torch.full((), rank, dtype=storage_dtype(op.result_type.dtype))


@register("sdy.manual_computation")
def manual_computation(interp, op, *operands):
    """The body run on this partition's local shards (the operands are already local:
    :mod:`converter.backends.torch.distributed` hands each rank its shards)."""
    return interp.region_fn(op.regions[0])(*operands)


@register(
    "stablehlo.custom_call@xla.sdy.GlobalToLocalShape",
    "stablehlo.custom_call@xla.sdy.LocalToGlobalShape",
    "stablehlo.custom_call@xla.sdy.FuncResultSharding",
)
def shardy_round_trip(interp, op, *operands):
    """Shardy's round-trip form of a manual computation (as XLA writes it: the HLO of a
    jitted ``shard_map`` in StableHLO): the custom calls around the call of its body change
    the shapes from whole to shards and back, which the ranks' values already are (their
    shards). Of several values, the custom call's one result is a tuple of them."""
    if len(op.results) == 1 and len(operands) != 1:
        return [tuple(operands)]
    return list(operands)
