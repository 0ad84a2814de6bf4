"""Reductions: ``sum``, ``mean``, ``prod``, ``amax``/``amin``, ``max``/``min`` with indices,
``argmax``/``argmin``, ``any``/``all``, ``var``/``std``, softmax, cumulative ops, ``sort``,
``topk`` (``native_functions.yaml``).

Integer and bool sums and products accumulate in int64 as torch does; float16/bfloat16
accumulate in float32 (``ReduceOps``' accumulation types). Max/min with indices take the
first extremal element, and NaN counts as the largest element.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import register
from ._util import acc_dtype, arg_extreme, dim, dims, is_float, np_dtype

aten = __import__("torch").ops.aten


def _sum_input(x, dtype):
    """``x`` in the dtype torch accumulates a sum or product in."""
    if dtype is not None:
        x = x.astype(np_dtype(dtype))
    elif not is_float(x.dtype):
        x = x.astype(np.int64)
    return x.astype(acc_dtype(x.dtype))


@register(aten.sum.dim_IntList, aten.sum.default)
def sum_(x, dim=None, keepdim=False, dtype=None):  # noqa: A002 - ATen names
    """Sum over ``dim`` (all dims when None or empty); ints and bools sum as int64."""
    return jnp.sum(_sum_input(x, dtype), axis=dims(dim, x.ndim), keepdims=keepdim)


@register(aten.prod.dim_int, aten.prod.default)
def prod(x, dim=None, keepdim=False, dtype=None):  # noqa: A002
    """Product over one ``dim`` (or all); ints and bools multiply as int64."""
    return jnp.prod(_sum_input(x, dtype), axis=dims(dim, x.ndim), keepdims=keepdim)


@register(aten.mean.dim, aten.mean.default)
def mean(x, dim=None, keepdim=False, dtype=None):  # noqa: A002
    """Mean over ``dim`` (all when None or empty): the sum divided by the count."""
    if dtype is not None:
        x = x.astype(np_dtype(dtype))
    x = x.astype(acc_dtype(x.dtype))
    axes = dims(dim, x.ndim)
    count = int(np.prod([x.shape[a] for a in axes]))
    return jnp.sum(x, axis=axes, keepdims=keepdim) / count


@register(aten.amax.default)
def amax(x, dim=(), keepdim=False):  # noqa: A002
    """Max over ``dim`` (all when empty); NaN propagates."""
    return jnp.max(x, axis=dims(dim, x.ndim), keepdims=keepdim)


@register(aten.amin.default)
def amin(x, dim=(), keepdim=False):  # noqa: A002
    """Min over ``dim`` (all when empty); NaN propagates."""
    return jnp.min(x, axis=dims(dim, x.ndim), keepdims=keepdim)


@register(aten.max.default)
def max_(x):
    """Max of all elements."""
    return jnp.max(x)


@register(aten.min.default)
def min_(x):
    """Min of all elements."""
    return jnp.min(x)


def _arg_extreme(x, axis, largest):
    """Index of the first max (min) along ``axis``; NaN counts as the extreme."""
    return arg_extreme(x, axis, largest)


def _with_indices(x, d, keepdim, largest):
    if x.ndim == 0:
        return x, jnp.zeros((), np.int64)
    d = dim(d, x.ndim)
    idx = _arg_extreme(x, d, largest)
    idx = jnp.expand_dims(idx, d)
    vals = jnp.take_along_axis(x, idx, axis=d)  # gradient flows to the chosen element
    if not keepdim:
        vals, idx = jnp.squeeze(vals, d), jnp.squeeze(idx, d)
    return vals, idx.astype(np.int64)


@register(aten.max.dim)
def max_dim(x, dim, keepdim=False):  # noqa: A002
    """``(values, indices)`` of the max along ``dim``."""
    return _with_indices(x, dim, keepdim, True)


@register(aten.min.dim)
def min_dim(x, dim, keepdim=False):  # noqa: A002
    """``(values, indices)`` of the min along ``dim``."""
    return _with_indices(x, dim, keepdim, False)


def _arg_rule(largest):
    def rule(x, dim=None, keepdim=False):  # noqa: A002
        if dim is None:
            idx = _arg_extreme(x.reshape(-1), 0, largest)
            return idx.reshape((1,) * x.ndim) if keepdim else idx
        return _with_indices(x, dim, keepdim, largest)[1]

    which = "max" if largest else "min"
    rule.__doc__ = f"Index of the first {which} (of the flattened tensor when ``dim`` is None)."
    return rule


register(aten.argmax.default)(_arg_rule(True))
register(aten.argmin.default)(_arg_rule(False))


@register(aten.any.default, aten.any.dim, aten.any.dims)
def any_(x, dim=None, keepdim=False):  # noqa: A002
    """Whether any element is nonzero."""
    return jnp.any(x != 0, axis=dims(dim, x.ndim), keepdims=keepdim)


@register(aten.all.default, aten.all.dim, aten.all.dims)
def all_(x, dim=None, keepdim=False):  # noqa: A002
    """Whether every element is nonzero."""
    return jnp.all(x != 0, axis=dims(dim, x.ndim), keepdims=keepdim)


def _var(x, dim, correction, keepdim):
    x = x.astype(acc_dtype(x.dtype))
    axes = dims(dim, x.ndim)
    n = int(np.prod([x.shape[a] for a in axes]))
    mu = jnp.mean(x, axis=axes, keepdims=True)
    d = x - mu
    sq = jnp.real(d * jnp.conj(d)) if jnp.iscomplexobj(d) else d * d
    return jnp.sum(sq, axis=axes, keepdims=keepdim) / max(n - correction, 0)


@register(aten.var.correction)
def var_correction(x, dim=None, *, correction=None, keepdim=False):  # noqa: A002
    """Variance over ``dim`` with ``correction`` (default 1, Bessel's) subtracted from the
    count; a count at or below the correction gives inf/NaN as in torch."""
    return _var(x, dim, 1 if correction is None else correction, keepdim)


@register(aten.var.dim)
def var_dim(x, dim=None, unbiased=True, keepdim=False):  # noqa: A002
    """Variance, ``unbiased`` meaning correction 1."""
    return _var(x, dim, int(unbiased), keepdim)


@register(aten.std.correction)
def std_correction(x, dim=None, *, correction=None, keepdim=False):  # noqa: A002
    """Square root of :func:`var_correction`."""
    return jnp.sqrt(var_correction(x, dim, correction=correction, keepdim=keepdim))


@register(aten._softmax.default)
def softmax(x, dim, half_to_float=False):  # noqa: A002
    """``exp(x - max) / sum(exp(x - max))`` along ``dim``, computed in float32 for
    half types (``SoftMax.cpp``)."""
    x = x.astype(acc_dtype(x.dtype))
    d = dim if x.ndim == 0 else dim % x.ndim
    if x.ndim == 0:
        return jnp.ones_like(x)
    e = jnp.exp(x - lax.stop_gradient(jnp.max(x, axis=d, keepdims=True)))
    return e / jnp.sum(e, axis=d, keepdims=True)


@register(aten._log_softmax.default)
def log_softmax(x, dim, half_to_float=False):  # noqa: A002
    """``x - max - log(sum(exp(x - max)))`` along ``dim``."""
    x = x.astype(acc_dtype(x.dtype))
    if x.ndim == 0:
        return jnp.zeros_like(x)
    d = dim % x.ndim
    shifted = x - lax.stop_gradient(jnp.max(x, axis=d, keepdims=True))
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=d, keepdims=True))


@register(aten.logsumexp.default)
def logsumexp(x, dim, keepdim=False):  # noqa: A002
    """``log(sum(exp(x)))`` over ``dim``, stabilised by the max (infinite maxes give 0)."""
    x = x.astype(acc_dtype(x.dtype)) if is_float(x.dtype) else x.astype(np.float32)
    axes = dims(dim, x.ndim)
    m = lax.stop_gradient(jnp.max(x, axis=axes, keepdims=True))
    m = jnp.where(jnp.isinf(m), 0, m)
    out = jnp.log(jnp.sum(jnp.exp(x - m), axis=axes, keepdims=True)) + m
    return out if keepdim else jnp.squeeze(out, axes)


@register(aten.cumsum.default)
def cumsum(x, dim, dtype=None):  # noqa: A002
    """Inclusive cumulative sum along ``dim``; ints and bools accumulate as int64."""
    x = _sum_input(x, dtype)
    return x if x.ndim == 0 else jnp.cumsum(x, axis=dim % x.ndim)


@register(aten.cumprod.default)
def cumprod(x, dim, dtype=None):  # noqa: A002
    """Inclusive cumulative product along ``dim``."""
    x = _sum_input(x, dtype)
    return x if x.ndim == 0 else jnp.cumprod(x, axis=dim % x.ndim)


def _sort(x, d, descending):
    """Stable sort along ``d`` with NaN largest: ``(values, int64 indices)``. Descending
    order sorts the reversed input ascending and reverses back, which keeps ties in their
    original order as torch's stable sort does."""
    n = x.shape[d]
    iota = lax.broadcasted_iota(np.int64, x.shape, d)
    if descending:
        x = jnp.flip(x, d)
    keys = x.astype(np.int8) if x.dtype == np.bool_ else x
    vals, idx = lax.sort((keys, iota), dimension=d, is_stable=True, num_keys=1)
    vals = vals.astype(x.dtype)
    if descending:
        vals, idx = jnp.flip(vals, d), n - 1 - jnp.flip(idx, d)
    return vals, idx


@register(aten.sort.default)
def sort(x, dim=-1, descending=False):  # noqa: A002
    """``(values, indices)`` sorted along ``dim`` (stable; NaN sorts as the largest)."""
    if x.ndim == 0:
        return x, jnp.zeros((), np.int64)
    return _sort(x, dim % x.ndim, descending)


@register(aten.sort.stable)
def sort_stable(x, *, stable=None, dim=-1, descending=False):  # noqa: A002
    """``sort`` with an explicit ``stable`` flag (always stable here)."""
    return sort(x, dim, descending)


@register(aten.topk.default)
def topk(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """The ``k`` largest (smallest) elements along ``dim`` and their indices, in sorted
    order, ties by index."""
    if x.ndim == 0:
        return x, jnp.zeros((), np.int64)
    d = dim % x.ndim
    vals, idx = _sort(x, d, largest)
    return lax.slice_in_dim(vals, 0, k, axis=d), lax.slice_in_dim(idx, 0, k, axis=d)


def _cum_extreme(x, dim, largest):  # noqa: A002
    """torch's ``cummax``/``cummin``: running extreme and the index where it was reached,
    later ties winning (``x >= best``) and NaN sticking once seen."""
    if x.ndim == 0:
        return x, jnp.zeros((), np.int64)
    d = dim % x.ndim
    iota = lax.broadcasted_iota(np.int64, x.shape, d)
    keys = x.astype(np.int8) if x.dtype == np.bool_ else x

    def combine(a, b):
        (va, ia), (vb, ib) = a, b
        better = vb >= va if largest else vb <= va
        if is_float(keys.dtype):
            better = better | jnp.isnan(vb)
        return jnp.where(better, vb, va), jnp.where(better, ib, ia)

    vals, idx = lax.associative_scan(combine, (keys, iota), axis=d)
    return vals.astype(x.dtype), idx


@register(aten.cummax.default)
def cummax(x, dim):  # noqa: A002
    """``(values, indices)`` of the running maximum along ``dim``."""
    return _cum_extreme(x, dim, True)


@register(aten.cummin.default)
def cummin(x, dim):  # noqa: A002
    """``(values, indices)`` of the running minimum along ``dim``."""
    return _cum_extreme(x, dim, False)


@register(aten.kthvalue.default)
def kthvalue(x, k, dim=-1, keepdim=False):  # noqa: A002
    """``(values, indices)`` of the ``k``-th smallest element along ``dim`` (1-based)."""
    if x.ndim == 0:
        return x, jnp.zeros((), np.int64)
    d = dim % x.ndim
    vals, idx = _sort(x, d, False)
    v = lax.index_in_dim(vals, k - 1, axis=d, keepdims=keepdim)
    i = lax.index_in_dim(idx, k - 1, axis=d, keepdims=keepdim)
    return v, i


@register(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    """Insertion points of ``values`` in the innermost dim of ``sorted_sequence`` (1-D, or
    with leading dims matching ``values``): the count of elements ``< v`` (``<= v`` when
    ``right`` or ``side == "right"``). int64, or int32 with ``out_int32``."""
    seq = sorted_sequence
    if sorter is not None:
        seq = jnp.take_along_axis(seq, sorter, axis=-1)
    values = jnp.asarray(values)
    right = right or side == "right"
    if seq.ndim == 1:
        cmp = seq <= values[..., None] if right else seq < values[..., None]
    else:
        cmp = seq[..., None, :] <= values[..., :, None] if right else seq[..., None, :] < values[..., :, None]
    return jnp.sum(cmp, axis=-1).astype(np.int32 if out_int32 else np.int64)


@register(aten.var_mean.correction)
def var_mean(x, dim=None, *, correction=None, keepdim=False):  # noqa: A002
    """``(var, mean)`` over ``dim`` (see :func:`var_correction`)."""
    return var_correction(x, dim, correction=correction, keepdim=keepdim), mean(x, dim, keepdim)


def _median(x, d, keepdim, ignore_nan):
    """Lower median along ``d`` (element ``(n - 1) // 2`` of the sorted values) and its
    index. NaN propagates (the first NaN is returned) unless ``ignore_nan``, which takes the
    lower median of the non-NaN values (NaN when all are NaN)."""
    vals, idx = _sort(x, d, False)  # NaN sorts last, stably
    n = x.shape[d]
    nans = jnp.sum(jnp.isnan(x), axis=d, keepdims=True) if is_float(x.dtype) else jnp.zeros((), np.int64)
    if ignore_nan:
        k = jnp.maximum((n - nans - 1) // 2, 0)
    else:
        k = jnp.where(nans > 0, n - nans, (n - 1) // 2)
    k = jnp.broadcast_to(k, x.shape[:d] + (1,) + x.shape[d + 1 :]).astype(np.int64)
    v, i = jnp.take_along_axis(vals, k, axis=d), jnp.take_along_axis(idx, k, axis=d)
    return (v, i) if keepdim else (jnp.squeeze(v, d), jnp.squeeze(i, d))


@register(aten.median.default)
def median(x):
    """Lower median of all elements; NaN if any element is NaN."""
    return _median(x.reshape(-1), 0, False, False)[0]


@register(aten.median.dim)
def median_dim(x, dim=0, keepdim=False):  # noqa: A002
    """``(values, indices)`` of the lower median along ``dim``."""
    if x.ndim == 0:
        return x, jnp.zeros((), np.int64)
    return _median(x, dim % x.ndim, keepdim, False)


@register(aten.nanmedian.default)
def nanmedian(x):
    """Lower median of the non-NaN elements."""
    return _median(x.reshape(-1), 0, False, True)[0]


@register(aten.nanmedian.dim)
def nanmedian_dim(x, dim=0, keepdim=False):  # noqa: A002
    """``(values, indices)`` of the lower median of the non-NaN elements along ``dim``."""
    if x.ndim == 0:
        return x, jnp.zeros((), np.int64)
    return _median(x, dim % x.ndim, keepdim, True)


@register(aten.linalg_vector_norm.default)
def linalg_vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The ``ord``-norm over ``dim`` (all dims when None): ``inf``/``-inf`` take the
    largest/smallest magnitude, ``0`` counts nonzeros, otherwise ``sum(|x|^ord)^(1/ord)``.
    Complex inputs give real norms."""
    if dtype is not None:
        x = x.astype(np_dtype(dtype))
    a = jnp.abs(x.astype(acc_dtype(x.dtype)))
    axes = dims(dim, x.ndim)
    if ord == float("inf"):
        return jnp.max(a, axis=axes, keepdims=keepdim)
    if ord == float("-inf"):
        return jnp.min(a, axis=axes, keepdims=keepdim)
    if ord == 0:
        return jnp.sum((a != 0).astype(a.dtype), axis=axes, keepdims=keepdim)
    if ord == 1:
        return jnp.sum(a, axis=axes, keepdims=keepdim)
    if ord == 2:
        return jnp.sqrt(jnp.sum(a * a, axis=axes, keepdims=keepdim))
    return jnp.sum(a**ord, axis=axes, keepdims=keepdim) ** (1.0 / ord)


@register(aten.bucketize.Tensor)
def bucketize(x, boundaries, *, out_int32=False, right=False):
    """Bucket of each element of ``x`` among the sorted 1-D ``boundaries``: the count of
    boundaries ``< x`` (``<= x`` when ``right``)."""
    return searchsorted(boundaries, x, out_int32=out_int32, right=right)


@register(aten.logcumsumexp.default)
def logcumsumexp(x, dim):  # noqa: A002
    """``log(cumsum(exp(x)))`` along ``dim``, each step combined stably as
    ``max + log1p(exp(min - max))`` (``-inf`` pairs stay ``-inf``)."""
    if x.ndim == 0:
        return x
    x = x.astype(acc_dtype(x.dtype))

    def combine(a, b):
        hi, lo = jnp.maximum(a, b), jnp.minimum(a, b)
        both_inf = jnp.isinf(hi) & (hi == lo)
        return jnp.where(both_inf, hi, hi + jnp.log1p(jnp.exp(lo - hi)))

    return lax.associative_scan(combine, x, axis=dim % x.ndim)


@register(aten.dist.default)
def dist(x, y, p=2):
    """``linalg_vector_norm(x - y, p)`` over all elements."""
    return linalg_vector_norm(x - y, p)
