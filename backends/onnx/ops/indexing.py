"""``gather`` → ``GatherND`` and ``scatter`` → ``ScatterND`` (StableHLO spec: gather,
scatter), for the point-indexing forms frameworks emit: every indexed operand dimension has
slice size 1 and every other dimension is taken whole. Gather indices are clamped as the
spec requires; scatter updates at out-of-bounds indices are skipped as the spec requires
(sent to a spill slot that is sliced off: onnxruntime rejects them, ONNX wraps negative
ones), unless the indices are constants known to be in bounds.
"""

from __future__ import annotations

import numpy as np

from converter.regions import classify_combiner

from ..registry import register

_INT64, _UINT8, _BOOL, _FLOAT = 7, 2, 9, 1


def _index_matrix(interp, indices, index_vector_dim, rank, dtype="int32"):
    """Indices (of element type ``dtype``) as int64 ``[batch..., K]``."""
    g = interp.graph
    if index_vector_dim == rank:
        indices = g.op("Unsqueeze", [indices, g.ints([rank])])
    elif index_vector_dim != rank - 1:
        perm = [i for i in range(rank) if i != index_vector_dim] + [index_vector_dim]
        indices = g.op("Transpose", [indices], perm=perm)
    return indices if dtype == "int64" else g.op("Cast", [indices], to=_INT64)


def _point_indices(interp, op, indices, d, index_map, sizes, batching_keys, what):
    """The int64 index matrix ``[batch..., K]`` of a gather/scatter and its operand-dim map,
    with batching dims rewritten as indexed dims; checks the point-indexing form."""
    itype = op.operand_type(1)
    idx = _index_matrix(interp, indices, d["index_vector_dim"], itype.rank, itype.dtype)
    operand_dims, indices_dims = (d.get(k, []) for k in batching_keys)
    idx, index_map = _add_batching_columns(
        interp, idx, index_map, itype, d["index_vector_dim"], operand_dims, indices_dims
    )
    _check_point_indexing(
        op.operand_type(0).shape, set(index_map), sizes, what, whole_dynamic=what == "scatter"
    )
    return idx, index_map


def _add_batching_columns(interp, idx, index_map, itype, index_vector_dim, operand_dims, indices_dims):
    """Rewrite batching dimensions as ordinary indexed dimensions: for each pair
    (operand dim, indices dim), append an index column holding the position along that
    indices dimension (an iota), so the operand dim becomes a point-indexed dim."""
    if not operand_dims:
        return idx, index_map
    g = interp.graph
    batch_shape = [n for i, n in enumerate(itype.shape) if i != index_vector_dim]
    columns = [idx]
    for dim in indices_dims:
        pos = dim - (1 if index_vector_dim < dim else 0)
        # computed, not stored; dynamic sizes read from the index matrix at run time
        columns.append(g.iota(g.sizes(idx, [*batch_shape, 1]), pos, "int64"))
    return g.op("Concat", columns, axis=-1), list(index_map) + list(operand_dims)


def _check_point_indexing(shape, indexed, sizes, what, whole_dynamic=False):
    """Every indexed dimension has slice size 1, every other is taken whole. With
    ``whole_dynamic`` (scatter) a dynamic dimension whose window is dynamic too is taken
    whole: ``ScatterND`` checks the update's run-time size against the operand's, so a
    partial window raises in onnxruntime (never written as a whole one); and an indexed
    dimension may have a static window of several elements (``slice_scatter``: expanded
    into one index row per element by :func:`_expand_windows`)."""
    for dim, size in enumerate(sizes):
        if dim in indexed and whole_dynamic and isinstance(size, int) and size >= 1:
            continue
        if dim in indexed and size != 1:
            raise NotImplementedError(f"{what}: indexed dimension {dim} has slice size {size}")
        if dim not in indexed and shape[dim] is None and size is None and whole_dynamic:
            continue
        if dim not in indexed and shape[dim] is None:
            raise NotImplementedError(
                f"{what}: dimension {dim} is dynamic and not indexed (slice size {size}); "
                "specialize the module (Module.specialize) first"
            )
        if dim not in indexed and size != shape[dim]:
            raise NotImplementedError(f"{what}: dimension {dim} is sliced partially ({size} of {shape[dim]})")


@register("stablehlo.gather", dynamic=True)
def gather(interp, op, operand, indices):
    """Point indexing as ``GatherND``; dynamic dimensions may be indexed ones (clamped to
    their run-time size) or batch dimensions of the indices."""
    g = interp.graph
    d = op.attr("dimension_numbers")
    shape = op.operand_type(0).shape
    index_map = list(d["start_index_map"])
    sizes = list(op.attr("slice_sizes"))
    idx, index_map = _point_indices(
        interp,
        op,
        indices,
        d,
        index_map,
        sizes,
        ("operand_batching_dims", "start_indices_batching_dims"),
        "gather",
    )
    if _is_row_take(op, d, index_map, sizes):  # rows of dimension 0 taken whole: ONNX Gather
        idx = g.op("Reshape", [idx, g.ints(op.operand_type(1).shape[:-1])])
        hi = g.const(np.int64(shape[0] - 1))
        idx = g.op("Max", [g.op("Min", [idx, hi]), g.const(np.int64(0))])
        return g.op("Gather", [operand, idx], axis=0)
    if any(shape[i] is None for i in index_map):
        sizes_now = g.sizes(operand, shape)
        hi = g.op("Sub", [g.shape_vector([sizes_now[i] for i in index_map]), g.ints([1])])
    else:
        hi = g.const(np.array([shape[i] - 1 for i in index_map], np.int64))
    idx = g.op("Max", [g.op("Min", [idx, hi]), g.const(np.int64(0))])
    rest = [i for i in range(len(shape)) if i not in index_map]
    data = g.op("Transpose", [operand], perm=index_map + rest)
    out = g.op("GatherND", [data, idx])  # [batch..., rest...]
    result = op.result_type
    offset_dims = list(d["offset_dims"])
    batch_rank = result.rank - len(offset_dims)
    collapsed = set(d["collapsed_slice_dims"]) | set(d.get("operand_batching_dims", []))
    kept = [i for i in range(len(shape)) if i not in collapsed]
    batch_shape = [result.shape[p] for p in range(result.rank) if p not in offset_dims]
    batch_shape = [n if n is not None else g.dim(out, k) for k, n in enumerate(batch_shape)]
    out = g.op("Reshape", [out, g.shape_vector(batch_shape + [sizes[i] for i in kept])], allowzero=1)
    perm, b = [], 0
    for p in range(result.rank):
        if p in offset_dims:
            perm.append(batch_rank + offset_dims.index(p))
        else:
            perm.append(b)
            b += 1
    return g.op("Transpose", [out], perm=perm) if perm != sorted(perm) else out


def _is_row_take(op, d, index_map, sizes) -> bool:
    """True when the gather is ``Gather(operand, indices, axis=0)`` with the (clamped)
    indices: one index column (``index_vector_dim`` last, of size 1) into dimension 0, which
    is collapsed, the others taken whole and kept in order after the batch dimensions,
    static shapes, no batching dimensions."""
    shape, itype, result = op.operand_type(0).shape, op.operand_type(1), op.result_type
    if None in shape or None in itype.shape or None in result.shape or d.get("operand_batching_dims"):
        return False
    if d["index_vector_dim"] != itype.rank - 1 or itype.shape[-1] != 1:
        return False
    if list(index_map) != [0] or list(d["collapsed_slice_dims"]) != [0]:
        return False
    if any(sizes[i] != shape[i] for i in range(1, len(shape))):
        return False
    batch = itype.rank - 1
    if list(d["offset_dims"]) != list(range(batch, batch + len(shape) - 1)):
        return False
    return True


_REDUCTION = {"add": "add", "mul": "mul", "max": "max", "min": "min", "replace": "none"}


def _in_bounds(indices, index_vector_dim, bounds) -> bool:
    """True when static ``indices`` (None: not static) index inside ``bounds`` (one column
    per bound; any other layout, e.g. with batching columns still to add: False)."""
    if indices is None:
        return False
    idx = np.asarray(indices)
    idx = np.moveaxis(idx, index_vector_dim, -1) if index_vector_dim < idx.ndim else idx[..., None]
    if idx.shape[-1] != len(bounds):
        return False
    return bool(np.all((idx >= 0) & (idx < np.asarray(bounds))))


def _spill_slot(interp, op, data, idx, bounds):
    """StableHLO skips scatter updates whose index is out of bounds; onnxruntime rejects them
    and ONNX wraps negative ones. The indexed (leading) dimensions of ``data`` get one more
    slot each, every point row (a window's element, after :func:`_expand_windows`) outside
    the operand is sent to that corner, and the caller slices it off after ``ScatterND``:
    each update element outside is skipped and the rest of its window applied, as the spec
    says (XLA drops a window that does not fit whole)."""
    g = interp.graph
    k = len(bounds)
    rank = op.operand_type(0).rank
    pads = [1 if i < k else 0 for i in range(rank)]
    data = g.op_as("Pad", [data, g.ints([0] * rank + pads)], op.operand_type(0).dtype, mode="constant")
    limit = g.shape_vector(bounds)  # ints, or int64 [1] run-time sizes
    outside = g.op("Or", [g.op("Less", [idx, g.const(np.int64(0))]), g.op("GreaterOrEqual", [idx, limit])])
    any_outside = g.op(
        "Cast", [g.op("ReduceMax", [g.op("Cast", [outside], to=_UINT8), g.ints([-1])])], to=_BOOL
    )
    return data, g.op("Where", [any_outside, limit, idx])


def _expand_windows(interp, idx, windows):
    """Index rows ``[batch..., K]`` of windows (``windows[j]`` elements along column ``j``)
    as point rows ``[batch..., w..., K]``: one new axis per column with a window, holding
    the start plus 0, 1, ... ``w - 1`` in that column."""
    g = interp.graph
    k = len(windows)
    for j, w in enumerate(windows):
        if w == 1:
            continue
        offsets = np.zeros((w, k), np.int64)
        offsets[:, j] = np.arange(w)
        idx = g.op("Add", [g.op("Unsqueeze", [idx, g.ints([-2])]), g.const(offsets)])
    return idx


def _numpy_dtype(name: str):
    from converter import dtypes

    return dtypes.to_numpy(name)


def _propagate_nan(g, data, idx, upd, out):
    """StableHLO's ``maximum``/``minimum`` (and XLA) return NaN when either side is NaN;
    onnxruntime's ScatterND ``max``/``min`` reductions keep the number (``std::max``). The
    positions whose operand or any update is NaN are scattered as a 0/1 mask with ``max``
    and set to NaN."""
    operand_nan = g.op("Cast", [g.op("IsNaN", [data])], to=_FLOAT)
    update_nan = g.op("Cast", [g.op("IsNaN", [upd])], to=_FLOAT)
    mask = g.op("ScatterND", [operand_nan, idx, update_nan], reduction="max")
    nan = g.op("Div", [g.op("Sub", [out, out]), g.op("Sub", [out, out])])  # 0/0 in out's dtype
    return g.op("Where", [g.op("Cast", [mask], to=_BOOL), nan, out])


@register("stablehlo.scatter", dynamic=True)
def _scatter(interp, op, operand, indices, updates, *more):
    """Point scatters as ``ScatterND``. Dynamic dimensions: the indexed dimensions of the
    operand (bounds read with ``Shape``) and the batch dimensions of the indices and updates
    (a histogram of a dynamic number of values, ``x[perm] = v`` on a dynamic ``x``). An
    indexed dimension with a static window of several elements (``slice_scatter``,
    ``dynamic_update_slice`` as a scatter) scatters one point per window element, and the
    elements outside the operand are skipped one by one (StableHLO spec, ``scatter``)."""
    if more:
        raise NotImplementedError("scatter with several operands")
    kind = classify_combiner(op.regions[0])
    if kind not in _REDUCTION:
        raise NotImplementedError(f"scatter with a {kind or 'general'} body")
    g = interp.graph
    d = op.attr("scatter_dimension_numbers")
    shape = op.operand_type(0).shape
    index_map = list(d["scattered_dims_to_operand_dims"])
    window_dims = list(d["update_window_dims"])
    inserted = set(d["inserted_window_dims"]) | set(d.get("input_batching_dims", []))
    kept = [i for i in range(len(shape)) if i not in inserted]
    utype = op.operand_type(2)
    sizes = [1] * len(shape)
    for k, dim in enumerate(kept):
        sizes[dim] = utype.shape[window_dims[k]]
    idx, index_map = _point_indices(
        interp,
        op,
        indices,
        d,
        index_map,
        sizes,
        ("input_batching_dims", "scatter_indices_batching_dims"),
        "scatter",
    )
    rest = [i for i in range(len(shape)) if i not in index_map]
    data = g.op("Transpose", [operand], perm=index_map + rest)
    windows = [sizes[i] for i in index_map]  # 1 but for windowed indexed dimensions
    bounds = [shape[i] for i in index_map]
    starts = [b - w + 1 if b is not None else None for b, w in zip(bounds, windows, strict=True)]
    spill = None in bounds or not _in_bounds(interp.static_operand(op, 1), d["index_vector_dim"], starts)
    if None in bounds:  # run-time sizes of the indexed dimensions
        bounds = [g.dim(operand, i) if shape[i] is None else shape[i] for i in index_map]
    idx = _expand_windows(interp, idx, windows)  # one point row per window element
    if spill:  # per point: the spec skips each update element outside the operand
        data, idx = _spill_slot(interp, op, data, idx, bounds)
    scatter_dims = [i for i in range(utype.rank) if i not in window_dims]
    expanded = [window_dims[kept.index(i)] for i in index_map if sizes[i] != 1]
    perm = scatter_dims + expanded + [a for a in window_dims if a not in expanded]
    # a rank-0 update (``x.at[i].set(v)`` on a vector) has no dims to permute
    upd = g.op("Transpose", [updates], perm=perm) if perm != sorted(perm) else updates
    batch_shape = [utype.shape[i] for i in scatter_dims]
    batch_shape = [n if n is not None else g.dim(upd, k) for k, n in enumerate(batch_shape)]
    batch_shape += [sizes[i] for i in index_map if sizes[i] != 1]
    # a dynamic dimension taken whole keeps the update's own run-time size: ScatterND checks
    # it against the operand's (a partial window raises, never scatters as a whole one)
    rest_sizes = [
        shape[i] if shape[i] is not None else g.dim(upd, perm.index(window_dims[kept.index(i)])) for i in rest
    ]
    upd = g.op("Reshape", [upd, g.shape_vector(batch_shape + rest_sizes)])
    # onnxruntime's ScatterND reductions have no float16 kernel: float32, rounded back once
    # (as bfloat16 computes; an index hit several times adds its updates unrounded)
    wide = utype.dtype == "float16" and kind != "replace"
    if wide:
        data, upd = g.cast(data, "float32"), g.cast(upd, "float32")
    out = g.op("ScatterND", [data, idx, upd], reduction=_REDUCTION[kind])
    if kind in ("max", "min") and np.issubdtype(np.dtype(_numpy_dtype(utype.dtype)), np.floating):
        out = _propagate_nan(g, data, idx, upd, out)
    if wide:
        out = g.cast(out, "float16")
    if spill:  # drop the spill slot again
        k = len(bounds)
        out = g.op("Slice", [out, g.ints([0] * k), g.shape_vector(bounds), g.ints(range(k))])
    inv = [0] * len(shape)
    for pos, dim in enumerate(index_map + rest):
        inv[dim] = pos
    return g.op("Transpose", [out], perm=inv)
