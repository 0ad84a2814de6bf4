"""Partitioned modules on torch.distributed, and a converted model on multi-process JAX.

The multi-process tests start their processes on localhost only (``tests/distributed_worker.py``):
torch ranks meet through a file store in the test's temporary directory and connect over the
loopback interface, JAX processes through a coordinator on ``127.0.0.1`` at a port picked at
run time. Each run has a hard timeout: at the first failure or when time runs out every
child still running is killed. The single-process tests check the
partition plan and its errors on hand-written StableHLO.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import converter
from converter import sdy
from tests import registry_coverage

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "distributed_worker.py"
TIMEOUT = 420  # seconds for a whole multi-process run (2 loaded cores: imports and compiles dominate)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(mode: str, n: int, tmp_path: Path) -> list[str]:
    """Run ``n`` ranks of ``mode`` (forks of one worker process, which imports torch and JAX
    once) and return their outputs; fails the test (after killing every rank still running)
    when one exits non-zero or the run exceeds :data:`TIMEOUT`."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(
        PYTHONPATH=str(ROOT), GLOO_SOCKET_IFNAME="lo", TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu",
        OMP_NUM_THREADS="1",
    )  # fmt: skip
    logs = [(tmp_path / f"{mode}{n}-{r}.log", tmp_path / f"{mode}{n}-{r}.hits.json") for r in range(n)]
    cmd = [sys.executable, str(WORKER), mode, str(n), "all", str(port), str(tmp_path)]
    with open(tmp_path / f"{mode}{n}.log", "w") as out:  # the forking process's own output
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True
        )
    failed = None
    try:
        proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        failed = f"timed out after {TIMEOUT} s"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the ranks too (their own process group)
        except ProcessLookupError:
            pass
        proc.wait()
    texts = [log.read_text() if log.exists() else "" for log, _ in logs]
    for _, hits in logs:
        if hits.exists():
            registry_coverage.HITS.update(
                (name, registry_coverage._hashable(key)) for name, key in json.load(open(hits))
            )
    if failed or proc.returncode != 0:
        head = (tmp_path / f"{mode}{n}.log").read_text()[-3000:]
        detail = "\n".join(f"--- rank {r}:\n{texts[r][-3000:]}" for r in range(n))
        pytest.fail(f"{mode} on {n} processes: {failed or f'status {proc.returncode}'}\n{head}\n{detail}")
    return texts


def test_torch_distributed_two_ranks(tmp_path):
    """A shard_map program on 2 devices (in Shardy's round-trip form, from XLA's HLO) run by
    2 gloo ranks: each rank's output shards equal JAX's (pmax propagates NaN, as the spec
    says)."""
    outs = _spawn("torch", 2, tmp_path)
    assert all("ok" in t for t in outs)


def test_torch_distributed_four_ranks(tmp_path):
    """A 2×2-mesh shard_map program (from_jax of an Exported, a parameter split over one
    axis) run by 4 gloo ranks: collectives over the mesh axes' subgroups match JAX."""
    outs = _spawn("torch", 4, tmp_path)
    assert all("ok" in t for t in outs)


def test_jax_multi_process_data_parallel(tmp_path):
    """A torch MLP converted to JAX, run data-parallel over 2 processes
    (``jax.distributed.initialize``, gloo CPU collectives): outputs equal eager torch and
    the one-process function, gradients equal torch autograd."""
    outs = _spawn("jax", 2, tmp_path)
    assert all("ok" in t for t in outs)


# --------------------------------------------------------------------------- single process

_MESH = 'sdy.mesh @mesh = <["x"=2]>'


def _module(body: str, *, args: str = "%arg0: tensor<8x4xf32>", results: str = "tensor<8x4xf32>") -> str:
    return (
        "module @m attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {\n"
        f"  {_MESH}\n"
        f"  func.func public @main({args}) -> ({results}) {{\n{body}\n  }}\n}}\n"
    )


_MANUAL = """
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%a: tensor<4x4xf32>) {
      %1 = "stablehlo.all_reduce"(%a) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> ({
      ^bb0(%x: tensor<f32>, %y: tensor<f32>):
        %s = stablehlo.add %x, %y : tensor<f32>
        stablehlo.return %s : tensor<f32>
      }) : (tensor<4x4xf32>) -> tensor<4x4xf32>
      sdy.return %1 : tensor<4x4xf32>
    } : (tensor<8x4xf32>) -> tensor<8x4xf32>"""  # noqa: E501


def test_plan_and_local_shapes():
    """The plan reads each argument's and result's split; the module takes rank shards."""
    m = converter.from_stablehlo(_module(_MANUAL + "\n    return %0 : tensor<8x4xf32>"))
    tm = m.to_torch()
    assert tm.num_partitions == 2
    assert tm.plan.args[0].dims == (("x",), ()) and tm.plan.results[0].dims == (("x",), ())
    assert tm._local.signature.inputs[0].shape == (4, 4)
    whole = np.arange(32, dtype=np.float32).reshape(8, 4)
    (shard,), _ = tm.shard_inputs(whole, rank=1)
    np.testing.assert_array_equal(shard, whole[4:])


def test_saved_module_keeps_its_plan(tmp_path):
    """A saved and loaded Module has the same plan (a saved partitioned module keeps its
    Shardy ops, ``sdy.manual_computation`` included)."""
    m = converter.from_stablehlo(_module(_MANUAL + "\n    return %0 : tensor<8x4xf32>"))
    m.save(tmp_path / "m.shlo")
    loaded = converter.load(tmp_path / "m.shlo")
    assert "sdy.manual_computation" in loaded.text()
    assert loaded.to_torch().plan == m.to_torch().plan


def test_shardings_without_shard_map_run_whole():
    """A module partitioned by XLA alone (shardings, no manual computation) means the same on
    whole arrays: it converts to an ordinary one-process module."""
    body = "    %0 = stablehlo.multiply %arg0, %arg0 : tensor<8x4xf32>\n    return %0 : tensor<8x4xf32>"
    args = '%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}'
    tm = converter.from_stablehlo(_module(body, args=args)).to_torch()
    assert not hasattr(tm, "plan")
    x = torch.arange(32, dtype=torch.float32).reshape(8, 4)
    torch.testing.assert_close(tm(x), x * x)


def test_call_without_process_group():
    """Calling outside torch.distributed names the world size to start."""
    tm = converter.from_stablehlo(_module(_MANUAL + "\n    return %0 : tensor<8x4xf32>")).to_torch()
    with pytest.raises(converter.DistributedError, match=r"init_process_group\(world_size=2"):
        tm(torch.zeros(4, 4))


def test_op_outside_manual_computation_is_refused():
    body = _MANUAL + "\n    %2 = stablehlo.multiply %0, %0 : tensor<8x4xf32>\n    return %2 : tensor<8x4xf32>"
    m = converter.from_stablehlo(_module(body))
    with pytest.raises(converter.DistributedError, match="stablehlo.multiply .*outside shard_map"):
        m.to_torch()


def test_sharding_text():
    """Shardy's attribute text, and partition → mesh coordinates (row-major, device_ids)."""
    s = sdy.parse_sharding('#sdy.sharding<@mesh, [{"x", "y"}, {}, {?}], replicated={"z"}>')
    assert s.mesh == "mesh" and s.dims == (("x", "y"), (), ())
    mesh = sdy.parse_mesh('#sdy.mesh<["x"=2, "y"=2]>')
    assert mesh.coordinates(2) == {"x": 1, "y": 0}
    assert s.shard_index(mesh, 1) == (1, 0, 0) and s.counts(mesh) == (4, 1, 1)
    permuted = sdy.parse_mesh('#sdy.mesh<["x"=2, "y"=2], device_ids=[3, 2, 1, 0]>')
    assert permuted.coordinates(3) == {"x": 0, "y": 0}
    with pytest.raises(converter.ShardingError, match="sub-axes"):
        sdy.parse_sharding('<@mesh, [{"x":(1)2}]>')


# ------------------------------------------- collectives in one process (threaded ranks)

_CH = "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>"
_SWAPPED = "replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>, use_global_device_ids"  # not rank order
_ALONE = "replica_groups = dense<[[0], [1]]> : tensor<2x1xi64>, use_global_device_ids"
_ONE = "replica_groups = dense<[[0]]> : tensor<1x1xi64>, use_global_device_ids"
_RS = "scatter_dimension = 1 : i64"
_A2A = "concat_dimension = 0 : i64, split_dimension = 1 : i64, split_count"


def _combiner(op: str, t: str) -> str:
    return (
        f"({{\n      ^bb0(%x: tensor<{t}>, %y: tensor<{t}>):\n"
        f"        %s = stablehlo.{op} %x, %y : tensor<{t}>\n"
        f"        stablehlo.return %s : tensor<{t}>\n      }})"
    )


def _op(
    name: str, attrs: str, out: str, *, x: str = "%a0", t: str = "2x4xf32", body: str = ""
) -> tuple[str, str]:
    """``(text, result type)`` of ``stablehlo.<name>`` on ``x: tensor<t>`` (``body``: the
    reduction's combiner, ``add`` or ``xor`` ..., on the element type)."""
    region = _combiner(body, t.rsplit("x", 1)[1]) + " " if body else ""
    return f'"stablehlo.{name}"({x}) <{{{attrs}}}> {region}: (tensor<{t}>) -> tensor<{out}>', out


def _spmd(ops: list[tuple[str, str]], ins: list[str] = ("2x4xf32",)) -> str:
    """A 2-partition module whose ``@main`` is one manual computation over mesh x=2: each
    input split on dim 0 (local types ``ins``), ``ops`` (text, local result type) its body
    (inputs ``%a0``, ``%a1`` ...), each result split on dim 0."""

    def whole(t: str) -> str:
        d0, rest = t.split("x", 1)
        return f"tensor<{2 * int(d0)}x{rest}>"

    def types(ts, f=lambda t: f"tensor<{t}>"):
        return ", ".join(f(t) for t in ts)

    outs = [t for _, t in ops]
    split = '<@mesh, [{"x"}, {}]>'
    operands = ", ".join(f"%arg{i}" for i in range(len(ins)))
    return "\n".join(
        [
            "module @m attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {",
            f"  {_MESH}",
            f"  func.func public @main({', '.join(f'%arg{i}: {whole(t)}' for i, t in enumerate(ins))})"
            f" -> ({types(outs, whole)}) {{",
            f"    %0:{len(outs)} = sdy.manual_computation({operands})"
            f" in_shardings=[{', '.join([split] * len(ins))}]"
            f' out_shardings=[{", ".join([split] * len(outs))}] manual_axes={{"x"}}'
            f" ({', '.join(f'%a{i}: tensor<{t}>' for i, t in enumerate(ins))}) {{",
            *(f"      %r{i} = {text}" for i, (text, _) in enumerate(ops)),
            f"      sdy.return {', '.join(f'%r{i}' for i in range(len(outs)))} : {types(outs)}",
            f"    }} : ({types(ins, whole)}) -> ({types(outs, whole)})",
            f"    return {', '.join(f'%0#{i}' for i in range(len(outs)))} : {types(outs, whole)}",
            "  }",
            "}",
        ]
    )


def _threaded_ranks(tm, shards: list[tuple]) -> list:
    """Call ``tm`` on each rank of an in-process world of ``len(shards)`` ranks (torch's
    threaded test process group: real collectives between threads), rank ``r`` on
    ``shards[r]``; each rank's result, or the exception it raised."""
    import threading

    import torch.distributed as dist
    from torch.testing._internal.distributed import multi_threaded_pg

    n = len(shards)
    out: list = [TimeoutError("rank did not finish")] * n
    store = dist.HashStore()

    def rank(r):
        dist.init_process_group("threaded", rank=r, world_size=n, store=store)
        try:
            out[r] = tm(*shards[r])
        except BaseException as e:  # noqa: BLE001 - returned to the test
            out[r] = e
            multi_threaded_pg.ProcessLocalGroup.exception_handle(e)  # wakes a rank waiting for this one
        finally:
            dist.destroy_process_group()

    torch._C._distributed_c10d._set_thread_isolation_mode(True)
    multi_threaded_pg._install_threaded_pg()
    try:
        threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        multi_threaded_pg.ProcessLocalGroup.reset()
        multi_threaded_pg._uninstall_threaded_pg()
        torch._C._distributed_c10d._set_thread_isolation_mode(False)
    return out


_B = {"x": "%a1", "t": "2x4xi1"}
_COLLECTIVE_OPS = [
    _op("all_reduce", f"{_CH}, {_SWAPPED}", "2x4xi1", body="xor", **_B),
    _op("all_reduce", f"{_CH}, {_SWAPPED}", "2x4xi1", body="and", **_B),
    _op("all_gather", f"all_gather_dim = 1 : i64, {_CH}, {_SWAPPED}", "2x8xf32"),
    _op("reduce_scatter", f"{_CH}, {_SWAPPED}, {_RS}", "2x2xf32", body="maximum"),
    _op("reduce_scatter", f"{_CH}, {_SWAPPED}, {_RS}", "2x2xi1", body="or", **_B),
    _op("reduce_scatter", f"{_CH}, {_SWAPPED}, {_RS}", "2x2xf32", body="add"),
    _op("all_to_all", f"{_CH}, {_SWAPPED}, {_A2A} = 2 : i64", "4x2xf32"),
    _op("collective_permute", f"{_CH}, source_target_pairs = dense<[[0, 1]]> : tensor<1x2xi64>", "2x4xf32"),
    # without a channel: replica ids, each partition alone (its one replica, id 0)
    _op("all_reduce", _ONE.split(", use")[0], "2x4xf32", body="add"),
    _op("collective_permute", "source_target_pairs = dense<[[0, 0]]> : tensor<1x2xi64>", "2x4xf32"),
    # groups of one partition each: identities
    _op("all_gather", f"all_gather_dim = 1 : i64, {_CH}, {_ALONE}", "2x4xf32"),
    _op("reduce_scatter", f"{_CH}, {_ALONE}, {_RS}", "2x4xf32", body="add"),
    _op("all_to_all", f"{_CH}, {_ALONE}, {_A2A} = 1 : i64", "2x4xf32"),
    _op("all_reduce", f"{_CH}, {_ALONE}", "2x4xf32", body="add"),
    _op("all_reduce", f"{_CH}, {_SWAPPED}", "2x4xi1", body="add", **_B),  # on i1, add is or
    _op("all_reduce", f"{_CH}, {_SWAPPED}", "2x4xi1", body="multiply", **_B),  # and multiply is and
]


def test_collectives_on_threaded_ranks():
    """Two ranks in one process (threads, torch's threaded process group) against the
    StableHLO spec's semantics: replica groups listed as ``[[1, 0]]`` (listing order is not
    rank order: all_gather concatenates, reduce_scatter and all_to_all hand chunk ``k`` to
    the member listed ``k``-th), boolean reductions (xor, and, or), NaN-propagating max,
    a permute whose other rank gets zeros, and one-partition groups and channel-less ops
    (replica ids: each partition alone) as identities."""
    tm = converter.from_stablehlo(_spmd(_COLLECTIVE_OPS, ["2x4xf32", "2x4xi1"])).to_torch()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    a[3, 1] = np.nan  # rank 1's shard: the max of its column is NaN on both ranks
    b = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 0], [0, 1, 1, 1]], bool)  # each pair, both halves
    outs = _threaded_ranks(
        tm, [tuple(torch.from_numpy(v[2 * r : 2 * r + 2]) for v in (a, b)) for r in range(2)]
    )
    a0, a1, b0, b1 = a[:2], a[2:], b[:2], b[2:]
    big = np.where(np.isnan(a0) | np.isnan(a1), np.nan, np.maximum(a0, a1))
    for r, (mine, k) in enumerate([(a0, slice(2, 4)), (a1, slice(0, 2))]):  # rank 0 is listed second
        assert not isinstance(outs[r], BaseException), outs[r]
        got = [o.numpy() for o in outs[r]]
        np.testing.assert_array_equal(got[0], b0 ^ b1)
        np.testing.assert_array_equal(got[1], b0 & b1)
        np.testing.assert_array_equal(got[2], np.concatenate([a1, a0], 1))
        np.testing.assert_array_equal(got[3], big[:, k])
        np.testing.assert_array_equal(got[4], (b0 | b1)[:, k])
        np.testing.assert_allclose(got[5], (a0 + a1)[:, k], rtol=1e-6)
        np.testing.assert_array_equal(got[6], np.concatenate([a1[:, k], a0[:, k]], 0))
        np.testing.assert_array_equal(got[7], a0 if r == 1 else np.zeros_like(a0))
        for i in range(8, 14):
            np.testing.assert_array_equal(got[i], mine)
        np.testing.assert_array_equal(got[14], b0 | b1)
        np.testing.assert_array_equal(got[15], b0 & b1)


@pytest.mark.parametrize(
    "op, words",
    [
        (
            _op("all_reduce", f"{_CH}, {_SWAPPED}", "2x4xui64", t="2x4xui64", body="maximum"),
            "DistributedError: max reduction of uint64 across partitions is not supported",
        ),
        (
            _op("all_reduce", _SWAPPED.split(", use")[0], "2x4xf32", body="add"),  # no channel: replica ids
            "replica groups [[1, 0]] name replicas other than 0: the module has one replica",
        ),
        (
            _op(
                "collective_permute",
                f"{_CH}, source_target_pairs = dense<[[0, 2]]> : tensor<1x2xi64>",
                "2x4xf32",
            ),
            "source_target_pairs [(0, 2)] name partitions outside 0..1",
        ),
        (
            _op("collective_permute", "source_target_pairs = dense<[[0, 1]]> : tensor<1x2xi64>", "2x4xf32"),
            "pairs [(0, 1)] name other replicas than 0: the module has one replica",
        ),
    ],
    ids=["uint64_max", "replica_groups", "permute_partitions", "permute_replicas"],
)
def test_collective_refused_on_each_rank(op, words):
    """What a rank cannot compute as the spec says is refused while its graph is traced,
    before any collective runs, on every rank alike."""
    tm = converter.from_stablehlo(_spmd([op], [op[1]])).to_torch()
    dtype = torch.uint64 if "ui64" in op[1] else torch.float32
    outs = _threaded_ranks(tm, [(torch.zeros(2, 4, dtype=dtype),)] * 2)
    for e in outs:
        assert isinstance(e, converter.ConversionError), e
        assert words in str(e)


def test_communicator_refuses_groups():
    """Replica groups that are not disjoint partition ids, or leave this rank out (checked
    before any process group is made)."""
    from converter.backends.torch.ops.collectives import Communicator

    for bad in ([[0, 0]], [[0, 2]], [[0], [0, 1]], [[-1]]):
        with pytest.raises(
            converter.DistributedError, match=r"^op: replica groups .* are not disjoint partition ids < 2$"
        ):
            Communicator(0, 2).members(bad, "op")
    with pytest.raises(
        converter.DistributedError, match=r"^op: partition 1 is in none of the replica groups \[\[0\]\]$"
    ):
        Communicator(1, 2).members([[0]], "op")
    assert Communicator(1, 2).members([[0], [1]], "op") == [1]
    assert Communicator(0, 2).members([[1, 0]], "op") == [1, 0]  # listing order kept


def _one(op: tuple[str, str], *, partitions: int = 1, replicas: int = 1) -> str:
    """A module of one op on ``%arg0: tensor<2x4xf32>`` outside any manual computation."""
    text, out = op
    return (
        f"module @m attributes {{mhlo.num_partitions = {partitions} : i32, "
        f"mhlo.num_replicas = {replicas} : i32}} {{\n"
        f"  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<{out}> {{\n"
        f"    %0 = {text.replace('%a0', '%arg0')}\n    return %0 : tensor<{out}>\n  }}\n}}\n"
    )


@pytest.mark.parametrize(
    "op",
    [
        _op("all_reduce", f"{_CH}, {_ONE}", "2x4xf32", body="add"),
        _op("all_gather", f"all_gather_dim = 1 : i64, {_CH}, {_ONE}", "2x4xf32"),
        _op("reduce_scatter", f"{_CH}, {_ONE}, {_RS}", "2x4xf32", body="add"),
        _op("all_to_all", f"{_CH}, {_ONE}, {_A2A} = 1 : i64", "2x4xf32"),
        _op(
            "collective_permute", f"{_CH}, source_target_pairs = dense<[[0, 0]]> : tensor<1x2xi64>", "2x4xf32"
        ),
        ("stablehlo.partition_id : tensor<ui32>", "ui32"),
    ],
    ids=["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "permute", "partition_id"],
)
def test_one_partition_collectives_match_jax(op):
    """A one-partition module's collectives (no process group): what JAX computes."""
    m = converter.from_stablehlo(_one(op))
    x = np.arange(8, dtype=np.float32).reshape(2, 4) + 1
    got, want = np.asarray(m.to_torch()(torch.from_numpy(x))), np.asarray(m.to_jax()(x))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_one_partition_collectives_by_the_spec():
    """An all_reduce of empty replica groups (all partitions: the one) is the operand; a
    collective_permute no pair targets gives zeros (StableHLO spec)."""
    everyone = _op("all_reduce", f"{_CH}, replica_groups = dense<> : tensor<0x0xi64>", "2x4xf32", body="add")
    nobody = _op("collective_permute", f"{_CH}, source_target_pairs = dense<> : tensor<0x2xi64>", "2x4xf32")
    x = torch.arange(8, dtype=torch.float32).reshape(2, 4) + 1
    np.testing.assert_array_equal(converter.from_stablehlo(_one(everyone)).to_torch()(x).numpy(), x.numpy())
    np.testing.assert_array_equal(
        converter.from_stablehlo(_one(nobody)).to_torch()(x).numpy(), np.zeros((2, 4))
    )


@pytest.mark.parametrize(
    "op, kwargs, words",
    [
        (
            _op("all_reduce", f"{_CH}, {_SWAPPED.replace('1, 0', '0, 1')}", "2x4xf32", body="add"),
            {"partitions": 2},
            "stablehlo.all_reduce: a collective over partitions [[0, 1]]: the module is partitioned",
        ),
        (
            _op(
                "collective_permute",
                f"{_CH}, source_target_pairs = dense<[[0, 1]]> : tensor<1x2xi64>",
                "2x4xf32",
            ),
            {"partitions": 2},
            "pairs [(0, 1)] name other partitions than 0: the module is partitioned",
        ),
        (
            _op("all_reduce", f"{_CH}, {_ALONE}", "2x4xf32", body="add"),
            {},
            "stablehlo.all_reduce: replica groups [[0], [1]] are not disjoint partition ids < 1",
        ),
        (
            _op("all_reduce", f"{_CH}, {_ONE}", "2x4xf32", body="subtract"),
            {},
            "stablehlo.all_reduce: reduction body not supported (add, multiply, max, min, and, or, xor are)",
        ),
        (
            _op("all_reduce", "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>", "2x4xf32", body="add"),
            {"replicas": 2},
            "the module has 2 replicas: only one is supported",
        ),
    ],
    ids=["partitioned", "permute_partitioned", "group_out_of_range", "body", "replicas"],
)
def test_one_process_collective_refused(op, kwargs, words):
    """Collectives a one-process module cannot run as the spec says are refused by to_torch
    (a module of two replicas even before its collectives: each replica's data is elsewhere)."""
    with pytest.raises(converter.ConversionError) as info:
        converter.from_stablehlo(_one(op, **kwargs)).to_torch()
    assert words in str(info.value)


# ------------------------------------------------------------------ the partition plan

_RT_MESH = 'mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh = #sdy.mesh<[\\22x\\22=2]>}"}'
_RT_SPLIT = '"#sdy.sharding_per_value<[<@mesh, [{\\22x\\22}, {}]>]>"'
_RT_AXES = 'xla.sdy.manual_axes = "#sdy<manual_axes{\\22x\\22}>"'


def _round_trip(call: str = "%0", to_global: str = "%1") -> str:
    """Shardy's round-trip form as XLA writes it (one value: no tuples), a psum in the body;
    ``call``/``to_global``: the body call's and LocalToGlobalShape's operands."""
    return f"""
module @m attributes {{{_RT_MESH}}} {{
  func.func private @xla.sdy.manual_computation_body.2(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {{
    %0 = "stablehlo.all_reduce"(%arg0) <{{{_CH}, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}}> {_combiner("add", "f32")} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }}
  func.func @main(%arg0: tensor<4x2xf32>, %arg1: tensor<2x2xf32>) -> tensor<4x2xf32> {{
    %0 = stablehlo.custom_call @xla.sdy.GlobalToLocalShape(%arg0) {{has_side_effect = true, mhlo.frontend_attributes = {{xla.sdy.in_shardings = {_RT_SPLIT}, {_RT_AXES}}}}} : (tensor<4x2xf32>) -> tensor<2x2xf32>
    %1 = call @xla.sdy.manual_computation_body.2({call}) : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %2 = stablehlo.custom_call @xla.sdy.LocalToGlobalShape({to_global}) {{has_side_effect = true, mhlo.frontend_attributes = {{{_RT_AXES}, xla.sdy.out_shardings = {_RT_SPLIT}}}}} : (tensor<2x2xf32>) -> tensor<4x2xf32>
    return %2 : tensor<4x2xf32>
  }}
}}
"""  # noqa: E501


def test_round_trip_form_of_one_value():
    """XLA's form of a one-value shard_map (no tuples): the plan reads the split of the
    argument from GlobalToLocalShape and of the result from LocalToGlobalShape, the mesh's
    size is the number of partitions (no ``mhlo.num_partitions``), the argument the
    computation does not read is whole; each rank gets the psum of the shards."""
    tm = converter.from_stablehlo(_round_trip()).to_torch()
    assert tm.num_partitions == 2
    assert [s.dims for s in tm.plan.args] == [(("x",), ()), ((), ())]
    assert [s.dims for s in tm.plan.results] == [(("x",), ())]
    a = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    outs = _threaded_ranks(tm, [(a[2 * r : 2 * r + 2], torch.zeros(2, 2)) for r in range(2)])
    for out in outs:
        torch.testing.assert_close(out, a[:2] + a[2:], rtol=0, atol=0)


_RT_TWO = '"#sdy.sharding_per_value<[<@mesh, [{\\22x\\22}, {}]>, <@mesh, [{\\22x\\22}, {}]>]>"'
_RT_OUT = '"#sdy.sharding_per_value<[<@mesh, [{\\22x\\22}, {}]>, <@mesh, [{}, {}]>]>"'
_T2 = "tuple<tensor<2x2xf32>, tensor<2x2xf32>>"
_TWO_VALUES = f"""
module @m attributes {{{_RT_MESH}}} {{
  func.func private @xla.sdy.manual_computation_body.2(%arg0: tensor<2x2xf32>, %arg1: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {{
    %0 = stablehlo.add %arg0, %arg0 : tensor<2x2xf32>
    %1 = "stablehlo.all_reduce"(%arg1) <{{{_CH}, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}}> {_combiner("add", "f32")} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    return %0, %1 : tensor<2x2xf32>, tensor<2x2xf32>
  }}
  func.func @main(%arg0: tensor<4x2xf32>, %arg1: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<2x2xf32>) {{
    %0 = stablehlo.custom_call @xla.sdy.GlobalToLocalShape(%arg0, %arg1) {{has_side_effect = true, mhlo.frontend_attributes = {{xla.sdy.in_shardings = {_RT_TWO}, {_RT_AXES}}}}} : (tensor<4x2xf32>, tensor<4x2xf32>) -> {_T2}
    %1 = stablehlo.get_tuple_element %0[0] : ({_T2}) -> tensor<2x2xf32>
    %2 = stablehlo.get_tuple_element %0[1] : ({_T2}) -> tensor<2x2xf32>
    %3:2 = call @xla.sdy.manual_computation_body.2(%1, %2) : (tensor<2x2xf32>, tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
    %4 = stablehlo.custom_call @xla.sdy.LocalToGlobalShape(%3#0, %3#1) {{has_side_effect = true, mhlo.frontend_attributes = {{{_RT_AXES}, xla.sdy.out_shardings = {_RT_OUT}}}}} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tuple<tensor<4x2xf32>, tensor<2x2xf32>>
    %5 = stablehlo.get_tuple_element %4[0] : (tuple<tensor<4x2xf32>, tensor<2x2xf32>>) -> tensor<4x2xf32>
    %6 = stablehlo.get_tuple_element %4[1] : (tuple<tensor<4x2xf32>, tensor<2x2xf32>>) -> tensor<2x2xf32>
    return %5, %6 : tensor<4x2xf32>, tensor<2x2xf32>
  }}
}}
"""  # noqa: E501


def test_round_trip_form_of_two_values_through_tuples():
    """XLA's form of a two-value shard_map (``jax.extend.mlir.hlo_to_stablehlo`` of a jitted
    ``shard_map(lambda a, b: (a + a, psum(b)), out_specs=(P("x"), P()))``): the custom calls
    take and give tuples, each result's split is read through its ``get_tuple_element``."""
    tm = converter.from_stablehlo(_TWO_VALUES).to_torch()
    assert tm.num_partitions == 2
    assert [s.dims for s in tm.plan.args] == [(("x",), ()), (("x",), ())]
    assert [s.dims for s in tm.plan.results] == [(("x",), ()), ((), ())]
    a = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    b = a * 10
    outs = _threaded_ranks(tm, [(a[2 * r : 2 * r + 2], b[2 * r : 2 * r + 2]) for r in range(2)])
    for r, (doubled, summed) in enumerate(outs):
        torch.testing.assert_close(doubled, 2 * a[2 * r : 2 * r + 2], rtol=0, atol=0)
        torch.testing.assert_close(summed, b[:2] + b[2:], rtol=0, atol=0)


def test_unread_arguments_keep_their_declared_split():
    """Arguments no manual computation reads: split as their ``sdy.sharding`` attribute
    says, else whole; the rank's shards cut accordingly. Without them
    (eliminate_dead_arguments) each rank still takes every input and gets the psum."""
    from converter.passes import eliminate_dead_arguments

    args = (
        '%arg0: tensor<8x4xf32>, %arg1: tensor<6x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, '
        "%arg2: tensor<3xf32>"
    )
    m = converter.from_stablehlo(_module(_MANUAL + "\n    return %0 : tensor<8x4xf32>", args=args))
    tm = m.to_torch()
    assert [s.dims for s in tm.plan.args] == [(("x",), ()), (("x",), ()), ((),)]
    whole = [
        np.arange(32, dtype=np.float32).reshape(8, 4),
        np.arange(12, dtype=np.float32).reshape(6, 2),
        np.ones(3, np.float32),
    ]
    shards, _ = tm.shard_inputs(*whole, rank=1)
    for got, want in zip(shards, [whole[0][4:], whole[1][3:], whole[2]], strict=True):
        np.testing.assert_array_equal(got, want)
    pruned = eliminate_dead_arguments(m)
    assert pruned.signature.kept_var_idx == (0,)
    tp = pruned.to_torch()
    outs = _threaded_ranks(
        tp, [tuple(torch.from_numpy(s) for s in tp.shard_inputs(*whole, rank=r)[0]) for r in range(2)]
    )
    for out in outs:
        np.testing.assert_array_equal(out.numpy(), whole[0][:4] + whole[0][4:])


_SPLIT = '[<@mesh, [{"x"}, {}]>]'


def _manual(
    operand: str, shardings: str = _SPLIT, axes: str = '{"x"}', mesh: str = "@mesh", local: str = "4x4"
):
    shardings = shardings.replace("@mesh", mesh)
    return (
        f"sdy.manual_computation({operand}) in_shardings={shardings} out_shardings={shardings} "
        f"manual_axes={axes} (%a: tensor<{local}xf32>) {{\n      sdy.return %a : tensor<{local}xf32>\n"
        "    } : (tensor<8x4xf32>) -> tensor<8x4xf32>"
    )


def _two(first: str, second: str, mesh: str = _MESH, partitions: int = 2, result: str = "%1") -> str:
    """Two manual computations on ``%arg0``; ``@main`` returns the first and ``result``."""
    t = "tensor<8x4xf32>"
    return (
        f"module @m attributes {{mhlo.num_partitions = {partitions} : i32, mhlo.num_replicas = 1 : i32}} {{\n"
        f"  {mesh}\n  func.func public @main(%arg0: {t}, %arg1: {t}) -> ({t}, {t}) {{\n"
        f"    %0 = {first}\n    %1 = {second}\n    return %0, {result} : {t}, {t}\n  }}\n}}\n"
    )


_MESHES = _MESH + '\n  sdy.mesh @other = <["x"=2]>'


@pytest.mark.parametrize(
    "text, words",
    [
        (
            _two(_manual("%arg0"), _manual("%arg0", mesh="@other"), _MESHES),
            "shardings over two meshes (@mesh, @other)",
        ),
        (
            _round_trip().replace("[<@mesh, [{", "[<@nowhere, [{", 1),
            "sharding over an undefined mesh @nowhere",
        ),
        (
            _two(_manual("%arg0"), _manual("%arg0", '[<@mesh, [{}, {"x"}]>]', local="8x2")),
            'a value split as <@mesh, [{"x"}, {}]> is read as <@mesh, [{}, {"x"}]>: resharding',
        ),
        (
            _two(_manual("%arg0"), _manual("%arg0"), 'sdy.mesh @mesh = <["x"=2, "y"=2]>'),
            "mesh axes ['y'] stay automatic",
        ),
        (
            _two(_manual("%arg0"), _manual("%arg0"), partitions=4),
            "the module has 4 partitions but its mesh has 2 devices",
        ),
        (
            _two(_manual("%arg0"), _manual("%arg0"), result="%arg1"),
            "result 1 of @main is not computed by the manual computation",
        ),
        (_round_trip(call="%arg1"), "the manual computation reads values not split for it"),
        (_round_trip(to_global="%arg1"), "reads values not computed by the manual computation"),
    ],
    ids=[
        "two_meshes",
        "undefined_mesh",
        "reshard",
        "automatic_axes",
        "partitions",
        "result",
        "body_reads",
        "global_reads",
    ],
)
def test_partition_plan_refusals(text, words):
    with pytest.raises(converter.DistributedError) as info:
        converter.from_stablehlo(text).to_torch()
    assert words in str(info.value)


def test_partitioned_module_refuses_state_updates_and_random_ops():
    from converter.backends.torch.distributed import partition_plan, to_torch_distributed

    from converter.signature import RNG_KEY, Mutation

    m = converter.from_stablehlo(_module(_MANUAL + "\n    return %0 : tensor<8x4xf32>"))
    plan = partition_plan(m)
    for sig, words in [
        (
            m.signature.replace(mutations=(Mutation("input", "args[0]"),)),
            "updates state in place is not supported",
        ),
        (m.signature.replace(rng=RNG_KEY), "with random ops (signature.rng) is not supported"),
    ]:
        with pytest.raises(converter.DistributedError, match=words.replace("(", r"\(").replace(")", r"\)")):
            to_torch_distributed(converter.Module(m.mlir, sig, m.params), plan, None)


_SPLIT_AND_WHOLE = """
    %0 = sdy.manual_computation(%arg0, %arg1) in_shardings=[<@mesh, [{"x"}, {}]>, <@mesh, [{}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) {
      %1 = stablehlo.add %a, %b : tensor<4x4xf32>
      sdy.return %1 : tensor<4x4xf32>
    } : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>"""  # noqa: E501


def test_a_rank_given_the_wrong_shard_is_told_that_inputs_split():
    """A rank handed a whole array where it takes a shard (or a shard of the wrong size) is
    refused naming the input's own split: the second input's is replicated, the first's on x."""
    text = _module(_SPLIT_AND_WHOLE, args="%arg0: tensor<8x4xf32>, %arg1: tensor<4x4xf32>")
    tm = converter.from_stablehlo(text).to_torch()
    shards = [(torch.zeros(4, 4), torch.zeros(2, 4))] * 2
    for out in _threaded_ranks(tm, shards):
        assert isinstance(out, converter.SignatureMismatchError), out
        assert "takes its shard of the whole [4, 4], split as <@mesh, [{}, {}]>)" in str(out)
    outs = _threaded_ranks(tm, [(torch.zeros(8, 4), torch.zeros(4, 4))] * 2)
    assert all('takes its shard of the whole [8, 4], split as <@mesh, [{"x"}, {}]>)' in str(o) for o in outs)


def test_call_in_a_world_of_another_size():
    tm = converter.from_stablehlo(_module(_MANUAL + "\n    return %0 : tensor<8x4xf32>")).to_torch()
    (out,) = _threaded_ranks(tm, [(torch.zeros(4, 4),)])
    assert isinstance(out, converter.DistributedError)
    assert "runs as 2 partitions, but the default process group has world size 1" in str(out)
