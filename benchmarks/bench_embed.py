"""Cost of crossing frameworks with ``call_jax`` / ``call_torch``, as ratios measured in one run.

    .venv/bin/python benchmarks/bench_embed.py [--repeat 200]

Prints, for one process (machines are noisy; compare ratios, not seconds across runs):

* ``call_jax`` overhead on small inputs (one 8x8 float32 tensor; ``jnp.tanh(x) * 2``): the
  median over interleaved pairs of (call_jax, same jitted function on a jax array), as µs over
  the bare call (issue 15's target: <= 10 µs) and as a ratio, with the same tensor each call
  (the case of weights, imported once while unchanged) and with two tensors in turn (every
  call passes a tensor other than the last one, as activations are: it crosses as a NumPy
  view, zero-copy); the spread (10th-90th
  percentile of the pair differences) says how noisy the machine was. Next to it, the floors
  timed the same way in the same run: the public DLPack round trip around the same jitted
  function (``torch.from_dlpack(f(jnp.from_dlpack(t)))``), and the zero-copy crossing
  ``call_jax`` makes without any of its checks (a NumPy view in, a DLPack capsule out through
  jaxlib's and torch's C entry points): what is left above that one is ``call_jax``'s own;
* ``call_jax`` of a two-layer MLP (weights requiring grad, interleaved with the same jitted
  function on jax arrays): forward under ``torch.no_grad()``, forward recording the graph
  (residuals kept for backward), and forward+backward against ``jax.value_and_grad`` under jit;
* ``call_torch`` under ``jax.jit`` against eager torch (``torch.no_grad()``);
* the first ``call_jax`` (trace + compile) against a steady-state call.

Torch runs on one thread (``torch.set_num_threads(1)``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import torch

import converter


def paired(
    a: Callable[[], object], b: Callable[[], object], repeat: int
) -> tuple[float, float, float, float]:
    """Interleaved timing (a machine loaded by other processes drifts): per iteration one call
    of ``a`` then one of ``b``. Returns the medians of ``a`` and of ``b`` and the 10th and
    90th percentiles of ``a - b``, in seconds."""
    ta, tb = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(a())
        mid = time.perf_counter()
        jax.block_until_ready(b())
        ta.append(mid - start)
        tb.append(time.perf_counter() - mid)
    diff = sorted(x - y for x, y in zip(ta, tb, strict=True))
    return statistics.median(ta), statistics.median(tb), diff[len(diff) // 10], diff[9 * len(diff) // 10]


def small_overhead(repeat: int) -> dict[str, tuple[float, float]]:
    """Print call_jax's overhead over the bare jitted call on one 8x8 tensor: the same tensor
    every call (imported once while unchanged, as weights are), and two tensors in turn (each
    call's input is new to it, as activations are); then, with two tensors in turn, the floors:
    the public DLPack round trip around the same jitted function, and the zero-copy crossing
    call_jax makes without its checks. Returns, under ``"same"``, ``"new"``, ``"dlpack"`` and
    ``"zero_copy"``, each one's overhead (difference of the medians) and the 90th percentile
    of its pair differences, in seconds."""
    from converter import _jax_internal, _torch_internal

    f = lambda x: jnp.tanh(x) * 2  # noqa: E731
    t, u = torch.randn(8, 8), torch.randn(8, 8)
    a = jnp.asarray(t.numpy())
    bare = jax.jit(f)
    bare(a)
    converter.call_jax(f, t)

    def in_turn(fn: Callable[[torch.Tensor], object]) -> Callable[[], object]:
        turn = [t, u]

        def call():
            turn.reverse()
            return fn(turn[0])

        return call

    def zero_copy(x: torch.Tensor) -> torch.Tensor:  # call_jax's crossing, none of its checks
        return _torch_internal.tensor_from_dlpack(_jax_internal.cpu_array_to_dlpack(bare(x.numpy())))

    def public_dlpack(x: torch.Tensor) -> torch.Tensor:
        return torch.from_dlpack(bare(jnp.from_dlpack(x)))

    overheads = {}
    for key, name, call in [
        ("same", "call_jax 8x8 (same tensor)", lambda: converter.call_jax(f, t)),
        ("new", "call_jax 8x8 (new tensor)", in_turn(lambda x: converter.call_jax(f, x))),
        ("dlpack", "floor: public DLPack round trip", in_turn(public_dlpack)),
        ("zero_copy", "floor: NumPy view in, DLPack out", in_turn(zero_copy)),
    ]:
        t_call, t_bare, lo, hi = paired(call, lambda: bare(a), repeat * 5)
        overheads[key] = (t_call - t_bare, hi)
        print(
            f"{name:32s} over jax.jit {(t_call - t_bare) * 1e6:8.1f} us  "
            f"({t_call / t_bare:.2f}x of {t_bare * 1e6:.1f} us; "
            f"pair differences p10..p90 {lo * 1e6:.1f}..{hi * 1e6:.1f} us)"
        )
    return overheads


def mlp(params: dict, x: jax.Array) -> jax.Array:
    """Two-layer tanh MLP: ``(B, 64) → (B, 64)``."""
    return jnp.tanh(jnp.tanh(x @ params["w1"]) @ params["w2"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--record", action="store_true", help="store the results in the performance tables")
    args = ap.parse_args(argv)
    repeat = args.repeat
    torch.set_num_threads(1)  # shared machines: threads fighting for cores make eager torch erratic
    small = small_overhead(repeat)
    same, new = small["same"][0], small["new"][0]

    rng = np.random.default_rng(0)
    p_np = {k: rng.standard_normal((64, 64)).astype(np.float32) * 0.1 for k in ("w1", "w2")}
    x_np = rng.standard_normal((32, 64)).astype(np.float32)
    p_t = {k: torch.from_numpy(v).requires_grad_() for k, v in p_np.items()}
    x_t = torch.from_numpy(x_np)
    p_j = {k: jnp.asarray(v) for k, v in p_np.items()}
    x_j = jnp.asarray(x_np)

    start = time.perf_counter()
    converter.call_jax(mlp, p_t, x_t)
    first = time.perf_counter() - start
    fwd_jit = jax.jit(mlp)
    fwd_jit(p_j, x_j)
    with torch.no_grad():
        t_nograd, t_jax, *_ = paired(
            lambda: converter.call_jax(mlp, p_t, x_t), lambda: fwd_jit(p_j, x_j), repeat
        )
    t_call, t_jax2, *_ = paired(lambda: converter.call_jax(mlp, p_t, x_t), lambda: fwd_jit(p_j, x_j), repeat)
    vg = jax.jit(jax.value_and_grad(lambda p, x: mlp(p, x).sum()))
    vg(p_j, x_j)

    def call_jax_step():
        loss = converter.call_jax(mlp, p_t, x_t).sum()
        loss.backward()
        return loss.detach()

    t_step, t_vg, *_ = paired(call_jax_step, lambda: vg(p_j, x_j), repeat)

    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh()
    )
    in_jax = jax.jit(lambda a: converter.call_torch(model, a))
    in_jax(x_j)
    with torch.no_grad():
        t_torch_in_jax, t_torch, *_ = paired(lambda: in_jax(x_j), lambda: model(x_t).numpy(), repeat)

    print(f"call_jax first call / steady state            {first / t_call:8.1f}x  ({first * 1e3:.0f} ms)")
    rows = [
        ("call_jax MLP forward (no_grad) / jax.jit", t_nograd, t_jax),
        ("call_jax MLP forward (recording) / jax.jit", t_call, t_jax2),
        ("call_jax fwd+bwd / jit(value_and_grad)", t_step, t_vg),
        ("jit(call_torch) / eager torch (no_grad)", t_torch_in_jax, t_torch),
    ]
    for name, a, b in rows:
        print(f"{name:45s} {a / b:8.2f}x  ({a * 1e6:.0f} vs {b * 1e6:.0f} us)")
    if args.record:
        import perf_page  # benchmarks/: the script's directory

        cmd = perf_page.command(__file__, argv)
        perf_page.record(
            "call_jax_overhead",
            what="`call_jax` per call, one 8×8 tensor",
            result=f"+{same * 1e6:.1f} µs (same tensor), +{new * 1e6:.1f} µs (new tensor); target ≤ 10 µs",
            anchor="the bare `jax.jit` call",
            command=cmd,
        )
        perf_page.record(
            "call_jax_mlp",
            what="`call_jax` MLP forward (`no_grad`)",
            result=f"{t_nograd / t_jax:.2f}×",
            anchor="`jax.jit` of the function",
            command=cmd,
        )
        perf_page.record(
            "call_torch_mlp",
            what="`jax.jit` of `call_torch` of an MLP",
            result=f"{t_torch_in_jax / t_torch:.2f}×",
            anchor="eager torch (`no_grad`)",
            command=cmd,
        )


if __name__ == "__main__":
    main()
