"""StableHLO → ONNX cases written for mutants that survived the mutation run (CONTRIBUTING.md,
*Mutation testing*; ``tools/mutation/survivors.toml`` names the mutant each one kills),
compared with ``jax.jit`` of the source function."""

import numpy as np
from jax import lax

from .helpers import assert_onnx_same


def test_clamp_with_tensor_and_scalar_bounds():
    """``stablehlo.clamp`` (``lax.clamp``; ``jnp.clip`` lowers to max/min instead) with
    bounds of the operand's shape and scalar bounds: float32, and int16 (onnxruntime has no
    int16 Max/Min: both operands are widened)."""
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    lo = np.full((3, 4), -1.5, np.float32)
    hi = np.linspace(0.5, 2, 12, dtype=np.float32).reshape(3, 4)
    i = np.arange(-6, 6, dtype=np.int16).reshape(3, 4)
    ilo = np.array([-9, -2, -4, 0] * 3, np.int16).reshape(3, 4)

    def fn(x, lo, hi, i, ilo):
        return lax.clamp(lo, x, hi), lax.clamp(ilo, i, np.int16(3))

    assert_onnx_same(fn, x, lo, hi, i, ilo)
