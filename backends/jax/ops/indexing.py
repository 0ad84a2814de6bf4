"""Indexing ops: gather, scatter, dynamic_slice, dynamic_update_slice (StableHLO spec).

StableHLO ``gather``/``dynamic_slice`` clamp out-of-bounds start indices, so the rules use
``GatherScatterMode.CLIP``, which keeps that meaning explicit whatever JAX's default is.
``scatter`` skips out-of-bounds update elements (``FILL_OR_DROP``, with padding where a window
could be partly in bounds: :func:`_pad_for_partial_windows`).

64-bit gather indices are clamped here and narrowed to ``int32`` (exact: the clamped values
fit), since ``jax.grad`` transposes a gather into a scatter outside the module's scoped
``jax.enable_x64``, and JAX's clamp of 64-bit scatter indices there fails with x64 off.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from converter.regions import classify_combiner

from ..registry import register


def _clamped_starts(starts):
    """Spec: ``clamp(0, start, dim - size)`` per dimension. ``lax.dynamic_slice`` would first
    add ``dim`` to a negative start (NumPy style: -1 is the last row), which the spec does
    not: negative starts become 0 here, and lax clamps the upper end as the spec does (a
    symbolic ``dim`` of a shape-polymorphic module included)."""
    return [lax.max(jnp.asarray(s), jnp.zeros((), jnp.asarray(s).dtype)) for s in starts]


@register("stablehlo.dynamic_slice")
def _dynamic_slice(interp, op, x, *starts):
    sizes = op.attr("slice_sizes")
    return lax.dynamic_slice(x, _clamped_starts(starts), sizes)


@register("stablehlo.dynamic_update_slice")
def _dynamic_update_slice(interp, op, x, update, *starts):
    return lax.dynamic_update_slice(x, update, _clamped_starts(starts))


@register("stablehlo.gather")
def gather(interp, op, operand, indices):
    d = op.attr("dimension_numbers")
    dn = lax.GatherDimensionNumbers(
        offset_dims=tuple(d["offset_dims"]),
        collapsed_slice_dims=tuple(d["collapsed_slice_dims"]),
        start_index_map=tuple(d["start_index_map"]),
        operand_batching_dims=tuple(d.get("operand_batching_dims", ())),
        start_indices_batching_dims=tuple(d.get("start_indices_batching_dims", ())),
    )
    indices = _move_index_vector_dim(indices, d["index_vector_dim"])
    slice_sizes = tuple(op.attr("slice_sizes"))
    indices = _narrow_indices(indices, operand.shape, slice_sizes, dn.start_index_map)
    return lax.gather(
        operand,
        indices,
        dn,
        slice_sizes,
        indices_are_sorted=bool(op.attr("indices_are_sorted", False)),
        mode=lax.GatherScatterMode.CLIP,
    )


def _narrow_indices(indices, shape, slice_sizes, start_index_map):
    """64-bit gather start indices (index vector last) clamped to ``[0, shape[d] -
    slice_sizes[d]]`` per mapped operand dimension ``d`` (StableHLO ``gather``'s clamping) and
    converted to ``int32``, when those bounds are static and fit; other indices unchanged.

    Same gather, but its transpose (a scatter ``jax.grad`` builds outside the module's scoped
    ``jax.enable_x64``) then sees ``int32`` indices, which JAX clamps without x64.
    """
    if np.dtype(indices.dtype).itemsize != 8 or not np.issubdtype(indices.dtype, np.integer):
        return indices
    try:
        bounds = [int(shape[d]) - int(slice_sizes[d]) for d in start_index_map]
    except TypeError:  # a symbolic dimension (jax.export): leave the indices to lax
        return indices
    if not bounds or max(bounds) > np.iinfo(np.int32).max:
        return indices
    upper = np.asarray(bounds, indices.dtype)
    clamped = lax.clamp(
        np.zeros((), indices.dtype), indices, lax.broadcast_in_dim(upper, indices.shape, (indices.ndim - 1,))
    )
    return lax.convert_element_type(clamped, np.int32)


def _move_index_vector_dim(indices, index_vector_dim):
    """lax.gather/scatter take the index vector in the last dimension; StableHLO allows any
    (and ``index_vector_dim == rank`` meaning an implicit trailing 1)."""
    rank = indices.ndim
    if index_vector_dim == rank:
        return lax.expand_dims(indices, (rank,))
    if index_vector_dim != rank - 1:
        perm = [i for i in range(rank) if i != index_vector_dim] + [index_vector_dim]
        return lax.transpose(indices, perm)
    return indices


_SCATTERS = {
    "add": lax.scatter_add,
    "mul": lax.scatter_mul,
    "min": lax.scatter_min,
    "max": lax.scatter_max,
    "replace": lax.scatter,
}


@register("stablehlo.scatter")
def _scatter(interp, op, *args):
    n = (len(args) - 1) // 2
    operands, indices, updates = args[:n], args[n], args[n + 1 :]
    kind = classify_combiner(op.regions[0])
    if n != 1 or kind not in _SCATTERS:
        raise NotImplementedError(f"scatter with {n} operands and a {kind or 'general'} body")
    d = op.attr("scatter_dimension_numbers")
    dn = lax.ScatterDimensionNumbers(
        update_window_dims=tuple(d["update_window_dims"]),
        inserted_window_dims=tuple(d["inserted_window_dims"]),
        scatter_dims_to_operand_dims=tuple(d["scattered_dims_to_operand_dims"]),
        operand_batching_dims=tuple(d.get("input_batching_dims", ())),
        scatter_indices_batching_dims=tuple(d.get("scatter_indices_batching_dims", ())),
    )
    indices = _move_index_vector_dim(indices, d["index_vector_dim"])
    operand, indices, crop = _pad_for_partial_windows(operands[0], indices, updates[0].shape, dn)
    out = _SCATTERS[kind](
        operand,
        indices,
        updates[0],
        dn,
        indices_are_sorted=bool(op.attr("indices_are_sorted", False)),
        unique_indices=bool(op.attr("unique_indices", False)),
        mode=lax.GatherScatterMode.FILL_OR_DROP,
    )
    return out if crop is None else out[crop]


def _pad_for_partial_windows(operand, indices, update_shape, dn):
    """Spec ``scatter`` skips each update *element* whose result index is out of bounds, so
    the in-bounds part of a window that starts before or runs past the operand is applied;
    XLA (``FILL_OR_DROP``) drops the whole window. Where a window is wider than 1 along an
    indexed dimension, the operand is padded by the window size on both sides of it, the
    start indices clamped to ``[-size, dim]`` (windows wholly outside stay wholly outside)
    and shifted by the padding, and the result cropped back: every window then fits, and
    what lands in the padding is dropped. Returns (operand, indices, crop or None)."""
    operand_window = [
        i
        for i in range(operand.ndim)
        if i not in dn.inserted_window_dims and i not in dn.operand_batching_dims
    ]
    sizes = []
    for dim in dn.scatter_dims_to_operand_dims:
        k = operand_window.index(dim) if dim in operand_window else None
        sizes.append(1 if k is None else int(update_shape[dn.update_window_dims[k]]))
    if all(size == 1 for size in sizes):
        return operand, indices, None
    if not all(isinstance(d, (int, np.integer)) for d in operand.shape):
        # a symbolic dimension (jax.export shape polymorphism): XLA's whole-window dropping
        return operand, indices, None
    pads = [(0, 0, 0)] * operand.ndim
    crop = [slice(None)] * operand.ndim
    for dim, size in zip(dn.scatter_dims_to_operand_dims, sizes, strict=True):
        pads[dim] = (size, size, 0)
        crop[dim] = slice(size, size + operand.shape[dim])
    wide = np.int64 if max(operand.shape) + 2 * max(sizes) > np.iinfo(np.int32).max else np.int32
    idx = indices.astype(jnp.promote_types(indices.dtype, wide)) if indices.dtype != wide else indices
    lo = np.array([-size for size in sizes], idx.dtype)
    hi = np.array([operand.shape[dim] for dim in dn.scatter_dims_to_operand_dims], idx.dtype)
    idx = jnp.clip(idx, lo, hi) + np.array(sizes, idx.dtype)
    padded = lax.pad(operand, np.zeros((), operand.dtype), pads)
    return padded, idx, tuple(crop)
