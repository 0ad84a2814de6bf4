"""Indexing ops: gather, scatter, dynamic_slice, dynamic_update_slice (StableHLO spec).

StableHLO ``gather``/``dynamic_slice`` clamp out-of-bounds start indices, so the rules use
``GatherScatterMode.CLIP``, which keeps that meaning explicit whatever JAX's default is.
``scatter`` skips out-of-bounds updates (``FILL_OR_DROP``).
"""

from __future__ import annotations

from jax import lax

from converter.regions import classify_combiner

from ..registry import register


@register("stablehlo.dynamic_slice")
def _dynamic_slice(interp, op, x, *starts):
    return lax.dynamic_slice(x, starts, op.attr("slice_sizes"))


@register("stablehlo.dynamic_update_slice")
def _dynamic_update_slice(interp, op, x, update, *starts):
    return lax.dynamic_update_slice(x, update, starts)


@register("stablehlo.gather")
def _gather(interp, op, operand, indices):
    d = op.attr("dimension_numbers")
    dn = lax.GatherDimensionNumbers(
        offset_dims=tuple(d["offset_dims"]),
        collapsed_slice_dims=tuple(d["collapsed_slice_dims"]),
        start_index_map=tuple(d["start_index_map"]),
        operand_batching_dims=tuple(d.get("operand_batching_dims", ())),
        start_indices_batching_dims=tuple(d.get("start_indices_batching_dims", ())),
    )
    indices = _move_index_vector_dim(indices, d["index_vector_dim"])
    return lax.gather(
        operand,
        indices,
        dn,
        tuple(op.attr("slice_sizes")),
        indices_are_sorted=bool(op.attr("indices_are_sorted", False)),
        mode=lax.GatherScatterMode.CLIP,
    )


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
    return _SCATTERS[kind](
        operands[0],
        indices,
        updates[0],
        dn,
        indices_are_sorted=bool(op.attr("indices_are_sorted", False)),
        unique_indices=bool(op.attr("unique_indices", False)),
        mode=lax.GatherScatterMode.FILL_OR_DROP,
    )
