"""Shape and data-movement ops → ONNX (constant, iota, broadcast_in_dim, reshape, transpose,
slice, concatenate, pad, reverse, dynamic_slice)."""

from __future__ import annotations

import numpy as np

from converter import dtypes

from ..registry import register

INT64_MIN = np.iinfo(np.int64).min


@register("stablehlo.constant", dynamic=True)
def _constant(interp, op):
    return interp.graph.const(op.attr("value"), hint="const")


@register("stablehlo.iota", dynamic=True)
def _iota(interp, op):
    t = op.result_type
    dim = op.attr("iota_dimension")
    shape = [1] * t.rank
    shape[dim] = t.shape[dim]
    values = np.arange(t.shape[dim]).reshape(shape)
    return interp.graph.const(np.broadcast_to(values, t.shape).astype(dtypes.to_numpy(t.dtype)), hint="iota")


@register("stablehlo.broadcast_in_dim", dynamic=True)
def _broadcast_in_dim(interp, op, x):
    """``Reshape`` (``Unsqueeze`` when the operand has dynamic dimensions) to the result rank,
    then ``Expand`` to the (always static) result shape."""
    g = interp.graph
    dims = list(op.attr("broadcast_dimensions"))
    out = op.result_type.shape
    in_shape = op.operand_type(0).shape
    if None in in_shape:
        order = sorted(range(len(dims)), key=lambda i: dims[i])
        if order != list(range(len(dims))):
            x = g.op("Transpose", [x], perm=order)
        missing = [d for d in range(len(out)) if d not in dims]
        x = g.op("Unsqueeze", [x, g.ints(missing)]) if missing else x
        return g.op("Expand", [x, g.ints(out)])
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        x = g.op("Transpose", [x], perm=order)
        in_shape = [in_shape[i] for i in order]
        dims = sorted(dims)
    shape = [1] * len(out)
    for src, dst in enumerate(dims):
        shape[dst] = in_shape[src]
    if list(shape) != list(in_shape):
        x = g.op("Reshape", [x, g.ints(shape)])
    if tuple(shape) == tuple(out):
        return x
    return g.op("Expand", [x, g.ints(out)])


@register("stablehlo.reshape", dynamic=True)
def _reshape(interp, op, x):
    return interp.graph.op("Reshape", [x, interp.graph.ints(op.result_type.shape)])


@register("stablehlo.transpose", dynamic=True)
def _transpose(interp, op, x):
    return interp.graph.op("Transpose", [x], perm=list(op.attr("permutation")))


@register("stablehlo.slice", dynamic=True)
def _slice(interp, op, x):
    g = interp.graph
    start, limit, strides = op.attr("start_indices"), op.attr("limit_indices"), op.attr("strides")
    axes = list(range(len(start)))
    return g.op("Slice", [x, g.ints(start), g.ints(limit), g.ints(axes), g.ints(strides)])


@register("stablehlo.concatenate", dynamic=True)
def _concatenate(interp, op, *xs):
    return interp.graph.op("Concat", list(xs), axis=op.attr("dimension"))


@register("stablehlo.pad", dynamic=True)
def _pad(interp, op, x, value):
    if any(op.attr("interior_padding")):
        raise NotImplementedError("pad with interior padding")
    g = interp.graph
    pads = list(op.attr("edge_padding_low")) + list(op.attr("edge_padding_high"))
    return g.op_as("Pad", [x, g.ints(pads), value], op.result_type.dtype, data=(0, 2), mode="constant")


@register("stablehlo.reverse", dynamic=True)
def _reverse(interp, op, x):
    g = interp.graph
    dims = list(op.attr("dimensions"))
    n = len(dims)
    return g.op("Slice", [x, g.ints([-1] * n), g.ints([INT64_MIN] * n), g.ints(dims), g.ints([-1] * n)])


@register("stablehlo.dynamic_slice", dynamic=True)
def _dynamic_slice(interp, op, x, *starts):
    """Start indices are clamped to ``[0, dim - size]`` (StableHLO spec: dynamic_slice)."""
    g = interp.graph
    sizes = op.attr("slice_sizes")
    shape = op.operand_type(0).shape
    clamped = []
    for i, s in enumerate(starts):
        s64 = g.op("Reshape", [g.op("Cast", [s], to=7), g.ints([1])])  # INT64
        if shape[i] is None:  # a dynamic dimension: its size at run time
            hi = g.op("Sub", [g.dim(x, i), g.ints([sizes[i]])])
        else:
            hi = g.ints([shape[i] - sizes[i]])
        clamped.append(g.op("Max", [g.op("Min", [s64, hi]), g.ints([0])]))
    begin = g.op("Concat", clamped, axis=0)
    end = g.op("Add", [begin, g.ints(sizes)])
    return g.op("Slice", [x, begin, end, g.ints(range(len(sizes)))])


@register("stablehlo.optimization_barrier", dynamic=True)
def _barrier(interp, op, *xs):
    return [interp.graph.op("Identity", [x]) for x in xs]
