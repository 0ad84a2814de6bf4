"""Conversion and run-time cost on the bundled GPT-2, as ratios measured in one run.

    .venv/bin/python benchmarks/bench_gpt2.py [--example examples/gpt2.py] [--repeat 50]

Prints, for one process (machines are noisy; compare ratios, not seconds across runs):

* conversion: ``converter.from_torch(model, args)`` in total, ``torch.export.export`` alone,
  and ``from_torch`` of the already-exported ``ExportedProgram`` (decompositions, ATen → JAX
  lowering, StableHLO);
* the JAX function's first call (trace + compile + run) against a steady-state call;
* the steady-state time of the JAX function (``jax.jit``, parameters bound) against eager
  torch (``torch.no_grad()``), with torch on its default thread count and on one thread;
* the ``jax.export`` artifact written by ``convert --to jax``, called through
  ``Exported.call`` directly and under ``jax.jit`` (which caches the dispatch).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import jax
import torch

import converter
from converter import cli

ROOT = Path(__file__).resolve().parent.parent


def once(fn: Callable[[], object]) -> tuple[object, float]:
    """``fn()`` (blocked until its arrays are ready) and its wall time in seconds."""
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - start


def steady(fn: Callable[[], object], repeat: int, warmup: int = 3) -> float:
    """Median wall time of ``fn()`` over ``repeat`` calls after ``warmup`` calls, in seconds."""
    for _ in range(warmup):
        jax.block_until_ready(fn())
    return statistics.median(once(fn)[1] for _ in range(repeat))


def median_of(fn: Callable[[], object], runs: int) -> float:
    """Median wall time of ``runs`` calls of ``fn()`` (no warm-up), in seconds."""
    return statistics.median(once(fn)[1] for _ in range(runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--example", default=str(ROOT / "examples" / "gpt2.py"), help="file.py[:factory]")
    parser.add_argument("--repeat", type=int, default=50, help="calls per steady-state timing")
    parser.add_argument("--conversions", type=int, default=3, help="runs per conversion timing")
    options = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)

    path, name = cli.split_factory(options.example) or (Path(options.example), "factory")
    model, args, kwargs = cli.load_factory(Path(path), name)
    inputs = [a.numpy() for a in args]

    # Conversion, after one untimed run (imports, rule tables, JAX's tracing caches):
    # torch.export alone, from_torch of its result, and the total; medians of a few runs.
    module = converter.from_torch(model, args, kwargs)
    ep = torch.export.export(model, args, kwargs)
    t_export = median_of(lambda: torch.export.export(model, args, kwargs), options.conversions)
    t_from_ep = median_of(lambda: converter.from_torch(ep), options.conversions)
    t_total = median_of(lambda: converter.from_torch(model, args, kwargs), options.conversions)

    # JAX: first call (trace + compile + run), then steady state.
    fn = module.to_jax()
    _, t_first = once(lambda: fn(*inputs))
    t_jax = steady(lambda: fn(*inputs), options.repeat)

    exported, t_jax_export = once(lambda: cli.export_jax(module))
    restored = jax.export.deserialize(exported.serialize())
    _, t_artifact_first = once(lambda: restored.call(*inputs))
    t_artifact = steady(lambda: restored.call(*inputs), options.repeat)
    jitted_call = jax.jit(restored.call)
    t_artifact_jit = steady(lambda: jitted_call(*inputs), options.repeat)

    with torch.no_grad():
        t_torch = steady(lambda: model(*args, **kwargs), options.repeat)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        t_torch_1 = steady(lambda: model(*args, **kwargs), options.repeat)
        torch.set_num_threads(threads)

    ms = 1e3
    rows = [
        ("from_torch(model), total", t_total, f"{t_total / t_from_ep:.2f}x from_torch(ExportedProgram)"),
        ("  torch.export.export alone", t_export, f"{t_export / t_total:.0%} of the total"),
        ("  from_torch(ExportedProgram)", t_from_ep, f"{t_from_ep / t_total:.0%} of the total"),
        ("jax.export of the Module (--to jax)", t_jax_export, f"{t_jax_export / t_total:.0%} of from_torch"),
        ("first JAX call (trace + compile + run)", t_first, f"{t_first / t_jax:,.0f}x a steady-state call"),
        ("first call of the jax.export artifact", t_artifact_first, f"{t_artifact_first / t_artifact:,.0f}x"),
    ]
    print(f"{Path(path).name}:{name}  jax {jax.__version__}, torch {torch.__version__}, ", end="")
    print(f"{threads} torch threads, conversions: median of {options.conversions}")
    print(f"{module!r}, {sum(module.op_histogram().values())} StableHLO ops\n")
    for label, secs, ratio in rows:
        print(f"{label:<46} {secs:8.3f} s   {ratio}")
    print()
    steady_rows = [
        ("JAX function, steady state", t_jax),
        ("jax.export artifact, Exported.call", t_artifact),
        ("jax.export artifact, jax.jit(Exported.call)", t_artifact_jit),
        (f"eager torch ({threads} threads)", t_torch),
        ("eager torch (1 thread)", t_torch_1),
    ]
    head = f"steady state (median of {options.repeat})"
    print(f"{head:<46} {'ms':>8}     vs torch   vs torch 1 thread")
    for label, secs in steady_rows:
        print(f"{label:<46} {secs * ms:8.3f}     {secs / t_torch:8.3g}x  {secs / t_torch_1:8.3g}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
