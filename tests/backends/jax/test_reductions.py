"""reduce, reduce_window and sort through the JAX backend, common and general bodies."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import converter
from tests.compare import (
    SELECT_AND_SCATTER_CASES,
    TOTAL_ORDER_SPECIALS,
    assert_bits_equal,
    run_xla,
    select_and_scatter_inputs,
    select_and_scatter_text,
    sort_text,
)

from .helpers import assert_same, through_backend

rng = np.random.default_rng(0)
A = rng.normal(size=(4, 5, 6)).astype(np.float32)


@pytest.mark.parametrize("fn", [jnp.sum, jnp.max, jnp.min, jnp.prod, jnp.mean])
def test_monoid_reductions(fn):
    assert_same(lambda a: (fn(a, axis=1), fn(a)), A, rtol=1e-5)


def test_bool_and_int_reductions():
    assert_same(lambda a: (jnp.all(a > 0, axis=0), jnp.any(a > 1), jnp.sum((a > 0).astype(jnp.int32))), A)


def test_variadic_reduce_argmax():
    assert_same(lambda a: (jnp.argmax(a, axis=2), jnp.argmin(a, axis=0)), A)


def test_variadic_reduce_of_values_and_indices_differentiates():
    """A (value, index) reduce (what ``argmax`` and torch's ``max(x, dim)`` lower to) under
    ``jax.grad``: JAX's own JVP of it failed on the integer operand; the value's gradient is
    that of ``jnp.max``, the indices are exact."""

    def max_with_index(x):
        idx = lax.broadcasted_iota(jnp.int32, x.shape, 1)

        def pick(a, b):
            take = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
            return jnp.where(take, a[0], b[0]), jnp.where(take, a[1], b[1])

        return lax.reduce((x, idx), (np.float32(-np.inf), np.int32(0)), pick, (1,))

    x = A[0]  # (5, 6), distinct values
    f = converter.from_jax(lambda x: (*max_with_index(x), jnp.argmax(x, axis=0)), x).to_jax()
    v, i, j = f(x)
    np.testing.assert_array_equal(np.asarray(i), np.argmax(x, axis=1))
    np.testing.assert_array_equal(np.asarray(j), np.argmax(x, axis=0))
    w = np.linspace(1, 2, 5, dtype=np.float32)
    got = jax.jit(jax.grad(lambda x: jnp.sum(f(x)[0] * w)))(x)
    np.testing.assert_allclose(got, jax.grad(lambda x: jnp.sum(jnp.max(x, axis=1) * w))(x), rtol=1e-6)


def test_tree_reduce_of_one_element_and_of_none():
    """The pairwise reduction behind a (value, index) reduce's derivative gives the spec's
    reduce at the edges: the lone element over a dimension of size 1 (its tangent passed
    through), the init values over an empty one (odd counts:
    ``test_variadic_reduce_of_values_and_indices_differentiates``)."""
    from converter.backends.jax.ops.reductions import _tree_reduce

    def pick(a, b):
        take = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
        return jnp.where(take, a[0], b[0]), jnp.where(take, a[1], b[1])

    inits = (np.float32(-np.inf), np.int32(7))

    @jax.jit
    def edges(x):
        one = jax.jvp(
            lambda v: _tree_reduce(pick, (1,), (v, jnp.zeros((2, 1), jnp.int32)), inits), (x,), (x * 0 + 1,)
        )
        none = _tree_reduce(pick, (1,), (x[:, :0], jnp.zeros((2, 0), jnp.int32)), inits)
        return one, none

    ((value, index), (tangent, _)), none = edges(np.array([[3], [-2]], np.float32))
    np.testing.assert_array_equal(np.asarray(value), [3, -2])
    np.testing.assert_array_equal(np.asarray(index), [0, 0])
    np.testing.assert_array_equal(np.asarray(tangent), [1, 1])
    np.testing.assert_array_equal(np.asarray(none[0]), [-np.inf, -np.inf])
    np.testing.assert_array_equal(np.asarray(none[1]), [7, 7])


def test_cumulative_general_bodies_differentiate():
    """``jnp.cumprod`` and ``lax.cumlogsumexp`` lower to reduce_windows with a multiply /
    log-add-exp body, which JAX cannot reverse-differentiate: outputs bit-equal to
    ``jax.jit`` of the source, gradients equal to ``jax.grad`` of it."""
    x = A[0, :3, :4] * 0.3

    def fn(x):
        return jnp.cumprod(1 + x, axis=0) + lax.cumlogsumexp(x, axis=1)

    f = converter.from_jax(fn, x).to_jax()
    w = rng.normal(size=x.shape).astype(np.float32)
    both = jax.jit(lambda x: [(g(x), jax.grad(lambda x, g=g: jnp.sum(g(x) * w))(x)) for g in (f, fn)])
    (got, got_grad), (want, want_grad) = both(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-5, atol=1e-6)


def test_reduce_with_non_identity_init():
    assert_same(lambda a: lax.reduce(a, np.float32(10.0), lax.add, (0,)), A, rtol=1e-5)


def test_reduce_window_pools():
    x = A[None]

    def pools(x):
        mx = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 2), (1, 1, 2, 2), "SAME")
        avg = lax.reduce_window(x, 0.0, lax.add, (1, 1, 3, 3), (1, 1, 1, 1), [(0, 0), (0, 0), (1, 1), (1, 1)])
        return mx, avg

    assert_same(pools, x, rtol=1e-5)


def test_cumsum_and_cummax():
    assert_same(lambda a: (jnp.cumsum(a, axis=1), lax.cummax(a, axis=2)), A, rtol=1e-5)


def test_sort_ascending_descending_multikey_and_stable():
    """Key sorts, and a complex sort (real part, then imaginary: a one-operand comparator of
    two compares, sorted pairwise), against jax.jit."""
    keys = np.array([3, 1, 2, 1, 3, 0], np.int32)
    vals = np.arange(6, dtype=np.float32)
    assert_same(
        lambda k, v: (
            jnp.sort(k),
            jnp.argsort(-k, stable=True),
            lax.sort((k, v), num_keys=2),
            jnp.sort(v, descending=True),
            jnp.sort(k - 1j * v),
        ),
        keys,
        vals,
    )


def test_top_k_and_grad_of_max_pool():
    def loss(x):
        return jnp.sum(lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID") ** 2)

    assert_same(lambda a: (lax.top_k(a, 3), jax.grad(loss)(a[0])), A, rtol=1e-5)


def test_grad_through_interpreted_pools():
    """jax.grad of the converted function (not of the source) through max and avg pooling."""
    import converter

    def net(x):
        mx = lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID")
        avg = lax.reduce_window(x, 0.0, lax.add, (3, 3), (1, 1), "SAME")
        return jnp.sum(mx**2) + jnp.sum(jnp.tanh(avg))

    x = A[0]
    fn = converter.from_stablehlo(jax.jit(net).lower(x).as_text()).to_jax()
    np.testing.assert_allclose(jax.grad(fn)(x), jax.grad(net)(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("ety", "dtype", "select", "compare_type", "scatter", "init"),
    SELECT_AND_SCATTER_CASES,
    ids=[f"{c[0]}-{c[2]}-{c[4]}" for c in SELECT_AND_SCATTER_CASES],
)
def test_select_and_scatter_integer_and_bool(ety, dtype, select, compare_type, scatter, init):
    """Integer and bool select_and_scatter match XLA (regression: the VJP of an integer
    reduce_window is a float0, which was added to the init value)."""
    text = select_and_scatter_text(ety, select, compare_type, scatter, init)
    x, s = select_and_scatter_inputs(dtype)
    got = np.asarray(converter.from_stablehlo(text).to_jax()(x, s))
    (want,) = run_xla(text, x, s)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


_NO_STRIDES = [("f32", np.float32, "FLOAT", "0.0"), ("i32", np.int32, "SIGNED", "0")]


@pytest.mark.parametrize(("ety", "dtype", "compare_type", "init"), _NO_STRIDES)
def test_select_and_scatter_without_strides_takes_unit_strides(ety, dtype, compare_type, init):
    """``window_strides`` is optional (default: 1 along every dimension, per the spec), in
    the float max-pool form and in the general (integer) one."""
    text = select_and_scatter_text(ety, "GE", compare_type, "add", init)
    text = text.replace(", window_strides = array<i64: 1, 2, 2>", "").replace(f"2x3x3x{ety}", f"2x5x6x{ety}")
    assert "window_strides" not in text
    x = (rng.normal(size=(2, 5, 6)) * 4).astype(dtype)
    s = (rng.normal(size=(2, 5, 6)) * 4).astype(dtype)
    got = np.asarray(converter.from_stablehlo(text).to_jax()(x, s))
    (want,) = run_xla(text, x, s)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


_SORTS = [("LT", "TOTALORDER", "f32"), ("GT", "TOTALORDER", "f32"), ("LT", "TOTALORDER", "bf16"),
          ("GT", "TOTALORDER", "f16"), ("LT", "TOTALORDER", "f64"), ("LT", "FLOAT", "f32")]  # fmt: skip
_NP = {"f16": np.float16, "bf16": jnp.bfloat16, "f32": np.float32, "f64": np.float64}


@pytest.mark.parametrize(("direction", "compare_type", "ety"), _SORTS, ids=["-".join(c) for c in _SORTS])
def test_sort_raw_comparator_total_order(direction, compare_type, ety):
    """A raw ``TOTALORDER`` comparator sorts -NaN first and -0.0 before +0.0 as XLA does
    (regression: the JAX backend re-emitted ``lax.sort``, whose comparator canonicalizes
    them); a ``FLOAT`` one ties -0.0 with +0.0."""
    x = np.array(TOTAL_ORDER_SPECIALS, _NP[ety])
    if compare_type == "FLOAT":
        x = np.nan_to_num(x, nan=3.0)  # NaN has no place in a FLOAT order
    i = np.arange(x.size, dtype=np.int32)
    text = sort_text(direction, compare_type, ety, x.size)
    assert_bits_equal(converter.from_stablehlo(text).to_jax()(x, i), run_xla(text, x, i))


@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16])
def test_sort_and_top_k_special_values(dtype):
    x = np.array(TOTAL_ORDER_SPECIALS, dtype)
    got, want = through_backend(lambda x: (jnp.sort(x), jnp.argsort(x, descending=True), lax.top_k(x, 7)), x)
    assert_bits_equal(got, want)


_SUM_KEY_SORT = """
func.func public @main(%x: tensor<2x7xf32>, %y: tensor<2x7xf32>) -> (tensor<2x7xf32>, tensor<2x7xf32>) {
  %0:2 = "stablehlo.sort"(%x, %y) <{dimension = 1 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>, %d: tensor<f32>):
    %l = stablehlo.add %a, %c : tensor<f32>
    %r = stablehlo.add %b, %d : tensor<f32>
    %lt = stablehlo.compare LT, %l, %r, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) : (tensor<2x7xf32>, tensor<2x7xf32>) -> (tensor<2x7xf32>, tensor<2x7xf32>)
  return %0#0, %0#1 : tensor<2x7xf32>, tensor<2x7xf32>
}"""


def test_sort_comparator_of_two_operands_is_stable():
    """A comparator that is no lexicographic key order (it orders by ``x + y``, two operands
    at once) sorts pairwise, keeping ties (equal sums) in input order as XLA's stable sort does."""
    x = np.array([[3, 1, 2, 0, 5, 1, 4], [0, 2, 2, 1, 3, 3, 0]], np.float32)
    y = np.array([[0, 2, 1, 3, -2, 1, 1], [2, 0, 1, 1, -1, 0, 2]], np.float32)  # many equal sums
    assert_bits_equal(converter.from_stablehlo(_SUM_KEY_SORT).to_jax()(x, y), run_xla(_SUM_KEY_SORT, x, y))


def test_max_min_pool_propagates_nan():
    """A window holding a NaN pools to NaN (StableHLO's maximum/minimum propagate it) even
    where XLA's CPU backend would skip it (its YNNPACK 2x2 stride-2 max pool does): checked
    against NumPy, not jax.jit, which loses the NaN here; the gradient still flows elsewhere,
    and ties (windows of zeros) pass it to one element as JAX's own reduce_window does."""
    x = rng.normal(size=(1, 16, 17, 33)).astype(np.float32)
    x[0, 10:, 5, ::3] = np.nan

    def pools(a):
        mx = lax.reduce_window(a, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        mn = lax.reduce_window(a, jnp.inf, lax.min, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        return mx, mn

    f = converter.from_stablehlo(jax.jit(pools).lower(x).as_text()).to_jax()
    windows = x[..., :16, :32].reshape(1, 16, 8, 2, 16, 2)
    for got, reduce in zip(f(x), (np.max, np.min), strict=True):
        np.testing.assert_array_equal(np.asarray(got), reduce(windows, axis=(3, 5)))
    clean = np.maximum(np.nan_to_num(x), 0)  # a ReLU's output: windows of tied zeros
    grad = jax.grad(lambda a: f(a)[0].sum())(clean)  # all of a window's to one maximum, as JAX's
    np.testing.assert_array_equal(grad, jax.grad(lambda a: pools(a)[0].sum())(clean))


def test_max_min_reduce_propagates_nan():
    """max/min reductions give NaN where a NaN is reduced (StableHLO's maximum), although
    XLA's CPU backend skips it in these shapes (checked against NumPy, not jax.jit)."""
    x = rng.normal(size=(16, 17, 33)).astype(np.float32)
    x[10:, 5, ::3] = np.nan
    for axes in ((0,), (1,), (2,), (1, 2)):
        fns = (lambda a, ax=axes: jnp.max(a, axis=ax), lambda a, ax=axes: jnp.min(a, axis=ax))
        for fn, ref in zip(fns, (np.max, np.min), strict=True):
            f = converter.from_stablehlo(jax.jit(fn).lower(x).as_text()).to_jax()
            np.testing.assert_array_equal(np.asarray(f(x)), ref(x, axis=axes))


def _numpy_window_reduce(x, init, reduce, window, strides, padding, base, dilation):
    """The spec's reduce_window of ``x`` in NumPy: pad (edges, base dilation) with ``init``,
    then ``reduce`` each window together with ``init``."""
    dilated = np.full([(n - 1) * b + 1 for n, b in zip(x.shape, base, strict=True)], init, x.dtype)
    dilated[tuple(slice(None, None, b) for b in base)] = x
    xp = np.pad(dilated, padding, constant_values=init)
    out_shape = [
        (n - (w - 1) * d - 1) // s + 1 for n, w, d, s in zip(xp.shape, window, dilation, strides, strict=True)
    ]
    out = np.empty(out_shape, x.dtype)
    for idx in np.ndindex(*out_shape):
        sl = tuple(
            slice(i * s, i * s + (w - 1) * d + 1, d)
            for i, s, w, d in zip(idx, strides, window, dilation, strict=True)
        )
        out[idx] = reduce(np.append(xp[sl].ravel(), init))
    return out


_WINDOWS = [  # window, strides, padding, base dilation, window dilation
    ((1, 3, 3), (1, 2, 2), ((0, 0), (1, 1), (1, 1)), (1, 1, 1), (1, 1, 1)),  # overlapping, padded
    ((1, 2, 3), (1, 1, 2), ((0, 0), (0, 1), (2, 0)), (1, 2, 1), (1, 2, 1)),  # base and window dilation
    ((2, 1, 9), (1, 1, 1), ((0, 0), (0, 0), (8, 0)), (1, 1, 1), (1, 1, 1)),  # cumulative-like, 18 taps
    ((1, 9, 9), (1, 1, 1), ((0, 0), (4, 4), (4, 4)), (1, 1, 1), (1, 1, 1)),  # 81 taps: the NaN count path
]


def test_max_min_windows_fold_exactly():
    """Max/min ``reduce_window`` of floats (small windows folded over strided slices, larger
    ones through ``reduce_window`` and a NaN count) equal the spec's definition computed in
    NumPy, bit for bit, with NaN and infinities in the windows."""
    x = rng.normal(size=(2, 7, 10)).astype(np.float32)
    x[0, 2, ::4] = np.nan
    x[1, 0, 1] = np.inf
    x[1, 5, 3] = -np.inf
    kinds = [(lax.max, np.float32(-np.inf), np.max), (lax.min, np.float32(np.inf), np.min)]

    def pools(a):
        return [lax.reduce_window(a, init, combine, *case) for combine, init, _ in kinds for case in _WINDOWS]

    f = converter.from_stablehlo(jax.jit(pools).lower(x).as_text()).to_jax()
    want = [_numpy_window_reduce(x, init, reduce, *case) for _, init, reduce in kinds for case in _WINDOWS]
    for got, w in zip(jax.jit(f)(x), want, strict=True):
        np.testing.assert_array_equal(np.asarray(got), w)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, np.float32])
def test_max_min_reduce_orders_signed_zeros_and_nan_exactly(dtype):
    """max/min reduce follows the spec's ``maximum``/``minimum`` bit for bit (integer keys of
    16 and 32 bits): NaN wins, -0 < +0, infinities kept; its derivative is
    ``lax.reduce_max``/``reduce_min``'s."""
    x = np.array(
        [
            [1, -0.0, 0.0, -1],
            [-0.0, -0.0, -0.0, -0.0],
            [0.0, -0.0, 0.0, 0.0],
            [-np.inf] * 4,
            [1, np.nan, np.inf, -np.inf],
            [-np.nan, 2, 3, 4],
        ],
        dtype,
    )
    fn = lambda a: (jnp.max(a, axis=1), jnp.min(a, axis=1))  # noqa: E731
    f = converter.from_stablehlo(jax.jit(fn).lower(x).as_text()).to_jax()
    nan = np.nan
    want = (
        np.array([1, -0.0, 0.0, -np.inf, nan, nan], dtype),
        np.array([-1, -0.0, -0.0, -np.inf, nan, nan], dtype),
    )
    for g, w in zip(jax.jit(f)(x), want, strict=True):
        g = np.asarray(g)
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        assert_bits_equal([g[~np.isnan(w)]], [w[~np.isnan(w)]])
    a = A.reshape(-1)[:24].reshape(6, 4).astype(dtype)
    grad = jax.jit(jax.grad(lambda a: sum(o.sum() for o in f(a))))(a)
    assert_bits_equal([grad], [jax.grad(lambda a: sum(o.sum() for o in fn(a)))(a)])


def test_max_min_reduce_over_an_empty_dimension_gives_the_init():
    """A max/min reduction over an empty dimension is its init value (spec ``reduce``: the
    schedule of an empty reduction is the init alone), not a NaN read from the integer key of
    an empty ``reduce_max``."""
    x = np.zeros((3, 0), np.float32)
    fn = lambda a: (jnp.max(a, axis=1, initial=-jnp.inf), jnp.min(a, axis=1, initial=2.5))  # noqa: E731
    got = converter.from_stablehlo(jax.jit(fn).lower(x).as_text()).to_jax()(x)
    want = (np.max(x, axis=1, initial=-np.inf), np.min(x, axis=1, initial=2.5))
    assert_bits_equal([np.asarray(g) for g in got], list(want))


def test_max_min_reduce_of_float8_propagates_nan():
    """float8 (no 16/32/64-bit integer key) max/min reductions take the guarded path: NaN
    where a row holds one, the row's max/min elsewhere (NumPy on the same values)."""
    import ml_dtypes

    x = np.array([[1.0, -2.0, 0.5], [np.nan, 3.0, -1.0], [4.0, -0.5, 2.0]], ml_dtypes.float8_e4m3fn)
    fn = lambda a: (jnp.max(a, axis=1), jnp.min(a, axis=0))  # noqa: E731
    got = converter.from_stablehlo(jax.jit(fn).lower(x).as_text()).to_jax()(x)
    f = x.astype(np.float32)
    for g, w in zip(got, (np.max(f, axis=1), np.min(f, axis=0)), strict=True):
        g = np.asarray(g)
        assert g.dtype == x.dtype
        np.testing.assert_array_equal(g.astype(np.float32), w)


def test_max_window_wider_than_its_operand_is_empty():
    """A float max/min ``reduce_window`` whose window is wider than the padded operand has
    an empty result dimension (spec: the result size ``(padded - window) // stride + 1`` is
    clamped at 0)."""
    x = rng.normal(size=(2, 3)).astype(np.float32)

    def pools(a):
        mx = lax.reduce_window(a, -jnp.inf, lax.max, (1, 4), (1, 1), "VALID")
        mn = lax.reduce_window(a, jnp.inf, lax.min, (2, 5), (1, 1), [(0, 0), (1, 0)])
        return mx, mn

    got = converter.from_stablehlo(jax.jit(pools).lower(x).as_text()).to_jax()(x)
    assert [np.asarray(g).shape for g in got] == [(2, 0), (1, 0)]


_FLOAT_SELECT_AND_SCATTER = [
    ("GE", "add", "1.5"),  # the max-pool gradient form, a non-zero init added
    ("LE", "add", "-2.0"),  # the min-pool gradient form
    ("GT", "add", "0.0"),  # last of tied maxima: the general form
    ("GE", "maximum", "-1.0"),  # a maximum scatter: the general form
]


@pytest.mark.parametrize(("select", "scatter", "init"), _FLOAT_SELECT_AND_SCATTER)
def test_select_and_scatter_float_forms(select, scatter, init):
    """Float select_and_scatter in the pool-gradient forms (select ``GE``/``LE``, scatter
    ``add``) and the others (``GT``, which picks the last of tied maxima; a ``maximum``
    scatter) match XLA, the init value included."""
    text = select_and_scatter_text("f32", select, "FLOAT", scatter, init)
    x, s = select_and_scatter_inputs(np.float32)
    got = np.asarray(converter.from_stablehlo(text).to_jax()(x, s))
    (want,) = run_xla(text, x, s)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


_MUL_WINDOWS = [  # init, window, strides, padding: reduce_windows of a multiply body (3x4 operand)
    (1.0, (1, 1), (1, 1), ((0, 0), (0, 0))),  # the identity window
    (1.0, (1, 4), (1, 1), ((0, 0), (3, 0))),  # cumulative along axis 1 (jnp.cumprod)
    (1.0, (3, 1), (1, 1), ((2, 0), (0, 0))),  # cumulative along axis 0
    (1.0, (1, 2), (1, 1), ((0, 0), (3, 0))),  # padded as a cumulative one, narrower window
    (1.0, (1, 5), (1, 1), ((0, 0), (3, 0))),  # padded as a cumulative one, wider window
    (1.0, (2, 4), (1, 1), ((0, 0), (3, 0))),  # cumulative along axis 1, a window of 2 along 0
    (1.0, (1, 4), (1, 1), ((1, 0), (3, 0))),  # cumulative along axis 1, padded along 0 too
]


def test_general_body_windows_values_and_forward_derivatives():
    """``reduce_window`` with a multiply body (no monoid of ``lax``'s): values equal the
    spec's definition in NumPy, and forward-mode derivatives ``jax.jvp`` of the source, for
    cumulative windows (taken through an associative scan) and windows that are not: the
    identity window, and windows padded as a cumulative one but narrower or wider."""
    x = (np.arange(12, dtype=np.float32).reshape(3, 4) / 10 + 0.5).astype(np.float32)

    def pools(a):
        return [lax.reduce_window(a, np.float32(init), lax.mul, w, s, p) for init, w, s, p in _MUL_WINDOWS]

    f = converter.from_stablehlo(jax.jit(pools).lower(x).as_text()).to_jax()
    tangent = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    got, got_t = jax.jvp(f, (x,), (tangent,))
    want_t = jax.jvp(pools, (x,), (tangent,))[1]
    for k, (init, w, s, p) in enumerate(_MUL_WINDOWS):
        spec = _numpy_window_reduce(x, np.float32(init), np.prod, w, s, p, (1, 1), (1, 1))
        np.testing.assert_allclose(np.asarray(got[k]), spec, rtol=1e-6, err_msg=str(k))
        np.testing.assert_allclose(
            np.asarray(got_t[k]), np.asarray(want_t[k]), rtol=1e-5, atol=1e-6, err_msg=str(k)
        )


def test_max_window_with_an_init_known_only_at_run_time():
    """Max/min pools whose init value is an input (not a constant): each window reduced with
    the init, NaN propagating (spec ``maximum``/``minimum``), in NumPy; XLA's CPU backend
    (``jax.jit``) loses these NaNs here as it does with a constant init."""
    x = rng.normal(size=(1, 16, 17, 33)).astype(np.float32)
    x[0, 10:, 5, ::3] = np.nan

    def pools(a, lo, hi):
        return (
            lax.reduce_window(a, lo, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID"),
            lax.reduce_window(a, hi, lax.min, (1, 1, 2, 2), (1, 1, 2, 2), "VALID"),
        )

    lo, hi = np.float32(0.5), np.float32(-0.25)
    got = converter.from_stablehlo(jax.jit(pools).lower(x, lo, hi).as_text()).to_jax()(x, lo, hi)
    windows = x[..., :16, :32].reshape(1, 16, 8, 2, 16, 2)
    want = (np.maximum(np.max(windows, axis=(3, 5)), lo), np.minimum(np.min(windows, axis=(3, 5)), hi))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_max_window_folds_slices_up_to_64_taps():
    """A float max ``reduce_window`` of at most 64 taps is a fold of ``lax.max`` over strided
    slices, with no ``reduce_window`` kernel (which skips NaN on XLA's CPU backend); a larger
    window takes ``reduce_window`` with a NaN count (the values of both:
    ``test_max_min_windows_fold_exactly``)."""
    from converter.backends.jax.ops.reductions import _max_min_window

    x = jax.ShapeDtypeStruct((9, 14), np.float32)
    for window, folded in [((1, 1), True), ((2, 2), True), ((8, 8), True), ((5, 13), False)]:
        kwargs = dict(
            window_dimensions=window,
            window_strides=(1, 1),
            padding=((0, 0), (0, 0)),
            base_dilation=(1, 1),
            window_dilation=(1, 1),
        )
        jaxpr = str(
            jax.make_jaxpr(lambda a, kw=kwargs: _max_min_window(a, np.float32(-np.inf), "max", kw))(x)
        )
        assert ("reduce_window" not in jaxpr) == folded, (window, jaxpr)


_SORT_WITHOUT_DIMENSION = """
func.func public @main(%x: tensor<2x4xi32>) -> tensor<2x4xi32> {
  %0 = "stablehlo.sort"(%x) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %lt = stablehlo.compare LT, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) : (tensor<2x4xi32>) -> tensor<2x4xi32>
  return %0 : tensor<2x4xi32>
}"""


def test_sort_without_a_dimension_sorts_the_last_one():
    """Spec ``sort``: ``dimension`` is optional, -1 (the last dimension) by default."""
    x = np.array([[3, -1, 2, 0], [5, 7, -4, 1]], np.int32)
    got = converter.from_stablehlo(_SORT_WITHOUT_DIMENSION).to_jax()(x)
    np.testing.assert_array_equal(np.asarray(got), np.sort(x, axis=-1))


def test_select_and_scatter_with_negative_padding_is_refused_by_name():
    """The general select_and_scatter (integer operands) refuses a negative padding amount
    as not implemented, naming it, rather than failing inside ``jnp.pad``."""
    text = select_and_scatter_text("i32", "GE", "SIGNED", "add", "0")
    text = text.replace("[[0, 0], [1, 0], [1, 1]]", "[[0, 0], [-1, 2], [1, 1]]")  # the same result shape
    x, s = select_and_scatter_inputs(np.int32)
    with pytest.raises(
        converter.OpConversionError, match="NotImplementedError: select_and_scatter with negative"
    ):
        converter.from_stablehlo(text).to_jax()(x, s)


def test_max_window_over_an_empty_dimension_gives_the_init_in_its_padding():
    """A float max/min ``reduce_window`` of an operand with an empty dimension, padded there:
    the padding alone makes windows (spec: the result size counts the padded operand), each
    reducing to the init value; the spec's definition in NumPy."""
    x = np.zeros((2, 0), np.float32)

    def pools(a):
        return (
            lax.reduce_window(a, np.float32(-np.inf), lax.max, (1, 2), (1, 1), [(0, 0), (1, 2)]),
            lax.reduce_window(a, np.float32(1.5), lax.min, (1, 1), (1, 1), [(0, 0), (0, 1)]),
        )

    got = converter.from_stablehlo(jax.jit(pools).lower(x).as_text()).to_jax()(x)
    cases = [
        (np.float32(-np.inf), np.max, (1, 2), ((0, 0), (1, 2))),
        (np.float32(1.5), np.min, (1, 1), ((0, 0), (0, 1))),
    ]
    for g, (init, reduce, window, padding) in zip(got, cases, strict=True):
        want = _numpy_window_reduce(x, init, reduce, window, (1, 1), padding, (1, 1), (1, 1))
        assert want.shape == (2, 2 if reduce is np.max else 1)
        assert_bits_equal([np.asarray(g)], [want])


def test_sum_window_with_an_init_known_only_at_run_time():
    """An add ``reduce_window`` whose init value is an input: each window's sum plus the
    init (spec: the init joins every window's reduction), in NumPy."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    fn = lambda a, init: lax.reduce_window(a, init, lax.add, (2, 2), (1, 2), "VALID")  # noqa: E731
    init = np.float32(0.25)
    got = converter.from_stablehlo(jax.jit(fn).lower(x, init).as_text()).to_jax()(x, init)
    want = _numpy_window_reduce(x, init, np.sum, (2, 2), (1, 2), ((0, 0), (0, 0)), (1, 1), (1, 1))
    np.testing.assert_array_equal(np.asarray(got), want)


def test_cumulative_product_with_an_init_known_only_at_run_time():
    """A cumulative multiply ``reduce_window`` (as ``jnp.cumprod`` emits) whose init value is
    an input: each prefix product times the init once per padded position of its window
    (spec: padding holds the init), in NumPy."""
    x = np.array([[1.5, -2.0, 0.5, 3.0], [2.0, 1.0, -1.0, 0.25]], np.float32)
    fn = lambda a, init: lax.reduce_window(a, init, lax.mul, (1, 4), (1, 1), [(0, 0), (3, 0)])  # noqa: E731
    init = np.float32(1.0)
    got = converter.from_stablehlo(jax.jit(fn).lower(x, init).as_text()).to_jax()(x, init)
    want = _numpy_window_reduce(x, init, np.prod, (1, 4), (1, 1), ((0, 0), (3, 0)), (1, 1), (1, 1))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
