"""Shape and data-movement ops → ONNX (constant, iota, broadcast_in_dim, reshape, transpose,
slice, concatenate, pad, reverse, dynamic_slice, dynamic_update_slice)."""

from __future__ import annotations

import math

import numpy as np

from converter import dtypes

from ..graph import SMALL_CONSTANT
from ..registry import register

INT64_MIN = np.iinfo(np.int64).min


@register("stablehlo.constant", dynamic=True)
def _constant(interp, op):
    return interp.graph.const(op.attr("value"), hint="const")


_IOTA_TYPES = {"float16", "float32", "float64", *(f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64))}


@register("stablehlo.iota", dynamic=True)
def _iota(interp, op):
    """StableHLO spec: iota, computed in the graph (:meth:`GraphBuilder.iota`); a small one
    (at most 16 elements) is an initializer."""
    t = op.result_type
    dim = op.attr("iota_dimension")
    if t.dtype in _IOTA_TYPES and math.prod(t.shape) > SMALL_CONSTANT:
        return interp.graph.iota(t.shape, dim, t.dtype)
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
    """Interior padding first (:func:`interior_pad`, static shapes), then the edges with one
    ``Pad`` (negative edge padding crops, in ONNX as in StableHLO)."""
    g = interp.graph
    dtype = op.result_type.dtype
    interior = list(op.attr("interior_padding"))
    if any(interior):
        x = interior_pad(g, x, value, op.operand_type(0).shape, interior, dtype)
    pads = list(op.attr("edge_padding_low")) + list(op.attr("edge_padding_high"))
    return g.op_as("Pad", [x, g.ints(pads), value], dtype, data=(0, 2), mode="constant")


def interior_pad(g, x, value, shape, interior, dtype) -> str:
    """``x`` with ``interior[d]`` copies of ``value`` between neighbours along each dimension
    ``d`` (StableHLO spec: pad, interior_padding): per padded dimension, a new axis after it
    is padded to ``1 + interior[d]``, the two are merged, and the trailing fill is cut.

    Other dimensions may be dynamic (a symbolic batch): their sizes are read at run time.

    Raises:
        NotImplementedError: a padded dimension is dynamic.
    """
    shape = list(shape)
    for d, p in enumerate(interior):
        if not p:
            continue
        if shape[d] is None:
            raise NotImplementedError("interior padding of a dynamic dimension")
        n = shape[d]
        sizes = g.sizes(x, shape)
        x = g.op("Unsqueeze", [x, g.ints([d + 1])])
        pads = [0] * (len(shape) + 1) * 2
        pads[len(shape) + 1 + d + 1] = p  # the new axis, high side
        x = g.op_as("Pad", [x, g.ints(pads), value], dtype, data=(0, 2), mode="constant")
        merged = sizes[:d] + [n * (1 + p)] + sizes[d + 1 :]
        x = g.op("Reshape", [x, g.shape_vector(merged)], allowzero=1)
        shape[d] = max(n + (n - 1) * p, 0)
        x = g.op("Slice", [x, g.ints([0]), g.ints([shape[d]]), g.ints([d])])
    return x


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
    begin = _clamped_starts(g, x, starts, sizes, op.operand_type(0).shape)
    end = g.op("Add", [begin, g.ints(sizes)])
    return g.op("Slice", [x, begin, end, g.ints(range(len(sizes)))])


@register("stablehlo.dynamic_update_slice", dynamic=True)
def _dynamic_update_slice(interp, op, x, update, *starts):
    """``ScatterND`` of ``update`` at the clamped start (StableHLO spec: dynamic_update_slice:
    starts are clamped to ``[0, dim - update size]``, so every index is in bounds): the
    indices are the start plus a grid of the update's positions (a constant for static
    shapes; built from ``Range``s of the sizes read at run time for dynamic ones, as in a
    ``lax.scan`` over a symbolic length stacking its outputs)."""
    g = interp.graph
    ushape = op.operand_type(1).shape
    if not ushape:  # rank 0: the result is the update (ScatterND needs indices of rank >= 1)
        return g.op("Identity", [update])
    sizes = g.sizes(update, ushape)
    begin = _clamped_starts(g, x, starts, sizes, op.operand_type(0).shape)
    if None not in ushape:
        grid = g.const(np.stack(np.indices(ushape, dtype=np.int64), axis=-1))
    else:
        grid = _index_grid(g, sizes)
    idx = g.op("Add", [grid, begin])
    return g.op("ScatterND", [x, idx, update])


def _index_grid(g, sizes) -> str:
    """The int64 ``[*sizes, rank]`` grid of every position's index (``np.indices`` moved
    last) for sizes given as ints and int64 ``[1]`` run-time values."""
    return g.op("Concat", [g.iota([*sizes, 1], i, "int64") for i in range(len(sizes))], axis=-1)


def _clamped_starts(g, x, starts, sizes, shape) -> str:
    """The int64 ``[rank]`` start vector, each start clamped to ``[0, shape[i] - sizes[i]]``
    (a dynamic dimension's size read at run time; ``sizes`` ints or int64 ``[1]`` values)."""
    clamped = []
    for i, s in enumerate(starts):
        s64 = g.op("Reshape", [g.op("Cast", [s], to=7), g.ints([1])])  # INT64
        size = sizes[i] if isinstance(sizes[i], str) else g.ints([sizes[i]])
        if shape[i] is None:  # a dynamic dimension: its size at run time
            hi = g.op("Sub", [g.dim(x, i), size])
        elif isinstance(sizes[i], str):
            hi = g.op("Sub", [g.ints([shape[i]]), size])
        else:
            hi = g.ints([shape[i] - sizes[i]])
        clamped.append(g.op("Max", [g.op("Min", [s64, hi]), g.ints([0])]))
    return g.op("Concat", clamped, axis=0) if clamped else g.ints([])


@register("stablehlo.optimization_barrier", dynamic=True)
def _barrier(interp, op, *xs):
    return [interp.graph.op("Identity", [x]) for x in xs]
