"""Cost of crossing frameworks with ``call_jax`` / ``call_torch``, as ratios measured in one run.

    .venv/bin/python benchmarks/bench_embed.py [--repeat 200]

Prints, for one process (machines are noisy; compare ratios, not seconds across runs):

* ``call_jax`` overhead on small inputs (one 8x8 float32 tensor; ``jnp.tanh(x) * 2``): the
  median over interleaved pairs of (call_jax, same jitted function on a jax array), as µs over
  the bare call (issue 15's target: <= 10 µs) and as a ratio, with the same tensor each call
  (the case of weights) and with a new tensor each call (activations); the spread (10th-90th
  percentile of the pair differences) says how noisy the machine was;
* ``call_jax`` forward (torch tensors in and out by DLPack) against calling the same jitted
  JAX function on jax arrays, and forward+backward against ``jax.value_and_grad`` under jit;
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


def timeit(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``fn()`` in seconds (results blocked until ready)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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


def small_overhead(repeat: int) -> None:
    """Print call_jax's overhead over the bare jitted call on one 8x8 tensor."""
    f = lambda x: jnp.tanh(x) * 2  # noqa: E731
    t = torch.randn(8, 8)
    a = jnp.asarray(t.numpy())
    bare = jax.jit(f)
    bare(a)
    converter.call_jax(f, t)
    fresh = [torch.randn(8, 8) for _ in range(64)]
    cases = [("same tensor", lambda: converter.call_jax(f, t)), ("new tensor", None)]
    for name, call in cases:
        if call is None:
            it = iter(range(10**9))
            call = lambda: converter.call_jax(f, fresh[next(it) % 64].clone())  # noqa: E731
            clone = lambda: fresh[0].clone()  # noqa: E731
            t_clone = paired(clone, lambda: None, repeat)[0]  # the clone is not call_jax's cost
        else:
            t_clone = 0.0
        t_call, t_bare, lo, hi = paired(call, lambda: bare(a), repeat * 5)
        over = t_call - t_clone - t_bare
        print(
            f"call_jax 8x8 ({name}) over jax.jit          {over * 1e6:8.1f} us  "
            f"({(t_call - t_clone) / t_bare:.2f}x of {t_bare * 1e6:.1f} us; "
            f"pair differences p10-p90 {(lo - t_clone) * 1e6:.1f}..{(hi - t_clone) * 1e6:.1f} us)"
        )


def mlp(params: dict, x: jax.Array) -> jax.Array:
    """Two-layer tanh MLP: ``(B, 64) → (B, 64)``."""
    return jnp.tanh(jnp.tanh(x @ params["w1"]) @ params["w2"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    repeat = ap.parse_args().repeat
    torch.set_num_threads(1)  # shared machines: threads fighting for cores make eager torch erratic
    small_overhead(repeat)

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
    t_jax = timeit(lambda: fwd_jit(p_j, x_j), repeat)
    t_call = timeit(lambda: converter.call_jax(mlp, p_t, x_t), repeat)
    vg = jax.jit(jax.value_and_grad(lambda p, x: mlp(p, x).sum()))
    t_vg = timeit(lambda: vg(p_j, x_j), repeat)

    def call_jax_step():
        loss = converter.call_jax(mlp, p_t, x_t).sum()
        loss.backward()
        return loss.detach()

    t_step = timeit(call_jax_step, repeat)

    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh()
    )
    in_jax = jax.jit(lambda a: converter.call_torch(model, a))
    in_jax(x_j)
    t_torch_in_jax = timeit(lambda: in_jax(x_j), repeat)
    with torch.no_grad():
        t_torch = timeit(lambda: model(x_t).numpy(), repeat)

    print(f"call_jax first call / steady state            {first / t_call:8.1f}x  ({first * 1e3:.0f} ms)")
    rows = [
        ("call_jax forward / jax.jit forward", t_call, t_jax),
        ("call_jax fwd+bwd / jit(value_and_grad)", t_step, t_vg),
        ("jit(call_torch) / eager torch (no_grad)", t_torch_in_jax, t_torch),
    ]
    for name, a, b in rows:
        print(f"{name:45s} {a / b:8.2f}x  ({a * 1e6:.0f} vs {b * 1e6:.0f} us)")


if __name__ == "__main__":
    main()
