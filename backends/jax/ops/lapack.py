"""The CPU ``custom_call`` targets ``jax.lax.linalg`` lowers to (jaxlib's LAPACK FFI kernels,
``lapack_<t><routine>_ffi`` with ``t`` in s, d, c, z), each interpreted by the
``jax.lax.linalg`` call that emits it, so ``to_jax`` re-emits the same custom call.

Operands and results are logical (row-major) tensors whatever their ``operand_layouts``, with
leading batch dims; the ``mhlo.backend_config`` dictionary carries LAPACK's character flags as
ASCII codes (``uplo = 76`` is ``'L'``) and ``?ormqr``'s as booleans. Results follow the FFI
kernels: LU pivots 1-based, ``info`` int32 (0 on success). ``jax.lax.linalg`` does not return
``info``: the ``?getrf`` and ``?potrf`` values are recomputed exactly as LAPACK defines them
(:mod:`converter.lapack`); for the iterative routines (``?gesdd``, ``?gesvd``, ``?syevd``,
``?geev``), which JAX reports failed by NaN results, it is 0 when the results are finite and
1 otherwise. Outputs LAPACK leaves unspecified (the overwritten input of ``?gesdd``, vectors
that a mode does not compute) are the input or zeros.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from converter import dtypes, mlir
from converter.lapack import cholesky_info, ffi_targets, lu_info

from ..registry import register


def _config(op) -> dict:
    # only this attribute is decoded: ``operand_layouts`` holds ``index`` elements
    attrs = op.mlir.attributes
    cfg = mlir.decode_attribute(attrs["mhlo.backend_config"]) if "mhlo.backend_config" in attrs else {}
    return cfg if isinstance(cfg, dict) else {}


def _flag(op, key: str, default: str) -> str:
    """A character flag of ``mhlo.backend_config`` (stored as its ASCII code)."""
    value = _config(op).get(key)
    return chr(value) if isinstance(value, int) and not isinstance(value, bool) else default


def _bool(op, key: str, default: bool) -> bool:
    value = _config(op).get(key)
    return bool(value) if value is not None else default


def _zeros(op, index: int):
    t = op.result_types[index]
    return jnp.zeros(t.shape, dtypes.to_numpy(t.dtype))


def _ok_info(*results, batch: tuple[int, ...]):
    """0 where every result of a batch element is finite, 1 elsewhere (int32 ``batch``)."""
    ok = jnp.ones(batch, bool)
    for r in results:
        ok = ok & jnp.all(jnp.isfinite(r), axis=tuple(range(len(batch), r.ndim)))
    return jnp.where(ok, 0, 1).astype(np.int32)


def _mH(x):
    x = jnp.swapaxes(x, -1, -2)
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


@register(*ffi_targets("getrf"))
def _getrf(interp, op, a):
    """``?getrf``: ``(LU, ipiv 1-based, info)``."""
    lu, pivots, _ = lax.linalg.lu(a)
    return [lu, (pivots + 1).astype(np.int32), lu_info(lu)]


@register(*ffi_targets("potrf"))
def _potrf(interp, op, a):
    """``?potrf``: ``(factor, info)``; the factor in the ``uplo`` triangle, the other triangle
    of ``a`` left as is (as LAPACK leaves it)."""
    if _flag(op, "uplo", "L") == "L":
        factor = lax.linalg.cholesky(a, symmetrize_input=False)
        return [factor + jnp.triu(a, 1), cholesky_info(a, factor, lower=True)]
    low = lax.linalg.cholesky(_mH(a), symmetrize_input=False)
    return [_mH(low) + jnp.tril(a, -1), cholesky_info(a, _mH(low), lower=False)]


@register(*ffi_targets("trsm"))
def _trsm(interp, op, a, b):
    """``?trsm`` with ``alpha = 1``: solve ``op(a) x = b`` (``side = 'L'``) or ``x op(a) = b``."""
    trans = _flag(op, "trans_x", "N")
    return lax.linalg.triangular_solve(
        a,
        b,
        left_side=_flag(op, "side", "L") == "L",
        lower=_flag(op, "uplo", "L") == "L",
        transpose_a=trans != "N",
        conjugate_a=trans == "C",
        unit_diagonal=_flag(op, "diag", "N") == "U",
    )


@register(*ffi_targets("geqrf"))
def _geqrf(interp, op, a):
    """``?geqrf``: ``(packed QR, tau)``."""
    h, tau = jnp.linalg.qr(a, mode="raw")
    return [jnp.swapaxes(h, -1, -2), tau]


@register(*ffi_targets("orgqr", "ungqr"))
def _orgqr(interp, op, a, tau):
    """``?orgqr``/``?ungqr``: the first ``n`` columns of the reflectors' product."""
    return lax.linalg.householder_product(a, tau)


@register(*ffi_targets("ormqr", "unmqr"))
def _ormqr(interp, op, a, tau, c):
    """``?ormqr``/``?unmqr``: ``Q c``, ``Q^H c``, ``c Q`` or ``c Q^H``."""
    return lax.linalg.ormqr(a, tau, c, left=_bool(op, "left", True), transpose=_bool(op, "transpose", False))


def _svd(op, a, algorithm):
    """``?gesdd``/``?gesvd``: ``(a, s, u, vt, info)``; ``mode`` ``A`` (full), ``S``
    (reduced) or ``N`` (values only; ``u``, ``vt`` zeros)."""
    mode = _flag(op, "mode", "A")
    batch = a.shape[:-2]
    if mode == "N":
        s = lax.linalg.svd(a, full_matrices=False, compute_uv=False, algorithm=algorithm)
        return [a, s, _zeros(op, 2), _zeros(op, 3), _ok_info(s, batch=batch)]
    u, s, vt = lax.linalg.svd(a, full_matrices=mode == "A", compute_uv=True, algorithm=algorithm)
    return [a, s, u, vt, _ok_info(s, u, vt, batch=batch)]


@register(*ffi_targets("gesdd"))
def _gesdd(interp, op, a):
    return _svd(op, a, lax.linalg.SvdAlgorithm.DEFAULT)


@register(*ffi_targets("gesvd"))
def _gesvd(interp, op, a):
    return _svd(op, a, lax.linalg.SvdAlgorithm.QR)


@register(*ffi_targets("syevd", "heevd"))
def _syevd(interp, op, a):
    """``?syevd``/``?heevd``: ``(eigenvectors, eigenvalues, info)``, reading the ``uplo``
    triangle; ``mode = 'N'`` leaves ``a`` as the first result."""
    v, w = lax.linalg.eigh(a, lower=_flag(op, "uplo", "L") == "L", symmetrize_input=False)
    batch = a.shape[:-2]
    if _flag(op, "mode", "V") == "N":
        return [a, w, _ok_info(w, batch=batch)]
    return [v, w, _ok_info(v, w, batch=batch)]


@register(*ffi_targets("geev"))
def _geev(interp, op, a):
    """``?geev`` as jaxlib's kernel returns it: ``(wr, wi, vl, vr, info)`` for real ``a``,
    ``(w, vl, vr, info)`` for complex; eigenvectors complex (conjugate pairs unpacked),
    zeros when their flag is ``'N'``."""
    left = _flag(op, "compute_left", "V") == "V"
    right = _flag(op, "compute_right", "V") == "V"
    out = lax.linalg.eig(a, compute_left_eigenvectors=left, compute_right_eigenvectors=right)
    w, rest = out[0], list(out[1:])
    real = not jnp.iscomplexobj(a)
    first = 2 if real else 1  # index of vl among the results
    vl = rest.pop(0) if left else _zeros(op, first)
    vr = rest.pop(0) if right else _zeros(op, first + 1)
    info = _ok_info(w, batch=a.shape[:-2])
    if real:
        return [jnp.real(w), jnp.imag(w), vl, vr, info]
    return [w, vl, vr, info]
