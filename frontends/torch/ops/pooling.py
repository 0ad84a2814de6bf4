"""Pooling: ``max_pool{2,3}d_with_indices``, ``avg_pool{1,2,3}d``,
``_adaptive_avg_pool{2,3}d`` / ``adaptive_avg_pool1d``, ``fractional_max_pool{2,3}d``
(``native_functions.yaml``; output sizes and divisors follow ``aten/src/ATen/native/Pool.h``
and ``AvgPoolKernel.cpp``, fractional windows ``FractionalMaxPooling.h``).

Max pooling's values are one ``reduce_window`` max over the -inf padded input (NaN where
a window has one), the form every backend emits as its native max pooling; when nothing
reads the indices (``F.max_pool2d`` without ``return_indices``) that is all the module
computes. The indices stack the ``prod(kernel)`` strided windows and take the first maximum,
or the last NaN of a window, as torch's CPU kernels do; a gradient through the values
(``jax.grad`` of the converted function) goes to the first maximum too (in a window holding
a NaN it goes where JAX's ``reduce_window`` gradient sends it, not to torch's last NaN:
the value itself is NaN either way). Dilated windows
(which JAX cannot differentiate as a ``reduce_window``) take their values from the stack.
"""

from __future__ import annotations

import itertools
import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from converter import _jax_internal

from ..registry import register
from ._util import acc_dtype, is_float

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


def _last_nan_first_max(w):
    """Position along the last axis that ATen's max pooling kernels keep (max, adaptive and
    fractional, 1-d to 3-d): they replace the running maximum on ``val > max || isnan(val)``,
    so the first maximum, or the last NaN (``argmax`` takes the first NaN)."""
    pos = lax.broadcasted_iota(np.int64, w.shape, w.ndim - 1)
    first = jnp.min(jnp.where(w == jnp.max(w, axis=-1, keepdims=True), pos, w.shape[-1] - 1), axis=-1)
    if not is_float(w.dtype):
        return first
    last_nan = jnp.max(jnp.where(jnp.isnan(w), pos, -1), axis=-1)
    return jnp.where(last_nan >= 0, last_nan, first)


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
    hi = [_max0(span - (n + pp)) for span, n, pp in zip(spans, sizes, p, strict=True)]
    lowest = jnp.asarray(_lowest(x.dtype), x.dtype)
    xp = lax.pad(x, lowest, [(0, 0, 0)] * 2 + [(pp, h, 0) for pp, h in zip(p, hi, strict=True)])
    stacked, table = _stacked_windows(x, xp, k, s, p, d, outs)
    choice = _last_nan_first_max(stacked)[..., None]
    static = all(isinstance(n, int) for n in x.shape)
    if static:
        idx = jnp.take_along_axis(jnp.broadcast_to(table, stacked.shape), choice, axis=-1)[..., 0]
    else:  # dynamic shapes: a one-hot select, not a gather with batching dims (ONNX-expressible)
        hot = lax.broadcasted_iota(choice.dtype, stacked.shape, stacked.ndim - 1) == choice
        idx = jnp.sum(jnp.where(hot, table, 0), axis=-1)
    if all(dd == 1 for dd in d):
        # the maximum (NaN when the window has one), as one reduce_window max: every
        # backend's native max pooling; its gradient (JAX's) also goes to the first maximum
        vals = lax.reduce_window(
            x,
            lowest,
            lax.max,
            window_dimensions=(1, 1, *k),
            window_strides=(1, 1, *s),
            padding=((0, 0), (0, 0), *zip(p, hi, strict=True)),
        )
    elif static:  # JAX cannot differentiate a dilated reduce_window max: the chosen element
        vals = jnp.take_along_axis(stacked, choice, axis=-1)[..., 0]
    else:
        vals = jnp.max(jnp.where(hot, stacked, lowest), axis=-1)
    if unbatched:
        vals, idx = vals[0], idx[0]
    return vals, idx


def _stacked_windows(x, xp, k, s, p, d, outs):
    """``(windows, table)``: the ``prod(k)`` strided windows of the padded input ``xp``
    stacked on a new last axis, and each window position's flat index into ``x``'s
    spatial dims (``(*outs, prod(k))`` int64)."""
    sizes = x.shape[2:]
    xnp = _xnp(*outs, *sizes)
    windows, flat = [], []
    for offs in itertools.product(*(range(kk) for kk in k)):
        starts = [o * dd for o, dd in zip(offs, d, strict=True)]
        limits = [st + (o - 1) * ss + 1 for st, o, ss in zip(starts, outs, s, strict=True)]
        windows.append(lax.slice(xp, [0, 0, *starts], [*x.shape[:2], *limits], [1, 1, *s]))
        pos = [
            xnp.arange(o, dtype=np.int64) * ss - pp + st
            for o, ss, pp, st in zip(outs, s, p, starts, strict=True)
        ]
        flat.append(_flat_index(pos, sizes, xnp))
    return jnp.stack(windows, axis=-1), jnp.asarray(xnp.stack(flat, axis=-1))


def _flat_index(pos, sizes, xnp=np):
    """Row-major flat index over the spatial dims of every output position."""
    out = xnp.zeros([q.shape[0] for q in pos], np.int64)
    for dnum, q in enumerate(pos):
        shape = [1] * len(pos)
        shape[dnum] = q.shape[0]
        out = out + q.reshape(shape) * _product(sizes[dnum + 1 :])
    return out


def _product(sizes) -> int:
    """The product of ``sizes`` (ints or symbolic dimensions, then a symbolic dimension)."""
    out = 1
    for n in sizes:
        out = out * n
    return out


def _max0(n):
    """``max(0, n)`` of an int or a symbolic dimension (whose sign JAX may not decide: the
    right padding of a strided window is 0 or 1 by the size's parity)."""
    return max(0, n) if isinstance(n, (int, np.integer)) else _jax_internal.max_dim(n, 0)


def _xnp(*sizes):
    """NumPy for index tables over static sizes (constants), ``jax.numpy`` when a size is a
    symbolic dimension (a dynamic image size: the table is computed from it at run time)."""
    return np if all(isinstance(n, (int, np.integer)) for n in sizes) else jnp


@register(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``(values, indices)`` of 2-d max pooling over ``(N, C, H, W)`` or ``(C, H, W)``;
    indices are flat ``h * W + w`` positions in each input plane (int64)."""
    return _max_pool(x, 2, kernel_size, stride, padding, dilation, ceil_mode)


@register(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``(values, indices)`` of 3-d max pooling; indices are flat ``(d * H + h) * W + w``."""
    return _max_pool(x, 3, kernel_size, stride, padding, dilation, ceil_mode)


def _rounded(x, dtype):
    """``x`` (computed in float32 for a 16-bit ``dtype``) rounded to ``dtype`` as each c10
    ``BFloat16``/``Half`` operation rounds its result (``reduce_precision``, which XLA keeps
    where it may otherwise carry excess precision)."""
    if np.dtype(dtype).itemsize != 2:
        return x
    info = jnp.finfo(dtype)
    return lax.reduce_precision(x, exponent_bits=info.nexp, mantissa_bits=info.nmant)


def _intervals(sample, size: int, out: int, pool: int):
    """ATen's ``generate_intervals``: the window starts ``(..., out)`` int64 along one dim for
    the per-plane ``sample`` ``(...)`` in ``[0, 1)``: ``int((i + u) * alpha) - int(u *
    alpha)`` with ``alpha = (size - pool) / (out - 1)``, all in the sample's dtype, and the
    last window ending at ``size``."""
    dt = np.dtype(sample.dtype)
    last = jnp.full((*sample.shape, min(out, 1)), size - pool, np.int64)
    if out <= 1:
        return last
    alpha = (np.asarray(size - pool, dt) / np.asarray(out - 1, dt)).astype(dt)  # rounded as c10
    work = acc_dtype(dt)
    u = sample.astype(work)[..., None]
    i = jnp.asarray(np.arange(out - 1).astype(dt), work)
    scaled = _rounded(_rounded(i + u, dt) * alpha.astype(work), dt)
    first = _rounded(u * alpha.astype(work), dt)
    starts = scaled.astype(np.int32).astype(np.int64) - first.astype(np.int32).astype(np.int64)
    return jnp.concatenate([starts, last], axis=-1)


def _fractional_max_pool(x, nd: int, kernel_size, output_size, samples):
    x, unbatched = _batched(x, nd)
    n, c, sizes = x.shape[0], x.shape[1], x.shape[2:]
    k, outs = _per_dim(kernel_size, nd), _per_dim(output_size, nd)  # o + k - 1 <= size: export checks
    # ATen's sample order per plane: (W, H) in 2-d, (T, H, W) in 3-d
    which = [1, 0] if nd == 2 else [0, 1, 2]
    samples = jnp.broadcast_to(samples, (n, c, nd))
    starts = [
        _intervals(samples[..., which[d]], sizes[d], outs[d], k[d]) for d in range(nd)
    ]  # (N, C, out_d) each
    strides = [int(np.prod(sizes[d + 1 :])) for d in range(nd)]
    # every window position at once: (N, C, *outs, prod(k)) flat indices, the kernel offsets in
    # row-major order on the last axis, then one gather of them all
    offsets = np.array(list(itertools.product(*(range(kk) for kk in k))), np.int64).T  # (nd, prod(k))
    pos = 0
    for d in range(nd):
        shape = [n, c] + [outs[e] if e == d else 1 for e in range(nd)] + [1]
        pos = pos + (starts[d].reshape(shape) + offsets[d]) * strides[d]
    p = jnp.broadcast_to(pos, (n, c, *outs, offsets.shape[1])).reshape(n, c, -1, offsets.shape[1])
    w = jnp.take_along_axis(x.reshape(n, c, -1), p.reshape(n, c, -1), axis=-1).reshape(p.shape)
    choice = _last_nan_first_max(w)[..., None]
    vals = jnp.take_along_axis(w, choice, axis=-1)[..., 0].reshape(n, c, *outs)
    idx = jnp.take_along_axis(p, choice, axis=-1)[..., 0].reshape(n, c, *outs)
    return (vals[0], idx[0]) if unbatched else (vals, idx)


@register(aten.fractional_max_pool2d.default, aten.fractional_max_pool3d.default)
def fractional_max_pool(x, kernel_size, output_size, random_samples):
    """``(values, indices)`` of fractional max pooling (Graham 2015) over the trailing
    ``len(output_size)`` dims of ``(N, C, *spatial)`` or ``(C, *spatial)`` ``x``: pseudo-random
    overlapping windows of ``kernel_size`` whose starts come from ``random_samples``
    (``(N, C, nd)``, in ``x``'s dtype; ATen's ``generate_intervals``). Indices are flat over
    the spatial dims (int64). The op is deterministic given ``random_samples``; the random
    draw of ``F.fractional_max_pool2d`` is its own ``rand`` node.

    Raises ``ValueError`` when an output size plus the kernel size exceeds the input."""
    nd = len(output_size)
    return _fractional_max_pool(x, nd, kernel_size, output_size, random_samples)


def _avg_divisor(n, k, s, p, o, count_include_pad):
    """Per-output divisors along one dim (torch's ``pool_size`` / clipped window size)."""
    xnp = _xnp(n, o)
    start = xnp.arange(o, dtype=np.int64) * s - p
    end = xnp.minimum(start + k, n + p)
    full = end - start
    clipped = xnp.minimum(end, n) - xnp.maximum(start, 0)
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
    hi = [_max0((o - 1) * ss + kk - (n + pp)) for o, ss, kk, n, pp in zip(outs, s, k, sizes, p, strict=True)]
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
            div = div[..., None] * _avg_divisor(n, kk, ss, pp, o, count_include_pad)
        out = total / jnp.asarray(div).astype(x.dtype)
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
    choice = _last_nan_first_max(windows)[..., None]
    vals = jnp.take_along_axis(windows, choice, axis=-1)[..., 0]
    idx = jnp.take_along_axis(jnp.broadcast_to(jnp.asarray(flat), windows.shape), choice, axis=-1)[..., 0]
    return vals, idx


@register(aten.adaptive_max_pool2d.default, aten.adaptive_max_pool3d.default)
def adaptive_max_pool(x, output_size):
    """``(values, indices)`` of adaptive max pooling over the trailing ``len(output_size)``
    dims: the first maximum (last NaN) of each adaptive window, indices flat over the spatial dims."""
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
