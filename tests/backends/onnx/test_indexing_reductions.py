"""gather/scatter, reductions, pools and sort through the ONNX backend."""

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from .helpers import assert_onnx_same, run_onnx

rng = np.random.default_rng(0)
A = rng.normal(size=(4, 5, 6)).astype(np.float32)
IDX = np.array([3, 0, 2, 2, 9, -1], np.int32)


def test_gather_forms():
    m = A[0]
    assert_onnx_same(
        lambda a, i: (a[jnp.clip(i, 0, 3)], a[:, jnp.clip(i, 0, 5)], jnp.take(a, i, axis=0, mode="clip")),
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


def test_pools():
    x = A[None]
    assert_onnx_same(
        lambda x: (
            lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "SAME"),
            lax.reduce_window(x, 0.0, lax.add, (1, 1, 3, 3), (1, 1, 1, 1), [(0, 0), (0, 0), (1, 1), (1, 1)]),
        ),
        x,
    )


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
