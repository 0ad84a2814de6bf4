"""batch_norm_* ops (hand-written StableHLO: JAX does not emit them) against NumPy."""

import numpy as np
import torch

import converter

_TEXT = """
func.func @main(%x: tensor<2x3x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %dy: tensor<2x3x4xf32>)
    -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3xf32>,
        tensor<3xf32>) {
  %o, %m, %v = "stablehlo.batch_norm_training"(%x, %s, %b) {epsilon = 1.0e-3 : f32, feature_index = 1 : i64}
      : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %i = "stablehlo.batch_norm_inference"(%x, %s, %b, %m, %v) {epsilon = 1.0e-3 : f32, feature_index = 1 : i64}
      : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4xf32>
  %gx, %gs, %gb = "stablehlo.batch_norm_grad"(%x, %s, %m, %v, %dy)
      {epsilon = 1.0e-3 : f32, feature_index = 1 : i64}
      : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x4xf32>)
      -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return %o, %m, %v, %i, %gx, %gs, %gb : tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x4xf32>,
      tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>
}
"""


def test_batch_norm_ops_match_autograd_reference():
    rng = np.random.default_rng(0)
    x, dy = (torch.tensor(rng.standard_normal((2, 3, 4)), dtype=torch.float32) for _ in range(2))
    s, b = torch.tensor([1.0, 2.0, 0.5]), torch.tensor([0.1, -0.2, 0.3])
    o, m, v, i, gx, gs, gb = converter.from_stablehlo(_TEXT).to_torch()(x, s, b, dy)
    xr, sr, br = (t.clone().requires_grad_() for t in (x, s, b))
    ref = torch.nn.functional.batch_norm(xr, None, None, sr, br, training=True, eps=1e-3)
    ref.backward(dy)
    torch.testing.assert_close(o, ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(i, ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(m, x.mean((0, 2)))
    torch.testing.assert_close(v, x.var((0, 2), unbiased=False))
    torch.testing.assert_close(gx, xr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(gs, sr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(gb, br.grad, rtol=1e-4, atol=1e-5)
