"""``linalg_ldl_factor_ex`` and ``linalg_ldl_solve``: the Bunch–Kaufman ``L D L^T``
factorization of a symmetric matrix, written out as LAPACK's ``?sytf2`` / ``?sytrs`` with
``uplo = 'L'`` (the routines torch calls; JAX has no LDL), in ``lax.while_loop`` s.

The factor is LAPACK's compact form: ``D``'s 1x1 and 2x2 blocks on the diagonal (and first
subdiagonal), the multipliers of ``L`` below them; ``pivots`` 1-based int32, a 2x2 block at
``k, k+1`` marked by ``pivots[k] = pivots[k+1] = -p`` (rows ``k+1`` and ``p`` swapped), a
1x1 block by ``pivots[k] = p`` (rows ``k`` and ``p`` swapped). Interchanges touch only the
trailing submatrix, as in ``?sytf2`` (whose blocked form ``?sytrf`` chooses the same pivots).
Real dtypes only.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import register
from .linalg_decomp import broadcast_batch

aten = __import__("torch").ops.aten

#: Bunch–Kaufman's pivoting threshold ``(1 + sqrt(17)) / 8``.
ALPHA = (1 + math.sqrt(17)) / 8


def _real_only(x, what: str) -> None:
    if jnp.iscomplexobj(x):
        raise NotImplementedError(f"{what} of a complex matrix (?sytrf/?hetrf)")


def _batched(fn, n_core: tuple[int, ...], *xs):
    """Apply the single-matrix ``fn`` over the common batch dims of ``xs``."""
    xs = broadcast_batch(*xs, core=n_core)
    batch = xs[0].shape[: xs[0].ndim - n_core[0]]
    flat = [x.reshape((-1,) + x.shape[len(batch) :]) for x in xs]
    outs = jax.vmap(fn)(*flat) if batch else fn(*xs)
    if not batch:
        return outs
    return tuple(o.reshape(batch + o.shape[1:]) for o in outs)


def _lower_view(m):
    """``m`` with its strict upper triangle replaced by the transposed lower one (``?sytf2``
    reads only the lower triangle)."""
    n = m.shape[-1]
    i = lax.broadcasted_iota(np.int32, (n, n), 0)
    j = lax.broadcasted_iota(np.int32, (n, n), 1)
    return jnp.where(i >= j, m, m.T)


def _first_argmax(v):
    """The first index of the largest value of ``v`` (BLAS ``i?amax`` order)."""
    big = jnp.max(v)
    return jnp.min(jnp.where(v == big, jnp.arange(v.shape[0]), v.shape[0])).astype(np.int32)


def _sytf2_step(state):
    m, ipiv, info, k = state
    n = m.shape[0]
    idx = jnp.arange(n, dtype=np.int32)
    m = _lower_view(m)
    col = m[:, k]
    absakk = jnp.abs(col[k])
    imax = _first_argmax(jnp.where(idx > k, jnp.abs(col), -1))
    colmax = jnp.where(k < n - 1, jnp.abs(col[imax]), 0)
    zero = (jnp.maximum(absakk, colmax) == 0) | jnp.isnan(absakk)
    rowmax = jnp.max(jnp.where((idx >= k) & (idx != imax), jnp.abs(m[imax, :]), 0))
    keep = (absakk >= ALPHA * colmax) | (absakk >= ALPHA * colmax * (colmax / jnp.where(zero, 1, rowmax)))
    one_at_imax = jnp.abs(m[imax, imax]) >= ALPHA * rowmax
    keep = keep | zero
    kstep = jnp.where(keep | one_at_imax, 1, 2).astype(np.int32)
    kp = jnp.where(keep, k, imax)
    kk = k + kstep - 1
    # interchange rows and columns kk and kp of the trailing submatrix m[k:, k:]
    p = jnp.where(idx == kk, kp, jnp.where(idx == kp, kk, idx))
    trailing = (idx[:, None] >= k) & (idx[None, :] >= k)
    m = jnp.where(trailing, m[p][:, p], m)
    m = jnp.where(zero, m, jnp.where(kstep == 1, _update1(m, k, idx), _update2(m, k, idx)))
    info = jnp.where((info == 0) & zero, k + 1, info)
    piv1 = jnp.where(idx == k, kp + 1, ipiv)
    piv2 = jnp.where((idx == k) | (idx == k + 1), -(kp + 1), ipiv)
    ipiv = jnp.where(kstep == 1, piv1, piv2)
    return m, ipiv, info, k + kstep


def _update1(m, k, idx):
    """``A[k+1:, k+1:] -= x x^T / d``, ``L[k+1:, k] = x / d`` for the 1x1 pivot ``d = A[k, k]``
    and ``x = A[k+1:, k]``."""
    d11 = 1 / m[k, k]
    x = jnp.where(idx > k, m[:, k], 0)
    m = m - (d11 * x)[None, :] * x[:, None]
    return m.at[:, k].set(jnp.where(idx > k, x * d11, m[:, k]))


def _update2(m, k, idx):
    """The rank-2 update of ``A[k+2:, k+2:]`` and the multipliers ``L[k+2:, k:k+2]`` for the
    2x2 pivot ``A[k:k+2, k:k+2]``."""
    d21 = m[k + 1, k]
    d11 = m[k + 1, k + 1] / d21
    d22 = m[k, k] / d21
    t = 1 / (d11 * d22 - 1)
    d21 = t / d21
    below = idx > k + 1
    c0 = jnp.where(below, m[:, k], 0)
    c1 = jnp.where(below, m[:, k + 1], 0)
    wk = d21 * (d11 * c0 - c1)
    wkp1 = d21 * (d22 * c1 - c0)
    m = m - (c0[:, None] * wk[None, :] + c1[:, None] * wkp1[None, :])
    m = m.at[:, k].set(jnp.where(below, wk, m[:, k]))
    return m.at[:, k + 1].set(jnp.where(below, wkp1, m[:, k + 1]))


def sytf2(a):
    """``(LD, pivots, info)`` of one symmetric ``(n, n)`` matrix (lower triangle read), as
    LAPACK ``?sytf2`` with ``uplo = 'L'``; ``info`` the first zero pivot (1-based) or 0."""
    n = a.shape[0]
    state = (a, jnp.zeros((n,), np.int32), jnp.zeros((), np.int32), jnp.zeros((), np.int32))
    m, ipiv, info, _ = lax.while_loop(lambda s: s[3] < n, _sytf2_step, state)
    return jnp.tril(m), ipiv, info


@register(aten.linalg_ldl_factor_ex.default)
def linalg_ldl_factor_ex(a, hermitian=False, check_errors=False):
    """``(LD, pivots, info)`` of the symmetric ``a`` ``(..., n, n)`` (lower triangle read), as
    torch's ``?sytrf``; see the module docstring for the compact form.

    Raises:
        NotImplementedError: a complex ``a``.
    """
    _real_only(a, "LDL factorization")
    if a.size == 0:  # no matrix or an empty batch: no loop to run
        return a, jnp.zeros(a.shape[:-1], np.int32), jnp.zeros(a.shape[:-2], np.int32)
    return _batched(sytf2, (2,), a)


def _swap_rows(b, i, j):
    rows = jnp.arange(b.shape[0])
    p = jnp.where(rows == i, j, jnp.where(rows == j, i, rows))
    return b[p]


def _forward_step(ld, ipiv, state):
    """``?sytrs``'s first sweep: ``B := D^{-1} L^{-1} P^T B``, one 1x1 or 2x2 block."""
    b, k = state
    n = ld.shape[0]
    idx = jnp.arange(n)
    two = ipiv[k] < 0
    b = jnp.where(two, _swap_rows(b, k + 1, -ipiv[k] - 1), _swap_rows(b, k, ipiv[k] - 1))
    # 1x1: B[k+1:] -= L[k+1:, k] B[k]; B[k] /= D[k, k]
    l0 = jnp.where(idx > k, ld[:, k], 0)
    one = b - l0[:, None] * b[k][None, :]
    one = one.at[k].set(one[k] * (1 / ld[k, k]))
    # 2x2: B[k+2:] -= L[k+2:, k] B[k] + L[k+2:, k+1] B[k+1]; solve with D's 2x2 block
    l0 = jnp.where(idx > k + 1, ld[:, k], 0)
    l1 = jnp.where(idx > k + 1, ld[:, k + 1], 0)
    kp1 = jnp.minimum(k + 1, n - 1)
    pair = b - l0[:, None] * b[k][None, :] - l1[:, None] * b[kp1][None, :]
    akm1k = ld[kp1, k]
    akm1 = ld[k, k] / akm1k
    ak = ld[kp1, kp1] / akm1k
    denom = akm1 * ak - 1
    bkm1 = pair[k] / akm1k
    bk = pair[kp1] / akm1k
    pair = pair.at[k].set((ak * bkm1 - bk) / denom).at[kp1].set((akm1 * bk - bkm1) / denom)
    return jnp.where(two, pair, one), k + jnp.where(two, 2, 1)


def _backward_step(ld, ipiv, state):
    """``?sytrs``'s second sweep: ``B := P L^{-T} B``, one 1x1 or 2x2 block (from the end)."""
    b, k = state
    n = ld.shape[0]
    idx = jnp.arange(n)
    two = ipiv[k] < 0
    below = (idx > k)[:, None]
    b = b.at[k].add(-jnp.sum(jnp.where(below, ld[:, k][:, None] * b, 0), axis=0))
    km1 = jnp.maximum(k - 1, 0)
    pair = b.at[km1].add(-jnp.sum(jnp.where(below, ld[:, km1][:, None] * b, 0), axis=0))
    b = jnp.where(two, pair, b)
    b = _swap_rows(b, k, jnp.where(two, -ipiv[k], ipiv[k]) - 1)
    return b, k - jnp.where(two, 2, 1)


def sytrs(ld, ipiv, b):
    """Solve ``A X = B`` for one ``(n, n)`` factor of :func:`sytf2` and ``B`` ``(n, k)``, as
    LAPACK ``?sytrs`` with ``uplo = 'L'``."""
    n = ld.shape[0]
    k0 = jnp.zeros((), np.int32)
    b, _ = lax.while_loop(lambda s: s[1] < n, lambda s: _forward_step(ld, ipiv, s), (b, k0))
    b, _ = lax.while_loop(lambda s: s[1] >= 0, lambda s: _backward_step(ld, ipiv, s), (b, k0 + n - 1))
    return (b,)


@register(aten.linalg_ldl_solve.default)
def linalg_ldl_solve(ld, pivots, b, hermitian=False):
    """Solve ``A X = B`` from ``linalg.ldl_factor``'s ``(LD, pivots)``; ``B`` ``(..., n, k)``,
    batch dims broadcast.

    Raises:
        NotImplementedError: a complex ``LD``.
    """
    _real_only(ld, "LDL solve")
    if ld.size == 0 or b.size == 0:  # no loop to run
        ld, b = broadcast_batch(ld, b)
        return jnp.zeros(b.shape, ld.dtype)
    (x,) = _batched(sytrs, (2, 1, 2), ld, pivots.astype(np.int32), b.astype(ld.dtype))
    return x
