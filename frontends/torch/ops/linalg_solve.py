"""Linear solves, inverses, determinants, pseudo-inverse and matrix exponential (ATen schemas
in ``native_functions.yaml``, algorithms in ``BatchLinearAlgebra.cpp`` and ``LinearAlgebra.cpp``)
on the factorizations of :mod:`.linalg_decomp`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from converter.lapack import lu_info

from ..registry import register
from .linalg_decomp import broadcast_batch, lu, lu_solve, matmul, mH, mT

aten = __import__("torch").ops.aten


@register(aten._linalg_check_errors.default)
def linalg_check_errors(info, api_name, is_matrix=False):
    """torch's runtime check that a factorization succeeded (raises on ``info != 0``): not
    expressible in StableHLO, so dropped; the checked op's outputs are then LAPACK's (NaN or
    ``inf`` for a singular or indefinite input). Returns nothing, as the schema."""
    return None


@register(aten.linalg_inv_ex.default)
def linalg_inv_ex(a, check_errors=False):
    """``(inverse, info)`` of ``a`` ``(..., n, n)`` through its LU factorization (``?getrf`` +
    solve with the identity, as torch); ``info`` the first zero pivot (1-based) or 0."""
    factor, _, perm = lu(a)
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    return lu_solve(factor, perm, eye), lu_info(factor)


def is_vector_rhs(a, b) -> bool:
    """torch's ``linalg_solve_is_vector_rhs``: ``b`` is a (batch of) vector(s) when it is 1-D
    or has the shape of ``a`` without its last dim."""
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])


@register(aten._linalg_solve_ex.default)
def linalg_solve_ex(a, b, left=True, check_errors=False):
    """``(result, LU, pivots, info)`` solving ``A X = B`` (``left``) or ``X A = B``.

    As torch's kernel for a contiguous real ``A``, the LU factorization is of ``A^T`` and the
    system is solved with ``adjoint=True`` (the ``LU``, ``pivots`` and ``info`` outputs are
    those of ``A^T``); complex ``A`` is factored as is. ``B`` is a vector, or a batch of
    vectors, when :func:`is_vector_rhs`."""
    use_t = not jnp.iscomplexobj(a)
    factor, pivots, perm = lu(mT(a) if use_t else a)
    vector = is_vector_rhs(a, b)
    rhs = b[..., None] if vector else b
    x = lu_solve(factor, perm, rhs, left, adjoint=use_t)
    return (x[..., 0] if vector else x), factor, pivots, lu_info(factor)


@register(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(a, b, upper, left=True, unitriangular=False):
    """Solve ``A X = B`` (``left``) or ``X A = B`` with ``A`` ``(..., n, n)`` triangular (only
    its ``upper`` or lower triangle read, unit diagonal with ``unitriangular``; ``?trsm``)."""
    a, b = broadcast_batch(a, b)
    return lax.linalg.triangular_solve(a, b, left_side=left, lower=not upper, unit_diagonal=unitriangular)


@register(aten.triangular_solve.default)
def triangular_solve(b, a, upper=True, transpose=False, unitriangular=False):
    """``(solution, cloned_coefficient)``: solve ``op(A) X = B`` with ``op`` the transpose when
    ``transpose``; the second output is ``A`` broadcast to the common batch shape."""
    b, a = broadcast_batch(b, a)
    x = lax.linalg.triangular_solve(
        a, b, left_side=True, lower=not upper, transpose_a=transpose, unit_diagonal=unitriangular
    )
    return x, a


def _det_parts(a):
    """``(diag(U), parity sign, LU, pivots)`` of ``a`` ``(..., n, n)``."""
    factor, pivots, _ = lu(a)
    n = a.shape[-1]
    swaps = jnp.sum(pivots != jnp.arange(1, n + 1, dtype=pivots.dtype), axis=-1)
    parity = jnp.where(swaps % 2 == 0, 1, -1).astype(a.dtype)
    return jnp.diagonal(factor, axis1=-2, axis2=-1), parity, factor, pivots


@register(aten._linalg_det.default)
def linalg_det(a):
    """``(det, LU, pivots)``: the determinant ``(...)`` of ``a`` ``(..., n, n)`` as the signed
    product of its LU pivots (1 for ``0 x 0``)."""
    diag, parity, factor, pivots = _det_parts(a)
    return parity * jnp.prod(diag, axis=-1), factor, pivots


@register(aten._linalg_slogdet.default)
def linalg_slogdet(a):
    """``(sign, logabsdet, LU, pivots)``: ``det = sign * exp(logabsdet)``; ``sign`` is 0 and
    ``logabsdet`` ``-inf`` for a singular matrix; ``sign`` has ``a``'s dtype (unit modulus for
    complex), ``logabsdet`` the real dtype."""
    diag, parity, factor, pivots = _det_parts(a)
    absd = jnp.abs(diag)
    unit = jnp.where(absd == 0, 0, diag / jnp.where(absd == 0, 1, absd).astype(diag.dtype))
    sign = parity * jnp.prod(unit, axis=-1)
    return sign, jnp.sum(jnp.log(absd), axis=-1), factor, pivots


def _pinv_tolerances(a, atol, rtol):
    """torch's ``get_atol_rtol``: ``atol`` 0 by default; ``rtol`` ``eps * max(m, n)`` when
    neither is given, 0 when only a positive ``atol`` is; float64."""
    f64 = np.float64
    atol_t = jnp.zeros((), f64) if atol is None else jnp.asarray(atol, f64)
    if rtol is not None:
        return atol_t, jnp.asarray(rtol, f64)
    real = jnp.finfo(a.dtype).dtype
    default = jnp.asarray(float(np.finfo(real).eps) * max(a.shape[-2:]), f64)
    return atol_t, (default if atol is None else jnp.where(atol_t > 0, 0.0, default))


@register(aten.linalg_pinv.atol_rtol_tensor)
def linalg_pinv(a, atol=None, rtol=None, hermitian=False):
    """The pseudo-inverse ``(..., n, m)`` of ``a`` ``(..., m, n)``: singular values (``|eigen
    values|`` when ``hermitian``) at most ``max(atol, rtol * largest)`` are treated as 0, as
    torch's ``linalg_pinv``. An empty input gives zeros."""
    m, n = a.shape[-2:]
    if a.size == 0:
        return jnp.zeros(a.shape[:-2] + (n, m), a.dtype)
    atol_t, rtol_t = _pinv_tolerances(a, atol, rtol)
    if hermitian:
        v, w = lax.linalg.eigh(a, lower=True, symmetrize_input=False)
        s = jnp.abs(w)
        biggest = jnp.max(s, axis=-1, keepdims=True)
        left, right, sinv_of = v, mH(v), w
    else:
        u, s, vh = lax.linalg.svd(a, full_matrices=False)
        biggest = s[..., :1]
        left, right, sinv_of = mH(vh), mH(u), s
    tol = jnp.maximum(atol_t[..., None], rtol_t[..., None] * biggest)
    keep = s > tol
    sinv = jnp.where(keep, 1 / jnp.where(keep, sinv_of, 1), 0).astype(a.dtype)
    return matmul(left * sinv[..., None, :], right)
