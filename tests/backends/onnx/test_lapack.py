"""LAPACK custom calls in the ONNX backend, and the portable routines behind them
(:mod:`converter.backends.onnx.lapack_portable`).

The routines are checked against SciPy's LAPACK (``scipy.linalg.lapack``, the same
reference routines jaxlib calls) in float32 and float64, batched, on singular and
non-positive-definite inputs; eigen- and singular vectors, defined up to sign, through
reconstruction and orthonormality. The ONNX side runs ``jnp.linalg``/``jax.scipy.linalg``
functions through ``to_onnx`` and onnxruntime against ``jax.jit`` (LAPACK), including the
NaN results JAX derives from a failed factorization's ``info``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from converter.backends.onnx import lapack_portable as lp
from scipy.linalg import blas, lapack
from scipy.optimize import linear_sum_assignment

import converter
from converter.errors import ConversionError
from tests import xla_fast

from .helpers import run_onnx

rng = np.random.default_rng(0)
F32, F64 = np.float32, np.float64
TOL = {F32: 2e-5, F64: 1e-12}


def _close(got, want, dtype, scale: float = 1.0):
    np.testing.assert_allclose(np.asarray(got), want, rtol=TOL[dtype] * scale, atol=TOL[dtype] * scale)


def _spd(n, batch=(), dtype=F64):
    m = rng.standard_normal((*batch, n, n))
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dtype)


def _lapack(name: str, dtype):
    return getattr(lapack, ("s" if dtype == F32 else "d") + name)


def jit_fast(fn):
    """``jax.jit(fn)`` compiled with XLA's fast settings (:data:`tests.xla_fast.FAST`, about a
    third of the default compile time of these large expansions) whatever the test's marks:
    the routines' results are checked against SciPy, not XLA."""
    return lambda *args: jax.jit(fn).lower(*args).compile(xla_fast.FAST)(*args)


# --------------------------------------------------------------------------- the routines vs SciPy's LAPACK


@pytest.mark.parametrize(
    ("shape", "dtype"), [((4, 4), F32), ((5, 3), F64), ((3, 5), F32), ((2, 3, 4, 4), F64)]
)
def test_getrf_matches_lapack(shape, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    lu, ipiv, info = jit_fast(lp.getrf)(a)
    assert ipiv.dtype == np.int32 and info.dtype == np.int32
    for i in np.ndindex(shape[:-2]):
        want_lu, want_piv, want_info = _lapack("getrf", dtype)(a[i])
        _close(lu[i], want_lu, dtype, 4)
        np.testing.assert_array_equal(ipiv[i], want_piv + 1)  # SciPy reports 0-based pivots
        assert int(info[i]) == want_info == 0


def test_getrf_singular_info_is_the_first_zero_pivot():
    a = np.array([[1.0, 2, 3], [2, 4, 6], [1, 1, 1]])
    minus_one = np.array([[-1.0, 2, 0], [0.5, 1, 0], [0.25, 0, 1]])  # a pivot of exactly -1
    lu, ipiv, info = jit_fast(lp.getrf)(np.stack([a, np.eye(3), np.zeros((3, 3)), minus_one]))
    want_lu, want_piv, want_info = lapack.dgetrf(a)
    np.testing.assert_allclose(lu[0], want_lu, atol=1e-15)
    np.testing.assert_array_equal(ipiv[0], want_piv + 1)
    assert want_info == 3
    np.testing.assert_array_equal(info, [3, 0, 1, 0])
    np.testing.assert_allclose(lu[3], lapack.dgetrf(minus_one)[0], atol=1e-15)
    np.testing.assert_array_equal(ipiv[2], [1, 2, 3])  # no row of zeros is swapped


def test_getrf_pivot_is_the_first_largest_magnitude():
    a = np.array([[1.0, 0], [-3, 1], [3, 2]])
    _, ipiv, _ = jit_fast(lp.getrf)(a)
    np.testing.assert_array_equal(ipiv, lapack.dgetrf(a)[1] + 1)
    assert int(ipiv[0]) == 2


def test_getrf_never_picks_a_nan_below_the_diagonal():
    """The pivot search (BLAS ``i?amax``) never picks a NaN below the diagonal over a number
    (0.5, or even 0: a zero pivot, ``info = 1``) and keeps a NaN on the diagonal; the NaN
    then spreads through the trailing update (reference ``dgetf2``, worked by hand)."""
    nan = np.nan
    a = np.array([[[0.5, 1.0], [nan, 2.0]], [[0.0, 1.0], [nan, 2.0]], [[nan, 1.0], [3.0, 2.0]]])
    lu, ipiv, info = jit_fast(lp.getrf)(a)
    np.testing.assert_array_equal(ipiv, [[1, 2]] * 3)  # no row swapped
    np.testing.assert_array_equal(info, [0, 1, 0])
    np.testing.assert_array_equal(lu, [[[0.5, 1], [nan, nan]], [[0, 1], [nan, nan]], [[nan, 1], [nan, nan]]])


@pytest.mark.parametrize("side", "LR")
@pytest.mark.parametrize("uplo", "LU")
@pytest.mark.parametrize("trans", "NT")
@pytest.mark.parametrize("diag", "NU")
def test_trsm_every_variant_matches_blas(side, uplo, trans, diag):
    a = rng.standard_normal((4, 4)) + 4 * np.eye(4)
    b = rng.standard_normal((4, 3) if side == "L" else (3, 4))
    got = jit_fast(
        lambda a, b: lp.trsm(
            a, b, left_side=side == "L", lower=uplo == "L", trans=trans, unit_diagonal=diag == "U"
        )
    )(a, b)
    want = blas.dtrsm(
        1.0, a, b, side=side == "R", lower=uplo == "L", trans_a=int(trans == "T"), diag=diag == "U"
    )
    _close(got, want, F64)


def test_trsm_batched_reads_only_its_triangle():
    a = rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal((2, 3, 2))
    unread = np.triu(np.full((3, 3), np.nan), 1)
    for lower in (True, False):
        noisy = a + (unread if lower else unread.T)  # the unread triangle is NaN
        got = jit_fast(lambda a, b, lower=lower: lp.trsm(a, b, lower=lower))(noisy, b)
        for i in range(2):
            _close(got[i], blas.dtrsm(1.0, a[i], b[i], lower=lower), F64)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("lower", [True, False])
def test_potrf_matches_lapack(lower, dtype):
    a = _spd(4, dtype=dtype)
    factor, info = jit_fast(lambda a: lp.potrf(a, lower=lower))(a)
    want, want_info = _lapack("potrf", dtype)(a, lower=lower, clean=False)
    _close(factor, want, dtype, 4)
    assert int(info) == want_info == 0


@pytest.mark.parametrize("lower", [True, False])
def test_potrf_info_is_the_first_minor_not_positive_definite(lower):
    good = _spd(4)
    bad = good.copy()
    bad[2, 2] = -50.0
    nan = good.copy()
    nan[1, 1] = np.nan
    zero = np.eye(4)
    zero[:2, :2] = 1  # the second pivot exactly 0 (not > 0): stops there, nothing divided by it
    factor, info = jit_fast(lambda a: lp.potrf(a, lower=lower))(np.stack([good, bad, nan, zero]))
    want, want_info = _lapack("potrf", F64)(bad, lower=lower, clean=False)
    assert want_info == 3
    np.testing.assert_array_equal(info, [0, 3, 2, 2])
    np.testing.assert_array_equal(factor[3], _lapack("potrf", F64)(zero, lower=lower, clean=False)[0])
    # LAPACK specifies the factor's columns before the failing one, the failing pivot's
    # value (left on the diagonal) and the other triangle (not read, left as is); the
    # trailing columns depend on the implementation (?potf2 leaves them, ?potrf2 updates some)
    got = np.asarray(factor[1]) if lower else np.asarray(factor[1]).T
    want = want if lower else want.T
    _close(got[:, :2], want[:, :2], F64)
    _close(got[2, 2], want[2, 2], F64)
    _close(np.triu(got, 1), np.triu(want, 1), F64)
    assert float(factor[2][0, 0]) == np.sqrt(nan[0, 0]) and np.isnan(factor[2][1, 1])


@pytest.mark.parametrize(("shape", "dtype"), [((5, 3), F32), ((4, 4), F64), ((3, 5), F64)])
def test_geqrf_orgqr_match_lapack(shape, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    qr, tau = jit_fast(lp.geqrf)(a)
    want_qr, want_tau, _, _ = _lapack("geqrf", dtype)(a)
    _close(qr, want_qr, dtype, 4)
    _close(tau, want_tau, dtype, 4)
    if shape[0] >= shape[1]:
        q = jit_fast(lp.orgqr)(qr, tau)
        _close(q, _lapack("orgqr", dtype)(want_qr, want_tau)[0], dtype, 4)


def test_geqrf_zero_column_is_an_identity_reflector():
    """A zero column is an identity reflector (tau = 0); in the same batch, a zero diagonal
    entry above a nonzero column (beta = -norm: sign(0) is +) and columns whose squares
    overflow or underflow (the norms are scaled), against LAPACK. (The name is kept for the
    mutation coverage map.)"""
    zero = np.zeros((3, 2))
    zero[0, 1] = 1.0
    alpha0 = np.array([[0.0, 1], [3, 0], [4, 5]])
    batch = np.stack([zero, alpha0, alpha0 * 1e300, alpha0 * 1e-300])
    qr, tau = jit_fast(lp.geqrf)(batch)
    for i, a in enumerate(batch):
        want_qr, want_tau, _, _ = lapack.dgeqrf(a)
        np.testing.assert_allclose(tau[i], want_tau, rtol=1e-15)
        np.testing.assert_allclose(qr[i], want_qr, rtol=1e-15, atol=0)


@pytest.mark.parametrize(("left", "transpose"), [(True, False), (True, True), (False, False), (False, True)])
def test_ormqr_matches_lapack(left, transpose):
    a = rng.standard_normal((5, 3))
    c = rng.standard_normal((5, 2) if left else (2, 5))
    qr, tau, _, _ = lapack.dgeqrf(a)
    got = jit_fast(lambda qr, tau, c: lp.ormqr(qr, tau, c, left=left, transpose=transpose))(qr, tau, c)
    want = lapack.dormqr("L" if left else "R", "T" if transpose else "N", qr, tau, c, 5 * 64)[0]
    _close(got, want, F64)


@pytest.mark.parametrize(
    ("n", "batch", "dtype"), [(1, (), F64), (2, (), F64), (4, (), F32), (6, (2,), F64), (12, (), F32)]
)
def test_syevd_values_ascending_and_vectors_orthonormal(n, batch, dtype):
    m = rng.standard_normal((*batch, n, n))
    s = (m + np.swapaxes(m, -1, -2)).astype(dtype)
    v, w, info = jit_fast(lp.syevd)(s)
    _close(w, np.linalg.eigvalsh(s.astype(F64)), dtype, 8)
    assert np.all(np.diff(np.asarray(w), axis=-1) >= 0)
    vt = np.swapaxes(v, -1, -2)
    _close(v @ (np.asarray(w)[..., None] * vt), s, dtype, 8)
    _close(vt @ v, np.broadcast_to(np.eye(n), s.shape), dtype, 8)
    np.testing.assert_array_equal(info, np.zeros(batch, np.int32))


@pytest.mark.parametrize("lower", [True, False])
def test_syevd_reads_only_its_triangle(lower):
    m = rng.standard_normal((4, 4))
    s = m + m.T
    mask = np.tril(np.ones((4, 4), bool), -1) if not lower else np.triu(np.ones((4, 4), bool), 1)
    noisy = np.where(mask, 1e3, s)
    _, w, _ = jit_fast(lambda a: lp.syevd(a, lower=lower))(noisy)
    _close(w, np.linalg.eigvalsh(s), F64, 8)


def test_syevd_nonfinite_input_reports_info():
    """A non-finite matrix reports info; in the same batch, the identity keeps its vectors
    and tiny matrices get eigenvalues as accurate, relative to their norm, as unit ones (the
    convergence threshold is relative to each matrix). (The name is kept for the mutation
    coverage map.)"""
    m = np.random.default_rng(5).standard_normal((3, 3))  # (the shared rng's draws unchanged)
    nan = np.eye(3)
    nan[1, 1] = np.nan
    tiny = [(m + m.T) * 1e-20, (m + m.T) * 1e-30]
    v, w, info = jit_fast(lp.syevd)(np.stack([np.eye(3), nan, *tiny]))
    np.testing.assert_array_equal(info, [0, 1, 0, 0])
    # the identity's equal eigenvalues keep their vectors (a tie-broken permutation)
    np.testing.assert_array_equal(w[0], np.ones(3))
    np.testing.assert_array_equal(v[0], np.eye(3))
    for wi, si in zip(np.asarray(w)[2:], tiny, strict=True):
        want = np.linalg.eigvalsh(si)
        _close(wi / np.abs(want).max(), want / np.abs(want).max(), F64, 8)


@pytest.mark.parametrize(
    ("shape", "dtype", "mode"),
    [
        ((5, 3), F32, "A"),
        ((5, 3), F64, "S"),
        ((3, 5), F64, "A"),
        ((3, 5), F32, "S"),
        ((4, 4), F32, "N"),
        ((2, 6, 4), F32, "A"),
        ((2, 6, 4), F64, "S"),
        ((1, 1), F64, "A"),
        ((7, 1), F64, "A"),
    ],
)
def test_gesdd_matches_lapack_values_and_reconstructs(shape, dtype, mode):
    a = rng.standard_normal(shape).astype(dtype)
    m, n = shape[-2:]
    k = min(m, n)
    out, s, u, vt, info = jit_fast(lambda a: lp.gesdd(a, mode=mode))(a)
    np.testing.assert_array_equal(out, a)
    _close(s, np.linalg.svd(a.astype(F64), compute_uv=False), dtype, 8)
    np.testing.assert_array_equal(info, np.zeros(shape[:-2], np.int32))
    want_u, want_vt = {"A": ((m, m), (n, n)), "S": ((m, k), (k, n)), "N": ((m, m), (n, n))}[mode]
    assert u.shape == (*shape[:-2], *want_u) and vt.shape == (*shape[:-2], *want_vt)
    if mode == "N":
        assert not np.any(u) and not np.any(vt)
        return
    u, vt = np.asarray(u), np.asarray(vt)
    _close((u[..., :, :k] * np.asarray(s)[..., None, :]) @ vt[..., :k, :], a, dtype, 8)
    _close(
        np.swapaxes(u, -1, -2) @ u,
        np.broadcast_to(np.eye(u.shape[-1]), u.shape[:-2] + 2 * u.shape[-1:]),
        dtype,
        8,
    )
    _close(
        vt @ np.swapaxes(vt, -1, -2),
        np.broadcast_to(np.eye(vt.shape[-2]), vt.shape[:-2] + 2 * vt.shape[-2:-1]),
        dtype,
        8,
    )


def test_gesdd_reduced_mode_zeros_follow_the_declared_shapes():
    _, _, u, vt, _ = jit_fast(lambda a: lp.gesdd(a, mode="N", full_matrices=False))(np.ones((4, 3)))
    assert u.shape == (4, 3) and vt.shape == (3, 3)


@pytest.mark.parametrize("mode", "AS")
def test_gesdd_rank_deficient_still_gives_orthonormal_vectors(mode):
    a = np.outer(rng.standard_normal(5), rng.standard_normal(3))
    _, s, u, vt, _ = jit_fast(lambda a: lp.gesdd(a, mode=mode))(np.stack([a, np.zeros((5, 3))]))
    _close(s[0], np.linalg.svd(a, compute_uv=False), F64, 8)
    np.testing.assert_array_equal(s[1], 0)
    for i in range(2):
        _close(u[i].T @ u[i], np.eye(u.shape[-1]), F64, 8)
        _close(vt[i] @ vt[i].T, np.eye(3), F64, 8)
    _close((u[0][:, :3] * s[0]) @ vt[0], a, F64, 8)


def test_gesdd_nonfinite_input_reports_info():
    """A non-finite matrix reports info; in the same batch, matrices whose squared entries
    underflow (1e-170) or overflow (1e170) get the singular values of ``numpy.linalg.svd``
    to rounding: the one-sided Jacobi works on the matrix scaled by its largest magnitude.
    (The name is kept for the mutation coverage map.)"""
    a = np.ones((3, 2))
    a[0, 0] = np.inf
    m = np.array([[1.0, -2], [3, 0.5], [-1, 4]])
    scaled = [m * 1e-170, m * 1e170]
    _, s, u, vt, info = jit_fast(lambda a: lp.gesdd(a, mode="S"))(np.stack([np.ones((3, 2)), a, *scaled]))
    np.testing.assert_array_equal(info, [0, 1, 0, 0])
    for i, x in enumerate(scaled, 2):
        want = np.linalg.svd(x, compute_uv=False)
        np.testing.assert_allclose(s[i], want, rtol=1e-13, atol=0)
        np.testing.assert_allclose((u[i] * (s[i] / want[0])) @ vt[i], x / want[0], rtol=0, atol=1e-13)


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8])
def test_jacobi_rounds_cover_every_pair_once_with_disjoint_rounds(n):
    p, q = lp._rounds(n)
    m = n + n % 2  # the circle method's players: m - 1 rounds of m / 2 pairs each
    assert p.shape == q.shape == (m - 1, m // 2)
    pairs = [(a, b) for pr, qr in zip(p, q, strict=True) for a, b in zip(pr, qr, strict=True) if b < n]
    assert sorted(pairs) == [(a, b) for a in range(n) for b in range(a + 1, n)]
    for pr, qr in zip(p, q, strict=True):
        assert len(set(pr) | set(qr)) == 2 * len(pr) and np.all(pr < qr)


# --------------------------------------------------------------------------- ?geev


def _match_error(got, want) -> float:
    """Largest distance between the eigenvalue multisets ``got`` and ``want`` (paired by an
    optimal assignment, so the order and near-ties do not matter)."""
    cost = np.abs(np.asarray(got)[:, None] - np.asarray(want)[None, :])
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].max()) if cost.size else 0.0


_GEEV: dict = {}


def _geev_values(a):
    """``lp.geev(a)`` (compiled once per shape and dtype) as complex eigenvalues and info."""
    key = (a.shape, a.dtype)
    if key not in _GEEV:
        _GEEV[key] = jax.jit(lp.geev).lower(a).compile(xla_fast.FAST)
    wr, wi, vl, vr, info = _GEEV[key](a)
    assert wr.dtype == wi.dtype == a.dtype and info.dtype == np.int32
    assert vl.shape == vr.shape == a.shape and vl.dtype == vr.dtype == np.result_type(a.dtype, np.complex64)
    assert not np.any(np.asarray(vl)) and not np.any(np.asarray(vr))  # jobvl = jobvr = 'N'
    return np.asarray(wr) + 1j * np.asarray(wi), np.asarray(info)


def _geev_cases():
    """The accuracy cases, in three sizes (1, 2 and 6, each compiled once per dtype: every
    case of a size runs as one batch) and one large matrix."""
    r = np.random.default_rng(7)
    m = r.standard_normal((6, 6))
    rot = np.array([[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]])
    return {
        "random": m,
        "symmetric": m + m.T,
        "jordan": np.eye(6) * 2 + np.eye(6, k=1),
        "rotation": np.kron(np.eye(3), rot),  # three equal pairs cos(0.3) +- i sin(0.3)
        "pure_imaginary": np.kron(np.diag([4.0, 1, 0.5]), np.array([[0.0, 1], [-1, 0]])),  # +-4i, +-i, +-i/2
        "triangular": np.triu(m),
        "lower_triangular": np.tril(m),
        "permuted_triangular": np.triu(m)[[3, 0, 5, 1, 4, 2]][:, [3, 0, 5, 1, 4, 2]],
        "block_triangular": np.block([[np.triu(m[:3, :3]), m[:3, 3:]], [np.zeros((3, 3)), m[3:, 3:]]]),
        "zero": np.zeros((6, 6)),
        "hessenberg_split": np.triu(m, -1) * (np.arange(6) != 3)[:, None],  # h[3, 2] = 0
        "companion": np.diag(np.ones(5), -1) + np.eye(6)[:, [5]] @ r.standard_normal((1, 6)),
        "graded": np.diag(10.0 ** np.arange(-3, 3)) @ r.standard_normal((6, 6)),
        "1x1": np.array([[-3.5]]),
        "2x2_complex": np.array([[1.0, -5], [2, 1]]),
        "2x2_real": np.array([[1.0, 5], [2, 1]]),
        "2x2_lower": np.array([[1.0, 0], [2, 3]]),
        "large": r.standard_normal((40, 40)),
    }


@pytest.mark.parametrize("dtype", [F32, F64])
def test_geev_eigenvalues_match_lapack(dtype):
    """Each case's eigenvalue set as accurate as LAPACK's own ``?geev`` in the same
    precision (against the float64 reference), within 10x plus a few ulps of ``|a|``, and in
    LAPACK's order (where they deflate, after ?gebal's permutations: these cases' order does
    not depend on its scaling); the cases of one size run as one batch (one compilation)."""
    cases = _geev_cases()
    for n in sorted({c.shape[-1] for c in cases.values()}):
        names = [k for k, c in cases.items() if c.shape[-1] == n]
        batch = np.stack([cases[k] for k in names]).astype(dtype)
        got, info = _geev_values(batch)
        for name, a, w, inf in zip(names, batch, got, info, strict=True):
            assert int(inf) == 0, name
            wr, wi, *_, lapack_info = _lapack("geev", dtype)(a, compute_vl=0, compute_vr=0)
            assert lapack_info == 0
            ref = np.linalg.eigvals(a.astype(F64))
            if name == "jordan":  # a defective eigenvalue of multiplicity 6 moves by eps**(1/6)
                ref = np.full(6, 2.0)
            scale = max(1.0, float(np.abs(a).max())) * n * np.finfo(dtype).eps
            err, lapack_err = _match_error(w, ref), _match_error(wr + 1j * wi, ref)
            assert err <= 10 * lapack_err + 20 * scale, (name, err, lapack_err)
            order_err = float(np.abs(w - (wr + 1j * wi)).max())
            assert order_err <= 10 * lapack_err + 20 * scale, (name, order_err, lapack_err)


def test_geev_complex_pairs_positive_imaginary_part_first():
    a = np.kron(np.diag([1.0, 2, 3]), np.array([[0.0, -1], [1, 0]])) + np.eye(6) * 0.5
    got, _ = _geev_values(a)
    np.testing.assert_allclose(got, [0.5 + 1j, 0.5 - 1j, 0.5 + 2j, 0.5 - 2j, 0.5 + 3j, 0.5 - 3j], atol=1e-14)
    assert np.all(got[0::2].imag > 0) and np.all(got[0::2] == np.conj(got[1::2]))


def test_geev_nearly_equal_real_pair_takes_the_rotated_split():
    """A 2x2 block whose discriminant is below 4 eps (``[[1, 1], [1e-20, 1]]``) but whose
    eigenvalues are real (1 +- 1e-10): dlanv2 rotates it to equal diagonals, then splits the
    pair by ``sqrt|b'| * sqrt|c'|``; LAPACK gives the same two values."""
    a = np.array([[1.0, 1.0], [1e-20, 1.0]])
    got, _ = _geev_values(a)
    wr, wi, *_ = lapack.dgeev(a, compute_vl=0, compute_vr=0)
    assert not wi.any() and not got.imag.any()
    np.testing.assert_allclose(np.sort(got.real), np.sort(wr), rtol=0, atol=1e-15)
    assert abs(got.real[0] - got.real[1]) > 1e-10  # split, not a double eigenvalue


def test_geev_subdiagonal_below_the_lahqr_floor_splits_as_lapack():
    """``?lahqr`` takes a subdiagonal entry of a zero diagonal as negligible below
    ``smlnum = safmin * nh / ulp`` (``nh`` = 2 active rows here): at 1.5 ``safmin / ulp`` the
    2x2 block splits into 0, 0, at 2.5 it does not (+-sqrt(h)); as LAPACK's ``dgees``, which
    runs the same routines (``?gebal``'s permutation alone, ``?lahqr``)."""
    tiny_over_ulp = np.finfo(F64).tiny / np.finfo(F64).eps
    for h in (1.5 * tiny_over_ulp, 2.5 * tiny_over_ulp):
        a = np.array([[0.0, 1.0], [h, 0.0]])
        got, _ = _geev_values(a)
        *_, wr, wi, _, _, info = lapack.dgees(lambda *_: 0, a, compute_v=0)
        assert info == 0 and not wi.any() and not got.imag.any()
        np.testing.assert_array_equal(np.sort(got.real), np.sort(wr))
        assert (wr[0] == 0) == (h < 2 * tiny_over_ulp)


def test_geev_ahues_kressner_test_is_scaled_by_the_block_norm():
    """The Ahues & Kressner test compares ``ba * (ab / s)`` with ``max(smlnum, ...)``,
    ``s = aa + ab``: with equal diagonals ``d`` only ``smlnum`` bounds it, so whether
    ``[[d, h], [-h, d]]`` splits (``d, d``) or stays a complex pair (``d +- h i``) depends on
    ``h**2 / d``: it splits at ``d = 1e100, h = 1e-120`` and not at ``d = 1e-100, h = 1e-180``,
    as LAPACK's ``dgeev``."""
    for d, h in ((1e100, 1e-120), (1e-100, 1e-180)):
        a = np.array([[d, h], [-h, d]])
        got, _ = _geev_values(a)
        wr, wi, *_ = lapack.dgeev(a, compute_vl=0, compute_vr=0)
        np.testing.assert_array_equal(got, wr + 1j * wi, err_msg=f"d = {d}")
        assert (wi[0] == 0) == (d == 1e100), wi  # the case splits (real) or does not


@pytest.mark.parametrize("a", [[[-2.0, -1.0], [4.0, 2.0]], [[-1.0, -0.25], [4.0, 1.0]]])
def test_geev_double_eigenvalue_rotated_to_a_lower_triangle_stays_real(a):
    """A nilpotent 2x2 block (double eigenvalue 0, ``b * c = -p**2``): dlanv2's rotation to
    equal diagonals leaves ``b' = 0`` and ``c' != 0``, and the block is swapped to upper
    triangular (``c' = 0``): two real eigenvalues, as LAPACK's, not ``+-sqrt|b'| sqrt|c'|`` i
    of a kept ``c'``."""
    a = np.array(a)
    got, _ = _geev_values(a)
    wr, wi, *_ = lapack.dgeev(a, compute_vl=0, compute_vr=0)
    assert not wi.any() and not got.imag.any()
    np.testing.assert_allclose(got.real, wr, rtol=0, atol=1e-15)


def test_geev_deflates_from_the_bottom_as_lahqr():
    """Eigenvalues sit where they deflate (bottom up): for a generic matrix the order
    is LAPACK's (its balancing permutes nothing here), which depends on where each
    subdiagonal entry is found negligible (the Ahues & Kressner test). Twenty matrices of
    one compiled shape."""
    for seed in range(3, 23):
        a = np.random.default_rng(seed).standard_normal((6, 6))
        got, _ = _geev_values(a)
        wr, wi, *_ = lapack.dgeev(a, compute_vl=0, compute_vr=0)
        np.testing.assert_allclose(got, wr + 1j * wi, atol=1e-12, err_msg=f"seed {seed}")


@pytest.mark.parametrize("dtype", [F32, F64])
def test_geev_batched(dtype):
    a = rng.standard_normal((2, 3, 5, 5)).astype(dtype)
    a[1, 2] = np.triu(a[1, 2])
    got, info = _geev_values(a)
    assert got.shape == (2, 3, 5) and info.shape == (2, 3) and not info.any()
    tol = 1e-4 if dtype == F32 else 1e-12
    for i in np.ndindex(2, 3):
        assert _match_error(got[i], np.linalg.eigvals(a[i].astype(F64))) < tol


# the next two tests take test_geev_batched's shape: its compilations serve them


@pytest.mark.parametrize("scale", [1e-30, 1e30])
def test_geev_scales_tiny_and_huge_matrices(scale):
    a = (rng.standard_normal((2, 3, 5, 5)) * scale).astype(F32)
    got, info = _geev_values(a)
    assert not info.any()
    for i in np.ndindex(2, 3):
        assert _match_error(got[i], np.linalg.eigvals(a[i].astype(F64))) < 1e-4 * scale


def test_geev_nonfinite_input_reports_info():
    """A non-finite matrix gives info 1 and NaN eigenvalues; the finite ones of the batch
    (triangular) give their diagonal exactly, as LAPACK: ``?gebal`` permutes every
    eigenvalue out and a norm inside ``[smlnum, bignum]`` is not scaled (a scaling there would
    round them)."""
    a = np.triu(np.random.default_rng(1).standard_normal((2, 3, 5, 5)).round(2))
    a[0, 1, 0, 2], a[1, 2, 1, 1] = np.nan, np.inf
    got, info = _geev_values(a)
    np.testing.assert_array_equal(info, [[0, 1, 0], [0, 0, 1]])
    for i in np.ndindex(2, 3):
        if info[i]:
            assert np.isnan(got[i].real).all() and np.isnan(got[i].imag).all()
        else:
            wr, wi, *_ = lapack.dgeev(a[i], compute_vl=0, compute_vr=0)
            np.testing.assert_array_equal(np.sort(wr), np.sort(np.diagonal(a[i])))
            assert not wi.any() and not got[i].imag.any()
            np.testing.assert_array_equal(np.sort(got[i].real), np.sort(wr))


def test_geev_empty_and_eigenvectors_refused():
    got, info = _geev_values(np.zeros((2, 0, 0), F32))
    assert got.shape == (2, 0) and info.shape == (2,)
    with pytest.raises(NotImplementedError, match="eigenvectors"):
        lp.geev(np.eye(2), right=True)


# --------------------------------------------------------------------------- ?geev's steps, one at a time


def _hessenberg6():
    """A 6x6 upper Hessenberg matrix with distinct entries (subdiagonal 1 .. 5)."""
    h = np.triu(np.arange(1.0, 37).reshape(6, 6) / 7, -1)
    h[np.arange(1, 6), np.arange(5)] = np.arange(1.0, 6)
    return h


def test_lahqr_split_point_beside_two_zero_diagonal_entries():
    """``?lahqr``'s negligible-subdiagonal test ``|h[k, k-1]| <= ulp * tst`` with ``tst =
    |h[k-1, k-1]| + |h[k, k]|``, and when that is 0, ``tst = |h[k-1, k-2]|`` (if ``k - 2 >=
    ilo``) ``+ |h[k+1, k]|`` (if ``k + 1 <= ihi``). Here ``k = 3`` (``i = 3``), ``h[2, 3] = 0``
    (so the Ahues & Kressner test passes) and ``h[3, 2] = 3e-16``, between ``ulp`` and ``2 ulp``:
    it splits (``lo = 3``) exactly when the neighbours that count sum to 2; worked by hand
    from dlahqr's loop."""
    ulp = np.finfo(F64).eps
    cases = []  # (up = h[2, 1], down = h[4, 3], d = h[2, 2] = h[3, 3], ilo, ihi, expected lo)
    cases += [(2.0, 0.0, 0.0, 1, 5, 3)]  # k - 2 == ilo: the upper neighbour counts
    cases += [(2.0, 0.0, 0.0, 2, 5, 2)]  # k - 2 < ilo: it does not (no split: lo = ilo)
    cases += [(0.0, 2.0, 0.0, 0, 4, 3)]  # k + 1 == ihi: the lower neighbour counts (h[2, 1] = 0 splits too)
    cases += [(0.0, 2.0, 0.0, 0, 3, 2)]  # k + 1 > ihi: it does not (the split at k = 2 is the last)
    cases += [(1.0, 1.0, 0.0, 0, 5, 3)]  # both count: 1 + 1
    cases += [(1.0, 1.0, 1.0, 0, 5, 3)]  # nonzero diagonal: tst = 1 + 1, the neighbours unused
    cases += [(0.5, 0.5, 1.0, 0, 5, 3)]  # the same with smaller neighbours
    hs, bounds, want = [], [], []
    for up, down, d, ilo, ihi, lo in cases:
        h = _hessenberg6()
        h[2, 1], h[4, 3], h[2, 2], h[3, 3], h[2, 3], h[3, 2] = up, down, d, d, 0.0, 3e-16
        hs.append(h)
        bounds.append((ilo, ihi))
        want.append(lo)
    assert ulp < 3e-16 < 2 * ulp

    def split(h, ilo, ihi):
        diags = lp._diagonals(jnp.pad(h, ((0, 1), (0, 1))))
        smlnum = np.finfo(F64).tiny * ((ihi - ilo + 1).astype(F64) / ulp)
        return lp._split_point(diags, np.int32(3), 6, (ilo, ihi), smlnum, ulp)

    ilo, ihi = np.asarray(bounds, np.int32).T
    got = jit_fast(jax.vmap(split))(np.stack(hs), ilo, ihi)
    np.testing.assert_array_equal(got, want)


def test_lahqr_shifts_ordinary_and_exceptional():
    """``?lahqr``'s double shift for the window ``lo = 1 .. i = 4``: on iterations 10, 30, ...
    the exceptional one from the top (``s = |h[lo+1, lo]| + |h[lo+2, lo+1]|``, the eigenvalues
    of ``[[0.75 s + h[lo, lo], -0.4375 s], [s, 0.75 s + h[lo, lo]]]``), on 20, 40, ... from the
    bottom (``s = |h[i, i-1]| + |h[i-1, i-2]|``, ``h[i, i]``); otherwise the eigenvalues of the
    trailing 2x2 block: a complex pair as ``(re, +|im|)``, ``(re, -|im|)``, two real ones as
    the one nearer ``h[i, i]`` twice; a zero block gives zero shifts (dlahqr, by hand)."""
    base = _hessenberg6()
    real = base.copy()
    real[3:5, 3:5] = [[1.0, 2.0], [3.0, 4.0]]  # 2.5 +- sqrt(8.25): 5.37 nearer 4
    real_low = base.copy()
    real_low[3:5, 3:5] = [[4.0, 2.0], [3.0, 1.0]]  # the same values: -0.37 nearer 1
    cplx = base.copy()
    cplx[3:5, 3:5] = [[0.5, -1.0], [5.0, 0.25]]  # |h21| larger than the other three together
    zero = base.copy()
    zero[3:5, 3:5] = 0
    zero[2, 3] = zero[2, 4] = 0
    hs = [base, base, base, base, real, real_low, cplx, zero]
    kdefl = [10, 20, 30, 40, 5, 7, 1, 3]

    def pair(m):
        w = np.linalg.eigvals(m)
        if w.imag.any():
            return w.real[0], abs(w.imag[0])
        near = w.real[np.argmin(np.abs(w.real - m[1, 1]))]
        return near, 0.0

    def exceptional(h, top):
        s = abs(h[2, 1]) + abs(h[3, 2]) if top else abs(h[4, 3]) + abs(h[3, 2])
        b = 0.75 * s + (h[1, 1] if top else h[4, 4])
        return pair(np.array([[b, -0.4375 * s], [s, b]]))

    want = [exceptional(base, k % 20 != 0) for k in kdefl[:4]]
    want += [pair(h[3:5, 3:5]) for h in hs[4:]]

    def shifts(h, kdefl):
        diags = lp._diagonals(jnp.pad(h, ((0, 1), (0, 1))))
        return lp._shifts(diags, np.int32(1), np.int32(4), kdefl)

    rtr, rti, rtr2, rti2 = (np.asarray(x) for x in jit_fast(jax.vmap(shifts))(np.stack(hs), np.int32(kdefl)))
    want = np.array(want)
    np.testing.assert_allclose(rtr, want[:, 0], rtol=1e-14, atol=0)
    np.testing.assert_allclose(rti, want[:, 1], rtol=1e-14, atol=0)
    np.testing.assert_array_equal(rtr2, rtr)
    np.testing.assert_array_equal(rti2, -rti)
    assert rtr[0] != rtr[1] and rtr[7] == 0 and rti[7] == 0


def test_lanv2_two_by_two_blocks_as_lapack():
    """``?lanv2``'s eigenvalues ``(rt1r, rt1i, rt2r, rt2i)`` of ``[[a, b], [c, d]]`` in every
    branch (already triangular, ``b = 0`` swapped, equal diagonals with a complex pair, real
    pairs with ``p`` of either sign, complex pairs rotated to equal diagonals, nearly equal
    real ones), against LAPACK's ``dgees`` on the 2x2 matrix (``?lahqr`` hands such a block
    to ``?lanv2`` and stores ``rt1`` above ``rt2``)."""
    blocks = np.array(
        [
            [1.0, 2, 0, 3],  # c = 0
            [1.0, 0, 2, 3],  # b = 0: swapped, (3, 1)
            [1.0, -5, 2, 1],  # equal diagonals, b c < 0: 1 +- sqrt(10) i
            [1.0, 5, 2, 1],  # equal diagonals, b c > 0: real
            [4.0, 1, 2, 1],  # p > 0
            [1.0, 2, 3, 5],  # p < 0
            [1.0, -5, 2, 3],  # complex, rotated to equal diagonals
            [3.0, -2, 1, 0.5],  # complex, p != 0
            [-3.0, 4, -1, 2],  # complex, negative trace part
            [1.0, 1, 1e-20, 1],  # nearly equal real pair (the rotated split)
            [2.0, 1e-3, -1e-3, 2 + 1e-9],  # complex pair with a small imaginary part
            [0.0, 0, 0, 0],
        ]
    )
    got = np.stack([np.asarray(x) for x in jit_fast(lp._lanv2)(*blocks.T)], axis=-1)
    for block, (rt1r, rt1i, rt2r, rt2i) in zip(blocks, got, strict=True):
        *_, wr, wi, _, _, info = lapack.dgees(lambda *_: 0, block.reshape(2, 2), compute_v=0)
        assert info == 0
        np.testing.assert_allclose([rt1r, rt2r], wr, rtol=4e-16, atol=1e-300, err_msg=str(block))
        np.testing.assert_allclose([rt1i, rt2i], wi, rtol=4e-16, atol=1e-300, err_msg=str(block))


def test_balance_permutation_isolates_as_lapack():
    """``?gebal``'s permutation (``job = 'P'``): rows isolating an eigenvalue pushed to the
    bottom, columns to the top, and the window ``ilo..ihi`` left, against SciPy's ``dgebal``
    (``permute=1, scale=0``): a full matrix (nothing moves), a triangular one (everything
    moves: ``ilo = ihi = 0``), a permuted triangular one, one with a row and a column isolated,
    and two where a single entry in the window's last column (first row) keeps a row (column)
    from being isolated."""
    r = np.random.default_rng(3)
    full = r.standard_normal((5, 5)) + 10  # no zero entries
    tri = np.triu(full)[[2, 0, 4, 1, 3]][:, [2, 0, 4, 1, 3]]
    row = full.copy()
    row[1, [0, 2, 3, 4]] = 0  # row 1 isolates h[1, 1]
    both = row.copy()
    both[[0, 1, 2, 4], 3] = 0  # and column 3 isolates h[3, 3]
    near_row = full.copy()
    near_row[1, [0, 2, 3]] = 0  # row 1 keeps h[1, 4] (the last column): not isolated
    near_col = full.copy()
    near_col[[1, 3, 4], 2] = 0  # column 2 keeps h[0, 2] (the first row): not isolated
    cases = np.stack([full, np.triu(full), tri, row, both, near_row, near_col])
    got, lo, hi = (np.asarray(x) for x in jit_fast(lp._balance_permutation)(cases))
    for a, g, glo, ghi in zip(cases, got, lo, hi, strict=True):
        want, want_lo, want_hi, _, info = lapack.dgebal(a, scale=0, permute=1)
        assert info == 0
        np.testing.assert_array_equal(g, want)
        assert (glo, ghi) == (want_lo, want_hi)
    assert list(lo) == [0, 0, 0, 0, 1, 0, 0] and list(hi) == [4, 0, 0, 3, 3, 4, 4]


def test_hessenberg_reduces_only_the_balanced_window_as_lapack():
    """``?gehd2`` on the rows and columns ``ilo..ihi`` of a matrix ``?gebal`` isolated
    eigenvalues from (``(ilo, ihi)`` = (1, 4) of 6, (0, 5), (2, 5) and the 2-wide (3, 4); and
    (1, 4) with a zero first ``alpha``): the Hessenberg part against SciPy's ``dgehrd`` (its
    unblocked ``dgehd2`` at this size)."""
    r = np.random.default_rng(11)
    a = r.standard_normal((6, 6))
    a[0, 1:], a[5, :5], a[:, 0] = 0, 0, a[:, 0] * (np.arange(6) == 0)  # h[0, 0], h[5, 5] isolated
    a[0, 1:] = r.standard_normal(5)  # (the first row is free: column 0 is the isolating one)
    alpha0 = a.copy()
    alpha0[2, 1] = 0  # the first reflector's alpha is 0: beta = -norm (sign(0) is +)
    windows = [(1, 4), (0, 5), (2, 5), (3, 4), (1, 4)]
    mats = [a] * 4 + [alpha0]
    got = jit_fast(lp._hessenberg)(np.stack(mats), *np.asarray(windows, np.int32).T)
    for g, m, (lo, hi) in zip(np.asarray(got), mats, windows, strict=True):
        want = np.triu(lapack.dgehrd(m, lo=lo, hi=hi)[0], -1)
        np.testing.assert_allclose(g, want, rtol=0, atol=1e-14, err_msg=f"window {lo}..{hi}")


# --------------------------------------------------------------------------- custom-call expansion


def test_lower_custom_call_refuses_unknown_targets_and_mismatched_types():
    t = converter.mlir.TensorType
    with pytest.raises(NotImplementedError, match="no portable expansion"):
        lp.lower_custom_call("lapack_cgeev_ffi", {}, [t((3, 3), "complex64")], [])
    with pytest.raises(NotImplementedError, match="declares"):
        lp.lower_custom_call("lapack_sgetrf_ffi", {}, [t((3, 3), "float32")], [t((3, 3), "float32")])
    with pytest.raises(NotImplementedError, match="dynamic"):
        lp.lower_custom_call("lapack_sgetrf_ffi", {}, [t((None, 3), "float32")], [t((None, 3), "float32")])


def test_custom_call_flags_select_each_variant():
    """``mhlo.backend_config``'s character flags (ASCII codes; a missing one, or a bool,
    takes the default) and bool flags pick the expansion's variant: ``?potrf``'s and
    ``?syevd``'s ``uplo``, ``?syevd``'s ``mode``, ``?gesdd``'s full or reduced vectors from
    the declared result shapes (square ``u`` and ``vt``), and ``?geev``'s ``compute_left``
    and ``compute_right`` (either one ``'V'`` is refused); an unknown routine is refused."""
    assert lp._flag({"uplo": ord("U")}, "uplo", "L") == "U"
    assert lp._flag({}, "uplo", "L") == lp._flag({"uplo": True}, "uplo", "L") == "L"
    assert lp._bool({}, "left", True) is True and lp._bool({"left": 0}, "left", True) is False
    assert lp._bool({"transpose": 1}, "transpose", False) is True
    assert lp._expansion("potrf", {"uplo": ord("U")}, []).keywords == {"lower": False}
    assert lp._expansion("potrf", {}, []).keywords == {"lower": True}
    syevd = lp._expansion("syevd", {"uplo": ord("U"), "mode": ord("N")}, []).keywords
    assert syevd == {"lower": False, "vectors": False}
    assert lp._expansion("syevd", {}, []).keywords == {"lower": True, "vectors": True}
    n = {"mode": ord("N")}
    for u, vt, full in (((4, 4), (3, 3), True), ((4, 3), (3, 3), False), ((3, 3), (3, 4), False)):
        shapes = [(4, 3), (3,), u, vt, ()]
        assert lp._expansion("gesdd", n, shapes).keywords == {"mode": "N", "full_matrices": full}
    t = converter.mlir.TensorType
    for flags in ({"compute_left": ord("V"), "compute_right": ord("N")}, {"compute_left": ord("N")}):
        with pytest.raises(NotImplementedError, match="eigenvectors"):
            lp.lower_custom_call("lapack_sgeev_ffi", flags, [t((2, 2), "float32")], [])
    with pytest.raises(NotImplementedError, match=r"\?gees has no portable expansion"):
        lp._expansion("gees", {}, [])


# --------------------------------------------------------------------------- through ONNX and onnxruntime


def _onnx_close(fn, *args, tol=1e-4):
    got, want = run_onnx(fn, *args)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    return got


@pytest.mark.parametrize("dtype", [F32, F64])
def test_onnx_lu_solve_inv_det_batched(dtype):
    """Solve, inverse, determinant and LU in one model; ``?getf2`` scales the column below a
    pivot by its reciprocal, ``x * (1 / p)``: the first matrix's first column (pivot 3) holds
    that product bit for bit (in the rows the later pivots swap them to), where ``x / p``
    differs in the last bit (XLA compiles a division by the broadcast pivot into the product
    too: only onnxruntime tells them apart)."""
    a = rng.standard_normal((2, 4, 4)).astype(dtype)
    b = rng.standard_normal((2, 4, 3)).astype(dtype)
    a[0, :, 0] = [3.0, 2.5, -2.5, 0.5]
    col, pivot = a[0, 1:, 0], a[0, 0, 0]
    assert (col / pivot != col * (1 / pivot)).any()
    tol = 1e-4 if dtype == F32 else 1e-10
    got = _onnx_close(  # one model
        lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a), jnp.linalg.det(a), *jax.lax.linalg.lu(a)),
        a,
        b,
        tol=tol,
    )
    np.testing.assert_array_equal(np.sort(got[3][0, 1:, 0]), np.sort(col * (1 / pivot)))  # rows swap later


@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
def test_onnx_rectangular_lu(shape):
    _onnx_close(jax.scipy.linalg.lu_factor, rng.standard_normal(shape).astype(F32))
    _onnx_close(jax.scipy.linalg.lu, rng.standard_normal(shape).astype(F32))


def test_onnx_singular_det_is_zero():
    a = np.array([[1.0, 2, 3], [2, 4, 6], [1, 1, 1]], F32)
    got, want = run_onnx(jnp.linalg.det, a)
    assert float(got[0]) == float(want[0]) == 0.0


def test_onnx_cholesky_not_positive_definite_is_nan_as_jax():
    bad = _spd(4, dtype=F32)
    bad[2, 2] = -50.0
    a = np.stack([_spd(4, dtype=F32), bad])
    got, want = run_onnx(jnp.linalg.cholesky, a)
    assert np.isnan(want[0][1][np.tril_indices(4)]).all()  # JAX NaN-fills on ?potrf's info
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5, equal_nan=True)
    _onnx_close(
        lambda a, b: jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(a, lower=False), b), a[0], a[0]
    )


def test_onnx_qr_complete_and_ormqr():
    a = rng.standard_normal((2, 5, 3)).astype(F64)
    _onnx_close(lambda a: jnp.abs(jnp.linalg.qr(a, mode="complete")[0]), a, tol=1e-10)
    _onnx_close(
        lambda a: jnp.linalg.qr(a, mode="complete")[0] @ jnp.linalg.qr(a, mode="complete")[1], a, tol=1e-10
    )
    qr, tau, _, _ = lapack.dgeqrf(a[0])
    c = rng.standard_normal((2, 5))
    _onnx_close(
        lambda qr, tau, c: jax.lax.linalg.ormqr(qr, tau, c, left=False, transpose=True), qr, tau, c, tol=1e-10
    )


@pytest.mark.parametrize(("dtype", "n"), [(F32, 5), (F64, 5), (F32, 24)])
def test_onnx_eigh_batched(dtype, n):
    m = rng.standard_normal((3, n, n))
    s = (m + np.swapaxes(m, -1, -2)).astype(dtype)
    tol = 1e-4 if dtype == F32 else 1e-10
    _onnx_close(
        lambda a: (lambda w, v: (w, (v * w[..., None, :]) @ jnp.swapaxes(v, -1, -2)))(*jnp.linalg.eigh(a)),
        s,
        tol=tol,
    )
    _onnx_close(lambda a: jnp.linalg.eigvalsh(a, UPLO="U"), s, tol=tol)


def _nan_superset(got, want):
    """Non-finite input: every output is NaN throughout (the Jacobi expansions propagate the
    NaN to every element, and no element may be a number LAPACK would not give), and JAX's
    LAPACK result is NaN too, at least in part (on non-finite input LAPACK may pass some
    numbers through with ``info = 0`` where the expansions give NaN throughout, never a
    number where we give one)."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        assert np.isnan(g).all(), g
    assert any(np.isnan(w).any() for w in want), want


@pytest.mark.parametrize("where", [(0, 0), (0, 1)])
def test_onnx_eigh_nan_input_is_nan(where):
    s = np.eye(3, dtype=F32)
    s[where] = s[where[::-1]] = np.nan
    _nan_superset(*run_onnx(jnp.linalg.eigh, s))


def test_onnx_svd_inf_input_is_nan():
    a = np.ones((3, 2), F32)  # (LAPACK's own ?gesdd does not return on some Inf inputs)
    a[0, 0] = np.inf
    _nan_superset(*run_onnx(jnp.linalg.svd, a))


@pytest.mark.parametrize("shape", [(2, 5, 3), (2, 3, 5)])
def test_onnx_svd_full_and_reduced(shape):
    a = rng.standard_normal(shape).astype(F64)

    def projections(a, full):
        u, s, vt = jnp.linalg.svd(a, full_matrices=full)
        # sign-free: the projectors onto the singular subspaces and the values
        return s, u @ jnp.swapaxes(u, -1, -2), jnp.swapaxes(vt, -1, -2) @ vt

    _onnx_close(  # one model (one conversion, one session): both modes, pinv and rank
        lambda a: (
            *projections(a, True),
            *projections(a, False),
            jnp.linalg.pinv(a),
            jnp.linalg.matrix_rank(a),
        ),
        a,
        tol=1e-10,
    )


def _sorted_eigenvalues(a, w=None):
    """``jnp.linalg.eigvals`` (or the given eigenvalues ``w`` of ``a``) as real arrays (real
    parts, then imaginary parts) sorted by ``(real, imag)``: order-free, and only the
    eigenvalues cross the ONNX boundary."""
    w = jnp.linalg.eigvals(a) if w is None else w
    order = jnp.lexsort((jnp.round(w.imag, 4), jnp.round(w.real, 4)), axis=-1)
    w = jnp.take_along_axis(w, order, axis=-1)
    return w.real, w.imag


@pytest.mark.parametrize(
    ("shape", "dtype"), [((4, 4), F32), ((2, 3, 6, 6), F64), ((1, 1), F32), ((2, 2), F64)]
)
def test_onnx_eigvals_matches_jax(shape, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    tol = 1e-4 if dtype == F32 else 1e-10

    # one model (one conversion and compilation): the sorted real parts and imaginary parts,
    # and the eigenvalues themselves as complex results, read back from real pairs
    def sorted_and_raw(a):
        w = jnp.linalg.eigvals(a)  # one ?geev
        return (*_sorted_eigenvalues(a, w), w)

    got, want = run_onnx(sorted_and_raw, a)
    assert len(got) == len(want) == 3
    for g, w in zip(got[:2], want[:2], strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    assert np.iscomplexobj(got[2]) and got[2].dtype == want[2].dtype and got[2].shape == want[2].shape
    for i in np.ndindex(shape[:-2]):
        assert _match_error(got[2][i], want[2][i]) < tol


def test_onnx_eigvals_rotation_and_nan_input():
    a = np.kron(np.eye(2), np.array([[0.0, -2], [2, 0]])).astype(F32)
    _onnx_close(_sorted_eigenvalues, a, tol=1e-5)
    a[0, 0] = np.nan
    got, want = run_onnx(_sorted_eigenvalues, a)
    assert np.isnan(got[0]).all() and np.isnan(want[0]).all()


def test_onnx_eigvals_of_tiny_and_huge_float64_matrices_match_numpy():
    """?geev scales a matrix whose largest magnitude is below ``smlnum`` (~1e-146 in float64)
    or above ``bignum`` up or down to that bound, and both parts of the eigenvalues back:
    complex pairs of a matrix scaled by 1e-150 and by 1e150, through onnxruntime, as
    ``numpy.linalg.eigvals`` (one model, the two matrices a batch)."""
    m = np.array([[1.0, -3, 0.5, 0], [2, 1, 0, 1], [0, 0.25, -1, -2], [1, 0, 4, 0.5]])
    a = np.stack([m * 1e-150, m * 1e150])
    got, _ = run_onnx(jnp.linalg.eigvals, a)
    for i, scale in enumerate((1e-150, 1e150)):
        want = np.linalg.eigvals(a[i])
        assert np.abs(want.imag).max() > scale  # complex pairs: the imaginary parts are scaled too
        assert _match_error(got[0][i], want) < 1e-12 * scale


def test_onnx_eig_with_eigenvectors_refused():
    a = rng.standard_normal((3, 3)).astype(F32)
    module = converter.from_stablehlo(jax.jit(jnp.linalg.eig).lower(a).as_text())
    with pytest.raises(ConversionError, match="geev eigenvectors"):
        module.to_onnx()


@pytest.mark.parametrize("dtype", [F32, F64], ids=lambda d: d.__name__)
def test_every_target_of_a_dtype(dtype):
    """All the real LAPACK routines of one dtype in one model, run by onnxruntime as
    ``jax.jit`` runs them (outputs independent of the library's signs)."""
    from tests.backends.lapack_batch import TOL, every_routine, inputs

    rtol, atol = TOL[dtype]
    got, want = run_onnx(every_routine, *inputs(dtype))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def test_geev_with_an_eigenvalue_isolated_at_the_bottom_matches_numpy():
    """The last row zero but its diagonal: ``?gebal`` isolates that eigenvalue (``ihi < n``)
    and the Hessenberg reflectors must leave the rows past ``ihi`` alone."""
    a = np.random.default_rng(0).standard_normal((5, 5))
    a[-1, :-1] = 0
    got, info = _geev_values(a)
    assert int(info) == 0
    assert _match_error(got, np.linalg.eigvals(a)) <= 1e-12
