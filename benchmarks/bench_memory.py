"""Peak memory of conversions, as multiples of the parameter bytes, on a GPT-2.

    .venv/bin/python benchmarks/bench_memory.py [--size small|medium] [--modes jax,convert-jax,...]

The model is a ``transformers`` ``GPT2LMHeadModel`` with random weights (no download): by
default GPT-2 small's shape (124M parameters, 0.50 GB float32); ``--size medium`` is GPT-2
medium's (355M, 1.42 GB). Every mode runs in a fresh process; the peak resident set comes
from the kernel (``VmHWM`` in ``/proc/self/status``, reset through ``/proc/self/clear_refs``
where a figure is "beyond" a state). The modes:

* ``factory``: building the torch model alone, beyond the imported libraries (the floor of
  the ``convert-*`` figures, which build it too);
* ``export``: ``torch.export.export`` alone, beyond the torch model (for scale);
* ``jax``: ``from_torch`` + ``to_jax`` + one call, beyond the torch model (target ≤ 1.0×);
  ``from_torch``'s snapshot makes the torch tensors copy-on-write and views their memory
  (no copy until the torch model is written), ``to_jax`` uses that memory in place;
* ``jax-shared``: the same with ``from_torch(copy=False)``, which shares the torch tensors
  without copy-on-write;
* ``convert-jax``, ``convert-onnx``, ``convert-module``: the ``convert`` command from the
  model's factory, the whole process beyond the imported libraries: the torch model
  counts (target ≤ 1.5×);
* ``convert-torch``: ``convert --to torch`` (``.pt2``: ``to_torch``, ``torch.export``,
  ``torch.export.save``), for scale;
* ``load``: ``converter.load`` of the ``.shlo`` file ``convert-module`` wrote + ``to_jax`` +
  one call, beyond the imported libraries (target ≤ 1.2×).

A figure of 1.0× is one full copy of the parameters.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = {"small": (12, 768, 12), "medium": (24, 1024, 16), "tiny": (2, 256, 4)}
MODES = (
    "factory",
    "export",
    "jax",
    "jax-shared",
    "convert-jax",
    "convert-onnx",
    "convert-module",
    "convert-torch",
    "load",
)
TARGETS = {
    "jax": 1.0,
    "jax-shared": 1.0,
    "convert-jax": 1.5,
    "convert-onnx": 1.5,
    "convert-module": 1.5,
    "load": 1.2,
}


def factory():
    """``(GPT2LMHeadModel, (input_ids,))`` of the size in ``$BENCH_MEMORY_SIZE``, seeded random
    weights, token ids ``(1, 8)``."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    n_layer, n_embd, n_head = SIZES[os.environ.get("BENCH_MEMORY_SIZE", "small")]
    config = GPT2Config(
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        use_cache=False,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    with torch.no_grad():
        model = GPT2LMHeadModel(config).eval()
    return model, (torch.randint(0, config.vocab_size, (1, 8)),)


def _status(field: str) -> int:
    """A ``/proc/self/status`` figure in bytes (``VmHWM``, ``VmRSS``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak() -> None:
    """Make ``VmHWM`` start again from the current resident set (Linux ``clear_refs`` 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def _param_bytes(model) -> int:
    seen, total = set(), 0
    for t in [*model.parameters(), *model.buffers()]:
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total


def run_mode(mode: str, workdir: Path) -> dict:
    """Run ``mode`` in this process; returns ``{"mode", "param_bytes", "extra"}`` (peak
    bytes beyond the mode's baseline)."""
    import warnings

    import jax
    import torch  # noqa: F401 - imported before the baseline
    import transformers  # noqa: F401

    import converter
    from converter.tools import cli

    warnings.simplefilter("ignore")
    jax.config.update("jax_enable_x64", True)
    jax.numpy.zeros(1).block_until_ready()  # the runtime's own memory is part of the baseline
    shlo = workdir / "model.shlo"
    here = f"{Path(__file__).resolve()}:factory"
    if mode in ("export", "jax", "jax-shared"):
        model, args = factory()
        nbytes = _param_bytes(model)
        _reset_peak()
        base = _status("VmRSS")
        if mode == "export":
            torch.export.export(model, args)
        else:
            f = converter.from_torch(model, args, copy=mode == "jax").to_jax()
            jax.block_until_ready(f(args[0].numpy()))
        return {"mode": mode, "param_bytes": nbytes, "extra": _status("VmHWM") - base}
    _reset_peak()
    base = _status("VmRSS")
    if mode.startswith("convert-"):
        target = mode.removeprefix("convert-")
        suffix = {"module": "shlo", "torch": "pt2"}.get(target, target)
        out = shlo if target == "module" else workdir / f"model.{suffix}"
        code = cli.main(["--from", "torch", "--to", target, here, "-o", str(out)])
        if code:
            raise SystemExit(f"convert --to {target} failed ({code})")
    elif mode == "factory":
        factory()
    elif mode == "load":
        import numpy as np

        f = converter.load(shlo).to_jax()
        ids = np.zeros(f.signature.inputs[0].shape, np.int64)
        jax.block_until_ready(f(ids))
    peak = _status("VmHWM") - base
    model, _ = factory()
    return {"mode": mode, "param_bytes": _param_bytes(model), "extra": peak}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="small", help="GPT-2 shape (default small)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated from {', '.join(MODES)}")
    parser.add_argument("--record", action="store_true", help="store the result in the performance tables")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    os.environ["BENCH_MEMORY_SIZE"] = options.size
    if options.child:
        print(json.dumps(run_mode(options.child, Path(options.workdir))))
        return 0
    modes = [m.strip() for m in options.modes.split(",") if m.strip()]
    if "load" in modes and "convert-module" not in modes:
        modes.insert(modes.index("load"), "convert-module")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    print(f"GPT-2 {options.size}: peak resident memory as multiples of the parameter bytes")
    ratios: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as workdir:
        for mode in modes:
            cmd = [sys.executable, __file__, "--size", options.size, "--child", mode, "--workdir", workdir]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode:
                print(f"  {mode:<15} failed:\n{proc.stderr[-2000:]}")
                continue
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            ratio = result["extra"] / result["param_bytes"]
            target = f"(target ≤ {TARGETS[mode]:.1f}×)" if mode in TARGETS else "(for scale)"
            gb = result["param_bytes"] / 1e9
            print(f"  {mode:<15} {ratio:5.2f}×  {target}   params {gb:.2f} GB", flush=True)
            ratios[mode] = (ratio, gb)
    if options.record:
        record(options, ratios, argv)
    return 0


def record(
    options: argparse.Namespace, ratios: dict[str, tuple[float, float]], argv: list[str] | None
) -> None:
    """Store the ``convert-jax`` and ``jax`` peaks in the performance tables."""
    import perf_page  # benchmarks/: the script's directory

    command = perf_page.command(__file__, argv)
    if "convert-jax" in ratios:
        ratio, gb = ratios["convert-jax"]
        floor = f", building the model alone {ratios['factory'][0]:.2f}×" if "factory" in ratios else ""
        perf_page.record(
            "memory_convert",
            what=f"peak memory of `convert --to jax`, GPT-2 {options.size} (whole process)",
            result=f"{ratio:.2f}× (target ≤ {TARGETS['convert-jax']:.1f}×){floor}",
            anchor=f"the parameter bytes ({gb:.2f} GB)",
            command=command,
        )
    if "jax" in ratios:
        perf_page.record(
            "memory_jax",
            what="peak memory of `from_torch` + `to_jax` + one call, beyond the torch model",
            result=f"{ratios['jax'][0]:.2f}× (target ≤ {TARGETS['jax']:.1f}×)",
            anchor="the parameter bytes",
            command=command,
        )


if __name__ == "__main__":
    sys.exit(main())
