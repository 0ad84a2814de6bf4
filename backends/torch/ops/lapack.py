"""The CPU ``custom_call`` targets ``jnp.linalg`` lowers to (jaxlib's LAPACK FFI kernels,
``lapack_<t><routine>_ffi`` with ``t`` in s, d, c, z), as torch.linalg calls.

Operands and results are logical (row-major) tensors whatever their ``operand_layouts``, with
leading batch dims; the ``mhlo.backend_config`` dictionary carries LAPACK's character flags as
ASCII codes (``uplo = 76`` is ``'L'``) and ``?ormqr``'s as booleans. ``info`` results are 0 on
success, as LAPACK reports them (``?getrf``, ``?potrf``: LAPACK's own value through torch's
``_ex`` functions; the iterative routines, where torch raises on failure instead: 0).
Each target runs the torch function that calls the same LAPACK routine, so the results are
torch's own (MKL on torch's CPU builds) and match eager torch bit for bit where the choice of
signs or phases is the library's.
"""

from __future__ import annotations

import torch

from converter import mlir
from converter.lapack import ffi_targets

from ..registry import register
from .linalg import triangular_solve


def _flag(op, key: str, default: str) -> str:
    # only this attribute is decoded: ``operand_layouts`` has ``index`` elements
    attrs = op.mlir.attributes
    cfg = mlir.decode_attribute(attrs["mhlo.backend_config"]) if "mhlo.backend_config" in attrs else {}
    value = cfg.get(key) if isinstance(cfg, dict) else None
    return chr(value) if isinstance(value, int) and not isinstance(value, bool) else default


def _bool(op, key: str, default: bool) -> bool:
    attrs = op.mlir.attributes
    cfg = mlir.decode_attribute(attrs["mhlo.backend_config"]) if "mhlo.backend_config" in attrs else {}
    value = cfg.get(key) if isinstance(cfg, dict) else None
    return bool(value) if value is not None else default


def _info(x: torch.Tensor, op, index: int) -> torch.Tensor:
    shape = op.result_types[index].shape
    return torch.zeros(shape, dtype=torch.int32)


@register(*ffi_targets("getrf"))
def _getrf(interp, op, a):
    lu, piv, info = torch.linalg.lu_factor_ex(a)
    return [lu, piv.to(torch.int32), info.to(torch.int32)]


@register(*ffi_targets("trsm"))
def _trsm(interp, op, a, b):
    trans = {"N": "NO_TRANSPOSE", "T": "TRANSPOSE", "C": "ADJOINT"}[_flag(op, "trans_x", "N")]
    return triangular_solve(
        a,
        b,
        left_side=_flag(op, "side", "L") == "L",
        lower=_flag(op, "uplo", "L") == "L",
        unit_diagonal=_flag(op, "diag", "N") == "U",
        transpose=trans,
    )


@register(*ffi_targets("potrf"))
def _potrf(interp, op, a):
    """``(factor, info)``: the factor in the ``uplo`` triangle, the other triangle of ``a``
    left as LAPACK leaves it."""
    lower = _flag(op, "uplo", "L") == "L"
    sym = a.tril() + a.tril(-1).mH if lower else a.triu() + a.triu(1).mH
    out, info = torch.linalg.cholesky_ex(sym, upper=not lower)
    rest = a.triu(1) if lower else a.tril(-1)
    return [out + rest, info.to(torch.int32)]


@register(*ffi_targets("syevd", "heevd"))
def _syevd(interp, op, a):
    uplo = _flag(op, "uplo", "L")
    if _flag(op, "mode", "V") == "V":
        w, v = torch.linalg.eigh(a, UPLO=uplo)
    else:
        w = torch.linalg.eigvalsh(a, UPLO=uplo)
        v = a
    return [v, w, _info(a, op, 2)]


@register(*ffi_targets("gesdd"), *ffi_targets("gesvd"))
def _gesdd(interp, op, a):
    mode = _flag(op, "mode", "A")
    types = op.result_types
    if mode == "N":
        s = torch.linalg.svdvals(a)
        u = torch.zeros(types[2].shape, dtype=a.dtype)
        vt = torch.zeros(types[3].shape, dtype=a.dtype)
    else:
        u, s, vt = torch.linalg.svd(a, full_matrices=mode == "A")
    return [a, s, u, vt, _info(a, op, 4)]


@register(*ffi_targets("geqrf"))
def _geqrf(interp, op, a):
    qr, tau = torch.geqrf(a)
    return [qr, tau]


@register(*ffi_targets("orgqr", "ungqr"))
def _orgqr(interp, op, a, tau):
    return torch.linalg.householder_product(a, tau)


@register(*ffi_targets("ormqr", "unmqr"))
def _ormqr(interp, op, a, tau, c):
    """``Q c``, ``Q^H c``, ``c Q`` or ``c Q^H`` (``left``, ``transpose``)."""
    return torch.ormqr(a, tau, c, left=_bool(op, "left", True), transpose=_bool(op, "transpose", False))


@register(*ffi_targets("geev"))
def _geev(interp, op, a):
    """Right eigenvectors of a general matrix, as jaxlib's kernel returns them: eigenvalues
    ``(wr, wi)`` for real ``a`` (``w`` for complex), eigenvectors complex with conjugate pairs
    unpacked (as ``torch.linalg.eig``, which runs the same LAPACK routine, returns them)."""
    if _flag(op, "compute_left", "N") == "V":
        raise NotImplementedError("geev with left eigenvectors")
    types = op.result_types
    first = 1 if a.is_complex() else 2  # index of vl among the results
    if _flag(op, "compute_right", "V") == "V":
        w, vr = torch.linalg.eig(a)
    else:
        w = torch.linalg.eigvals(a)
        vr = torch.zeros(types[first + 1].shape, dtype=w.dtype)
    vl = torch.zeros(types[first].shape, dtype=w.dtype)
    info = _info(a, op, first + 2)
    if a.is_complex():
        return [w, vl, vr, info]
    return [w.real, w.imag, vl, vr, info]
