"""First call of ``jax.jit`` of a converted GPT-2, each measured in a fresh process.

    python benchmarks/bench_first_call.py [--gpt2 small] [--rounds 5] [--record]

A first call (trace + lower + XLA compile + run) depends on what the process has already
traced and compiled, so each one runs in a new Python process (this file with ``--child``),
the variants interleaved (the order rotates each round); the medians of ``--rounds`` rounds
are printed per stage (wall time, and the process CPU time of the XLA compile, steadier on a
loaded machine) with the load average. The Module is converted once (``from_torch``) and
saved; every child checks its logits against the torch model's (1e-4). Variants:

* ``jit(f)``: ``jax.jit(f)(x)`` of the converted function, which closes over its weights:
  under JAX's default JAX embeds them in the program as constants (``EmbeddedParamsWarning``);
* ``jit(f.apply)``: ``jax.jit(f.apply)(f.params, x)``, the weights as arguments;
* ``torchax``: torchax 0.0.4's ``jax.jit`` of the function ``extract_jax`` gives, the weights
  as arguments (the anchor; left out when torchax is not installed);
* ``torchax closed``: the same function closing over its weights,
  ``jax.jit(lambda x: fn(states, (x,)))``: torchax's cost of the embedding;
* ``embed floor`` / ``args floor``: a program that only reads each of the same weights once
  (``sum((w * s).sum())``, ``s`` an argument, so XLA folds nothing), closing over them / taking
  them as arguments: the difference is what embedding the weights costs JAX and XLA whatever
  the program computes.

``--record`` stores the row of ``jit(f)`` and ``jit(f.apply)`` against ``torchax``
(``perf_page.py``); ``compare_anchors.py`` measures the same row with :func:`first_calls`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: every variant, in the order printed
VARIANTS = ("jit(f)", "jit(f.apply)", "torchax", "torchax closed", "embed floor", "args floor")
STAGES = ("trace", "lower", "compile", "compile_cpu", "run", "total")


def _model(gpt2: str):
    """The torch GPT-2 (seeded weights) and its token ids: ``examples/gpt2.py``'s model for
    ``example``, else a ``bench_gpt2.py`` size."""
    sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
    if gpt2 == "example":
        from examples import gpt2 as example

        return example.factory()
    from bench_gpt2 import gpt2 as sized

    return sized(gpt2)


def _staged(jitted, *args) -> tuple[object, dict[str, float]]:
    """``jitted(*args)`` by stages (``trace``, ``lower``, ``compile``, call): the output and
    the seconds of each (``compile_cpu``: the process CPU time of the compile)."""
    import jax

    t: dict[str, float] = {}
    start = time.perf_counter()
    traced = jitted.trace(*args)
    t["trace"] = time.perf_counter() - start
    start = time.perf_counter()
    lowered = traced.lower()
    t["lower"] = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    compiled = lowered.compile()
    t["compile"], t["compile_cpu"] = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    t["run"] = time.perf_counter() - start
    t["total"] = t["trace"] + t["lower"] + t["compile"] + t["run"]
    return out, t


def child(variant: str, data: str, gpt2: str) -> dict[str, float]:
    """One first call of ``variant`` in this (fresh) process, on the Module, token ids and
    reference logits saved in the directory ``data``; its stage times."""
    import warnings

    import jax
    import jax.numpy as jnp
    import numpy as np

    x = np.load(os.path.join(data, "ids.npy"))
    with jax.enable_x64(True):  # int64 token ids: JAX narrows them under jax.jit otherwise
        if variant.startswith("torchax"):
            import torch
            import torchax

            model, _ = _model(gpt2)

            class Logits(torch.nn.Module):  # torchax returns what forward returns
                def __init__(self, model):
                    super().__init__()
                    self.model = model

                def forward(self, ids):
                    return self.model(ids).logits

            states, fn = torchax.extract_jax(Logits(model))
            if variant == "torchax":
                out, t = _staged(jax.jit(fn), states, (jnp.asarray(x),))
            else:
                out, t = _staged(jax.jit(lambda ids: fn(states, (ids,))), jnp.asarray(x))
        else:
            import converter

            f = converter.load(os.path.join(data, "gpt2.module")).to_jax()
            if variant.endswith("floor"):
                read = lambda p, s: sum((w.astype(jnp.float32) * s).sum() for w in p.values())  # noqa: E731
                s, params = np.float32(2.0), f.params
                if variant == "embed floor":
                    _, t = _staged(jax.jit(lambda s: read(params, s)), s)
                else:
                    _, t = _staged(jax.jit(read), params, s)
                return t
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", converter.EmbeddedParamsWarning)
                if variant == "jit(f)":
                    out, t = _staged(jax.jit(f), x)
                else:
                    out, t = _staged(jax.jit(f.apply), f.params, x)
            out = out["logits"] if isinstance(out, dict) else out
        want = np.load(os.path.join(data, "want.npy"))
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-4, atol=1e-4)
    return t


def first_calls(model, ids, gpt2: str, rounds: int, variants=VARIANTS) -> dict[str, dict[str, float]]:
    """Median stage times (seconds) of each variant's first call, over ``rounds`` rounds of
    fresh processes, the order rotating; ``model``/``ids`` are the torch GPT-2 that ``gpt2``
    names (the children rebuild it for torchax) and its token ids. Variants of torchax are
    left out when it is not installed."""
    import converter

    if importlib.util.find_spec("torchax") is None:
        variants = [v for v in variants if not v.startswith("torchax")]
    times: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as data:
        converter.from_torch(model, (ids,)).save(os.path.join(data, "gpt2.module"))
        import numpy as np

        np.save(os.path.join(data, "ids.npy"), ids.numpy())
        np.save(os.path.join(data, "want.npy"), model(ids).logits.detach().numpy())
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        for r in range(rounds):
            for k in range(len(variants)):
                v = variants[(r + k) % len(variants)]
                argv = [sys.executable, __file__, "--child", v, data, gpt2]
                done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
                if done.returncode:
                    raise RuntimeError(f"{v}: child failed\n{done.stderr[-3000:]}")
                times[v].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {v: {s: statistics.median(t[s] for t in ts) for s in STAGES} for v, ts in times.items()}


def first_call_row(med: dict[str, dict[str, float]], gpt2: str, rounds: int) -> dict[str, str]:
    """The performance table's row (``what``, ``result``, ``anchor``) of :func:`first_calls`'
    medians ``med`` of ``jit(f)`` and ``jit(f.apply)`` against ``torchax`` (when measured), with
    the floors that were measured: ``torchax closed`` (torchax's own function closing over the
    same weights) and what embedding the weights costs JAX alone (``embed floor`` minus
    ``args floor``)."""
    import perf_page  # benchmarks/ is on sys.path: where this runs as a script, or imported

    first, apply = med["jit(f)"]["total"], med["jit(f.apply)"]["total"]
    tx = med.get("torchax", {}).get("total")
    tx_part = f" = {first / tx:.2f}× torchax's {tx:.2f} s" if tx else ""
    apply_part = f" ({apply / tx:.2f}× torchax)" if tx else ""
    floors = []
    closed = med.get("torchax closed", {}).get("total")
    if closed:
        floors.append(
            f"torchax closing over the same weights {closed:.2f} s (`jax.jit(f)` {first / closed:.2f}× that)"
        )
    if "embed floor" in med and "args floor" in med:
        cost = med["embed floor"]["total"] - med["args floor"]["total"]
        floors.append(f"embedding the weights alone costs JAX {cost:.2f} s")
    floor_part = f"; floors: {', '.join(floors)}" if floors else ""
    version = perf_page.package_version("torchax")
    return dict(
        what=f"first call of `jax.jit(f)`, converted GPT-2 {gpt2} (trace + compile)",
        result=f"{first:.2f} s{tx_part}; `jax.jit(f.apply)` {apply:.2f} s{apply_part}{floor_part}"
        + ("" if tx else " (torchax absent)"),
        anchor=f"torchax {version}: `jax.jit` of `extract_jax`'s function (weights as arguments); "
        f"`jax.jit(f.apply)(f.params, x)` of the same Module; `jax.jit(f)` closes over its weights, "
        "which JAX embeds as constants by default (floors: the same closure in torchax, and a program "
        "that only reads each weight once, closing over them vs taking them as arguments); "
        f"medians of {rounds} fresh processes each",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpt2", default="small", help="'example' (examples/gpt2.py) or a bench_gpt2 size")
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per variant")
    parser.add_argument("--record", action="store_true", help="store the row (perf_page.py)")
    parser.add_argument("--child", nargs=3, metavar=("VARIANT", "DIR", "GPT2"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    import jax
    import torch

    one, five, fifteen = os.getloadavg()
    model, (ids,) = _model(args.gpt2)
    with torch.no_grad():
        med = first_calls(model, ids, args.gpt2, args.rounds)
    one2, five2, fifteen2 = os.getloadavg()
    load = (
        f"load average {one:.1f}/{five:.1f}/{fifteen:.1f} before, {one2:.1f}/{five2:.1f}/{fifteen2:.1f} "
        f"after, on {os.cpu_count()} cores"
    )
    print(f"GPT-2 {args.gpt2}, first call, medians of {args.rounds} fresh processes; jax {jax.__version__}")
    print(f"  {load}")
    print(f"  {'':15s}" + "".join(f"{s:>12s}" for s in STAGES) + "   total vs torchax")
    tx = med.get("torchax", {}).get("total")
    for v, m in med.items():
        ratio = f"   {m['total'] / tx:.2f}x" if tx and not v.endswith("floor") else ""
        print(f"  {v:15s}" + "".join(f"{m[s]:11.2f}s" for s in STAGES) + ratio)
    if "embed floor" in med:
        e, a = med["embed floor"], med["args floor"]
        print(
            f"  embedding the weights costs {e['lower'] - a['lower']:.2f} s of lowering and "
            f"{e['compile_cpu'] - a['compile_cpu']:.2f} s of compile CPU time "
            f"({e['total'] - a['total']:.2f} s in all)"
        )
    if args.record:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import perf_page

        row = first_call_row(med, args.gpt2, args.rounds)
        row["anchor"] += f"; {load}"
        perf_page.record("anchors_first_call", command=perf_page.command(__file__, argv), **row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
