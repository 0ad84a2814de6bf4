"""reduce, reduce_window, select_and_scatter, sort, top_k through the torch backend."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
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

from .helpers import assert_same, numpy_of, run_both, torch_of

rng = np.random.default_rng(1)
X = rng.standard_normal((3, 5, 4)).astype(np.float32)


def test_common_reduce_bodies():
    assert_same(
        lambda x: (x.sum(1), x.max((0, 2)), x.min(), x.prod(2), (x > 0).any(1), (x > 0).all(0)),
        X,
        rtol=1e-5,
        atol=1e-5,
    )


def test_general_reduce_bodies():
    i = rng.integers(-50, 50, (4, 7)).astype(np.int32)
    assert_same(lambda x: (jnp.argmax(x, 1), jnp.argmin(x, 0)), X)
    assert_same(
        lambda x: (jnp.bitwise_xor.reduce(x, axis=1), jnp.bitwise_and.reduce(x, axis=0), jnp.argmax(x, 1)), i
    )


def test_reduce_over_empty_dims():
    """A reduced dim of size 0 gives the init value, also when a kept dim is 0 too."""
    for shape in ((0, 0), (2, 0), (0, 3)):
        x = np.zeros(shape, np.float32)
        i = np.zeros(shape, np.int32)
        assert_same(lambda x, i: (x.sum(1), x.prod(0), jnp.bitwise_xor.reduce(i, axis=1)), x, i)


def test_nan_in_reductions():
    x = X.copy()
    x[0, 0, 0] = np.nan
    assert_same(lambda x: (x.max(1), jnp.nanmax(x, 1), jnp.argmax(x, 2)), x)


def test_reduce_window_pools_and_cumsum():
    img = rng.standard_normal((1, 6, 7, 2)).astype(np.float32)

    def f(x):
        mx = lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        avg = lax.reduce_window(
            x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID", window_dilation=(1, 2, 1, 1)
        )
        dil = lax.reduce_window(
            x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID", base_dilation=(1, 2, 1, 1)
        )
        # a window longer than its dim (7 > 6): an empty result, not a pool call
        empty = lax.reduce_window(x, -jnp.inf, lax.max, (1, 7, 3, 1), (1, 1, 1, 1), "VALID")
        # a window of one element everywhere: no pooled dim (the identity)
        same = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 1, 1), (1, 1, 1, 1), "VALID")
        # padding above half the window (torch's pools refuse it): padded first, then pooled
        wide = lax.reduce_window(
            x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 1, 1, 1), ((0, 0), (2, 2), (2, 2), (0, 0))
        )
        return mx, avg, dil, jnp.cumsum(x, 1), jnp.cumprod(x, 2), lax.cummax(x, 1), empty, same, wide

    assert_same(f, img, rtol=1e-5, atol=1e-5)


def test_reduce_window_with_negative_padding_crops_first():
    """Equal negative padding on both sides (the spec's padding is any si64; a negative one
    crops): cropped, then pooled, never handed to a torch pool as its own padding (which must
    be >= 0), for max and sum."""
    img = rng.standard_normal((1, 6, 7, 2)).astype(np.float32)
    crop = ((0, 0), (-1, -1), (-1, -1), (0, 0))

    def f(x):
        mx = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 1, 1, 1), crop)
        total = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 1, 1), crop)
        return mx, total

    assert_same(f, img, rtol=1e-5, atol=1e-5)


def test_select_and_scatter_max_pool_grad():
    img = rng.standard_normal((1, 6, 7, 2)).astype(np.float32)

    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME").sum()

    assert_same(jax.grad(pool), img)


def test_sort_kinds():
    x = X.copy()
    x[0, 1, 1] = np.nan
    assert_same(
        lambda x: (jnp.sort(x, 1), jnp.argsort(x, 2), jnp.sort(x, 0, descending=True), lax.top_k(x, 2)), x
    )
    keys = rng.integers(0, 3, (2, 9)).astype(np.int32)
    # two keys (also over the last of three dims: two batch dims of different sizes); one
    # integer or bool key (bools sorted as uint8), stable
    assert_same(
        lambda k, v: (
            lax.sort((k, v), num_keys=2, dimension=1),
            lax.sort((k.reshape(2, 3, 3), v.reshape(2, 3, 3)), num_keys=2, dimension=2),
            lax.sort((k, v), num_keys=1),
            lax.sort((k > 0, v), num_keys=1),
        ),
        keys,
        keys[::-1].copy(),
    )
    assert_same(lambda k: jnp.lexsort((k, -k)), keys)


@pytest.mark.parametrize(
    ("ety", "dtype", "select", "compare_type", "scatter", "init"),
    SELECT_AND_SCATTER_CASES,
    ids=[f"{c[0]}-{c[2]}-{c[4]}" for c in SELECT_AND_SCATTER_CASES],
)
def test_select_and_scatter_integer_and_bool(ety, dtype, select, compare_type, scatter, init):
    """Integer and bool select_and_scatter match XLA, padding never selected (regression:
    only float operands with a single-compare select were accepted)."""
    text = select_and_scatter_text(ety, select, compare_type, scatter, init)
    x, s = select_and_scatter_inputs(dtype)
    got = converter.from_stablehlo(text).to_torch()(torch.from_numpy(x), torch.from_numpy(s)).numpy()
    (want,) = run_xla(text, x, s)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


_SORTS = [("LT", "TOTALORDER", "f32"), ("GT", "TOTALORDER", "f32"), ("LT", "TOTALORDER", "bf16"),
          ("GT", "TOTALORDER", "f16"), ("LT", "TOTALORDER", "f64"), ("LT", "FLOAT", "f32")]  # fmt: skip
_NP = {"f16": np.float16, "bf16": jnp.bfloat16, "f32": np.float32, "f64": np.float64}


@pytest.mark.parametrize(("direction", "compare_type", "ety"), _SORTS, ids=["-".join(c) for c in _SORTS])
def test_sort_raw_comparator_total_order(direction, compare_type, ety):
    """A raw ``TOTALORDER`` comparator sorts -NaN first and -0.0 before +0.0, as XLA does; a
    ``FLOAT`` one ties -0.0 with +0.0."""
    x = np.array(TOTAL_ORDER_SPECIALS, _NP[ety])
    if compare_type == "FLOAT":
        x = np.nan_to_num(x, nan=3.0)  # NaN has no place in a FLOAT order
    i = np.arange(x.size, dtype=np.int32)
    text = sort_text(direction, compare_type, ety, x.size)
    got = converter.from_stablehlo(text).to_torch()(torch_of(x), torch.from_numpy(i))
    assert_bits_equal([numpy_of(t) for t in got], run_xla(text, x, i))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, jnp.bfloat16])
def test_top_k_total_order(dtype):
    """chlo.top_k in XLA's order: NaN first, -NaN last, +0.0 before -0.0 (regression: torch's
    sort put -NaN first and tied the zeros by index)."""
    x = np.array(TOTAL_ORDER_SPECIALS, dtype)
    got, want = run_both(lambda x: (lax.top_k(x, 10), lax.top_k(x, 3), jnp.sort(x)), x)
    assert_bits_equal(got, want)


def test_top_k_breaks_ties_by_lower_index_in_long_rows():
    """chlo.top_k orders equal values by index (XLA's, and the spec's stable order); torch's
    CPU sort keeps ties in order only when asked to be stable, from rows of 17 elements on."""
    x = np.random.default_rng(0).integers(0, 3, size=(3, 40)).astype(np.float32)
    got, want = run_both(lambda v: lax.top_k(v, 25), x)
    assert_bits_equal(got, want)


def _select_and_scatter_variant(ety, scatter, negative_padding=False):
    text = select_and_scatter_text(ety, "GE", "SIGNED" if ety.startswith("i") else "UNSIGNED", scatter, "0")
    if negative_padding:  # rows 5 - 1 = 4: a source of 2 window rows
        text = text.replace("[[0, 0], [1, 0], [1, 1]]", "[[0, 0], [-1, 0], [1, 1]]")
        text = text.replace(f"tensor<2x3x3x{ety}>", f"tensor<2x2x3x{ety}>")
    return text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_select_and_scatter_variant("i32", "subtract"), "with a general scatter body"),
        (_select_and_scatter_variant("i32", "xor"), "with a xor scatter body"),
        (_select_and_scatter_variant("ui32", "maximum"), "with a max scatter body on uint32"),
        (_select_and_scatter_variant("i32", "add", negative_padding=True), "with negative padding"),
    ],
    ids=["subtract", "xor", "ui32-max", "negative-padding"],
)
def test_select_and_scatter_refusals_name_the_form(text, message):
    with pytest.raises(converter.ConversionError, match="select_and_scatter " + message):
        converter.from_stablehlo(text).to_torch()


def test_one_dim_pool_bool_xor_empty_reduce_and_uint64_sort():
    """A max pool over the only dimension (no batch dims) and one with a computed init, an
    xor reduction of bools (a tree of the body), a reduction over no dimensions (the
    operand), and a sort of uint64 keys (ordered unsigned)."""
    v = rng.standard_normal(7).astype(np.float32)
    b = np.array([[True, False, True], [True, True, True]])
    u = np.array([2**64 - 1, 0, 2**63, 5, 2**63 - 1], np.uint64)
    assert_same(
        lambda v, b, u, s: (
            lax.reduce_window(v, -jnp.inf, lax.max, (3,), (2,), "VALID"),
            lax.reduce_window(v, s, lax.max, (3,), (2,), "VALID"),  # a computed init: no pool call
            lax.reduce(b, False, lax.bitwise_xor, (1,)),
            lax.reduce(v, np.float32(0), lax.add, ()),
            jnp.sort(u),
        ),
        v,
        b,
        u,
        np.float32(0.5),
    )


def test_max_and_min_reductions_over_an_empty_dim_give_the_init():
    """A max/min reduction over a zero-size dim is its init value (torch's amax refuses an
    empty dim), also with the kept dim non-empty."""
    x = np.zeros((3, 0), np.float32)
    i = np.zeros((0, 2), np.int32)
    assert_same(
        lambda x, i: (
            lax.reduce(x, np.float32(-7.5), lax.max, (1,)),
            lax.reduce(x, np.float32(2.5), lax.min, (1,)),
            lax.reduce(i, np.int32(4), lax.max, (0,)),
        ),
        x,
        i,
    )


def test_uint64_max_min_reductions_compare_unsigned():
    """max/min reductions of uint64 order values from 2**63 up above the others (stored
    negative in int64)."""
    u = np.array([[5, 2**63, 2**64 - 1], [0, 7, 2**63 - 1]], np.uint64)
    assert_same(lambda u: (u.max(1), u.min(1), u.max(), u.min(0)), u)


def test_reduce_window_of_a_general_body_and_a_window_as_long_as_its_dim():
    """reduce_window with a body that is no direct reduction (xor: a tree of the body), over
    windows that fit exactly (the window as long as the dim: one window) and strided ones."""
    i = rng.integers(-50, 50, (5, 4)).astype(np.int32)
    assert_same(
        lambda i: (
            lax.reduce_window(i, np.int32(0), lax.bitwise_xor, (5, 1), (1, 1), "VALID"),
            lax.reduce_window(i, np.int32(0), lax.bitwise_xor, (2, 3), (2, 1), "SAME"),
            lax.reduce_window(i, np.int32(-9), lax.max, (5, 4), (1, 1), "VALID"),
        ),
        i,
    )


def test_reduce_window_max_and_sum_with_other_inits_are_not_pools():
    """A max with init 0 (not -inf) and a sum with init 1.5 (not 0) combine the init into
    every window, which torch's pools would not: all-negative windows give 0."""
    img = -np.abs(rng.standard_normal((1, 5, 6, 2))).astype(np.float32)
    assert_same(
        lambda x: (
            lax.reduce_window(x, np.float32(0), lax.max, (1, 2, 2, 1), (1, 1, 2, 1), "VALID"),
            lax.reduce_window(x, np.float32(1.5), lax.add, (1, 2, 3, 1), (1, 2, 1, 1), "VALID"),
        ),
        img,
        rtol=1e-5,
        atol=1e-5,
    )


def test_general_sort_is_stable_along_any_dim():
    """``sort_general`` (any comparator) keeps tied elements in their order (the spec's
    ``is_stable``), along a leading dim too: NumPy's stable argsort gives the order."""
    from converter.backends.torch.ops.reductions import sort_general

    keys = torch.tensor([[2, 5], [1, 5], [2, 4], [1, 4], [0, 4]])
    payload = torch.arange(10).reshape(5, 2)
    got_keys, got_payload = sort_general(lambda a, b, c, d: [a < b], [keys, payload], 0)
    order = np.argsort(keys.numpy(), axis=0, kind="stable")
    np.testing.assert_array_equal(got_keys.numpy(), np.take_along_axis(keys.numpy(), order, 0))
    np.testing.assert_array_equal(got_payload.numpy(), np.take_along_axis(payload.numpy(), order, 0))


_WINDOWS_WITHOUT_OPTIONAL_ATTRS = """
func.func public @main(%x: tensor<4x5xi32>, %f: tensor<4x5xf32>, %s: tensor<3x3xf32>)
    -> (tensor<3x3xi32>, tensor<3x3xf32>, tensor<4x5xf32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0 = "stablehlo.reduce_window"(%x, %zero) <{window_dimensions = array<i64: 2, 3>}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %c = stablehlo.xor %a, %b : tensor<i32>
    stablehlo.return %c : tensor<i32>
  }) : (tensor<4x5xi32>, tensor<i32>) -> tensor<3x3xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %1 = "stablehlo.reduce_window"(%f, %ninf) <{window_dimensions = array<i64: 2, 3>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<4x5xf32>, tensor<f32>) -> tensor<3x3xf32>
  %fzero = stablehlo.constant dense<0.0> : tensor<f32>
  %2 = "stablehlo.select_and_scatter"(%f, %s, %fzero) <{window_dimensions = array<i64: 2, 3>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<4x5xf32>, tensor<3x3xf32>, tensor<f32>) -> tensor<4x5xf32>
  return %0, %1, %2 : tensor<3x3xi32>, tensor<3x3xf32>, tensor<4x5xf32>
}"""


def test_window_ops_without_strides_dilations_or_padding():
    """StableHLO spec (reduce_window, select_and_scatter): ``window_strides``,
    ``base_dilations`` and ``window_dilations`` default to ones, ``padding`` to zeros (jax.jit
    always writes them): a general body (xor), a max pool and a select_and_scatter (each
    source value added at its window's maximum) over every 2x3 window, worked with NumPy."""
    from numpy.lib.stride_tricks import sliding_window_view

    x = rng.integers(-50, 50, (4, 5)).astype(np.int32)
    f = rng.permutation(20).astype(np.float32).reshape(4, 5)  # distinct: one maximum per window
    s = rng.integers(1, 9, (3, 3)).astype(np.float32)
    module = converter.from_stablehlo(_WINDOWS_WITHOUT_OPTIONAL_ATTRS).to_torch()
    xor, peak, scattered = (t.numpy() for t in module(*(torch.from_numpy(v) for v in (x, f, s))))
    np.testing.assert_array_equal(xor, np.bitwise_xor.reduce(sliding_window_view(x, (2, 3)), axis=(2, 3)))
    np.testing.assert_array_equal(peak, sliding_window_view(f, (2, 3)).max(axis=(2, 3)))
    want = np.zeros((4, 5), np.float32)
    for i, j in np.ndindex(3, 3):
        r, c = np.unravel_index(np.argmax(f[i : i + 2, j : j + 3]), (2, 3))
        want[i + r, j + c] += s[i, j]
    assert xor.dtype == np.int32 and peak.dtype == scattered.dtype == np.float32
    np.testing.assert_array_equal(scattered, want)


_SORT_WITHOUT_DIMENSION = """
func.func public @main(%x: tensor<2x2x3xi32>, %y: tensor<2x2x3xi32>)
    -> (tensor<2x2x3xi32>, tensor<2x2x3xi32>) {
  %0 = "stablehlo.sort"(%x) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %r = stablehlo.compare LT, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %r : tensor<i1>
  }) : (tensor<2x2x3xi32>) -> tensor<2x2x3xi32>
  %1:2 = "stablehlo.sort"(%x, %y) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>, %c: tensor<i32>, %d: tensor<i32>):
    %r = stablehlo.compare LT, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %e = stablehlo.compare EQ, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %t = stablehlo.compare GT, %c, %d, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %u = stablehlo.and %e, %t : tensor<i1>
    %v = stablehlo.or %r, %u : tensor<i1>
    stablehlo.return %v : tensor<i1>
  }) : (tensor<2x2x3xi32>, tensor<2x2x3xi32>) -> (tensor<2x2x3xi32>, tensor<2x2x3xi32>)
  return %0, %1#1 : tensor<2x2x3xi32>, tensor<2x2x3xi32>
}"""


def test_sort_without_a_dimension_sorts_the_last():
    """StableHLO spec (sort): ``dimension`` defaults to -1, the last dim, for a one-key
    comparator (``torch.sort``) and a general one, of rank 3 (ascending key, ties by descending payload);
    NumPy's sorts along axis -1 give the values."""
    x = np.array([[[3, -1, 2], [0, 5, 0]], [[1, 1, -4], [7, 7, 7]]], np.int32)
    y = np.arange(12, dtype=np.int32).reshape(2, 2, 3)
    sorted_x, payload = converter.from_stablehlo(_SORT_WITHOUT_DIMENSION).to_torch()(
        torch.from_numpy(x), torch.from_numpy(y)
    )
    np.testing.assert_array_equal(sorted_x.numpy(), np.sort(x, axis=-1))
    order = np.lexsort((-y, x), axis=-1)
    np.testing.assert_array_equal(payload.numpy(), np.take_along_axis(y, order, -1))


def test_pools_over_four_window_dims_and_under_three_batch_dims():
    """A max pool over four windowed dims (beyond torch's 3-D pools: the general path) and
    one over the last dim under three trivially windowed (batch) dims, folded into torch's
    pool's batch; against JAX."""
    x4 = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    x3 = rng.standard_normal((2, 3, 2, 6)).astype(np.float32)
    assert_same(
        lambda a, b: (
            lax.reduce_window(a, -jnp.inf, lax.max, (2, 2, 2, 2), (1, 1, 1, 2), "VALID"),
            lax.reduce_window(b, -jnp.inf, lax.max, (1, 1, 1, 3), (1, 1, 1, 2), "VALID"),
            lax.reduce_window(b, 0.0, lax.add, (1, 1, 2, 3), (1, 1, 1, 1), "VALID"),
        ),
        x4,
        x3,
    )
