"""dot_general and convolution through the JAX backend (general dimension numbers)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import converter
from tests.compare import run_xla

from .helpers import assert_same

rng = np.random.default_rng(0)


def test_dot_general_batch_and_contracting_anywhere():
    a = rng.normal(size=(3, 2, 5, 4)).astype(np.float32)
    b = rng.normal(size=(4, 3, 5, 6)).astype(np.float32)
    assert_same(lambda a, b: lax.dot_general(a, b, (((2, 3), (2, 0)), ((0,), (1,)))), a, b, rtol=1e-5)


def test_matmul_mixed_precision_result():
    a = rng.normal(size=(4, 8)).astype(jnp.bfloat16)
    assert_same(lambda a: lax.dot(a, a.T, preferred_element_type=jnp.float32), a, rtol=1e-2)


@pytest.mark.parametrize("groups,dil,lhs_dil,stride", [(1, 1, 1, 1), (2, 2, 1, 2), (4, 1, 2, 1)])
def test_convolution_layouts_groups_dilations(groups, dil, lhs_dil, stride):
    x = rng.normal(size=(2, 9, 9, 4)).astype(np.float32)  # NHWC
    w = rng.normal(size=(3, 3, 4 // groups, 8)).astype(np.float32)  # HWIO

    def conv(x, w):
        return lax.conv_general_dilated(
            x,
            w,
            (stride, stride),
            [(1, 2), (0, 1)],
            lhs_dilation=(lhs_dil, 1),
            rhs_dilation=(dil, dil),
            dimension_numbers=("NHWC", "HWIO", "NCHW"),
            feature_group_count=groups,
        )

    assert_same(conv, x, w, rtol=1e-5, atol=1e-5)


def test_convolution_batch_group_count_from_grad():
    x = rng.normal(size=(4, 3, 8)).astype(np.float32)
    w = rng.normal(size=(5, 3, 3)).astype(np.float32)

    def loss(w, x):
        return jnp.sum(lax.conv_general_dilated(x, w, (1,), "SAME") ** 2)

    assert_same(jax.grad(loss), w, x, rtol=1e-4, atol=1e-4)


_TRIANGULAR = [
    dict(left_side=True, lower=True, transpose_a=False, unit_diagonal=False),
    dict(left_side=True, lower=False, transpose_a=True, unit_diagonal=False),
    dict(left_side=False, lower=True, transpose_a=True, unit_diagonal=True),
    dict(left_side=False, lower=False, transpose_a=False, unit_diagonal=False),
]


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
@pytest.mark.parametrize("kw", _TRIANGULAR, ids=lambda kw: "-".join(k for k, v in kw.items() if v) or "plain")
def test_triangular_solve_op_16bit(dtype, kw):
    """stablehlo.triangular_solve, which JAX emits for float16/bfloat16 (regression: the
    JAX backend had no rule for it)."""
    a = (rng.standard_normal((2, 4, 4)) + 4 * np.eye(4)).astype(dtype)
    b = rng.standard_normal((2, 4, 3) if kw["left_side"] else (2, 3, 4)).astype(dtype)
    assert (
        "stablehlo.triangular_solve"
        in jax.jit(lambda a, b: lax.linalg.triangular_solve(a, b, **kw)).lower(a, b).as_text()
    )
    assert_same(lambda a, b: lax.linalg.triangular_solve(a, b, **kw), a, b, rtol=0, atol=0)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, w: x @ w.T,  # a Linear on one row: XLA's CPU dot would copy w transposed
        lambda x, w: jnp.transpose(x).T @ w.T,
        lambda x, w: lax.dot_general(
            jnp.transpose(x[None], (1, 0, 2)), jnp.transpose(w[None], (0, 2, 1)), (((2,), (1,)), ((1,), (0,)))
        ),
        lambda x, w: jnp.einsum("ij,kj->ik", x, w) + (w.T)[:1, :4].sum(),  # the transpose has another use
        lambda x, w: jnp.transpose(jnp.stack([x, 2 * x]), (1, 0, 2)) @ w.T,  # free dimensions swapped
    ],
    ids=["linear-row", "double", "batched", "shared-transpose", "reordered"],
)
def test_dot_general_of_a_transposed_operand_matches_jax(fn):
    """A ``transpose`` feeding ``dot_general``, folded into its dimension numbers where the
    permutation allows (not in "reordered": it swaps the free dimensions): results as
    jax.jit's."""
    x = rng.normal(size=(1, 64)).astype(np.float32)
    w = rng.normal(size=(48, 64)).astype(np.float32)
    assert_same(fn, x, w, rtol=1e-5, atol=1e-5)


def test_linear_on_one_row_uses_the_weight_in_place():
    """``x @ W.T`` with one row of ``x``: the converted function's compiled program needs no
    temporary as large as the weight (jax.jit's own program copies the weight transposed)."""
    import converter

    x = jax.ShapeDtypeStruct((1, 4096), jnp.float32)  # XLA copies from 4096 contracted up
    w = jax.ShapeDtypeStruct((1024, 4096), jnp.float32)
    fn = lambda x, w: x @ w.T  # noqa: E731
    assert jax.jit(fn).lower(x, w).compile().memory_analysis().temp_size_in_bytes >= 1024 * 4096 * 4
    f = converter.from_stablehlo(jax.jit(fn).lower(x, w).as_text()).to_jax()
    compiled = jax.jit(f.apply).lower(f.params, x, w).compile()
    assert compiled.memory_analysis().temp_size_in_bytes < 1024 * 4096 * 4 // 8


_CONV_WITHOUT_PADDING = """
func.func public @main(%x: tensor<1x2x5xf32>, %w: tensor<3x2x2xf32>) -> tensor<1x3x4xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0],
      window = {stride = [1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<1x2x5xf32>, tensor<3x2x2xf32>) -> tensor<1x3x4xf32>
  return %0 : tensor<1x3x4xf32>
}"""


def test_convolution_without_a_padding_attribute_pads_nothing():
    """A convolution whose ``padding`` is left out (the spec's default: zeros; jax.jit always
    writes it): against XLA."""
    x = rng.normal(size=(1, 2, 5)).astype(np.float32)
    w = rng.normal(size=(3, 2, 2)).astype(np.float32)
    got = converter.from_stablehlo(_CONV_WITHOUT_PADDING).to_jax()(x, w)
    (want,) = run_xla(_CONV_WITHOUT_PADDING, x, w)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


_CONV_REVERSED = """
func.func public @main(%x: tensor<1x1x4x5xf32>, %w: tensor<1x1x2x3xf32>) -> tensor<1x1x3x3xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1],
      window = {stride = [1, 1], pad = [[0, 0], [0, 0]], reverse = [REVERSE]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<1x1x4x5xf32>, tensor<1x1x2x3xf32>) -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}"""


@pytest.mark.parametrize("reverse", [(False, True), (True, False), (True, True), (False, False)])
def test_convolution_window_reversal(reverse):
    """``window_reversal`` (spec ``convolution``: the kernel is read reversed along each
    spatial dimension marked true; jax.jit never writes it): the cross-correlation with the
    kernel flipped along those dimensions, computed in NumPy."""
    x = rng.normal(size=(1, 1, 4, 5)).astype(np.float32)
    w = rng.normal(size=(1, 1, 2, 3)).astype(np.float32)
    text = _CONV_REVERSED.replace("REVERSE", ", ".join("true" if r else "false" for r in reverse))
    k = w[0, 0][:: -1 if reverse[0] else 1, :: -1 if reverse[1] else 1]
    want = np.array([[np.sum(x[0, 0, i : i + 2, j : j + 3] * k) for j in range(3)] for i in range(3)])
    got = np.asarray(converter.from_stablehlo(text).to_jax()(x, w))
    np.testing.assert_allclose(got[0, 0], want, rtol=1e-5, atol=1e-5)


_TRIANGULAR_SOLVE = """
func.func public @main(%a: tensor<3x3xcomplex<f32>>, %b: tensor<3x2xcomplex<f32>>)
    -> tensor<3x2xcomplex<f32>> {
  %0 = "stablehlo.triangular_solve"(%a, %b) {left_side = true, lower = true, unit_diagonal = false,
      transpose_a = #stablehlo<transpose TRANSPOSE>} : (tensor<3x3xcomplex<f32>>, tensor<3x2xcomplex<f32>>)
      -> tensor<3x2xcomplex<f32>>
  return %0 : tensor<3x2xcomplex<f32>>
}"""


@pytest.mark.parametrize("transpose", ["TRANSPOSE", "ADJOINT"])
def test_complex_triangular_solve_transpose_and_adjoint(transpose):
    """Spec ``triangular_solve``: ``op(a)`` is ``transpose(a)`` for ``TRANSPOSE`` and
    ``adjoint(a)`` (the conjugate transpose) for ``ADJOINT``, of the lower triangle of ``a``;
    on complex values (what jax.jit never emits: it calls LAPACK), against NumPy."""
    a = (rng.normal(size=(3, 3)) + 1j * rng.normal(size=(3, 3)) + 3 * np.eye(3)).astype(np.complex64)
    b = (rng.normal(size=(3, 2)) + 1j * rng.normal(size=(3, 2))).astype(np.complex64)
    text = _TRIANGULAR_SOLVE.replace("TRANSPOSE>", f"{transpose}>")
    got = np.asarray(converter.from_stablehlo(text).to_jax()(a, b))
    op_a = np.tril(a).T if transpose == "TRANSPOSE" else np.tril(a).conj().T
    np.testing.assert_allclose(got, np.linalg.solve(op_a, b), rtol=1e-5, atol=1e-5)


_CHOLESKY_DEFAULT = """
func.func public @main(%a: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %0 = "stablehlo.cholesky"(%a) : (tensor<3x3xf32>) -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}"""


def test_cholesky_without_lower_gives_the_upper_factor():
    """Spec ``cholesky``: ``lower`` is optional, false by default: the upper factor ``U``
    (``a = U^T U``) of the upper triangle, zeros below; against NumPy's (lower) factor
    transposed. The lower triangle holds garbage that must not be read."""
    m = rng.normal(size=(3, 3))
    a = (m @ m.T + 3 * np.eye(3)).astype(np.float32)
    a_upper = np.triu(a) + np.tril(np.full((3, 3), 100.0, np.float32), -1)
    got = np.asarray(converter.from_stablehlo(_CHOLESKY_DEFAULT).to_jax()(a_upper))
    np.testing.assert_allclose(got, np.linalg.cholesky(a.astype(np.float64)).T, rtol=1e-5, atol=1e-5)


_CONV_BARE_WINDOW = """
func.func public @main(%x: tensor<1x1x5xf32>, %w: tensor<1x1x2xf32>) -> tensor<1x1x4xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<1x1x5xf32>, tensor<1x1x2xf32>) -> tensor<1x1x4xf32>
  return %0 : tensor<1x1x4xf32>
}"""


def test_convolution_without_window_attributes_takes_unit_strides_and_dilations():
    """A convolution whose ``window_strides``, ``padding``, ``lhs_dilation`` and
    ``rhs_dilation`` are all left out (spec: ones and zeros by default): the plain valid
    cross-correlation, in NumPy."""
    x = np.array([[[1, 2, 4, 8, 16]]], np.float32)
    w = np.array([[[1, -3]]], np.float32)
    got = np.asarray(converter.from_stablehlo(_CONV_BARE_WINDOW).to_jax()(x, w))
    np.testing.assert_array_equal(got[0, 0], np.correlate(x[0, 0], w[0, 0], mode="valid"))
