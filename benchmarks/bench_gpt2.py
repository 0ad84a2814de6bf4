"""Conversion and run-time cost on the bundled GPT-2, as ratios measured in one run.

    .venv/bin/python benchmarks/bench_gpt2.py [--example examples/gpt2.py] [--repeat 50]

Prints, for one process (machines are noisy; compare ratios, not seconds across runs):

* the conversion target on GPT-2 small's shape (12 layers, width 768, 124M parameters,
  random weights, token ids ``(2, 16)``; ``--size``): ``from_torch`` of an
  ``ExportedProgram`` against ``torch.export.export`` of the same model, as a ratio of
  medians (wall and CPU time, with the spread of the runs: the machine is shared),
  target <= 1.0x;
* with ``--jit``, on the same model, the JAX function under ``jax.jit``: the first call of
  ``jax.jit(f)`` against the first call of ``f`` (issue 15's target: <= 1.1x), the size of
  the lowered programs, and the steady state of ``jax.jit(f)`` against
  ``jax.jit(f.apply)(params, x)`` (torchax, the issue's reference: ``compare_anchors.py``),
  and the same for the argument form ``jax.jit(lambda f, x: f(x))(f, x)``, which takes
  the weights as arguments. Under JAX's default ``jax.jit(f)`` embeds the weights as constants
  (hundreds of MB of program text on GPT-2 small, several GB of memory while lowering), hence
  opt-in; run with ``JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=True`` in the environment and JAX
  passes them as arguments (the line "JAX passes closed-over arrays..." says which mode ran);

then, on ``--example`` (the bundled 2-layer GPT-2 by default):

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
from converter import _jax_internal
from converter.tools import cli

ROOT = Path(__file__).resolve().parent.parent
SIZES = {"small": (12, 768, 12), "medium": (24, 1024, 16), "tiny": (2, 256, 4)}


def gpt2(size: str = "small") -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A ``GPT2LMHeadModel`` of GPT-2 ``size``'s shape with seeded random weights (no
    download), eval mode, eager attention, no cache; token ids ``(2, 16)``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    n_layer, n_embd, n_head = SIZES[size]
    config = GPT2Config(
        n_layer=n_layer, n_embd=n_embd, n_head=n_head, use_cache=False, attn_implementation="eager"
    )
    torch.manual_seed(0)
    with torch.no_grad():
        model = GPT2LMHeadModel(config).eval()
    return model, (torch.randint(0, config.vocab_size, (2, 16)),)


def timed(fn: Callable[[], object]) -> tuple[object, float, float]:
    """``fn()`` (blocked until ready), its wall time and its process CPU time, in seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - wall, time.process_time() - cpu


def spread(times: list[float]) -> str:
    """``median s (min-max)`` of ``times``."""
    return f"{statistics.median(times):7.3f} s ({min(times):.3f}-{max(times):.3f})"


def conversion_target(size: str, runs: int) -> tuple[float, int]:
    """Print ``from_torch(ExportedProgram)`` against ``torch.export.export`` on GPT-2
    ``size``: medians of ``runs`` alternating runs, after one untimed run of each. Returns
    the ratio of their CPU times and the model's parameter count."""
    model, args = gpt2(size)
    ep = torch.export.export(model, args)
    converter.from_torch(ep)  # imports, rule tables, JAX's caches
    export_w, export_c, convert_w, convert_c = [], [], [], []
    for _ in range(runs):  # alternating, so both see the same machine load
        _, w, c = timed(lambda: torch.export.export(model, args))
        export_w.append(w)
        export_c.append(c)
        _, w, c = timed(lambda: converter.from_torch(ep))
        convert_w.append(w)
        convert_c.append(c)
    med = statistics.median
    print(f"GPT-2 {size} {SIZES[size]}: conversion, median of {runs} (min-max)")
    print(f"  {'':<34} {'wall':>24} {'CPU':>24}")
    print(f"  {'torch.export.export':<34} {spread(export_w):>24} {spread(export_c):>24}")
    print(f"  {'from_torch(ExportedProgram)':<34} {spread(convert_w):>24} {spread(convert_c):>24}")
    print(
        f"  ratio from_torch(ep) / torch.export: {med(convert_w) / med(export_w):.2f}x wall, "
        f"{med(convert_c) / med(export_c):.2f}x CPU (target <= 1.0x)\n"
    )
    return med(convert_c) / med(export_c), sum(p.numel() for p in model.parameters())


def jit_target(size: str, repeat: int) -> None:
    """Print the first call of ``jax.jit(f)`` against that of ``f`` (fresh functions of one
    Module), the lowered program sizes, and steady states, on GPT-2 ``size``."""
    model, args = gpt2(size)
    module = converter.from_torch(model, args)
    x = args[0].numpy()
    _, first_f, first_f_cpu = timed(lambda: module.to_jax()(x))
    g = module.to_jax()
    jitted = jax.jit(g)
    _, first_jit, first_jit_cpu = timed(lambda: jitted(x))
    apply = jax.jit(g.apply)
    _, first_apply, first_apply_cpu = timed(lambda: apply(g.params, x))
    h = module.to_jax()  # fresh: the argument form, f a pytree whose leaves are its weights
    passed = jax.jit(lambda fn, v: fn(v))
    _, first_arg, first_arg_cpu = timed(lambda: passed(h, x))
    text_jit = len(jitted.lower(x).as_text())
    text_apply = len(apply.lower(g.params, x).as_text())
    t_jit, t_apply, t_arg, t_f = interleaved(
        [lambda: jitted(x), lambda: apply(g.params, x), lambda: passed(h, x), lambda: g(x)], repeat
    )
    mb = 1 / 2**20
    print(f"GPT-2 {size}: the JAX function under jax.jit (steady states: median of {repeat}, interleaved)")
    hoisted = _jax_internal.constants_hoisted()
    print(
        f"  JAX passes closed-over arrays as arguments (JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=True "
        f"before import): {'yes' if hoisted else 'no, jax.jit(f) embeds the weights'}"
    )
    print(f"  first call of f                    {first_f:8.3f} s wall {first_f_cpu:8.3f} s CPU")
    print(f"  first call of jax.jit(f)           {first_jit:8.3f} s wall {first_jit_cpu:8.3f} s CPU")
    print(f"  first call of jax.jit(f.apply)     {first_apply:8.3f} s wall {first_apply_cpu:8.3f} s CPU")
    print(f"  first call of jit(lambda f, x: f(x)) {first_arg:6.3f} s wall {first_arg_cpu:8.3f} s CPU")
    print(
        f"  ratio first jax.jit(f) / first f: {first_jit / first_f:.2f}x wall, "
        f"{first_jit_cpu / first_f_cpu:.2f}x CPU (target <= 1.1x)"
    )
    print(
        f"  ratio first jit(lambda f, x: f(x))(f, x) / first f: {first_arg / first_f:.2f}x wall, "
        f"{first_arg_cpu / first_f_cpu:.2f}x CPU"
    )
    print(f"  lowered text: jax.jit(f) {text_jit * mb:.2f} MB, jax.jit(f.apply) {text_apply * mb:.2f} MB")
    print(
        f"  steady: jax.jit(f) {t_jit * 1e3:.3f} ms, jax.jit(f.apply) {t_apply * 1e3:.3f} ms, "
        f"f {t_f * 1e3:.3f} ms; ratio jax.jit(f) / jax.jit(f.apply): {t_jit / t_apply:.3f}x "
        "(target <= 1.02x)"
    )
    print(
        f"  steady: jit(lambda f, x: f(x))(f, x) {t_arg * 1e3:.3f} ms, "
        f"{t_arg / t_apply:.3f}x jax.jit(f.apply)"
    )
    print()


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


def interleaved(fns: list[Callable[[], object]], repeat: int, warmup: int = 3) -> list[float]:
    """Median wall time of each of ``fns`` over ``repeat`` rounds that call each once in turn
    (so that all see the same machine load), after ``warmup`` rounds, in seconds."""
    for _ in range(warmup):
        for fn in fns:
            jax.block_until_ready(fn())
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, ts in zip(fns, times, strict=True):
            ts.append(once(fn)[1])
    return [statistics.median(ts) for ts in times]


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
    parser.add_argument("--size", default="small", choices=sorted(SIZES), help="GPT-2 shape of the targets")
    parser.add_argument("--target-runs", type=int, default=5, help="runs per conversion-target timing")
    parser.add_argument("--jit", action="store_true", help="measure jax.jit(f) too (slow, memory-hungry)")
    parser.add_argument("--record", action="store_true", help="store the results in the performance tables")
    options = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)
    jax.config.update("jax_enable_x64", True)  # int64 token ids under jax.jit: JAX narrows them otherwise

    print(f"jax {jax.__version__}, torch {torch.__version__}, {torch.get_num_threads()} torch threads\n")
    convert_ratio, params = conversion_target(options.size, options.target_runs)
    if options.jit:
        jit_target(options.size, options.repeat)

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
    if options.record:
        import perf_page  # benchmarks/: the script's directory

        command = perf_page.command(__file__, argv)
        perf_page.record(
            "gpt2_convert",
            what=f"`from_torch` of an `ExportedProgram`, GPT-2 {options.size} ({params / 1e6:.0f}M params)",
            result=f"{convert_ratio:.2f}× CPU time (target ≤ 1.0×)",
            anchor="`torch.export.export` of the same model",
            command=command,
        )
        perf_page.record(
            "gpt2_steady",
            what="bundled GPT-2 as a jitted JAX function, steady state",
            result=f"{t_jax / t_torch_1:.2f}×",
            anchor="eager torch, one thread",
            command=command,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
