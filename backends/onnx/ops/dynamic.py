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

from converter import mlir

from ..graph import onnx_dtype
from ..registry import register
from .indexing import gather
from .shape import interior_pad

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
    specs. Interior padding must be constant: nonzero amounts are inserted first, as for
    ``pad`` (:func:`converter.backends.onnx.ops.shape.interior_pad`, static padded dimensions)."""
    folded = interp.static_operand(op, 4)
    if folded is None:
        raise NotImplementedError("dynamic_pad with interior padding not known at conversion")
    g = interp.graph
    if np.any(folded != 0):
        shape = op.operand_type(0).shape
        x = interior_pad(g, x, value, shape, [int(v) for v in folded], op.result_type.dtype)
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
    ``Squeeze`` of the collapsed dimensions. With static shapes and constant slice sizes,
    any form: the ``gather`` rule with those sizes (the spec: functionally identical)."""
    static = interp.static_operand(op, 2)
    shapes = [op.operand_type(0).shape, op.operand_type(1).shape, op.result_type.shape]
    if static is not None and all(d is not None for shape in shapes for d in shape):
        sizes = [int(v) for v in static.reshape(-1)]
        return gather(interp, mlir.OpWithAttrs(op, {"slice_sizes": sizes}), x, indices)
    d = op.attr("dimension_numbers")
    rank, itype, result = op.operand_type(0).rank, op.operand_type(1), op.result_type
    if not d.get("operand_batching_dims") and list(d["offset_dims"]) != list(range(result.rank)):
        return _take_slices(interp, op, x, indices, slice_sizes)
    if d.get("operand_batching_dims"):
        raise NotImplementedError("dynamic_gather with batching dimensions")
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


def _take_slices(interp, op, x, indices, slice_sizes):
    """``dynamic_gather`` of whole rows along one axis (what ``jax.export`` writes for
    ``x[..., idx, ...]``, an index_select or a nearest-neighbour upsampling on an operand of
    dynamic shape): one index column mapped to a collapsed dimension ``a``, any batch shape of
    the indices. Every other dimension starts at 0 (the spec: only ``start_index_map``
    dimensions are indexed), so ``Slice`` to the slice sizes first, then ``Gather`` along ``a``
    with the indices clamped to ``[0, dim_a - 1]``, then ``Transpose`` the batch dimensions to
    where ``offset_dims`` leaves them."""
    d = op.attr("dimension_numbers")
    rank, itype, result = op.operand_type(0).rank, op.operand_type(1), op.result_type
    index_map, collapsed = list(d["start_index_map"]), list(d["collapsed_slice_dims"])
    ivd = d["index_vector_dim"]
    if (
        len(index_map) != 1
        or collapsed != index_map
        or (ivd < itype.rank and (ivd != itype.rank - 1 or itype.shape[-1] != 1))
    ):
        raise NotImplementedError("dynamic_gather with several index columns and batch dimensions")
    g = interp.graph
    (a,) = index_map
    sizes = _int64(interp, slice_sizes, op.operand_type(2))
    kept = [i for i in range(rank) if i != a]
    y = x
    if kept:  # the other dimensions to their slice sizes (dimension a stays whole)
        ends = g.op("Gather", [sizes, g.ints(kept)], axis=0)
        y = g.op("Slice", [x, g.ints([0] * len(kept)), ends, g.ints(kept)])
    idx = _int64(interp, indices, itype)
    if ivd < itype.rank:
        idx = g.op("Squeeze", [idx, g.ints([ivd])])
    hi = g.op("Sub", [g.dim(x, a), g.ints([1])])
    idx = g.op("Max", [g.op("Min", [idx, hi]), g.ints([0])])
    out = g.op("Gather", [y, idx], axis=a)  # y dims < a, batch dims, y dims > a
    nb = itype.rank - (1 if ivd < itype.rank else 0)
    offset_dims = list(d["offset_dims"])
    gathered_pos = {i: (i if i < a else i - 1 + nb) for i in kept}  # operand dim -> out axis
    perm, b = [], 0
    for p in range(result.rank):
        if p in offset_dims:
            perm.append(gathered_pos[kept[offset_dims.index(p)]])
        else:
            perm.append(a + b)
            b += 1
    return g.op("Transpose", [out], perm=perm) if perm != sorted(perm) else out
