"""LAPACK routines as portable JAX functions, for backends that have no LAPACK.

JAX on CPU lowers ``jnp.linalg`` and ``jax.scipy.linalg`` to ``stablehlo.custom_call
@lapack_<t><routine>_ffi`` (jaxlib's LAPACK FFI kernels). A backend without LAPACK (ONNX has
no decomposition operators) can instead run the StableHLO of the functions here, which
compute what the routines define on the same operands and results, with only loops
(``lax.fori_loop``/``while_loop``), elementwise ops, reductions, matrix products,
``dynamic_slice``/``dynamic_update_slice`` and gathers: no ``jnp.linalg`` call (those lower
to LAPACK again). :func:`lower_custom_call` lowers one custom call's expansion for its
operand types and ``mhlo.backend_config`` flags.

Every function takes arrays with leading batch dims (``(..., m, n)``) and follows the
LAPACK routine named in its docstring: unblocked algorithms (``?getf2``, ``?potf2``,
``?geqr2``, ``?org2r``, ``?orm2r``, ``?trsm``'s loops) where LAPACK itself blocks, so results
match LAPACK's to rounding, not bit for bit. The eigen and singular value routines (whose
LAPACK algorithms, divide and conquer, are not loop-friendly) use parallel Jacobi methods
(round-robin rounds of disjoint rotations, each round two matrix products), which converge
to the same decompositions with LAPACK's accuracy (eigenvalues ascending,
singular values descending, as LAPACK orders them); eigen- and singular vectors are, as in
LAPACK, defined up to sign.

``info`` follows LAPACK for ``?getrf`` (first exactly-zero pivot, 1-based) and ``?potrf``
(order of the first leading minor that is not positive definite); for the iterative routines
(``?syevd``, ``?gesdd``) it is 0 when the results are finite and 1 otherwise, as
:mod:`converter.backends.jax.ops.lapack` reports them (JAX turns a nonzero ``info`` into NaN results).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from converter import _jax_internal, dtypes, mlir

#: Upper bound on Jacobi sweeps (both converge quadratically: a handful of sweeps suffice;
#: the bound only stops a NaN/Inf input, whose convergence test never passes).
MAX_SWEEPS = 40

_I32 = np.int32


# --------------------------------------------------------------------------- small helpers


def _at(x, i, axis: int):
    """``x`` indexed by the traced scalar ``i`` along ``axis`` (the axis dropped)."""
    return lax.dynamic_index_in_dim(x, i, axis % x.ndim, keepdims=False)


def _put(x, value, i, axis: int):
    """``x`` with the slice ``i`` along ``axis`` replaced by ``value`` (that axis dropped)."""
    return lax.dynamic_update_index_in_dim(x, jnp.expand_dims(value, axis % x.ndim), i, axis % x.ndim)


def _iota(n: int):
    return jnp.arange(n, dtype=_I32)


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _mH(x):
    return jnp.conj(_mT(x)) if jnp.iscomplexobj(x) else _mT(x)


def _nonfinite_info(*results, batch: tuple[int, ...]):
    """0 where every result of a batch element is finite, 1 elsewhere (int32 ``batch``)."""
    ok = jnp.ones(batch, bool)
    for r in results:
        ok = ok & jnp.all(jnp.isfinite(r), axis=tuple(range(len(batch), r.ndim)))
    return jnp.where(ok, 0, 1).astype(_I32)


def _loop(n: int, body, init, *, reverse: bool = False):
    """``lax.fori_loop`` over ``0..n-1`` (``n-1..0`` when ``reverse``) with int32 indices;
    no loop at all when ``n == 0``."""
    if n == 0:
        return init
    if reverse:
        return lax.fori_loop(_I32(0), _I32(n), lambda t, s: body(_I32(n - 1) - t, s), init)
    return lax.fori_loop(_I32(0), _I32(n), body, init)


# --------------------------------------------------------------------------- ?getrf


def getrf(a):
    """LU factorization with partial pivoting, LAPACK ``?getrf`` (unblocked ``?getf2``).

    Args:
        a: ``(..., m, n)`` float array.

    Returns:
        ``(lu, ipiv, info)``: ``lu`` ``(..., m, n)`` holds unit-lower ``L`` below the diagonal
        and ``U`` on and above it (``P a = L U``); ``ipiv`` ``(..., min(m, n))`` int32, 1-based:
        row ``i`` was swapped with row ``ipiv[i] - 1`` at step ``i``; ``info`` ``(...)`` int32,
        the 1-based index of the first exactly-zero pivot ``U[i, i]``, 0 when none. The pivot
        is the first entry of largest magnitude in the column (BLAS ``i?amax``; a NaN is never
        chosen over a number unless it sits on the diagonal).
    """
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    rows, cols = _iota(m), _iota(n)
    sfmin = jnp.finfo(a.dtype).tiny

    def step(j, state):
        a, ipiv, info = state
        col = _at(a, j, -1)  # (..., m)
        mag = jnp.where((rows >= j) & ~jnp.isnan(col), jnp.abs(col), -1)
        big = jnp.max(mag, axis=-1, keepdims=True)
        p = jnp.min(jnp.where((mag == big) & (rows >= j), rows, m), axis=-1)
        p = jnp.where(jnp.isnan(_at(col, j, -1)), j, p)  # i?amax keeps a leading NaN
        is_p = (rows == p[..., None])[..., :, None]
        row_p = jnp.sum(jnp.where(is_p, a, 0), axis=-2)  # (..., n), selected exactly
        row_j = _at(a, j, -2)
        a = jnp.where((rows == j)[:, None], row_p[..., None, :], jnp.where(is_p, row_j[..., None, :], a))
        piv = _at(row_p, j, -1)
        info = jnp.where((info == 0) & (piv == 0), j + 1, info)
        col = _at(a, j, -1)
        below = (rows > j)[:, None]
        scale = (piv != 0)[..., None]
        safe = jnp.where(piv == 0, 1, piv)[..., None]
        # ?getf2 scales by the reciprocal unless the pivot is tiny (then it divides)
        scaled = jnp.where(jnp.abs(safe) >= sfmin, col * (1 / safe), col / safe)
        low = jnp.where((rows > j) & scale, scaled, col)  # (..., m)
        a = jnp.where(below & (cols == j), low[..., :, None], a)
        update = low[..., :, None] * row_p[..., None, :]
        a = a - jnp.where(below & (cols > j), update, 0)
        ipiv = jnp.where(_iota(k) == j, (p + 1)[..., None], ipiv)
        return a, ipiv, info

    init = (a, jnp.zeros((*batch, k), _I32), jnp.zeros(batch, _I32))
    return _loop(k, step, init)


# --------------------------------------------------------------------------- ?trsm


def trsm(
    a,
    b,
    *,
    left_side: bool = True,
    lower: bool = True,
    trans: str = "N",
    unit_diagonal: bool = False,
):
    """Triangular solve, BLAS ``?trsm`` with ``alpha = 1``.

    Args:
        a: ``(..., k, k)`` triangular matrix; only its ``lower`` (or upper) triangle is read,
            and not its diagonal when ``unit_diagonal``.
        b: ``(..., m, n)`` right-hand sides (``k = m`` when ``left_side``, else ``k = n``).
        left_side: solve ``op(a) x = b`` (else ``x op(a) = b``).
        trans: ``"N"`` (``op(a) = a``), ``"T"`` (``a^T``) or ``"C"`` (``a^H``).

    Returns:
        ``x`` ``(..., m, n)``. A zero diagonal entry gives Inf/NaN, as in BLAS (no check).
    """
    t = jnp.tril(a) if lower else jnp.triu(a)
    if unit_diagonal:
        t = jnp.where(jnp.eye(a.shape[-1], dtype=bool), jnp.ones((), a.dtype), t)
    low = lower
    if trans != "N":
        t = _mH(t) if trans == "C" else _mT(t)
        low = not low
    if not left_side:  # x t = b  <=>  t^T x^T = b^T
        return _mT(_solve(_mT(t), _mT(b), not low))
    return _solve(t, b, low)


def _solve(t, b, lower: bool):
    """``t x = b`` for triangular ``t`` (upper solved as lower on reversed rows/columns)."""
    if lower:
        return _forward(t, b)
    return jnp.flip(_forward(jnp.flip(t, (-2, -1)), jnp.flip(b, -2)), -2)


def _forward(t, b):
    """Forward substitution with lower-triangular ``t`` (``?trsm`` L, L, N: column-oriented,
    skipping zero solution entries as BLAS does)."""
    m = t.shape[-1]
    rows = _iota(m)

    def step(i, x):
        xi = _at(x, i, -2) / _at(_at(t, i, -1), i, -1)[..., None]  # (..., n)
        x = _put(x, xi, i, -2)
        ti = _at(t, i, -1)  # (..., m)
        update = jnp.where(
            (rows > i)[:, None] & (xi != 0)[..., None, :], ti[..., :, None] * xi[..., None, :], 0
        )
        return x - update

    return _loop(m, step, b)


# --------------------------------------------------------------------------- ?potrf


def potrf(a, *, lower: bool = True):
    """Cholesky factorization, LAPACK ``?potrf`` (unblocked ``?potf2``).

    Args:
        a: ``(..., n, n)`` symmetric (Hermitian) matrix; only its ``lower`` (or upper)
            triangle is read.

    Returns:
        ``(factor, info)``: ``factor`` ``(..., n, n)`` holds ``L`` (``a = L L^H``) in the lower
        triangle (``U``, ``a = U^H U``, in the upper one when not ``lower``), the other triangle
        of ``a`` left as is; ``info`` ``(...)`` int32, the order of the first leading minor
        that is not positive definite (a pivot not ``> 0``, NaN included), 0 when ``a`` is
        positive definite. On failure it stops at that column (its pivot's value left on the
        diagonal; the later columns as the earlier ones updated them: LAPACK leaves them open).
    """
    n = a.shape[-1]
    batch = a.shape[:-2]
    w = a if lower else _mH(a)
    w = jnp.tril(w) + _mH(jnp.tril(w, -1))
    rows = _iota(n)

    def step(j, state):
        w, info = state
        col = _at(w, j, -1)  # (..., n)
        d = jnp.real(_at(col, j, -1))
        ok = (info == 0) & (d > 0)
        info = jnp.where((info == 0) & ~(d > 0), j + 1, info)
        s = jnp.sqrt(jnp.where(ok, d, 1)).astype(w.dtype)
        low = jnp.where(rows > j, col * (1 / s)[..., None], 0)
        new_col = jnp.where(rows == j, s[..., None], jnp.where(rows > j, low, col))
        trailing = (rows > j)[:, None] & (rows > j)[None, :]
        updated = w - jnp.where(trailing, low[..., :, None] * jnp.conj(low[..., None, :]), 0)
        updated = jnp.where((rows == j)[None, :], new_col[..., :, None], updated)
        return jnp.where(ok[..., None, None], updated, w), info

    w, info = _loop(n, step, (w, jnp.zeros(batch, _I32)))
    if lower:
        return jnp.tril(w) + jnp.triu(a, 1), info
    return _mH(jnp.tril(w)) + jnp.tril(a, -1), info


# --------------------------------------------------------------------------- ?geqrf / ?orgqr / ?ormqr


def _norm(x, axis: int = -1):
    """Euclidean norm along ``axis``, scaled by the largest magnitude (BLAS ``?nrm2`` does
    not overflow or underflow on representable results)."""
    scale = jnp.max(jnp.abs(x), axis=axis, keepdims=True)
    safe = jnp.where(scale > 0, scale, 1)
    return jnp.squeeze(safe, axis) * jnp.sqrt(jnp.sum(jnp.square(jnp.abs(x) / safe), axis=axis))


def _hypot(x, y):
    """``sqrt(x^2 + y^2)`` without overflow (LAPACK ``?lapy2``)."""
    x, y = jnp.abs(x), jnp.abs(y)
    big, small = jnp.maximum(x, y), jnp.minimum(x, y)
    safe = jnp.where(big > 0, big, 1)
    return jnp.where(small == 0, big, big * jnp.sqrt(1 + jnp.square(small / safe)))


def geqrf(a):
    """Householder QR, LAPACK ``?geqrf`` (unblocked ``?geqr2``, reflectors by ``?larfg``).

    Args:
        a: ``(..., m, n)`` real array.

    Returns:
        ``(qr, tau)``: ``qr`` ``(..., m, n)`` holds ``R`` on and above the diagonal and the
        reflector vectors ``v_j`` (``v_j[j] = 1`` implied) below it; ``tau`` ``(..., min(m, n))``.
        ``Q = H_0 ... H_{k-1}`` with ``H_j = I - tau_j v_j v_j^T``. As ``?larfg``:
        ``beta = -sign(alpha) * norm`` (``sign(0) = +``), ``tau = (beta - alpha) / beta``, and
        ``H_j = I`` (``tau = 0``) when the column below the diagonal is zero.
    """
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    rows, cols = _iota(m), _iota(n)

    def step(j, state):
        a, tau = state
        col = _at(a, j, -1)  # (..., m)
        alpha = _at(col, j, -1)
        xnorm = _norm(jnp.where(rows > j, col, 0))
        trivial = xnorm == 0
        norm = _hypot(alpha, xnorm)
        beta = jnp.where(alpha >= 0, -norm, norm)
        safe_beta = jnp.where(trivial, 1, beta)
        tau_j = jnp.where(trivial, 0, (beta - alpha) / safe_beta)
        inv = jnp.where(trivial, 0, 1 / jnp.where(trivial, 1, alpha - beta))
        v = jnp.where(rows > j, col * inv[..., None], jnp.where(rows == j, 1, 0)).astype(a.dtype)
        # apply H_j to the trailing columns: a -= tau v (v^T a)
        w = jnp.einsum("...m,...mn->...n", v, a)
        a = a - jnp.where((cols > j)[None, :], tau_j[..., None, None] * v[..., :, None] * w[..., None, :], 0)
        new_col = jnp.where(
            rows == j, jnp.where(trivial, alpha, beta)[..., None], jnp.where(rows > j, v, col)
        )
        new_col = jnp.where(trivial[..., None], col, new_col)
        a = jnp.where((cols == j)[None, :], new_col[..., :, None], a)
        tau = jnp.where(_iota(k) == j, tau_j[..., None], tau)
        return a, tau

    return _loop(k, step, (a, jnp.zeros((*batch, k), a.dtype)))


def _reflector(a, i):
    """Householder vector ``v_i`` of a ``?geqrf`` result: 1 at ``i``, ``a[i+1:, i]`` below."""
    rows = _iota(a.shape[-2])
    col = _at(a, i, -1)
    return jnp.where(rows > i, col, jnp.where(rows == i, 1, 0)).astype(a.dtype)


def orgqr(a, tau):
    """The orthogonal factor of a QR, LAPACK ``?orgqr`` (unblocked ``?org2r``).

    Args:
        a: ``(..., m, n)`` with ``m >= n``: reflector vectors below the diagonal of its first
            ``k`` columns, as :func:`geqrf` returns them.
        tau: ``(..., k)``, ``k <= n``.

    Returns:
        ``q`` ``(..., m, n)``: the first ``n`` columns of ``H_0 H_1 ... H_{k-1}``.
    """
    m, n = a.shape[-2:]
    k = tau.shape[-1]
    q = jnp.broadcast_to(jnp.eye(m, n, dtype=a.dtype), a.shape)

    def step(i, q):
        v = _reflector(a, i)
        w = jnp.einsum("...m,...mn->...n", v, q)
        return q - _at(tau, i, -1)[..., None, None] * v[..., :, None] * w[..., None, :]

    return _loop(k, step, q, reverse=True)


def ormqr(a, tau, c, *, left: bool = True, transpose: bool = False):
    """Multiply by the orthogonal factor of a QR, LAPACK ``?ormqr`` (unblocked ``?orm2r``).

    Args:
        a: ``(..., r, k')`` reflectors as :func:`geqrf` returns them (``r`` is ``c``'s rows
            when ``left``, its columns otherwise).
        tau: ``(..., k)``.
        c: ``(..., m, n)``.
        left: ``Q c`` (else ``c Q``); ``transpose``: with ``Q^T`` for ``Q``.

    Returns:
        ``(..., m, n)``.
    """
    k = tau.shape[-1]
    # Q = H_0 ... H_{k-1}: Q c applies H_{k-1} first, Q^T c applies H_0 first
    reverse = left != transpose

    def step(i, c):
        v = _reflector(a, i)
        t = _at(tau, i, -1)[..., None, None]
        if left:
            return c - t * v[..., :, None] * jnp.einsum("...m,...mn->...n", v, c)[..., None, :]
        return c - t * jnp.einsum("...mn,...n->...m", c, v)[..., :, None] * v[..., None, :]

    return _loop(k, step, c, reverse=reverse)


# --------------------------------------------------------------------------- Jacobi rotations


def _rounds(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Round-robin (circle method) pairings of ``0..n-1``: ``(p, q)``, each
    ``(rounds, pairs)`` int32 with ``p < q``; every pair ``p < q`` occurs in exactly one
    round and the pairs of a round are disjoint. An odd ``n`` pairs one index per round with
    ``n`` (no such row or column: that rotation is dropped)."""
    m = n + n % 2
    players = list(range(m))
    ps, qs = [], []
    for _ in range(m - 1):
        pairs = sorted(tuple(sorted((players[i], players[m - 1 - i]))) for i in range(m // 2))
        ps.append([p for p, _ in pairs])
        qs.append([q for _, q in pairs])
        players = [players[0], players[-1], *players[1:-1]]
    return np.asarray(ps, _I32), np.asarray(qs, _I32)


def _rotation(app, aqq, apq):
    """``(c, s, t)`` of the Jacobi rotation ``J = [[c, s], [-s, c]]`` on ``(p, q)`` that
    zeroes ``apq`` in ``J^T [[app, apq], [apq, aqq]] J`` (Golub & Van Loan, ``sym.schur2``:
    ``t = sign(tau) / (|tau| + sqrt(1 + tau^2))``, the smaller angle); identity when
    ``apq == 0``."""
    nz = apq != 0
    tau = (aqq - app) / (2 * jnp.where(nz, apq, 1))
    mag = jnp.abs(tau)
    root = jnp.where(
        mag > 1, mag * jnp.sqrt(1 + jnp.square(1 / jnp.where(mag > 1, mag, 1))), jnp.sqrt(1 + tau * tau)
    )
    t = jnp.where(nz, jnp.where(tau >= 0, 1, -1) / (mag + root), 0)
    c = 1 / jnp.sqrt(1 + t * t)
    return c, t * c, t


def _round_rotation(p, q, app, aqq, apq):
    """The ``(..., n, n)`` product ``J`` of one round's disjoint Jacobi rotations on the
    pairs ``(p, q)`` (one-hot ``(pairs, n)`` float rows; a pair with no index is dropped),
    given each pair's ``app``, ``aqq``, ``apq`` ``(..., pairs)``, and each rotation's ``t``.
    ``J`` has at most two nonzeros per column, so ``x @ J`` rotates exactly as the
    two-term formulas (the other products are exact zeros)."""
    c, s, t = _rotation(app, aqq, apq)
    n = p.shape[-1]
    eye = jnp.eye(n, dtype=bool)
    covered = jnp.sum(p + q, axis=0)  # 1 for a rotated index, 0 for the odd one out
    diag = jnp.einsum("kn,...k->...n", p + q, c) + (1 - covered)
    off = jnp.einsum("ki,...k,kj->...ij", p, s, q)
    return jnp.where(eye, diag[..., None, :], off - _mT(off)), t


def _one_hot_round(tables, r, n: int, dtype):
    """Round ``r``'s pairs as one-hot ``(pairs, n)`` rows of ``dtype``."""
    cols = _iota(n)
    return [(_at(x, r, 0)[:, None] == cols[None, :]).astype(dtype) for x in tables]


def _descending_order(keys):
    """The permutation sorting ``keys`` ``(..., n)`` descending, ties by index (int32; a
    rank count and an inverse, with no sort op)."""
    n = keys.shape[-1]
    idx = _iota(n)
    ki, kj = keys[..., :, None], keys[..., None, :]
    before = (kj > ki) | ((kj == ki) & (idx[None, :] < idx[:, None]))
    rank = jnp.sum(before, axis=-1, dtype=_I32)  # (..., n): where element i goes
    return jnp.sum(jnp.where(rank[..., :, None] == idx, idx[:, None], 0), axis=-2, dtype=_I32)


# --------------------------------------------------------------------------- ?syevd


def syevd(a, *, lower: bool = True, vectors: bool = True):
    """Symmetric eigendecomposition with LAPACK ``?syevd``'s results, by parallel cyclic Jacobi.

    Args:
        a: ``(..., n, n)`` real symmetric; only its ``lower`` (or upper) triangle is read.
        vectors: compute the eigenvectors (``?syevd``'s ``jobz = 'V'``).

    Returns:
        ``(v, w, info)``: eigenvalues ``w`` ``(..., n)`` ascending; eigenvectors ``v``
        ``(..., n, n)`` in columns (``a v = v diag(w)``, orthonormal, each up to sign), or
        ``a`` itself when not ``vectors``; ``info`` ``(...)`` int32, 0 when the results are
        finite, else 1. Sweeps stop when every off-diagonal entry is below ``eps * max|a|``
        (at most :data:`MAX_SWEEPS`).
    """
    batch = a.shape[:-2]
    t = jnp.tril(a) if lower else jnp.triu(a)
    s = t + _mT(jnp.tril(t, -1) if lower else jnp.triu(t, 1))
    w, v = _jacobi_eigh(s)
    order = _descending_order(-w)
    w = jnp.take_along_axis(w, order, axis=-1)
    v = jnp.take_along_axis(v, order[..., None, :], axis=-1)
    info = _nonfinite_info(w, v, batch=batch)
    return (v if vectors else a), w, info


def _jacobi_eigh(s):
    """Parallel cyclic Jacobi: each round applies ``n / 2`` disjoint rotations at once as
    ``J^T s J`` (two matrix products), ``n - 1`` rounds per sweep; each rotated pair's
    off-diagonal entry is set to 0 and its diagonal entries to ``app - t apq``,
    ``aqq + t apq`` (Golub & Van Loan, sym.schur2)."""
    n = s.shape[-1]
    eye = jnp.eye(n, dtype=bool)
    v = jnp.broadcast_to(jnp.eye(n, dtype=s.dtype), s.shape)
    if n < 2:
        return jnp.diagonal(s, axis1=-2, axis2=-1), v
    tol = jnp.finfo(s.dtype).eps * jnp.max(jnp.abs(s), axis=(-2, -1))
    tables = [jnp.asarray(x) for x in _rounds(n)]

    def one_round(r, state):
        s, v = state
        p, q = _one_hot_round(tables, r, n, s.dtype)
        d = jnp.diagonal(s, axis1=-2, axis2=-1)
        app, aqq = jnp.einsum("kn,...n->...k", p, d), jnp.einsum("kn,...n->...k", q, d)
        apq = jnp.einsum("ki,...ij,kj->...k", p, s, q)
        j, t = _round_rotation(p, q, app, aqq, apq)
        s = _mT(j) @ s @ j
        covered = jnp.sum(p + q, axis=0)
        new_d = jnp.einsum("kn,...k->...n", p, app - t * apq) + jnp.einsum("kn,...k->...n", q, aqq + t * apq)
        new_d = new_d + jnp.where(covered > 0, 0, d)
        pair = (jnp.einsum("ki,kj->ij", p, q) + jnp.einsum("ki,kj->ji", p, q)) > 0
        s = jnp.where(eye, new_d[..., None, :], jnp.where(pair, 0, s))
        return s, v @ j

    def sweep(state):
        k, s, v, _ = state
        s, v = lax.fori_loop(_I32(0), _I32(tables[0].shape[0]), one_round, (s, v))
        off = jnp.max(jnp.where(eye, 0, jnp.abs(s)), axis=(-2, -1))
        return k + 1, s, v, jnp.all(~(off > tol))

    def more(state):
        k, _, _, done = state
        return (k < MAX_SWEEPS) & ~done

    _, s, v, _ = lax.while_loop(more, sweep, (_I32(0), s, v, jnp.asarray(False)))
    return jnp.diagonal(s, axis1=-2, axis2=-1), v


# --------------------------------------------------------------------------- ?gesdd


def gesdd(a, *, mode: str = "A", full_matrices: bool = True):
    """Singular value decomposition with LAPACK ``?gesdd``'s results, by one-sided
    (Hestenes) Jacobi.

    Args:
        a: ``(..., m, n)`` real array.
        mode: ``"A"`` (full ``u`` ``(..., m, m)``, ``vt`` ``(..., n, n)``), ``"S"`` (reduced:
            ``(..., m, k)``, ``(..., k, n)``, ``k = min(m, n)``) or ``"N"`` (values only: ``u``
            and ``vt`` zeros, of the full shapes when ``full_matrices``, else the reduced
            ones: jaxlib's kernel declares either).

    Returns:
        ``(a, s, u, vt, info)``: ``a`` unchanged (LAPACK leaves it unspecified); ``s``
        ``(..., k)`` descending, ``a = u[..., :k] diag(s) vt[..., :k, :]`` with orthonormal
        columns/rows (each pair up to sign; the columns completing a rank-deficient or full
        basis come from a Householder QR); ``info`` 0 when the results are finite, else 1.
        Sweeps stop when every column pair is orthogonal to ``sqrt(rows) * eps``
        (``?gesvj``'s test), at most :data:`MAX_SWEEPS`.
    """
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    wide = m < n
    g = _mT(a) if wide else a  # (..., r, c) with r >= c
    s, w, vt = _one_sided_jacobi(g)
    info = _nonfinite_info(s, w, vt, batch=batch) if mode != "N" else _nonfinite_info(s, batch=batch)
    if mode == "N":
        k = min(m, n)
        u_cols, vt_rows = (m, n) if full_matrices else (k, k)
        zeros = jnp.zeros((*batch, m, u_cols), a.dtype), jnp.zeros((*batch, vt_rows, n), a.dtype)
        return a, s, zeros[0], zeros[1], info
    full = _complete(w, s, full=mode == "A")  # (..., r, r or c)
    if wide:  # a^T = full s vt  =>  a = vt^T s full^T
        return a, s, _mT(vt), _mT(full), info
    return a, s, full, vt, info


def _one_sided_jacobi(g):
    """``(s, w, vt)`` for ``g`` ``(..., r, c)``, ``r >= c``: ``g = w diag(s) vt``, ``s``
    descending, ``w``'s columns unit (zero where ``s`` is 0), ``vt`` orthogonal."""
    r, c = g.shape[-2:]
    scale = jnp.max(jnp.abs(g), axis=(-2, -1), keepdims=True)
    scale = jnp.where((scale > 0) & jnp.isfinite(scale), scale, 1)
    gt = _mT(g / scale)  # rows are the columns of g
    vt = jnp.broadcast_to(jnp.eye(c, dtype=g.dtype), (*g.shape[:-2], c, c))
    if c >= 2:
        gt, vt = _hestenes(gt, vt, r)
    norms = jnp.sqrt(jnp.sum(jnp.square(gt), axis=-1))  # (..., c)
    order = _descending_order(norms)
    norms = jnp.take_along_axis(norms, order, axis=-1)
    gt = jnp.take_along_axis(gt, order[..., :, None], axis=-2)
    vt = jnp.take_along_axis(vt, order[..., :, None], axis=-2)
    w = _mT(jnp.where(norms[..., None] > 0, gt / jnp.where(norms > 0, norms, 1)[..., None], 0))
    return norms * scale[..., 0], w, vt


def _hestenes(gt, vt, r: int):
    """One-sided Jacobi on the rows of ``gt`` (``(..., c, r)``), accumulating the rotations
    into ``vt``; parallel rounds as in :func:`_jacobi_eigh`, each rotation orthogonalizing
    one pair of rows, skipped when they are already orthogonal to ``sqrt(r) * eps``."""
    c = gt.shape[-2]
    tol = np.sqrt(r) * jnp.finfo(gt.dtype).eps
    tables = [jnp.asarray(x) for x in _rounds(c)]

    def one_round(k, state):
        gt, vt, worst = state
        p, q = _one_hot_round(tables, k, c, gt.dtype)
        gram = gt @ _mT(gt)
        d = jnp.diagonal(gram, axis1=-2, axis2=-1)
        alpha, beta = jnp.einsum("kn,...n->...k", p, d), jnp.einsum("kn,...n->...k", q, d)
        gamma = jnp.einsum("ki,...ij,kj->...k", p, gram, q)
        denom = jnp.sqrt(alpha) * jnp.sqrt(beta)
        cosine = jnp.where(denom > 0, jnp.abs(gamma) / jnp.where(denom > 0, denom, 1), 0)
        active = cosine > tol
        j, _ = _round_rotation(p, q, alpha, beta, jnp.where(active, gamma, 0))
        worst = jnp.maximum(worst, jnp.max(jnp.where(active, cosine, 0)))
        return _mT(j) @ gt, _mT(j) @ vt, worst

    def sweep(state):
        k, gt, vt, _ = state
        zero = jnp.zeros((), gt.dtype)
        gt, vt, worst = lax.fori_loop(_I32(0), _I32(tables[0].shape[0]), one_round, (gt, vt, zero))
        return k + 1, gt, vt, ~(worst > tol)

    def more(state):
        k, _, _, done = state
        return (k < MAX_SWEEPS) & ~done

    _, gt, vt, _ = lax.while_loop(more, sweep, (_I32(0), gt, vt, jnp.asarray(False)))
    return gt, vt


def _complete(w, s, *, full: bool):
    """Orthonormal ``(..., r, r)`` (``full``) or ``(..., r, c)`` basis whose first columns
    are ``w``'s where ``s > 0``: the others come from the Householder QR of ``w`` (the
    zero columns of ``w`` sort last, so ``Q``'s leading columns span ``w``'s)."""
    r, c = w.shape[-2:]
    qr, tau = geqrf(w)
    keep = s > 0
    if full and r > c:  # Q's trailing columns complete the basis (zero-size pads avoided)
        pad = jnp.zeros((*w.shape[:-2], r, r - c), w.dtype)
        qr, w = jnp.concatenate([qr, pad], axis=-1), jnp.concatenate([w, pad], axis=-1)
        keep = jnp.concatenate([keep, jnp.zeros((*s.shape[:-1], r - c), bool)], axis=-1)
    return jnp.where(keep[..., None, :], w, orgqr(qr, tau))


# --------------------------------------------------------------------------- ?geev

#: ``?lahqr``'s exceptional-shift weights and period (``DAT1``, ``DAT2``, ``KEXSH``).
_DAT1, _DAT2, _KEXSH = 0.75, -0.4375, 10


def geev(a, *, left: bool = False, right: bool = False):
    """Eigenvalues of a general real matrix, LAPACK ``?geev`` with ``jobvl = jobvr = 'N'``.

    ``?geev`` scales ``a`` into ``[smlnum, bignum]`` (as here), balances it (``?gebal``; here
    its permutations, not its scaling), reduces it to upper Hessenberg form (``?gehrd``; here
    unblocked ``?gehd2``) and runs the Francis double-shift QR algorithm (``?hseqr``: for
    ``n < 75``, ``?lahqr``; followed here: the same deflation tests, shifts, exceptional
    shifts every 10th iteration, bulge chase and ``?lanv2`` for the 2x2 blocks).

    Args:
        a: ``(..., n, n)`` float32 or float64 array.
        left, right: the eigenvector flags (``jobvl``, ``jobvr`` = ``'V'``); only ``False``
            is implemented.

    Returns:
        ``(wr, wi, vl, vr, info)`` as jaxlib's kernel: real and imaginary parts ``(..., n)``
        of the eigenvalues (a complex pair adjacent, the one with ``wi > 0`` first), ``vl``
        and ``vr`` complex zeros ``(..., n, n)``, ``info`` ``(...)`` int32: 0 on success,
        ``i`` when the QR algorithm did not converge within ``?lahqr``'s
        ``30 * max(10, n)`` iterations per deflation (only ``wr[i:]``, ``wi[i:]`` are then
        eigenvalues), 1 when ``a`` is not finite (all results NaN). Eigenvalues are stored
        where they deflate, from the bottom up, as ``?lahqr`` stores them; without
        ``?gebal``'s scaling, the order can differ from LAPACK's: the set of
        eigenvalues (to rounding) is the contract, not their order.

    Raises:
        NotImplementedError: ``left`` or ``right`` (eigenvectors) requested.
    """
    if left or right:
        raise NotImplementedError("LAPACK ?geev eigenvectors (jobvl/jobvr = 'V') have no portable expansion")
    n = a.shape[-1]
    batch = a.shape[:-2]
    cdtype = jnp.result_type(a.dtype, jnp.complex64)
    zeros = jnp.zeros((*batch, n, n), cdtype)
    size = int(np.prod(batch, dtype=np.int64))
    if n == 0 or size == 0:
        empty = jnp.zeros((*batch, n), a.dtype)
        return empty, empty, zeros, zeros, jnp.zeros(batch, _I32)
    finfo = jnp.finfo(a.dtype)
    finite = jnp.all(jnp.isfinite(a), axis=(-2, -1))
    a = jnp.where(finite[..., None, None], a, 0)
    # ?geev: a whose largest magnitude is outside [smlnum, bignum] is scaled to that bound
    smlnum = np.sqrt(finfo.tiny) / finfo.eps
    bignum = 1 / smlnum
    anrm = jnp.max(jnp.abs(a), axis=(-2, -1))
    target = jnp.where(anrm < smlnum, smlnum, jnp.where(anrm > bignum, bignum, anrm))
    factor = jnp.where(anrm > 0, target / jnp.where(anrm > 0, anrm, 1), 1).astype(a.dtype)
    a, ilo, ihi = _balance_permutation(a * factor[..., None, None])
    h = _hessenberg(a, ilo, ihi)
    # the QR iterations' indices differ per matrix: vmap (their indexing becomes gathers)
    flat = (h.reshape((size, n, n)), ilo.reshape(size), ihi.reshape(size))
    wr, wi, info = jax.vmap(_lahqr)(*flat)
    wr, wi, info = wr.reshape((*batch, n)), wi.reshape((*batch, n)), info.reshape(batch)
    nan = jnp.full_like(wr, jnp.nan)
    ok = finite[..., None]
    wr, wi = jnp.where(ok, wr / factor[..., None], nan), jnp.where(ok, wi / factor[..., None], nan)
    return wr, wi, zeros, zeros, jnp.where(finite, info, 1)


def _swap(a, i, j):
    """``a`` ``(..., n, n)`` with rows and columns ``i`` and ``j`` (``(...)`` int32) exchanged
    (a similarity: selected entries, exact)."""
    idx = _iota(a.shape[-1])
    i, j = i[..., None], j[..., None]
    perm = jnp.where(idx == i, j, jnp.where(idx == j, i, idx))  # (..., n)
    pick = perm[..., :, None] == idx  # (..., n, n): row r takes row perm[r]
    a = jnp.sum(jnp.where(pick[..., :, :, None], a[..., None, :, :], 0), axis=-2)
    return jnp.sum(jnp.where(pick[..., None, :, :], a[..., :, None, :], 0), axis=-1)


def _balance_permutation(a):
    """LAPACK ``?gebal``'s permutation step (``job = 'P'``): rows whose off-diagonal entries
    in columns ``0..ihi`` are zero move to the bottom (``ihi`` decreases), then columns
    whose off-diagonal entries in rows ``ilo..ihi`` are zero move to the top (``ilo``
    increases), each time the last (first) such row (column) found by a fresh search.
    Returns ``(a', ilo, ihi)``: ``a'`` is triangular outside ``ilo..ihi`` (its diagonal
    there holds eigenvalues), ``ilo``, ``ihi`` ``(...)`` int32."""
    n = a.shape[-1]
    batch = a.shape[:-2]
    idx = _iota(n)
    off = ~jnp.eye(n, dtype=bool)

    def row_step(_, state):
        a, hi = state
        nz = (a != 0) & off & (idx <= hi[..., None])[..., None, :]
        free = ~jnp.any(nz, axis=-1) & (idx <= hi[..., None])  # (..., n)
        r = jnp.max(jnp.where(free, idx, -1), axis=-1)
        go = (r >= 0) & (hi >= 1)
        a = jnp.where(go[..., None, None], _swap(a, jnp.maximum(r, 0), hi), a)
        return a, jnp.where(go, hi - 1, hi)

    def col_step(_, state):
        a, lo, hi = state
        inside = (idx >= lo[..., None]) & (idx <= hi[..., None])
        nz = (a != 0) & off & inside[..., :, None]
        free = ~jnp.any(nz, axis=-2) & inside
        c = jnp.min(jnp.where(free, idx, n), axis=-1)
        go = (c < n) & (lo < hi)
        a = jnp.where(go[..., None, None], _swap(a, jnp.minimum(c, n - 1), lo), a)
        return a, jnp.where(go, lo + 1, lo), hi

    hi = jnp.full(batch, n - 1, _I32)
    a, hi = _loop(n, row_step, (a, hi))
    a, lo, hi = _loop(n, col_step, (a, jnp.zeros(batch, _I32), hi))
    return a, lo, hi


def _larfg(alpha, x):
    """``?larfg``'s reflector ``I - tau (1, v) (1, v)^T`` mapping ``(alpha, x)`` to
    ``(beta, 0...)``: returns ``(beta, tau, r)`` with ``v = r x`` (``tau = 0``, ``beta =
    alpha``, ``r = 0`` when ``x`` is zero; ``beta = -sign(alpha) |(alpha, x)|``)."""
    xnorm = _norm(x)
    trivial = xnorm == 0
    norm = _hypot(alpha, xnorm)
    beta = jnp.where(trivial, alpha, jnp.where(alpha >= 0, -norm, norm))
    tau = jnp.where(trivial, 0, (beta - alpha) / jnp.where(trivial, 1, beta))
    r = jnp.where(trivial, 0, 1 / jnp.where(trivial, 1, alpha - beta))
    return beta, tau, r


def _hessenberg(a, ilo, ihi):
    """Upper Hessenberg ``Q^T a Q`` of ``(..., n, n)`` ``a``, LAPACK ``?gehd2`` on the rows
    and columns ``ilo..ihi`` (``(...)`` int32; ``a`` is triangular outside them). Step ``j``
    (``ilo <= j < ihi - 1``): the reflector of column ``j`` below the subdiagonal (rows
    ``j+2..ihi``), applied from the right to every row, then from the left to the trailing
    columns."""
    n = a.shape[-1]
    idx = _iota(n)
    ilo, ihi = ilo[..., None], ihi[..., None]

    def step(j, a):
        col = _at(a, j, -1)  # (..., n)
        below = (idx > j + 1) & (idx <= ihi)
        beta, tau, r = _larfg(_at(col, j + 1, -1), jnp.where(below, col, 0))
        tau = jnp.where((j >= ilo[..., 0]) & (j < ihi[..., 0] - 1), tau, 0)
        v = jnp.where(below, col * r[..., None], jnp.where(idx == j + 1, 1, 0)).astype(a.dtype)
        tau = tau[..., None, None]
        a = a - tau * (a @ v[..., :, None]) * v[..., None, :]
        a = a - jnp.where(idx[None, :] > j, tau * v[..., :, None] * (v[..., None, :] @ a), 0)
        new_col = jnp.where(idx == j + 1, beta[..., None], jnp.where(below, 0, col))
        new_col = jnp.where(tau[..., 0] != 0, new_col, col)
        return jnp.where(idx[None, :] == j, new_col[..., :, None], a)

    return jnp.triu(_loop(max(n - 2, 0), step, a), -1)


def _sgn(y):
    """Fortran ``SIGN(1, y)`` (``+1`` for ``y = 0``)."""
    return jnp.where(y >= 0, 1, -1).astype(y.dtype)


def _lanv2(a, b, c, d):
    """Eigenvalues ``(rt1r, rt1i, rt2r, rt2i)`` of the 2x2 ``[[a, b], [c, d]]`` as LAPACK
    ``?lanv2`` computes them through its standardized Schur form (a complex pair with
    ``rt1i > 0``; real ones ``(a', d')`` of the triangularized block)."""
    eps = jnp.finfo(a.dtype).eps
    one = jnp.ones((), a.dtype)

    def safe(x):
        return jnp.where(x == 0, one, x)

    # c == 0: already triangular; b == 0: swap rows and columns
    swap = (c != 0) & (b == 0)
    a1, b1, c1, d1 = (
        jnp.where(swap, d, a),
        jnp.where(swap, -c, b),
        jnp.where(swap, 0, c),
        jnp.where(swap, a, d),
    )
    equal_complex = (a - d == 0) & (_sgn(b) != _sgn(c))
    general = (c != 0) & (b != 0) & ~equal_complex
    temp = a - d
    p = 0.5 * temp
    bcmax = jnp.maximum(jnp.abs(b), jnp.abs(c))
    bcmis = jnp.minimum(jnp.abs(b), jnp.abs(c)) * _sgn(b) * _sgn(c)
    scale = jnp.maximum(jnp.abs(p), bcmax)
    z = (p / safe(scale)) * p + (bcmax / safe(scale)) * bcmis
    real = z >= 4 * eps
    # real eigenvalues
    zr = p + _sgn(p) * jnp.sqrt(scale) * jnp.sqrt(jnp.abs(z))
    ar, dr = d + zr, d - (bcmax / safe(zr)) * bcmis
    # complex or nearly equal eigenvalues: rotate to equal diagonal entries
    sigma = b + c
    big = jnp.maximum(jnp.abs(temp), jnp.abs(sigma))
    ts, ss = temp / safe(big), sigma / safe(big)
    tau = _hypot(ss, ts)
    cs = jnp.sqrt(0.5 * (1 + jnp.abs(ss) / safe(tau)))
    sn = -(0.5 * ts / safe(tau * cs)) * _sgn(sigma)
    aa, bb = a * cs + b * sn, -a * sn + b * cs
    cc, dd = c * cs + d * sn, -c * sn + d * cs
    bc, cc2 = bb * cs + dd * sn, -aa * sn + cc * cs
    mid = 0.5 * ((aa * cs + cc * sn) + (-bb * sn + dd * cs))
    both = (cc2 != 0) & (bc != 0) & (_sgn(bc) == _sgn(cc2))  # real: triangularize
    pr = _sgn(cc2) * jnp.sqrt(jnp.abs(bc)) * jnp.sqrt(jnp.abs(cc2))
    ac = jnp.where(both, mid + pr, mid)
    dc = jnp.where(both, mid - pr, mid)
    bc_only = (cc2 != 0) & (bc == 0)  # b became 0: swap
    bc, cc2 = jnp.where(both, bc - cc2, jnp.where(bc_only, -cc2, bc)), jnp.where(both | bc_only, 0, cc2)
    a2 = jnp.where(real, ar, ac)
    d2 = jnp.where(real, dr, dc)
    b2 = jnp.where(real, b - c, bc)
    c2 = jnp.where(real, 0, cc2)
    a1, b1, c1, d1 = (jnp.where(general, x2, x1) for x1, x2 in ((a1, a2), (b1, b2), (c1, c2), (d1, d2)))
    im = jnp.where(c1 == 0, 0, jnp.sqrt(jnp.abs(b1)) * jnp.sqrt(jnp.abs(c1)))
    return a1, im, d1, -im


def _diagonals(hp):
    """``(d, sub, sup)`` of the zero-padded Hessenberg ``hp`` ``(p, p)``, each ``(p + 3,)``:
    ``d[k] = h[k, k]``, ``sub[k] = h[k, k - 1]``, ``sup[k] = h[k - 1, k]`` (0 outside)."""
    d = jnp.diagonal(hp)
    off = jnp.diagonal(hp, -1)
    up = jnp.diagonal(hp, 1)
    z1 = jnp.zeros((1,), hp.dtype)
    z3 = jnp.zeros((3,), hp.dtype)
    return jnp.concatenate([d, z3]), jnp.concatenate([z1, off, z3]), jnp.concatenate([z1, up, z3])


def _split_point(diags, i, n: int, bounds, smlnum, ulp):
    """``?lahqr``'s ``L`` (``lo`` here): the largest ``k`` in ``ilo+1..i`` whose subdiagonal
    ``h[k, k-1]`` is negligible (below ``smlnum``, or Ahues & Kressner's test against its
    neighbours), else ``ilo`` (``bounds = (ilo, ihi)``)."""
    ilo, ihi = bounds
    d, sub, sup = diags
    ks = _iota(n)
    hk, dk = jnp.abs(sub[:n]), jnp.abs(d[:n])
    dk1 = jnp.abs(jnp.concatenate([jnp.zeros((1,), d.dtype), d[: n - 1]]))
    tst = dk1 + dk
    extra = jnp.where(ks - 2 >= ilo, jnp.abs(jnp.concatenate([jnp.zeros((1,), d.dtype), sub[: n - 1]])), 0)
    extra = extra + jnp.where(ks + 1 <= ihi, jnp.abs(sub[1 : n + 1]), 0)
    tst = jnp.where(tst == 0, tst + extra, tst)
    uk = jnp.abs(sup[:n])
    diff = jnp.abs(jnp.concatenate([jnp.zeros((1,), d.dtype), d[: n - 1]]) - d[:n])
    ab, ba = jnp.maximum(hk, uk), jnp.minimum(hk, uk)
    aa, bb = jnp.maximum(dk, diff), jnp.minimum(dk, diff)
    s = aa + ab
    s = jnp.where(s == 0, 1, s)
    ahues = ba * (ab / s) <= jnp.maximum(smlnum, ulp * (bb * (aa / s)))
    small = (hk <= smlnum) | ((hk <= ulp * tst) & ahues)
    return jnp.max(jnp.where(small & (ks >= ilo + 1) & (ks <= i), ks, ilo))


def _shifts(diags, lo, i, kdefl):
    """``?lahqr``'s double shift ``(rt1r, rt1i, rt2r, rt2i)``: the eigenvalues of the trailing
    2x2 block of the active window ``lo..i`` (one real one twice when both are real), or an
    exceptional shift on iterations ``10, 30, ...`` (from the top) and ``20, 40, ...``
    (from the bottom)."""
    d, sub, sup = diags
    bottom = kdefl % (2 * _KEXSH) == 0
    exceptional = bottom | (kdefl % _KEXSH == 0)
    s_exc = jnp.where(
        bottom,
        jnp.abs(sub[i]) + jnp.abs(sub[jnp.maximum(i - 1, 0)]),
        jnp.abs(sub[lo + 1]) + jnp.abs(sub[lo + 2]),
    )
    base = _DAT1 * s_exc + jnp.where(bottom, d[i], d[lo])
    im1 = jnp.maximum(i - 1, 0)
    h11 = jnp.where(exceptional, base, d[im1])
    h12 = jnp.where(exceptional, _DAT2 * s_exc, sup[i])
    h21 = jnp.where(exceptional, s_exc, sub[i])
    h22 = jnp.where(exceptional, base, d[i])
    s = jnp.abs(h11) + jnp.abs(h12) + jnp.abs(h21) + jnp.abs(h22)
    zero = s == 0
    s = jnp.where(zero, 1, s)
    h11, h12, h21, h22 = h11 / s, h12 / s, h21 / s, h22 / s
    tr = 0.5 * (h11 + h22)
    det = (h11 - tr) * (h22 - tr) - h12 * h21
    rtdisc = jnp.sqrt(jnp.abs(det))
    cplx = det >= 0
    r1, r2 = tr + rtdisc, tr - rtdisc
    one_real = jnp.where(jnp.abs(r1 - h22) <= jnp.abs(r2 - h22), r1, r2)
    rtr = jnp.where(zero, 0, jnp.where(cplx, tr, one_real) * s)
    rti = jnp.where(zero | ~cplx, 0, rtdisc * s)
    return rtr, rti, rtr, -rti


def _sweep_start(diags, lo, i, n: int, shifts, ulp):
    """``?lahqr``'s start row ``m`` of the bulge (the largest ``m`` in ``lo+1..i-2`` where
    starting makes ``h[m, m-1]`` negligible, else ``lo``) and the first column ``v`` (3,) of
    the shifted double step there, scaled."""
    d, sub, sup = diags
    rt1r, rt1i, rt2r, rt2i = shifts
    ms = _iota(n)
    hmm, hm1m, hmm1 = d[:n], sub[1 : n + 1], sup[1 : n + 1]
    hm1m1, hm2m1 = d[1 : n + 1], sub[2 : n + 2]
    s = jnp.abs(hmm - rt2r) + jnp.abs(rt2i) + jnp.abs(hm1m)
    s = jnp.where(s == 0, 1, s)
    h21s = hm1m / s
    v1 = h21s * hmm1 + (hmm - rt1r) * ((hmm - rt2r) / s) - rt1i * (rt2i / s)
    v2 = h21s * (hmm + hm1m1 - rt1r - rt2r)
    v3 = h21s * hm2m1
    s = jnp.abs(v1) + jnp.abs(v2) + jnp.abs(v3)
    s = jnp.where(s == 0, 1, s)
    v1, v2, v3 = v1 / s, v2 / s, v3 / s
    dprev = jnp.concatenate([jnp.zeros((1,), d.dtype), d[: n - 1]])
    h00 = jnp.abs(sub[:n]) * (jnp.abs(v2) + jnp.abs(v3))
    h01 = ulp * jnp.abs(v1) * (jnp.abs(dprev) + jnp.abs(hmm) + jnp.abs(hm1m1))
    ok = (h00 <= h01) & (ms >= lo + 1) & (ms <= i - 2)
    m = jnp.max(jnp.where(ok, ms, lo))
    return m, jnp.stack([v1[m], v2[m], v3[m]])


def _sweep(hp, lo, m, stop, i, v0):
    """One implicit double-shift QR step on the padded Hessenberg ``hp``: ``?lahqr``'s bulge
    chase ``k = m .. stop - 1`` (``stop = i`` for a step, ``m`` for none), each step a
    3x3 (2x2 at ``k = i - 1``) reflector applied to rows ``k..k+2`` (columns ``>= k``) and
    columns ``k..k+2`` (rows ``<= min(k + 3, i)``)."""
    size = hp.shape[-1]
    idx = _iota(size)

    def step(k, hp):
        first = k == m
        three = k < i - 1
        three_rows = k + _iota(3)  # point gathers (batched under vmap), no sliced windows
        prev = hp[three_rows, jnp.maximum(k - 1, 0)]
        x = jnp.where(first, v0, prev)
        x3 = jnp.where(three, x[2], 0)
        beta, t1, r = _larfg(x[0], jnp.stack([x[1], x3]))
        v2, v3 = x[1] * r, x3 * r
        t = jnp.stack([t1, t1 * v2, t1 * v3])
        rows = hp[three_rows, :]
        if_first = jnp.where((m > lo) & (_iota(3) == 0), prev * (1 - t1), prev)
        chased = jnp.where(_iota(3) == 0, beta, jnp.where((_iota(3) == 2) & ~three, prev, 0))
        new_prev = jnp.where(first, if_first, chased)
        rows = jnp.where((idx == k - 1)[None, :], new_prev[:, None], rows)
        total = rows[0] + v2 * rows[1] + v3 * rows[2]
        rows = jnp.where((idx >= k)[None, :], rows - t[:, None] * total[None, :], rows)
        hp = hp.at[three_rows, :].set(rows)
        cols = hp[:, three_rows]
        total = cols[:, 0] + v2 * cols[:, 1] + v3 * cols[:, 2]
        keep = (idx <= jnp.minimum(k + 3, i))[:, None]
        cols = jnp.where(keep, cols - total[:, None] * t[None, :], cols)
        return hp.at[:, three_rows].set(cols)

    return lax.fori_loop(m, stop, step, hp)


def _lahqr(h, ilo, ihi):
    """``(wr, wi, info)`` of upper Hessenberg ``(n, n)`` ``h`` whose rows and columns outside
    ``ilo..ihi`` are triangular (their eigenvalues the diagonal, as ``?hseqr`` takes them),
    LAPACK ``?lahqr`` on ``ilo..ihi`` (``wantt``: the whole matrix is transformed, which
    leaves the active window's values as ``?lahqr`` computes them without ``wantt``)."""
    n = h.shape[-1]
    finfo = jnp.finfo(h.dtype)
    ulp = finfo.eps
    nh = (ihi - ilo + 1).astype(h.dtype)
    smlnum = finfo.tiny * (nh / ulp)
    itmax = 30 * jnp.maximum(10, ihi - ilo + 1)
    pad = max(1, 3 - n)  # room for the 3-row slices at the bottom
    hp = jnp.pad(h, ((0, pad), (0, pad)))
    idx = _iota(n)

    def body(state):
        hp, i, kdefl, its, wr, wi, info = state
        diags = _diagonals(hp)
        lo = _split_point(diags, i, n, (ilo, ihi), smlnum, ulp)
        lm1 = jnp.maximum(lo - 1, 0)
        hp = hp.at[lo, lm1].set(jnp.where(lo > ilo, 0, hp[lo, lm1]))
        diags = _diagonals(hp)
        deflate = lo >= i - 1
        # a 1x1 (lo == i) or 2x2 (lo == i - 1) block has split off
        d, sub, sup = diags
        im1 = jnp.maximum(i - 1, 0)
        r1r, r1i, r2r, r2i = _lanv2(d[im1], sup[i], sub[i], d[i])
        single = lo == i
        new_wr = jnp.where(
            idx == i, jnp.where(single, d[i], r2r), jnp.where((idx == i - 1) & ~single, r1r, wr)
        )
        new_wi = jnp.where(idx == i, jnp.where(single, 0, r2i), jnp.where((idx == i - 1) & ~single, r1i, wi))
        wr, wi = jnp.where(deflate, new_wr, wr), jnp.where(deflate, new_wi, wi)
        # else one double-shift QR step on the window lo..i
        kd = kdefl + 1
        m, v0 = _sweep_start(diags, lo, i, n, _shifts(diags, lo, i, kd), ulp)
        hp = _sweep(hp, lo, m, jnp.where(deflate, m, i), i, v0)
        its = jnp.where(deflate, 0, its + 1)
        info = jnp.where(~deflate & (its > itmax), i + 1, info)
        return hp, jnp.where(deflate, lo - 1, i), jnp.where(deflate, 0, kd), its, wr, wi, info

    def more(state):
        _, i, _, _, _, _, info = state
        return (i >= ilo) & (info == 0)

    zero = _I32(0)
    idx = _iota(n)
    wr = jnp.where((idx < ilo) | (idx > ihi), jnp.diagonal(h), 0)  # isolated by ?gebal
    init = (hp, ihi, zero, zero, wr, jnp.zeros_like(wr), zero)
    _, _, _, _, wr, wi, info = lax.while_loop(more, body, init)
    return wr, wi, info


# --------------------------------------------------------------------------- custom calls


def _flag(config: dict, key: str, default: str) -> str:
    """A ``mhlo.backend_config`` character flag (stored as its ASCII code)."""
    value = config.get(key)
    return chr(value) if isinstance(value, int) and not isinstance(value, bool) else default


def _bool(config: dict, key: str, default: bool) -> bool:
    value = config.get(key)
    return bool(value) if value is not None else default


def _expansion(routine: str, config: dict, result_shapes: Sequence[tuple[int, ...]]) -> Callable:
    """The portable function of ``routine`` (``getrf``...) for the custom call's flags and
    result shapes; it returns the custom call's results as a tuple."""
    if routine == "getrf":
        return getrf
    if routine == "trsm":
        return lambda a, b: (
            trsm(
                a,
                b,
                left_side=_flag(config, "side", "L") == "L",
                lower=_flag(config, "uplo", "L") == "L",
                trans=_flag(config, "trans_x", "N"),
                unit_diagonal=_flag(config, "diag", "N") == "U",
            ),
        )
    if routine == "potrf":
        return functools.partial(potrf, lower=_flag(config, "uplo", "L") == "L")
    if routine == "geqrf":
        return geqrf
    if routine == "orgqr":
        return lambda a, tau: (orgqr(a, tau),)
    if routine == "ormqr":
        left, transpose = _bool(config, "left", True), _bool(config, "transpose", False)
        return lambda a, tau, c: (ormqr(a, tau, c, left=left, transpose=transpose),)
    if routine == "syevd":
        lower, vectors = _flag(config, "uplo", "L") == "L", _flag(config, "mode", "V") == "V"
        return functools.partial(syevd, lower=lower, vectors=vectors)
    if routine in ("gesdd", "gesvd"):
        u_shape, vt_shape = result_shapes[2:4]  # mode N: full or reduced shapes, zero-filled
        full = u_shape[-1] == u_shape[-2] and vt_shape[-1] == vt_shape[-2]
        return functools.partial(gesdd, mode=_flag(config, "mode", "A"), full_matrices=full)
    if routine == "geev":
        left, right = _flag(config, "compute_left", "V") == "V", _flag(config, "compute_right", "V") == "V"
        return functools.partial(geev, left=left, right=right)
    raise NotImplementedError(f"LAPACK ?{routine} has no portable expansion")


#: The routines :func:`lower_custom_call` expands (real types ``s``, ``d``).
ROUTINES = ("getrf", "trsm", "potrf", "geqrf", "orgqr", "ormqr", "syevd", "gesdd", "gesvd", "geev")


def targets() -> list[str]:
    """Every ``lapack_<t><routine>_ffi`` custom-call target with a portable expansion."""
    return [f"lapack_{t}{r}_ffi" for r in ROUTINES for t in "sd"]


def routine_of(target: str) -> str:
    """``"getrf"`` for ``"lapack_sgetrf_ffi"``.

    Raises:
        NotImplementedError: not a target of :func:`targets`.
    """
    if target not in targets():
        raise NotImplementedError(f"custom_call {target} has no portable expansion")
    return target[len("lapack_") + 1 : -len("_ffi")]


def lower_custom_call(
    target: str,
    config: dict,
    operand_types: Sequence[mlir.TensorType],
    result_types: Sequence[mlir.TensorType],
):
    """The StableHLO of a LAPACK custom call's portable expansion.

    Args:
        target: the ``call_target_name`` (one of :func:`targets`).
        config: the decoded ``mhlo.backend_config`` dictionary.
        operand_types, result_types: the custom call's (static) types; operands and results
            are logical row-major tensors with leading batch dims.

    Returns:
        ``(module, function)``: an ``ir.Module`` (in the converter's context; keep it alive
        while using the function) and its ``@main`` ``func.func``, taking the operands and
        returning the results in order. Its ``func.call``s name the module's own functions.

    Raises:
        NotImplementedError: the target has no expansion, a shape is dynamic, or the
            expansion's results do not have the declared types.
    """
    routine = routine_of(target)
    items = tuple(sorted(config.items()))
    module = _parse(_lower_text(routine, items, tuple(operand_types), tuple(result_types)))
    return module, mlir.main_function(module)


@functools.lru_cache(maxsize=64)
def _lower_text(routine: str, config_items: tuple, operand_types: tuple, result_types: tuple) -> str:
    if any(None in t.shape for t in (*operand_types, *result_types)):
        raise NotImplementedError(f"LAPACK ?{routine} on dynamic shapes (specialize the module first)")
    fn = _expansion(routine, dict(config_items), [t.shape for t in result_types])
    specs = [jax.ShapeDtypeStruct(t.shape, dtypes.to_numpy(t.dtype)) for t in operand_types]
    with jax.enable_x64(True):
        out = jax.eval_shape(fn, *specs)
        got = [(tuple(o.shape), np.dtype(o.dtype)) for o in out]
        want = [(tuple(t.shape), np.dtype(dtypes.to_numpy(t.dtype))) for t in result_types]
        if got != want:
            raise NotImplementedError(
                f"LAPACK ?{routine} expansion gives {got}, the custom call declares {want}"
            )
        with _jax_internal.embedded_constants():  # the custom call's operands only
            return jax.jit(fn).lower(*specs).as_text()


@functools.lru_cache(maxsize=64)
def _parse(text: str):
    return mlir.parse_module(text, filename="<lapack expansion>")
