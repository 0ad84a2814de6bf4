"""LAPACK result conventions expressed with public JAX ops, shared by the torch frontend
(``aten.linalg_*_ex`` ``info`` outputs) and the JAX backend (the ``lapack_*_ffi`` custom calls'
``info`` results).

``jax.lax.linalg`` reports a failed factorization by NaN-filling its result and does not
return LAPACK's ``info``; these functions recompute ``info`` exactly as LAPACK defines it.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax


def ffi_targets(routine: str, complex_routine: str | None = None) -> list[str]:
    """The ``stablehlo.custom_call`` registry keys of jaxlib's LAPACK FFI kernels for
    ``routine`` in each type (``s``, ``d``, ``c``, ``z``): ``lapack_sgetrf_ffi``... jaxlib names
    the complex variants of some routines differently (``?heevd``, ``?ungqr``, ``?unmqr``):
    ``complex_routine`` gives that name, so only the targets jaxlib emits are named."""
    return [
        f"stablehlo.custom_call@lapack_{t}{complex_routine if complex_routine and t in 'cz' else routine}_ffi"
        for t in "sdcz"
    ]


def first_index(hit, axis: int = -1):
    """1-based index (int32) of the first ``True`` of ``hit`` along ``axis``, 0 when none,
    as LAPACK numbers ``info``."""
    n = hit.shape[axis]
    idx = lax.broadcasted_iota(np.int32, hit.shape, hit.ndim + axis if axis < 0 else axis) + 1
    first = jnp.min(jnp.where(hit, idx, n + 1), axis=axis, initial=n + 1)
    return jnp.where(first == n + 1, 0, first).astype(np.int32)


def lu_info(lu):
    """``info`` of ``?getrf`` from its factor ``lu`` ``(..., m, n)``: the 1-based index of the
    first exactly-zero diagonal entry of ``U``, 0 when there is none (int32 ``(...)``)."""
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    return first_index(diag == 0)


def cholesky_info(a, factor, lower: bool = True):
    """``info`` of ``?potrf``: the order (1-based) of the first leading minor of the
    Hermitian matrix ``a`` ``(..., n, n)`` (only its ``lower`` or upper triangle read) that is
    not positive definite, 0 when ``a`` is positive definite; int32 ``(...)``.

    ``factor`` is ``jax.lax.linalg.cholesky``'s result for ``a`` (NaN when it failed). The
    unblocked Cholesky recurrence (LAPACK ``?potf2``: a pivot that is not ``> 0``, NaN
    included, stops the factorization) runs only when ``factor`` is not finite
    (``lax.cond``), so a successful factorization costs one ``isfinite`` reduction.
    """
    if not lower:
        a = jnp.conj(jnp.swapaxes(a, -1, -2))
    batch = a.shape[:-2]
    if a.size == 0:
        return jnp.zeros(batch, np.int32)
    return lax.cond(
        jnp.all(jnp.isfinite(factor)),
        lambda m: jnp.zeros(batch, np.int32),
        _potf2_info,
        a,
    )


def _potf2_info(a):
    n = a.shape[-1]
    m = jnp.tril(a) + jnp.conj(jnp.swapaxes(jnp.tril(a, -1), -1, -2))
    rows = lax.broadcasted_iota(np.int32, (n,), 0)

    def step(j, state):
        m, info = state
        col = lax.dynamic_index_in_dim(m, j, axis=-1, keepdims=False)  # (..., n)
        d = jnp.real(lax.dynamic_index_in_dim(col, j, axis=-1, keepdims=False))
        bad = ~(d > 0)
        info = jnp.where((info == 0) & bad, j + 1, info)
        piv = jnp.sqrt(jnp.where(bad, 1, d)).astype(m.dtype)
        low = jnp.where(rows > j, col, 0) / piv[..., None]
        m = m - low[..., :, None] * jnp.conj(low[..., None, :])
        return m, info

    _, info = lax.fori_loop(0, n, step, (m, jnp.zeros(a.shape[:-2], np.int32)))
    return info
