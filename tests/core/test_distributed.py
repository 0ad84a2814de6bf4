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
