"""StableHLO's shape computations → ONNX, for shape-polymorphic modules (``tensor<?x...>``;
StableHLO spec: get_dimension_size, dynamic_broadcast_in_dim, dynamic_reshape,
dynamic_iota, dynamic_pad, real_dynamic_slice, dynamic_gather).

A module that ``jax.export`` lowers with symbolic dimensions (ONNX ``dim_param`` inputs,
``from_jax`` of symbolic ``ShapeDtypeStruct``s) reads each dimension with
``get_dimension_size`` and passes shapes to the ``dynamic_*`` ops as 1-D integer tensors.
ONNX computes shapes the same way: ``Shape`` reads them, and ``Expand``, ``Reshape``,
``Range``, ``Pad`` and ``Slice`` take them as int64 tensors, so each op maps to one or a few
ONNX operators. ``custom_call @shape_assertion`` (JAX's check that the input shapes meet the
symbolic dimensions' constraints, e.g. ``N >= 1``) is dropped: ONNX has no assertion
operator, and the model's own shape checks (onnxruntime's shape inference, ``Reshape``,
``Expand`` and the arithmetic ops' broadcasting) reject inconsistent inputs.
"""

from __future__ import annotations

import numpy as np

from ..graph import onnx_dtype
from ..registry import register

_INT64 = 7  # TensorProto.INT64


def _int64(interp, x, ttype) -> str:
    return x if ttype.dtype == "int64" else interp.graph.op("Cast", [x], to=_INT64)


@register("stablehlo.get_dimension_size", dynamic=True)
def _get_dimension_size(interp, op, x):
    """The size of dimension ``dimension`` as a scalar of the result type (``i32``)."""
    g = interp.graph
    size = g.op("Squeeze", [g.dim(x, op.attr("dimension")), g.ints([0])])
    return g.op("Cast", [size], to=onnx_dtype(op.result_type.dtype))


@register("stablehlo.custom_call@shape_assertion", dynamic=True)
def _shape_assertion(interp, op, *operands):
    """Dropped (see the module docstring); it has no results."""
    return []


def _expand_rank(interp, x, dims: list[int], rank: int) -> str:
    """``x`` with its dimensions moved to positions ``dims`` of a rank-``rank`` tensor and
    size-1 dimensions elsewhere (``Transpose`` when ``dims`` is not increasing, then
    ``Unsqueeze``; works on dynamic dimensions)."""
    g = interp.graph
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        x = g.op("Transpose", [x], perm=order)
    missing = [d for d in range(rank) if d not in dims]
    return g.op("Unsqueeze", [x, g.ints(missing)]) if missing else x


@register("stablehlo.dynamic_broadcast_in_dim", dynamic=True)
def _dynamic_broadcast_in_dim(interp, op, x, shape):
    """``Unsqueeze`` to the result rank, then ``Expand`` to ``output_dimensions``: a size-1
    operand dimension broadcasts, others keep their size (the spec's constraint)."""
    g = interp.graph
    rank = op.result_type.rank
    y = _expand_rank(interp, x, list(op.attr("broadcast_dimensions")), rank)
    return g.op("Expand", [y, _int64(interp, shape, op.operand_type(1))])


@register("stablehlo.dynamic_reshape", dynamic=True)
def _dynamic_reshape(interp, op, x, shape):
    """``Reshape`` with ``allowzero=1``: a 0 in ``output_shape`` is a size, as in StableHLO."""
    g = interp.graph
    return g.op("Reshape", [x, _int64(interp, shape, op.operand_type(1))], allowzero=1)


@register("stablehlo.dynamic_iota", dynamic=True)
def _dynamic_iota(interp, op, shape):
    """``Range(0, output_shape[iota_dimension])`` along that dimension, broadcast to
    ``output_shape`` with ``Expand``."""
    g = interp.graph
    t = op.result_type
    dim = op.attr("iota_dimension")
    shape64 = _int64(interp, shape, op.operand_type(0))
    n = g.op("Gather", [shape64, g.const(np.int64(dim))], axis=0)
    values = g.op("Range", [g.const(np.int64(0)), n, g.const(np.int64(1))])
    if t.dtype != "int64":
        values = g.op("Cast", [values], to=onnx_dtype(t.dtype))
    values = _expand_rank(interp, values, [dim], t.rank)
    return g.op("Expand", [values, shape64])


@register("stablehlo.dynamic_pad", dynamic=True)
def _dynamic_pad(interp, op, x, value, low, high, interior):
    """``Pad`` (constant mode) with ``Concat(low, high)``; negative amounts crop, as in both
    specs. Interior padding must be a constant 0."""
    folded = interp.static_operand(op, 4)
    if folded is None or np.any(folded != 0):
        raise NotImplementedError("dynamic_pad with interior padding (or padding not known at conversion)")
    g = interp.graph
    pads = g.op(
        "Concat",
        [_int64(interp, low, op.operand_type(2)), _int64(interp, high, op.operand_type(3))],
        axis=0,
    )
    return g.op("Pad", [x, pads, value], mode="constant")


@register("stablehlo.real_dynamic_slice", dynamic=True)
def _real_dynamic_slice(interp, op, x, start, limit, strides):
    """``Slice`` over every axis with the three index tensors (in bounds by the spec's
    constraints, so ONNX's clamping never applies)."""
    g = interp.graph
    idx = [_int64(interp, v, op.operand_type(i + 1)) for i, v in enumerate((start, limit, strides))]
    return g.op("Slice", [x, idx[0], idx[1], g.ints(range(op.operand_type(0).rank)), idx[2]])


@register("stablehlo.dynamic_gather", dynamic=True)
def _dynamic_gather(interp, op, x, indices, slice_sizes):
    """The one-slice form (``start_indices`` is a single index vector, no batch dimensions)
    that ``jax.export`` writes for slices of a dynamic dimension: a ``Slice`` starting at
    the clamped start indices (spec: ``clamp(0, start, operand_dim - slice_size)``), then
    ``Squeeze`` of the collapsed dimensions."""
    d = op.attr("dimension_numbers")
    rank, itype, result = op.operand_type(0).rank, op.operand_type(1), op.result_type
    take = _take_form(op, d)
    if take is not None:
        return _dynamic_take(interp, op, x, indices, slice_sizes, take)
    if d.get("operand_batching_dims") or list(d["offset_dims"]) != list(range(result.rank)):
        raise NotImplementedError("dynamic_gather with batch dimensions (only the one-slice form is lowered)")
    if itype.rank > 1 or (itype.rank == 1 and d["index_vector_dim"] != 0):
        raise NotImplementedError("dynamic_gather with several index vectors")
    g = interp.graph
    idx = g.op("Reshape", [_int64(interp, indices, itype), g.ints([-1])])
    index_map = list(d["start_index_map"])
    parts = [
        g.op("Slice", [idx, g.ints([index_map.index(a)]), g.ints([index_map.index(a) + 1])])
        if a in index_map
        else g.ints([0])
        for a in range(rank)
    ]
    start = g.op("Concat", parts, axis=0)
    sizes = _int64(interp, slice_sizes, op.operand_type(2))
    hi = g.op("Sub", [g.op("Shape", [x]), sizes])
    start = g.op("Max", [g.op("Min", [start, hi]), g.ints([0])])
    y = g.op("Slice", [x, start, g.op("Add", [start, sizes]), g.ints(range(rank))])
    collapsed = list(d["collapsed_slice_dims"])
    return g.op("Squeeze", [y, g.ints(collapsed)]) if collapsed else y


def _take_form(op, d) -> int | None:
    """The axis when the gather is ``jnp.take(x, indices, axis)`` (``Gather`` in ONNX): one
    indexed dimension, collapsed, its index vector of size 1 last in ``indices``; the other
    operand dimensions kept in order; the indices' batch dimensions where the axis was.
    Else None."""
    itype, result = op.operand_type(1), op.result_type
    rank = op.operand_type(0).rank
    index_map = list(d["start_index_map"])
    if d.get("operand_batching_dims") or len(index_map) != 1 or list(d["collapsed_slice_dims"]) != index_map:
        return None
    ivd = d["index_vector_dim"]
    if ivd == itype.rank - 1:
        if itype.shape[-1] != 1:
            return None
        batch_rank = itype.rank - 1
    elif ivd == itype.rank:
        batch_rank = itype.rank
    else:
        return None
    axis = index_map[0]
    offsets = list(d["offset_dims"])
    if result.rank != rank - 1 + batch_rank:
        return None
    if offsets != [p for p in range(result.rank) if not axis <= p < axis + batch_rank]:
        return None
    return axis


def _dynamic_take(interp, op, x, indices, slice_sizes, axis: int):
    """``Gather(x, clamp(indices, 0, dim - 1), axis)`` (the spec clamps each start index
    into the operand), then ``Slice`` of the other dimensions to ``slice_sizes`` (they start
    at 0)."""
    g = interp.graph
    itype = op.operand_type(1)
    idx = _int64(interp, indices, itype)
    if op.attr("dimension_numbers")["index_vector_dim"] == itype.rank - 1:
        idx = g.op("Squeeze", [idx, g.ints([itype.rank - 1])])
    hi = g.op("Sub", [g.op("Squeeze", [g.dim(x, axis), g.ints([0])]), g.const(np.int64(1))])
    idx = g.op("Max", [g.op("Min", [idx, hi]), g.const(np.int64(0))])
    y = g.op("Gather", [x, idx], axis=axis)
    rank = op.operand_type(0).rank
    others = [a for a in range(rank) if a != axis]
    if not others:
        return y
    batch_rank = op.result_type.rank - (rank - 1)
    sizes = _int64(interp, slice_sizes, op.operand_type(2))
    ends = g.op("Gather", [sizes, g.ints(others)], axis=0)
    positions = [a if a < axis else a + batch_rank - 1 for a in others]
    return g.op("Slice", [y, g.ints([0] * len(others)), ends, g.ints(positions)])
