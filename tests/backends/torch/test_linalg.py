"""dot_general, convolution, cholesky, triangular_solve, fft and the LAPACK custom calls."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from .helpers import assert_same, run_both, torch_of

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


_DOT_TO_I1 = """
func.func @main(%a: tensor<2x3xi32>, %b: tensor<3x2xi32>, %p: tensor<2x3xi1>, %q: tensor<3x2xi1>)
    -> (tensor<2x2xi1>, tensor<2x2xi1>) {
  %r = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<2x3xi32>, tensor<3x2xi32>) -> tensor<2x2xi1>
  %s = stablehlo.dot_general %p, %q, contracting_dims = [1] x [0]
      : (tensor<2x3xi1>, tensor<3x2xi1>) -> tensor<2x2xi1>
  return %r, %s : tensor<2x2xi1>, tensor<2x2xi1>
}"""


def test_dot_general_to_bool_is_a_nonzero_sum():
    """A dot_general with an i1 result: the sum of products converted to bool, true when
    nonzero, negative sums included (integer operands), an or of ands for i1 operands;
    against XLA."""
    import torch

    import converter
    from converter.tools.validate import xla_runner

    module = converter.from_stablehlo(_DOT_TO_I1)
    a = np.array([[-1, 0, 0], [1, 2, 0]], np.int32)
    b = np.array([[1, 0], [0, -1], [5, 0]], np.int32)
    p, q = a != 0, np.array([[True, False], [False, False], [True, True]])
    want = xla_runner(module)((a, b, p, q), {})
    got = module.to_torch()(*(torch.tensor(v) for v in (a, b, p, q)))
    assert want[0].tolist() == [[True, False], [True, True]]  # -1 and -2 are true
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w)


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


def test_convolution_equal_padding_above_256_is_the_convolutions_own():
    """Equal low and high padding is the convolution's ``padding`` argument (no separate pad
    op) whatever its size: 300 on each side, beyond the integers CPython shares."""
    import torch
    from converter.backends.torch.native import aten_target

    from .helpers import to_torch_module, torch_of

    aten = torch.ops.aten
    x = rng.standard_normal((1, 2, 3)).astype(np.float32)
    w = rng.standard_normal((1, 2, 2)).astype(np.float32)
    f = lambda x, w: lax.conv_general_dilated(x, w, (1,), ((300, 300),))  # noqa: E731
    module = to_torch_module(f, x, w)
    calls = [n for n in module.graph_module.graph.nodes if n.op == "call_function"]
    assert aten.constant_pad_nd.default not in {aten_target(n) for n in calls}
    (conv,) = [n for n in calls if aten_target(n) is aten.convolution.default]
    assert list(conv.args[4]) == [300]
    got = module(torch_of(x), torch_of(w)).numpy()
    np.testing.assert_allclose(got, np.asarray(jax.jit(f)(x, w)), rtol=1e-6, atol=1e-6)


_CONV_WITHOUT_PAD = """
func.func @main(%x: tensor<1x3x10xf32>, %w: tensor<2x3x3xf32>) -> tensor<1x2x4xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {stride = [2]}
    {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
    : (tensor<1x3x10xf32>, tensor<2x3x3xf32>) -> tensor<1x2x4xf32>
  return %0 : tensor<1x2x4xf32>
}"""


def test_convolution_without_a_padding_attribute():
    """StableHLO spec: ``padding`` defaults to zeros (jax.jit always writes it)."""
    import torch

    import converter
    from tests.compare import run_xla

    x = rng.standard_normal((1, 3, 10)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3)).astype(np.float32)
    got = converter.from_stablehlo(_CONV_WITHOUT_PAD).to_torch()(torch.from_numpy(x), torch.from_numpy(w))
    np.testing.assert_allclose(got.numpy(), run_xla(_CONV_WITHOUT_PAD, x, w)[0], rtol=1e-5, atol=1e-5)


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


def test_trsm_right_side_and_adjoint():
    """``?trsm`` with the matrix on the right (``side = R``, ``x a = b``), and the conjugate
    transpose of a complex one (``trans = C``), against XLA."""
    b = rng.standard_normal((3, 4)).astype(np.float32)
    right = functools.partial(lax.linalg.triangular_solve, left_side=False, lower=True, transpose_a=True)
    assert_same(right, SPD, b, rtol=1e-4, atol=1e-4)
    a = (SPD + 1j * np.triu(SPD, 1)).astype(np.complex64)
    bc = (b.T + 0.5j).astype(np.complex64)
    adjoint = functools.partial(
        lax.linalg.triangular_solve, left_side=True, transpose_a=True, conjugate_a=True
    )
    assert_same(adjoint, a, bc, rtol=1e-4, atol=1e-4)


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


_CHOLESKY_TRIANGLES = """
func.func @main(%a: tensor<2x3x3xf64>) -> (tensor<2x3x3xf64>, tensor<2x3x3xf64>) {
  %0 = stablehlo.cholesky %a, lower = true : tensor<2x3x3xf64>
  %1 = stablehlo.cholesky %a : tensor<2x3x3xf64>
  return %0, %1 : tensor<2x3x3xf64>, tensor<2x3x3xf64>
}"""


def test_cholesky_reads_only_its_triangle_and_is_upper_by_default():
    """StableHLO spec (cholesky): only the ``lower`` (default false: upper) triangle of ``a``
    is read, the other may hold anything; the named triangle of the result is the factor
    (NumPy's lower one ``L``, or ``L^T`` for upper), batched. The other triangle of the
    result is implementation-defined and not compared."""
    import torch

    import converter

    m = rng.standard_normal((2, 3, 3))
    spd = m @ m.transpose(0, 2, 1) + 3 * np.eye(3)
    lower_in = np.tril(spd) + np.triu(np.full((3, 3), 50.0), 1)  # junk above the diagonal
    upper_in = np.triu(spd) + np.tril(np.full((3, 3), -50.0), -1)  # junk below it
    module = converter.from_stablehlo(_CHOLESKY_TRIANGLES).to_torch()
    low, _ = module(torch.from_numpy(lower_in))
    _, up = module(torch.from_numpy(upper_in))
    factor = np.linalg.cholesky(spd)
    np.testing.assert_allclose(np.tril(low.numpy()), factor, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.triu(up.numpy()), factor.transpose(0, 2, 1), rtol=1e-10, atol=1e-12)


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


# --------------------------------------------------------------------------- LAPACK targets
# Each target runs the torch function that calls the same LAPACK routine; torch links MKL and
# jaxlib another LAPACK, so vectors defined up to sign/phase are checked by their defining
# equations, everything unique against JAX.

SQ = rng.standard_normal((2, 4, 4)).astype(np.float32)


def test_ormqr_targets():
    h, tau = jnp.linalg.qr(SQ[0], mode="raw")
    c = rng.standard_normal((4, 3)).astype(np.float32)
    assert_same(
        lambda h, tau, c: (
            lax.linalg.ormqr(h.T, tau, c, left=True, transpose=True),
            lax.linalg.ormqr(h.T, tau, c.T, left=False, transpose=False),
            lax.linalg.householder_product(h.T, tau),
        ),
        np.asarray(h),
        np.asarray(tau),
        c,
        rtol=1e-4,
        atol=1e-5,
    )


def test_geev_targets():
    a = np.array([[2.0, -3.0, 0.5], [3.0, 2.0, 0.0], [0.1, 0.2, -1.0]], np.float32)  # a conjugate pair
    got, want = run_both(lambda a: lax.linalg.eig(a, compute_left_eigenvectors=False), a)
    (w, v), (w_jax, _) = got, want
    assert v.dtype == np.complex64 and v.shape == (3, 3)
    np.testing.assert_allclose(np.sort_complex(w), np.sort_complex(w_jax), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a @ v, v * w, rtol=1e-4, atol=1e-5)  # A v = v diag(w)
    np.testing.assert_allclose(np.linalg.norm(v, axis=0), 1, rtol=1e-5)
    vals = lambda a: lax.linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)  # noqa: E731
    got, want = run_both(vals, SQ)
    np.testing.assert_allclose(np.sort_complex(got[0]), np.sort_complex(want[0]), rtol=1e-5, atol=1e-5)


_RAW = """
func.func @main(%a: tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2xi32>,
    tensor<2x4x4xf32>, tensor<2x4xi32>, tensor<2xi32>) {
  %0:2 = stablehlo.custom_call @lapack_spotrf_ffi(%a) {mhlo.backend_config = {uplo = 76 : ui8}}
      : (tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2xi32>)
  %1:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%a) {mhlo.backend_config = {}}
      : (tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4xi32>, tensor<2xi32>)
  return %0#0, %0#1, %1#0, %1#1, %1#2
      : tensor<2x4x4xf32>, tensor<2xi32>, tensor<2x4x4xf32>, tensor<2x4xi32>, tensor<2xi32>
}"""


def test_potrf_upper_reads_and_writes_its_triangle():
    """``?potrf`` with ``uplo = U`` (85): the factor from the upper triangle alone, written
    there, the strictly lower triangle of the input left as it was, as LAPACK does."""
    import scipy.linalg.lapack as sla
    import torch

    import converter

    text = _RAW.replace("uplo = 76", "uplo = 85")
    a = np.stack([SPD, SPD]).copy()
    a[0] += np.tril(np.full((4, 4), 7.0), -1)  # garbage below the diagonal: not read
    a[1, 2, 2] = -30.0
    chol, info, *_ = converter.from_stablehlo(text).to_torch()(torch.tensor(a))
    want = [sla.spotrf(m, lower=False, clean=False) for m in a]
    assert info.tolist() == [w[1] for w in want] == [0, 3]
    np.testing.assert_allclose(chol[0].numpy(), want[0][0], rtol=1e-5, atol=1e-5)


def test_potrf_getrf_raw_results_and_info():
    import scipy.linalg.lapack as sla
    import torch

    import converter

    a = np.stack([SPD, SPD]).copy()
    a[1, 2, 2] = -30.0  # leading minor 3 not positive definite
    a[1, :, 1] = 0.0  # and U[1, 1] of its LU exactly zero
    chol, chol_info, lu, ipiv, lu_info = converter.from_stablehlo(_RAW).to_torch()(torch.tensor(a))
    assert chol_info.tolist() == [sla.spotrf(m, lower=True)[1] for m in a] == [0, 2]
    np.testing.assert_allclose(
        chol[0].numpy(), sla.spotrf(a[0], lower=True, clean=False)[0], rtol=1e-5, atol=1e-5
    )
    for i, m in enumerate(a):
        want_lu, want_piv, want_info = sla.sgetrf(m)
        np.testing.assert_allclose(lu[i].numpy(), want_lu, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(ipiv[i].numpy(), want_piv + 1)
        assert lu_info[i] == want_info
    assert lu_info.tolist() == [0, 2]


def test_svd_and_eigh_modes():
    wide = rng.standard_normal((3, 5)).astype(np.float32)
    got, want = run_both(lambda a: lax.linalg.svd(a, full_matrices=True), wide)
    u, s, vt = got
    assert [x.shape for x in got] == [x.shape for x in want]
    np.testing.assert_allclose(s, want[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose((u * s) @ vt[:3], wide, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(vt @ vt.T, np.eye(5), atol=1e-5)
    sym = SQ + np.swapaxes(SQ, -1, -2)
    junk = sym + np.triu(np.full((4, 4), 9.0, np.float32), 1)  # only the lower triangle is read
    got, want = run_both(lambda a: lax.linalg.eigh(a, symmetrize_input=False), junk)
    v, w = got
    np.testing.assert_allclose(w, want[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sym @ v, v * w[..., None, :], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
@pytest.mark.parametrize(
    "kw",
    [
        dict(left_side=True, lower=True, transpose_a=False, unit_diagonal=False),
        dict(left_side=True, lower=False, transpose_a=True, unit_diagonal=False),
        dict(left_side=False, lower=True, transpose_a=True, unit_diagonal=True),
    ],
    ids=lambda kw: "-".join(k for k, v in kw.items() if v),
)
def test_triangular_solve_16bit(dtype, kw):
    """float16/bfloat16 stablehlo.triangular_solve solves in float32 (regression: torch has
    no float16/bfloat16 kernel, so the converted module failed when called)."""
    a = (rng.standard_normal((2, 4, 4)) + 4 * np.eye(4)).astype(dtype)
    b = rng.standard_normal((2, 4, 3) if kw["left_side"] else (2, 3, 4)).astype(dtype)
    rtol = 1e-2 if dtype == np.float16 else 4e-2
    assert_same(lambda a, b: lax.linalg.triangular_solve(a, b, **kw), a, b, rtol=rtol, atol=rtol)


_CONV = functools.partial(lax.conv, window_strides=(1, 1), padding="SAME")


@pytest.mark.parametrize(
    ("fn", "shapes"),
    [
        (jnp.fft.fft, [((0, 8), np.complex64)]),
        (jnp.fft.rfft, [((0, 8), np.float32)]),
        (jnp.fft.irfft, [((2, 0, 5), np.complex64)]),
        (jnp.fft.fft2, [((0, 4, 4), np.complex64)]),
        (_CONV, [((0, 3, 8, 8), np.float32), ((4, 3, 3, 3), np.float32)]),  # no batch
        (_CONV, [((2, 0, 8, 8), np.float32), ((4, 0, 3, 3), np.float32)]),  # no input features: zeros
        (_CONV, [((2, 3, 8, 8), np.float32), ((0, 3, 3, 3), np.float32)]),  # no output features
        (_CONV, [((2, 3, 0, 8), np.float32), ((4, 3, 3, 3), np.float32)]),  # no rows
    ],
    ids=["fft", "rfft", "irfft", "fft2", "conv-batch", "conv-cin", "conv-cout", "conv-rows"],
)
def test_zero_size_fft_and_convolution(fn, shapes):
    """Zero-size dimensions give XLA's empty (or all-zero) results (regression: torch's FFT
    and convolution kernels raised when the converted module was called)."""
    assert_same(fn, *[np.ones(shape, dtype) for shape, dtype in shapes])


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.complex64, np.complex128], ids=lambda d: d.__name__
)
def test_every_lapack_target_of_a_dtype(dtype):
    """All the LAPACK routines of one dtype in one module, run by torch as ``jax.jit`` runs them."""
    from tests.backends.lapack_batch import TOL, every_routine, inputs

    rtol, atol = TOL[dtype]
    assert_same(every_routine, *inputs(dtype), rtol=rtol, atol=atol)


_CONV_REVERSED = """
func.func public @main(%x: tensor<1x5x4x1xf32>, %w: tensor<3x2x1x1xf32>) -> tensor<1x3x3x1xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {stride = [1, 1], pad = [[0, 0], [0, 0]], reverse = [REVERSE]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<1x5x4x1xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x3x1xf32>
  return %0 : tensor<1x3x3x1xf32>
}
"""


@pytest.mark.parametrize("reverse", ["true, false", "false, true"])
def test_convolution_window_reversal_flips_its_own_dim(reverse):
    """Spec ``convolution``: ``window_reversal`` flips the kernel along the spatial dims it
    marks, only those; against XLA."""
    import converter
    from tests.compare import run_xla

    text = _CONV_REVERSED.replace("REVERSE", reverse)
    x = np.arange(20, dtype=np.float32).reshape(1, 5, 4, 1) ** 2
    w = np.array([1.0, 2.0, -3.0, 5.0, 0.5, 7.0], np.float32).reshape(3, 2, 1, 1)
    got = converter.from_stablehlo(text).to_torch()(torch_of(x), torch_of(w))
    (want,) = run_xla(text, x, w)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
