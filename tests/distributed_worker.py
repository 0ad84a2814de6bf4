"""One process of the multi-process tests in ``tests/core/test_distributed.py`` (not a test file).

``python tests/distributed_worker.py torch N RANK PORT HITS`` runs rank ``RANK`` of N: it
lowers a ``shard_map`` program on N forced host devices with JAX (the reference), converts
it to torch, joins a gloo process group (a file store in the working directory, gloo's
connections on the loopback interface: ``GLOO_SOCKET_IFNAME=lo``) and checks its own output
shards against JAX's. ``... jax 2 RANK PORT HITS`` runs process ``RANK`` of a data-parallel
JAX run of a converted torch MLP (``jax.distributed.initialize`` on localhost). Each writes
the registry keys it used to ``HITS`` (merged into the parent's coverage) and exits 0 when
every check held, 1 with the differences on stderr otherwise.

``... MODE N all PORT DIR`` runs the N ranks as forks of one process that imported torch, JAX
and the converter once (each rank's own import is most of a rank's CPU time): rank ``r``
writes its output to ``DIR/<MODE><N>-<r>.log`` and its keys to ``DIR/<MODE><N>-<r>.hits.json``.
The parent initializes no JAX backend and starts no thread of its own before forking (JAX's
backends are created in each rank); it exits 0 when every rank did, else 1 after killing the
ranks still running (a rank waiting in a collective for a failed one would never return).
"""

from __future__ import annotations

import os
import sys

MODE, N, RANK, PORT, HITS = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
RANK = -1 if RANK == "all" else int(RANK)
if MODE == "torch":
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={N}"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from tests import registry_coverage  # noqa: E402

registry_coverage.install()
FAILURES: list[str] = []


def check(what: str, got: np.ndarray, want: np.ndarray, tol: float = 1e-5) -> None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        FAILURES.append(f"rank {RANK} {what}: shape {got.shape}, expected {want.shape}")
    elif want.dtype.kind in "biu" and not np.array_equal(got, want):
        FAILURES.append(f"rank {RANK} {what}: {got.tolist()}, expected {want.tolist()}")
    elif want.dtype.kind not in "biu" and not np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True):
        FAILURES.append(f"rank {RANK} {what}: max difference {np.nanmax(np.abs(got - want))}")


def torch_two():
    """Mesh x=2 (Shardy's round-trip form from XLA's HLO, saved and loaded): a tensor-parallel
    MLP (column then row split, psum), all_gather, psum_scatter, all_to_all, ppermute, pmax
    with a NaN, axis_index, a wrapping uint32 psum."""
    from jax import shard_map
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import converter

    mesh = jax.make_mesh((2,), ("x",))

    def f(a, b, w1, w2, u):
        y = jax.lax.psum(jax.nn.relu(b @ w1) @ w2, "x")
        s = jax.lax.psum(u, "x")  # uint32 (int64 storage in torch): the sum wraps
        g = jax.lax.all_gather(a, "x", axis=1, tiled=True)
        r = jax.lax.psum_scatter(a, "x", scatter_dimension=1, tiled=True)
        t = jax.lax.all_to_all(a, "x", 0, 1, tiled=True)
        p = jax.lax.ppermute(a, "x", [(0, 1), (1, 0)])
        m = jax.lax.pmax(a, "x")
        i = jax.lax.axis_index("x").reshape(1)
        return y, g, r, t, p, m, i, s

    specs = (P("x"), P(), P(None, "x"), P("x", None), P("x"))
    out_specs = (P(), P(), P("x"), P("x"), P("x"), P(), P("x"), P())
    g = jax.jit(shard_map(f, mesh=mesh, in_specs=specs, out_specs=out_specs, check_vma=False))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 4), dtype=np.float32)
    a[5, 2] = np.nan  # rank 1's shard: pmax must give NaN on both ranks
    args = [a] + [rng.standard_normal(s, dtype=np.float32) for s in [(3, 4), (4, 16), (16, 4)]]
    args.append(np.array([[2**32 - 3, 7], [5, 2**31]], dtype=np.uint32))
    placed = [jax.device_put(x, NamedSharding(mesh, s)) for x, s in zip(args, specs, strict=True)]
    want = [np.asarray(o) for o in g(*placed)]
    halves = a.reshape(2, 4, 4)
    want[5] = np.where(np.isnan(halves).any(0), np.nan, np.fmax(halves[0], halves[1]))  # the spec: NaN wins
    # XLA's HLO of the program back in StableHLO: Shardy's round-trip form (custom calls
    # xla.sdy.GlobalToLocalShape / LocalToGlobalShape / FuncResultSharding around a call of
    # the body), as other tools write it; saved and loaded, that is what runs
    from jax.extend import mlir as jax_mlir

    hlo = g.lower(*placed).compiler_ir("hlo").as_serialized_hlo_module_proto()
    module = converter.from_stablehlo(jax_mlir.hlo_to_stablehlo(hlo))
    text = module.text()
    assert "@xla.sdy.GlobalToLocalShape" in text and "= sdy.manual_computation(" not in text
    module.save(f"two-{RANK}.shlo")
    return converter.load(f"two-{RANK}.shlo"), args, want


def torch_four():
    """Mesh x=2 × y=2 (through from_jax of a jax.export.Exported, with a parameter split
    over y): collectives over groups of the mesh axes ([[0, 2], [1, 3]], [[0, 1], [2, 3]])
    and over both."""
    from jax import shard_map
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import converter

    mesh = jax.make_mesh((2, 2), ("x", "y"))

    def f(params, a, b):
        y = jax.lax.psum(a @ params["w"].T, "y")
        s = jax.lax.psum(a, "x") + jax.lax.ppermute(a, "x", [(0, 1), (1, 0)]) + jax.lax.axis_index("x")
        g = jax.lax.all_gather(b, "y", tiled=True)
        r = jax.lax.psum_scatter(a, "y", scatter_dimension=0, tiled=True)
        t = jax.lax.all_to_all(b, "y", 0, 1, tiled=True)
        m = jax.lax.pmin(a, ("x", "y"))
        w = jax.lax.psum(params["w"], "x")  # a parameter's shard (a strided view) into a collective
        return y, s, g, r, t, m, w

    in_specs = ({"w": P(None, "y")}, P("x", "y"), P("y"))
    out_specs = (P("x", None), P("x", "y"), P(), P(("x", "y")), P("y"), P(), P(None, "y"))
    g = jax.jit(shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False))
    rng = np.random.default_rng(1)
    params = {"w": rng.standard_normal((6, 4), dtype=np.float32)}
    a, b = rng.standard_normal((8, 4), dtype=np.float32), rng.standard_normal((4, 4), dtype=np.float32)
    put = lambda x, s: jax.device_put(x, NamedSharding(mesh, s))  # noqa: E731
    placed = (jax.tree.map(put, params, in_specs[0]), put(a, in_specs[1]), put(b, in_specs[2]))
    want = [np.asarray(o) for o in g(*placed)]
    module = converter.from_jax(jax.export.export(g)(*placed), params=params)
    return module, [a, b], want


def run_torch() -> None:
    import torch.distributed as dist
    from converter.backends.torch.distributed import local_shard

    import converter

    module, args, want = torch_two() if N == 2 else torch_four()
    tm = module.to_torch()
    store = os.path.abspath(f"store-{PORT}")  # a file in the run's directory: no listening socket
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=RANK, world_size=N)
    try:
        try:  # whole arrays instead of this rank's shards: refused before any collective
            tm(*[torch.from_numpy(x) for x in args])
            FAILURES.append(f"rank {RANK}: whole arrays were accepted")
        except converter.SignatureMismatchError as e:
            if f"rank {RANK} takes its shard of the whole [8, 4]" not in str(e):
                FAILURES.append(f"rank {RANK}: unhelpful message {e}")
        local_args, _ = tm.shard_inputs(*args)
        outs = tm(*[torch.from_numpy(np.ascontiguousarray(x)) for x in local_args])
        outs = outs if isinstance(outs, tuple) else (outs,)
        for i, (o, w, s) in enumerate(zip(outs, want, tm.plan.results, strict=True)):
            check(f"output {i}", o.numpy(), local_shard(w, s, tm.plan.mesh, RANK))
        again = tm(
            *[torch.from_numpy(np.ascontiguousarray(x)) for x in local_args]
        )  # the traced graph reused
        check("second call", again[0].numpy(), outs[0].numpy(), 0)
    finally:
        dist.destroy_process_group()


def run_jax() -> None:
    """Data-parallel: the batch split over the two processes, the parameters replicated;
    the forward pass and jax.grad of a mean loss equal eager torch and torch autograd."""
    import jax.numpy as jnp
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import converter

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{PORT}",
        coordinator_bind_address=f"127.0.0.1:{PORT}",  # localhost only
        num_processes=N,
        process_id=RANK,
        initialization_timeout=60,
    )
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).eval()
        x = torch.randn(6, 8)
        f = converter.from_torch(model, (x,)).to_jax()
        if len(jax.devices()) != N or len(jax.local_devices()) != 1:
            FAILURES.append(f"expected {N} devices, one local: {jax.devices()}")
        mesh = jax.make_mesh((N,), ("batch",), devices=jax.devices())
        rows = x.shape[0] // N
        xs = x.numpy()
        gx = jax.make_array_from_process_local_data(
            NamedSharding(mesh, P("batch")), xs[RANK * rows : (RANK + 1) * rows], xs.shape
        )
        rep = NamedSharding(mesh, P())
        params = {k: jax.make_array_from_process_local_data(rep, np.asarray(v)) for k, v in f.params.items()}

        def loss(p, x):
            return jnp.mean(f.apply(p, x) ** 2)

        out = multihost_utils.process_allgather(jax.jit(f.apply)(params, gx), tiled=True)
        grads = jax.jit(jax.grad(loss))(params, gx)
        check("outputs vs eager torch", out, model(x).detach().numpy())
        check("outputs vs one process", out, np.asarray(f(xs)), 1e-6)
        torch_loss = (model(x) ** 2).mean()
        torch_loss.backward()
        for name, p in model.named_parameters():
            check(f"grad {name}", np.asarray(grads[name].addressable_data(0)), p.grad.numpy())
    finally:
        jax.distributed.shutdown()


def run_rank() -> int:
    """This process's rank: 0 when every check held."""
    try:
        run_torch() if MODE == "torch" else run_jax()
    finally:
        registry_coverage.dump(registry_coverage.HITS, HITS)
    if FAILURES:
        print("\n".join(FAILURES), file=sys.stderr)
        return 1
    print(f"rank {RANK}: ok")
    return 0


def fork_ranks(directory: str) -> int:
    """Fork the N ranks (see the module docstring); 0 when each exits 0."""
    global RANK, HITS
    import signal
    import traceback

    import converter.backends.torch.distributed  # noqa: F401
    import torch.distributed  # noqa: F401 - imported once, before the forks
    from jax import shard_map  # noqa: F401
    from jax.experimental import multihost_utils  # noqa: F401

    import converter  # noqa: F401

    sys.stdout.flush()
    sys.stderr.flush()
    pids: dict[int, int] = {}
    for rank in range(N):
        pid = os.fork()
        if pid == 0:  # the rank
            code = 1
            try:
                base = os.path.join(directory, f"{MODE}{N}-{rank}")
                fd = os.open(f"{base}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                RANK, HITS = rank, f"{base}.hits.json"
                code = run_rank()
            except BaseException:  # noqa: BLE001 - reported in the rank's log, then its status
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        pids[pid] = rank
    status = 0
    while pids:
        pid, wait_status = os.wait()
        rank = pids.pop(pid)
        code = os.waitstatus_to_exitcode(wait_status)
        if code != 0:
            print(f"rank {rank} exited with status {code}", flush=True)
            status = 1
            for other in pids:
                os.kill(other, signal.SIGKILL)
    return status


if __name__ == "__main__":
    sys.exit(fork_ranks(HITS) if RANK < 0 else run_rank())
