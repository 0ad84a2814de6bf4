"""Reductions and normalized exponentials: Reduce*, ArgMax/ArgMin, Softmax, LogSoftmax,
Hardmax, CumSum, CumProd, TopK (https://onnx.ai/onnx/operators/).

Reduce ops take ``axes`` as an attribute before opset 18 (13 for ReduceSum) and as an input
after; an empty ``axes`` reduces everything unless ``noop_with_empty_axes``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import onnx_op


def _reduce_axes(ctx, x, axes_attr, noop):
    if ctx.version >= (13 if ctx.node.op_type == "ReduceSum" else 18):
        axes = ctx.static(1)
    else:
        axes = axes_attr
    if axes is None or len(np.asarray(axes).reshape(-1)) == 0:
        return None if not noop else ()
    return tuple(int(a) % max(x.ndim, 1) for a in np.asarray(axes).reshape(-1))


def _log_sum_exp(x, axis, keepdims):
    if x.size == 0:
        return jnp.log(jnp.sum(jnp.exp(x), axis=axis, keepdims=keepdims))
    return jax.nn.logsumexp(x, axis=axis, keepdims=keepdims)


def _empty_safe(fn, identity):
    def red(x, axis, keepdims):
        if x.size == 0:
            shape = jnp.sum(jnp.zeros(x.shape, x.dtype), axis=axis, keepdims=keepdims).shape
            return jnp.full(shape, identity(x.dtype), x.dtype)
        return fn(x, axis=axis, keepdims=keepdims)

    return red


def _min_of(dtype):
    return -np.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).min


def _max_of(dtype):
    return np.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).max


_REDUCERS = {
    "ReduceSum": (jnp.sum, 1),
    "ReduceMean": (jnp.mean, 1),
    "ReduceProd": (jnp.prod, 1),
    "ReduceMax": (_empty_safe(jnp.max, _min_of), 1),
    "ReduceMin": (_empty_safe(jnp.min, _max_of), 1),
    "ReduceL1": (lambda x, axis, keepdims: jnp.sum(jnp.abs(x), axis=axis, keepdims=keepdims), 1),
    "ReduceL2": (lambda x, axis, keepdims: jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=keepdims)), 1),
    "ReduceSumSquare": (lambda x, axis, keepdims: jnp.sum(x * x, axis=axis, keepdims=keepdims), 1),
    "ReduceLogSum": (lambda x, axis, keepdims: jnp.log(jnp.sum(x, axis=axis, keepdims=keepdims)), 1),
    "ReduceLogSumExp": (_log_sum_exp, 1),
}


def _reduce_rule(fn):
    def rule(ctx, x, axes_input=None, *, keepdims=1, noop_with_empty_axes=0, **attr):
        ax = _reduce_axes(ctx, x, attr.get("axes"), noop_with_empty_axes)
        if ax == ():
            return x
        if x.dtype == jnp.bool_ and ctx.node.op_type in ("ReduceMax", "ReduceMin"):
            red = jnp.any if ctx.node.op_type == "ReduceMax" else jnp.all
            return red(x, axis=ax, keepdims=bool(keepdims))
        if x.dtype == jnp.bool_:
            return fn(x.astype(np.int8), axis=ax, keepdims=bool(keepdims)).astype(bool)
        return fn(x, axis=ax, keepdims=bool(keepdims))

    return rule


for _name, (_fn, _since) in _REDUCERS.items():
    onnx_op(_name, _since)(_reduce_rule(_fn))


def _arg(fn):
    def rule(ctx, x, *, axis=0, keepdims=1, select_last_index=0):
        if select_last_index:
            flipped = jnp.flip(x, axis)
            idx = x.shape[axis] - 1 - fn(flipped, axis=axis)
        else:
            idx = fn(x, axis=axis)
        idx = idx.astype(np.int64)
        return jnp.expand_dims(idx, axis) if keepdims else idx

    return rule


onnx_op("ArgMax", 1)(_arg(jnp.argmax))
onnx_op("ArgMin", 1)(_arg(jnp.argmin))


def coerced(fn, x, axis):
    """Opset < 13 softmax flattens to 2-D at ``axis``."""
    shape = x.shape
    axis = axis % x.ndim
    flat = x.reshape(math.prod(shape[:axis]), math.prod(shape[axis:]))
    return fn(flat, axis=1).reshape(shape)


def _hardmax(x, axis):
    idx = jnp.argmax(x, axis=axis)
    return jax.nn.one_hot(idx, x.shape[axis], axis=axis, dtype=x.dtype)


def _shifted(x, axis):
    """``x - max(x)`` along ``axis``, shifted a second time by its own maximum.

    Mathematically the second shift is zero. XLA CPU, though, may compute ``x``'s producer
    twice -- once rounded (for the maximum) and once contracted into an FMA with the
    subtraction -- so that the largest element of ``x - max(x)`` is off by the rounding error
    of ``x``, which exceeds the exponent range for logits above ~1e9 and turns ``exp`` into
    all zeros or infinities (NaN after normalizing). Both copies of the second shift are
    computed alike, so its maximum is 0. See ``tests/frontends/onnx/xla_cpu_repro.py``."""
    d = x - lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True))
    return d - lax.stop_gradient(jnp.max(d, axis=axis, keepdims=True))


def softmax(x, axis):
    """Softmax (``exp(x - max) / sum``) along ``axis``, robust to XLA's recomputation of the
    shift (see :func:`_shifted`)."""
    e = jnp.exp(_shifted(x, axis))
    return e / jnp.sum(e, axis=axis, keepdims=True)


def _log_softmax(x, axis):
    """LogSoftmax (``x - max - log(sum(exp(x - max)))``) along ``axis``."""
    d = _shifted(x, axis)
    return d - jnp.log(jnp.sum(jnp.exp(d), axis=axis, keepdims=True))


for _name, _fn in {"Softmax": softmax, "LogSoftmax": _log_softmax, "Hardmax": _hardmax}.items():

    def _old(ctx, x, *, axis=1, _fn=_fn):
        return coerced(_fn, x, axis)

    def _new(ctx, x, *, axis=-1, _fn=_fn):
        return _fn(x, axis=axis)

    onnx_op(_name, 1, until=11)(_old)
    onnx_op(_name, 13)(_new)


def _cumulative(fn, ctx, x, axis, exclusive, reverse):
    axis = int(np.asarray(ctx.static(1)).reshape(())) % x.ndim
    if reverse:
        x = jnp.flip(x, axis)
    out = fn(x, axis=axis)
    if exclusive:
        ident = jnp.zeros_like(x) if fn is jnp.cumsum else jnp.ones_like(x)
        out = jnp.concatenate(
            [lax.slice_in_dim(ident, 0, 1, axis=axis), lax.slice_in_dim(out, 0, -1, axis=axis)], axis
        )
    if reverse:
        out = jnp.flip(out, axis)
    return out


@onnx_op("CumSum", 11)
def cumsum(ctx, x, axis, *, exclusive=0, reverse=0):
    return _cumulative(jnp.cumsum, ctx, x, axis, exclusive, reverse)


@onnx_op("CumProd", 26)
def cumprod(ctx, x, axis, *, exclusive=0, reverse=0):
    return _cumulative(jnp.cumprod, ctx, x, axis, exclusive, reverse)


@onnx_op("TopK", 10)
def top_k(ctx, x, k, *, axis=-1, largest=1, sorted=1):  # noqa: A002
    """TopK with a static ``k``; ties keep the lower index first."""
    return _top_k(x, int(np.asarray(ctx.static(1)).reshape(-1)[0]), axis, largest)


def _top_k(x, k, axis, largest):
    axis = axis % x.ndim
    xt = jnp.moveaxis(x, axis, -1)
    n = xt.shape[-1]
    iota = jnp.broadcast_to(jnp.arange(n, dtype=np.int64), xt.shape)
    key = -xt if largest else xt
    if jnp.issubdtype(x.dtype, jnp.unsignedinteger) and largest:
        key = ~xt
    _, vals, idx = lax.sort((key, xt, iota), dimension=xt.ndim - 1, num_keys=1, is_stable=True)
    vals, idx = vals[..., :k], idx[..., :k]
    return jnp.moveaxis(vals, -1, axis), jnp.moveaxis(idx, -1, axis)


@onnx_op("TopK", 1, until=1)
def top_k_1(ctx, x, *, axis=-1, k):
    """TopK-1: ``k`` is an attribute; largest values, sorted."""
    return _top_k(x, k, axis, 1)
