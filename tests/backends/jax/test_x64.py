"""64-bit values inside a module survive when the caller has not enabled x64 (regression: an
f32 model with an internal i64 constant used to have it narrowed to 32 bits, so
INT64_MAX became -1; here 2**32 would become 0)."""

import subprocess
import sys

MODULE = """
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %big = stablehlo.constant dense<4294967296> : tensor<i64>
  %f = stablehlo.convert %big : (tensor<i64>) -> tensor<f32>
  %b = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<3xf32>
  %y = stablehlo.add %x, %b : tensor<3xf32>
  return %y : tensor<3xf32>
}
"""


def test_internal_int64_without_global_x64():
    code = "\n".join(
        [
            "import jax, numpy as np, converter",
            "assert not jax.config.jax_enable_x64",
            f"fn = converter.from_stablehlo({MODULE!r}).to_jax()",
            "print(np.asarray(fn(np.zeros(3, np.float32))).tolist())",
        ]
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == str([float(2**32)] * 3)
