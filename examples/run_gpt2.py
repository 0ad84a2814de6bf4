"""The main job on the bundled GPT-2: convert it from PyTorch to JAX, run both, compare.

    .venv/bin/python examples/run_gpt2.py [-o build/gpt2.jax]

Converts ``examples/gpt2.py:factory`` with :func:`converter.from_torch`, runs the JAX function
(``Module.to_jax()``) and eager torch on the example token ids, writes the ``jax.export``
artifact that ``convert --from torch --to jax`` writes and runs it too, then prints the
largest absolute difference of the logits and the timings. Exits with status 1 if either JAX
result differs from torch beyond rtol 1e-5, atol 1e-5 (float32).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np
import torch

import converter
from converter.fileio import atomic_write
from converter.tools import cli

HERE = Path(__file__).resolve().parent
RTOL = ATOL = 1e-5


def _timed(fn, repeat: int = 1) -> tuple[object, float]:
    """``fn()``'s last result and its median wall time over ``repeat`` runs, in seconds."""
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return out, statistics.median(times)


def _logits(out) -> np.ndarray:
    return np.asarray(out["logits"] if isinstance(out, dict) else out.logits.detach())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-o", "--output", default="build/gpt2.jax", help="the jax.export artifact")
    parser.add_argument("--repeat", type=int, default=20, help="calls for the steady-state timings")
    options = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)  # the artifact takes int64 ids (JAX narrows them otherwise)
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch.export's pytree deprecations

    model, args, _ = cli.load_factory(HERE / "gpt2.py", "factory")
    (input_ids,) = args
    n_params = sum(p.numel() for p in model.parameters())
    print(f"GPT-2 ({n_params:,} parameters), input_ids {list(input_ids.shape)} int64")

    module, t_convert = _timed(lambda: converter.from_torch(model, args))
    print(f"converted: {module!r}, {sum(module.op_histogram().values())} StableHLO ops")
    fn = module.to_jax()
    ids = input_ids.numpy()
    out_jax, t_first = _timed(lambda: fn(ids))
    out_jax, t_jax = _timed(lambda: fn(ids), options.repeat)
    with torch.no_grad():
        out_torch, t_torch = _timed(lambda: model(input_ids), options.repeat)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # eager torch on a busy machine suffers from its thread pool
        _, t_torch_1 = _timed(lambda: model(input_ids), options.repeat)
        torch.set_num_threads(threads)

    exported, t_export = _timed(lambda: cli.export_jax(module))
    Path(options.output).parent.mkdir(parents=True, exist_ok=True)
    atomic_write(options.output, bytes(exported.serialize()))
    restored = jax.export.deserialize(bytearray(Path(options.output).read_bytes()))
    out_file = restored.call(ids)

    ref = _logits(out_torch)
    ok = True
    for name, out in (("JAX function", out_jax), (f"jax.export artifact {options.output}", out_file)):
        got = _logits(out)
        err = float(np.max(np.abs(got - ref)))
        good = np.allclose(got, ref, rtol=RTOL, atol=ATOL)
        ok &= bool(good)
        print(f"max |logits - torch| ({name}): {err:.2e}  {'OK' if good else 'MISMATCH'}")
    print(
        f"timings: from_torch {t_convert:.2f} s, jax.export {t_export:.2f} s, "
        f"first call (trace + compile) {t_first:.2f} s, "
        f"steady state JAX {t_jax * 1e3:.2f} ms vs eager torch {t_torch * 1e3:.2f} ms on {threads} threads, "
        f"{t_torch_1 * 1e3:.2f} ms on 1 (JAX/torch {t_jax / t_torch:.3g}, {t_jax / t_torch_1:.3g})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
