"""dot_general, convolution, cholesky, triangular_solve, fft and the LAPACK custom calls."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from .helpers import assert_same

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3, 4)).astype(np.float32)
SPD = (lambda m: m @ m.T + 4 * np.eye(4, dtype=np.float32))(rng.standard_normal((4, 4)).astype(np.float32))


def test_dot_general_batch_and_contracting():
    y = rng.standard_normal((2, 5, 4)).astype(np.float32)
    assert_same(
        lambda a, b: (lax.dot_general(a, b, (((2,), (2,)), ((0,), (0,)))), a @ b[0].T),
        X,
        y,
        rtol=1e-5,
        atol=1e-5,
    )


def test_dot_int_and_mixed_precision():
    a = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    assert_same(
        lambda a: (
            a @ a.T,
            lax.dot(a.astype(jnp.bfloat16), a.T.astype(jnp.bfloat16), preferred_element_type=jnp.float32),
        ),
        a,
    )


@pytest.mark.parametrize(
    "kw",
    [
        dict(window_strides=(1, 1), padding="SAME"),
        dict(window_strides=(2, 1), padding=((1, 0), (2, 1)), rhs_dilation=(1, 2)),
        dict(window_strides=(1, 1), padding=((1, 1), (-1, 0)), lhs_dilation=(2, 1)),
        dict(window_strides=(1, 1), padding="VALID", feature_group_count=2),
    ],
)
def test_convolution_layouts(kw):
    x = rng.standard_normal((2, 9, 8, 4)).astype(np.float32)  # NHWC
    groups = kw.get("feature_group_count", 1)
    w = rng.standard_normal((3, 3, 4 // groups, 6)).astype(np.float32)  # HWIO
    f = lambda x, w: lax.conv_general_dilated(x, w, dimension_numbers=("NHWC", "HWIO", "NHWC"), **kw)  # noqa: E731
    assert_same(f, x, w, rtol=1e-4, atol=1e-4)


def test_convolution_batch_group_count_via_grad():
    x = rng.standard_normal((2, 4, 7)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3)).astype(np.float32)
    f = lambda x, w: lax.conv_general_dilated(x, w, (1,), "SAME", feature_group_count=2).sum() ** 2  # noqa: E731
    assert_same(jax.grad(f, argnums=1), x, w, rtol=1e-4, atol=1e-4)


def test_conv1d_and_3d():
    x1 = rng.standard_normal((1, 3, 10)).astype(np.float32)
    assert_same(
        lambda x: lax.conv(x, jnp.ones((2, 3, 3), jnp.float32), (2,), "SAME"), x1, rtol=1e-5, atol=1e-5
    )
    x3 = rng.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    assert_same(
        lambda x: lax.conv(x, jnp.ones((2, 2, 2, 2, 2), jnp.float32), (1, 1, 1), "VALID"),
        x3,
        rtol=1e-5,
        atol=1e-5,
    )


def test_lapack_targets():
    b = rng.standard_normal((4, 2)).astype(np.float32)
    assert_same(lambda a: jnp.linalg.inv(a), SPD, rtol=1e-4, atol=1e-5)
    assert_same(lambda a, b: jnp.linalg.solve(a, b), SPD, b, rtol=1e-4, atol=1e-5)
    assert_same(
        lambda a: (jnp.linalg.cholesky(a), jnp.linalg.det(a), jnp.linalg.slogdet(a)),
        SPD,
        rtol=1e-4,
        atol=1e-4,
    )
    assert_same(lambda a: jnp.linalg.eigvalsh(a), SPD, rtol=1e-4, atol=1e-4)
    assert_same(lambda a: jnp.linalg.svd(a, compute_uv=False), SPD, rtol=1e-4, atol=1e-4)


def test_decompositions_reconstruct():
    assert_same(lambda a: (lambda q, r: q @ r)(*jnp.linalg.qr(a)), SPD, rtol=1e-4, atol=1e-4)
    assert_same(lambda a: (lambda w, v: (v * w) @ v.T)(*jnp.linalg.eigh(a)), SPD, rtol=1e-4, atol=1e-4)
    assert_same(lambda a: (lambda u, s, vt: (u * s) @ vt)(*jnp.linalg.svd(a)), SPD, rtol=1e-4, atol=1e-4)


def test_triangular_solve_and_fft():
    b = rng.standard_normal((4, 3)).astype(np.float32)
    for lower in (True, False):
        for trans in (0, 1):
            f = functools.partial(jax.scipy.linalg.solve_triangular, lower=lower, trans=trans)
            assert_same(f, SPD, b, rtol=1e-4, atol=1e-4)
    assert_same(
        lambda x: (jnp.fft.fft(x), jnp.fft.rfft(x), jnp.fft.irfft(jnp.fft.rfft(x)), jnp.fft.ifft2(x)),
        X,
        rtol=1e-4,
        atol=1e-4,
    )


def test_cholesky_op():
    # stablehlo.cholesky (emitted when lowering for other platforms / by other tools)
    text = """
    func.func @main(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
      %0 = stablehlo.cholesky %a, lower = true : tensor<4x4xf32>
      return %0 : tensor<4x4xf32>
    }"""
    import torch

    import converter

    out = converter.from_stablehlo(text).to_torch()(torch.tensor(SPD))
    np.testing.assert_allclose(out.numpy(), np.linalg.cholesky(SPD), rtol=1e-5, atol=1e-5)


_TRSM = """
func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<3x4xf32>) {
  %0 = "stablehlo.triangular_solve"(%a, %b) {left_side = true, lower = true, unit_diagonal = false,
      transpose_a = #stablehlo<transpose TRANSPOSE>} : (tensor<4x4xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %bt = stablehlo.transpose %b, dims = [1, 0] : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %1 = "stablehlo.triangular_solve"(%a, %bt) {left_side = false, lower = false, unit_diagonal = true,
      transpose_a = #stablehlo<transpose NO_TRANSPOSE>}
      : (tensor<4x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %0, %1 : tensor<4x3xf32>, tensor<3x4xf32>
}
"""


def test_triangular_solve_op():
    import torch

    import converter

    b = rng.standard_normal((4, 3)).astype(np.float32)
    x0, x1 = converter.from_stablehlo(_TRSM).to_torch()(torch.tensor(SPD), torch.tensor(b))
    lo = np.tril(SPD)
    np.testing.assert_allclose(lo.T @ x0.numpy(), b, rtol=1e-4, atol=1e-4)
    up = np.triu(SPD, 1) + np.eye(4, dtype=np.float32)
    np.testing.assert_allclose(x1.numpy() @ up, b.T, rtol=1e-4, atol=1e-4)
