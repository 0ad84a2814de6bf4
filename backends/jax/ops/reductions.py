"""Region reductions: reduce, reduce_window, sort (StableHLO spec sections of those names).

Common bodies (add, max, min, mul, and, or, xor) map to ``lax.reduce_sum`` and kin, which JAX
differentiates; a non-identity init value is combined afterwards, which is exact for these
associative, commutative bodies. Other bodies run through ``lax.reduce`` with the region as
the computation.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from converter.regions import classify_combiner, classify_select, classify_sort_keys

from ..registry import register
from .elementwise import total_order_key

_COMBINE = {
    "add": lax.add,
    "max": lax.max,
    "min": lax.min,
    "mul": lax.mul,
    "and": lax.bitwise_and,
    "or": lax.bitwise_or,
    "xor": lax.bitwise_xor,
}
_REDUCE = {
    "add": lax.reduce_sum,
    "max": lax.reduce_max,
    "min": lax.reduce_min,
    "mul": lax.reduce_prod,
    "and": lax.reduce_and,
    "or": lax.reduce_or,
    "xor": lax.reduce_xor,
}


@register("stablehlo.reduce")
def _reduce(interp, op, *args):
    n = len(args) // 2
    operands, inits = args[:n], args[n:]
    dims = tuple(op.attr("dimensions"))
    kind = classify_combiner(op.regions[0]) if n == 1 else None
    if kind in _REDUCE:
        x = operands[0]
        if kind in ("max", "min") and jnp.issubdtype(x.dtype, jnp.floating):
            return _COMBINE[kind](_nan_max_min(kind, x, dims), inits[0])
        return _COMBINE[kind](_REDUCE[kind](x, dims), inits[0])
    body = interp.region_fn(op.regions[0])

    def computation(acc, x):
        out = body(*acc, *x)
        return tuple(out)

    if len({jnp.issubdtype(x.dtype, jnp.inexact) for x in operands}) > 1:
        return list(_mixed_reduce(computation, dims)(tuple(operands), tuple(inits)))
    return list(lax.reduce(tuple(operands), tuple(inits), computation, dims))


# Float types whose bits, read as a signed integer of the same width, order like the floats
# once negative values have their other bits flipped (total_order_key): one sign bit
_KEYED_FLOATS = (jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64)


def _nan_max_min(kind: str, x, dims: tuple[int, ...]):
    """The max (``kind`` "max") or min ("min") of the float array ``x`` over ``dims``, NaN
    wherever a reduced row holds a NaN, as StableHLO's ``maximum``/``minimum`` give (spec:
    NaN propagates; -0 < +0). XLA's CPU backend hands some float max/min reductions to
    YNNPACK kernels that skip NaN (``jnp.max`` over axis 1 of a (16, 17, 33) input with 66
    NaN columns lost all 66), so the reduction runs on integer keys instead: IEEE
    totalOrder keys (``total_order_key``) with each NaN replaced by the key type's extreme
    (its maximum for max, its minimum for min), reduced with the integer max/min, mapped
    back bit for bit (the key map is its own inverse), the extreme read as NaN. One
    reduction: a separate ``reduce_or`` of ``isnan(x)`` made XLA compile a second kernel
    per reduction with all of ``x``'s producers fused into it again (XLA compile CPU time
    of GPT-2 small, whose softmaxes take a max: 1.28 s with it, 1.04 s without). Types
    other than float16, bfloat16, float32 and float64 (float8s, some without a sign bit)
    keep that ``reduce_or`` guard. The derivative is that of ``lax.reduce_max``/``reduce_min``
    (custom_jvp): integer keys have none."""
    if x.dtype not in _KEYED_FLOATS or 0 in [x.shape[d] for d in dims]:
        return _guarded(kind, x, dims)

    return _keyed_max_min(kind, dims, x)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _keyed_max_min(kind: str, dims: tuple[int, ...], x):
    """``_nan_max_min``'s integer-key reduction (one module-level function: JAX caches its
    traces across calls; lax ops only: ``jnp.where`` traces an inner jit per signature)."""
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize]
    info = np.iinfo(bits)
    i = lax.bitcast_convert_type(x, bits)
    flip = lambda k: lax.select(lax.lt(k, _full(k, 0)), lax.bitwise_xor(k, _full(k, info.max)), k)  # noqa: E731
    nan_key = info.max if kind == "max" else info.min
    key = lax.select(lax.ne(x, x), _full(i, nan_key), flip(i))  # NaN: the extreme key
    r = _REDUCE[kind](key, dims)
    out = lax.bitcast_convert_type(flip(r), x.dtype)  # the key map is its own inverse
    return lax.select(lax.eq(r, _full(r, nan_key)), _full(out, np.nan), out)


def _full(like, value):
    """``value`` broadcast to ``like``'s shape and dtype (a lax constant: no inner jit)."""
    return lax.full(like.shape, value, like.dtype)


@_keyed_max_min.defjvp
def _keyed_max_min_jvp(kind, dims, primals, tangents):
    _, t_out = jax.jvp(lambda x: _guarded(kind, x, dims), primals, tangents)
    return _keyed_max_min(kind, dims, *primals), t_out


def _guarded(kind: str, x, dims: tuple[int, ...]):
    """``lax.reduce_max``/``reduce_min`` of ``x`` over ``dims`` with NaN where a reduced row
    holds one (a ``reduce_or`` of ``isnan(x)`` beside it; see ``_nan_max_min``)."""
    out = _REDUCE[kind](x, dims)
    return jnp.where(lax.reduce_or(jnp.isnan(x), dims), jnp.asarray(jnp.nan, x.dtype), out)


def _mixed_reduce(computation, dims):
    """``lax.reduce`` of float and integer operands together (argmax/argmin: values and
    indices) as a differentiable function. JAX's own JVP of a general ``lax.reduce`` fails
    on such operands (jaxlib 0.10.2 reshapes the integers' symbolic zero tangents: "Zero ...
    passed to reshape"), so ``jax.grad`` of any program computing an ``argmax`` failed; here
    the primal is ``lax.reduce`` itself and the tangent that of a pairwise tree of the body
    (the method of JAX's rule, with the integers' ``float0`` tangents given explicitly)."""

    @jax.custom_jvp
    def reduce(operands, inits):
        return lax.reduce(operands, inits, computation, dims)

    @reduce.defjvp
    def _jvp(primals, tangents):
        operands, inits = primals
        out = reduce(operands, inits)
        _, t_out = jax.jvp(lambda o, i: _tree_reduce(computation, dims, o, i), primals, tangents)
        return out, t_out

    return reduce


def _tree_reduce(computation, dims, operands, inits):
    """The reduction of ``operands`` over ``dims`` by halving: the reduced dimensions are
    flattened to one, whose halves are combined elementwise by ``computation`` (mapped with
    ``vmap``) until one element is left; an odd half is padded with the init values; the
    result is combined with the inits last (exact for an identity init)."""
    shape = operands[0].shape
    kept = [d for d in range(len(shape)) if d not in dims]
    out_shape = tuple(shape[d] for d in kept)
    n = int(np.prod([shape[d] for d in dims], dtype=np.int64))
    xs = [jnp.transpose(x, (*dims, *kept)).reshape((n, *out_shape)) for x in operands]
    full = [jnp.broadcast_to(i, out_shape) for i in inits]
    if n == 0:
        return tuple(full)
    pair = lambda *a: computation(a[: len(a) // 2], a[len(a) // 2 :])  # noqa: E731
    for _ in kept:
        pair = jax.vmap(pair)
    halves = jax.vmap(pair)
    while xs[0].shape[0] > 1:
        half = (xs[0].shape[0] + 1) // 2
        lo, hi = [x[:half] for x in xs], [x[half:] for x in xs]
        if hi[0].shape[0] != half:
            hi = [jnp.concatenate([h, f[None]]) for h, f in zip(hi, full, strict=True)]
        xs = list(halves(*lo, *hi))
    return tuple(pair(*full, *(x[0] for x in xs)))


def _nan_in_window(x, out, kwargs: dict):
    """``out`` (a max/min ``reduce_window`` of ``x``) with NaN wherever its window holds a
    NaN, as StableHLO's ``maximum``/``minimum`` give (spec: NaN propagates). XLA's CPU
    backend fuses some max/min window reductions into YNNPACK kernels that skip NaN (a 2x2
    stride-2 max pool of a (1, 16, 17, 33) input lost 66 of 66 NaN windows; its plain max/min
    reductions too, see ``_reduce``), so the NaN count of each window is taken alongside (a
    sum, exact) and applied."""
    nans = lax.reduce_window(jnp.isnan(x).astype(x.dtype), jnp.zeros((), x.dtype), lax.add, **kwargs)
    return jnp.where(nans > 0, jnp.asarray(jnp.nan, x.dtype), out)


# Windows of at most this many elements are folded slice by slice (_max_min_window)
_SLICE_FOLD_MAX = 64


def _window_result_shape(shape, kwargs: dict) -> list[int]:
    """The result shape of a ``reduce_window`` of an operand of ``shape`` (spec: the padded,
    base-dilated operand less the dilated window, over the stride, plus one; empty where
    that is negative)."""
    out = []
    for n, (lo, hi), b, w, d, s in zip(
        shape,
        kwargs["padding"],
        kwargs["base_dilation"],
        kwargs["window_dimensions"],
        kwargs["window_dilation"],
        kwargs["window_strides"],
        strict=True,
    ):
        padded = lo + hi + (0 if n == 0 else (n - 1) * b + 1)
        out.append(max((padded - (w - 1) * d - 1) // s + 1, 0))
    return out


def _window_slices(x, init, kwargs: dict) -> list:
    """The operands of a ``reduce_window`` of ``x`` as strided slices, one per position in
    the window: ``x`` padded (edges and base dilation) with ``init`` as the spec pads it, the
    slice of position ``p`` holding element ``p`` of every window. The result shape
    (``_window_result_shape``) must have no empty dimension."""
    config = [(lo, hi, b - 1) for (lo, hi), b in zip(kwargs["padding"], kwargs["base_dilation"], strict=True)]
    xp = lax.pad(x, jnp.asarray(init, x.dtype), config)
    out = _window_result_shape(x.shape, kwargs)
    strides, dilation = kwargs["window_strides"], kwargs["window_dilation"]
    slices = []
    for position in np.ndindex(*kwargs["window_dimensions"]):
        start = [p * d for p, d in zip(position, dilation, strict=True)]
        limit = [b + (n - 1) * s + 1 for b, n, s in zip(start, out, strides, strict=True)]
        slices.append(lax.slice(xp, start, limit, strides))
    return slices


def _max_min_window(x, init, kind: str, kwargs: dict):
    """A max/min ``reduce_window`` of floats ``x`` with a known ``init`` (NumPy scalar), NaN
    propagating as StableHLO's ``maximum``/``minimum`` do.

    A window of at most ``_SLICE_FOLD_MAX`` elements is folded elementwise over its strided
    slices (``lax.max``/``lax.min``, which propagate NaN on every XLA backend: the backend's
    own ``maximum``): XLA fuses the fold into one loop, without the YNNPACK window kernel
    that skips NaN and so without the NaN count of ``_nan_in_window`` beside it (0.2-0.6x the
    time of that pair on CPU; a pooling CNN ran 1.1x a hand-written ``jax.lax`` one with the
    pair). The fold's order is the spec's own freedom (max and min are associative and
    commutative). Its derivative is that of the ``reduce_window`` with the NaN count, which
    JAX knows (the gradient of a window goes to one of its maxima, as ``reduce_window``'s,
    not shared among ties as a fold of ``lax.max`` would). Larger windows (cumulative or
    global maxima) take that pair directly."""
    combine = _COMBINE[kind]

    def reference(x):
        return _nan_in_window(x, lax.reduce_window(x, init, combine, **kwargs), kwargs)

    size = int(np.prod(kwargs["window_dimensions"]))
    if size > _SLICE_FOLD_MAX or size == 0 or 0 in _window_result_shape(x.shape, kwargs):
        return reference(x)

    def fold(x):
        out = jnp.asarray(init, x.dtype)
        for piece in _window_slices(x, init, kwargs):
            out = combine(out, piece)
        return out

    @jax.custom_jvp
    def window(x):
        return fold(x)

    @window.defjvp
    def _jvp(primals, tangents):
        _, t_out = jax.jvp(reference, primals, tangents)
        return fold(*primals), t_out

    return window(x)


@register("stablehlo.reduce_window")
def _reduce_window(interp, op, *args):
    n = len(args) // 2
    operands, inits = args[:n], args[n:]
    rank = op.operand_type(0).rank
    kind = classify_combiner(op.regions[0]) if n == 1 else None
    padding = op.attr("padding")
    padding = [(0, 0)] * rank if padding is None else [tuple(int(v) for v in p) for p in padding]
    kwargs = dict(
        window_dimensions=tuple(op.attr("window_dimensions")),
        window_strides=tuple(op.attr("window_strides") or [1] * rank),
        padding=padding,
        base_dilation=tuple(op.attr("base_dilations") or [1] * rank),
        window_dilation=tuple(op.attr("window_dilations") or [1] * rank),
    )
    if kind in ("add", "max", "min"):
        # lax.reduce_window recognizes its max/min/add monoids, and so can differentiate
        # them, only for an init value known at trace time.
        init = interp.static_operand(op, n)
        x = operands[0]
        if kind != "add" and init is not None and jnp.issubdtype(x.dtype, jnp.floating):
            return _max_min_window(x, init, kind, kwargs)
        out = lax.reduce_window(x, inits[0] if init is None else init, _COMBINE[kind], **kwargs)
        if kind != "add" and jnp.issubdtype(x.dtype, jnp.floating):
            out = _nan_in_window(x, out, kwargs)
        return out
    body = interp.region_fn(op.regions[0])

    def computation(acc, x):
        return tuple(body(*acc, *x))

    axis = _cumulative_axis(operands, kwargs)
    if axis is not None:
        init = interp.static_operand(op, 1)
        if init is not None and _idempotent(computation, init):
            return [_cumulative(computation, axis, kwargs)(operands[0], inits[0])]
    return list(lax.reduce_window(tuple(operands), tuple(inits), computation, **kwargs))


def _idempotent(computation, init) -> bool:
    """``body(init, init) == init`` for a known init value (computed now, not traced)."""
    with jax.ensure_compile_time_eval():
        out = computation((jnp.asarray(init),), (jnp.asarray(init),))[0]
        return bool(jnp.array_equal(out, init, equal_nan=True))


def _cumulative_axis(operands, kwargs) -> int | None:
    """The axis of a cumulative reduce_window of one float operand (what ``jnp.cumprod``,
    ``lax.cumlogsumexp`` lower to: a window the axis's length, padded by its length - 1
    below, stride and dilations 1, every other window dimension 1), else None."""
    if len(operands) != 1 or not jnp.issubdtype(operands[0].dtype, jnp.floating):
        return None
    shape = operands[0].shape
    window, strides, padding = kwargs["window_dimensions"], kwargs["window_strides"], kwargs["padding"]
    if any(s != 1 for s in (*strides, *kwargs["base_dilation"], *kwargs["window_dilation"])):
        return None
    axes = [d for d, w in enumerate(window) if w != 1 or tuple(padding[d]) != (0, 0)]
    if len(axes) != 1:
        return None
    (d,) = axes
    return d if window[d] == shape[d] and tuple(padding[d]) == (shape[d] - 1, 0) else None


def _cumulative(computation, axis, kwargs):
    """A cumulative ``reduce_window`` (:func:`_cumulative_axis`) with an idempotent init value
    (``body(init, init) == init``, as the identities JAX uses are) as a differentiable
    function: JAX has no reverse mode of a ``reduce_window`` with a general body, so
    ``jax.grad`` through ``jnp.cumprod`` or ``cumlogsumexp`` failed. The primal is the
    ``reduce_window`` itself; the tangent that of ``lax.associative_scan`` of the body (the
    same inclusive prefix folds, the body being associative), combined with the init."""

    def fold(a, b):
        return computation((a,), (b,))[0]

    @jax.custom_jvp
    def cumulative(x, init):
        return lax.reduce_window((x,), (init,), computation, **kwargs)[0]

    @cumulative.defjvp
    def _jvp(primals, tangents):
        x, init = primals
        scan = lambda x, init: fold(init, lax.associative_scan(fold, x, axis=axis))  # noqa: E731
        return cumulative(x, init), jax.jvp(scan, primals, tangents)[1]

    return cumulative


@register("stablehlo.select_and_scatter")
def _select_and_scatter(interp, op, operand, source, init):
    """StableHLO spec: select_and_scatter.

    A float max/min-pool gradient (select ``GE``/``LE``, scatter ``add``) is the VJP of
    ``reduce_window`` max/min, which JAX transposes into the same select_and_scatter, with
    the same first-selected tie-breaking. Every other case (integer and bool operands, other
    select bodies, scatter bodies add/mul/max/min/or/and) folds the windows explicitly
    (:func:`_select_and_scatter_general`)."""
    select = classify_select(op.regions[0])
    scatter = classify_combiner(op.regions[1])
    if select not in ("GE", "LE") or scatter != "add" or not jnp.issubdtype(operand.dtype, jnp.floating):
        return _select_and_scatter_general(interp, op, operand, source, init)
    rank = operand.ndim
    padding = op.attr("padding")
    padding = [(0, 0)] * rank if padding is None else [tuple(int(v) for v in p) for p in padding]
    dims = tuple(op.attr("window_dimensions"))
    strides = tuple(op.attr("window_strides") or [1] * rank)
    reducer, identity = (lax.max, -jnp.inf) if select == "GE" else (lax.min, jnp.inf)
    identity = np.asarray(identity, operand.dtype)

    def pool(x):
        return lax.reduce_window(x, identity, reducer, dims, strides, padding)

    _, vjp = jax.vjp(pool, operand)
    return vjp(source)[0] + init


# scatter bodies as ``.at[]`` updates; on bools add/max/or are "or", mul/min/and are "and"
_SCATTER_AT = {"add": "add", "mul": "multiply", "max": "max", "min": "min", "or": "max", "and": "min"}
_BOOL_AT = {"add": "max", "max": "max", "or": "max", "mul": "min", "min": "min", "and": "min"}


def _select_and_scatter_general(interp, op, operand, source, init):
    """select_and_scatter as XLA evaluates it, for any elementwise ``select`` body: per window
    position in row-major order, every window's candidate is one strided slice of the padded
    operand; the current choice stays where ``select(current, candidate)`` is true. Padding
    is never a candidate (a window of padding alone selects nothing: its source value is
    dropped). The sources are combined into ``init`` at the chosen positions with the scatter
    body's reduction.

    Raises:
        NotImplementedError: a scatter body other than add/mul/max/min/or/and, or negative
            padding.
    """
    scatter = classify_combiner(op.regions[1])
    method = (_BOOL_AT if source.dtype == jnp.bool_ else _SCATTER_AT).get(scatter)
    if method is None:
        raise NotImplementedError(f"select_and_scatter with a {scatter or 'general'} scatter body")
    rank, shape, out_shape = operand.ndim, operand.shape, source.shape
    padding = op.attr("padding")
    pads = [(0, 0)] * rank if padding is None else [(int(p[0]), int(p[1])) for p in padding]
    if min(v for p in pads for v in p) < 0:
        raise NotImplementedError("select_and_scatter with negative padding")
    window = tuple(op.attr("window_dimensions"))
    strides = tuple(op.attr("window_strides") or [1] * rank)
    size = int(np.prod(shape, dtype=np.int64))
    padded = jnp.pad(operand, pads)
    valid = np.pad(np.ones(shape, bool), pads)
    positions = np.pad(np.arange(size, dtype=np.int64).reshape(shape), pads, constant_values=size)
    body = interp.region_fn(op.regions[0])
    select = jax.vmap(lambda a, b: body(a, b)[0])
    cur = cur_valid = cur_pos = None
    for offset in np.ndindex(*window):
        spans = zip(offset, out_shape, strides, strict=True)
        index = tuple(slice(k, k + (m - 1) * s + 1, s) for k, m, s in spans)
        cand, ok, pos = padded[index], valid[index], positions[index]
        if cur is None:
            cur, cur_valid, cur_pos = cand, ok, jnp.asarray(pos)
            continue
        keep = select(cur.reshape(-1), cand.reshape(-1)).reshape(out_shape)
        take = ok & (~keep | ~cur_valid)
        cur = jnp.where(take, cand, cur)
        cur_pos = jnp.where(take, pos, cur_pos)
        cur_valid = cur_valid | ok
    data = jnp.full((size + 1,), init, source.dtype)
    out = getattr(data.at[cur_pos.reshape(-1)], method)(source.reshape(-1))
    return out[:size].reshape(shape)


@register("chlo.top_k")
def _top_k(interp, op, x):
    return list(lax.top_k(x, op.attr("k")))


@register("stablehlo.sort")
def _sort(interp, op, *operands):
    """StableHLO spec: sort. A comparator ordering by one key (:func:`converter.regions.
    classify_sort_keys`) is ``lax.sort`` on an integer key prepended to the operands: the
    compared value evaluated on the whole operand (so a canonicalizing comparator's
    -0.0/NaN handling applies), as IEEE totalOrder integers for floats (``TOTALORDER``; other
    float compares tie -0.0 with +0.0), bitwise-negated for a descending order. Any other
    comparator is evaluated pairwise (:func:`_sort_general`)."""
    dim = op.attr("dimension", -1) % operands[0].ndim
    stable = bool(op.attr("is_stable"))
    keys = classify_sort_keys(op.regions[0])
    if keys is not None and len(keys) == 1 and not jnp.iscomplexobj(operands[keys[0].operand]):
        key = _sort_key(interp, op, keys[0], operands)
        return list(lax.sort((key, *operands), dimension=dim, is_stable=stable, num_keys=1)[1:])
    return _sort_general(interp.region_fn(op.regions[0]), operands, dim)


def _sort_key(interp, op, key, operands):
    """The integer (or bool) array whose ascending order is the comparator's order."""
    shape = operands[0].shape

    def compared(*elements):
        pairs = [v for x in elements for v in (x, x)]  # both elements of a pair: the same value
        return interp.region_values(op.regions[0], pairs, [key.value])[0]

    flat = [x.reshape(-1) for x in operands]
    value = (jax.vmap(compared)(*flat) if flat[0].size else flat[key.operand]).reshape(shape)
    if jnp.issubdtype(value.dtype, jnp.floating):
        if key.compare_type != "TOTALORDER":
            value = jnp.where(value == 0, jnp.zeros_like(value), value)  # -0.0 ties with +0.0
        value = total_order_key(value)
    return ~value if key.direction == "descending" else value


def _sort_general(less, operands, dim):
    """Sort with any strict-weak-order comparator ``less``: each element's rank is the
    number of elements that must precede it (``less(x_j, x_i)``, or equal and earlier, which
    makes it stable), then elements are scattered to their ranks. O(n^2) in the sorted
    dimension, exact for every comparator."""
    moved = [jnp.moveaxis(x, dim, -1) for x in operands]
    n = moved[0].shape[-1]

    def cmp(a, b):
        return less(*[v for pair in zip(a, b, strict=True) for v in pair])[0]

    pair = jax.vmap(jax.vmap(cmp, in_axes=(None, 0)), in_axes=(0, None))
    batch_shape = moved[0].shape[:-1]
    flat = [x.reshape((-1, n)) for x in moved]

    def one_row(*row):
        before = pair(row, row)  # before[j, i] = less(x_j, x_i)
        after = pair(row, row).T  # after[j, i] = less(x_i, x_j)
        j = jnp.arange(n)
        ties = (~before & ~after) & (j[:, None] < j[None, :])
        rank = jnp.sum(before | ties, axis=0)
        return [jnp.zeros_like(x).at[rank].set(x) for x in row]

    out = jax.vmap(one_row)(*flat)
    return [jnp.moveaxis(o.reshape(*batch_shape, n), -1, dim) for o in out]
