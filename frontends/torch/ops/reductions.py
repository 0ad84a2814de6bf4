"""Reductions: ``sum``, ``mean``, ``prod``, ``amax``/``amin``, ``max``/``min`` with indices,
``argmax``/``argmin``, ``any``/``all``, ``var``/``std``, softmax, cumulative ops, ``sort``,
``topk`` (``native_functions.yaml``).

Integer and bool sums and products accumulate in int64 as torch does; float16/bfloat16
accumulate in float32 (``ReduceOps``' accumulation types). Max/min with indices take the
first extremal element, and NaN counts as the largest element.
"""

from __future__ import annotations

import math

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
    count = math.prod(x.shape[a] for a in axes)  # a symbolic dimension stays symbolic
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
    """Inclusive cumulative sum along ``dim``; ints and bools accumulate as int64.

    Along a symbolic dimension (dynamic shapes) it is a product with the upper-triangular
    ones matrix: ``jnp.cumsum``'s ``reduce_window`` becomes a ``dynamic_reduce_window``
    custom call there, which the ONNX backend cannot express."""
    x = _sum_input(x, dtype)
    if x.ndim == 0:
        return x
    axis = dim % x.ndim
    n = x.shape[axis]
    if isinstance(n, int):
        return jnp.cumsum(x, axis=axis)
    i = lax.broadcasted_iota(np.int32, (n, n), 0)
    upper = (i <= lax.broadcasted_iota(np.int32, (n, n), 1)).astype(x.dtype)
    out = jnp.tensordot(jnp.moveaxis(x, axis, -1), upper, axes=1, precision=lax.Precision.HIGHEST)
    return jnp.moveaxis(out.astype(x.dtype), -1, axis)


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


# --------------------------------------------------------------------------- segment_reduce

_SEGMENT_IDENTITY = {"max": -np.inf, "min": np.inf, "sum": 0, "mean": 0, "prod": 1}


def _segment_bounds(lengths, offsets):
    """``(start, end)`` of every segment, shape ``(*outer, S)``, from ``lengths`` (``end`` is
    their running sum) or ``offsets`` (consecutive pairs)."""
    if offsets is not None:
        return offsets[..., :-1], offsets[..., 1:]
    end = jnp.cumsum(lengths, axis=-1)
    return end - lengths, end


@register(aten.segment_reduce.default)
def segment_reduce(
    data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None
):
    """Reduce ``data`` over consecutive segments along ``axis``: ``"sum"``, ``"mean"``,
    ``"max"``, ``"min"`` or ``"prod"`` (``native_functions.yaml`` ``segment_reduce``; semantics
    of ``SegmentReduce.cpp``'s CPU kernel).

    Segments are given by ``lengths`` (shape ``data.shape[:axis] + (S,)``) or ``offsets``
    (``data.shape[:axis] + (S + 1,)``); the output is ``data`` with ``data.shape[axis]``
    replaced by ``S``. ``"amax"``/``"amin"`` are ``"max"``/``"min"``. Every segment starts
    from ``initial`` (the reduction's identity when None); ``max``/``min`` propagate NaN;
    ``mean`` divides by the segment length, and an empty segment without ``initial`` gives
    NaN. ``unsafe`` only skips torch's input checks.

    ``torch.export`` refuses ``indices`` and neither ``lengths`` nor ``offsets`` (as torch does).

    Raises:
        NotImplementedError: an unknown reduction (torch raises when run).
    """
    reduce = {"amax": "max", "amin": "min"}.get(reduce, reduce)
    if reduce not in _SEGMENT_IDENTITY:
        raise NotImplementedError(f"segment_reduce: reduction {reduce!r}")
    axis = dim(axis, data.ndim)
    start, end = _segment_bounds(lengths, offsets)
    pos = jnp.arange(data.shape[axis])
    inner = data.ndim - axis - 1
    # (*outer, S, N, 1...) membership of each position in each segment
    member = (pos >= start[..., None]) & (pos < end[..., None])
    member = member.reshape(member.shape + (1,) * inner)
    x = jnp.expand_dims(data, axis)  # (*outer, 1, N, *inner)
    ident = jnp.asarray(_SEGMENT_IDENTITY[reduce], data.dtype)
    masked = jnp.where(member, x, ident)
    init = ident if initial is None else jnp.asarray(initial, data.dtype)
    if reduce == "max":
        return jnp.maximum(init, jnp.max(masked, axis=axis + 1))
    if reduce == "min":
        return jnp.minimum(init, jnp.min(masked, axis=axis + 1))
    if reduce == "prod":
        return init * jnp.prod(masked, axis=axis + 1)
    total = init + jnp.sum(masked, axis=axis + 1)
    if reduce == "sum":
        return total
    count = (end - start).reshape(end.shape + (1,) * inner)
    empty = jnp.asarray(np.nan if initial is None else initial, data.dtype)
    return jnp.where(count > 0, total / jnp.maximum(count, 1).astype(data.dtype), empty)


# --------------------------------------------------------------------------- histograms


def _linspace(lo, hi, steps, dtype):
    """``torch.linspace(lo, hi, steps)`` as the CPU kernel computes it in ``dtype``: the first
    half ``lo + step * i``, the second half ``hi - step * (steps - 1 - i)``, with
    ``step = (hi - lo) / (steps - 1)`` (``RangeFactoriesKernel.cpp``); ``steps >= 2`` (the
    edges of at least one bin)."""
    lo, hi = jnp.asarray(lo, dtype), jnp.asarray(hi, dtype)
    step = (hi - lo) / jnp.asarray(steps - 1, dtype)
    i = np.arange(steps)
    head = lo + step * jnp.asarray(i, dtype)
    tail = hi - step * jnp.asarray(steps - 1 - i, dtype)
    return jnp.where(jnp.asarray(i < steps // 2), head, tail)


def _edge_bounds(x2d, d, rng):
    """Outer edges of dim ``d`` of a ``(M, D)`` input (``select_outer_bin_edges``): ``rng``
    pairs when given, else the column's min and max (0 and 1 for an empty input), widened
    by 0.5 on both sides when equal. ``torch.export`` refuses a range with min > max (or not
    finite)."""
    dt = x2d.dtype
    if rng is not None:
        lo, hi = float(rng[2 * d]), float(rng[2 * d + 1])
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        return jnp.asarray(lo, dt), jnp.asarray(hi, dt)
    if x2d.shape[0] == 0:
        return jnp.asarray(0, dt), jnp.asarray(1, dt)
    lo, hi = jnp.min(x2d[:, d]), jnp.max(x2d[:, d])
    same = lo == hi
    return jnp.where(same, lo - 0.5, lo), jnp.where(same, hi + 0.5, hi)


def _linear_pos(elt, lo, hi, nbins):
    """``LINEAR_INTERPOLATION``'s bin: ``trunc((elt - lo) * nbins / (hi - lo))`` in the
    input dtype."""
    dt = elt.dtype
    return jnp.trunc((elt - lo) * jnp.asarray(nbins, dt) / (hi - lo)).astype(np.int64)


def _local_search(elt, edges, pos):
    """``LINEAR_INTERPOLATION_WITH_LOCAL_SEARCH``: ``std::upper_bound`` of ``elt`` over the
    edges ``[max(0, pos - 1), min(pos + 2, E))``, minus one."""
    n_edges = edges.shape[0]
    lo = jnp.maximum(pos - 1, 0)
    hi = jnp.minimum(pos + 2, n_edges)
    count = jnp.zeros_like(pos)
    for k in range(3):
        j = lo + k
        e = jnp.take(edges, jnp.clip(j, 0, n_edges - 1))
        count = count + ((j < hi) & (e <= elt)).astype(np.int64)
    return lo + count - 1


def _histogramdd(x2d, edges, weight, density, how):
    """The ``histogramdd_cpu_contiguous`` kernel over ``(M, D)`` points: per dim, the bin of
    each coordinate by ``how`` (``"linear"``, ``"local"`` or ``"search"``), the rightmost bin
    closed, points outside the edges (and NaN) skipped; counts or summed ``weight``, divided
    by the total and the bin volumes when ``density``."""
    dt = x2d.dtype
    nbins = [e.shape[0] - 1 for e in edges]
    valid = jnp.ones(x2d.shape[:1], bool)
    flat = jnp.zeros(x2d.shape[:1], np.int64)
    for d, e in enumerate(edges):
        elt = x2d[:, d]
        lo, hi = e[0], e[-1]
        valid = valid & (elt >= lo) & (elt <= hi)
        if how == "search":
            pos = jnp.sum(e[None, :] <= elt[:, None], axis=1).astype(np.int64) - 1
        else:
            pos = _linear_pos(elt, lo, hi, nbins[d])
            if how == "local":
                pos = _local_search(elt, e, pos)
        pos = jnp.clip(jnp.where(pos == nbins[d], nbins[d] - 1, pos), 0, nbins[d] - 1)
        flat = flat * nbins[d] + pos
    w = jnp.ones(x2d.shape[:1], dt) if weight is None else weight.reshape(-1).astype(dt)
    w = jnp.where(valid, w, jnp.zeros((), dt))
    size = int(np.prod(nbins))
    hist = jnp.zeros((size,), dt).at[jnp.where(valid, flat, 0)].add(w).reshape(nbins)
    if density:
        hist = hist / jnp.sum(hist)
        for d, e in enumerate(edges):
            shape = [1] * len(edges)
            shape[d] = nbins[d]
            hist = hist / (e[1:] - e[:-1]).reshape(shape)
    return hist


def _as_points(x):
    """``histogramdd``'s ``(M, D)`` view of ``x`` (all but the last dim flattened)."""
    return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


def _bin_ct_edges(x2d, bins, rng):
    """The edges of ``bins[d]`` equal bins per dim (``torch.export`` refuses a count of bins
    other than the points' dimension, and counts below 1)."""
    return [_linspace(*_edge_bounds(x2d, d, rng), b + 1, x2d.dtype) for d, b in enumerate(bins)]


@register(aten.histc.default)
def histc(x, bins=100, min=0, max=0):  # noqa: A002 - ATen names
    """``bins`` equal-width bin counts of ``x`` over ``[min, max]`` (``Histogram.cpp``'s
    ``histogram_histc``): when ``min == max`` the range is the data's min and max, and a
    still empty range is widened to ``[lo - 1, hi + 1]`` (at least one ulp). Bins are
    ``trunc((x - lo) * bins / (hi - lo))`` in the input dtype, the last one closed on the
    right; elements outside the range and NaN are not counted. Output: ``(bins,)``.

    ``torch.export`` refuses ``bins <= 0`` and ``min > max``.
    """
    dt = x.dtype
    flat = x.reshape(-1, 1)
    if min == max and flat.size:
        lo, hi = jnp.min(flat), jnp.max(flat)
    else:
        lo, hi = jnp.asarray(min, dt), jnp.asarray(max, dt)
    # widening an empty range, decided as ATen does on the range as doubles: a given range
    # the dtype keeps apart (MoE routers' histc(ids, E, 0, E - 1)) needs no nextafter (a bit
    # cast), and one the dtype rounds to a single value is not widened either
    if min == max:
        same = lo == hi
        inf = jnp.asarray(np.inf, dt)
        lo = jnp.where(same, jnp.minimum(jnp.nextafter(lo, -inf), lo - 1), lo)
        hi = jnp.where(same, jnp.maximum(jnp.nextafter(hi, inf), hi + 1), hi)
    edges = _linspace(lo, hi, bins + 1, dt)
    return _histogramdd(flat, [edges], None, False, "linear")


@register(aten.histogram.bin_ct)
def histogram_bin_ct(x, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """``(hist, bin_edges)`` of all elements of ``x`` in ``bins`` equal bins over ``range``
    (the data's min and max when None, widened by 0.5 if equal); edges as ``torch.linspace``
    computes them, bins found by interpolation corrected against the edges (``Histogram.cpp``,
    ``HistogramKernel.cpp``); ``weight`` sums per bin, ``density`` normalises by the total
    and the bin widths."""
    pts = x.reshape(-1, 1)
    edges = _bin_ct_edges(pts, [bins], range)
    return _histogramdd(pts, edges, weight, density, "local"), edges[0]


@register(aten.histogram.bins_tensor)
def histogram_bins_tensor(x, bins, *, weight=None, density=False):
    """``(hist, bins)`` of all elements of ``x`` over the increasing 1-D edges ``bins``
    (binary search: element ``e`` goes to the last bin whose left edge is ``<= e``, the
    rightmost bin closed)."""
    return _histogramdd(x.reshape(-1, 1), [bins], weight, density, "search"), bins


@register(aten._histogramdd_bin_edges.default)
def histogramdd_bin_edges(x, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """The ``D`` edge tensors (``bins[d] + 1`` each) of ``histogramdd`` over the ``(M, D)``
    points of ``x``: ``torch.linspace`` between ``range`` pairs or the per-dim min and max."""
    return _bin_ct_edges(_as_points(x), list(bins), range)


@register(aten._histogramdd_from_bin_cts.default)
def histogramdd_from_bin_cts(x, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """The ``D``-dim histogram (shape ``bins``) of the ``(M, D)`` points of ``x`` over the
    edges of :func:`histogramdd_bin_edges`."""
    pts = _as_points(x)
    return _histogramdd(pts, _bin_ct_edges(pts, list(bins), range), weight, density, "local")


@register(aten._histogramdd_from_bin_tensors.default)
def histogramdd_from_bin_tensors(x, bins, *, weight=None, density=False):
    """The ``D``-dim histogram of the ``(M, D)`` points of ``x`` over the given increasing
    edge tensors (binary search per dim)."""
    return _histogramdd(_as_points(x), list(bins), weight, density, "search")


# --------------------------------------------------------------------------- mode

#: Rows up to this length are sorted by insertion sort in libstdc++'s ``std::sort``, which
#: torch's CPU ``mode`` kernel calls; longer rows go through introsort partitioning, whose
#: placement of equal values (and so the returned index) is not reproduced here.
_MODE_MAX_ROW = 16


def _insertion_sort(vals, idx):
    """libstdc++'s ``__insertion_sort`` of ``(value, index)`` pairs along the last axis with
    the comparator ``a.value < b.value``, step by step (so NaN, which compares false both
    ways, stops an element's backward scan as it does in C++). Step ``i`` moves element
    ``i`` to the front if it is less than element 0, else just after the last of elements
    ``0..i-1`` it is not less than, shifting the ones between right (one gather)."""
    n = vals.shape[-1]
    q = jnp.arange(n)
    for i in range(1, n):
        v = vals[..., i : i + 1]
        stops = ~(v < vals) & (q < i)  # the backward scan stops at the last such position
        last = jnp.max(jnp.where(stops, q, -1), axis=-1, keepdims=True)
        pos = jnp.where(v < vals[..., :1], 0, last + 1)  # (..., 1)
        src = jnp.where((q > pos) & (q <= i), q - 1, jnp.where(q == pos, i, q))
        vals = jnp.take_along_axis(vals, src, axis=-1)
        idx = jnp.take_along_axis(idx, src, axis=-1)
    return vals, idx


def _mode_last(x):
    """``(value, index)`` of torch's CPU mode along the last axis (rows of at most
    :data:`_MODE_MAX_ROW`): the sorted row is scanned for runs of equal values; the first
    run (smallest value) of the largest count wins and its last element's original index is
    returned (``TensorCompareKernel.cpp``, ``mode_kernel_impl``)."""
    n = x.shape[-1]
    keys = x.astype(np.int8) if x.dtype == np.bool_ else x
    idx = jnp.broadcast_to(jnp.arange(n, dtype=np.int64), x.shape)
    vals, idx = _insertion_sort(keys, idx)
    ends = jnp.concatenate([vals[..., :-1] != vals[..., 1:], jnp.ones(x.shape[:-1] + (1,), bool)], axis=-1)
    pos = jnp.arange(n)
    before = ends[..., None, :] & (pos[None, :] < pos[:, None])  # (..., q, p): run end p < q
    prev_end = jnp.max(jnp.where(before, pos, -1), axis=-1)
    freq = jnp.where(ends, pos - prev_end, 0)
    best = jnp.max(freq, axis=-1, keepdims=True)
    first = jnp.min(jnp.where(ends & (freq == best), pos, n), axis=-1, keepdims=True)
    value = jnp.take_along_axis(vals, first, axis=-1)[..., 0].astype(x.dtype)
    return value, jnp.take_along_axis(idx, first, axis=-1)[..., 0]


@register(aten.mode.default)
def mode(x, dim=-1, keepdim=False):  # noqa: A002
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest one on a
    tie of counts) and an index of it, exactly as torch's CPU kernel picks them: the index
    is that of the last occurrence in the kernel's sort order, which for rows of at most 16
    elements (insertion sort, stable) is the last occurrence in the row.

    Raises:
        NotImplementedError: a row longer than 16 elements: torch's index then depends on
            ``std::sort``'s introsort partitioning whenever the mode value repeats, which
            is not reproduced (rather than returning a possibly different index).
    """
    if x.ndim == 0:
        return x, jnp.zeros((), np.int64)
    d = dim % x.ndim
    n = x.shape[d]
    if n > _MODE_MAX_ROW:
        raise NotImplementedError(
            f"mode over {n} elements: torch's CPU kernel returns the index that std::sort's "
            f"introsort leaves last among equal values, reproduced only for rows of at most "
            f"{_MODE_MAX_ROW} elements"
        )
    v, i = _mode_last(jnp.moveaxis(x, d, -1))
    if keepdim:
        v, i = jnp.expand_dims(v, d), jnp.expand_dims(i, d)
    return v, i


# --------------------------------------------------------------------------- hash_tensor


def _hash_bits(x):
    """Elements widened to 64 bits (float64, int64, or uint64 for unsigned) and reinterpreted
    as uint64."""
    if is_float(x.dtype):
        wide = x.astype(np.float64)
    elif jnp.issubdtype(x.dtype, jnp.unsignedinteger):
        return x.astype(np.uint64)
    else:
        wide = x.astype(np.int64)
    return lax.bitcast_convert_type(wide, np.uint64)


@register(aten.hash_tensor.default)
def hash_tensor(x, dim=(), *, keepdim=False, mode=0):  # noqa: A002
    """uint64 XOR of the elements over ``dim`` (all when empty), each widened to its 64-bit
    float or integer type and bitcast to uint64 (``torch.hash_tensor``, ``mode=0``).

    Raises:
        NotImplementedError: another ``mode`` or complex input.
    """
    if mode != 0:
        raise NotImplementedError(f"hash_tensor: mode {mode}")
    if jnp.iscomplexobj(x):
        raise NotImplementedError("hash_tensor of a complex tensor")
    axes = dims(dim, x.ndim)
    out = lax.reduce(_hash_bits(x), np.uint64(0), lax.bitwise_xor, axes)
    if keepdim:
        out = out.reshape([1 if a in axes else s for a, s in enumerate(x.shape)])
    return out
