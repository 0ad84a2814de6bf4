"""Pooling: ``max_pool{2,3}d_with_indices``, ``avg_pool{1,2,3}d``,
``_adaptive_avg_pool{2,3}d`` / ``adaptive_avg_pool1d`` (``native_functions.yaml``; output
sizes and divisors follow ``aten/src/ATen/native/Pool.h`` and ``AvgPoolKernel.cpp``).

Max pooling stacks the ``prod(kernel)`` strided windows of the (-inf padded) input and takes
the first maximum (NaN counts as the maximum), so indices, values and the gradient (which
goes to the chosen element) match torch's CPU kernel.
"""

from __future__ import annotations

import itertools
import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import register
from ._util import acc_dtype, arg_extreme

aten = __import__("torch").ops.aten


def _per_dim(v, nd, default=None):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    if not v:
        v = list(default)
    return v * nd if len(v) == 1 else v


def _out_size(size, k, s, p, d, ceil_mode):
    """``pooling_output_shape``: windows that start in the right padding are dropped."""
    n = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = n // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _lowest(dtype):
    if jnp.issubdtype(dtype, jnp.floating):
        return -jnp.inf
    return jnp.iinfo(dtype).min


def _batched(x, nd):
    return (x[None], True) if x.ndim == nd + 1 else (x, False)


def _max_pool(x, nd, kernel_size, stride, padding, dilation, ceil_mode):
    x, unbatched = _batched(x, nd)
    k = _per_dim(kernel_size, nd)
    s = _per_dim(stride, nd, k)
    p = _per_dim(padding, nd)
    d = _per_dim(dilation, nd)
    sizes = x.shape[2:]
    outs = [
        _out_size(n, kk, ss, pp, dd, ceil_mode) for n, kk, ss, pp, dd in zip(sizes, k, s, p, d, strict=True)
    ]
    spans = [(o - 1) * ss + dd * (kk - 1) + 1 for o, ss, dd, kk in zip(outs, s, d, k, strict=True)]
    hi = [max(0, span - (n + pp)) for span, n, pp in zip(spans, sizes, p, strict=True)]
    cfg = [(0, 0, 0)] * 2 + [(pp, h, 0) for pp, h in zip(p, hi, strict=True)]
    xp = lax.pad(x, jnp.asarray(_lowest(x.dtype), x.dtype), cfg)
    windows, flat = [], []
    for offs in itertools.product(*(range(kk) for kk in k)):
        starts = [o * dd for o, dd in zip(offs, d, strict=True)]
        limits = [st + (o - 1) * ss + 1 for st, o, ss in zip(starts, outs, s, strict=True)]
        windows.append(lax.slice(xp, [0, 0, *starts], [*x.shape[:2], *limits], [1, 1, *s]))
        pos = [np.arange(o) * ss - pp + st for o, ss, pp, st in zip(outs, s, p, starts, strict=True)]
        flat.append(_flat_index(pos, sizes))
    stacked = jnp.stack(windows, axis=-1)
    choice = arg_extreme(stacked, stacked.ndim - 1)[..., None]
    vals = jnp.take_along_axis(stacked, choice, axis=-1)[..., 0]
    table = jnp.asarray(np.stack(flat, axis=-1))
    idx = jnp.take_along_axis(jnp.broadcast_to(table, stacked.shape), choice, axis=-1)[..., 0]
    if unbatched:
        vals, idx = vals[0], idx[0]
    return vals, idx


def _flat_index(pos, sizes):
    """Row-major flat index over the spatial dims of every output position."""
    out = np.zeros([len(q) for q in pos], np.int64)
    for dnum, q in enumerate(pos):
        shape = [1] * len(pos)
        shape[dnum] = len(q)
        out = out + q.reshape(shape) * int(np.prod(sizes[dnum + 1 :]))
    return out


@register(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``(values, indices)`` of 2-d max pooling over ``(N, C, H, W)`` or ``(C, H, W)``;
    indices are flat ``h * W + w`` positions in each input plane (int64)."""
    return _max_pool(x, 2, kernel_size, stride, padding, dilation, ceil_mode)


@register(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``(values, indices)`` of 3-d max pooling; indices are flat ``(d * H + h) * W + w``."""
    return _max_pool(x, 3, kernel_size, stride, padding, dilation, ceil_mode)


def _avg_divisor(n, k, s, p, o, count_include_pad):
    """Per-output divisors along one dim (torch's ``pool_size`` / clipped window size)."""
    start = np.arange(o) * s - p
    end = np.minimum(start + k, n + p)
    full = end - start
    clipped = np.minimum(end, n) - np.maximum(start, 0)
    return full if count_include_pad else clipped


def _avg_pool(x, nd, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    x, unbatched = _batched(x, nd)
    dt = x.dtype
    x = x.astype(acc_dtype(dt))
    k = _per_dim(kernel_size, nd)
    s = _per_dim(stride, nd, k)
    p = _per_dim(padding, nd)
    sizes = x.shape[2:]
    outs = [_out_size(n, kk, ss, pp, 1, ceil_mode) for n, kk, ss, pp in zip(sizes, k, s, p, strict=True)]
    hi = [max(0, (o - 1) * ss + kk - (n + pp)) for o, ss, kk, n, pp in zip(outs, s, k, sizes, p, strict=True)]
    total = lax.reduce_window(
        x,
        jnp.asarray(0, x.dtype),
        lax.add,
        window_dimensions=(1, 1, *k),
        window_strides=(1, 1, *s),
        padding=((0, 0), (0, 0), *zip(p, hi, strict=True)),
    )
    if divisor_override:
        out = total / divisor_override
    else:
        div = np.ones((), np.int64)
        for n, kk, ss, pp, o in zip(sizes, k, s, p, outs, strict=True):
            div = np.multiply.outer(div, _avg_divisor(n, kk, ss, pp, o, count_include_pad))
        out = total / jnp.asarray(div.astype(np.dtype(x.dtype)))
    if not jnp.issubdtype(dt, jnp.floating):
        out = jnp.trunc(out)
    return out[0] if unbatched else out


def _avg_rule(nd):
    def rule(
        x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
    ):  # noqa: E501
        return _avg_pool(x, nd, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)

    rule.__doc__ = (
        f"{nd}-d average pooling: window sums divided by the window size counted over the "
        "padded input (``count_include_pad``) or over the input only, or by ``divisor_override``."
    )
    return rule


register(aten.avg_pool2d.default)(_avg_rule(2))
register(aten.avg_pool3d.default)(_avg_rule(3))


@register(aten.avg_pool1d.default)
def avg_pool1d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    """1-d average pooling (no ``divisor_override`` in this schema)."""
    return _avg_pool(x, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def _adaptive_mean(x, axis, out):
    """Mean over torch's adaptive windows ``[floor(i*n/out), ceil((i+1)*n/out))`` along ``axis``."""
    n = x.shape[axis]
    if n % out == 0:
        shape = x.shape[:axis] + (out, n // out) + x.shape[axis + 1 :]
        return jnp.mean(x.reshape(shape), axis=axis + 1)
    parts = []
    for i in range(out):
        a, b = (i * n) // out, math.ceil((i + 1) * n / out)
        parts.append(jnp.mean(lax.slice_in_dim(x, a, b, axis=axis), axis=axis, keepdims=True))
    return jnp.concatenate(parts, axis=axis)


def _adaptive_avg(x, output_size):
    nd = len(output_size)
    dt = x.dtype
    x = x.astype(acc_dtype(dt))
    for i, o in enumerate(output_size):
        x = _adaptive_mean(x, x.ndim - nd + i, o)
    return x


@register(
    aten._adaptive_avg_pool2d.default,
    aten._adaptive_avg_pool3d.default,
    aten.adaptive_avg_pool1d.default,
)
def adaptive_avg_pool(x, output_size):
    """Adaptive average pooling of the trailing ``len(output_size)`` dims: output ``i``
    averages input ``[floor(i*n/out), ceil((i+1)*n/out))`` (``AdaptivePooling.h``)."""
    return _adaptive_avg(x, list(output_size))


def _adaptive_windows(n, out):
    """Per output index, the input positions of torch's adaptive window
    ``[floor(i*n/out), ceil((i+1)*n/out))``, padded to the longest window, and a validity
    mask."""
    starts = [(i * n) // out for i in range(out)]
    ends = [math.ceil((i + 1) * n / out) for i in range(out)]
    k = max(e - s for s, e in zip(starts, ends, strict=True))
    pos = np.array([[min(s + j, n - 1) for j in range(k)] for s in starts], np.int64)
    valid = np.array([[s + j < e for j in range(k)] for s, e in zip(starts, ends, strict=True)])
    return pos, valid


def _adaptive_max(x, output_size):
    nd = len(output_size)
    lead = x.ndim - nd
    sizes = x.shape[lead:]
    index, mask, flat = [], np.ones((), bool), np.zeros((), np.int64)
    for k, (n, o) in enumerate(zip(sizes, output_size, strict=True)):
        pos, valid = _adaptive_windows(n, o)
        shape = [1] * (2 * nd)
        shape[k], shape[nd + k] = pos.shape
        index.append(jnp.asarray(pos.reshape(shape)))
        mask = mask & valid.reshape(shape)
        flat = flat + pos.reshape(shape) * int(np.prod(sizes[k + 1 :]))
    windows = x[(Ellipsis, *index)]  # (..., out_1..out_nd, k_1..k_nd)
    windows = jnp.where(jnp.asarray(mask), windows, jnp.asarray(_lowest(x.dtype), x.dtype))
    windows = windows.reshape(*windows.shape[: lead + nd], -1)
    flat = np.broadcast_to(flat, mask.shape).reshape(*mask.shape[:nd], -1)
    choice = arg_extreme(windows, windows.ndim - 1)[..., None]
    vals = jnp.take_along_axis(windows, choice, axis=-1)[..., 0]
    idx = jnp.take_along_axis(jnp.broadcast_to(jnp.asarray(flat), windows.shape), choice, axis=-1)[..., 0]
    return vals, idx


@register(aten.adaptive_max_pool2d.default, aten.adaptive_max_pool3d.default)
def adaptive_max_pool(x, output_size):
    """``(values, indices)`` of adaptive max pooling over the trailing ``len(output_size)``
    dims: the first maximum of each adaptive window, indices flat over the spatial dims."""
    return _adaptive_max(x, list(output_size))


@register(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(
    grad_output, x, kernel_size, stride, padding, dilation, ceil_mode, indices
):
    """Gradient of 2-d max pooling with respect to ``x`` (``(N, C, H, W)`` or ``(C, H, W)``):
    each ``grad_output`` element is added at the flat ``h * W + w`` position ``indices``
    recorded for it in its input plane (``max_pool2d_with_indices_backward``'s CPU kernel);
    positions no window chose get zero. The pooling parameters only shaped ``indices``."""
    lead, plane = x.shape[:-2], x.shape[-2] * x.shape[-1]
    rows = int(np.prod(lead))
    g = grad_output.reshape(rows, -1).astype(x.dtype)
    idx = indices.reshape(rows, -1)
    row = lax.broadcasted_iota(np.int64, idx.shape, 0)
    out = jnp.zeros((rows, plane), x.dtype).at[row, idx].add(g, mode="drop")
    return out.reshape(x.shape)
