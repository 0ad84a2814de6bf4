"""Gather/scatter family and data-dependent selection: Gather, GatherElements, GatherND,
ScatterElements, ScatterND, Scatter, Compress, NonZero, ReverseSequence, Unique
(https://onnx.ai/onnx/operators/). Negative indices count from the end of the axis.
Ops whose output shape depends on values (Compress, NonZero, Unique) need those values at
conversion time."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..registry import onnx_op


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
    grids = list(jnp.indices(indices.shape, sparse=True))
    grids[axis] = idx
    return _scatter_apply(x.at[tuple(grids)], updates, reduction)


@onnx_op("Scatter", 9, until=9)
def scatter(ctx, x, indices, updates, *, axis=0):
    return scatter_elements(ctx, x, indices, updates, axis=axis)


@onnx_op("ScatterND", 11)
def scatter_nd(ctx, x, indices, updates, *, reduction="none"):
    k = indices.shape[-1]
    idx = _norm(indices, jnp.asarray(x.shape[:k]))
    return _scatter_apply(x.at[tuple(idx[..., j] for j in range(k))], updates, reduction)


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
