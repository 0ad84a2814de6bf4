"""The refusals of the torch backend's collectives (backends/torch/ops/collectives.py), each
with its message: checked on the rules directly, with a stand-in communicator, so no process
group is needed (the collectives themselves run across processes in
tests/core/test_distributed.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from converter.backends.torch.ops import collectives as C

from converter import mlir
from converter.errors import DistributedError

_CHANNEL = "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>"
_SUB = """({
    ^bb0(%a: tensor<T>, %b: tensor<T>):
      %s = stablehlo.subtract %a, %b : tensor<T>
      stablehlo.return %s : tensor<T>
    })"""
_MAX = _SUB.replace("subtract", "maximum")

_TEXT = f"""
func.func @main(%x: tensor<4xf32>, %u: tensor<4xui64>) -> tensor<4xf32> {{
  %0 = "stablehlo.collective_permute"(%x) <{{source_target_pairs = dense<[[0, 1], [1, 4]]> : tensor<2x2xi64>,
      {_CHANNEL}}}> : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stablehlo.collective_permute"(%x) <{{source_target_pairs = dense<[[0, 1]]> : tensor<1x2xi64>}}>
      : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "stablehlo.all_reduce"(%x) <{{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, {_CHANNEL}}}>
      {_SUB.replace("T", "f32")} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "stablehlo.all_to_all"(%x) <{{split_dimension = 0 : i64, concat_dimension = 0 : i64,
      split_count = 4 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}}>
      : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "stablehlo.all_reduce"(%u) <{{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, {_CHANNEL}}}>
      {_MAX.replace("T", "ui64")} : (tensor<4xui64>) -> tensor<4xui64>
  return %x : tensor<4xf32>
}}"""


@pytest.fixture(scope="module")
def ops():
    """The ops of ``_TEXT``'s ``@main`` (the module kept alive while they are used)."""
    module = mlir.parse_module(_TEXT)
    yield [mlir.Op(o.operation) for o in mlir.main_function(module).regions[0].blocks[0].operations][:-1]
    del module


def _rank(rank: int, world_size: int):
    """An interpreter stand-in whose communicator is ``rank`` of ``world_size``."""
    return SimpleNamespace(comm=C.Communicator(rank, world_size))


X = torch.zeros(4)


def test_collective_permute_to_a_partition_outside_the_mesh(ops):
    with pytest.raises(
        DistributedError, match=r"source_target_pairs \[\(0, 1\), \(1, 4\)\] .* outside 0\.\.3$"
    ):
        C.collective_permute(_rank(0, 4), ops[0], X)


def test_channel_less_collective_permute_names_replicas(ops):
    """Without a ``channel_handle`` the pairs are replica ids; the module has one replica."""
    with pytest.raises(
        DistributedError, match=r"pairs \[\(0, 1\)\] name other replicas than 0: the module has one replica"
    ):
        C.collective_permute(SimpleNamespace(comm=None), ops[1], X)


def test_collective_over_partitions_outside_a_distributed_module(ops):
    with pytest.raises(DistributedError, match=r"over partitions \[\[0, 1\]\]: the module is partitioned"):
        C.all_reduce(SimpleNamespace(comm=None), ops[2], X)


def test_replica_groups_must_be_disjoint_ids_holding_this_rank():
    comm = C.Communicator(0, 4)
    with pytest.raises(
        DistributedError, match=r"op: replica groups \[\[0, 1\], \[1, 2\]\] are not disjoint .* < 4"
    ):
        comm.members([[0, 1], [1, 2]], "op")
    with pytest.raises(DistributedError, match=r"not disjoint partition ids < 4"):
        comm.members([[0, 4]], "op")
    with pytest.raises(
        DistributedError, match=r"op: partition 0 is in none of the replica groups \[\[1, 2\]\]"
    ):
        comm.members([[1, 2]], "op")


def test_reduction_bodies_and_types_the_collectives_refuse(ops):
    with pytest.raises(DistributedError, match=r"stablehlo.all_reduce: reduction body not supported"):
        C._reduce_kind(ops[2])
    assert C._reduce_kind(ops[4]) == "max"
    with pytest.raises(DistributedError, match="max reduction of uint64 across partitions is not supported"):
        C._all_reduce(torch.zeros(4, dtype=torch.uint64), "max", "uint64", None)


def test_channel_less_all_to_all_names_replicas(ops):
    """Without a ``channel_handle`` the replica groups name replicas; the module has one."""
    with pytest.raises(
        DistributedError,
        match=r"stablehlo.all_to_all: replica groups \[\[0, 1, 2, 3\]\] name replicas other than 0",
    ):
        C.all_to_all(_rank(0, 4), ops[3], X)


def test_reorder_cyclic_listing_to_rank_order_and_back():
    """Chunk ``k`` belongs to the member listed ``k``-th (spec: replica_groups listing order);
    torch's group orders by rank. A cyclic listing ``[1, 2, 0]`` is not its own inverse."""
    chunks = [torch.tensor(v) for v in (10, 11, 12)]
    members = [1, 2, 0]
    by_rank = dict(zip(members, chunks, strict=True))
    to_ranks = C._reorder(chunks, members, to_sorted=True)
    assert [int(c) for c in to_ranks] == [int(by_rank[r]) for r in sorted(members)] == [12, 10, 11]
    back = C._reorder(to_ranks, members, to_sorted=False)
    assert [int(c) for c in back] == [10, 11, 12]


_GROUPS = f"""
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = "stablehlo.all_reduce"(%x) <{{replica_groups = dense<[[2, 0], [1, -1]]> : tensor<2x2xi64>,
      {_CHANNEL}}}> {_MAX.replace("T", "f32")} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stablehlo.all_reduce"(%x) <{{replica_groups = dense<[[0]]> : tensor<1x1xi64>}}>
      {_MAX.replace("T", "f32")} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "stablehlo.all_reduce"(%x) <{{replica_groups = dense<> : tensor<0x0xi64>, {_CHANNEL}}}>
      {_MAX.replace("T", "f32")} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = stablehlo.partition_id : tensor<ui32>
  return %x : tensor<4xf32>
}}"""


def test_replica_groups_read_as_partition_ids():
    """With a channel the rows are partition groups in listing order (``-1`` pads a row;
    partition 0 is kept); without one they are replica ids, so each partition is alone; no
    groups with a channel is one group of every partition. Singleton groups need no process
    group; ``partition_id`` is the rank."""
    module = mlir.parse_module(_GROUPS)
    ops = [mlir.Op(o.operation) for o in mlir.main_function(module).regions[0].blocks[0].operations]
    interp = _rank(2, 3)
    assert C._groups(interp, ops[0]) == [[2, 0], [1]]
    assert C._groups(interp, ops[1]) == [[0], [1], [2]] and C._my_group(interp, ops[1]) == [2]
    assert C._groups(interp, ops[2]) == [[0, 1, 2]]
    assert C._groups(SimpleNamespace(comm=None), ops[1]) == [[0]]
    assert C.all_reduce(SimpleNamespace(comm=None), ops[1], X)[0] is X
    got = C.partition_id(interp, ops[3])
    assert got.item() == 2 and got.dim() == 0
    assert C.partition_id(SimpleNamespace(comm=None), ops[3]).item() == 0
    comm = C.Communicator(2, 3)
    assert comm.members([[0], [2], [1]], "op") == [2] and comm.members([[1, 2, 0]], "op") == [1, 2, 0]
    del module


_ONE_PARTITION = f"""
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = "stablehlo.all_gather"(%x) <{{all_gather_dim = 0 : i64,
      replica_groups = dense<[[0]]> : tensor<1x1xi64>, {_CHANNEL}}}> : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stablehlo.reduce_scatter"(%x) <{{scatter_dimension = 0 : i64,
      replica_groups = dense<[[0]]> : tensor<1x1xi64>, {_CHANNEL}}}>
      {_MAX.replace("T", "f32")} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "stablehlo.all_to_all"(%x) <{{split_dimension = 0 : i64, concat_dimension = 0 : i64,
      split_count = 1 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>, {_CHANNEL}}}>
      : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "stablehlo.collective_permute"(%x) <{{source_target_pairs = dense<[[0, 0]]> : tensor<1x2xi64>,
      {_CHANNEL}}}> : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "stablehlo.collective_permute"(%x) <{{source_target_pairs = dense<> : tensor<0x2xi64>,
      {_CHANNEL}}}> : (tensor<4xf32>) -> tensor<4xf32>
  %5 = "stablehlo.all_gather"(%x) <{{all_gather_dim = 0 : i64,
      replica_groups = dense<[[0], [1]]> : tensor<2x1xi64>, {_CHANNEL}}}> : (tensor<4xf32>) -> tensor<4xf32>
  return %x : tensor<4xf32>
}}"""


def test_one_partition_collectives_are_identities():
    """Outside a distributed module (one partition, group ``[[0]]``) all_gather,
    reduce_scatter and all_to_all return their operand, a collective_permute from partition
    0 to itself too (with a channel: partition ids), and one with no pairs gives zeros (spec:
    a partition no pair targets receives zeros); groups naming partition 1 are refused there."""
    module = mlir.parse_module(_ONE_PARTITION)
    ops = [mlir.Op(o.operation) for o in mlir.main_function(module).regions[0].blocks[0].operations]
    alone = SimpleNamespace(comm=None)
    x = torch.tensor([1.0, -2.0, 3.0, 4.0])
    assert C.all_gather(alone, ops[0], x)[0] is x
    assert C.reduce_scatter(alone, ops[1], x) is x
    assert C.all_to_all(alone, ops[2], x)[0] is x
    assert C.collective_permute(alone, ops[3], x) is x
    zeros = C.collective_permute(alone, ops[4], x)
    assert zeros.shape == x.shape and not zeros.any()
    with pytest.raises(DistributedError, match=r"all_gather: replica groups \[\[0\], \[1\]\] .* ids < 1$"):
        C.all_gather(alone, ops[5], x)
    del module
