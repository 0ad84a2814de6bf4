"""Gather/scatter family and data-dependent selection: Gather, GatherElements, GatherND,
ScatterElements, ScatterND, Scatter, Compress, NonZero, ReverseSequence, Unique
(https://onnx.ai/onnx/operators/). Negative indices count from the end of the axis.
Ops whose output shape depends on values (Compress, NonZero, Unique) need those values at
conversion time."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import onnx_op


def _grids(shape) -> list:
    """``jnp.indices(shape, sparse=True)`` for shapes holding ``jax.export`` symbolic
    dimensions too (``broadcasted_iota`` per axis)."""
    ones = [1] * len(shape)
    return [lax.broadcasted_iota(np.int64, (*ones[:d], n, *ones[d + 1 :]), d) for d, n in enumerate(shape)]


def _norm(idx, dim):
    idx = jnp.asarray(idx).astype(np.int64)
    return jnp.where(idx < 0, idx + dim, idx)


@onnx_op("Gather", 1)
def gather(ctx, x, indices, *, axis=0):
    axis = axis % x.ndim
    return jnp.take(x, _norm(indices, x.shape[axis]), axis=axis, mode="clip")


@onnx_op("GatherElements", 11)
def gather_elements(ctx, x, indices, *, axis=0):
    axis = axis % x.ndim
    return jnp.take_along_axis(x, _norm(indices, x.shape[axis]), axis=axis, mode="clip")


@onnx_op("GatherND", 11)
def gather_nd(ctx, x, indices, *, batch_dims=0):
    """GatherND: the last index dimension addresses the leading data dimensions after
    ``batch_dims`` shared batch dimensions."""
    b = batch_dims
    k = indices.shape[-1]
    bshape = x.shape[:b]
    nb = int(np.prod(bshape)) if b else 1
    xd = x.reshape((nb,) + x.shape[b:])
    idx = indices.reshape((nb, -1, k))
    idx = _norm(idx, jnp.asarray(x.shape[b : b + k]))
    bi = jnp.arange(nb).reshape(nb, 1)
    out = xd[(bi,) + tuple(idx[..., j] for j in range(k))]
    return out.reshape(tuple(indices.shape[:-1]) + x.shape[b + k :])


def _scatter_apply(ref, upd, reduction):
    if reduction in (None, "none"):
        return ref.set(upd, mode="drop")
    return {"add": ref.add, "mul": ref.multiply, "max": ref.max, "min": ref.min}[reduction](upd, mode="drop")


@onnx_op("ScatterElements", 11)
def scatter_elements(ctx, x, indices, updates, *, axis=0, reduction="none"):
    axis = axis % x.ndim
    idx = _norm(indices, x.shape[axis])
    grids = _grids(indices.shape)
    grids[axis] = idx
    return _scatter_apply(jnp.asarray(x).at[tuple(grids)], updates, reduction)


@onnx_op("Scatter", 9, until=9)
def scatter(ctx, x, indices, updates, *, axis=0):
    return scatter_elements(ctx, x, indices, updates, axis=axis)


@onnx_op("ScatterND", 11)
def scatter_nd(ctx, x, indices, updates, *, reduction="none"):
    k = indices.shape[-1]
    idx = _norm(indices, jnp.asarray(x.shape[:k]))
    # x may be a constant (NumPy) when the data is known at conversion time
    return _scatter_apply(jnp.asarray(x).at[tuple(idx[..., j] for j in range(k))], updates, reduction)


@onnx_op("Compress", 11)
def compress(ctx, x, condition, *, axis=None):
    cond = np.asarray(ctx.static(1)).astype(bool)
    if axis is None:
        x = x.reshape(-1)
        axis = 0
    keep = np.nonzero(cond[: x.shape[axis]])[0]
    return jnp.take(x, keep, axis=axis)


@onnx_op("NonZero", 9)
def non_zero(ctx, x):
    return np.array(np.nonzero(np.asarray(ctx.static(0))), np.int64)


@onnx_op("ReverseSequence", 10)
def reverse_sequence(ctx, x, lengths, *, batch_axis=1, time_axis=0):
    t = x.shape[time_axis]
    ar = jnp.arange(t).reshape([-1 if a == time_axis else 1 for a in range(x.ndim)])
    ln = jnp.asarray(lengths).astype(np.int64).reshape([-1 if a == batch_axis else 1 for a in range(x.ndim)])
    src = jnp.where(ar < ln, ln - 1 - ar, ar)
    src = jnp.broadcast_to(src, x.shape)
    return jnp.take_along_axis(x, src, axis=time_axis)


@onnx_op("Unique", 11)
def unique(ctx, x, *, axis=None, sorted=1):  # noqa: A002
    """Unique on a value known at conversion time (its output shape depends on the data)."""
    v = np.asarray(ctx.static(0))
    if axis is None:
        v = v.reshape(-1)
        ax = 0
    else:
        ax = axis % v.ndim
    u, idx, inv, cnt = np.unique(v, return_index=True, return_inverse=True, return_counts=True, axis=ax)
    if not sorted:
        order = np.argsort(idx, kind="stable")
        u = np.take(u, order, axis=ax)
        remap = np.empty_like(order)
        remap[order] = np.arange(len(order))
        inv = remap[inv.reshape(-1)]
        idx, cnt = idx[order], cnt[order]
    return u, idx.astype(np.int64), inv.reshape(-1).astype(np.int64), cnt.astype(np.int64)


@onnx_op("MaxUnpool", 9)
def max_unpool(ctx, x, indices, output_shape=None, *, kernel_shape, pads=None, strides=None):
    """MaxUnpool: scatter ``x`` to the flat positions ``indices`` of a zero tensor of the
    shape MaxPool's formula inverts to; an ``output_shape`` larger than that (the spec's way to
    disambiguate sizes) pads that tensor with zeros at the end of each axis, the indices still
    counting positions in the inferred shape (the ONNX reference implementation and node tests).
    An ``output_shape`` smaller than the inferred shape in some axis is refused (ValueError)."""
    n = len(kernel_shape)
    s = strides or [1] * n
    p = pads or [0] * (2 * n)
    sp = [(x.shape[2 + i] - 1) * s[i] - p[i] - p[i + n] + kernel_shape[i] for i in range(n)]
    inferred = list(x.shape[:2]) + sp
    flat = jnp.zeros(int(np.prod(inferred)), x.dtype)
    flat = flat.at[jnp.asarray(indices).reshape(-1)].set(x.reshape(-1), mode="drop")
    out = flat.reshape(inferred)
    shape = ctx.static(2)
    if shape is None:
        return out
    out_shape = [int(v) for v in np.asarray(shape).reshape(-1)]
    if len(out_shape) != len(inferred) or any(o < i for o, i in zip(out_shape, inferred, strict=True)):
        raise ValueError(
            f"MaxUnpool output_shape {out_shape} is smaller than the unpooled shape {inferred} "
            "(kernel_shape, strides and pads give it) in some axis"
        )
    return jnp.pad(out, [(0, o - i) for o, i in zip(out_shape, inferred, strict=True)])


@onnx_op("Col2Im", 18)
def col2im(ctx, x, image_shape, block_shape, *, dilations=None, pads=None, strides=None):
    """Col2Im: sum each column's block back into the image (inverse of im2col)."""
    img = [int(v) for v in np.asarray(ctx.static(1)).reshape(-1)]
    blk = [int(v) for v in np.asarray(ctx.static(2)).reshape(-1)]
    n = len(img)
    d = dilations or [1] * n
    s = strides or [1] * n
    p = pads or [0] * (2 * n)
    batch = x.shape[0]
    chans = x.shape[1] // int(np.prod(blk))
    padded = [img[i] + p[i] + p[i + n] for i in range(n)]
    out_pos = [(padded[i] - d[i] * (blk[i] - 1) - 1) // s[i] + 1 for i in range(n)]
    blk_idx = np.stack(np.meshgrid(*[np.arange(b) for b in blk], indexing="ij"), -1).reshape(-1, n)
    loc_idx = np.stack(np.meshgrid(*[np.arange(o) for o in out_pos], indexing="ij"), -1).reshape(-1, n)
    coords = blk_idx[:, None, :] * np.asarray(d) + loc_idx[None, :, :] * np.asarray(s)  # (B, L, n)
    strides_flat = [int(np.prod(padded[i + 1 :])) for i in range(n)]
    flat_idx = (coords * np.asarray(strides_flat)).sum(-1).reshape(-1)
    cols = x.reshape(batch, chans, -1)
    out = jnp.zeros((batch, chans, int(np.prod(padded))), x.dtype).at[:, :, flat_idx].add(cols)
    out = out.reshape((batch, chans) + tuple(padded))
    crop = tuple(slice(p[i], p[i] + img[i]) for i in range(n))
    return out[(slice(None), slice(None)) + crop]


@onnx_op("NonMaxSuppression", 11)
def non_max_suppression(
    ctx, boxes, scores, max_output=None, iou_threshold=None, score_threshold=None, *, center_point_box=0
):
    """NonMaxSuppression on values known at conversion time (the number of selected boxes
    depends on the data). Returns (num_selected, 3) rows (batch, class, box)."""
    b = np.asarray(ctx.static(0), np.float64)
    sc = np.asarray(ctx.static(1), np.float64)
    mo = ctx.static(2)
    mo = 0 if mo is None else int(np.asarray(mo).reshape(-1)[0])
    iou_t = ctx.static(3)
    iou_t = 0.0 if iou_t is None else float(np.asarray(iou_t).reshape(-1)[0])
    st = ctx.static(4)
    st = None if st is None else float(np.asarray(st).reshape(-1)[0])
    if center_point_box:
        xc, yc, w, h = (b[..., i] for i in range(4))
        b = np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], -1)
    y1 = np.minimum(b[..., 0], b[..., 2])
    y2 = np.maximum(b[..., 0], b[..., 2])
    x1 = np.minimum(b[..., 1], b[..., 3])
    x2 = np.maximum(b[..., 1], b[..., 3])
    area = (y2 - y1) * (x2 - x1)
    out = []
    for bi in range(sc.shape[0]):
        for ci in range(sc.shape[1]):
            s = sc[bi, ci]
            order = [i for i in np.argsort(-s, kind="stable") if st is None or s[i] > st]
            keep: list[int] = []
            for i in order:
                if len(keep) >= mo:
                    break
                ok = True
                for k in keep:
                    iy1, iy2 = max(y1[bi, i], y1[bi, k]), min(y2[bi, i], y2[bi, k])
                    ix1, ix2 = max(x1[bi, i], x1[bi, k]), min(x2[bi, i], x2[bi, k])
                    inter = max(iy2 - iy1, 0) * max(ix2 - ix1, 0)
                    union = area[bi, i] + area[bi, k] - inter
                    if union > 0 and inter / union > iou_t:
                        ok = False
                        break
                if ok:
                    keep.append(i)
            out += [[bi, ci, k] for k in keep]
    return np.array(out, np.int64).reshape(-1, 3)


@onnx_op("TensorScatter", 24)
def tensor_scatter(ctx, past, update, write_indices=None, *, axis=-2, mode="linear"):
    """TensorScatter: write ``update`` into ``past`` along ``axis`` from each batch entry's
    write index (modulo the axis length in ``circular`` mode)."""
    axis = axis % past.ndim
    seq, max_seq = update.shape[axis], past.shape[axis]
    start = (
        jnp.zeros(past.shape[0], np.int64)
        if write_indices is None
        else jnp.asarray(write_indices).astype(np.int64)
    )
    shape = [1] * past.ndim
    shape[0] = -1
    pos = start.reshape(shape) + jnp.arange(seq).reshape([seq if a == axis else 1 for a in range(past.ndim)])
    if mode == "circular":
        pos = jnp.mod(pos, max_seq)
    pos = jnp.broadcast_to(pos, update.shape)
    grids = _grids(update.shape)
    grids[axis] = pos
    return past.at[tuple(grids)].set(update, mode="drop")
