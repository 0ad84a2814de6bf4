"""``reduce`` → ``Reduce*``, ``reduce_window`` → ``MaxPool``/``Conv`` sum pools, ``sort`` →
``TopK`` (which orders ties by index, so it is a stable sort)."""

from __future__ import annotations

import numpy as np

from converter import dtypes
from converter.regions import classify_combiner, classify_comparator

from ..graph import onnx_dtype
from ..registry import register

_REDUCE = {"add": "ReduceSum", "max": "ReduceMax", "min": "ReduceMin", "mul": "ReduceProd"}
_COMBINE = {"add": "Add", "max": "Max", "min": "Min", "mul": "Mul"}
_BOOL = {"and": "ReduceMin", "or": "ReduceMax"}


def _is_identity(kind, value) -> bool:
    if value is None:
        return False
    v = np.asarray(value)
    ident = {"add": 0, "mul": 1, "max": -np.inf, "min": np.inf, "and": True, "or": False}[kind]
    if kind in ("max", "min") and v.dtype.kind in "iub":
        info = np.iinfo(v.dtype) if v.dtype.kind != "b" else None
        ident = (info.min if kind == "max" else info.max) if info else (kind == "min")
    return bool(np.all(v == ident))


@register("stablehlo.reduce", dynamic=True)
def _reduce(interp, op, *args):
    if len(args) != 2:
        raise NotImplementedError("variadic reduce (argmax-style) has no single ONNX equivalent")
    x, init = args
    kind = classify_combiner(op.regions[0])
    g = interp.graph
    axes = g.ints(op.attr("dimensions"))
    if kind in _BOOL and op.result_type.dtype == "bool":
        as_int = g.op("Cast", [x], to=onnx_dtype("int32"))
        out = g.op("Cast", [g.op(_BOOL[kind], [as_int, axes], keepdims=0)], to=onnx_dtype("bool"))
        combine = "And" if kind == "and" else "Or"
    elif kind in _REDUCE:
        out = g.op_as(_REDUCE[kind], [x, axes], op.operand_type(0).dtype, keepdims=0)
        combine = _COMBINE[kind]
    else:
        raise NotImplementedError(f"reduce with a {kind or 'general'} body")
    if _is_identity(kind, interp.static_operand(op, 1)):
        return out
    return g.op(combine, [out, init])


def _pool_layout(op):
    """Split dims into pooled (window, stride or padding not trivial) and carried ones."""
    rank = op.operand_type(0).rank
    win = op.attr("window_dimensions")
    strides = op.attr("window_strides") or [1] * rank
    padding = op.attr("padding")
    pads = [(0, 0)] * rank if padding is None else [tuple(int(v) for v in p) for p in padding]
    dil = op.attr("window_dilations") or [1] * rank
    pooled = [i for i in range(rank) if win[i] != 1 or strides[i] != 1 or pads[i] != (0, 0)]
    return rank, pooled, win, strides, pads, dil


def _cumulative_sum_axis(op, kind, pooled, win, strides, pads, dil):
    """The axis when the window op is an inclusive prefix sum (one dim, window = its size,
    low padding = size - 1, stride and dilation 1), as ``jnp.cumsum`` lowers; else None."""
    if kind != "add" or len(pooled) != 1:
        return None
    axis = pooled[0]
    n = op.operand_type(0).shape[axis]
    if win[axis] == n and pads[axis] == (n - 1, 0) and strides[axis] == 1 and dil[axis] == 1:
        return axis
    return None


@register("stablehlo.reduce_window", dynamic=True)
def _reduce_window(interp, op, x, init):
    kind = classify_combiner(op.regions[0])
    if kind not in ("max", "add") or any(v != 1 for v in (op.attr("base_dilations") or [1])):
        raise NotImplementedError(f"reduce_window with a {kind or 'general'} body or base dilation")
    if not _is_identity(kind, interp.static_operand(op, 1)):
        raise NotImplementedError("reduce_window with a non-identity init value")
    dtype = op.operand_type(0).dtype
    g = interp.graph
    rank, pooled, win, strides, pads, dil = _pool_layout(op)
    cumsum_axis = _cumulative_sum_axis(op, kind, pooled, win, strides, pads, dil)
    if cumsum_axis is not None:
        return g.op_as("CumSum", [x, g.const(np.int64(cumsum_axis))], dtype)
    if not dtypes.is_floating(dtype):
        raise NotImplementedError(f"reduce_window on {dtype}")
    carried = [i for i in range(rank) if i not in pooled]
    sizes = g.sizes(x, op.operand_type(0).shape)  # a dynamic dimension's size is computed
    perm = carried + pooled
    y = g.op("Transpose", [x], perm=perm)
    lead = g.product([sizes[i] for i in carried])
    y = g.op("Reshape", [y, g.shape_vector([lead, 1] + [sizes[i] for i in pooled])], allowzero=1)
    attrs = dict(
        kernel_shape=[win[i] for i in pooled],
        strides=[strides[i] for i in pooled],
        pads=[pads[i][0] for i in pooled] + [pads[i][1] for i in pooled],
        dilations=[dil[i] for i in pooled],
    )
    if kind == "max":
        y = g.op("MaxPool", [y], **attrs)
    else:
        ones = g.const(np.ones([1, 1] + attrs["kernel_shape"], dtypes.to_numpy(dtype)))
        y = g.op("Conv", [y, ones], **attrs)
    out = op.result_type.shape  # carried dimensions keep their size (window 1, stride 1, no padding)
    out_sizes = [out[i] if out[i] is not None else sizes[i] for i in carried] + [
        out[i] if out[i] is not None else g.dim(y, 2 + k) for k, i in enumerate(pooled)
    ]
    y = g.op("Reshape", [y, g.shape_vector(out_sizes)], allowzero=1)
    inv = [0] * rank
    for pos, dim in enumerate(perm):
        inv[dim] = pos
    return g.op("Transpose", [y], perm=inv)


@register("stablehlo.sort", dynamic=True)
def _sort(interp, op, *operands):
    order = classify_comparator(op.regions[0])
    if order is None:
        raise NotImplementedError("sort with a comparator other than < or > on the first operand")
    g = interp.graph
    dim = op.attr("dimension", -1) % op.operand_type(0).rank
    n = op.operand_type(0).shape[dim]
    k = g.ints([n]) if n is not None else g.dim(operands[0], dim)
    values, idx = g.op_as(
        "TopK",
        [operands[0], k],
        op.operand_type(0).dtype,
        n_out=2,
        axis=dim,
        largest=int(order == "descending"),
        sorted=1,
    )
    return [values] + [g.op("GatherElements", [x, idx], axis=dim) for x in operands[1:]]
