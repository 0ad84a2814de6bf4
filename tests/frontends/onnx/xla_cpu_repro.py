"""Standalone reproducers of the two XLA CPU faults behind the SqueezeNet light model's NaN
(jax/jaxlib 0.10.2, x86-64). Not a test (pytest does not collect it); run it::

    .venv/bin/python tests/frontends/onnx/xla_cpu_repro.py            # one process
    .venv/bin/python tests/frontends/onnx/xla_cpu_repro.py --fresh 10 # 10 fresh processes

Each case compiles a small StableHLO module with the XLA CPU client and compares it with
NumPy. Only JAX is needed.

1. ``splat_dot_reduce``: a ``dot_general`` whose right operand is a splat constant (XLA turns
   it into a broadcast scalar) followed by a ``reduce`` is put in one YNNPACK fusion
   (``__ynn_fusion``, reduce type), which contracts over the first element of K only
   (13.46 instead of 108.1 here). On larger shapes (``splat_conv_reduce``, the SqueezeNet
   tail: a 1x1 convolution with 0.02 weights, ReLU, global average pool) it reads memory it
   never wrote: zeros in most processes, NaN/inf in some, which made the model's output
   intermittently NaN. ``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-reduce`` makes it
   right. A kernel passed as an argument is right, which is what ``from_onnx`` now does with
   large folded constants (they become parameters of kind ``constant``).
2. ``softmax_fma``: ``softmax(s / 169)`` with ``s`` ~ 1.6e12 (the SqueezeNet logits) is NaN.
   XLA rewrites the division as a multiplication by 1/169, fuses it into both the max
   reduction (rounded product) and the ``exp(x - max)`` fusion, where LLVM contracts it into
   ``vfmsub``: ``x - max(x)`` at the maximum is then the product's rounding error (-179),
   ``exp`` underflows everywhere and the sum is 0. The ONNX Softmax/LogSoftmax lowering now
   subtracts the maximum twice (``frontends/onnx/ops/reductions.py``).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np

SPLAT_DOT_REDUCE = """
func.func public @main(%x: tensor<169x8xf32>) -> tensor<64xf32> {
  %w = stablehlo.constant dense<2.000000e-02> : tensor<8x64xf32>
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<169x8xf32>, tensor<8x64xf32>) -> tensor<169x64xf32>
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %r = stablehlo.reduce(%d init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<169x64xf32>, tensor<f32>) -> tensor<64xf32>
  return %r : tensor<64xf32>
}
"""

SPLAT_CONV_REDUCE = """
func.func public @main(%x: tensor<1x512x13x13xf32>) -> tensor<1x1000xf32> {
  %w = stablehlo.constant dense<2.000000e-02> : tensor<1000x512x1x1xf32>
  %c = stablehlo.convolution(%x, %w)
      dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<1x512x13x13xf32>, tensor<1000x512x1x1xf32>) -> tensor<1x1000x13x13xf32>
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %r = stablehlo.reduce(%c init: %z) applies stablehlo.add across dimensions = [2, 3]
      : (tensor<1x1000x13x13xf32>, tensor<f32>) -> tensor<1x1000xf32>
  return %r : tensor<1x1000xf32>
}
"""

SOFTMAX_FMA = """
func.func public @main(%s: tensor<1x1000xf32>) -> tensor<1x1000xf32> {
  %n = stablehlo.constant dense<1.690000e+02> : tensor<1x1000xf32>
  %x = stablehlo.divide %s, %n : tensor<1x1000xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
      : (tensor<1x1000xf32>, tensor<f32>) -> tensor<1xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<1xf32>) -> tensor<1x1000xf32>
  %d = stablehlo.subtract %x, %mb : tensor<1x1000xf32>
  %e = stablehlo.exponential %d : tensor<1x1000xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %t = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<1x1000xf32>, tensor<f32>) -> tensor<1xf32>
  %tb = stablehlo.broadcast_in_dim %t, dims = [0] : (tensor<1xf32>) -> tensor<1x1000xf32>
  %y = stablehlo.divide %e, %tb : tensor<1x1000xf32>
  return %y : tensor<1x1000xf32>
}
"""


def _pattern(shape: tuple) -> np.ndarray:
    return (np.arange(np.prod(shape)) % 7 + 1).reshape(shape).astype(np.float32)


def cases() -> dict:
    """name -> (StableHLO text, input, expected output)."""
    x = _pattern((169, 8))
    c = _pattern((1, 512, 13, 13))
    s = np.full((1, 1000), 1.6013916e12, np.float32)
    return {
        "splat_dot_reduce": (SPLAT_DOT_REDUCE, x, (x.astype(np.float64) @ np.full((8, 64), 0.02)).sum(0)),
        "splat_conv_reduce": (SPLAT_CONV_REDUCE, c, np.full((1, 1000), c.astype(np.float64).sum() * 0.02)),
        "softmax_fma": (SOFTMAX_FMA, s, np.full((1, 1000), 1e-3)),
    }


def run_once() -> dict[str, str]:
    """Compile and run every case in this process; ``ok`` or what came out instead."""
    import jax
    from jax.extend import backend

    client = backend.get_backend("cpu")
    device = client.devices()[0]
    results = {}
    for name, (text, x, want) in cases().items():
        exe = client.compile_and_load(f"module @{name} {{{text}}}", [device])
        got = np.asarray(exe.execute([jax.device_put(x, device)])[0])
        if np.allclose(got, want, rtol=1e-4):
            results[name] = "ok"
        else:
            results[name] = f"WRONG (first {got.ravel()[0]:.6g}, expected {want.ravel()[0]:.6g})"
    return results


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "--fresh":
        tally: dict[str, int] = {}
        for _ in range(int(argv[1])):
            out = subprocess.run([sys.executable, __file__], capture_output=True, text=True, check=True)
            for line in out.stdout.splitlines():
                name, _, verdict = line.partition(": ")
                tally[name] = tally.get(name, 0) + (verdict != "ok")
        for name, bad in tally.items():
            print(f"{name}: wrong in {bad}/{argv[1]} fresh processes")
        return
    for name, verdict in run_once().items():
        print(f"{name}: {verdict}")


if __name__ == "__main__":
    main(sys.argv[1:])
