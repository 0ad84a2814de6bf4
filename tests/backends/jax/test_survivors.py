"""StableHLO → JAX cases written for mutants that survived the mutation run (CONTRIBUTING.md,
*Mutation testing*; ``tools/mutation/survivors.toml`` names the mutant each one kills),
compared with XLA running the same module."""

import numpy as np

import converter
from converter.validate import xla_runner

TOTAL_ORDER = """
func.func public @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xi1>, tensor<8xi1>) {
  %0 = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>
  %1 = stablehlo.compare GT, %a, %b, TOTALORDER : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>
  return %0, %1 : tensor<8xi1>, tensor<8xi1>
}
"""


def test_total_order_compare_among_negative_floats():
    """IEEE totalOrder between negatives (-inf < -2 < -1 < -0.0 < 0.0, negative NaN first):
    the key flips a negative float's magnitude bits."""
    a = np.array([-2.0, -1.0, -np.inf, -0.0, -3.5, -1.0, -np.nan, 0.0], np.float32)
    b = np.array([-1.0, -2.0, -1e30, 0.0, -3.25, -1.0, -1.0, -0.0], np.float32)
    want = xla_runner(converter.from_stablehlo(TOTAL_ORDER, normalize=False), TOTAL_ORDER)((a, b), {})
    got = converter.from_stablehlo(TOTAL_ORDER).to_jax()(a, b)
    assert len(got) == len(want) == 2
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w)
