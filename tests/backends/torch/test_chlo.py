"""CHLO broadcasting ops and the StableHLO ops with dynamic-looking but static shapes,
from hand-written modules (JAX emits neither on CPU)."""

import numpy as np
import torch

import converter

_TEXT = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<4xi32>, %j: tensor<4xi32>)
    -> (tensor<2x3xf32>, tensor<2x3xi1>, tensor<4xi32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<i32>,
        tensor<3x2xf32>) {
  %0 = chlo.broadcast_add %a, %b {broadcast_dimensions = array<i64: 1>}
      : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = chlo.broadcast_compare %a, %b {comparison_direction = #chlo<comparison_direction GT>}
      : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %2 = chlo.broadcast_remainder %i, %j : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %3 = "chlo.constant_like"(%a) {value = 2.5 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = stablehlo.constant dense<[2, 3]> : tensor<2xi64>
  %4 = stablehlo.dynamic_broadcast_in_dim %b, %s, dims = [1]
      : (tensor<3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %5 = stablehlo.get_dimension_size %a, dim = 1 : (tensor<2x3xf32>) -> tensor<i32>
  %6 = "stablehlo.einsum"(%a, %a) {einsum_config = "ab,ac->cb"}
      : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
  %7 = stablehlo.slice %6 [0:3, 0:2] : (tensor<3x3xf32>) -> tensor<3x2xf32>
  return %0, %1, %2, %3, %4, %5, %7 : tensor<2x3xf32>, tensor<2x3xi1>, tensor<4xi32>, tensor<2x3xf32>,
      tensor<2x3xf32>, tensor<i32>, tensor<3x2xf32>
}
"""


def test_chlo_broadcasting_and_static_dynamic_ops():
    a, b = torch.randn(2, 3), torch.randn(3)
    i, j = torch.tensor([7, -7, 7, -7], dtype=torch.int32), torch.tensor([2, 2, -2, 0], dtype=torch.int32)
    out = converter.from_stablehlo(_TEXT).to_torch()(a, b, i, j)
    torch.testing.assert_close(out[0], a + b)
    assert torch.equal(out[1], a > b)
    np.testing.assert_array_equal(out[2].numpy(), [1, -1, 1, -7])
    torch.testing.assert_close(out[3], torch.full((2, 3), 2.5))
    torch.testing.assert_close(out[4], b.expand(2, 3))
    assert int(out[5]) == 3
    torch.testing.assert_close(out[6], (a.T @ a)[:, :2])


def _torch_args(arrays):
    return [torch.from_numpy(a.copy()) if a.ndim else torch.tensor(a.item()) for a in arrays]


def test_chlo_and_rare_ops_in_one_module():
    """Every CHLO op and rare StableHLO op of :mod:`tests.backends.chlo_batch` in one module,
    run by torch as XLA compiles the same text; ``unary_einsum`` (XLA no longer compiles
    it) against NumPy."""
    from tests.backends import chlo_batch as cb
    from tests.compare import assert_outputs_close

    text = cb.module_text(cb.TORCH_BACKEND)
    got = [t.numpy() for t in converter.from_stablehlo(text).to_torch()(*_torch_args(cb.args()))]
    assert_outputs_close(got, cb.xla_outputs(text), 1e-5, 1e-6)
    einsum = converter.from_stablehlo(cb.module_text(["stablehlo.unary_einsum"])).to_torch()
    np.testing.assert_array_equal(einsum(*_torch_args(cb.args())).numpy(), cb.INPUTS["y"][1].T)
