"""gather/scatter, reductions, pools and sort through the ONNX backend."""

import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from jax import lax

import converter
from converter.errors import OpConversionError
from tests.compare import (
    SELECT_AND_SCATTER_CASES,
    TOTAL_ORDER_SPECIALS,
    assert_bits_equal,
    assert_outputs_close,
    run_xla,
    select_and_scatter_inputs,
    select_and_scatter_text,
    sort_text,
)

from .helpers import assert_onnx_same, run_onnx, run_session, run_text

rng = np.random.default_rng(0)
A = rng.normal(size=(4, 5, 6)).astype(np.float32)
IDX = np.array([3, 0, 2, 2, 9, -1], np.int32)


def test_gather_forms():
    m = A[0]
    assert_onnx_same(
        lambda a, i: (
            a[jnp.clip(i, 0, 3)],
            a[:, jnp.clip(i, 0, 5)],
            jnp.take(a, i, axis=0, mode="clip"),
            a[jnp.clip(i.reshape(2, 3), 0, 3)],  # rows at a 2-D index array: (2, 3, 5)
        ),
        m,
        IDX,
    )


@pytest.mark.parametrize("mode", ["add", "set", "max"])
def test_scatter_forms(mode):
    def f(a, i):
        return getattr(a.at[jnp.clip(i, 0, 3)], mode)(jnp.ones((6, 6), a.dtype))

    assert_onnx_same(f, A[0], IDX)


def test_reductions_with_init():
    assert_onnx_same(
        lambda a: (
            a.sum(1),
            a.max(),
            a.min(0),
            a.prod(2),
            jnp.all(a > -3, 1),
            jnp.any(a > 2),
            lax.reduce(a, np.float32(10.0), lax.add, (0,)),
        ),
        A,
    )


def test_reduction_with_an_init_known_at_run_time_only():
    """An init that is an input, not a constant: combined with the reduction (here 10 + sum,
    and max(init, max))."""
    init = np.float32(10.0)
    assert_onnx_same(lambda a, i: (lax.reduce(a, i, lax.add, (0,)), lax.reduce(a, i, lax.max, (1,))), A, init)


def test_pools():
    x = A[None]
    assert_onnx_same(
        lambda x: (
            lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "SAME"),
            lax.reduce_window(x, 0.0, lax.add, (1, 1, 3, 3), (1, 1, 1, 1), [(0, 0), (0, 0), (1, 1), (1, 1)]),
        ),
        x,
    )


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64])
def test_sum_pools_without_conv(dtype):
    """onnxruntime's Conv has no float64 or integer kernel: those sum pools add the window's
    strided slices of the zero-padded input (padding, strides and window dilation)."""
    x = (rng.normal(size=(2, 3, 7, 6)) * 10).astype(dtype)
    zero = dtype(0)
    assert_onnx_same(
        lambda a: (
            lax.reduce_window(a, zero, lax.add, (1, 1, 3, 2), (1, 1, 2, 1), "SAME"),
            lax.reduce_window(
                a, zero, lax.add, (1, 2, 2, 2), (1, 1, 2, 3), "VALID", window_dilation=(1, 1, 2, 1)
            ),
            # every dimension padded: no (0, 0) pad among them
            lax.reduce_window(a, zero, lax.add, (2, 2, 2, 2), (1, 1, 1, 1), ((1, 0), (0, 1), (1, 1), (1, 0))),
        ),
        x,
    )


def test_bfloat16_sum_pool_rounds_per_add():
    """XLA adds a bfloat16 window element by element (row-major), rounding each partial sum;
    the unpadded sum pool does the same (float32 adds, each rounded to bfloat16)."""
    x = rng.normal(size=(2, 3, 9, 8)).astype(ml_dtypes.bfloat16)
    zero = ml_dtypes.bfloat16(0)
    assert_onnx_same(lambda a: lax.reduce_window(a, zero, lax.add, (1, 1, 3, 2), (1, 1, 2, 1), "VALID"), x)


def test_sort_stable_with_payload():
    keys = np.array([3, 1, 2, 1, 3, 0], np.int32)
    vals = np.arange(6, dtype=np.float32)
    assert_onnx_same(
        lambda k, v: (jnp.sort(k), lax.sort((k, v), num_keys=1), jnp.sort(v, descending=True)), keys, vals
    )


def test_float_sort_total_order():
    """jnp.sort/argsort of floats: JAX's comparator canonicalizes -0.0 and NaN with constants
    captured from outside the body; still one TopK (NaN last, ties stable)."""
    x = np.array([3, -0.0, np.nan, 1, 0.0, -np.inf, 2, 1], np.float32)
    got, want = run_onnx(lambda v: (jnp.sort(v), jnp.argsort(v), jnp.sort(-v)), x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


def test_control_flow():
    x = np.linspace(-1, 1, 8).astype(np.float32)
    assert_onnx_same(
        lambda x, p, i: (
            lax.fori_loop(0, 4, lambda j, v: v * 2 + 1, x),
            lax.cond(p, jnp.sin, jnp.cos, x),
            lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], x),
        ),
        x,
        np.bool_(True),
        np.int32(5),
    )


def test_gather_and_scatter_with_batching_dims():
    order = np.argsort(A, axis=2)
    assert_onnx_same(
        lambda a, o: (
            jnp.take_along_axis(a, o, axis=2),
            jnp.put_along_axis(a, o[:, :, :2], 0.0, axis=2, inplace=False),
        ),
        A,
        order.astype(np.int32),
    )


def test_integer_cumsum_is_cumsum():
    ids = np.array([[1, 0, 1, 1], [0, 1, 1, 0]], np.int64)
    assert_onnx_same(lambda m: (jnp.cumsum(m, axis=1), jnp.cumsum(m.astype(jnp.float32), axis=0)), ids)


def test_a_window_sum_is_a_cumsum_only_along_one_axis():
    """A reduce_window sum shaped as a prefix sum along axis 0 (window 2 = its size, low
    padding 1) is one ``CumSum``; with a window of 2 along axis 1 as well it sums both ways
    (no ``CumSum`` of axis 0 alone), and with a stride of 2 it is one row; against XLA."""
    ids = np.array([[1, 0, 2, 1], [3, 1, 1, 5]], np.int64)
    prefix = lambda m: lax.reduce_window(m, 0, lax.add, (2, 1), (1, 1), ((1, 0), (0, 0)))  # noqa: E731
    both = lambda m: lax.reduce_window(m, 0, lax.add, (2, 2), (1, 1), ((1, 0), (0, 0)))  # noqa: E731
    strided = lambda m: lax.reduce_window(m, 0, lax.add, (2, 1), (2, 1), ((1, 0), (0, 0)))  # noqa: E731
    assert_onnx_same(lambda m: (prefix(m), both(m), strided(m)), ids)
    ops = {n.op_type for n in converter.from_jax(prefix, ids).to_onnx().graph.node}
    assert "CumSum" in ops, ops


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_max_min_propagate_nan(dtype):
    """StableHLO's maximum/minimum propagate NaN through reduce and reduce_window (pools,
    cumulative max/min); onnxruntime's ReduceMax and MaxPool alone would skip it."""
    x = rng.normal(size=(2, 3, 6, 5)).astype(dtype)
    x[0, 1, 2, 3] = np.nan
    x[1, 2, 5, 0] = np.nan
    assert_onnx_same(
        lambda a: (
            jnp.max(a, axis=(2, 3)),
            jnp.min(a, axis=1),
            lax.reduce_window(a, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID"),
            lax.reduce_window(a, jnp.inf, lax.min, (1, 1, 3, 1), (1, 1, 1, 1), "SAME"),
            lax.cummax(a, axis=2),
            lax.cummin(a, axis=3, reverse=True),
        ),
        x,
    )


_WINDOWS = [  # (max/min, window, strides, padding, window dilation)
    ("max", (2, 2), (2, 2), [(0, 0)] * 2, (1, 1)),
    ("max", (3, 3), (1, 1), [(1, 1)] * 2, (1, 1)),
    ("max", (2, 3), (1, 2), [(0, 1), (1, 0)], (2, 2)),
    ("min", (3, 3), (2, 2), [(1, 1)] * 2, (1, 1)),
    ("max", (2, 2), (3, 3), [(2, 3), (0, 2)], (1, 1)),  # some windows wholly in the padding
]


def _window_ops(a):
    return tuple(
        lax.reduce_window(
            a,
            -jnp.inf if kind == "max" else jnp.inf,
            lax.max if kind == "max" else lax.min,
            (1, 1, *win),
            (1, 1, *strides),
            [(0, 0), (0, 0), *pad],
            window_dilation=(1, 1, *dil),
        )
        for kind, win, strides, pad, dil in _WINDOWS
    )


def _numpy_windows(a):
    """``_window_ops`` in NumPy: the maximum (minimum) of every window, NaN when it holds one
    (StableHLO's ``maximum``). XLA's CPU reduce_window skips a NaN in some windows of larger
    inputs, so it is no reference here."""
    out = []
    for kind, win, strides, pad, dil in _WINDOWS:
        init = -np.inf if kind == "max" else np.inf
        padded = np.pad(a, [(0, 0), (0, 0), *pad], constant_values=init)
        sizes = [
            (n - (w - 1) * d - 1) // s + 1
            for n, w, s, d in zip(padded.shape[2:], win, strides, dil, strict=True)
        ]
        parts = []
        for offset in np.ndindex(*win):
            index = tuple(
                slice(o * d, o * d + (n - 1) * s + 1, s)
                for o, d, n, s in zip(offset, dil, sizes, strides, strict=True)
            )
            parts.append(padded[(Ellipsis, *index)])
        out.append((np.max if kind == "max" else np.min)(np.stack(parts), axis=0))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_pools_of_infinities_nan_and_negative_zero(dtype):
    """Windows of -inf only, or wholly in the padding, pool to -inf (onnxruntime's MaxPool
    gives -3.4e38 in some of its kernels), +inf-only windows min-pool to +inf, a window with
    a NaN gives NaN wherever the NaN is, and -0.0 stays -0.0."""
    x = rng.normal(size=(1, 16, 17, 33)).astype(dtype)
    x[0, :6, :9] = -np.inf
    x[0, 6:9, :9] = np.inf
    x[0, 9, 2:6, 3:8] = -0.0
    x[0, 10:, 5, ::3] = np.nan
    module = converter.from_stablehlo(jax.jit(_window_ops).lower(x).as_text())
    sess = ort.InferenceSession(module.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    got, want = run_session(sess, [x]), _numpy_windows(x)
    assert_outputs_close(got, want, 0, 0)
    for g, w in zip(got, want, strict=True):
        zeros = w == 0
        np.testing.assert_array_equal(np.signbit(g[zeros]), np.signbit(w[zeros]))


def test_reductions_with_an_init_that_is_not_the_identity():
    """The init takes part in the result when it is not the body's identity (spec:
    ``reduce`` folds the init in): an int32 max from ``INT32_MAX``, a min from
    ``INT32_MIN``, sums from 1 and from ``INT32_MAX`` (wrapping), a product from 0, boolean
    and/or from false/true."""
    x = np.array([[3, -7, 5], [0, 2, -1]], np.int32)
    big, small = np.iinfo(np.int32).max, np.iinfo(np.int32).min

    def fn(a):
        return (
            lax.reduce(a, np.int32(big), lax.max, (1,)),
            lax.reduce(a, np.int32(small), lax.min, (1,)),
            lax.reduce(a, np.int32(1), lax.add, (1,)),
            lax.reduce(a, np.int32(0), lax.mul, (1,)),
            lax.reduce(a > -10, np.False_, lax.bitwise_and, (1,)),  # all true: false from the init
            lax.reduce(a > 10, np.True_, lax.bitwise_or, (1,)),  # all false: true from the init
            lax.reduce(a, np.int32(big), lax.add, (1,)),  # wraps
        )

    model = converter.from_stablehlo(jax.jit(fn).lower(x).as_text()).to_onnx()
    got = run_session(
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]), [x]
    )
    want = [
        [big, big],
        [small, small],
        x.sum(1) + 1,
        [0, 0],
        [False, False],
        [True, True],
        (x.sum(1) + np.int64(big)).astype(np.int32),
    ]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def _integer_reduce_text(shape, dims, body, ety, init):
    t = lambda s: "tensor<" + "".join(f"{'?' if d is None else d}x" for d in s) + ety + ">"  # noqa: E731
    out = [d for i, d in enumerate(shape) if i not in dims]
    return f"""func.func public @main(%x: {t(shape)}) -> {t(out)} {{
  %i = stablehlo.constant dense<{init}> : tensor<{ety}>
  %0 = stablehlo.reduce(%x init: %i) applies stablehlo.{body} across dimensions = {dims}
    : ({t(shape)}, tensor<{ety}>) -> {t(out)}
  return %0 : {t(out)}
}}"""


@pytest.mark.parametrize(
    "body, ety, dtype, shape, dims",
    [
        ("add", "i64", np.int64, (3, 5), [1]),  # sums past 2**53 and past 2**63
        ("add", "ui64", np.uint64, (4, 3, 2), [0, 2]),
        ("add", "i32", np.int32, (2, 1), [1]),  # one element: still exact
        ("multiply", "i64", np.int64, (3, 5), [1]),  # products that wrap
        ("multiply", "ui32", np.uint32, (4, 3, 2), [0, 2]),  # widened to int64 and back
        ("multiply", "i8", np.int8, (0, 3), [0]),  # an empty product: the init
        ("add", "i64", np.int64, (None, 5), [1]),  # a dynamic batch: MatMul by ones
        ("multiply", "i64", np.int64, (3, None), [1]),  # a dynamic count: the loop
    ],
)
def test_integer_sums_and_products_wrap_exactly(body, ety, dtype, shape, dims):
    """StableHLO spec: integer ``add``/``multiply`` wrap modulo 2**bits. onnxruntime's
    integer ``ReduceSum``/``ReduceProd`` compute through float64 (``[2**53, 1]`` sums to
    2**53, overflow saturates), so the backend emits exact int64 ``MatMul``/``Mul`` forms:
    every bit against NumPy's wrapping ``sum``/``prod``, the init 3 folded in."""
    concrete = tuple(4 if d is None else d for d in shape)
    rng = np.random.default_rng(0)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=concrete, dtype=dtype, endpoint=True)
    model = converter.from_stablehlo(_integer_reduce_text(shape, dims, body, ety, 3)).to_onnx()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = run_session(sess, [x])
    with np.errstate(over="ignore"):
        if body == "add":
            want = np.sum(x, axis=tuple(dims), dtype=dtype) + dtype(3)
        else:
            want = np.prod(x, axis=tuple(dims), dtype=dtype) * dtype(3)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)
    assert not {n.op_type for n in model.graph.node} & {"ReduceSum", "ReduceProd"}


def test_int16_max_and_min_with_an_init_that_is_not_the_identity():
    """The init's combine (``Max``/``Min``, which onnxruntime has no int16/uint16 kernel for)
    is widened as the reduction is."""
    for ety, dtype in (("i16", np.int16), ("ui16", np.uint16)):
        x = np.array([[1, 9, 2], [0, 3, 4]], dtype)
        for body, want in (("maximum", [9, 5]), ("minimum", [1, 0])):
            (got,) = run_text(_integer_reduce_text((2, 3), [1], body, ety, 5), x)
            np.testing.assert_array_equal(got, np.array(want, dtype))


@pytest.mark.parametrize("padding", ["VALID", [(0, 0), (0, 0), (1, 1), (1, 1)]])
def test_max_pool_of_relu_keeps_nan(padding):
    """A max pool whose input is a Relu (never negative) is ``Min(MaxPool(x), window sum)``:
    NaN at every position of a 2x2 window, and infinities, as StableHLO's maximum gives
    them."""
    x = rng.normal(size=(2, 8, 12, 12)).astype(np.float32)
    for k, (i, j) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
        x[0, k, i, j] = np.nan
    x[1, 2, 4:6, 4:6] = np.inf
    x[1, 3, 4:6, 4:6] = -np.inf

    def fn(a):
        return lax.reduce_window(jax.nn.relu(a), -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), padding)

    model = converter.from_stablehlo(jax.jit(fn).lower(x).as_text()).to_onnx(opset=18)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("MaxPool") == 1 and "Min" in ops and "HardSigmoid" not in ops, ops
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    pad = [(0, 0)] * 4 if padding == "VALID" else padding
    relu = np.pad(np.maximum(x, 0), pad, constant_values=-np.inf)
    n, c, h, w = relu.shape
    pooled = np.max(relu.reshape(n, c, h // 2, 2, w // 2, 2), axis=(3, 5))  # NaN-propagating
    assert_outputs_close(run_session(sess, [x]), [pooled], 0, 0)


def test_max_pool_of_a_relu_in_a_called_function():
    """The Relu found inside a ``func.call`` of two results (a nested ``jax.jit``; the call
    itself is no pattern): the pool is ``Min(MaxPool(x), window sum)``, NaN kept."""
    x = rng.normal(size=(1, 2, 4, 4)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    relu_and_double = jax.jit(lambda a: (jax.nn.relu(a), a * 2))

    def fn(a):
        r, d = relu_and_double(a)
        return lax.reduce_window(r, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID"), d

    text = jax.jit(fn).lower(x).as_text()
    assert "call @" in text
    model = converter.from_stablehlo(text).to_onnx(opset=18)
    ops = [n.op_type for n in model.graph.node]
    assert "Min" in ops and "HardSigmoid" not in ops, ops
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    pooled = np.max(np.maximum(x, 0).reshape(1, 2, 2, 2, 2, 2), axis=(3, 5))  # NaN-propagating
    assert_outputs_close(run_session(sess, [x]), [pooled, x * 2], 0, 0)


def test_max_pool_of_the_second_result_of_a_call_whose_first_is_a_relu():
    """The pooled value is the second result of a ``func.call`` whose first result is a
    Relu: the pool's input may be negative, so it is not ``Min(MaxPool(x), window sum)``
    (that sum is below the maximum for negative values); the max is NumPy's."""
    x = rng.normal(size=(1, 2, 4, 4)).astype(np.float32) - 1
    relu_and_shift = jax.jit(lambda a: (jax.nn.relu(a), a - 1))

    def fn(a):
        r, s = relu_and_shift(a)
        return r, lax.reduce_window(s, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    text = jax.jit(fn).lower(x).as_text()
    assert "call @" in text
    model = converter.from_stablehlo(text).to_onnx(opset=18)
    assert "HardSigmoid" in [n.op_type for n in model.graph.node]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    pooled = np.max((x - 1).reshape(1, 2, 2, 2, 2, 2), axis=(3, 5))
    assert_outputs_close(run_session(sess, [x]), [np.maximum(x, 0), pooled], 0, 0)


def test_max_pool_of_a_relu_with_windows_in_the_padding_only():
    """Windows wholly in the padding pool to -inf: not ``Min(MaxPool(x), window sum)`` (its
    sum would be 0 there)."""
    x = rng.normal(size=(1, 1, 2, 3)).astype(np.float32)
    pads = [(0, 0), (0, 0), (2, 2), (0, 0)]
    fn = lambda a: lax.reduce_window(jax.nn.relu(a), -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 1, 1), pads)  # noqa: E731
    model = converter.from_stablehlo(jax.jit(fn).lower(x).as_text()).to_onnx(opset=18)
    assert "HardSigmoid" in [n.op_type for n in model.graph.node]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    relu = np.pad(np.maximum(x, 0), pads, constant_values=-np.inf)
    want = np.max([relu[:, :, i : i + 5, j : j + 2] for i in (0, 1) for j in (0, 1)], axis=0)
    assert np.isneginf(want[0, 0, 0]).all()
    assert_outputs_close(run_session(sess, [x]), [want], 0, 0)


def test_sort_of_booleans():
    x = np.array([[True, False, True, False], [False, False, True, True]])
    got, want = run_onnx(lambda a: (jnp.sort(a, axis=1), jnp.sort(a, axis=1, descending=True)), x)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.bool_
        np.testing.assert_array_equal(g, w)


def test_uint64_max_and_sort_above_two_to_the_63():
    x = np.array([[2**64 - 1, 3, 2**63, 2**63 - 1], [0, 2**63 + 5, 7, 1]], np.uint64)
    assert_onnx_same(lambda a: (jnp.max(a, axis=1), jnp.min(a, axis=0), jnp.sort(a, axis=1)), x)


@pytest.mark.parametrize("mode", ["add", "set", "min"])
def test_scatter_skips_out_of_bounds_updates(mode):
    """Updates at indices past either end are dropped (StableHLO scatter), not rejected by
    onnxruntime nor wrapped around as ONNX does negative indices."""
    idx = np.array([1, 7, -1, -9, 3, 0], np.int32)

    def f(a, i):
        return getattr(a.at[i], mode)(jnp.full((6, 6), -5.0, a.dtype), mode="drop")

    assert_onnx_same(f, A[0], idx)
    assert_onnx_same(lambda a, i: a.at[i, 2].add(1.0, mode="drop"), A[0], idx)


_SCATTER_AT_CONSTANT_PAIRS = """
func.func public @main(%a: tensor<5x2xf32>) -> tensor<5x2xf32> {
  %i = stablehlo.constant dense<[[[0, COL], [1, 1]], [[4, 1], [0, 0]]]> : tensor<2x2x2xi32>
  %u = stablehlo.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %0 = "stablehlo.scatter"(%a, %i, %u) <{indices_are_sorted = false,
      scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0, 1],
      scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 2>, unique_indices = false}> ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) : (tensor<5x2xf32>, tensor<2x2x2xi32>, tensor<2x2xf32>) -> tensor<5x2xf32>
  return %0 : tensor<5x2xf32>
}"""


@pytest.mark.parametrize("col", [1, 3])
def test_scatter_at_constant_index_pairs(col):
    """Constant ``(row, col)`` index pairs in a 2x2 grid (``index_vector_dim`` 2) into a
    ``(5, 2)`` operand: in bounds, they scatter as they are; the pair ``(0, 3)`` (a column
    past the end, though below the row bound) is dropped, as XLA drops it. Each index column
    is checked against its own dimension's bound."""
    text = _SCATTER_AT_CONSTANT_PAIRS.replace("COL", str(col))
    x = A[0, :, :2].copy()
    sess = ort.InferenceSession(
        converter.from_stablehlo(text).to_onnx().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_array_equal(run_session(sess, [x])[0], run_xla(text, x)[0])


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int8, np.uint64])
def test_argmax_style_reduces_loop(dtype):
    """Variadic reduces (argmax/argmin: value and index, ties to the first index, NaN wins)
    fold their body in an ONNX Loop."""
    x = rng.integers(-3, 4, size=(4, 5, 3)).astype(dtype)
    if dtype == np.float32:
        x[1, 2, 0] = np.nan
    got, want = run_onnx(lambda a: (jnp.argmax(a, axis=1), jnp.argmin(a, axis=0), jnp.argmax(a)), x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_reduce_with_a_general_body():
    """A one-operand reduce whose body is no single ONNX reduction (here max of squares)."""
    x = rng.normal(size=(3, 4)).astype(np.float32)
    body = lambda a, b: jnp.maximum(a * a, b * b)  # noqa: E731
    assert_onnx_same(lambda a: lax.reduce(a, np.float32(0), body, (1,)), x)


def test_scans_with_other_bodies():
    """Inclusive scans whose body is no pooling operator (product, log-add-exp), both ways."""
    x = rng.uniform(0.5, 1.5, size=(3, 5, 2)).astype(np.float32)
    assert_onnx_same(
        lambda a: (
            lax.cumprod(a, axis=1),
            lax.cumprod(a, axis=0, reverse=True),
            lax.cumlogsumexp(a, axis=1, reverse=True),
            lax.cumlogsumexp(a, axis=2),
        ),
        x,
    )


# --------------------------------------------------------------------------- lexicographic sorts

_LEX_FLOATS = np.array([np.nan, -0.0, 0.0, 1.0, -1.0, np.inf, -np.inf, 2.0], np.float32)


def test_lexsort_nan_signed_zero_and_ties():
    """jnp.lexsort: NaN sorts last, -0.0 ties with +0.0, equal keys keep index order."""
    a = rng.choice(_LEX_FLOATS, size=(3, 40))
    b = rng.choice(_LEX_FLOATS[:4], size=(3, 40))
    got, want = run_onnx(lambda x, y: (jnp.lexsort((x, y), axis=1), jnp.lexsort((y, x), axis=0)), a, b)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_multi_key_sort_mixed_dtypes():
    """lax.sort with num_keys=3 over int32, bool and uint64 keys plus a float payload."""
    n = 64
    k0 = rng.integers(-2, 2, (2, n)).astype(np.int32)
    k1 = rng.random((2, n)) > 0.5
    k2 = rng.choice(np.array([0, 1, 2**63, 2**64 - 1], np.uint64), size=(2, n))
    payload = rng.normal(size=(2, n)).astype(np.float32)
    got, want = run_onnx(lambda *xs: lax.sort(xs, dimension=1, num_keys=3), k0, k1, k2, payload)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_lexicographic_comparator_descending_first_key():
    """A hand-written comparator: operand 1 descending, then operand 0 ascending (the
    comparator's arguments in either order)."""
    text = """
    func.func @main(%a: tensor<12xi32>, %b: tensor<12xf32>) -> (tensor<12xi32>, tensor<12xf32>) {
      %0:2 = "stablehlo.sort"(%a, %b) <{dimension = 0 : i64, is_stable = true}> ({
      ^bb0(%a0: tensor<i32>, %a1: tensor<i32>, %b0: tensor<f32>, %b1: tensor<f32>):
        %gt = stablehlo.compare LT, %b1, %b0, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %eq = stablehlo.compare EQ, %b0, %b1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %lt = stablehlo.compare LT, %a0, %a1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        %tie = stablehlo.and %lt, %eq : tensor<i1>
        %r = stablehlo.or %tie, %gt : tensor<i1>
        stablehlo.return %r : tensor<i1>
      }) : (tensor<12xi32>, tensor<12xf32>) -> (tensor<12xi32>, tensor<12xf32>)
      return %0#0, %0#1 : tensor<12xi32>, tensor<12xf32>
    }"""
    a = np.array([5, 3, 9, 1, 3, 3, 7, 0, 2, 8, 4, 6], np.int32)
    b = np.array([1, 2, 1, 2, 0, 2, 1, 0, 2, 1, 0, 3], np.float32)
    order = np.lexsort((a, -b))
    sess = ort.InferenceSession(
        converter.from_stablehlo(text).to_onnx().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], (a, b), strict=True)))
    np.testing.assert_array_equal(got[0], a[order])
    np.testing.assert_array_equal(got[1], b[order])


def test_non_lexicographic_comparator_raises():
    """A comparator on a sum of keys is no lexicographic order: the conversion raises."""
    text = """
    func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
      %0:2 = "stablehlo.sort"(%a, %b) <{dimension = 0 : i64, is_stable = true}> ({
      ^bb0(%a0: tensor<f32>, %a1: tensor<f32>, %b0: tensor<f32>, %b1: tensor<f32>):
        %s0 = stablehlo.add %a0, %b0 : tensor<f32>
        %s1 = stablehlo.add %a1, %b1 : tensor<f32>
        %r = stablehlo.compare LT, %s0, %s1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        stablehlo.return %r : tensor<i1>
      }) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
      return %0#0 : tensor<4xf32>
    }"""
    with pytest.raises(OpConversionError, match="stablehlo.sort"):
        converter.from_stablehlo(text).to_onnx()


# --------------------------------------------------------------------------- select_and_scatter


def _pool_grad(reducer, init, window, strides, padding):
    def f(x, g):
        _, vjp = jax.vjp(lambda v: lax.reduce_window(v, init, reducer, window, strides, padding), x)
        return vjp(g)[0]

    return f


@pytest.mark.parametrize(
    ("window", "strides", "padding"),
    [((1, 1, 2, 2), (1, 1, 2, 2), "VALID"), ((1, 1, 3, 3), (1, 1, 1, 1), "SAME"),
     ((1, 1, 3, 2), (1, 1, 2, 1), ((0, 0), (0, 0), (2, 1), (0, 3))), ((1, 1, 4, 4), (1, 1, 3, 3), "SAME")],
)  # fmt: skip
@pytest.mark.parametrize("kind", ["max", "min"])
def test_pool_gradients_ties_and_padding(kind, window, strides, padding):
    """select_and_scatter (GE/LE select, add scatter) with overlapping windows, ties (the
    first in window order wins), padding (never selected; a window of padding alone drops
    its source) and infinities among the values."""
    x = rng.choice(np.array([0.0, 1.0, -1.0, 2.0, np.inf, -np.inf], np.float32), size=(2, 3, 7, 6))
    reducer, init = (lax.max, -np.inf) if kind == "max" else (lax.min, np.inf)
    fn = _pool_grad(reducer, np.float32(init), window, strides, padding)
    pooled = jax.eval_shape(lambda v: lax.reduce_window(v, init, reducer, window, strides, padding), x)
    src = rng.normal(size=pooled.shape).astype(np.float32)
    got, want = run_onnx(fn, x, src)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)


def test_pool_gradient_with_nan_follows_the_select_body():
    """NaN operands: GE is false against NaN, so the fold moves on as XLA's does."""
    x = rng.normal(size=(1, 1, 6, 6)).astype(np.float32)
    x[0, 0, ::2, 1::3] = np.nan
    src = rng.normal(size=(1, 1, 3, 3)).astype(np.float32)
    got, want = run_onnx(_pool_grad(lax.max, -np.inf, (1, 1, 2, 2), (1, 1, 2, 2), "VALID"), x, src)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)


def test_integer_select_and_scatter_with_init():
    """int32 operands, a GT select (it keeps the current choice only when strictly greater,
    so the last of tied maxima is chosen) and init 10."""
    text = """
    func.func @main(%x: tensor<2x5x5xi32>, %s: tensor<2x2x2xi32>) -> tensor<2x5x5xi32> {
      %init = stablehlo.constant dense<10> : tensor<i32>
      %0 = "stablehlo.select_and_scatter"(%x, %s, %init) <{window_dimensions = array<i64: 1, 2, 2>,
          window_strides = array<i64: 1, 2, 2>}> ({
      ^bb0(%a: tensor<i32>, %b: tensor<i32>):
        %c = stablehlo.compare GT, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %c : tensor<i1>
      }, {
      ^bb0(%a: tensor<i32>, %b: tensor<i32>):
        %c = stablehlo.add %a, %b : tensor<i32>
        stablehlo.return %c : tensor<i32>
      }) : (tensor<2x5x5xi32>, tensor<2x2x2xi32>, tensor<i32>) -> tensor<2x5x5xi32>
      return %0 : tensor<2x5x5xi32>
    }"""
    x = rng.integers(-2, 2, size=(2, 5, 5)).astype(np.int32)
    src = rng.integers(-5, 5, size=(2, 2, 2)).astype(np.int32)
    sess = ort.InferenceSession(
        converter.from_stablehlo(text).to_onnx().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], (x, src), strict=True)))[0]
    want = np.full_like(x, 10)
    for b, i, j in np.ndindex(2, 2, 2):
        win = x[b, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2].ravel()
        k = len(win) - 1 - int(np.argmax(win[::-1]))  # the last maximum in window order
        want[b, 2 * i + k // 2, 2 * j + k % 2] += src[b, i, j]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("ety", "dtype", "select", "compare_type", "scatter", "init"),
    SELECT_AND_SCATTER_CASES,
    ids=[f"{c[0]}-{c[2]}-{c[4]}" for c in SELECT_AND_SCATTER_CASES],
)
def test_select_and_scatter_integer_and_bool_match_xla(ety, dtype, select, compare_type, scatter, init):
    """Integer and bool select_and_scatter match XLA (regression: bool scatter bodies, or/and,
    were refused)."""
    text = select_and_scatter_text(ety, select, compare_type, scatter, init)
    x, s = select_and_scatter_inputs(dtype)
    sess = ort.InferenceSession(
        converter.from_stablehlo(text).to_onnx().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], (x, s), strict=True)))[0]
    (want,) = run_xla(text, x, s)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


_SORTS = [("LT", "TOTALORDER", "f32"), ("GT", "TOTALORDER", "f32"), ("LT", "TOTALORDER", "bf16"),
          ("GT", "TOTALORDER", "f16"), ("LT", "TOTALORDER", "f64"), ("LT", "FLOAT", "f32"),
          ("GT", "FLOAT", "f32")]  # fmt: skip
_NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}


@pytest.mark.parametrize("opset", [18, 26])
@pytest.mark.parametrize(("direction", "compare_type", "ety"), _SORTS, ids=["-".join(c) for c in _SORTS])
def test_sort_raw_comparator_total_order(direction, compare_type, ety, opset):
    """A raw ``TOTALORDER`` comparator puts -0.0 before +0.0 (ascending), as XLA does
    (regression: ``TopK`` tied them by index); from opset 26 (``BitCast``) -NaN sorts first
    too. Below it a NaN's sign cannot be read: the test leaves -NaN out there."""
    x = np.array(TOTAL_ORDER_SPECIALS, _NP[ety])
    if compare_type == "FLOAT" or opset < 26:
        x = np.where(np.isnan(x) & np.signbit(x), np.array(2.0, x.dtype), x).astype(x.dtype)
    if compare_type == "FLOAT":
        x = np.nan_to_num(x, nan=3.0)  # NaN has no place in a FLOAT order
    i = np.arange(x.size, dtype=np.int32)
    text = sort_text(direction, compare_type, ety, x.size)
    model = converter.from_stablehlo(text).to_onnx(opset=opset)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert_bits_equal(run_session(sess, [x, i]), run_xla(text, x, i))


_I32 = "tensor<i32>"
_CROSS_SORT = f"""
func.func public @main(%x: tensor<4xi32>, %y: tensor<4xi32>) -> tensor<4xi32> {{
  %0:2 = "stablehlo.sort"(%x, %y) <{{dimension = 0 : i64, is_stable = true}}> ({{
  ^bb0(%a: {_I32}, %b: {_I32}, %c: {_I32}, %d: {_I32}):
    %r = stablehlo.compare LT, %a, %d, SIGNED : ({_I32}, {_I32}) -> tensor<i1>
    stablehlo.return %r : tensor<i1>
  }}) : (tensor<4xi32>, tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>)
  return %0#0 : tensor<4xi32>
}}"""

_F4 = np.zeros(4, np.float32)


def _gather_text(dims: str, sizes: str, result: str) -> str:
    """A ``gather`` of rows of a ``4x3`` operand at ``2x1`` indices into dimension 0."""
    return f"""
func.func public @main(%x: tensor<4x3xf32>, %i: tensor<2x1xi32>) -> tensor<{result}xf32> {{
  %0 = "stablehlo.gather"(%x, %i) <{{dimension_numbers = #stablehlo.gather<{dims},
      start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false,
      slice_sizes = array<i64: {sizes}>}}> : (tensor<4x3xf32>, tensor<2x1xi32>) -> tensor<{result}xf32>
  return %0 : tensor<{result}xf32>
}}"""


def _text(fn, *args) -> str:
    return jax.jit(fn).lower(*args).as_text()


#: StableHLO forms the ONNX backend has no exact rule for: form -> (text, message)
_REFUSED = {
    "select_and_scatter subtract": (
        lambda: select_and_scatter_text("f32", "GE", "FLOAT", "subtract", "0.0"),
        "select_and_scatter with a scatter body other than add/mul/max/min/or/and",
    ),
    "select_and_scatter negative padding": (  # 2 windows along the cropped dim 1, not 3
        lambda: (
            select_and_scatter_text("f32", "GE", "FLOAT", "add", "0.0")
            .replace("[1, 0], [1, 1]", "[-1, 0], [1, 1]")
            .replace("2x3x3xf32", "2x2x3xf32")
        ),
        "select_and_scatter with negative padding",
    ),
    "select_and_scatter atan2": (
        lambda: select_and_scatter_text("f32", "GE", "FLOAT", "atan2", "0.0"),
        "select_and_scatter body with ['stablehlo.atan2']",
    ),
    "scatter applying sin": (
        lambda: _text(lambda v: v.at[np.array([1, 3])].apply(jnp.sin), _F4),
        "scatter with a general body",
    ),
    "sort comparing two operands": (lambda: _CROSS_SORT, "sort with a comparator other than < or >"),
    "gather of two rows at each index": (
        lambda: _gather_text("offset_dims = [1, 2]", "2, 3", "2x2x3"),
        "gather: indexed dimension 0 has slice size 2",
    ),
    "gather of part of each row": (
        lambda: _gather_text("offset_dims = [1], collapsed_slice_dims = [0]", "1, 2", "2x2"),
        "gather: dimension 1 is sliced partially (2 of 3)",
    ),
    "reduce_window max from 0": (
        lambda: (
            jax.jit(lambda v: lax.reduce_window(v, np.float32(0), lax.max, (2,), (1,), "VALID"))
            .lower(np.zeros(6, np.float32))
            .as_text()
        ),
        "reduce_window with a non-identity init value",
    ),
    "reduce and on int32": (
        lambda: _text(lambda v: lax.reduce(v, np.int32(-1), lax.bitwise_and, (0,)), np.zeros(4, np.int32)),
        "reduce with a and body on int32",
    ),
    "reduce atan2": (
        lambda: _text(lambda v: lax.reduce(v, np.float32(0), lax.atan2, (0,)), _F4),
        "reduce body with ['stablehlo.atan2']",
    ),
    "scan atan2": (
        lambda: _text(lambda v: lax.reduce_window(v, np.float32(0), lax.atan2, (4,), (1,), [(3, 0)]), _F4),
        "reduce_window body with ['stablehlo.atan2']",
    ),
    "product scan on a dynamic shape": (
        lambda: converter.from_jax(
            lambda v: lax.cumprod(v, axis=1),
            jax.ShapeDtypeStruct((*jax.export.symbolic_shape("n"), 4), np.float32),
        ).text(),
        "cumulative reduce_window with a general body on dynamic shapes",
    ),
    "window atan2 not a scan (window)": (
        lambda: _text(lambda v: lax.reduce_window(v, np.float32(0), lax.atan2, (2,), (1,), "VALID"), _F4),
        "reduce_window with a general body or base dilation",
    ),
    "window atan2 not a scan (padding)": (
        lambda: _text(lambda v: lax.reduce_window(v, np.float32(0), lax.atan2, (4,), (1,), [(2, 1)]), _F4),
        "reduce_window with a general body or base dilation",
    ),
    "window atan2 not a scan (two axes)": (
        lambda: _text(
            lambda v: lax.reduce_window(v, np.float32(0), lax.atan2, (2, 2), (1, 1), "VALID"),
            _F4.reshape(2, 2),
        ),
        "reduce_window with a general body or base dilation",
    ),
    "max pool on int32": (
        lambda: _text(
            lambda v: lax.reduce_window(v, np.int32(np.iinfo(np.int32).min), lax.max, (2,), (1,), "VALID"),
            np.zeros(4, np.int32),
        ),
        "reduce_window on int32",
    ),
}


@pytest.mark.parametrize("form", list(_REFUSED))
def test_forms_without_an_exact_rule_are_refused_by_name(form):
    text, message = _REFUSED[form]
    with pytest.raises(OpConversionError, match=re.escape(message)):
        converter.from_stablehlo(text()).to_onnx()


_MAPPED_SORTS = [("f32", "FLOAT"), ("f32", "TOTALORDER"), ("i32", "SIGNED"), ("bf16", "FLOAT")]


@pytest.mark.parametrize(("ety", "compare_type"), _MAPPED_SORTS, ids=["-".join(c) for c in _MAPPED_SORTS])
def test_sort_by_a_value_the_comparator_maps(ety, compare_type):
    """A comparator that orders ``select(a == 3, 7, a)`` (built from compare/select/constant
    like JAX's canonicalization, but changing the order) sorts by the mapped value, as XLA
    does (regression: the ONNX backend sorted the raw operand unless the key was a float
    ``TOTALORDER`` one)."""
    t, e = f"tensor<6x{ety}>", f"tensor<{ety}>"
    cmp_type = "SIGNED" if ety == "i32" else "FLOAT"
    keys = "\n".join(
        f"""    %t{v} = stablehlo.compare EQ, %{v}, %three, {cmp_type} : ({e}, {e}) -> tensor<i1>
    %k{v} = stablehlo.select %t{v}, %seven, %{v} : tensor<i1>, {e}"""
        for v in "ab"
    )
    text = f"""
func.func public @main(%x: {t}) -> {t} {{
  %0 = "stablehlo.sort"(%x) <{{dimension = 0 : i64, is_stable = true}}> ({{
  ^bb0(%a: {e}, %b: {e}):
    %three = stablehlo.constant dense<{3 if ety == "i32" else 3.0}> : {e}
    %seven = stablehlo.constant dense<{7 if ety == "i32" else 7.0}> : {e}
{keys}
    %r = stablehlo.compare LT, %ka, %kb, {compare_type} : ({e}, {e}) -> tensor<i1>
    stablehlo.return %r : tensor<i1>
  }}) : ({t}) -> {t}
  return %0 : {t}
}}"""
    x = np.array([5, 3, 1, 6, 8, 2], {"f32": np.float32, "i32": np.int32, "bf16": ml_dtypes.bfloat16}[ety])
    sess = ort.InferenceSession(
        converter.from_stablehlo(text).to_onnx().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (got,) = run_session(sess, [x])
    (want,) = run_xla(text, x)
    assert want.tolist() == [1, 2, 5, 6, 3, 8]
    assert_bits_equal([got], [want])


def test_sort_of_a_computed_operand_by_a_value_the_comparator_maps():
    """The mapped-key sort of an operand computed in the graph (``select(m, x - y, y - x)``),
    whose ONNX name is not the key's: sorted by the mapped value, as XLA does, not by the raw
    operand (the ``TopK``-on-the-operand shortcut is for a key that is the operand itself)."""
    t, e = "tensor<6xi32>", "tensor<i32>"
    keys = "\n".join(
        f"""    %t{v} = stablehlo.compare EQ, %{v}, %three, SIGNED : ({e}, {e}) -> tensor<i1>
    %k{v} = stablehlo.select %t{v}, %seven, %{v} : tensor<i1>, {e}"""
        for v in "ab"
    )
    text = f"""
func.func public @main(%m: tensor<6xi1>, %x: {t}, %y: {t}) -> {t} {{
  %d = stablehlo.subtract %x, %y : {t}
  %n = stablehlo.negate %d : {t}
  %s = stablehlo.select %m, %d, %n : tensor<6xi1>, {t}
  %0 = "stablehlo.sort"(%s) <{{dimension = 0 : i64, is_stable = true}}> ({{
  ^bb0(%a: {e}, %b: {e}):
    %three = stablehlo.constant dense<3> : {e}
    %seven = stablehlo.constant dense<7> : {e}
{keys}
    %r = stablehlo.compare LT, %ka, %kb, SIGNED : ({e}, {e}) -> tensor<i1>
    stablehlo.return %r : tensor<i1>
  }}) : ({t}) -> {t}
  return %0 : {t}
}}"""
    m = np.array([1, 0, 1, 0, 1, 0], bool)
    x = np.array([5, 0, 1, 0, 8, 0], np.int32)
    y = np.array([0, 3, 0, 6, 0, 2], np.int32)  # the sorted operand is [5, 3, 1, 6, 8, 2]
    sess = ort.InferenceSession(
        converter.from_stablehlo(text).to_onnx().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (got,) = run_session(sess, [m, x, y])
    (want,) = run_xla(text, m, x, y)
    assert want.tolist() == [1, 2, 5, 6, 3, 8]
    assert_bits_equal([got], [want])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_top_k_total_order_opset26(dtype):
    """chlo.top_k at opset 26 in XLA's order: NaN first, -NaN last, +0.0 before -0.0."""
    x = np.array(TOTAL_ORDER_SPECIALS, dtype)
    got, want = run_onnx(lambda x: (lax.top_k(x, 10), lax.top_k(x, 3)), x, opset=26)
    assert_bits_equal(got, want)


_WINDOWED = lax.ScatterDimensionNumbers(
    update_window_dims=(0, 1), inserted_window_dims=(), scatter_dims_to_operand_dims=(1,)
)


@pytest.mark.parametrize("mode", ["set", "add"])
def test_scatter_with_a_static_window_on_an_indexed_dim(mode):
    """``slice_scatter``'s form (BEiT's relative position index, DeepSeek-V3): the indexed
    dimension 1 takes a window of 3 at a start read at run time. A window inside matches
    ``jax.jit``; of a window that does not fit (starts 4 and -1 into 6 columns) each element
    outside is skipped and the rest applied (StableHLO spec, ``scatter``; XLA would drop the
    window whole)."""
    combine = lax.scatter if mode == "set" else lax.scatter_add
    u = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)

    def f(a, i):
        # two windows (batch axis of the indices): updates (2, 5, 3) -> window dims 1 and 2
        dn = lax.ScatterDimensionNumbers(
            update_window_dims=(1, 2), inserted_window_dims=(), scatter_dims_to_operand_dims=(1,)
        )
        return combine(a, i.reshape(2, 1), u, dn, mode="drop")

    for starts in ([1, 2], [3, 0]):
        assert_onnx_same(f, A[0], np.array(starts, np.int32))
    m = converter.from_jax(f, A[0], np.array([0, 0], np.int32))
    sess = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    for starts in ([4, 1], [-1, 3]):
        expected = A[0].copy()
        for w, start in enumerate(starts):
            for c in range(3):
                if 0 <= start + c < 6:
                    col = u[w][:, c]
                    expected[:, start + c] = col if mode == "set" else expected[:, start + c] + col
        names = [i.name for i in sess.get_inputs()]
        feeds = dict(zip(names, (A[0], np.array(starts, np.int32)), strict=True))
        np.testing.assert_allclose(sess.run(None, feeds)[0], expected, rtol=1e-6)
    # one window, no batch axis (torch's slice_scatter as exported)
    assert_onnx_same(lambda a, i: combine(a, i, u[0], _WINDOWED, mode="drop"), A[0], np.array([2], np.int32))


@pytest.mark.parametrize("start", [3, 4])
def test_scatter_window_at_a_constant_start_at_the_edge(start):
    """A window of 3 columns at a constant start into 6: at 3 it fits exactly (scattered
    as it is, no spill slot padded on: constant indices known in bounds), at 4 its last
    element is past the end and skipped, the other two applied (StableHLO spec,
    ``scatter``; worked by hand)."""
    u = np.arange(15, dtype=np.float32).reshape(5, 3) + 100
    fn = lambda a: lax.scatter(a, np.array([start], np.int32), u, _WINDOWED, mode="drop")  # noqa: E731
    model = converter.from_stablehlo(jax.jit(fn).lower(A[0]).as_text()).to_onnx()
    assert ("Pad" in [n.op_type for n in model.graph.node]) == (start == 4)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = A[0].copy()
    expected[:, start:] = u[:, : 6 - start]
    np.testing.assert_array_equal(run_session(sess, [A[0]])[0], expected)


def test_scatter_window_with_a_dynamic_batch():
    """The window's non-indexed dimension is a dynamic batch (BEiT with a dynamic batch)."""
    (b,) = jax.export.symbolic_shape("B")
    m = converter.from_jax(
        lambda a, u: lax.scatter(a, np.array([1], np.int32), u, _WINDOWED, mode="drop"),
        jax.ShapeDtypeStruct((b, 6), np.float32),
        jax.ShapeDtypeStruct((b, 3), np.float32),
    )
    sess = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    for b in (1, 4):
        a, u = A[0][:b].copy(), np.full((b, 3), 7.0, np.float32)
        (out,) = sess.run(None, {i.name: v for i, v in zip(sess.get_inputs(), (a, u), strict=True)})
        expected = a.copy()
        expected[:, 1:4] = 7.0
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(
    "itype, ivd, idx",
    [("tensor<2xi64>", 1, np.array([4, 1])), ("tensor<1x2xi64>", 0, np.array([[4, 1]]))],
    ids=["implicit_vector", "vector_first"],
)
def test_gather_with_another_index_vector_dim(itype, ivd, idx):
    """``index_vector_dim`` equal to the indices' rank (each index a scalar) or not last
    (the index vectors are the columns): rows 4 and 1 either way."""
    text = f"""func.func public @main(%x: tensor<5x3xf32>, %i: {itype}) -> tensor<2x3xf32> {{
  %0 = "stablehlo.gather"(%x, %i) <{{dimension_numbers = #stablehlo.gather<offset_dims = [1],
    collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = {ivd}>,
    slice_sizes = array<i64: 1, 3>}}> : (tensor<5x3xf32>, {itype}) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}}"""
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    model = converter.from_stablehlo(text).to_onnx()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = run_session(sess, [x, idx])
    np.testing.assert_array_equal(got, x[[4, 1]])


def test_sort_along_the_leading_dimension():
    """``sort`` along dimension 0 of a matrix (TopK and the payload's gather on that axis),
    with a second key breaking the first key's ties, both directions; against XLA."""
    keys = np.array([[2, 0, 1], [1, 0, 1], [2, 1, 0], [1, 1, 1]], np.int32)
    ties = np.array([[0, 3, 1], [2, 1, 0], [1, 0, 2], [3, 2, 3]], np.int8)
    vals = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert_onnx_same(
        lambda k, t, v: (
            lax.sort((k, t, v), dimension=0, num_keys=2),
            jnp.sort(v * (k - 1), axis=0, descending=True),
        ),
        keys,
        ties,
        vals,
    )


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.uint32])
def test_integer_reductions_of_narrow_and_unsigned_types(dtype):
    """Sums and products in the operand's type wrap (computed in int64: no product here
    leaves its range), max and min of the types onnxruntime lacks kernels for (computed
    wider) are exact at the type's extremes; against XLA."""
    info = np.iinfo(dtype)
    x = np.array([[info.max, 3, info.min, 7], [info.max, 3, 1, 2], [5, info.min, 0, 9]], dtype)
    zero, one = dtype(0), dtype(1)
    assert_onnx_same(
        lambda a: (
            lax.reduce(a, zero, lax.add, (0,)),
            lax.reduce(a, one, lax.mul, (1,)),
            a.max(1),
            a.min(0),
        ),
        x,
    )
