"""JAX → native torch: conversion time and run time against ``jax.jit``, as ratios in one run.

    .venv/bin/python benchmarks/bench_jax_to_torch.py [--repeat 50]

For a Flax transformer decoder block and a Flax CNN (``examples/flax_models.py``) prints:
conversion time (``from_jax`` + ``to_torch``) against one ``jax.jit`` compile of the
source, and the steady-state time of the converted torch module, eager and under
``torch.compile``, against ``jax.jit`` of the source. Ratios > 1 mean torch is slower.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpt2 import once, steady  # noqa: E402

import converter  # noqa: E402
from examples import flax_models  # noqa: E402


def torch_steady(fn, repeat: int) -> float:
    with torch.no_grad():
        for _ in range(3):
            fn()
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        return (time.perf_counter() - start) / repeat


def bench(name: str, repeat: int) -> None:
    apply, params, args = flax_models.FACTORIES[name]()
    jitted = jax.jit(apply)
    _, t_compile = once(lambda: jitted(params, *args))
    t_jax = steady(lambda: jitted(params, *args), repeat)

    start = time.perf_counter()
    tm = converter.from_jax(apply, *args, params=params).to_torch()
    t_convert = time.perf_counter() - start
    targs = [torch.from_numpy(np.asarray(a)) for a in args]
    t_eager = torch_steady(lambda: tm(*targs), repeat)
    compiled = torch.compile(tm)
    start = time.perf_counter()
    with torch.no_grad():
        compiled(*targs)
    t_first_compiled = time.perf_counter() - start
    t_compiled = torch_steady(lambda: compiled(*targs), repeat)

    rows = [
        (
            "conversion (from_jax + to_torch)",
            f"{t_convert * 1e3:9.1f} ms",
            t_convert / t_compile,
            "jax.jit compile",
        ),
        ("torch eager, steady state", f"{t_eager * 1e6:9.1f} us", t_eager / t_jax, "jax.jit"),
        ("torch.compile, first call", f"{t_first_compiled * 1e3:9.1f} ms", None, ""),
        ("torch.compile, steady state", f"{t_compiled * 1e6:9.1f} us", t_compiled / t_jax, "jax.jit"),
        ("jax.jit, steady state", f"{t_jax * 1e6:9.1f} us", None, ""),
    ]
    print(f"\n{name}")
    for label, value, ratio, ref in rows:
        tail = f"  = {ratio:6.2f} x {ref}" if ratio is not None else ""
        print(f"  {label:<36} {value}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: a shared box)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__} on {args.threads} thread(s), jax {jax.__version__}")
    jax.config.update("jax_enable_x64", True)
    for name in ("decoder_block", "cnn"):
        bench(name, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
