"""Shape and data-movement ops (StableHLO spec sections constant, iota, broadcast_in_dim,
reshape, transpose, slice, concatenate, pad, reverse).

``pad`` supports negative edge padding (cropping) and interior padding; the padding value is
a tensor operand, so padding is built from ``cat``/``slice_scatter`` rather than
``F.pad(value=...)`` (which needs a Python scalar).
"""

from __future__ import annotations

import numpy as np
import torch

from .._util import numpy_to_torch, result_name, scalar_of, storage_dtype
from ..registry import register
from ..symbolic import SymArray, shape_list


@register("stablehlo.constant")
def _constant(interp, op):
    value = op.attr("value")
    name = result_name(op)
    shape = tuple(op.result_type.shape)
    flat = value.reshape(-1)
    if flat.size == 0:
        return torch.zeros(shape, dtype=storage_dtype(name))
    # complex non-finite scalars do not survive FX code generation ("nanj"): keep a tensor
    printable = flat.dtype.kind != "c" or bool(np.isfinite(flat[0]))
    if printable and (flat.size == 1 or bool((flat == flat[0]).all())):
        return torch.full(shape, scalar_of(flat[0], name), dtype=storage_dtype(name))
    return numpy_to_torch(value, name)


@register("stablehlo.iota")
def _iota(interp, op):
    t = op.result_type
    dim = op.attr("iota_dimension")
    dtype = storage_dtype(t.dtype)
    base = torch.arange(t.shape[dim], dtype=torch.int64)
    base = base.to(dtype)
    view = [1] * len(t.shape)
    view[dim] = t.shape[dim]
    return base.reshape(view).expand(t.shape).clone()


def broadcast_in_dim(x: torch.Tensor, shape, dims) -> torch.Tensor:
    """``broadcast_in_dim``: operand dim ``i`` becomes result dim ``dims[i]``; an ``expand``
    view of ``x`` (after a permute/view when the dims need one), ``x`` itself when nothing
    changes."""
    dims = list(dims)
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        x = x.permute(order)
        dims = [dims[i] for i in order]
    view = [1] * len(shape)
    for i, d in enumerate(dims):
        view[d] = x.shape[i]
    if list(x.shape) != view:
        x = x.reshape(view)
    return x if list(x.shape) == list(shape) else x.expand(tuple(shape))


@register("stablehlo.broadcast_in_dim")
def _broadcast_in_dim(interp, op, x):
    return broadcast_in_dim(x, op.result_type.shape, op.attr("broadcast_dimensions"))


@register("stablehlo.reshape")
def _reshape(interp, op, x):
    shape = list(op.result_type.shape)
    return x if list(x.shape) == shape else x.reshape(shape)  # a no-op reshape emits nothing


@register("stablehlo.transpose")
def _transpose(interp, op, x):
    perm = list(op.attr("permutation"))
    return x if perm == list(range(x.dim())) else x.permute(perm)  # identity: nothing


@register("stablehlo.slice")
def _slice(interp, op, x):
    starts, limits = op.attr("start_indices"), op.attr("limit_indices")
    strides = op.attr("strides") or [1] * len(starts)
    return x[tuple(slice(s, e, k) for s, e, k in zip(starts, limits, strides, strict=False))]


@register("stablehlo.concatenate")
def _concatenate(interp, op, *xs):
    return torch.cat(xs, dim=op.attr("dimension"))


def pad(x: torch.Tensor, value: torch.Tensor, low, high, interior) -> torch.Tensor:
    """StableHLO ``pad``: ``interior[d]`` copies of ``value`` between elements, then
    ``low``/``high`` on each side (negative values crop)."""
    value = value.to(x.dtype)
    for d, (lo, hi, mid) in enumerate(zip(low, high, interior, strict=False)):
        if mid > 0 and x.shape[d] > 1:
            n = x.shape[d]
            shape = list(x.shape)
            shape[d] = n + (n - 1) * mid
            base = value.expand(shape).clone()
            x = base.slice_scatter(x, dim=d, start=0, step=mid + 1)
        if lo < 0:
            x = x.narrow(d, -lo, x.shape[d] + lo)
        if hi < 0:
            x = x.narrow(d, 0, x.shape[d] + hi)
        parts = []
        if lo > 0:
            shape = list(x.shape)
            shape[d] = lo
            parts.append(value.expand(shape))
        parts.append(x)
        if hi > 0:
            shape = list(x.shape)
            shape[d] = hi
            parts.append(value.expand(shape))
        if len(parts) > 1:
            x = torch.cat(parts, dim=d)
    return x


@register("stablehlo.pad")
def _pad(interp, op, x, value):
    return pad(
        x, value, op.attr("edge_padding_low"), op.attr("edge_padding_high"), op.attr("interior_padding")
    )


@register("stablehlo.reverse")
def _reverse(interp, op, x):
    dims = list(op.attr("dimensions"))
    return torch.flip(x, dims) if dims else x


def _result_shape(op, shape) -> tuple:
    """The result shape of a ``dynamic_*`` op: its static type, or on a shape-polymorphic
    module run on symbolic sizes the shape operand's values (ints and ``SymInt``s)."""
    static = op.result_type.shape
    if all(d is not None for d in static):
        return tuple(static)
    return tuple(shape_list(shape))


@register("stablehlo.dynamic_broadcast_in_dim")
def _dynamic_broadcast_in_dim(interp, op, x, output_dimensions):
    return broadcast_in_dim(x, _result_shape(op, output_dimensions), op.attr("broadcast_dimensions"))


@register("stablehlo.dynamic_reshape")
def _dynamic_reshape(interp, op, x, shape):
    return x.reshape(_result_shape(op, shape))


@register("stablehlo.dynamic_iota")
def _dynamic_iota(interp, op, shape):
    t = op.result_type
    out = _result_shape(op, shape)
    dim = op.attr("iota_dimension")
    base = torch.arange(out[dim], dtype=torch.int64).to(storage_dtype(t.dtype))
    view = [1] * len(out)
    view[dim] = out[dim]
    return base.reshape(view).expand(out).clone()


def _amounts(interp, op, index: int, value) -> list:
    """Operand ``index`` of a ``dynamic_*`` op as ints: from its constant when it has one
    (a traced constant has no symbolic form), else the values of its shape computation."""
    static = interp.static_operand(op, index)
    if static is not None:
        return [int(v) for v in static.reshape(-1)]
    return shape_list(value)


@register("stablehlo.real_dynamic_slice")
def _real_dynamic_slice(interp, op, x, start, limit, strides):
    """``x[start:limit:strides]`` on every axis (in bounds by the spec's constraints)."""
    bounds = zip(
        _amounts(interp, op, 1, start),
        _amounts(interp, op, 2, limit),
        _amounts(interp, op, 3, strides),
        strict=True,
    )
    return x[tuple(slice(s, e, k) for s, e, k in bounds)]


@register("stablehlo.dynamic_pad")
def _dynamic_pad(interp, op, x, value, low, high, interior):
    """:func:`pad` with the amounts from operands (negative amounts crop)."""
    amounts = [_amounts(interp, op, i, v) for i, v in ((2, low), (3, high), (4, interior))]
    return pad(x, value, *amounts)


@register("stablehlo.custom_call@shape_assertion")
def _shape_assertion(interp, op, assertion, *values):
    """JAX's check of the dimension constraints: ``torch._check`` of the condition (on
    symbolic sizes it becomes a constraint of the traced graph)."""
    cond = shape_list(assertion)[0] if isinstance(assertion, SymArray) else bool(assertion)
    message = str(op.attr("error_message") or "shape assertion failed")
    if isinstance(cond, torch.SymBool):
        sizes = [v for a in values for v in (shape_list(a) if isinstance(a, SymArray) else [])]
        torch._check(cond, lambda: message.format(*sizes))
    elif not cond:
        raise ValueError(message)
    return []


@register("stablehlo.get_dimension_size")
def _get_dimension_size(interp, op, x):
    return torch.full((), x.shape[op.attr("dimension")], dtype=torch.int32)


@register("stablehlo.einsum")
def _einsum(interp, op, lhs, rhs):
    return torch.einsum(op.attr("einsum_config"), lhs, rhs)


@register("stablehlo.unary_einsum")
def _unary_einsum(interp, op, x):
    config = op.attr("einsum_config").lstrip(",")
    return torch.einsum(config, x)
