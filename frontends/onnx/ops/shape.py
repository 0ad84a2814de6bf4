"""Shape and layout ONNX ops: Reshape, Shape, Size, Flatten, (Un)Squeeze, Transpose, Concat,
Split, Slice, Expand, Tile, Pad, Constant(OfShape), Range, EyeLike, Trilu, Depth/SpaceToDepth,
OneHot, Dropout (inference), CenterCropPad (https://onnx.ai/onnx/operators/).

Shape-like inputs (Reshape's shape, Slice's starts, Pad's pads...) must be known at
conversion time. A graph input's symbolic dimension stays symbolic (``jax.export`` shape
polymorphism) through the rules that only carry it along.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from converter import _jax_internal

from ..registry import onnx_op
from ..symbolic import is_symbolic, materialize, shape_value


def _ints(a) -> list[int]:
    return [int(v) for v in np.asarray(a).reshape(-1)]


def _dims(a) -> list:
    """A shape input as ints, keeping symbolic dimensions (:mod:`..symbolic`)."""
    return [
        v if is_symbolic(a) and not isinstance(v, (int, np.integer)) else int(v)
        for v in np.asarray(a).reshape(-1)
    ]


def _axes(axes, rank: int) -> list[int]:
    return [int(a) % rank if rank else 0 for a in axes]


@onnx_op("Constant", 1)
def constant(ctx, **attrs):
    """Constant: exactly one of value, value_float(s), value_int(s), value_string(s)."""
    ((name, value),) = attrs.items()
    if name == "value_float":
        return np.array(value, np.float32)
    if name == "value_floats":
        return np.array(value, np.float32)
    if name in ("value_int", "value_ints"):
        return np.array(value, np.int64)
    if name == "sparse_value":  # SparseTensorProto: values at linear or [NNZ, rank] indices
        from onnx import numpy_helper

        values, indices = numpy_helper.to_array(value.values), numpy_helper.to_array(value.indices)
        dense = np.zeros(tuple(value.dims), values.dtype)
        if indices.ndim == 1:
            dense.reshape(-1)[indices] = values
        else:
            dense[tuple(indices.T)] = values
        return dense
    if isinstance(value, np.ndarray):
        return value
    raise NotImplementedError(f"Constant with {name}")


@onnx_op("Reshape", 5)
def reshape(ctx, x, shape, *, allowzero=0):
    """Reshape: 0 copies the input dimension (unless ``allowzero``), -1 is inferred. The
    shape may hold symbolic dimensions (computed from ``Shape``, :mod:`..symbolic`)."""
    shape = _dims(ctx.static(1))
    if not allowzero:
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return jnp.reshape(x, shape)


@onnx_op("Shape", 1)
def shape(ctx, x, *, start=0, end=None):
    """Shape (opset 15 adds ``start``/``end`` slicing); known at conversion time (with
    symbolic dimensions kept, :mod:`..symbolic`)."""
    return shape_value(list(np.shape(x))[slice(start, end)])


@onnx_op("Size", 1)
def size(ctx, x):
    n = math.prod(np.shape(x))
    return np.array(n, np.int64) if isinstance(n, int) else jnp.array(n, np.int64)


@onnx_op("Flatten", 1)
def flatten(ctx, x, *, axis=1):
    """Flatten to 2-D at ``axis`` in ``[-r, r]`` (``axis == r`` gives ``(size, 1)``)."""
    axis = axis + x.ndim if axis < 0 else axis
    return jnp.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


@onnx_op("Squeeze", 1, until=11)
def squeeze_1(ctx, x, *, axes=None):
    return jnp.squeeze(x, None if axes is None else tuple(_axes(axes, x.ndim)))


@onnx_op("Squeeze", 13)
def squeeze(ctx, x, axes=None):
    """Squeeze (axes as an input from opset 13)."""
    axes = ctx.static(1)
    return jnp.squeeze(x, None if axes is None else tuple(_axes(_ints(axes), x.ndim)))


def _unsqueeze(x, axes):
    rank = x.ndim + len(axes)
    out_shape = list(x.shape)
    for a in sorted(_axes(axes, rank)):
        out_shape.insert(a, 1)
    return jnp.reshape(x, out_shape)


@onnx_op("Unsqueeze", 1, until=11)
def unsqueeze_1(ctx, x, *, axes):
    return _unsqueeze(x, axes)


@onnx_op("Unsqueeze", 13)
def unsqueeze(ctx, x, axes):
    return _unsqueeze(x, _ints(ctx.static(1)))


@onnx_op("Transpose", 1)
def transpose(ctx, x, *, perm=None):
    return jnp.transpose(x, perm)


@onnx_op("Concat", 4)
def concat(ctx, *xs, axis):
    xs = [x for x in xs if x is not None]
    return jnp.concatenate(xs, axis=axis)


def _split(x, axis, sizes):
    idx = np.cumsum(sizes)[:-1]
    return tuple(jnp.split(x, idx, axis=axis))


def _even_split(dim: int, n: int) -> list[int]:
    """Sizes of ``n`` parts of ``dim``: ``ceil(dim / n)`` each, the last smaller (Split-18's
    ``num_outputs``). Parts of that size may fill fewer than ``n`` outputs (5 in 4 parts: 2, 2,
    1): no size list is defined then (the reference's last size is negative, onnxruntime
    refuses the node), so neither is a conversion."""
    chunk = -(-dim // n)
    sizes = [chunk] * (dim // chunk) + ([dim % chunk] if dim % chunk else [])
    if len(sizes) != n:
        raise ValueError(
            f"Split of a dimension of {dim} into {n} outputs: parts of {chunk} fill only "
            f"{len(sizes)} (no split of this size into {n} parts is defined; give `split`)"
        )
    return sizes


@onnx_op("Split", 2, until=11)
def split_2(ctx, x, *, axis=0, split=None):
    sizes = list(split) if split else _even_split(x.shape[axis], ctx.num_outputs)
    return _split(x, axis, sizes)


@onnx_op("Split", 13)
def split(ctx, x, split=None, *, axis=0, num_outputs=None):
    """Split by the ``split`` input, or evenly into ``num_outputs`` (opset 18; the last chunk
    may be smaller)."""
    sizes = ctx.static(1)
    n = num_outputs or ctx.num_outputs
    sizes = _ints(sizes) if sizes is not None else _even_split(x.shape[axis], n)
    return _split(x, axis, sizes)


def _slice(x, starts, ends, axes, steps):
    if not all(isinstance(v, int) for v in (*starts, *ends, *x.shape)):
        return _symbolic_slice(x, starts, ends, axes, steps)
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps, strict=False):
        index[a] = slice(*slice(s, e, st).indices(x.shape[a])) if st > 0 else _neg_slice(s, e, st, x.shape[a])
    return x[tuple(index)]


#: a slice bound at least this large means "to the end" (exporters write INT64_MAX, INT32_MAX)
_TO_END = 1 << 31


def _decided_le(a, b) -> bool | None:
    """``a <= b`` for ints or symbolic dimensions; None when the sizes do not decide it."""
    try:
        return bool(a <= b)
    except jax.errors.InconclusiveDimensionOperation:
        return None


def _symbolic_slice(x, starts, ends, axes, steps):
    """Slice where a bound or the sliced dimension is a ``jax.export`` symbolic dimension
    (``x[:, :seq]`` of a position table, ``x[:, 1:]`` of a dynamic tensor), positive steps.

    Integer bounds are clamped into ``[0, dim]`` as the operator page says (``min``/``max``
    dimension expressions when the sizes do not decide it). A symbolic bound is a size that
    exporters compute from ``Shape`` (non-negative); when the sizes do not decide whether it
    fits the dimension (``seq`` against a 64-row position table) it is taken as fitting, the
    slice is a gather of exactly that many rows, and a shape assertion makes any call whose
    sizes break it fail (where onnxruntime would clamp and give fewer rows)."""
    x = jnp.asarray(x)
    for s, e, a, st in zip(starts, ends, axes, steps, strict=False):
        dim = x.shape[a]
        if st <= 0:
            raise NotImplementedError(
                f"Slice with step {st} on axis {a} whose size or bounds are symbolic ({dim}, {s}:{e}); "
                "give the dimensions sizes with from_onnx(..., dims=...)"
            )
        bounds, assumed = [], []
        for v in (s, e):
            if isinstance(v, (int, np.integer)):
                v = int(v)
                if v >= _TO_END:
                    bounds.append(dim)
                elif v < 0:
                    bounds.append(_jax_internal.max_dim(dim + v, 0))
                else:
                    bounds.append(_jax_internal.min_dim(v, dim))
                continue
            fits = _decided_le(v, dim)
            if fits is None:
                assumed.append(v)
            bounds.append(dim if fits is False else v)
        start, stop = bounds
        if _decided_le(start, stop) is False:
            stop = start
        for v in assumed:
            _jax_internal.shape_assertion(
                jnp.asarray(v) <= jnp.asarray(dim),
                f"Slice: bound {v} exceeds the size {dim} of axis {a} (onnxruntime would clamp it)",
            )
        if not assumed and _decided_le(start, stop) is not None:
            x = lax.slice_in_dim(x, start, stop, st, a)
        else:
            n = (_jax_internal.max_dim(stop - start, 0) + st - 1) // st  # x[1:-1] of one row: none
            x = jnp.take(x, start + lax.iota(np.int64, n) * st, axis=a, mode="clip")
    return x


def _neg_slice(s, e, st, dim):
    start, stop, step = slice(s, e, st).indices(dim)
    return slice(start, stop if stop >= 0 else None, step)


@onnx_op("Slice", 1, until=1)
def slice_1(ctx, x, *, starts, ends, axes=None):
    axes = _axes(axes if axes is not None else range(len(starts)), x.ndim)
    return _slice(x, starts, ends, axes, [1] * len(starts))


@onnx_op("Slice", 10)
def slice_(ctx, x, starts, ends, axes=None, steps=None):
    """Slice with static starts/ends/axes/steps (clamped like Python slicing); starts and
    ends may hold symbolic dimensions (:mod:`..symbolic`)."""
    x = materialize(x)
    starts, ends = _dims(ctx.static(1)), _dims(ctx.static(2))
    axes = ctx.static(3)
    axes = _axes(_ints(axes), x.ndim) if axes is not None else list(range(len(starts)))
    steps = ctx.static(4)
    steps = _ints(steps) if steps is not None else [1] * len(starts)
    return _slice(x, starts, ends, axes, steps)


@onnx_op("Expand", 8)
def expand(ctx, x, shape):
    """Expand: broadcast ``x`` and ``shape`` together (either may be larger)."""
    shape = _dims(ctx.static(1))
    if all(isinstance(d, int) for d in (*x.shape, *shape)):
        return jnp.broadcast_to(x, np.broadcast_shapes(tuple(x.shape), tuple(shape)))
    rank = max(x.ndim, len(shape))
    a = (1,) * (rank - x.ndim) + tuple(x.shape)
    b = (1,) * (rank - len(shape)) + tuple(shape)
    return jnp.broadcast_to(x, tuple(q if _is_one(p) else p for p, q in zip(a, b, strict=True)))


def _is_one(d) -> bool:
    return isinstance(d, int) and d == 1


@onnx_op("Tile", 6)
def tile(ctx, x, repeats):
    return jnp.tile(x, _ints(ctx.static(1)))


def _pad(x, pads, mode, value, axes=None):
    n = len(pads) // 2
    axes = _axes(axes if axes is not None else range(n), x.ndim)
    width = [(0, 0)] * x.ndim
    for i, a in enumerate(axes):
        width[a] = (pads[i], pads[i + n])
    # negative pads crop
    crop = tuple(slice(max(-lo, 0), x.shape[d] - max(-hi, 0)) for d, (lo, hi) in enumerate(width))
    x = x[crop]
    width = [(max(lo, 0), max(hi, 0)) for lo, hi in width]
    if mode == "constant":
        return jnp.pad(x, width, mode="constant", constant_values=value)
    return jnp.pad(x, width, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])


@onnx_op("Pad", 2, until=2)
def pad_2(ctx, x, *, pads, mode="constant", value=0.0):
    return _pad(x, list(pads), mode, value)


@onnx_op("Pad", 11)
def pad(ctx, x, pads, constant_value=None, axes=None, *, mode="constant"):
    """Pad (pads/constant_value inputs from 11, axes from 18, wrap mode from 19)."""
    value = (
        jnp.zeros((), x.dtype) if constant_value is None else jnp.asarray(constant_value, x.dtype).reshape(())
    )
    axes = ctx.static(3)
    return _pad(x, _ints(ctx.static(1)), mode, value, None if axes is None else _ints(axes))


@onnx_op("ConstantOfShape", 9)
def constant_of_shape(ctx, shape, *, value=None):
    fill = np.zeros(1, np.float32) if value is None else value
    shape = _dims(ctx.static(0))
    if all(isinstance(d, int) for d in shape):
        return np.full(shape, fill.reshape(()), fill.dtype)
    return jnp.full(shape, fill.reshape(()), fill.dtype)  # symbolic dimensions


_RANGE_STASH = {1: np.dtype(np.float32), 11: np.dtype(np.float64)}  # stash_type: FLOAT, DOUBLE


@onnx_op("Range", 11)
def range_(ctx, start, limit, delta, *, stash_type=1):
    """Range: ``ceil((limit - start) / delta)`` elements ``start + i * delta``; start/limit/delta
    known statically. From Range-27, float16/bfloat16 bounds are computed in ``stash_type``
    (FLOAT, the default, or DOUBLE) and each element rounded once to the input type; before,
    and for other types, in the input type. An integer start or limit may be a symbolic
    dimension (``arange(seq)`` of a dynamic sequence), with a static delta: the length is then
    ``(limit - start + delta - 1) // delta`` (positive delta) as a dimension expression.

    Raises:
        ValueError: a ``stash_type`` other than FLOAT or DOUBLE for float16/bfloat16 bounds.
    """
    values = [ctx.static(i) for i in range(3)]
    if any(is_symbolic(v) for v in values):
        return _symbolic_range(ctx, *(np.asarray(v).reshape(()).item() for v in values))
    s, lim, d = (np.asarray(v).reshape(()) for v in values)
    n = max(int(np.ceil((lim.astype(np.float64) - s) / d)), 0)
    wide = s.dtype
    if ctx.version >= 27 and s.dtype in (np.dtype(np.float16), np.dtype(jnp.bfloat16)):
        if stash_type not in _RANGE_STASH:
            raise ValueError(f"Range: stash_type {stash_type} is neither FLOAT (1) nor DOUBLE (11)")
        wide = _RANGE_STASH[stash_type]
    i = np.arange(n, dtype=np.float64).astype(wide)
    return (s.astype(wide) + i * d.astype(wide)).astype(s.dtype)


def _symbolic_range(ctx, s, lim, d):
    if not isinstance(d, (int, np.integer)) or d == 0:
        raise NotImplementedError(
            f"Range({s}, {lim}, {d}) with a symbolic bound needs a static non-zero integer delta"
        )
    d = int(d)
    s = int(s) if isinstance(s, (int, np.integer)) else s
    lim = int(lim) if isinstance(lim, (int, np.integer)) else lim
    n = (lim - s + d - 1) // d if d > 0 else (s - lim - d - 1) // -d
    n = _jax_internal.max_dim(n, 0)
    dtype = ctx.out_dtype() or np.dtype(np.int64)
    return (materialize(shape_value([s])).reshape(()) + lax.iota(np.int64, n) * d).astype(dtype)


@onnx_op("EyeLike", 9)
def eye_like(ctx, x, *, dtype=None, k=0):
    from ..graph import np_dtype

    dt = np_dtype(dtype) if dtype is not None else x.dtype
    return jnp.eye(x.shape[0], x.shape[1], k=k, dtype=dt)


@onnx_op("Trilu", 14)
def trilu(ctx, x, k=None, *, upper=1):
    k = 0 if k is None else int(np.asarray(ctx.static(1)).reshape(()))
    return jnp.triu(x, k) if upper else jnp.tril(x, k)


@onnx_op("DepthToSpace", 11)
def depth_to_space(ctx, x, *, blocksize, mode="DCR"):
    b, c, h, w = x.shape
    bs = blocksize
    if mode == "DCR":
        y = x.reshape(b, bs, bs, c // bs**2, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(b, c // bs**2, bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(b, c // bs**2, h * bs, w * bs)


@onnx_op("SpaceToDepth", 13)
def space_to_depth(ctx, x, *, blocksize, mode="DCR"):
    """SpaceToDepth (``mode`` CRD from opset 28 orders channels before the block)."""
    b, c, h, w = x.shape
    bs = blocksize
    y = x.reshape(b, c, h // bs, bs, w // bs, bs)
    y = y.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else y.transpose(0, 1, 3, 5, 2, 4)
    return y.reshape(b, c * bs * bs, h // bs, w // bs)


@onnx_op("OneHot", 11)
def one_hot(ctx, indices, depth, values, *, axis=-1):
    """OneHot: negative indices count from ``depth``; out-of-range rows are all off."""
    depth = int(np.asarray(ctx.static(1)).reshape(()))
    idx = jnp.asarray(indices).astype(np.int64)
    idx = jnp.where(idx < 0, idx + depth, idx)
    rank = idx.ndim + 1
    axis = axis % rank
    shape = [1] * rank
    shape[axis] = depth
    ar = jnp.arange(depth).reshape(shape)
    hot = jnp.expand_dims(idx, axis) == ar
    return jnp.where(hot, values[1], values[0])


@onnx_op("Dropout", 12)
def dropout(ctx, x, ratio=None, training_mode=None, *, seed=None):
    """Dropout in inference mode (identity, mask all true); training mode is unsupported."""
    tm = ctx.static(2)
    if tm is not None and bool(np.asarray(tm)):
        r = ctx.static(1)
        if r is None or float(r) != 0.0:
            raise NotImplementedError("Dropout in training mode (random) has no deterministic lowering")
    return (x, jnp.ones(x.shape, bool)) if ctx.num_outputs > 1 else x


@onnx_op("Dropout", 7, until=10)
def dropout_7(ctx, x, *, ratio=0.5):
    return (x, jnp.ones(x.shape, bool)) if ctx.num_outputs > 1 else x


@onnx_op("CenterCropPad", 18)
def center_crop_pad(ctx, x, shape, *, axes=None):
    target = _ints(ctx.static(1))
    axes = _axes(axes if axes is not None else range(x.ndim), x.ndim)
    for a, t in zip(axes, target, strict=False):
        d = x.shape[a]
        if d > t:
            s = (d - t) // 2
            x = jnp.take(x, jnp.arange(s, s + t), axis=a)
        elif d < t:
            lo = (t - d) // 2
            w = [(0, 0)] * x.ndim
            w[a] = (lo, t - d - lo)
            x = jnp.pad(x, w)
    return x
