"""Gather and scatter ATen ops: ``embedding``, ``index.Tensor``, ``index_put``,
``index_select``, ``gather``, ``scatter*``, ``masked_scatter`` (``native_functions.yaml``).

torch raises on out-of-range indices; in these rules such indices are clamped (gathers) or
dropped (scatters), so in-range programs, the only ones torch runs, behave the same.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import register
from ._util import dim as _dim

aten = __import__("torch").ops.aten


@register(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` (``(V, D)``) at ``indices`` (any shape): ``indices.shape + (D,)``.

    ``padding_idx`` and ``scale_grad_by_freq`` only change torch's backward pass; StableHLO
    has no way to express that, so gradients for the ``padding_idx`` row are not zeroed."""
    return jnp.take(weight, indices, axis=0, mode="clip")


def _wrap(idx, n):
    """Negative indices count from the end (torch advanced indexing)."""
    idx = jnp.asarray(idx)
    if idx.dtype == np.bool_:
        raise NotImplementedError("boolean-mask indexing has a data-dependent shape")
    return jnp.where(idx < 0, idx + n, idx)


def _index_tuple(x, indices):
    return tuple(slice(None) if i is None else _wrap(i, x.shape[d]) for d, i in enumerate(indices))


@register(aten.index.Tensor)
def index(x, indices):
    """``x[indices]`` with NumPy advanced-indexing semantics (``None`` entries are full
    slices; broadcast index tensors; the result dims go first unless the indexed dims are
    adjacent), which are torch's."""
    return x[_index_tuple(x, indices)]


def _bools_as_int(rule):
    """Run ``rule`` with bool array operands as int32 and turn its result back into bool
    (``!= 0``): XLA has no add/multiply/max/min on ``pred``, and torch's bool
    accumulations (``bool += bool`` in the CPU kernels) are or/and, which the int32 sum,
    product, max and min give after the test."""

    @functools.wraps(rule)
    def wrapped(x, *args, **kwargs):
        if getattr(x, "dtype", None) != np.bool_:
            return rule(x, *args, **kwargs)

        def widen(a):
            return a.astype(np.int32) if getattr(a, "dtype", None) == np.bool_ else a

        out = rule(widen(x), *map(widen, args), **{k: widen(v) for k, v in kwargs.items()})
        return out != 0

    return wrapped


@register(aten.index_put.default, aten._unsafe_index_put.default)
@_bools_as_int
def index_put(x, indices, values, accumulate=False):
    """``x[indices] = values`` (``+=`` when ``accumulate``), returning the new tensor.

    A single boolean mask (``x[mask] = v`` with one value) becomes a ``where``."""
    values = values.astype(x.dtype)
    live = [i for i in indices if i is not None]
    if len(live) == 1 and live[0].dtype == np.bool_ and values.size == 1:
        pos = next(d for d, i in enumerate(indices) if i is not None)
        mask = live[0].reshape((1,) * pos + live[0].shape + (1,) * (x.ndim - pos - live[0].ndim))
        v = values.reshape(())
        return jnp.where(mask, x + v if accumulate else v, x)
    if len(indices) == 1 and live and live[0].dtype == np.bool_:
        return _mask_put(x, live[0], values, accumulate)
    ref = x.at[_index_tuple(x, indices)]
    return ref.add(values, mode="drop") if accumulate else ref.set(values, mode="drop")


def _mask_put(x, mask, values, accumulate):
    """``x[mask] = values`` for a boolean ``mask`` over the leading dims: the ``k``-th True
    position (row-major) takes ``values[k]`` (``values`` may broadcast)."""
    lead = int(np.prod(mask.shape))
    rest = x.shape[mask.ndim :]
    flat_x = x.reshape((lead, *rest))
    flat_m = mask.reshape(-1)
    k = values.shape[0] if values.ndim == len(rest) + 1 else 1
    v = jnp.broadcast_to(values.reshape((-1, *values.shape[-len(rest) :]) if rest else (-1,)), (k, *rest))
    pos = jnp.clip(jnp.cumsum(flat_m.astype(np.int64)) - 1, 0, k - 1)
    picked = jnp.take(v, pos, axis=0)
    sel = flat_m.reshape((lead,) + (1,) * len(rest))
    return jnp.where(sel, flat_x + picked if accumulate else picked, flat_x).reshape(x.shape)


@register(aten.index_select.default)
def index_select(x, dim, index):  # noqa: A002 - ATen names
    """Slices of ``x`` along ``dim`` at the 1-D ``index``."""
    if x.ndim == 0:
        return x
    d = _dim(dim, x.ndim)
    return jnp.take(x, _wrap(index, x.shape[d]).reshape(-1), axis=d, mode="clip")


def _full_index(index, d):
    """Index arrays addressing ``out[..., index[i], ...]`` for every position ``i`` of
    ``index`` (iota in every dim but ``d``)."""
    return tuple(
        index if k == d else lax.broadcasted_iota(np.int64, index.shape, k) for k in range(index.ndim)
    )


@register(aten.gather.default)
def gather(x, dim, index, sparse_grad=False):  # noqa: A002
    """``out[i][j] = x[index[i][j]][j]`` for ``dim == 0`` (and so on); ``index`` may be
    smaller than ``x`` in the other dims."""
    if x.ndim == 0:
        return x.reshape(index.shape)
    d = _dim(dim, x.ndim)
    return x[_full_index(_wrap(index, x.shape[d]), d)] if index.size else jnp.zeros(index.shape, x.dtype)


def _scatter(x, dim, index, src, how):  # noqa: A002
    if index.size == 0:
        return x
    d = _dim(dim, x.ndim)
    if not hasattr(src, "shape"):
        src = jnp.full(index.shape, src, x.dtype)
    else:
        src = src.astype(x.dtype)
        src = lax.slice(src, (0,) * src.ndim, index.shape) if src.ndim else jnp.broadcast_to(src, index.shape)
    ref = x.at[_full_index(_wrap(index, x.shape[d]), d)]
    return getattr(ref, how)(src, mode="drop")


_REDUCE_METHOD = {
    "add": "add",
    "sum": "add",
    "multiply": "multiply",
    "prod": "multiply",
    "amax": "max",
    "amin": "min",
}


@register(aten.scatter.src, aten.scatter.value)
@_bools_as_int
def scatter(x, dim, index, src):  # noqa: A002
    """``out[index[i][j]][j] = src[i][j]`` (``dim == 0``); ``src`` may be a scalar."""
    return _scatter(x, dim, index, src, "set")


@register(aten.scatter.reduce, aten.scatter.value_reduce)
@_bools_as_int
def scatter_reduce_legacy(x, dim, index, src, reduce):  # noqa: A002
    """``scatter`` combining with ``reduce`` (``"add"`` or ``"multiply"``)."""
    return _scatter(x, dim, index, src, _REDUCE_METHOD[reduce])


@register(aten.scatter_add.default)
@_bools_as_int
def scatter_add(x, dim, index, src):  # noqa: A002
    """``out[index[i][j]][j] += src[i][j]`` (``dim == 0``)."""
    return _scatter(x, dim, index, src, "add")


_IDENTITY = {"sum": 0, "mean": 0, "prod": 1}


@register(aten.scatter_reduce.two)
@_bools_as_int
def scatter_reduce(x, dim, index, src, reduce, include_self=True):  # noqa: A002
    """``scatter`` reducing with ``sum``/``prod``/``mean``/``amax``/``amin``; with
    ``include_self=False`` the targets' own values are left out of the reduction; ``mean``
    divides by the number of reduced values (floor division for integers)."""
    if index.size == 0:
        return x
    base = x
    if not include_self:
        if reduce in _IDENTITY:
            fill = _IDENTITY[reduce]
        else:
            info = jnp.finfo(x.dtype) if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype)
            fill = info.min if reduce == "amax" else info.max
            fill = -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) and reduce == "amax" else fill
            fill = jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) and reduce == "amin" else fill
        hit = _scatter(jnp.zeros(x.shape, np.bool_), dim, index, True, "set")
        base = jnp.where(hit, jnp.asarray(fill, x.dtype), x)
    out = _scatter(base, dim, index, src, _REDUCE_METHOD.get(reduce, "add"))
    if reduce != "mean":
        return out
    count = _scatter(jnp.full(x.shape, int(include_self), x.dtype), dim, index, 1, "add")
    count = jnp.maximum(count, 1)
    return out // count if jnp.issubdtype(x.dtype, jnp.integer) else out / count


@register(aten.index_add.default)
@_bools_as_int
def index_add(x, dim, index, source, alpha=1):  # noqa: A002
    """``x`` with ``alpha * source`` slices added at ``index`` along ``dim``."""
    if x.ndim == 0:  # as a (1,) tensor
        return index_add(x.reshape(1), 0, index.reshape(-1), source.reshape(-1), alpha).reshape(())
    d = _dim(dim, x.ndim)
    idx = [slice(None)] * x.ndim
    idx[d] = _wrap(index, x.shape[d])
    src = source if alpha == 1 else source * alpha
    return x.at[tuple(idx)].add(src.astype(x.dtype), mode="drop")


@register(aten.masked_scatter.default)
def masked_scatter(x, mask, source):
    """``x`` with the positions where ``mask`` (broadcast to ``x``) is True filled, in
    row-major order, from the leading elements of ``source``."""
    mask = jnp.broadcast_to(mask, x.shape)
    flat_mask = mask.reshape(-1)
    pos = jnp.cumsum(flat_mask.astype(np.int64)) - 1
    taken = jnp.take(source.reshape(-1).astype(x.dtype), jnp.clip(pos, 0, None), mode="clip")
    return jnp.where(flat_mask, taken, x.reshape(-1)).reshape(x.shape)


@register(aten.index_reduce.default)
@_bools_as_int
def index_reduce(x, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """``x`` with the slices of ``source`` along ``dim`` reduced (``prod``/``mean``/``amax``/
    ``amin``) into the slices at ``index``; as :func:`scatter_reduce` with the index
    broadcast across the other dims."""
    if x.ndim == 0:
        return index_reduce(
            x.reshape(1), 0, index.reshape(-1), source.reshape(-1), reduce, include_self=include_self
        ).reshape(())
    d = _dim(dim, x.ndim)  # a 0-dim source of a shaped x: torch refuses it when run
    index = index.reshape(-1)
    shape = [1] * source.ndim
    shape[d] = index.shape[0]
    full = jnp.broadcast_to(index.reshape(shape), source.shape)
    return scatter_reduce(x, d, full, source, reduce, include_self)


@register(aten.put.default)
@_bools_as_int
def put(x, index, source, accumulate=False):
    """``x`` with the elements at flat ``index`` (negative wraps) set to (or, with
    ``accumulate``, incremented by) ``source``."""
    flat = x.reshape(-1)
    idx = _wrap(index.reshape(-1), flat.shape[0])
    src = source.reshape(-1).astype(x.dtype)
    ref = flat.at[idx]
    return (ref.add(src, mode="drop") if accumulate else ref.set(src, mode="drop")).reshape(x.shape)


# --------------------------------------------------------------------------- embedding_bag

_BAG_SUM, _BAG_MEAN, _BAG_MAX = 0, 1, 2


@register(aten.embedding_renorm.default)
def embedding_renorm(weight, indices, max_norm, norm_type):
    """``weight`` with every row named in ``indices`` whose ``norm_type``-norm exceeds
    ``max_norm`` scaled by ``max_norm / (norm + 1e-7)`` (the functional form of
    ``embedding_renorm_``, ``Embedding.cpp``); other rows unchanged."""
    from .reductions import linalg_vector_norm

    v = weight.shape[0]
    touched = jnp.zeros((v,), bool).at[indices.reshape(-1)].set(True, mode="drop")
    norm = linalg_vector_norm(weight, norm_type, dim=1)
    scale = jnp.asarray(max_norm, norm.dtype) / (norm + jnp.asarray(1e-7, norm.dtype))
    scale = jnp.where(touched & (norm > max_norm), scale, jnp.ones((), norm.dtype))
    return weight * scale[:, None].astype(weight.dtype)


def _bag_max(rows, bag, take, num_bags, idx):
    """Per bag and feature: the row value ``embedding_bag_cpu_max_out`` keeps (the bag's first
    row, replaced only by a strictly greater later row, so a NaN first row sticks and later
    NaN rows are skipped), the word index it came from, and whether the bag has any row;
    ``take`` marks the rows counted (in a bag, not padding)."""
    m = rows.shape[0]
    if m == 0:
        shape = (num_bags, rows.shape[1])
        return jnp.zeros(shape, rows.dtype), jnp.zeros(shape, idx.dtype), jnp.zeros((num_bags,), bool)
    member = (bag[None, :] == jnp.arange(num_bags)[:, None]) & take[None, :]  # (B, M)
    pos = jnp.arange(m)
    first = jnp.min(jnp.where(member, pos, m), axis=1, initial=m)  # (B,)
    seed = jnp.take(rows, jnp.clip(first, 0, m - 1), axis=0)  # (B, D)
    ok = member[:, :, None] & ~jnp.isnan(rows)[None]  # (B, M, D)
    neg = jnp.asarray(-jnp.inf, rows.dtype)
    best = jnp.max(jnp.where(ok, rows[None], neg), axis=1, initial=neg)
    hit = ok & (rows[None] == best[:, None, :])
    earliest = jnp.min(jnp.where(hit, pos[None, :, None], m), axis=1, initial=m)
    seed_nan = jnp.isnan(seed)
    win = jnp.where(seed_nan, first[:, None], earliest)
    word = jnp.take(idx, jnp.clip(win, 0, m - 1))
    return jnp.where(seed_nan, seed, best), word, first < m


def _bag_sum(rows, bag, take, num_bags, per_sample_weights, mean, count):
    """Per bag: the sum (or mean) of its ``take`` rows, each scaled by its
    ``per_sample_weights`` entry. bfloat16/float16 bags accumulate in float32 (ATen's opmath
    type) and round once; the mean then divides the rounded sum, as ATen's kernel does."""
    acc = np.float32 if rows.dtype in (jnp.bfloat16, np.float16) else rows.dtype
    wide = rows.astype(acc)
    if per_sample_weights is not None:
        wide = wide * per_sample_weights[:, None].astype(acc)
    wide = jnp.where(take[:, None], wide, jnp.zeros((), acc))
    out = jnp.zeros((num_bags, rows.shape[1]), acc).at[bag].add(wide, mode="drop").astype(rows.dtype)
    return out / jnp.maximum(count, 1).astype(rows.dtype)[:, None] if mean else out


def _embedding_bag(weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx):
    """``(output, offset2bag, bag_size, max_indices)`` with ``bag_size`` per bag; see
    :func:`embedding_bag_forward_only`."""
    if indices.ndim != 1:
        raise NotImplementedError("_embedding_bag with 2-D indices")
    m, v = indices.shape[0], weight.shape[0]
    num_bags = offsets.shape[0] - (1 if include_last_offset else 0)
    pos = jnp.arange(m)
    bag = jnp.sum(offsets[:num_bags][None, :] <= pos[:, None], axis=1).astype(np.int64) - 1
    take = (bag >= 0) & (indices != padding_idx)
    rows = jnp.take(weight, jnp.clip(indices, 0, v - 1), axis=0)
    count = jnp.zeros((num_bags,), np.int64).at[bag].add(take.astype(np.int64), mode="drop")
    if mode == _BAG_MAX:
        out, word, nonempty = _bag_max(rows, bag, take, num_bags, indices)
        out = jnp.where(nonempty[:, None], out, jnp.zeros((), weight.dtype))
        max_indices = jnp.where(nonempty[:, None], word, 0)
    else:
        out = _bag_sum(rows, bag, take, num_bags, per_sample_weights, mode == _BAG_MEAN, count)
        if mode != _BAG_MEAN:
            count = jnp.zeros_like(count)
        max_indices = count
    fast_sum = mode == _BAG_SUM and weight.dtype in (np.float32, np.float16) and padding_idx < 0
    offset2bag = jnp.zeros((0,), np.int64) if fast_sum else bag
    return out, offset2bag, count, max_indices


@register(aten._embedding_bag_forward_only.default)
def embedding_bag_forward_only(
    weight,
    indices,
    offsets,
    scale_grad_by_freq=False,
    mode=0,
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=-1,
):
    """``(output, offset2bag, bag_size, max_indices)`` of ``EmbeddingBag.cpp``'s CPU kernel.

    ``indices`` (1-D, ``M``) are split into bags starting at ``offsets`` (with
    ``include_last_offset`` the last offset, which torch requires to be ``M``, only closes the
    last bag); ``output`` ``(B, D)``
    is, per bag, the sum (mode 0, rows scaled by ``per_sample_weights``), mean (1) or max (2)
    of the rows of ``weight`` ``(V, D)`` it names, indices equal to ``padding_idx`` left out;
    an empty bag gives zeros. ``offset2bag`` ``(M,)`` is each index's bag (``(0,)`` on
    torch's fast sum path), ``bag_size`` ``offsets.shape`` the bag's count of non-padding
    indices (zeros for sum; the entry of the closing offset is 0), ``max_indices`` the word
    index of each max (mode 2, ``(B, D)``) or a copy of ``bag_size`` ``(B,)``. Shapes follow
    torch's meta function; ``scale_grad_by_freq`` and ``sparse`` only affect the backward.

    Raises:
        NotImplementedError: 2-D ``indices`` (``F.embedding_bag`` flattens them first).
    """
    out, offset2bag, bag_size, max_indices = _embedding_bag(
        weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx
    )
    if bag_size.shape != offsets.shape:
        bag_size = jnp.concatenate([bag_size, jnp.zeros((1,), bag_size.dtype)])
    return out, offset2bag, bag_size, max_indices


@register(aten._embedding_bag.default)
def embedding_bag(
    weight,
    indices,
    offsets,
    scale_grad_by_freq=False,
    mode=0,
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=-1,
):
    """:func:`embedding_bag_forward_only` with ``bag_size`` of shape ``(B,)`` (the overload
    recorded when gradients are required)."""
    return _embedding_bag(
        weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx
    )


@register(aten.nonzero_static.default)
def nonzero_static(x, *, size, fill_value=-1):
    """The row-major coordinates of the first ``size`` nonzero elements of ``x``: int64
    ``(size, x.ndim)``, rows past the number of nonzeros filled with ``fill_value``
    (``native_functions.yaml`` ``nonzero_static``; a static-shape ``nonzero``)."""
    flat = (x != 0).reshape(-1)
    rank = jnp.cumsum(flat.astype(np.int64)) - 1  # output row of each nonzero
    row = jnp.where(flat & (rank < size), rank, size)  # others are dropped
    out = jnp.full((size, x.ndim), fill_value, np.int64)
    if x.ndim == 0 or size == 0:
        return out
    coords = np.stack(np.unravel_index(np.arange(flat.shape[0]), x.shape), axis=-1).astype(np.int64)
    return out.at[row].set(jnp.asarray(coords), mode="drop")
