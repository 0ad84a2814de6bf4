"""View, shape and copy ATen ops: ``view``, ``permute``, ``expand``, ``squeeze``,
``unsqueeze``, ``cat``, ``split_with_sizes``, ``slice``, ``select``, ``flip``, ``roll``,
``repeat``, padding, ``diagonal``, ``*_scatter``, ``as_strided``, copies and casts
(``native_functions.yaml``).

Every view is a value here (JAX has no aliasing); ``torch.export`` has already
functionalized the graph, so no in-place op reaches the rules.
"""

from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from ..registry import register
from ._util import dim, np_dtype

aten = __import__("torch").ops.aten
prims = __import__("torch").ops.prims


@register(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(x, shape):
    """Reshape (row-major, ``-1`` inferred)."""
    return jnp.reshape(x, tuple(shape))


@register(aten.permute.default)
def permute(x, dims):
    """Transpose to ``dims`` (negative dims wrap)."""
    return jnp.transpose(x, [dim(d, x.ndim) for d in dims]) if x.ndim else x


@register(aten.t.default)
def t(x):
    """Transpose a matrix; identity for rank 0 and 1."""
    return jnp.transpose(x) if x.ndim == 2 else x


@register(aten.transpose.int)
def transpose(x, dim0, dim1):
    """Swap two dims."""
    return jnp.swapaxes(x, dim(dim0, x.ndim), dim(dim1, x.ndim)) if x.ndim else x


@register(aten.expand.default)
def expand(x, size, implicit=False):
    """Broadcast to ``size``; ``-1`` keeps the dim, new leading dims are added."""
    lead = len(size) - x.ndim
    shape = [x.shape[i - lead] if s == -1 else s for i, s in enumerate(size)]
    return jnp.broadcast_to(x, shape)


@register(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def squeeze(x, dim=None):  # noqa: A002 - ATen names
    """Drop the given size-1 dims (all size-1 dims when ``dim`` is None); dims of another
    size are kept, as in torch."""
    if x.ndim == 0:
        return x
    ds = range(x.ndim) if dim is None else [dim] if isinstance(dim, int) else dim
    ds = {d % x.ndim for d in ds}
    return jnp.squeeze(x, tuple(d for d in sorted(ds) if x.shape[d] == 1))


@register(aten.unsqueeze.default)
def unsqueeze(x, dim):  # noqa: A002
    """Insert a size-1 dim at ``dim`` (in ``[-ndim-1, ndim]``)."""
    return jnp.expand_dims(x, dim % (x.ndim + 1))


@register(aten.cat.default)
def cat(tensors, dim=0):  # noqa: A002
    """Concatenate along ``dim``; legacy empty 1-D tensors (shape ``(0,)``) are skipped as
    in torch; operands promote to their common dtype."""
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or list(tensors)
    dtype = jnp.result_type(*kept)
    return jnp.concatenate([t.astype(dtype) for t in kept], axis=dim % kept[0].ndim)


@register(aten.stack.default)
def stack(tensors, dim=0):  # noqa: A002
    """Stack along a new ``dim``."""
    dtype = jnp.result_type(*tensors)
    return jnp.stack([t.astype(dtype) for t in tensors], axis=dim % (tensors[0].ndim + 1))


@register(aten.split_with_sizes.default)
def split_with_sizes(x, split_sizes, dim=0):  # noqa: A002
    """Split along ``dim`` into pieces of ``split_sizes``."""
    d = dim % x.ndim
    bounds = np.cumsum([0, *split_sizes])
    return [lax.slice_in_dim(x, int(a), int(b), axis=d) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


@register(aten.split.Tensor)
def split(x, split_size, dim=0):  # noqa: A002
    """Split along ``dim`` into pieces of ``split_size`` (the last may be shorter)."""
    n = x.shape[dim % x.ndim]
    sizes = [min(split_size, n - i) for i in range(0, n, split_size)] if split_size else [n]
    return split_with_sizes(x, sizes, dim)


@register(aten.unbind.int)
def unbind(x, dim=0):  # noqa: A002
    """The slices along ``dim``, that dim removed."""
    d = dim % x.ndim
    return [lax.index_in_dim(x, i, axis=d, keepdims=False) for i in range(x.shape[d])]


def _slice_bounds(n, start, end, step):
    start = 0 if start is None else start
    end = n if end is None else end
    start = start + n if start < 0 else start
    end = end + n if end < 0 else end
    start = min(max(start, 0), n)
    end = min(max(end, start), n)
    return start, end, step


@register(aten.slice.Tensor)
def slice_(x, dim=0, start=None, end=None, step=1):  # noqa: A002
    """``x[start:end:step]`` along ``dim``; bounds clamp as in torch (``step > 0``)."""
    d = dim % x.ndim
    s, e, st = _slice_bounds(x.shape[d], start, end, step)
    return lax.slice_in_dim(x, s, e, st, axis=d)


@register(aten.narrow.default)
def narrow(x, dim, start, length):  # noqa: A002
    """``x[start:start+length]`` along ``dim`` (negative ``start`` wraps)."""
    d = dim % x.ndim
    start = start % x.shape[d] if start < 0 else start
    return lax.slice_in_dim(x, start, start + length, axis=d)


@register(aten.select.int)
def select(x, dim, index):  # noqa: A002
    """``x[index]`` along ``dim``, that dim removed (negative ``index`` wraps)."""
    d = dim % x.ndim
    return lax.index_in_dim(x, index % x.shape[d], axis=d, keepdims=False)


@register(aten.slice_scatter.default)
def slice_scatter(x, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    """``x`` with ``x[start:end:step]`` along ``dim`` replaced by ``src``."""
    d = dim % x.ndim
    s, e, st = _slice_bounds(x.shape[d], start, end, step)
    index = [slice(None)] * x.ndim
    index[d] = slice(s, e, st)
    return x.at[tuple(index)].set(src.astype(x.dtype))


@register(aten.select_scatter.default)
def select_scatter(x, src, dim, index):  # noqa: A002
    """``x`` with ``x.select(dim, index)`` replaced by ``src``."""
    d = dim % x.ndim
    idx = [slice(None)] * x.ndim
    idx[d] = index % x.shape[d]
    return x.at[tuple(idx)].set(src.astype(x.dtype))


@register(aten.diagonal.default)
def diagonal(x, offset=0, dim1=0, dim2=1):
    """The diagonal of the ``(dim1, dim2)`` planes, moved to the last dim."""
    return jnp.diagonal(x, offset, dim(dim1, x.ndim), dim(dim2, x.ndim))


@register(aten.diagonal_scatter.default)
def diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    """``x`` with its ``diagonal(offset, dim1, dim2)`` replaced by ``src``."""
    d1, d2 = dim(dim1, x.ndim), dim(dim2, x.ndim)
    moved = jnp.moveaxis(x, (d1, d2), (-2, -1))
    rows, cols = moved.shape[-2:]
    n = src.shape[-1]
    i = np.arange(n) + max(-offset, 0)
    j = np.arange(n) + max(offset, 0)
    moved = moved.at[..., i, j].set(src.astype(x.dtype))
    return jnp.moveaxis(moved, (-2, -1), (d1, d2))


@register(aten.flip.default)
def flip(x, dims):
    """Reverse along ``dims``."""
    return jnp.flip(x, tuple(dim(d, x.ndim) for d in dims)) if dims else x


@register(aten.roll.default)
def roll(x, shifts, dims=()):
    """Rotate by ``shifts`` along ``dims`` (the flattened tensor when ``dims`` is empty)."""
    if not dims:
        return jnp.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
    return jnp.roll(x, tuple(shifts), tuple(dim(d, x.ndim) for d in dims))


@register(aten.repeat.default)
def repeat(x, repeats):
    """Tile ``x`` ``repeats`` times per dim (extra leading repeats add dims)."""
    return jnp.tile(x.reshape((1,) * (len(repeats) - x.ndim) + x.shape), tuple(repeats))


@register(aten.tril.default)
def tril(x, diagonal=0):
    """Zero above the ``diagonal``-th diagonal of the last two dims."""
    return jnp.tril(x, diagonal)


@register(aten.triu.default)
def triu(x, diagonal=0):
    """Zero below the ``diagonal``-th diagonal of the last two dims."""
    return jnp.triu(x, diagonal)


def _pairs(pad, ndim):
    """torch's pad list (last dim first, ``(low, high)`` pairs) as per-dim pairs."""
    pairs = [(0, 0)] * ndim
    for i in range(len(pad) // 2):
        pairs[ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    return pairs


@register(aten.constant_pad_nd.default)
def constant_pad_nd(x, pad, value=0):
    """Pad with ``value``; negative pads crop."""
    cfg = [(lo, hi, 0) for lo, hi in _pairs(pad, x.ndim)]
    return lax.pad(x, jnp.asarray(value, x.dtype), cfg)


def _mode_pad(mode):
    def rule(x, padding):
        return jnp.pad(x, _pairs(padding, x.ndim), mode=mode)

    return rule


_reflect = _mode_pad("reflect")
_reflect.__doc__ = "Pad by reflection about the edge (the edge not repeated)."
_edge = _mode_pad("edge")
_edge.__doc__ = "Pad by repeating the edge."
for _n in (1, 2, 3):
    register(getattr(aten, f"reflection_pad{_n}d").default)(_reflect)
    register(getattr(aten, f"replication_pad{_n}d").default)(_edge)


def _strided_index(size, stride, storage_offset):
    """Flat row-major element index of every position of an ``as_strided`` view."""
    idx = np.full(tuple(size), storage_offset or 0, dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride, strict=True)):
        shape = [1] * len(size)
        shape[d] = n
        idx = idx + (np.arange(n) * s).reshape(shape)
    return idx


@register(aten.as_strided.default, aten.as_strided_copy.default)
def as_strided(x, size, stride, storage_offset=None):
    """The view ``size``/``stride``/``storage_offset`` of ``x``'s elements in row-major
    order, as a gather. Exact when ``x`` is contiguous, which holds in functionalized
    graphs for the tensors torch.export decomposes into ``as_strided``. Symbolic sizes or
    strides (a dynamic dimension) build the index from iotas in the graph."""
    if not all(isinstance(n, int) for n in (*size, *stride, storage_offset or 0)):
        # symbolic sizes (a dynamic batch): the same index from iotas, computed in the graph
        idx = jnp.zeros(tuple(size), jnp.int64) + (storage_offset or 0)
        for d, s in enumerate(stride):
            idx = idx + lax.broadcasted_iota(jnp.int64, tuple(size), d) * s
        return jnp.take(x.reshape(-1), idx, mode="clip")
    idx = _strided_index(size, stride, storage_offset)
    return jnp.take(x.reshape(-1), jnp.asarray(idx), mode="clip") if idx.size else jnp.zeros(size, x.dtype)


@register(aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default)
def clone(x, memory_format=None):
    """Identity (values have no identity or layout here)."""
    return x


@register(aten.detach.default)
def detach(x):
    """``Tensor.detach()``: the value, without gradient (``lax.stop_gradient``; ``from_torch``
    keeps it in StableHLO as ``custom_call @converter.stop_gradient`` on static shapes)."""
    return lax.stop_gradient(x)


def cast(x, dtype):
    """``x`` cast to the NumPy ``dtype`` as torch casts: float → int truncates toward zero,
    nonzero → True; to ``float8_e4m3fn`` (which has no infinity) a value beyond its largest
    finite one, infinities too, becomes ±448 as torch's conversion saturates (XLA's convert
    gives NaN there); NaN stays NaN."""
    dtype = np.dtype(dtype)
    if (
        dtype == np.dtype(ml_dtypes.float8_e4m3fn)
        and jnp.issubdtype(x.dtype, jnp.floating)
        and x.dtype != dtype
    ):
        x = jnp.clip(x, -448.0, 448.0).astype(x.dtype)
    return x.astype(dtype)


@register(aten._to_copy.default)
def to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    """A cast to ``dtype`` (:func:`cast`)."""
    return x if dtype is None else cast(x, np_dtype(dtype))


@register(prims.convert_element_type.default)
def convert_element_type(x, dtype):
    """``prims.convert_element_type(a, dtype)``: the cast ``_to_copy`` makes (decompositions
    such as ``renorm``'s leave it in the graph; :func:`cast`)."""
    return cast(x, np_dtype(dtype))


@register(aten.copy.default)
def copy(x, src, non_blocking=False):
    """``src`` broadcast to ``x``'s shape and cast to its dtype."""
    return jnp.broadcast_to(src.astype(x.dtype), x.shape)


@register(aten.unfold.default)
def unfold(x, dimension, size, step):
    """Windows of ``size`` every ``step`` along ``dimension``: that dim becomes the window
    count and a new last dim of ``size`` holds each window."""
    if x.ndim == 0:
        return x.reshape(1)
    d = dim(dimension, x.ndim)
    n = (x.shape[d] - size) // step + 1
    idx = np.arange(n)[:, None] * step + np.arange(size)[None, :]
    windows = jnp.take(x, jnp.asarray(idx.reshape(-1)), axis=d)
    windows = windows.reshape(x.shape[:d] + (n, size) + x.shape[d + 1 :])
    return jnp.moveaxis(windows, d + 1, -1)


@register(aten.as_strided_scatter.default)
def as_strided_scatter(x, src, size, stride, storage_offset=None):
    """``x`` (contiguous) with its ``as_strided(size, stride, storage_offset)`` view replaced
    by ``src``."""
    idx = _strided_index(size, stride, storage_offset)
    flat = x.reshape(-1).at[jnp.asarray(idx.reshape(-1))].set(src.reshape(-1).astype(x.dtype), mode="drop")
    return flat.reshape(x.shape)


def _register_copies() -> None:
    """The ``*_copy`` variants (``view_copy``, ``permute_copy``...) return values, exactly
    like the views they copy."""
    views = {
        "view_copy": view,
        "permute_copy": permute,
        "t_copy": t,
        "transpose_copy": transpose,
        "expand_copy": expand,
        "unsqueeze_copy": unsqueeze,
        "slice_copy": slice_,
        "select_copy": select,
        "narrow_copy": narrow,
        "diagonal_copy": diagonal,
        "alias_copy": clone,
        "unfold_copy": unfold,
    }
    for name, rule in views.items():
        packet = getattr(aten, name)
        for overload in ("default", "Tensor", "int"):
            if hasattr(packet, overload):
                register(getattr(packet, overload))(rule)
    for overload in ("default", "dim", "dims"):
        register(getattr(aten.squeeze_copy, overload))(squeeze)
    register(aten.split_with_sizes_copy.default)(split_with_sizes)
    register(aten.split_copy.Tensor)(split)
    register(aten.unbind_copy.int)(unbind)


_register_copies()


@register(aten.resize.default)
def resize(x, size, *, memory_format=None):
    """The functional ``resize_``: the first ``prod(size)`` elements of ``x`` in row-major
    order, reshaped to ``size``. Elements beyond ``x.numel()`` are uninitialised memory in
    torch; here they are zeros."""
    n = int(np.prod(size))
    flat = x.reshape(-1)
    if n > flat.shape[0]:
        flat = jnp.concatenate([flat, jnp.zeros((n - flat.shape[0],), x.dtype)])
    return flat[:n].reshape(tuple(size))
