"""``reduce`` → ``Reduce*``, ``reduce_window`` → ``MaxPool`` (min: on the negation) / ``Conv``
sum pools, ``sort`` → ``TopK`` (which orders ties by index, so it is a stable sort).

Float max/min reductions propagate NaN as StableHLO's ``maximum``/``minimum`` do (a NaN mask
is reduced beside the values: onnxruntime's ``ReduceMax`` and ``MaxPool`` skip NaN)."""

from __future__ import annotations

import numpy as np

from converter import dtypes, mlir
from converter.regions import classify_combiner, classify_sort_keys

from ..graph import RetypedOp, onnx_dtype
from ..registry import register
from ..widen import NARROW, WIDE, WidenedOp
from .control_flow import BOOL_SCALAR, I64_SCALAR, subgraph
from .elementwise import BITCAST_OPSET, is_canonical

_REDUCE = {"add": "ReduceSum", "max": "ReduceMax", "min": "ReduceMin", "mul": "ReduceProd"}
_COMBINE = {"add": "Add", "max": "Max", "min": "Min", "mul": "Mul"}
_BOOL = {"and": "ReduceMin", "or": "ReduceMax"}


def _is_identity(kind, value) -> bool:
    if value is None:
        return False
    v = np.asarray(value)
    ident = {"add": 0, "mul": 1, "max": -np.inf, "min": np.inf, "and": True, "or": False}[kind]
    if kind in ("max", "min") and v.dtype.kind in "iub":
        info = np.iinfo(v.dtype) if v.dtype.kind != "b" else None
        ident = (info.min if kind == "max" else info.max) if info else (kind == "min")
    return bool(np.all(v == ident))


@register("stablehlo.reduce", dynamic=True)
def _reduce(interp, op, *args):
    """A one-operand reduce with a recognized body → ``Reduce*``; any other (variadic
    argmax-style reduces, general bodies) → :func:`_reduce_loop`."""
    kind = classify_combiner(op.regions[0]) if len(args) == 2 else None
    if kind not in (*_REDUCE, *_BOOL):
        return _reduce_loop(interp, op, args[: len(args) // 2], args[len(args) // 2 :])
    x, init = args
    g = interp.graph
    axes = g.ints(op.attr("dimensions"))
    if kind in _BOOL and op.result_type.dtype == "bool":
        as_int = g.op("Cast", [x], to=onnx_dtype("int32"))
        out = g.op("Cast", [g.op(_BOOL[kind], [as_int, axes], keepdims=0)], to=onnx_dtype("bool"))
        combine = "And" if kind == "and" else "Or"
    elif kind in _REDUCE:
        dtype = op.operand_type(0).dtype
        if dtype == "uint64" and kind in ("max", "min"):  # no kernel: order-preserving int64 keys
            out = _from_ordered(g, g.op(_REDUCE[kind], [_ordered(g, x), axes], keepdims=0))
        elif kind in ("add", "mul") and dtypes.is_integer(dtype):
            out = _integer_reduce(g, x, op.operand_type(0).shape, list(op.attr("dimensions")), kind, dtype)
            if out is None:  # a product over a dynamic number of elements
                return _reduce_loop(interp, op, [x], [init])[0]
        else:
            out = g.op_as(_REDUCE[kind], [x, axes], dtype, keepdims=0)
        if kind in ("max", "min") and dtypes.is_floating(dtype):
            out = _propagate_nan(g, x, out, dtype, lambda mask: g.op("ReduceMax", [mask, axes], keepdims=0))
        combine = _COMBINE[kind]
    else:
        raise NotImplementedError(f"reduce with a {kind} body on {op.result_type.dtype}")
    if _is_identity(kind, interp.static_operand(op, 1)):
        return out
    return g.op_as(combine, [out, init], op.result_type.dtype, data=(0, 1))


def _integer_reduce(g, x, shape, dims, kind, dtype):
    """An integer sum or product over ``dims`` of ``x``, wrapping as the StableHLO spec's
    integer ``add``/``multiply`` do: onnxruntime's integer ``ReduceSum``/``ReduceProd``
    compute through float64 (inexact past 2**53, saturating where the result overflows),
    while its int64 ``MatMul`` and ``Mul`` wrap exactly. The reduced dims are moved last and
    flattened to one of ``R`` elements, in int64 (the low bits of an int64 sum or product are
    those of the narrower type's): a sum is a ``MatMul`` by ``R`` ones; a product over a
    static ``R`` halves that axis ``ceil(log2 R)`` times with ``Mul``. Returns None for a
    product over a dynamic ``R`` (the caller folds it in a loop)."""
    kept = [i for i in range(len(shape)) if i not in dims]
    sizes = g.sizes(x, shape)
    reduced = g.product([sizes[i] for i in dims])
    if kind == "mul" and not isinstance(reduced, int):
        return None
    kept_sizes = [sizes[i] for i in kept]
    wide = g.cast(x, "int64") if dtype != "int64" else x
    perm = kept + dims
    moved = g.op("Transpose", [wide], perm=perm) if perm != sorted(perm) else wide
    flat = g.op("Reshape", [moved, g.shape_vector([*kept_sizes, reduced])], allowzero=1)

    def ones(parts):
        return g.op("Expand", [g.const(np.int64(1)), g.shape_vector(parts)])

    def last(v, start, stop):  # v[..., start:stop]
        return g.op("Slice", [v, g.ints([start]), g.ints([stop]), g.ints([-1])])

    if kind == "add":
        out = g.op("MatMul", [flat, ones([reduced])])
    elif reduced == 0:
        out = ones(kept_sizes)
    else:
        n = reduced
        while n > 1:
            half = n // 2
            product = g.op("Mul", [last(flat, 0, half), last(flat, half, 2 * half)])
            if n % 2:  # the odd last element carries over
                product = g.op("Concat", [product, last(flat, 2 * half, n)], axis=-1)
            flat, n = product, n - half
        out = g.op("Reshape", [flat, g.shape_vector(kept_sizes)], allowzero=1)
    return g.cast(out, dtype) if dtype != "int64" else out


#: StableHLO ops a reduce body may hold for :func:`_reduce_loop`: elementwise ones, whose
#: rules broadcast (the body's scalars become whole slices of the operands).
ELEMENTWISE_BODY = {
    f"stablehlo.{name}"
    for name in (
        "abs add and ceil clamp compare constant convert cosine divide exponential "
        "exponential_minus_one floor is_finite log log_plus_one logistic maximum minimum "
        "multiply negate not or power remainder round_nearest_afz round_nearest_even rsqrt "
        "select sign sine sqrt subtract tanh xor return"
    ).split()
}


def _reduce_loop(interp, op, xs, inits):
    """A reduce with any elementwise body, as an ONNX ``Loop`` folding the body over the
    reduced elements one at a time (StableHLO leaves the order to the implementation; bodies
    like argmax's, which break ties by index, give the same result in every order).

    The reduced dimensions are moved first and flattened to one of size ``R``; the loop
    carries one accumulator per operand, shaped as the result, starting from the init values.
    Dynamic dimensions (shape-polymorphic modules) are read with ``Shape`` at run time: the
    trip count ``R`` and the accumulators' shape then come from the operand.

    Raises:
        NotImplementedError: the body holds a non-elementwise op.
    """
    body_ops = {o.name for o in mlir.walk_ops(op.mlir)}
    if not body_ops <= ELEMENTWISE_BODY:
        raise NotImplementedError(f"reduce body with {sorted(body_ops - ELEMENTWISE_BODY)}")
    shape = op.operand_type(0).shape
    g = interp.graph
    dims = list(op.attr("dimensions"))
    kept = [i for i in range(len(shape)) if i not in dims]
    sizes = g.sizes(xs[0], shape)  # ints, or int64 [1] values for dynamic dimensions
    out_sizes = [sizes[i] for i in kept]
    reduced = g.product([sizes[i] for i in dims])
    flat_shape = g.shape_vector([reduced, *out_sizes])
    flat = [g.op("Reshape", [g.op("Transpose", [x], perm=dims + kept), flat_shape], allowzero=1) for x in xs]
    out_shape = [shape[i] for i in kept]
    types = [mlir.TensorType(tuple(out_shape), t.dtype) for t in op.result_types]
    carried = [(g.fresh("acc"), t) for t in types]
    body = interp.region_fn(op.regions[0])
    it, cond = g.fresh("i"), g.fresh("cond")
    returned = [mlir.tensor_type(v.type).dtype for v in _body_results(op)]

    def emit():
        sub = interp.graph
        elements = [sub.op("Gather", [x, it], axis=0) for x in flat]
        new = body(*(n for n, _ in carried), *elements)
        new = [
            sub.cast(v, t.dtype) if r != t.dtype else v for v, t, r in zip(new, types, returned, strict=True)
        ]
        return [(cond, BOOL_SCALAR), *zip(new, types, strict=True)]

    graph = subgraph(interp, "reduce_body", [(it, I64_SCALAR), (cond, BOOL_SCALAR), *carried], emit)
    starts = [g.op("Expand", [init, g.shape_vector(out_sizes)]) for init in inits]
    trips = (
        g.const(np.int64(reduced)) if isinstance(reduced, int) else g.op("Squeeze", [reduced, g.ints([0])])
    )
    out = g.op("Loop", [trips, "", *starts], len(starts), body=graph)
    return out if isinstance(out, list) else [out]


def _body_results(op):
    """The values the reduce body returns (its terminator's operands)."""
    block = op.regions[0].blocks[0]
    return list(list(block.operations)[-1].operands)


_INT64_MIN = np.int64(np.iinfo(np.int64).min)


def _ordered(g, x):
    """uint64 ``x`` as int64 keys in the same order (top bit flipped): onnxruntime has no
    uint64 ``ReduceMax``/``ReduceMin``/``TopK``."""
    return g.op("BitwiseXor", [g.op("Cast", [x], to=onnx_dtype("int64")), g.const(_INT64_MIN)])


def _from_ordered(g, keys):
    return g.op("Cast", [g.op("BitwiseXor", [keys, g.const(_INT64_MIN)])], to=onnx_dtype("uint64"))


def _propagate_nan(g, x, out, dtype, pool):
    """``out`` with NaN wherever ``pool`` (the same reduction, on a 0/1 mask in ``dtype``) sees
    a NaN of ``x``: StableHLO's ``maximum``/``minimum`` propagate NaN, onnxruntime's
    ``ReduceMax``/``MaxPool`` skip it."""
    mask = pool(g.op("Cast", [g.op("IsNaN", [x])], to=onnx_dtype(dtype)))
    nan = g.const(np.nan, dtype)
    return g.op("Where", [g.op("Greater", [mask, g.const(0, dtype)]), nan, out])


def _pool_layout(op):
    """Split dims into pooled (window, stride or padding not trivial) and carried ones."""
    rank = op.operand_type(0).rank
    win = op.attr("window_dimensions")
    strides = op.attr("window_strides") or [1] * rank
    padding = op.attr("padding")
    pads = [(0, 0)] * rank if padding is None else [tuple(int(v) for v in p) for p in padding]
    dil = op.attr("window_dilations") or [1] * rank
    pooled = [i for i in range(rank) if win[i] != 1 or strides[i] != 1 or pads[i] != (0, 0)]
    return rank, pooled, win, strides, pads, dil


def _cumulative_sum_axis(op, kind, pooled, win, strides, pads, dil):
    """The axis when the window op is an inclusive prefix sum (one dim, window = its size,
    low padding = size - 1, stride and dilation 1), as ``jnp.cumsum`` lowers; else None."""
    if kind != "add" or len(pooled) != 1:
        return None
    axis = pooled[0]
    n = op.operand_type(0).shape[axis]
    if win[axis] == n and pads[axis] == (n - 1, 0) and strides[axis] == 1 and dil[axis] == 1:
        return axis
    return None


def _cumulative(op, pooled, win, strides, pads, dil):
    """``(axis, reverse)`` when the window op is an inclusive scan along one static axis
    (window = its size, padding ``size - 1`` on one side, stride and dilation 1), as
    ``jnp.cumprod`` and ``lax.cumlogsumexp`` lower; else None."""
    if len(pooled) != 1:
        return None
    axis = pooled[0]
    n = op.operand_type(0).shape[axis]
    if n is None or win[axis] != n or strides[axis] != 1 or dil[axis] != 1:
        return None
    if pads[axis] in ((n - 1, 0), (0, n - 1)):
        return axis, pads[axis] == (0, n - 1)
    return None


def _scan_loop(interp, op, x, init, axis, reverse):
    """An inclusive scan with any elementwise body as an ONNX ``Loop``: the accumulator
    (``init`` at first) is folded with one slice along ``axis`` per iteration, and every
    step's accumulator is a scan output (stacked on axis 0, moved back to ``axis``)."""
    body_ops = {o.name for o in mlir.walk_ops(op.mlir)}
    if not body_ops <= ELEMENTWISE_BODY:
        raise NotImplementedError(f"reduce_window body with {sorted(body_ops - ELEMENTWISE_BODY)}")
    g = interp.graph
    shape = op.operand_type(0).shape
    if None in shape:
        raise NotImplementedError("cumulative reduce_window with a general body on dynamic shapes")
    n = shape[axis]
    rest = [i for i in range(len(shape)) if i != axis]
    moved = g.op("Transpose", [x], perm=[axis, *rest])
    slice_type = mlir.TensorType(tuple(shape[i] for i in rest), op.result_type.dtype)
    acc, it, cond = g.fresh("acc"), g.fresh("i"), g.fresh("cond")
    body = interp.region_fn(op.regions[0])
    returned = mlir.tensor_type(_body_results(op)[0].type).dtype

    def emit():
        sub = interp.graph
        pos = sub.op("Sub", [sub.const(np.int64(n - 1)), it]) if reverse else it
        (new,) = body(acc, sub.op("Gather", [moved, pos], axis=0))
        new = new if returned == slice_type.dtype else sub.cast(new, slice_type.dtype)
        return [(cond, BOOL_SCALAR), (new, slice_type), (new, slice_type)]

    graph = subgraph(interp, "scan_body", [(it, I64_SCALAR), (cond, BOOL_SCALAR), (acc, slice_type)], emit)
    start = g.op("Expand", [init, g.ints(slice_type.shape)])
    _, stacked = g.op("Loop", [g.const(np.int64(n)), "", start], 2, body=graph)
    if reverse:
        stacked = g.op(
            "Slice", [stacked, g.ints([-1]), g.ints([np.iinfo(np.int64).min]), g.ints([0]), g.ints([-1])]
        )
    inv = [0] * len(shape)
    for pos, dim in enumerate([axis, *rest]):
        inv[dim] = pos
    return g.op("Transpose", [stacked], perm=inv)


#: Types onnxruntime's CPU ``Conv`` takes (sum pools of other types add strided slices).
_CONV_TYPES = {"float32", "float16"}


def _static(op) -> bool:
    return all(isinstance(d, int) for t in (op.operand_type(0), op.result_type) for d in t.shape)


def _sum_of_slices(g, x, op, layout, narrow: bool = False):
    """A sum pool as the sum of its ``prod(window)`` strided ``Slice``s of the zero-padded
    input, window position by position (row-major, as XLA accumulates): for types
    onnxruntime's ``Conv`` lacks (float64, integers), and for bfloat16 (``narrow``; ``x`` is
    its float32 widening), where XLA rounds to bfloat16 after every add, as this does.
    Static shapes only."""
    win, strides, pads, dil = layout
    rank = len(win)
    dtype = op.operand_type(0).dtype
    out = op.result_type.shape
    if any(p != (0, 0) for p in pads):
        flat = [p[0] for p in pads] + [p[1] for p in pads]
        x = g.op("Pad", [x, g.ints(flat), g.const(np.zeros((), dtypes.to_numpy(dtype)))])
    total = None
    axes, steps = g.ints(list(range(rank))), g.ints(list(strides))
    for offset in np.ndindex(*win):
        starts = [o * d for o, d in zip(offset, dil, strict=True)]
        ends = [b + (n - 1) * s + 1 for b, n, s in zip(starts, out, strides, strict=True)]
        part = g.op("Slice", [x, g.ints(starts), g.ints(ends), axes, steps])
        total = part if total is None else g.op("Add", [total, part])
        if narrow:
            total = g.cast(g.cast(total, NARROW), WIDE)
    return total


@register("stablehlo.reduce_window", dynamic=True)
def _reduce_window(interp, op, x, init):
    """Max/min pools → ``MaxPool``, sum pools → ``Conv`` with ones (a prefix sum →
    ``CumSum``); an inclusive scan with any other elementwise body → :func:`_scan_loop`."""
    kind = classify_combiner(op.regions[0])
    if kind not in ("max", "min", "add") and not any(v != 1 for v in (op.attr("base_dilations") or [1])):
        scan = _cumulative(op, *_pool_layout(op)[1:])
        if scan is not None:
            return _scan_loop(interp, op, x, init, *scan)
    if kind not in ("max", "min", "add") or any(v != 1 for v in (op.attr("base_dilations") or [1])):
        raise NotImplementedError(f"reduce_window with a {kind or 'general'} body or base dilation")
    if not _is_identity(kind, interp.static_operand(op, 1)):
        raise NotImplementedError("reduce_window with a non-identity init value")
    dtype = op.operand_type(0).dtype
    g = interp.graph
    rank, pooled, win, strides, pads, dil = _pool_layout(op)
    if not pooled:  # every window is one element (a scan along a length-1 axis): the identity
        return g.op("Identity", [x])
    cumsum_axis = _cumulative_sum_axis(op, kind, pooled, win, strides, pads, dil)
    if cumsum_axis is not None:
        return g.op_as("CumSum", [x, g.const(np.int64(cumsum_axis))], dtype)
    narrow = isinstance(op, WidenedOp) and op.narrow_operand(0)
    if kind == "add" and (dtype not in _CONV_TYPES or narrow) and _static(op):
        return _sum_of_slices(g, x, op, (win, strides, pads, dil), narrow)
    if not dtypes.is_floating(dtype):
        raise NotImplementedError(f"reduce_window on {dtype}")
    carried = [i for i in range(rank) if i not in pooled]
    shape = op.operand_type(0).shape
    if kind in ("max", "min") and carried == [0, 1] and isinstance(shape[1], int):
        # already [N, C, spatial...]: pooled as it is, no reshapes
        layout = (win[2:], strides[2:], pads[2:], dil[2:])
        nonneg = kind == "max" and _nonnegative(interp, op) and _windows_touch_input(shape[2:], *layout)
        return _max_pool(g, x, kind, dtype, shape[1], layout, nonneg)
    sizes = g.sizes(x, shape)  # a dynamic dimension's size is computed
    perm = carried + pooled
    y = g.op("Transpose", [x], perm=perm)
    lead = g.product([sizes[i] for i in carried])
    y = g.op("Reshape", [y, g.shape_vector([lead, 1] + [sizes[i] for i in pooled])], allowzero=1)
    if kind in ("max", "min"):
        y = _max_pool(g, y, kind, dtype, 1, tuple([v[i] for i in pooled] for v in (win, strides, pads, dil)))
    else:
        attrs = _pool_attrs([win[i] for i in pooled], [strides[i] for i in pooled], [pads[i] for i in pooled])
        attrs["dilations"] = [dil[i] for i in pooled]
        ones = g.const(np.ones([1, 1] + attrs["kernel_shape"], dtypes.to_numpy(dtype)))
        y = g.op("Conv", [y, ones], **attrs)
    out = op.result_type.shape  # carried dimensions keep their size (window 1, stride 1, no padding)
    out_sizes = [out[i] if out[i] is not None else sizes[i] for i in carried] + [
        out[i] if out[i] is not None else g.dim(y, 2 + k) for k, i in enumerate(pooled)
    ]
    y = g.op("Reshape", [y, g.shape_vector(out_sizes)], allowzero=1)
    inv = [0] * rank
    for pos, dim in enumerate(perm):
        inv[dim] = pos
    return g.op("Transpose", [y], perm=inv)


def _pool_attrs(kernel, strides, pads) -> dict:
    return dict(
        kernel_shape=list(kernel), strides=list(strides), pads=[p[0] for p in pads] + [p[1] for p in pads]
    )


#: ``HardSigmoid(alpha * x + beta)`` with these is 0 at -inf, 1 at every other number and
#: NaN at NaN (``alpha * x`` is at least -4 for a finite ``x``).
_FINITE_ALPHA, _FINITE_BETA = 2.0**-126, 5.0


def _max_pool(g, x, kind, dtype, channels, layout, nonneg: bool = False):
    """A max (min: on the negation) pool of ``x`` (``[N, C, spatial...]``, ``channels`` the
    size of ``C``) over its spatial dims as ``MaxPool`` (``layout``: window, strides,
    ``(low, high)`` pads and dilations per spatial dim), with StableHLO's ``maximum``: NaN
    wherever a window holds one, -inf where it holds only -inf (or padding).

    onnxruntime's ``MaxPool`` keeps or skips a NaN depending on where it is in the window,
    and starts from the lowest finite value in some of its kernels, so an all -inf window
    gives -3.4e38 there. The result is corrected by a convolution over the same windows:

    - ``x`` known non-negative (``nonneg``: a ``Relu``'s result, and no window wholly in
      the padding): ``Min(MaxPool(x), Conv(x, ones))``. The window sum is at least the
      maximum (every term is non-negative, and rounding to nearest is monotone) and NaN
      exactly when the window holds a NaN (no -inf, so no ``inf - inf``); onnxruntime's
      ``Min`` propagates NaN from either side.
    - otherwise (float32): ``MaxPool(x) / Sign(Conv(f(x), ones))`` with ``f``
      (``HardSigmoid``) 0 at -inf, NaN at NaN and 1 elsewhere, so the divisor is 1 for a
      window of numbers (the values unchanged, -0.0 included), 0 for an all -inf one
      (giving -inf) and NaN for one with a NaN.

    float16 pools in float32 (a max is exact in any wider type); float64 pools NaN and
    -inf masks beside the values (onnxruntime has no float64 ``Conv``). Padding that
    onnxruntime's pools refuse (a pad not smaller than the window, or negative) is one
    explicit ``Pad`` first (with -inf; with 0 for a non-negative ``x``)."""
    if dtype == "float16":
        return g.cast(_max_pool(g, g.cast(x, "float32"), kind, "float32", channels, layout, nonneg), dtype)
    win, strides, pads, dil = layout
    nd = len(win)
    flip = (lambda v: g.op("Neg", [v])) if kind == "min" else (lambda v: v)  # min(x) = -max(-x), exact
    y = flip(x)
    if any(not 0 <= p < w for lohi, w in zip(pads, win, strict=True) for p in lohi):
        flat = [0, 0] + [p[0] for p in pads] + [0, 0] + [p[1] for p in pads]
        y = g.op("Pad", [y, g.ints(flat), g.const(0 if nonneg else -np.inf, dtype)])
        pads = [(0, 0)] * nd
    attrs = _pool_attrs(win, strides, pads)
    attrs["dilations"] = list(dil)
    pooled = g.op("MaxPool", [y], **attrs)
    if dtype != "float32":
        pool = lambda mask: g.op("MaxPool", [mask], **attrs)  # noqa: E731
        not_neg_inf = g.cast(g.op("Not", [g.op("Equal", [y, g.const(-np.inf, dtype)])]), dtype)
        # no number in the window (an all-padding one pools to the lowest value); the pooled
        # values in Where's false branch, which keeps -0.0 (onnxruntime's true branch does not)
        none = g.op("LessOrEqual", [pool(not_neg_inf), g.const(0, dtype)])
        pooled = g.op("Where", [none, g.const(-np.inf, dtype), pooled])
        return flip(_propagate_nan(g, y, pooled, dtype, pool))
    ones = g.const(np.ones([channels, 1, *win], np.float32), whole=True)
    if nonneg:
        return g.op("Min", [pooled, g.op("Conv", [y, ones], group=channels, **attrs)])
    finite = g.op("HardSigmoid", [y], alpha=_FINITE_ALPHA, beta=_FINITE_BETA)
    count = g.op("Conv", [finite, ones], group=channels, **attrs)
    return flip(g.op("Div", [pooled, g.op("Sign", [count])]))


def _nonnegative(interp, op) -> bool:
    """Whether ``op``'s first operand is a matched ``Relu`` (never negative, never -inf)."""
    value = op.operands[0]
    patterns = getattr(interp, "patterns", {})
    while True:
        match = patterns.get(value)
        if match is not None:
            return match.op_type == "Relu"
        owner = getattr(value.owner, "operation", value.owner)
        if getattr(owner, "name", None) != "func.call":
            return False
        callee = interp.functions[mlir.Op(owner).attr("callee")]  # a verified module resolves it
        index = next(i for i, r in enumerate(owner.results) if r == value)
        value = list(callee.regions[0].blocks[0].operations)[-1].operands[index]


def _windows_touch_input(sizes, win, strides, pads, dil) -> bool:
    """Whether every window of a pool over static ``sizes`` holds at least one input
    element (none lies wholly in the padding). Static: a matched Relu's zero is a static
    ``broadcast_in_dim``, so its operand, the pooled value, has a static shape."""
    for n, w, s, (lo, hi), d in zip(sizes, win, strides, pads, dil, strict=True):
        count = (n + lo + hi - (w - 1) * d - 1) // s + 1
        for i in range(max(count, 0)):
            if not any(0 <= i * s - lo + j * d < n for j in range(w)):
                return False
    return True


@register("stablehlo.sort", dynamic=True)
def _sort(interp, op, *operands):
    """StableHLO spec: sort, as ``TopK`` over the whole dimension (onnxruntime's ``TopK`` is
    stable: ties keep index order; NaN sorts as the largest value). A lexicographic comparator
    (:func:`~converter.regions.classify_sort_keys`) is one stable ``TopK`` pass per key, from
    the least significant key to the most, composing the permutations; every operand is
    gathered once at the end.

    Float keys compared ``TOTALORDER`` follow IEEE totalOrder (-NaN < -inf < ... < -0.0 <
    +0.0 < ... < inf < NaN). JAX's canonicalizing comparators leave no -0.0 and no negative
    NaN, so ``TopK`` on the values is exact. Otherwise (a raw comparator, as in ``chlo.top_k``'s
    decomposition) the compared value is evaluated on the whole operand and, from opset 26,
    ``BitCast`` to totalOrder integers; below opset 26 -0.0 is put before +0.0 by an extra
    pass on a 0/-1 key, while a NaN's sign cannot be read (every NaN sorts as +NaN).

    Raises:
        NotImplementedError: any other comparator.
    """
    keys = classify_sort_keys(op.regions[0])
    if keys is None:
        raise NotImplementedError("sort with a comparator other than < or > on its operands, key by key")
    g = interp.graph
    dim = op.attr("dimension", -1) % op.operand_type(0).rank
    n = op.operand_type(0).shape[dim]
    k = g.ints([n]) if n is not None else g.dim(operands[0], dim)
    passes = []  # (key values at the original positions, index of the operand typing them, order)
    for key in keys:
        passes.extend(_key_passes(interp, op, key, operands))
    if len(passes) == 1 and passes[0][0] is operands[0]:  # TopK gives the sorted key itself
        values, idx = _topk(g, op, operands[0], 0, passes[0][2], k, dim)
        return [values] + [g.op("GatherElements", [x, idx], axis=dim) for x in operands[1:]]
    perm = None
    for values, dtype, order in reversed(passes):
        key = values if perm is None else g.op("GatherElements", [values, perm], axis=dim)
        _, idx = _topk_typed(g, key, dtype, order, k, dim)
        perm = idx if perm is None else g.op("GatherElements", [perm, idx], axis=dim)
    return [g.op("GatherElements", [x, perm], axis=dim) for x in operands]


def _key_passes(interp, op, key, operands) -> list[tuple[str, str, str]]:
    """The ``TopK`` passes of one sort key, most significant first: ``(values, dtype,
    order)``. A key that compares the operand's element itself, or JAX's canonicalization of
    it in ``TOTALORDER`` (:func:`~.elementwise.is_canonical`), is the operand; any other
    compared value (a comparator mapping values through ``select``) is evaluated on the
    whole operand first, and a float ``TOTALORDER`` one needs more passes (see :func:`_sort`)."""
    x, dtype = operands[key.operand], op.operand_type(key.operand).dtype
    element = op.regions[0].blocks[0].arguments[2 * key.operand]  # the left element's argument
    total = key.compare_type == "TOTALORDER" and dtypes.is_floating(dtype)
    if key.value == element and not total or total and is_canonical(interp, key.value, of=element):
        return [(x, dtype, key.direction)]
    g = interp.graph
    pairs = [v for operand in operands for v in (operand, operand)]  # both elements: the operand
    (value,) = interp.region_values(op.regions[0], pairs, [key.value])
    if key.value != element:  # computed by the comparator's ops: in its own type, not widened
        own = mlir.tensor_type(key.value.type)
        dtype = op.retype(own).dtype if isinstance(op, RetypedOp) else own.dtype
        value = value if dtype == own.dtype else g.cast(value, dtype)
    if not (key.compare_type == "TOTALORDER" and dtypes.is_floating(dtype)):
        return [(value, dtype, key.direction)]
    if interp.opset >= BITCAST_OPSET:
        bits = {"float16": "int16", "float32": "int32", "float64": "int64"}[dtype]
        i = g.op("BitCast", [value], to=onnx_dtype(bits))
        mask = np.iinfo(bits).max  # flips the magnitude bits of negative values
        if bits == "int16":  # sign-extended: onnxruntime's Where and TopK have no int16 kernels
            i, bits = g.cast(i, "int32"), "int32"
        flip = g.op("BitwiseXor", [i, g.const(mask, bits)])
        ordered = g.op("Where", [g.op("Less", [i, g.const(0, bits)]), flip, i])
        return [(ordered, bits, key.direction)]
    zero = g.const(0, dtype)
    negative_zero = g.op(
        "And", [g.op("Equal", [value, zero]), g.op("Less", [g.op("Div", [g.const(1, dtype), value]), zero])]
    )
    sign = g.op("Neg", [g.cast(negative_zero, "int32")])  # -1 for -0.0: it sorts before +0.0
    return [(value, dtype, key.direction), (sign, "int32", key.direction)]


def _topk_typed(g, x, dtype, order, k, dim):
    """(sorted values, indices) of ``TopK`` on ``x`` of ``dtype``: uint64 as order-preserving
    int64 keys, bool as int32."""
    keys = _ordered(g, x) if dtype == "uint64" else x
    if dtype == "bool":
        keys, dtype = g.cast(x, "int32"), "int32"
    values, idx = g.op_as(
        "TopK", [keys, k], dtype, n_out=2, axis=dim, largest=int(order == "descending"), sorted=1
    )
    return values, idx


def _topk(g, op, x, index, order, k, dim):
    """(sorted values, indices) of ``TopK`` on operand ``index``'s values ``x``
    (:func:`_topk_typed`), the values back in the operand's type."""
    dtype = op.operand_type(index).dtype
    values, idx = _topk_typed(g, x, dtype, order, k, dim)
    if dtype == "uint64":
        values = _from_ordered(g, values)
    elif dtype == "bool":
        values = g.cast(values, "bool")
    return values, idx


_SCATTER_REDUCTION = {"add": "add", "mul": "mul", "max": "max", "min": "min"}
# i1 scatter bodies: add/max/or are "or", mul/min/and are "and"
_BOOL_SCATTER_REDUCTION = {"add": "max", "max": "max", "or": "max", "mul": "min", "min": "min", "and": "min"}


@register("stablehlo.select_and_scatter")
def _select_and_scatter(interp, op, operand, source, init):
    """StableHLO spec: select_and_scatter (a max/min-pool gradient, or any elementwise
    ``select`` body). Per window position ``k`` in row-major order, the operand's candidates
    for every window are one strided ``Slice`` of the padded operand; the ``select`` body
    (emitted on whole tensors) folds them left to right: the current choice stays where it
    returns true, as XLA iterates. Padding positions are never candidates, and a window of
    padding alone selects nothing (its source value is dropped, through a spill slot). The
    sources are then combined into ``init`` at the chosen flat positions by
    ``ScatterElements`` with the ``scatter`` body's reduction (add, mul, max, min).

    Shapes: operand ``S``, source ``O`` (the window count per dimension), result ``S``.

    Raises:
        NotImplementedError: a select body with non-elementwise ops, another scatter body,
            or negative padding.
    """
    body_ops = {o.name for o in mlir.walk_ops(op.mlir)} - {"stablehlo.select_and_scatter"}
    if not body_ops <= ELEMENTWISE_BODY:
        raise NotImplementedError(f"select_and_scatter body with {sorted(body_ops - ELEMENTWISE_BODY)}")
    is_bool = op.result_type.dtype == "bool"
    reductions = _BOOL_SCATTER_REDUCTION if is_bool else _SCATTER_REDUCTION
    reduction = reductions.get(classify_combiner(op.regions[1]))
    if reduction is None:
        raise NotImplementedError("select_and_scatter with a scatter body other than add/mul/max/min/or/and")
    shape, out_shape = op.operand_type(0).shape, op.operand_type(1).shape  # static: not a dynamic rule
    rank = len(shape)
    window = list(op.attr("window_dimensions"))
    strides = list(op.attr("window_strides") or [1] * rank)
    padding = op.attr("padding")
    lows, highs = (
        ([0] * rank, [0] * rank)
        if padding is None
        else ([int(p[0]) for p in padding], [int(p[1]) for p in padding])
    )
    if min(lows + highs) < 0:
        raise NotImplementedError("select_and_scatter with negative padding")
    g = interp.graph
    dtype = op.operand_type(0).dtype
    padded = (
        g.op_as("Pad", [operand, g.ints(lows + highs)], dtype, mode="constant")
        if any(lows + highs)
        else operand
    )
    size = int(np.prod(shape, dtype=np.int64))
    flat_strides = [int(np.prod(shape[d + 1 :], dtype=np.int64)) for d in range(rank)]
    grid = np.indices(out_shape, dtype=np.int64)
    base = sum((grid[d] * strides[d] - lows[d]) * flat_strides[d] for d in range(rank))
    base_name = g.const(np.asarray(base, np.int64))
    select = interp.region_fn(op.regions[0])
    cur = sel = None
    cur_valid = np.zeros(out_shape, bool)
    for offset in np.ndindex(*window):
        ends = [k + (m - 1) * s + 1 for k, m, s in zip(offset, out_shape, strides, strict=True)]
        cand = g.op("Slice", [padded, g.ints(offset), g.ints(ends), g.ints(range(rank)), g.ints(strides)])
        valid = _window_valid(offset, out_shape, strides, lows, shape)
        target = g.op(
            "Add",
            [base_name, g.const(np.int64(sum(k * f for k, f in zip(offset, flat_strides, strict=True))))],
        )
        if cur is None:
            cur, cur_valid = cand, valid
            sel = target if valid.all() else g.op("Where", [g.const(valid), target, g.const(np.int64(size))])
            continue
        (keep,) = select(cur, cand)
        take = g.op("Not", [keep])
        if not cur_valid.all():
            take = g.op("Or", [take, g.const(~cur_valid)])
        if not valid.all():
            take = g.op("And", [take, g.const(valid)])
        cur = g.op_as("Where", [take, cand, cur], dtype, data=(1, 2))
        sel = g.op("Where", [take, target, sel])
        cur_valid = cur_valid | valid
    out_dtype = "int32" if is_bool else op.result_type.dtype  # bools reduce as 0/1 (max: or, min: and)
    data = g.op("Expand", [g.op("Reshape", [init, g.ints([1])]), g.ints([size + 1])])
    updates = g.op("Reshape", [source, g.ints([-1])])
    if is_bool:
        data, updates = g.cast(data, "int32"), g.cast(updates, "int32")
    indices = g.op("Reshape", [sel, g.ints([-1])])
    scattered = g.op_as(
        "ScatterElements", [data, indices, updates], out_dtype, data=(0, 2), axis=0, reduction=reduction
    )
    if is_bool:
        scattered = g.cast(scattered, "bool")
    kept = g.op("Slice", [scattered, g.ints([0]), g.ints([size]), g.ints([0])])
    return g.op("Reshape", [kept, g.ints(shape)], allowzero=1)


def _window_valid(offset, out_shape, strides, lows, shape) -> np.ndarray:
    """Which windows' element at window position ``offset`` lies inside the operand (not in
    its padding): a bool array of the source's shape."""
    valid = np.ones(out_shape, bool)
    for d, (k, m, s, lo, n) in enumerate(zip(offset, out_shape, strides, lows, shape, strict=True)):
        pos = np.arange(m) * s + k - lo
        along = (pos >= 0) & (pos < n)
        valid &= along.reshape([-1 if i == d else 1 for i in range(len(out_shape))])
    return valid
