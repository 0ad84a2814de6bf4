"""ONNX → JAX on the ResNet-50 light model shipped in the onnx wheel, against onnxruntime.

    .venv/bin/python benchmarks/bench_onnx_resnet50.py [--repeat 20]

Prints the conversion time (``from_onnx`` + ``to_jax``), the converted JAX function's first
call and steady-state time, and the steady-state ratio against an onnxruntime CPU session
on the same input, all measured in one run. Ratios > 1 mean JAX is slower.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import perf_page  # noqa: E402
from bench_gpt2 import once, steady  # noqa: E402

import converter  # noqa: E402

MODEL = Path(os.path.dirname(onnx.__file__)) / "backend/test/data/light/light_resnet50.onnx"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--record",
        action="store_true",
        help="store the result in the performance tables (benchmarks/perf_page.py)",
    )
    args = parser.parse_args(argv)

    model = onnx.load(MODEL)
    start = time.perf_counter()
    fn = converter.from_onnx(model).to_jax()
    t_convert = time.perf_counter() - start
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)

    _, t_first = once(lambda: fn(x))
    t_jax = steady(lambda: fn(x), args.repeat)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {inp.name: x}
    t_ort = steady(lambda: sess.run(None, feed), args.repeat)
    ref = sess.run(None, feed)[0]
    err = np.abs(np.asarray(fn(x)) - ref).max()

    print(f"ResNet-50 (light), input {shape}; max |jax - onnxruntime| = {err:.2e}")
    # the light models' weights are synthetic: their outputs can be constant (ResNet-50's is
    # 0.001 everywhere), so this agreement says little about numerics; the conformance and
    # round-trip suites do that. The timing is what this benchmark is for.
    print(f"  output spread (std over classes) = {ref.std():.2e}")
    print(f"  conversion (from_onnx + to_jax)   {t_convert:8.2f} s")
    print(f"  JAX first call (trace+compile)    {t_first:8.2f} s  = {t_first / t_jax:7.1f} x steady state")
    print(f"  JAX steady state                  {t_jax * 1e3:8.2f} ms = {t_jax / t_ort:7.2f} x onnxruntime")
    print(f"  onnxruntime steady state          {t_ort * 1e3:8.2f} ms")
    if args.record:
        perf_page.record(
            "onnx_resnet50",
            what="ONNX → JAX: ResNet-50, steady state",
            result=f"{t_jax / t_ort:.2f}×",
            anchor="onnxruntime",
            command=perf_page.command(__file__, argv),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
