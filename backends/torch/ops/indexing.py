"""Indexing ops: gather, scatter, dynamic_slice, dynamic_update_slice (StableHLO spec).

Every rule builds explicit int64 index tensors and uses advanced indexing (``aten.index``,
``aten.index_put``, ``scatter_reduce``), so the graph is data-independent, differentiable and
exportable. Semantics: ``gather``/``dynamic_slice``/``dynamic_update_slice`` clamp start
indices so the slice stays in bounds; ``scatter`` skips each update element whose result index
is out of bounds and applies the rest of its window (the spec; XLA drops a partly out-of-bounds
window whole).
"""

from __future__ import annotations

import torch

from converter.regions import classify_combiner

from ..registry import register
from ..symbolic import shape_list


def _place(t: torch.Tensor, rank: int, dims: list[int]) -> torch.Tensor:
    """Reshape ``t`` (one axis per entry of ``dims``) to rank ``rank``, its axes at ``dims``
    and size 1 elsewhere."""
    view = [1] * rank
    for axis, d in enumerate(dims):
        view[d] = t.shape[axis]
    return t.reshape(view)


def _index_vector_last(indices: torch.Tensor, index_vector_dim: int) -> tuple[torch.Tensor, callable]:
    """Move the index vector dimension last; returns the tensor and a map from original
    (non-vector) index dims to their new positions."""
    rank = indices.dim()
    if index_vector_dim == rank:
        return indices.unsqueeze(-1), (lambda d: d)
    perm = [i for i in range(rank) if i != index_vector_dim] + [index_vector_dim]
    return indices.permute(perm), (lambda d: d if d < index_vector_dim else d - 1)


@register("stablehlo.dynamic_slice")
def _dynamic_slice(interp, op, x, *starts):
    sizes = op.attr("slice_sizes")
    rank = x.dim()
    index = []
    for d, (start, size) in enumerate(zip(starts, sizes, strict=False)):
        s = start.to(torch.int64).clamp(0, x.shape[d] - size)
        index.append(_place(s + torch.arange(size), rank, [d]))
    return x[tuple(index)]


@register("stablehlo.dynamic_update_slice")
def _dynamic_update_slice(interp, op, x, update, *starts):
    rank = x.dim()
    if rank == 0:  # the result is the update (index_put needs at least one index)
        return update.to(x.dtype, copy=True)
    index = []
    for d, start in enumerate(starts):
        size = update.shape[d]
        s = start.to(torch.int64).clamp(0, x.shape[d] - size)
        index.append(_place(s + torch.arange(size), rank, [d]))
    return x.index_put(tuple(index), update.to(x.dtype))


@register("stablehlo.gather")
def _gather(interp, op, operand, indices):
    return gather(op, operand, indices, list(op.attr("slice_sizes")))


@register("stablehlo.dynamic_gather")
def _dynamic_gather(interp, op, operand, indices, slice_sizes):
    """``gather`` with the slice sizes as an operand (what ``jax.export`` writes for
    ``x[:, -1]`` of a symbolic ``x``); it is left only when the module runs on symbolic sizes
    (``torch.export``/``torch.compile`` tracing), where the sizes are ints and ``SymInt``s;
    constant sizes are read at conversion."""
    static = interp.static_operand(op, 2)
    sizes = [int(v) for v in static.reshape(-1)] if static is not None else shape_list(slice_sizes)
    return gather(op, operand, indices, sizes)


def gather(op, operand, indices, sizes: list) -> torch.Tensor:
    """StableHLO spec: gather, with ``sizes`` the slice sizes (ints or ``SymInt``s): advanced
    indexing by start positions (clamped in bounds) plus the window offsets."""
    d = op.attr("dimension_numbers")
    out_shape = list(op.result_type.shape)
    out_rank = len(out_shape)
    offset_dims = list(d["offset_dims"])
    collapsed = set(d["collapsed_slice_dims"])
    start_map = list(d["start_index_map"])
    op_batch = list(d.get("operand_batching_dims") or [])
    idx_batch = list(d.get("start_indices_batching_dims") or [])
    idx, newpos = _index_vector_last(indices.to(torch.int64), d["index_vector_dim"])
    batch_out_dims = [i for i in range(out_rank) if i not in offset_dims]
    window_dims = [i for i in range(operand.dim()) if i not in collapsed and i not in op_batch]
    index = []
    for dim in range(operand.dim()):
        pos = torch.zeros((), dtype=torch.int64)
        if dim in start_map:
            start = idx[..., start_map.index(dim)].clamp(0, operand.shape[dim] - sizes[dim])
            pos = _place(start, out_rank, batch_out_dims)
        elif dim in op_batch:
            bdim = newpos(idx_batch[op_batch.index(dim)])
            ar = torch.arange(idx.shape[bdim])
            pos = _place(ar, out_rank, [batch_out_dims[bdim]])
        if dim in window_dims:
            out_d = offset_dims[window_dims.index(dim)]
            pos = pos + _place(torch.arange(sizes[dim]), out_rank, [out_d])
        index.append(pos)
    if out_rank == 0:  # a 0-d integer tensor index would be read as a Python int
        return operand[tuple(i.reshape(1) for i in index)].reshape(())
    out = operand[tuple(index)]
    # a dimension no index covers is broadcast; a dynamic one (None: a shape-polymorphic
    # module traced with symbolic sizes) always comes from the indices, kept as is (-1)
    if any(
        s is not None and not (isinstance(o, int) and o == s)
        for o, s in zip(out.shape, out_shape, strict=True)
    ):
        out = out.expand([-1 if s is None else s for s in out_shape])
    return out


def scatter_positions(op, operand_shape, indices, update_shape):
    """Linear positions into the flattened operand for every update element, and a mask of
    the elements whose result index is in bounds (spec ``scatter``: an element outside is
    skipped, the rest of its window applied)."""
    d = op.attr("scatter_dimension_numbers")
    window_dims = list(d["update_window_dims"])
    inserted = set(d["inserted_window_dims"])
    to_operand = list(d.get("scattered_dims_to_operand_dims", d.get("scatter_dims_to_operand_dims", [])))
    in_batch = list(d.get("input_batching_dims") or [])
    idx_batch = list(d.get("scatter_indices_batching_dims") or [])
    idx, newpos = _index_vector_last(indices.to(torch.int64), d["index_vector_dim"])
    urank = len(update_shape)
    scatter_dims = [i for i in range(urank) if i not in window_dims]
    operand_window = [i for i in range(len(operand_shape)) if i not in inserted and i not in in_batch]
    linear = torch.zeros((), dtype=torch.int64)
    valid = torch.ones((), dtype=torch.bool)
    stride = 1
    for dim in reversed(range(len(operand_shape))):
        pos = torch.zeros((), dtype=torch.int64)
        size = 1
        if dim in operand_window:
            ud = window_dims[operand_window.index(dim)]
            size = update_shape[ud]
            pos = _place(torch.arange(size), urank, [ud])
        if dim in to_operand:
            start = _place(idx[..., to_operand.index(dim)], urank, scatter_dims)
            pos = pos + start  # spec: each update element lands or is skipped on its own
            valid = valid & (pos >= 0) & (pos < operand_shape[dim])
        elif dim in in_batch:
            bdim = newpos(idx_batch[in_batch.index(dim)])
            pos = pos + _place(torch.arange(idx.shape[bdim]), urank, [scatter_dims[bdim]])
        linear = linear + pos * stride
        stride *= operand_shape[dim]
    linear = linear.expand(update_shape)
    valid = valid.expand(update_shape)
    return linear, valid


_REDUCE = {"mul": "prod", "max": "amax", "min": "amin"}
_BOOL_REDUCE = {"add": "amax", "or": "amax", "max": "amax", "mul": "amin", "and": "amin", "min": "amin"}


@register("stablehlo.scatter")
def _scatter(interp, op, *args):
    n = (len(args) - 1) // 2
    operands, indices, updates = args[:n], args[n], args[n + 1 :]
    kind = classify_combiner(op.regions[0]) if n == 1 else None
    shape = list(operands[0].shape)
    linear, valid = scatter_positions(op, shape, indices, list(updates[0].shape))
    numel = operands[0].numel()
    trash = torch.full_like(linear, numel)
    pos = torch.where(valid, linear, trash).reshape(-1)
    outs = []
    for x, u in zip(operands, updates, strict=False):
        flat = torch.cat([x.reshape(-1), x.new_zeros(1)])
        u = u.reshape(-1).to(x.dtype)
        if kind == "replace" or (kind is None and n > 1 and _is_replace_all(op)):
            flat = flat.index_put((pos,), u)
        elif x.dtype == torch.bool and kind in _BOOL_REDUCE:
            # i1 add/or/max are or, multiply/and/min are and (spec): a max or min over 0/1
            # combines every update of a repeated position (index_put of ``u | flat[pos]``
            # kept only the last write's, an update's true was lost)
            bits = flat.to(torch.uint8).scatter_reduce(0, pos, u.to(torch.uint8), _BOOL_REDUCE[kind])
            flat = bits.bool()
        elif kind == "add" and x.dtype != torch.bool:
            flat = flat.index_put((pos,), u, accumulate=True)
        elif kind in _REDUCE and x.dtype != torch.bool:
            flat = flat.scatter_reduce(0, pos, u, reduce=_REDUCE[kind], include_self=True)
        elif n == 1 and op.attr("unique_indices"):
            # any body: with unique indices each element is combined at most once
            body = interp.region_fn(op.regions[0])
            flat = flat.index_put((pos,), body(flat[pos], u)[0].to(x.dtype))
        else:
            raise NotImplementedError(
                f"scatter with a {kind or 'general'} body and possibly repeated indices"
            )
        outs.append(flat[:numel].reshape(shape))
    return outs


def _is_replace_all(op) -> bool:
    """A variadic scatter body that returns its update arguments unchanged."""
    block = op.regions[0].blocks[0]
    ops = list(block.operations)
    args = list(block.arguments)
    n = len(args) // 2
    return len(ops) == 1 and list(ops[0].operands) == args[n:]
