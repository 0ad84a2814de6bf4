"""Factorization ATen rules (``frontends/torch/ops/linalg_decomp.py``) against eager torch.

Outputs that LAPACK defines uniquely (Cholesky and LU factors, pivots, ``info``, QR with
LAPACK's Householder signs, singular values, eigenvalues) are compared raw. Singular vectors
and symmetric eigenvectors are unique only up to sign, and torch's MKL and jaxlib's LAPACK
choose differently: those are compared up to one sign per vector, plus reconstruction.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from converter.frontends.torch import export

import converter
from converter._torch_internal import aten_op

torch.manual_seed(0)
TOL = dict(rtol=1e-4, atol=1e-5)


def spd(*shape):
    a = torch.randn(*shape)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1])


def test_cholesky_ex_lower_upper_and_info(check):
    a = spd(2, 4, 4)
    bad = a.clone()
    bad[1, 2, 2] = -50.0  # the leading 3x3 minor of batch 1 is not positive definite
    fn = lambda a: (*torch.linalg.cholesky_ex(a), *torch.linalg.cholesky_ex(a, upper=True))  # noqa: E731
    check(fn, a, ops="aten.linalg_cholesky_ex.default", **TOL)
    out = converter.from_torch(export(_Fn(fn), (bad,))).to_jax()(bad.numpy())
    want = fn(bad)
    np.testing.assert_array_equal(out[1], want[1].numpy())  # info [0, 3]
    np.testing.assert_array_equal(out[3], want[3].numpy())
    np.testing.assert_allclose(out[0][0], want[0][0].numpy(), **TOL)  # the good batch element


@pytest.mark.skipif(aten_op("cholesky") is None, reason="torch 2.14 removed torch.cholesky (aten.cholesky)")
def test_cholesky_reads_one_triangle(check):
    a = spd(5, 5)
    junk = a + torch.triu(torch.full((5, 5), 7.0), 1)  # only the lower triangle is read
    check(lambda a: (torch.cholesky(a), torch.linalg.cholesky(a)), junk, ops="aten.cholesky.default", **TOL)
    junk_up = a + torch.tril(torch.full((5, 5), 7.0), -1)
    check(lambda a: torch.cholesky(a, upper=True), junk_up, ops="aten.cholesky.default", **TOL)


def test_complex_cholesky_upper_and_inverse(check):
    """Complex Hermitian input: the upper factor is the conjugate transpose of the lower one
    (``U = L^H``), and ``cholesky_inverse`` of an upper factor is ``(U^H U)^{-1}``."""
    m = torch.randn(3, 3, dtype=torch.complex64)
    a = m @ m.mH + 3 * torch.eye(3)
    fn = lambda a: (  # noqa: E731
        torch.linalg.cholesky(a, upper=True),
        torch.cholesky_inverse(torch.linalg.cholesky(a, upper=True), upper=True),
    )
    check(fn, a, ops=["aten.linalg_cholesky_ex.default", "aten.cholesky_inverse.default"], **TOL)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_inverse_and_solve(check, upper):
    factor = torch.linalg.cholesky(spd(2, 4, 4), upper=upper)
    b = torch.randn(3, 2, 4, 2)  # batch broadcast against the factor
    check(
        lambda f, b: (torch.cholesky_inverse(f, upper=upper), torch.cholesky_solve(b, f, upper=upper)),
        factor,
        b,
        ops=["aten.cholesky_inverse.default", "aten.cholesky_solve.default"],
        **TOL,
    )


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 4, 4)])
def test_lu_factor_lu_and_unpack(check, shape):
    a = torch.randn(*shape)

    def fn(a):
        lu, piv, info = torch.linalg.lu_factor_ex(a)
        return lu, piv, info, *torch.linalg.lu(a), *torch.lu_unpack(lu, piv)

    check(
        fn,
        a,
        ops=["aten.linalg_lu_factor_ex.default", "aten.linalg_lu.default", "aten.lu_unpack.default"],
        **TOL,
    )


def test_lu_info_of_singular_matrix(check):
    # seeded: for about half of the random matrices rounding leaves a tiny nonzero pivot in one
    # LAPACK (info 0) and an exact zero in the other (info 3), so the test depended on the order
    torch.manual_seed(0)
    a = torch.randn(2, 4, 4)
    a[1, :, 2] = a[1, :, 0] * 2  # column 3 dependent: a zero pivot
    check(lambda a: torch.linalg.lu_factor_ex(a)[2], a, ops="aten.linalg_lu_factor_ex.default")


def test_lu_unpack_flags(check):
    lu, piv = torch.linalg.lu_factor(torch.randn(4, 4))
    fn = lambda lu, piv: (*torch.lu_unpack(lu, piv, False, True), *torch.lu_unpack(lu, piv, True, False))  # noqa: E731
    check(fn, lu, piv, ops="aten.lu_unpack.default", **TOL)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve(check, left, adjoint):
    lu, piv = torch.linalg.lu_factor(torch.randn(2, 4, 4))
    b = torch.randn(2, 4, 3) if left else torch.randn(2, 3, 4)
    check(
        lambda lu, piv, b: torch.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint),
        lu,
        piv,
        b,
        ops="aten.linalg_lu_solve.default",
        **TOL,
    )


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_qr_modes_geqrf_householder(check, shape):
    a = torch.randn(*shape)

    def fn(a):
        h, tau = torch.geqrf(a)
        q = torch.linalg.householder_product(h, tau) if shape[-2] >= shape[-1] else h
        return (
            *torch.linalg.qr(a),
            *torch.linalg.qr(a, mode="complete"),
            torch.linalg.qr(a, mode="r")[1],
            h,
            tau,
            q,
        )

    ops = ["aten.linalg_qr.default", "aten.geqrf.default"]
    check(
        fn,
        a,
        ops=ops + (["aten.linalg_householder_product.default"] if shape[-2] >= shape[-1] else []),
        **TOL,
    )


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_ormqr(check, left, transpose):
    h, tau = torch.geqrf(torch.randn(5, 5))
    c = torch.randn(5, 3) if left else torch.randn(3, 5)
    check(
        lambda h, tau, c: torch.ormqr(h, tau, c, left=left, transpose=transpose),
        h,
        tau,
        c,
        ops="aten.ormqr.default",
        **TOL,
    )


def _run(fn, *args):
    out = converter.from_torch(export(_Fn(fn), args)).to_jax()(*(a.numpy() for a in args))
    with torch.no_grad():
        return [np.asarray(o) for o in out], [t.numpy() for t in fn(*args)]


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def assert_same_up_to_sign(got, want, axis):
    """Vectors along ``axis`` equal up to one sign (or phase) each."""
    dot = np.sum(np.conj(want) * got, axis=axis, keepdims=True)
    phase = dot / np.abs(dot)
    np.testing.assert_allclose(got, want * phase, **TOL)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_svd(shape):
    a = torch.randn(*shape)
    got, want = _run(lambda a: (*torch.linalg.svd(a, full_matrices=False), torch.linalg.svdvals(a)), a)
    np.testing.assert_allclose(got[1], want[1], **TOL)
    np.testing.assert_allclose(got[3], want[3], **TOL)
    assert_same_up_to_sign(got[0], want[0], axis=-2)  # columns of U
    assert_same_up_to_sign(got[2], want[2], axis=-1)  # rows of Vh
    np.testing.assert_allclose((got[0] * got[1][..., None, :]) @ got[2], a.numpy(), **TOL)


def test_svd_full_matrices(check):
    a = torch.randn(5, 3)
    got, want = _run(lambda a: tuple(torch.linalg.svd(a, full_matrices=True)), a)
    assert [g.shape for g in got] == [w.shape for w in want] == [(5, 5), (3,), (3, 3)]
    np.testing.assert_allclose(got[0].T @ got[0], np.eye(5), atol=1e-5)
    np.testing.assert_allclose(got[0][:, :3] * got[1] @ got[2], a.numpy(), **TOL)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_one_triangle(uplo):
    a = spd(2, 5, 5) - 6 * torch.eye(5)  # indefinite
    junk = a + (torch.triu if uplo == "L" else torch.tril)(torch.full((5, 5), 9.0), 1 if uplo == "L" else -1)
    got, want = _run(lambda a: (*torch.linalg.eigh(a, UPLO=uplo), torch.linalg.eigvalsh(a, UPLO=uplo)), junk)
    np.testing.assert_allclose(got[0], want[0], **TOL)
    np.testing.assert_allclose(got[2], want[2], **TOL)
    assert_same_up_to_sign(got[1], want[1], axis=-2)


def test_eig(check):
    a = torch.tensor([[2.0, -3.0, 0.5], [3.0, 2.0, 0.0], [0.1, 0.2, -1.0]])  # a conjugate pair
    got, want = _run(lambda a: tuple(torch.linalg.eig(a)), a)
    order_g, order_w = (
        np.argsort(got[0].imag + 10 * got[0].real),
        np.argsort(want[0].imag + 10 * want[0].real),
    )
    np.testing.assert_allclose(got[0][order_g], want[0][order_w], **TOL)
    assert_same_up_to_sign(got[1][:, order_g], want[1][:, order_w], axis=-2)
    check(lambda a: torch.linalg.eigvals(a).abs(), a, ops="aten.linalg_eig.default", **TOL)


def test_svd_without_uv_and_householder_product_of_no_reflector(check):
    """``_linalg_svd(compute_uv=False)`` (empty ``U``/``Vh``) and a Householder product of
    no reflector (the identity's first columns): one program."""
    a = torch.randn(4, 3)

    def fn(a, tau):
        return torch.ops.aten._linalg_svd(a, compute_uv=False), torch.linalg.householder_product(a, tau)

    ops = ["aten._linalg_svd.default", "aten.linalg_householder_product.default"]
    check(fn, a, torch.zeros(0), ops=ops, rtol=1e-5, atol=1e-6)


def test_lu_without_pivoting_and_an_svd_driver_raise():
    """torch's CPU kernels refuse both when run; ``torch.export`` lets them through."""
    import jax.numpy as jnp
    from converter.frontends.torch.ops import linalg_decomp as d

    a = jnp.eye(3)
    for rule in (d.linalg_lu_factor_ex, d.linalg_lu):
        with pytest.raises(NotImplementedError, match="LU without pivoting"):
            rule(a, pivot=False)
    with pytest.raises(NotImplementedError, match="svd driver 'gesvd'"):
        d.linalg_svd(a, driver="gesvd")
