"""Matrix factorizations: Cholesky, LU, QR, SVD, eigendecompositions, Householder products
(ATen schemas in ``native_functions.yaml``, algorithms in ``BatchLinearAlgebra.cpp``).

Every rule calls ``jax.lax.linalg``, which lowers on CPU to the LAPACK routine torch calls
(``?potrf``, ``?getrf``, ``?geqrf``/``?orgqr``/``?ormqr``, ``?gesdd``, ``?syevd``/``?heevd``,
``?geev``), and returns torch's output conventions: LU pivots 1-based int32, ``info`` int32 as
LAPACK reports it (:mod:`converter.lapack`), empty ``(0,)`` tensors for outputs a flag turns
off. Where a result is unique only up to signs or phases (singular vectors, eigenvectors) it
is LAPACK's own choice: the same routine on the same input gives the same output, but torch's
CPU build links MKL and jaxlib another LAPACK, whose choices may differ.

Runtime error checks (``check_errors=True``, ``aten._linalg_check_errors``) cannot be
expressed in StableHLO: they are dropped, so a failed factorization gives what LAPACK leaves
(NaN from ``jax.lax.linalg``, ``info > 0``) instead of raising.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from converter._torch_internal import aten_op
from converter.lapack import cholesky_info, lu_info

from ..registry import register

aten = __import__("torch").ops.aten


def mT(x):
    """The matrix transpose of ``(..., m, n)``."""
    return jnp.swapaxes(x, -1, -2)


def mH(x):
    """The conjugate transpose of ``(..., m, n)``."""
    return jnp.conj(mT(x)) if jnp.iscomplexobj(x) else mT(x)


def empty(dtype):
    """The ``(0,)`` tensor ATen returns for an output a flag turns off."""
    return jnp.zeros((0,), dtype)


def broadcast_batch(*xs, core: tuple[int, ...] | None = None):
    """``xs`` with their batch dims (all but the last ``core[i]`` dims, 2 by default)
    broadcast together, as ``_linalg_broadcast_batch_dims`` does."""
    core = core or (2,) * len(xs)
    batches = [x.shape[: x.ndim - c] for x, c in zip(xs, core, strict=True)]
    batch = np.broadcast_shapes(*batches)
    return [jnp.broadcast_to(x, batch + x.shape[x.ndim - c :]) for x, c in zip(xs, core, strict=True)]


# --------------------------------------------------------------------------- Cholesky


def cholesky(a, upper: bool = False):
    """The Cholesky factor of ``a`` ``(..., n, n)``, reading only its lower (``upper``: upper)
    triangle; the other triangle of the result is zero. NaN where ``a`` is not positive
    definite (``?potrf``)."""
    if upper:
        return mH(lax.linalg.cholesky(mH(a), symmetrize_input=False))
    return lax.linalg.cholesky(a, symmetrize_input=False)


@register(aten.linalg_cholesky_ex.default)
def linalg_cholesky_ex(a, upper=False, check_errors=False):
    """``(L, info)``: ``L`` ``(..., n, n)`` as :func:`cholesky`, ``info`` int32 ``(...)``: the
    order of the first leading minor that is not positive definite, 0 on success."""
    factor = cholesky(a, upper)
    return factor, cholesky_info(a, factor, lower=not upper)


def cholesky_rule(a, upper=False):
    """``torch.cholesky``: the factor of :func:`cholesky` (``aten.cholesky`` exists up to
    torch 2.13; later ``torch.cholesky`` traces to ``linalg_cholesky_ex``)."""
    return cholesky(a, upper)


if (_cholesky_op := aten_op("cholesky")) is not None:
    register(_cholesky_op)(cholesky_rule)


@register(aten.cholesky_inverse.default)
def cholesky_inverse(factor, upper=False):
    """``(L L^H)^{-1}`` (``upper``: ``(U^H U)^{-1}``) from the triangular factor ``(..., n, n)``
    (``?potri``), through the inverse of the factor."""
    n = factor.shape[-1]
    eye = jnp.broadcast_to(jnp.eye(n, dtype=factor.dtype), factor.shape)
    inv = lax.linalg.triangular_solve(factor, eye, left_side=True, lower=not upper)
    return matmul(inv, mH(inv)) if upper else matmul(mH(inv), inv)


@register(aten.cholesky_solve.default)
def cholesky_solve(b, factor, upper=False):
    """Solve ``A X = B`` with ``A = L L^H`` (``upper``: ``U^H U``) given the factor
    ``(..., n, n)`` and ``B`` ``(..., n, k)``, batch dims broadcast (``?potrs``)."""
    b, factor = broadcast_batch(b, factor)
    lower = not upper
    y = lax.linalg.triangular_solve(
        factor, b, left_side=True, lower=lower, transpose_a=upper, conjugate_a=upper
    )
    return lax.linalg.triangular_solve(
        factor, y, left_side=True, lower=lower, transpose_a=lower, conjugate_a=lower
    )


def matmul(x, y):
    """``x @ y`` at ``Precision.HIGHEST`` (float32 products as torch's CPU BLAS)."""
    return jnp.matmul(x, y, precision=lax.Precision.HIGHEST)


# --------------------------------------------------------------------------- LU


def lu(a):
    """``(LU, pivots, perm)`` of ``a`` ``(..., m, n)`` (``?getrf``): pivots 1-based int32
    ``(..., min(m, n))`` as torch returns them, ``perm`` the 0-based row permutation ``(..., m)``
    with ``a[perm] = L @ U``."""
    factor, pivots, perm = lax.linalg.lu(a)
    return factor, (pivots + 1).astype(np.int32), perm


@register(aten.linalg_lu_factor_ex.default)
def linalg_lu_factor_ex(a, pivot=True, check_errors=False):
    """``(LU, pivots, info)`` of ``a`` ``(..., m, n)``: ``LU`` packs unit-lower ``L`` and ``U``,
    pivots 1-based int32 ``(..., min(m, n))``, ``info`` the first zero pivot (1-based) or 0.

    Raises:
        NotImplementedError: ``pivot=False`` (torch's CPU kernel has no unpivoted LU either).
    """
    if not pivot:
        raise NotImplementedError("LU without pivoting")
    factor, pivots, _ = lu(a)
    return factor, pivots, lu_info(factor)


def unpack(factor):
    """``(L, U)`` of a packed ``(..., m, n)`` LU factor: ``L`` unit lower ``(..., m, k)``, ``U``
    upper ``(..., k, n)``, ``k = min(m, n)``."""
    m, n = factor.shape[-2:]
    k = min(m, n)
    low = jnp.tril(factor[..., :, :k], -1) + jnp.eye(m, k, dtype=factor.dtype)
    return low, jnp.triu(factor[..., :k, :])


def permutation_matrix(perm, dtype):
    """``P`` ``(..., m, m)`` with ``A = P @ L @ U`` for the row permutation ``perm``
    (``A[perm] = L @ U``): ``P[perm[i], i] = 1``."""
    m = perm.shape[-1]
    return (perm[..., None, :] == jnp.arange(m, dtype=perm.dtype)[:, None]).astype(dtype)


@register(aten.linalg_lu.default)
def linalg_lu(a, pivot=True):
    """``(P, L, U)`` with ``a = P @ L @ U``: ``P`` ``(..., m, m)``, ``L`` ``(..., m, k)``, ``U``
    ``(..., k, n)``.

    Raises:
        NotImplementedError: ``pivot=False``.
    """
    if not pivot:
        raise NotImplementedError("LU without pivoting")
    factor, _, perm = lu(a)
    low, up = unpack(factor)
    return permutation_matrix(perm, a.dtype), low, up


def pivots_to_perm(pivots, m: int):
    """The 0-based row permutation ``(..., m)`` of LAPACK's 1-based ``pivots`` (row ``i``
    swapped with row ``pivots[i]``, in order)."""
    return lax.linalg.lu_pivots_to_permutation(pivots.astype(np.int32) - 1, m)


@register(aten.lu_unpack.default)
def lu_unpack(factor, pivots, unpack_data=True, unpack_pivots=True):
    """``(P, L, U)`` from ``LU`` ``(..., m, n)`` and 1-based ``pivots``; an output whose flag is
    off is an empty ``(0,)`` tensor."""
    m = factor.shape[-2]
    if unpack_data:
        low, up = unpack(factor)
    else:
        low = up = empty(factor.dtype)
    if unpack_pivots:
        p = permutation_matrix(pivots_to_perm(pivots, m), factor.dtype)
    else:
        p = empty(factor.dtype)
    return p, low, up


def lu_solve(factor, perm, b, left: bool = True, adjoint: bool = False):
    """Solve ``A X = B`` (``left``) or ``X A = B`` with ``A = P L U`` given as the packed
    factor ``(..., n, n)`` and row permutation ``perm``; ``adjoint`` uses ``A^H``. ``B``
    ``(..., n, k)`` (``left``) or ``(..., k, n)``; batch dims broadcast (``?getrs``)."""
    if not left:  # X A = B  <=>  A^H X^H = B^H
        return mH(lu_solve(factor, perm, mH(b), True, not adjoint))
    factor, perm, b = broadcast_batch(factor, perm, b, core=(2, 1, 2))
    tri = lax.linalg.triangular_solve
    if not adjoint:
        y = jnp.take_along_axis(b, perm[..., :, None], axis=-2)
        y = tri(factor, y, left_side=True, lower=True, unit_diagonal=True)
        return tri(factor, y, left_side=True, lower=False)
    y = tri(factor, b, left_side=True, lower=False, transpose_a=True, conjugate_a=True)
    y = tri(factor, y, left_side=True, lower=True, unit_diagonal=True, transpose_a=True, conjugate_a=True)
    return jnp.take_along_axis(y, jnp.argsort(perm, axis=-1)[..., :, None], axis=-2)


@register(aten.linalg_lu_solve.default)
def linalg_lu_solve(factor, pivots, b, left=True, adjoint=False):
    """Solve with an LU factorization from ``linalg.lu_factor``: see :func:`lu_solve`."""
    return lu_solve(factor, pivots_to_perm(pivots, factor.shape[-1]), b, left, adjoint)


# --------------------------------------------------------------------------- QR


@register(aten.linalg_qr.default)
def linalg_qr(a, mode="reduced"):
    """``(Q, R)`` of ``a`` ``(..., m, n)`` (``?geqrf`` + ``?orgqr``): ``reduced`` gives
    ``Q (..., m, k)``, ``R (..., k, n)``; ``complete`` ``Q (..., m, m)``, ``R (..., m, n)``; ``r``
    only ``R`` (``Q`` empty); ``torch.export`` refuses any other mode."""
    q, r = lax.linalg.qr(a, full_matrices=mode == "complete")
    return (empty(a.dtype) if mode == "r" else q), r


@register(aten.geqrf.default)
def geqrf(a):
    """``(a, tau)``: ``?geqrf``'s packed QR of ``a`` ``(..., m, n)`` (``R`` on and above the
    diagonal, Householder vectors below) and the reflector scales ``(..., min(m, n))``."""
    h, tau = jnp.linalg.qr(a, mode="raw")
    return mT(h), tau


@register(aten.linalg_householder_product.default)
def householder_product(a, tau):
    """The first ``n`` columns ``(..., m, n)`` of the product of the ``k`` Householder
    reflectors stored in ``a`` ``(..., m, n)`` and ``tau`` ``(..., k)`` (``?orgqr``)."""
    a, tau = broadcast_batch(a, tau, core=(2, 1))
    if tau.shape[-1] == 0 or a.size == 0:
        m, n = a.shape[-2:]
        return jnp.broadcast_to(jnp.eye(m, n, dtype=a.dtype), a.shape)
    return lax.linalg.householder_product(a, tau)


@register(aten.ormqr.default)
def ormqr(a, tau, c, left=True, transpose=False):
    """``Q C``, ``Q^H C``, ``C Q`` or ``C Q^H`` (``left``, ``transpose``) with ``Q`` the
    product of the Householder reflectors in ``a`` and ``tau`` (``?ormqr``/``?unmqr``)."""
    a, tau, c = broadcast_batch(a, tau, c, core=(2, 1, 2))
    return lax.linalg.ormqr(a, tau, c, left=left, transpose=transpose)


# --------------------------------------------------------------------------- SVD, eigen


@register(aten._linalg_svd.default)
def linalg_svd(a, full_matrices=False, compute_uv=True, driver=None):
    """``(U, S, Vh)`` of ``a`` ``(..., m, n)`` (``?gesdd``): ``S`` ``(..., k)`` descending;
    ``U``/``Vh`` ``(..., m, k)``/``(..., k, n)``, or square with ``full_matrices``, or empty
    without ``compute_uv``.

    Raises:
        NotImplementedError: a ``driver`` (CUDA only in torch).
    """
    if driver is not None:
        raise NotImplementedError(f"svd driver {driver!r}")
    if not compute_uv:
        s = lax.linalg.svd(a, full_matrices=False, compute_uv=False)
        return empty(a.dtype), s, empty(a.dtype)
    u, s, vh = lax.linalg.svd(a, full_matrices=full_matrices, compute_uv=True)
    return u, s, vh


@register(aten._linalg_eigh.default)
def linalg_eigh(a, uplo="L", compute_v=True):
    """``(eigenvalues, eigenvectors)`` of the Hermitian ``a`` ``(..., n, n)``, reading only its
    ``uplo`` triangle (``?syevd``/``?heevd``): ascending real eigenvalues ``(..., n)``,
    eigenvectors as columns (empty without ``compute_v``)."""
    v, w = lax.linalg.eigh(a, lower=uplo.upper() == "L", symmetrize_input=False)
    return w, (v if compute_v else empty(a.dtype))


@register(aten.linalg_eig.default)
def linalg_eig(a):
    """``(eigenvalues, eigenvectors)`` of ``a`` ``(..., n, n)`` (``?geev``), complex; the
    eigenvectors are columns of unit norm, in LAPACK's normalization."""
    w, v = lax.linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=True)
    return w, v
