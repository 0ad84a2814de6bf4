"""One JAX function calling every LAPACK ``custom_call`` target jaxlib emits for a dtype
(``lapack_<t><routine>_ffi``), shared by the backends' tests so that each backend converts
and runs one module per dtype instead of one per routine (registry coverage of every target
at little cost; the per-routine tests beside each backend check the details).

The outputs are those independent of the library's choice of signs and phases (factors
multiplied back, singular values, eigenvalues), so any correct backend reproduces
``jax.jit`` of the function within the dtype's tolerance.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

#: dtype → (rtol, atol) for a 4×4 decomposition (a few ulps times the condition number).
TOL = {
    np.float32: (2e-4, 2e-4),
    np.float64: (1e-10, 1e-10),
    np.complex64: (2e-4, 2e-4),
    np.complex128: (1e-10, 1e-10),
}


def inputs(dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A general 4×4 matrix, a Hermitian positive definite one and a 4×3 right-hand side."""
    rng = np.random.default_rng(7)

    def draw(*shape):
        x = rng.standard_normal(shape)
        if np.issubdtype(dtype, np.complexfloating):
            x = x + 1j * rng.standard_normal(shape)
        return x

    a = draw(4, 4)
    spd = a @ np.conj(a.T) + 4 * np.eye(4)
    return a.astype(dtype), spd.astype(dtype), draw(4, 3).astype(dtype)


def every_routine(a, spd, b):
    """getrf, potrf, trsm, geqrf, orgqr/ungqr, ormqr/unmqr, gesdd, gesvd, syevd/heevd, geev."""
    lu, piv, perm = lax.linalg.lu(a)
    chol = lax.linalg.cholesky(spd)
    solved = lax.linalg.triangular_solve(chol, b, left_side=True, lower=True)
    q, r = lax.linalg.qr(a, full_matrices=False)
    h, tau = jnp.linalg.qr(a, mode="raw")
    applied = lax.linalg.ormqr(h.T, tau, b, left=True, transpose=True)
    u, s, vh = lax.linalg.svd(a, full_matrices=False)
    s_qr = lax.linalg.svd(a, compute_uv=False, algorithm=lax.linalg.SvdAlgorithm.QR)
    v, w = lax.linalg.eigh(spd)
    (ev,) = lax.linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)
    return {
        "lu": (lu, piv, perm),
        "potrf": chol,
        "trsm": solved,
        "qr": (q @ r, jnp.abs(jnp.diagonal(r))),
        "ormqr": jnp.abs(applied),
        "gesdd": (s, (u * s.astype(u.dtype)) @ vh),
        "gesvd": s_qr,
        "eigh": (w, (v * w.astype(v.dtype)) @ jnp.conj(v.T)),
        "geev": (jnp.sort(ev.real), jnp.sort(jnp.abs(ev.imag))),  # independent of their order
    }
