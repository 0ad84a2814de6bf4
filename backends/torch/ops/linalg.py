"""``dot_general``, ``dot``, ``convolution``, ``cholesky``, ``triangular_solve``, ``fft``
(StableHLO spec sections of those names).

``dot_general`` becomes one ``torch.mm`` or ``torch.bmm`` on operands laid out as
``(batch, free, contracting)`` / ``(batch, contracting, free)``, the result in the spec's order
(batch, lhs free, rhs free).

``convolution`` permutes operands to torch's ``(N, C, *spatial)``/``(O, I, *spatial)``
layout, passes symmetric padding to the convolution and pads otherwise (one ``F.pad``, negative
= crop; interior zeros for ``lhs_dilation``), maps ``batch_group_count`` onto torch's
``groups``, calls ``F.conv{1,2,3}d``, and permutes the result to the requested output layout.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .._util import result_name, storage_dtype
from ..registry import register
from .shape import pad


def _compute_dtype(name: str) -> torch.dtype:
    """Integer matmuls and convolutions are computed in float64 when exact enough; torch's
    CPU kernels lack some integer paths."""
    return storage_dtype(name)


def dot_general(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract, out_dtype):
    """``dot_general`` as one ``torch.mm`` (no batch dims) or ``torch.bmm``; result dims:
    batch, lhs free, rhs free.

    The lhs is laid out ``(*batch, *free, contracting)`` and the rhs ``(*batch, contracting,
    *free)`` (permutes, views where the order already fits); the batch, free and contracting
    dims are each flattened into one (a vector side is a 1-row/column matrix), and the result
    is reshaped to the spec's dims."""
    lhs_batch, rhs_batch = list(lhs_batch), list(rhs_batch)
    lhs_contract, rhs_contract = list(lhs_contract), list(rhs_contract)
    lhs_free = [i for i in range(lhs.dim()) if i not in lhs_batch and i not in lhs_contract]
    rhs_free = [i for i in range(rhs.dim()) if i not in rhs_batch and i not in rhs_contract]
    batch_shape = [lhs.shape[i] for i in lhs_batch]
    lfree_shape = [lhs.shape[i] for i in lhs_free]
    rfree_shape = [rhs.shape[i] for i in rhs_free]
    k = math.prod(lhs.shape[i] for i in lhs_contract)
    compute = torch.int64 if out_dtype == torch.bool else out_dtype
    lhs, rhs = lhs.to(compute), rhs.to(compute)
    lhs = _permute(lhs, lhs_batch + lhs_free + lhs_contract)
    rhs = _permute(rhs, rhs_batch + rhs_contract + rhs_free)
    b, m, n = math.prod(batch_shape), math.prod(lfree_shape), math.prod(rfree_shape)
    if not batch_shape:  # (M, K) @ (K, N): one mm (a vector side is a 1-row/column matrix)
        res = torch.mm(_reshape(lhs, [m, k]), _reshape(rhs, [k, n]))
    else:
        res = torch.bmm(_reshape(lhs, [b, m, k]), _reshape(rhs, [b, k, n]))
    res = _reshape(res, [*batch_shape, *lfree_shape, *rfree_shape])
    return res != 0 if out_dtype == torch.bool else res


def _permute(x: torch.Tensor, order: list[int]) -> torch.Tensor:
    """``x.permute(order)``, or ``x`` itself for the identity order (no graph node)."""
    return x if order == list(range(x.dim())) else x.permute(order)


def _reshape(x: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """``x.reshape(shape)``, or ``x`` itself when it has that shape already (no graph node)."""
    return x if list(x.shape) == list(shape) else x.reshape(shape)


@register("stablehlo.dot_general")
def _dot_general(interp, op, lhs, rhs):
    d = op.attr("dot_dimension_numbers")
    return dot_general(
        lhs,
        rhs,
        d["lhs_batching_dimensions"],
        d["rhs_batching_dimensions"],
        d["lhs_contracting_dimensions"],
        d["rhs_contracting_dimensions"],
        storage_dtype(result_name(op)),
    )


@register("stablehlo.dot")
def _dot(interp, op, lhs, rhs):
    return dot_general(lhs, rhs, [], [], [lhs.dim() - 1], [0], storage_dtype(result_name(op)))


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


@register("stablehlo.convolution")
def _convolution(interp, op, lhs, rhs):
    d = op.attr("dimension_numbers")
    nsp = lhs.dim() - 2
    out_dtype = storage_dtype(result_name(op))
    empty = _empty_result(op, lhs, rhs)
    if empty is not None:
        return empty
    if nsp not in _CONV:
        raise NotImplementedError(f"convolution with {nsp} spatial dimensions")
    lhs = lhs.permute(
        [d["input_batch_dimension"], d["input_feature_dimension"], *d["input_spatial_dimensions"]]
    )
    rhs = rhs.permute(
        [
            d["kernel_output_feature_dimension"],
            d["kernel_input_feature_dimension"],
            *d["kernel_spatial_dimensions"],
        ]
    )
    compute = out_dtype if out_dtype.is_floating_point or out_dtype.is_complex else torch.float64
    lhs, rhs = lhs.to(compute), rhs.to(compute)
    reversal = op.attr("window_reversal")
    if reversal and any(reversal):
        rhs = torch.flip(rhs, [2 + i for i, r in enumerate(reversal) if r])
    padding = op.attr("padding")
    padding = [(0, 0)] * nsp if padding is None else [tuple(int(v) for v in p) for p in padding]
    lhs_dil = op.attr("lhs_dilation") or [1] * nsp
    conv_padding = [0] * nsp
    if any(k != 1 for k in lhs_dil):
        zero = torch.zeros((), dtype=compute)
        lhs = pad(
            lhs,
            zero,
            [0, 0] + [p[0] for p in padding],
            [0, 0] + [p[1] for p in padding],
            [0, 0] + [k - 1 for k in lhs_dil],
        )
    elif all(lo == hi >= 0 for lo, hi in padding):
        conv_padding = [lo for lo, _ in padding]  # symmetric: the convolution pads
    else:  # one constant_pad_nd (negative = crop); F.pad lists the last dim first
        lhs = F.pad(lhs, [v for lo, hi in reversed(padding) for v in (lo, hi)])
    groups = op.attr("feature_group_count", 1)
    bgroups = op.attr("batch_group_count", 1)
    if bgroups > 1:
        n, c = lhs.shape[:2]
        lhs = lhs.reshape(bgroups, n // bgroups, c, *lhs.shape[2:]).transpose(0, 1)
        lhs = lhs.reshape(n // bgroups, bgroups * c, *lhs.shape[3:])
        groups = bgroups
    out = _CONV[nsp](
        lhs,
        rhs,
        stride=list(op.attr("window_strides") or [1] * nsp),
        padding=conv_padding,
        dilation=list(op.attr("rhs_dilation") or [1] * nsp),
        groups=groups,
    )
    perm_out = [d["output_batch_dimension"], d["output_feature_dimension"], *d["output_spatial_dimensions"]]
    inverse = [perm_out.index(i) for i in range(len(perm_out))]
    out = out.permute(inverse)
    if compute != out_dtype:
        out = torch.round(out).to(out_dtype)
    return out


@register("stablehlo.cholesky")
def _cholesky(interp, op, a):
    lower = bool(op.attr("lower", False))
    sym = a.tril() + a.tril(-1).mH if lower else a.triu() + a.triu(1).mH
    out, _ = torch.linalg.cholesky_ex(sym, upper=not lower)
    return out


_TRANSPOSE = {"NO_TRANSPOSE": False, "TRANSPOSE": True, "ADJOINT": True}


def triangular_solve(a, b, *, left_side: bool, lower: bool, unit_diagonal: bool, transpose: str):
    """Solve ``op(a) x = b`` (``left_side``) or ``x op(a) = b`` with ``a`` triangular;
    ``transpose`` is ``NO_TRANSPOSE``, ``TRANSPOSE`` or ``ADJOINT``. Only the named triangle
    of ``a`` is read. float16/bfloat16 (which torch's solver lacks) solve in float32 and
    round the result once."""
    if a.dtype in (torch.float16, torch.bfloat16):
        wide = triangular_solve(
            a.to(torch.float32),
            b.to(torch.float32),
            left_side=left_side,
            lower=lower,
            unit_diagonal=unit_diagonal,
            transpose=transpose,
        )
        return wide.to(a.dtype)
    a = a.tril() if lower else a.triu()
    if transpose == "TRANSPOSE":
        a, lower = a.mT, not lower
    elif transpose == "ADJOINT":
        a, lower = a.mH, not lower
    return torch.linalg.solve_triangular(a, b, upper=not lower, left=left_side, unitriangular=unit_diagonal)


@register("stablehlo.triangular_solve")
def _triangular_solve(interp, op, a, b):
    return triangular_solve(
        a,
        b,
        left_side=bool(op.attr("left_side")),
        lower=bool(op.attr("lower")),
        unit_diagonal=bool(op.attr("unit_diagonal")),
        transpose=str(op.attr("transpose_a")),
    )


def _empty_result(op, *operands: torch.Tensor) -> torch.Tensor | None:
    """Zeros of ``op``'s (static) result type when an operand or the result has no elements,
    else None. XLA gives an empty result, or zeros for a sum over nothing (a convolution
    with no input features, a transform of no points); torch's convolution and FFT kernels
    reject zero-size dimensions."""
    shape = op.result_type.shape
    if None in shape or all(t.numel() for t in operands) and math.prod(shape):
        return None
    return torch.zeros(shape, dtype=storage_dtype(result_name(op)))


@register("stablehlo.fft")
def _fft(interp, op, x):
    """StableHLO spec: fft, over the trailing ``len(fft_length)`` dimensions; zero-size
    operands or results give zeros of the result type (:func:`_empty_result`)."""
    empty = _empty_result(op, x)
    if empty is not None:
        return empty
    kind = str(op.attr("fft_type"))
    lengths = list(op.attr("fft_length"))
    dims = list(range(x.dim() - len(lengths), x.dim()))
    if kind == "FFT":
        return torch.fft.fftn(x, s=lengths, dim=dims)
    if kind == "IFFT":
        return torch.fft.ifftn(x, s=lengths, dim=dims)
    if kind == "RFFT":
        return torch.fft.rfftn(x, s=lengths, dim=dims)
    if kind == "IRFFT":
        return torch.fft.irfftn(x, s=lengths, dim=dims)
    raise NotImplementedError(f"fft_type {kind}")
