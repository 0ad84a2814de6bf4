"""The LAPACK ``custom_call`` targets through the JAX backend (``backends/jax/ops/lapack.py``).

A ``jax.lax.linalg`` function lowered to StableHLO and interpreted must reproduce ``jax.jit``
of the same function (the same LAPACK kernels run, so even signs of singular vectors agree)
and re-emit the same custom calls. Hand-written modules return the raw results, ``info``
included, compared with SciPy's LAPACK wrappers.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg.lapack as sla
from jax import lax

import converter

from .helpers import assert_same

rng = np.random.default_rng(0)
SQ = rng.standard_normal((2, 4, 4)).astype(np.float32)
WIDE = rng.standard_normal((3, 5)).astype(np.float32)
TALL = rng.standard_normal((5, 3)).astype(np.float32)
SPD = (SQ @ np.swapaxes(SQ, -1, -2) + 4 * np.eye(4, dtype=np.float32)).astype(np.float32)
TOL = dict(rtol=1e-5, atol=1e-5)


def emitted_targets(fn, *args) -> set[str]:
    return set(re.findall(r"custom_call @(lapack_\w+)", jax.jit(fn).lower(*args).as_text()))


def reemits(fn, *args):
    """The targets of ``fn`` are the targets of its conversion's ``to_jax``."""
    want = emitted_targets(fn, *args)
    assert want, "fn emits no LAPACK custom call"
    module = converter.from_stablehlo(jax.jit(fn).lower(*args).as_text())
    assert emitted_targets(module.to_jax(), *args) == want


CASES = {
    "getrf": (lambda a: lax.linalg.lu(a), (SQ,)),
    "getrf_wide": (lambda a: lax.linalg.lu(a), (WIDE,)),
    "potrf": (lambda a: lax.linalg.cholesky(a), (SPD,)),
    "trsm": (
        lambda a, b: (
            lax.linalg.triangular_solve(a, b, left_side=True, lower=True),
            lax.linalg.triangular_solve(
                a, b, left_side=True, lower=False, transpose_a=True, unit_diagonal=True
            ),
            lax.linalg.triangular_solve(a, jnp.swapaxes(b, -1, -2), left_side=False, lower=True),
        ),
        (SPD, SQ[..., :3]),
    ),
    "geqrf_orgqr": (lambda a: lax.linalg.qr(a, full_matrices=False), (TALL,)),
    "qr_complete": (lambda a: lax.linalg.qr(a, full_matrices=True), (WIDE,)),
    "geqrf_raw": (lambda a: jnp.linalg.qr(a, mode="raw"), (TALL,)),
    "ormqr": (
        lambda a, c: (
            lax.linalg.ormqr(a, a[:, 0], c, left=True, transpose=True),
            lax.linalg.ormqr(a, a[:, 0], c.T, left=False),
        ),
        (SQ[0], TALL[:4]),
    ),
    "gesdd": (lambda a: lax.linalg.svd(a, full_matrices=False), (WIDE,)),
    "gesdd_full": (lambda a: lax.linalg.svd(a, full_matrices=True), (TALL,)),
    "gesdd_values": (lambda a: lax.linalg.svd(a, compute_uv=False), (SQ,)),
    "gesvd": (lambda a: lax.linalg.svd(a, algorithm=lax.linalg.SvdAlgorithm.QR), (WIDE,)),
    "syevd": (lambda a: lax.linalg.eigh(a, symmetrize_input=False), (SPD - 5,)),
    "syevd_upper": (lambda a: lax.linalg.eigh(a, lower=False, symmetrize_input=False), (SPD - 5,)),
    "geev": (lambda a: lax.linalg.eig(a, compute_left_eigenvectors=False), (SQ,)),
    "geev_values": (
        lambda a: lax.linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False),
        (SQ,),
    ),
    "geev_left": (lambda a: lax.linalg.eig(a), (SQ[0],)),
    "complex": (
        lambda a: (lax.linalg.lu(a), lax.linalg.qr(a), lax.linalg.eigh(a @ jnp.conj(a.T)), lax.linalg.svd(a)),
        ((SQ[0] + 1j * SQ[1]).astype(np.complex64),),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_target_round_trip(name):
    fn, args = CASES[name]
    assert_same(fn, *args, **TOL)
    reemits(fn, *args)


def _raw(body: str, operand: str, results: str) -> str:
    return f"func.func @main(%a: {operand}) -> {results} {{\n{body}\n}}"


_POTRF = """
  %0:2 = stablehlo.custom_call @lapack_spotrf_ffi(%a) {mhlo.backend_config = {uplo = UPLO : ui8}}
      : (tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2xi32>)
  return %0#0, %0#1 : tensor<2x4x4xf32>, tensor<2xi32>"""


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_potrf_raw_results_and_info(uplo):
    """``info`` (recomputed by ``?potf2``'s recurrence only when the factor is not finite) of
    a matrix whose first three leading minors are positive definite, not the fourth: with
    its off-diagonal 0.8 doubled (a Hermitian fill adding the triangle to itself) the
    second would not be."""
    a = SPD.copy()
    a[1] = 0.2 * np.eye(4) + 0.8
    a[1, 3, 3] = -1.0
    text = _raw(
        _POTRF.replace("UPLO", str(ord(uplo))), "tensor<2x4x4xf32>", "(tensor<2x4x4xf32>, tensor<2xi32>)"
    )
    factor, info = converter.from_stablehlo(text).to_jax()(a)
    lower = uplo == "L"
    want = [sla.spotrf(m, lower=lower, clean=False) for m in a]
    np.testing.assert_array_equal(info, [w[1] for w in want])  # [0, 4]
    np.testing.assert_allclose(factor[0], want[0][0], **TOL)  # with the untouched triangle


_GETRF = """
  %0:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%a) {mhlo.backend_config = {}}
      : (tensor<3x4x4xf32>) -> (tensor<3x4x4xf32>, tensor<3x4xi32>, tensor<3xi32>)
  return %0#0, %0#1, %0#2 : tensor<3x4x4xf32>, tensor<3x4xi32>, tensor<3xi32>"""


def test_getrf_raw_results_and_info():
    a = np.concatenate([SQ, SQ[:1]]).copy()
    a[2, :, 1] = 0.0  # a zero column: U[1, 1] is exactly 0
    text = _raw(_GETRF, "tensor<3x4x4xf32>", "(tensor<3x4x4xf32>, tensor<3x4xi32>, tensor<3xi32>)")
    lu, ipiv, info = converter.from_stablehlo(text).to_jax()(a)
    for i, m in enumerate(a):
        want_lu, want_piv, want_info = sla.sgetrf(m)
        np.testing.assert_allclose(lu[i], want_lu, **TOL)
        np.testing.assert_array_equal(ipiv[i], want_piv + 1)  # SciPy's are 0-based, LAPACK's 1-based
        assert info[i] == want_info
    assert list(info) == [0, 0, 2]


_GESDD = """
  %0:5 = stablehlo.custom_call @lapack_sgesdd_ffi(%a) {mhlo.backend_config = {mode = 83 : ui8}}
      : (tensor<2x3x5xf32>) -> (tensor<2x3x5xf32>, tensor<2x3xf32>, tensor<2x3x3xf32>, tensor<2x3x5xf32>,
         tensor<2xi32>)
  return %0#1, %0#4 : tensor<2x3xf32>, tensor<2xi32>"""


def test_gesdd_raw_info_of_a_nan_matrix():
    """``info`` of an SVD per batch element: 0 for a finite matrix, nonzero for one holding a
    NaN (LAPACK's own code there is -4, an illegal value; the backend's is 1)."""
    a = np.stack([WIDE, WIDE])
    a[1, 1, 2] = np.nan
    text = _raw(_GESDD, "tensor<2x3x5xf32>", "(tensor<2x3xf32>, tensor<2xi32>)")
    s, info = converter.from_stablehlo(text).to_jax()(a)
    want = [sla.sgesdd(m) for m in a]  # (u, s, vt, info)
    np.testing.assert_allclose(s[0], want[0][1], **TOL)
    assert [int(i) != 0 for i in info] == [w[-1] != 0 for w in want] == [False, True]


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.complex64, np.complex128], ids=lambda d: d.__name__
)
def test_every_target_of_a_dtype(dtype):
    """All the routines of one dtype in one module: interpreted as ``jax.jit`` runs them."""
    from tests.backends.lapack_batch import TOL, every_routine, inputs

    rtol, atol = TOL[dtype]
    assert_same(every_routine, *inputs(dtype), rtol=rtol, atol=atol)


_GEEV = {
    "real": """
  %0:5 = stablehlo.custom_call @lapack_sgeev_ffi(%a) {mhlo.backend_config = {compute_left = 86 : ui8,
      compute_right = 78 : ui8}} : (tensor<2x3x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>,
      tensor<2x3x3xcomplex<f32>>, tensor<2x3x3xcomplex<f32>>, tensor<2xi32>)
  return %0#0, %0#1, %0#2, %0#3, %0#4 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x3xcomplex<f32>>,
      tensor<2x3x3xcomplex<f32>>, tensor<2xi32>""",
    "complex": """
  %0:4 = stablehlo.custom_call @lapack_cgeev_ffi(%a) {mhlo.backend_config = {compute_left = 78 : ui8,
      compute_right = 86 : ui8}} : (tensor<2x3x3xcomplex<f32>>) -> (tensor<2x3xcomplex<f32>>,
      tensor<2x3x3xcomplex<f32>>, tensor<2x3x3xcomplex<f32>>, tensor<2xi32>)
  return %0#0, %0#1, %0#2, %0#3 : tensor<2x3xcomplex<f32>>, tensor<2x3x3xcomplex<f32>>,
      tensor<2x3x3xcomplex<f32>>, tensor<2xi32>""",
}


@pytest.mark.parametrize("kind", sorted(_GEEV))
def test_geev_raw_results_of_a_batch(kind):
    """``?geev`` of a batch of two matrices, one set of eigenvectors left out (``'N'``): the
    eigenvalues as SciPy's LAPACK gives them (real: ``wr``, ``wi`` apart; complex: ``w``),
    the vectors not computed as zeros of their result type, ``info`` one per matrix (0: both
    finite, as SciPy's)."""
    a = SQ[:, :3, :3].copy()
    if kind == "complex":
        a = (a + 1j * SQ[::-1, 1:, 1:]).astype(np.complex64)
        ety, types = "complex<f32>", "(tensor<2x3xcomplex<f32>>, " + "tensor<2x3x3xcomplex<f32>>, " * 2
    else:
        ety, types = "f32", "(tensor<2x3xf32>, tensor<2x3xf32>, " + "tensor<2x3x3xcomplex<f32>>, " * 2
    text = _raw(_GEEV[kind], f"tensor<2x3x3x{ety}>", types + "tensor<2xi32>)")
    *out, info = converter.from_stablehlo(text).to_jax()(a)
    assert np.asarray(info).shape == (2,) and np.asarray(info).dtype == np.int32
    for i, m in enumerate(a):
        if kind == "real":
            wr, wi, _, _, want_info = sla.sgeev(m, compute_vl=0, compute_vr=0)
            w, got = wr + 1j * wi, np.asarray(out[0][i]) + 1j * np.asarray(out[1][i])
        else:
            w, _, _, want_info = sla.cgeev(m, compute_vl=0, compute_vr=0)
            got = np.asarray(out[0][i])
        np.testing.assert_allclose(np.sort_complex(got), np.sort_complex(w), **TOL)
        assert info[i] == want_info == 0
    unset = np.asarray(out[3] if kind == "real" else out[1])  # vr (real), vl (complex): 'N'
    assert unset.shape == (2, 3, 3) and unset.dtype == np.complex64
    np.testing.assert_array_equal(unset, 0)


def test_complex_trsm_transpose_and_adjoint():
    """``?trsm`` of a complex triangle with ``trans = 'T'`` (transpose) and ``'C'`` (conjugate
    transpose): the solutions of ``a^T x = b`` and ``a^H x = b`` in NumPy."""
    a = (np.tril(SQ[0]) + 4 * np.eye(4) + 1j * np.tril(SQ[1])).astype(np.complex64)
    b = (SQ[1, :, :2] - 1j * SQ[0, :, :2]).astype(np.complex64)

    def solves(a, b):
        kw = dict(left_side=True, lower=True, transpose_a=True)
        return (
            lax.linalg.triangular_solve(a, b, **kw),
            lax.linalg.triangular_solve(a, b, conjugate_a=True, **kw),
        )

    assert {"lapack_ctrsm_ffi"} == emitted_targets(solves, a, b)
    got = converter.from_stablehlo(jax.jit(solves).lower(a, b).as_text()).to_jax()(a, b)
    for g, m in zip(got, (a.T, a.conj().T), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.linalg.solve(m, b), **TOL)
