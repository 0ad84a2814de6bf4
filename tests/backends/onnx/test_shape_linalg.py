"""Shape ops, dot_general and convolution through the ONNX backend."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import converter

from .helpers import assert_onnx_same, run_onnx, run_text

rng = np.random.default_rng(0)
A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_views_slices_concat_pad_reverse():
    assert_onnx_same(
        lambda a: (
            a.reshape(6, 4),
            a.transpose(2, 0, 1),
            a[:, 1:, ::2],
            a[::-1, :, ::-1],
            jnp.concatenate([a, a], 1),
            jnp.broadcast_to(a[:, :1], (2, 3, 4)),
            lax.pad(a, np.float32(0), [(1, -1, 0), (0, 2, 0), (2, 0, 0)]),
            jnp.arange(4, dtype=jnp.float32) * a,
        ),
        A,
    )


def test_zero_size_values_are_empty_initializers():
    # broadcast_in_dim of a scalar to (0,) was an Expand that onnxruntime gave size 1
    x = np.arange(3, dtype=np.float32)
    assert_onnx_same(
        lambda v: (
            jnp.concatenate([v, jnp.zeros((0,), jnp.float32)]) * 2,
            jnp.concatenate([jnp.ones((0,), jnp.int32), v[:0].astype(jnp.int32), v.astype(jnp.int32)]),
            jnp.zeros((2, 0), jnp.bfloat16) + v[:0].astype(jnp.bfloat16),
        ),
        x,
    )


def test_dynamic_slice_clamps():
    assert_onnx_same(lambda a, i: lax.dynamic_slice(a, (i, i, i), (1, 2, 3)), A, np.int32(5))


def test_dot_general_any_dimension_numbers():
    a = rng.normal(size=(3, 2, 5, 4)).astype(np.float32)
    b = rng.normal(size=(4, 3, 5, 6)).astype(np.float32)
    assert_onnx_same(
        lambda a, b: lax.dot_general(a, b, (((2, 3), (2, 0)), ((0,), (1,)))), a, b, rtol=1e-5, atol=1e-5
    )


def test_dot_general_batch_dimension_not_leading_is_no_matmul():
    """A batch dimension in the middle of the lhs (contracting its last) is not the MatMul
    pattern's leading batch: the general lowering, not a MatMul on the wrong axes."""
    a = rng.normal(size=(3, 2, 4)).astype(np.float32)
    b = rng.normal(size=(2, 4, 5)).astype(np.float32)
    assert_onnx_same(
        lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((1,), (0,)))), a, b, rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("groups,dil,stride", [(1, 1, 1), (2, 2, 2)])
def test_convolution_layouts(groups, dil, stride):
    x = rng.normal(size=(2, 9, 9, 4)).astype(np.float32)
    w = rng.normal(size=(3, 3, 4 // groups, 8)).astype(np.float32)
    assert_onnx_same(
        lambda x, w: lax.conv_general_dilated(
            x,
            w,
            (stride, stride),
            [(1, 2), (0, 1)],
            rhs_dilation=(dil, dil),
            feature_group_count=groups,
            dimension_numbers=("NHWC", "HWIO", "NCHW"),
        ),
        x,
        w,
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("start", [(-3, 1), (1, 2), (9, 9)])
def test_dynamic_update_slice_clamps_its_start(start):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    upd = -np.ones((2, 3), np.float32)
    assert_onnx_same(lambda a, u, i, j: lax.dynamic_update_slice(a, u, (i, j)), x, upd, *np.int32(start))


def test_dynamic_update_slice_of_rank_0_is_the_update():
    """StableHLO spec, dynamic_update_slice: with no dimensions the result is the update
    (``ScatterND`` cannot express it: its indices need rank >= 1)."""
    assert_onnx_same(lambda a, u: lax.dynamic_update_slice(a, u, ()), np.float32(1.5), np.float32(-2.0))


def test_pad_interior_and_negative_edges():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert_onnx_same(lambda a: lax.pad(a, np.int32(-7), [(1, -1, 2), (-2, 3, 1)]), x)
    assert_onnx_same(lambda a: lax.pad(a, np.int32(5), [(0, 0, 1), (0, 0, 0)]), x[:1])


def test_convolution_with_lhs_dilation_and_cropping():
    """lhs_dilation (transposed convolution) and negative padding (cropping)."""
    x = rng.normal(size=(1, 2, 5, 6)).astype(np.float32)
    k = rng.normal(size=(3, 2, 3, 2)).astype(np.float32)

    def f(a, w):
        return lax.conv_general_dilated(
            a, w, (1, 2), [(-1, 2), (1, -1)], lhs_dilation=(2, 3), rhs_dilation=(1, 2)
        )

    assert_onnx_same(f, x, k, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- im2col convolutions

_CONV_FORMS = {
    "plain": dict(window_strides=(1, 1), padding="SAME"),
    "strided_dilated_groups": dict(
        window_strides=(2, 1), padding=[(1, 2), (0, 1)], rhs_dilation=(2, 1), feature_group_count=2
    ),
    "transposed_cropped": dict(
        window_strides=(1, 2), padding=[(-1, 2), (1, -1)], lhs_dilation=(2, 3), rhs_dilation=(1, 2)
    ),
}


def _conv(x, k, form, layout=("NHWC", "HWIO", "NCHW"), preferred=None):
    return lax.conv_general_dilated(
        x, k, dimension_numbers=layout, preferred_element_type=preferred, **_CONV_FORMS[form]
    )


@pytest.mark.parametrize("form", sorted(_CONV_FORMS))
def test_convolution_float64_im2col(form):
    """float64 (onnxruntime has no float64 Conv kernel): im2col + MatMul in float64."""
    x = rng.normal(size=(2, 7, 8, 4))
    k = rng.normal(size=(3, 2, 4 // _CONV_FORMS[form].get("feature_group_count", 1), 6))
    got, want = run_onnx(lambda a, w: _conv(a, w, form), x, k)
    assert got[0].dtype == np.float64
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)


def test_convolution_float64_1d_and_3d():
    x1, k1 = rng.normal(size=(2, 3, 11)), rng.normal(size=(4, 3, 3))
    x3, k3 = rng.normal(size=(1, 2, 4, 5, 6)), rng.normal(size=(3, 2, 2, 3, 2))
    assert_onnx_same(lambda a, w: lax.conv(a, w, (2,), "SAME"), x1, k1, rtol=1e-12, atol=1e-12)
    assert_onnx_same(lambda a, w: lax.conv(a, w, (1, 2, 1), "VALID"), x3, k3, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint32])
@pytest.mark.parametrize("form", sorted(_CONV_FORMS))
def test_convolution_integers_wrap_like_xla(dtype, form):
    """ONNX Conv takes no integers: im2col + MatMul in uint64, cast back; sums that overflow
    the type wrap as XLA's do (exact comparison)."""
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=(2, 7, 8, 4), endpoint=True).astype(dtype)
    k_shape = (3, 2, 4 // _CONV_FORMS[form].get("feature_group_count", 1), 6)
    k = rng.integers(info.min, info.max, size=k_shape, endpoint=True).astype(dtype)
    got, want = run_onnx(lambda a, w: _conv(a, w, form), x, k)
    assert got[0].dtype == want[0].dtype == dtype
    np.testing.assert_array_equal(got[0], want[0])


def test_convolution_int8_with_int32_result():
    """preferred_element_type int32: the int8 operands are widened before multiplying."""
    x = rng.integers(-128, 127, size=(2, 7, 8, 4)).astype(np.int8)
    k = rng.integers(-128, 127, size=(3, 2, 4, 6)).astype(np.int8)
    got, want = run_onnx(lambda a, w: _conv(a, w, "plain", preferred=jnp.int32), x, k)
    assert got[0].dtype == want[0].dtype == np.int32
    np.testing.assert_array_equal(got[0], want[0])


def test_convolution_float16_with_float32_result():
    """preferred_element_type float32 on float16 operands: Conv in float32."""
    x = rng.normal(size=(2, 7, 8, 4)).astype(np.float16)
    k = rng.normal(size=(3, 2, 4, 6)).astype(np.float16)
    got, want = run_onnx(lambda a, w: _conv(a, w, "plain", preferred=jnp.float32), x, k)
    assert got[0].dtype == want[0].dtype == np.float32
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- forms only StableHLO text has


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_broadcast_in_dim_with_decreasing_dimensions(dynamic):
    """``broadcast_dimensions = [2, 0]`` (JAX only emits increasing ones): the operand is
    transposed first; with a dynamic operand dimension too."""
    src = "?x3" if dynamic else "2x3"
    text = f"""func.func public @main(%x: tensor<{src}xf32>) -> tensor<3x5x2xf32> {{
  %0 = stablehlo.broadcast_in_dim %x, dims = [2, 0] : (tensor<{src}xf32>) -> tensor<3x5x2xf32>
  return %0 : tensor<3x5x2xf32>
}}"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = run_text(text, x)
    np.testing.assert_array_equal(got, np.broadcast_to(x.T[:, None, :], (3, 5, 2)))


def test_dynamic_update_slice_of_a_dynamic_update_into_a_static_operand():
    """The start clamped to ``[0, 8 - update size]``, the update's size read at run time."""
    text = """func.func public @main(%x: tensor<8xf32>, %u: tensor<?xf32>, %i: tensor<i64>) -> tensor<8xf32> {
  %0 = stablehlo.dynamic_update_slice %x, %u, %i
    : (tensor<8xf32>, tensor<?xf32>, tensor<i64>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}"""
    x, u = np.zeros(8, np.float32), np.array([1.0, 2.0, 3.0], np.float32)
    for i, start in [(7, 5), (-2, 0), (2, 2)]:
        want = x.copy()
        want[start : start + 3] = u
        (got,) = run_text(text, x, u, np.array(i, np.int64))
        np.testing.assert_array_equal(got, want, err_msg=str(i))


def test_interior_padding_of_a_dynamic_dimension_is_refused():
    import converter
    from converter.errors import OpConversionError

    text = """func.func public @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.pad %x, %z, low = [0], high = [0], interior = [1]
    : (tensor<?xf32>, tensor<f32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}"""
    with pytest.raises(OpConversionError, match="interior padding of a dynamic dimension"):
        converter.from_stablehlo(text).to_onnx()


def test_convolution_float64_im2col_reshapes_keep_allowzero_in_its_domain():
    """ONNX Reshape's ``allowzero`` takes 0 or 1 only (onnxruntime reads any other value as 1
    and onnx.checker does not check it): the im2col reshapes of a float64 convolution emit
    one of the two."""
    x, k = rng.normal(size=(2, 3, 5)), rng.normal(size=(4, 3, 2))
    fn = lambda a, w: lax.conv(a, w, (1,), "VALID")  # noqa: E731
    model = converter.from_stablehlo(jax.jit(fn).lower(x, k).as_text()).to_onnx()
    allowzero = [
        a.i for n in model.graph.node if n.op_type == "Reshape" for a in n.attribute if a.name == "allowzero"
    ]
    assert len(allowzero) == 3 and set(allowzero) <= {0, 1}, allowzero


def test_iota_of_each_size_and_dtype_family():
    """StableHLO spec: iota counts along ``iota_dimension``. Up to 16 elements it is an
    initializer; a larger one is computed in the graph (a ``Range`` each: the bfloat16 one is
    computed in float32, then cast)."""
    import ml_dtypes
    import onnxruntime as ort

    import converter

    from .helpers import run_session

    types = "tensor<2x8xui8>, tensor<4x4xf32>, tensor<3x7xbf16>, tensor<3x6xf16>"
    text = f"""func.func public @main() -> ({types}) {{
  %0 = stablehlo.iota dim = 1 : tensor<2x8xui8>
  %1 = stablehlo.iota dim = 0 : tensor<4x4xf32>
  %2 = stablehlo.iota dim = 1 : tensor<3x7xbf16>
  %3 = stablehlo.iota dim = 0 : tensor<3x6xf16>
  return %0, %1, %2, %3 : {types}
}}"""
    module = converter.from_stablehlo(text)
    nodes = [n.op_type for n in module.to_onnx(optimize=False).graph.node]
    assert nodes.count("Range") == 2, nodes
    sess = ort.InferenceSession(module.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    got = run_session(sess, [])
    want = [
        np.broadcast_to(np.arange(8, dtype=np.uint8), (2, 8)),
        np.broadcast_to(np.arange(4, dtype=np.float32)[:, None], (4, 4)),
        np.broadcast_to(np.arange(7).astype(ml_dtypes.bfloat16), (3, 7)),
        np.broadcast_to(np.arange(3, dtype=np.float16)[:, None], (3, 6)),
    ]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.astype(np.float32), w.astype(np.float32))


def test_interior_padding_of_an_empty_or_single_element_dimension():
    """StableHLO spec: pad: a dimension of ``n`` elements with interior padding ``p`` has
    ``max(n + (n - 1) * p, 0)`` before its edges: none for an empty one (only the edge
    padding is left), the element alone for one of size 1."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_onnx_same(
        lambda a: (
            lax.pad(a[:0], np.float32(-1), [(1, 2, 3), (0, 0, 1)]),
            lax.pad(a[:1], np.float32(-1), [(0, 1, 4), (0, 0, 0)]),
        ),
        x,
    )


def _conv_text(x, w, out, window="{}", batch_groups=1):
    """A 1-D ``[b, f, 0]x[o, i, 0]->[b, f, 0]`` convolution with the given ``window``."""
    return f"""func.func public @main(%x: tensor<{x}>, %w: tensor<{w}>) -> tensor<{out}> {{
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0],
      window = {window} {{batch_group_count = {batch_groups} : i64, feature_group_count = 1 : i64}}
      : (tensor<{x}>, tensor<{w}>) -> tensor<{out}>
  return %0 : tensor<{out}>
}}"""


def test_convolution_without_window_attributes_takes_the_spec_defaults():
    """StableHLO spec ``convolution``: left-out ``window_strides``, ``padding``,
    ``lhs_dilation`` and ``rhs_dilation`` are 1, 0, 1 and 1 (jax.jit always writes them):
    the plain cross-correlation, computed in NumPy, through ``Conv`` (float32) and through
    im2col (float64)."""
    x, w = rng.normal(size=(1, 2, 5)), rng.normal(size=(3, 2, 2))
    want = np.einsum("cjt,oct->oj", np.stack([x[0, :, j : j + 2] for j in range(4)], 1), w)[None]
    for dtype, tol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        name = "f32" if dtype == np.float32 else "f64"
        text = _conv_text(f"1x2x5x{name}", f"3x2x2x{name}", f"1x3x4x{name}")
        (got,) = run_text(text, x.astype(dtype), w.astype(dtype))
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_conv_text("2x2x5xf32", "4x2x2xf32", "1x4x4xf32", batch_groups=2), "batch_group_count > 1"),
        (_conv_text("1x2x5xf32", "3x2x2xf32", "1x3x4xf32", "{reverse = [true]}"), "window_reversal"),
        (_conv_text("1x?x5xf64", "3x2x2xf64", "1x3x4xf64"), "dynamic channel count or kernel size"),
    ],
    ids=["batch_group_count", "window_reversal", "float64_dynamic_channels"],
)
def test_convolution_forms_onnx_cannot_express_are_refused(text, message):
    """``batch_group_count = 2``, ``window_reversal`` and a float64 (im2col) convolution
    whose channel count is only known at run time are refused, naming what is missing."""
    from converter.errors import OpConversionError

    with pytest.raises(OpConversionError, match=message):
        converter.from_stablehlo(text).to_onnx()


def test_deprecated_dot_of_a_vector_by_a_matrix():
    """The deprecated ``dot`` of a vector and a matrix (``a,ab->b``): ``v @ m``."""
    text = """func.func public @main(%v: tensor<3xf32>, %m: tensor<3x2xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.dot"(%v, %m) : (tensor<3xf32>, tensor<3x2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}"""
    v, m = np.array([1.0, -2.0, 3.0], np.float32), np.arange(6, dtype=np.float32).reshape(3, 2)
    (got,) = run_text(text, v, m)
    np.testing.assert_array_equal(got, v @ m)


def test_dot_general_leading_batch_with_more_lhs_free_dimensions():
    """A leading batch dimension and two lhs free dimensions (``[b, x, m, k] x [b, k, n]``)
    is not ``MatMul``'s pattern (its broadcasting would pair ``b`` with ``x``): the result
    ``[b, x, m, n]`` as ``einsum``'s."""
    a = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    b = rng.normal(size=(2, 5, 6)).astype(np.float32)
    got, _ = run_onnx(lambda a, b: lax.dot_general(a, b, (((3,), (1,)), ((0,), (0,)))), a, b)
    np.testing.assert_allclose(got[0], np.einsum("bxmk,bkn->bxmn", a, b), rtol=1e-5, atol=1e-5)


def test_convolution_float64_im2col_over_no_input_channels_is_zeros():
    """A float64 (im2col) convolution over zero input channels is zeros (StableHLO spec: a
    sum over no elements): the im2col reshapes' zero sizes are sizes (``allowzero=1``), not
    copies of their input's."""
    got, _ = run_onnx(lambda a, w: lax.conv(a, w, (1,), "VALID"), np.ones((1, 0, 5)), np.ones((4, 0, 2)))
    assert got[0].dtype == np.float64
    np.testing.assert_array_equal(got[0], np.zeros((1, 4, 4)))


@pytest.mark.parametrize("dtype", [np.int32, np.uint16])
def test_integer_convolution_over_no_input_channels_is_zeros(dtype):
    """An integer convolution (im2col in uint64) over zero input channels is zeros, as for
    float64 above (onnxruntime's uint64 ``MatMul`` fails on an empty contraction)."""
    x, w = np.ones((1, 0, 5), dtype), np.ones((4, 0, 2), dtype)
    got, _ = run_onnx(lambda a, k: lax.conv_general_dilated(a, k, (1,), "VALID"), x, w)
    assert got[0].dtype == dtype
    np.testing.assert_array_equal(got[0], np.zeros((1, 4, 4), dtype))


def test_matrix_times_a_transposed_matrix_is_one_gemm_with_trans_b_1():
    """``x @ w.T`` is one ``Gemm`` reading ``w`` as it is with ``transB = 1`` (ONNX takes
    the flag as 0 or 1; onnx.checker does not check it), and a ``[m, k] x [k, n, p]``
    contraction (two rhs free dimensions) is no ``MatMul`` (its broadcasting would read
    ``k`` as a batch): both as NumPy computes them."""
    import onnxruntime as ort

    x, w = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(5, 4)).astype(np.float32)
    b = rng.normal(size=(4, 2, 6)).astype(np.float32)
    fn = lambda x, w, b: (x @ w.T, lax.dot_general(x, b, (((1,), (0,)), ((), ()))))  # noqa: E731
    model = converter.from_stablehlo(jax.jit(fn).lower(x, w, b).as_text()).to_onnx()
    gemm = [n for n in model.graph.node if n.op_type == "Gemm"]
    assert len(gemm) == 1 and {a.name: a.i for a in gemm[0].attribute} == {"transB": 1}
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), (x, w, b), strict=True)})
    np.testing.assert_allclose(got[0], x @ w.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], np.einsum("mk,knp->mnp", x, b), rtol=1e-5, atol=1e-5)
