"""The spec's shape computations and ``map`` on every backend (StableHLO spec, sections
``map``, ``dynamic_iota``, ``dynamic_reshape``, ``get_dimension_size``): one small module
per case, the expected values taken from the spec's examples and semantics."""

from __future__ import annotations

import numpy as np
import pytest

from converter.errors import ConversionError, OpConversionError
from tests.backends.spec_helpers import BACKENDS, run


def _main(args: str, result: str, body: str) -> str:
    return f"func.func @main({args}) -> {result} {{\n{body}\n}}"


MAP = _main(
    "%x: tensor<2x2xi64>, %y: tensor<2x2xi64>",
    "tensor<2x2xi64>",
    """  %0 = "stablehlo.map"(%x, %y) ({
    ^bb0(%a: tensor<i64>, %b: tensor<i64>):
      %m = stablehlo.multiply %a, %b : tensor<i64>
      stablehlo.return %m : tensor<i64>
  }) {dimensions = array<i64: 0, 1>} : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>""",
)

# compare, select, clamp, convert and a constant in the body: each element on its own
MAP_MIXED = _main(
    "%x: tensor<5xf32>",
    "tensor<5xi32>",
    """  %0 = "stablehlo.map"(%x) ({
    ^bb0(%a: tensor<f32>):
      %lo = stablehlo.constant dense<-1.0> : tensor<f32>
      %hi = stablehlo.constant dense<2.0> : tensor<f32>
      %c = stablehlo.clamp %lo, %a, %hi : tensor<f32>
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %neg = stablehlo.compare LT, %a, %z : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %n = stablehlo.negate %c : tensor<f32>
      %s = stablehlo.select %neg, %n, %c : tensor<i1>, tensor<f32>
      %i = stablehlo.convert %s : (tensor<f32>) -> tensor<i32>
      stablehlo.return %i : tensor<i32>
  }) {dimensions = array<i64: 0>} : (tensor<5xf32>) -> tensor<5xi32>
  return %0 : tensor<5xi32>""",
)

MAP_CONSTANT = _main(
    "%x: tensor<2x3xf32>",
    "tensor<2x3xf32>",
    """  %0 = "stablehlo.map"(%x) ({
    ^bb0(%a: tensor<f32>):
      %c = stablehlo.constant dense<7.0> : tensor<f32>
      stablehlo.return %c : tensor<f32>
  }) {dimensions = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>""",
)

# a body that is not elementwise: a reshape through tensor<1xf32>
MAP_RESHAPE = _main(
    "%x: tensor<3xf32>",
    "tensor<3xf32>",
    """  %0 = "stablehlo.map"(%x) ({
    ^bb0(%a: tensor<f32>):
      %r = stablehlo.reshape %a : (tensor<f32>) -> tensor<1xf32>
      %d = stablehlo.add %r, %r : tensor<1xf32>
      %s = stablehlo.reshape %d : (tensor<1xf32>) -> tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {dimensions = array<i64: 0>} : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>""",
)

DYNAMIC_IOTA = _main(
    "",
    "tensor<4x5xi64>",
    """  %s = stablehlo.constant dense<[4, 5]> : tensor<2xi64>
  %0 = stablehlo.dynamic_iota %s, dim = 0 : (tensor<2xi64>) -> tensor<4x5xi64>
  return %0 : tensor<4x5xi64>""",
)

DYNAMIC_RESHAPE = _main(
    "%x: tensor<2x3xi64>",
    "tensor<3x2xi64>",
    """  %s = stablehlo.constant dense<[3, 2]> : tensor<2xi64>
  %0 = stablehlo.dynamic_reshape %x, %s : (tensor<2x3xi64>, tensor<2xi64>) -> tensor<3x2xi64>
  return %0 : tensor<3x2xi64>""",
)

GET_DIMENSION_SIZE = _main(
    "%x: tensor<2x3xi64>",
    "tensor<i32>",
    """  %0 = stablehlo.get_dimension_size %x, dim = 1 : (tensor<2x3xi64>) -> tensor<i32>
  return %0 : tensor<i32>""",
)

# shape-polymorphic: the row count read with get_dimension_size feeds dynamic_iota and
# dynamic_reshape (each backend specializes or keeps the dimension symbolic)
DYNAMIC_MODULE = _main(
    "%x: tensor<?x3xi64>",
    "(tensor<?xi64>, tensor<?x3xi64>)",
    """  %n = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x3xi64>) -> tensor<i32>
  %n1 = stablehlo.reshape %n : (tensor<i32>) -> tensor<1xi32>
  %three = stablehlo.constant dense<3> : tensor<i32>
  %m = stablehlo.multiply %n, %three : tensor<i32>
  %m1 = stablehlo.reshape %m : (tensor<i32>) -> tensor<1xi32>
  %flat = stablehlo.dynamic_reshape %x, %m1 : (tensor<?x3xi64>, tensor<1xi32>) -> tensor<?xi64>
  %shape = stablehlo.concatenate %n1, %m1, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %c3 = stablehlo.constant dense<[3]> : tensor<1xi32>
  %s2 = stablehlo.concatenate %n1, %c3, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %io = stablehlo.dynamic_iota %s2, dim = 1 : (tensor<2xi32>) -> tensor<?x3xi64>
  %sum = stablehlo.add %x, %io : tensor<?x3xi64>
  return %flat, %sum : tensor<?xi64>, tensor<?x3xi64>""",
)

X23 = np.array([[1, 2, 3], [4, 5, 6]], np.int64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_spec_example(backend):
    x = np.array([[0, 1], [2, 3]], np.int64)
    y = np.array([[4, 5], [6, 7]], np.int64)
    (out,) = run(MAP, backend, x, y)
    np.testing.assert_array_equal(out, [[0, 5], [12, 21]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_body_per_element(backend):
    x = np.array([-3.5, -0.5, 0.5, 1.5, 9.0], np.float32)
    # |clamp(x, -1, 2)| truncated to an integer
    (out,) = run(MAP_MIXED, backend, x)
    np.testing.assert_array_equal(out, np.array([1, 0, 0, 1, 2], np.int32))
    assert out.dtype == np.int32


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_constant_body_fills_the_result_shape(backend):
    (out,) = run(MAP_CONSTANT, backend, np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(out, np.full((2, 3), 7.0, np.float32))


def test_map_any_body_on_jax():
    (out,) = run(MAP_RESHAPE, "jax", np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_array_equal(out, [2.0, 4.0, 6.0])


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_map_non_elementwise_body_is_refused(backend):
    with pytest.raises(OpConversionError, match=r"stablehlo\.map.*stablehlo\.reshape"):
        run(MAP_RESHAPE, backend, np.array([1.0, 2.0, 3.0], np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_iota_spec_example(backend):
    (out,) = run(DYNAMIC_IOTA, backend)
    np.testing.assert_array_equal(out, np.repeat(np.arange(4)[:, None], 5, axis=1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_reshape_spec_example(backend):
    (out,) = run(DYNAMIC_RESHAPE, backend, X23)
    np.testing.assert_array_equal(out, [[1, 2], [3, 4], [5, 6]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_get_dimension_size_spec_example(backend):
    (out,) = run(GET_DIMENSION_SIZE, backend, X23)
    assert out.dtype == np.int32 and out.shape == () and out == 3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rows", [2, 4])
def test_shape_computations_on_a_dynamic_module(backend, rows):
    x = np.arange(rows * 3, dtype=np.int64).reshape(rows, 3)
    flat, summed = run(DYNAMIC_MODULE, backend, x)
    np.testing.assert_array_equal(flat, x.reshape(-1))
    np.testing.assert_array_equal(summed, x + np.arange(3))


def test_jax_refuses_a_shape_only_a_traced_value_knows():
    """A result size that only an input's value decides: a typed error, not a wrong shape."""
    text = _main(
        "%s: tensor<1xi64>",
        "tensor<?xi64>",
        """  %0 = stablehlo.dynamic_iota %s, dim = 0 : (tensor<1xi64>) -> tensor<?xi64>
  return %0 : tensor<?xi64>""",
    )
    with pytest.raises(ConversionError, match="dynamic_iota"):
        run(text, "jax", np.array([3], np.int64))


_RESHAPE_TO_COMPUTED_SHAPE = _main(
    "%x: tensor<2x3xi64>",
    "tensor<3x2xi64>",
    """  %c = stablehlo.constant dense<[[SHAPE]]> : tensor<1x2xi64>
  %s = stablehlo.reshape %c : (tensor<1x2xi64>) -> tensor<2xi64>
  %0 = stablehlo.dynamic_reshape %x, %s : (tensor<2x3xi64>, tensor<2xi64>) -> tensor<3x2xi64>
  return %0 : tensor<3x2xi64>""",
)


@pytest.mark.parametrize("shape", ["4, 3", "2, 1", "1, 6"])
def test_jax_refuses_a_shape_operand_that_disagrees_with_the_result_type(shape):
    """Spec ``dynamic_reshape``: the shape operand must equal the result type's static
    dimensions. One the parser cannot see (a reshaped constant) is checked when the JAX
    backend runs it: every dimension larger, every one smaller, or some of each is refused,
    naming the op and the operand; the matching one reshapes."""
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    (out,) = run(_RESHAPE_TO_COMPUTED_SHAPE.replace("SHAPE", "3, 2"), "jax", x)
    np.testing.assert_array_equal(out, x.reshape(3, 2))
    with pytest.raises(
        OpConversionError, match=rf"stablehlo\.dynamic_reshape: ValueError: shape operand \[{shape}\]"
    ):
        run(_RESHAPE_TO_COMPUTED_SHAPE.replace("SHAPE", shape), "jax", x)


# --------------------------------------------------------------------------- further spec ops

BN_OPERAND = np.array([[[1, 2], [3, 4]], [[3, 4], [1, 2]]], np.float32)
T222, T2 = "tensor<2x2x2xf32>", "tensor<2xf32>"

BATCH_NORM_INFERENCE = _main(
    f"%x: {T222}, %scale: {T2}, %offset: {T2}, %mean: {T2}, %var: {T2}",
    T222,
    f"""  %0 = "stablehlo.batch_norm_inference"(%x, %scale, %offset, %mean, %var) {{
    epsilon = 0.0 : f32, feature_index = 2 : i64
  }} : ({T222}, {T2}, {T2}, {T2}, {T2}) -> {T222}
  return %0 : {T222}""",
)

BATCH_NORM_TRAINING = _main(
    f"%x: {T222}, %scale: {T2}, %offset: {T2}",
    f"({T222}, {T2}, {T2})",
    f"""  %0:3 = "stablehlo.batch_norm_training"(%x, %scale, %offset) {{
    epsilon = 0.0 : f32, feature_index = 2 : i64
  }} : ({T222}, {T2}, {T2}) -> ({T222}, {T2}, {T2})
  return %0#0, %0#1, %0#2 : {T222}, {T2}, {T2}""",
)

BATCH_NORM_GRAD = _main(
    f"%x: {T222}, %scale: {T2}, %mean: {T2}, %var: {T2}, %dy: {T222}",
    f"({T222}, {T2}, {T2})",
    f"""  %0:3 = "stablehlo.batch_norm_grad"(%x, %scale, %mean, %var, %dy) {{
    epsilon = 0.0 : f32, feature_index = 2 : i64
  }} : ({T222}, {T2}, {T2}, {T2}, {T222}) -> ({T222}, {T2}, {T2})
  return %0#0, %0#1, %0#2 : {T222}, {T2}, {T2}""",
)

ONES2 = np.ones(2, np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_inference_spec_example(backend):
    mean, var = np.array([2, 3], np.float32), ONES2
    (out,) = run(BATCH_NORM_INFERENCE, backend, BN_OPERAND, ONES2, ONES2, mean, var)
    np.testing.assert_allclose(out, [[[0, 0], [2, 2]], [[2, 2], [0, 0]]], atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_training_spec_example(backend):
    out, mean, var = run(BATCH_NORM_TRAINING, backend, BN_OPERAND, ONES2, ONES2)
    np.testing.assert_allclose(out, [[[0, 0], [2, 2]], [[2, 2], [0, 0]]], atol=1e-6)
    np.testing.assert_allclose(mean, [2, 3], atol=1e-6)
    np.testing.assert_allclose(var, [1, 1], atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_grad_spec_example(backend):
    dy = np.full((2, 2, 2), 0.1, np.float32)
    grad_x, grad_scale, grad_offset = run(
        BATCH_NORM_GRAD, backend, BN_OPERAND, ONES2, np.array([2, 3], np.float32), ONES2, dy
    )
    np.testing.assert_allclose(grad_x, np.zeros((2, 2, 2)), atol=1e-6)
    np.testing.assert_allclose(grad_scale, [0, 0], atol=1e-6)
    np.testing.assert_allclose(grad_offset, [0.4, 0.4], atol=1e-6)


def _cholesky(lower: bool) -> str:
    flag = "true" if lower else "false"
    return _main(
        "%a: tensor<2x3x3xf64>",
        "tensor<2x3x3xf64>",
        f"""  %0 = stablehlo.cholesky %a, lower = {flag} : tensor<2x3x3xf64>
  return %0 : tensor<2x3x3xf64>""",
    )


L = np.array([[1, 0, 0], [2, 4, 0], [3, 5, 6]], np.float64)
L2 = np.array([[2, 0, 0], [-1, 3, 0], [4, 1, 5]], np.float64)  # a second matrix of the batch


@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_spec_example_reads_only_its_triangle(backend, lower):
    """The spec's example (and a second matrix: a batch, whose conjugate transposes swap the
    last two axes) factored from one triangle, the other holding junk."""
    fac = np.stack([L, L2])
    a = fac @ np.swapaxes(fac, -1, -2)  # the spec's [[1, 2, 3], [2, 20, 26], [3, 26, 70]] first
    junk = np.triu(np.full((3, 3), 99.0), 1)  # the unread triangle
    a = a - np.triu(a, 1) + junk if lower else a - np.tril(a, -1) + junk.T
    (out,) = run(_cholesky(lower), backend, a)
    want = fac if lower else np.swapaxes(fac, -1, -2)
    keep = np.tril if lower else np.triu
    np.testing.assert_allclose(keep(out), want, atol=1e-12)


EINSUM = _main(
    "%a: tensor<2x3xf32>, %b: tensor<3x2xf32>",
    "(tensor<2x2xf32>, tensor<3x2xf32>)",
    """  %0 = "stablehlo.einsum"(%a, %b) {einsum_config = "ab,bc->ac"}
    : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  %1 = "stablehlo.unary_einsum"(%a) {einsum_config = ",ab->ba"} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0, %1 : tensor<2x2xf32>, tensor<3x2xf32>""",
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_deprecated_einsum_ops(backend):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(6, dtype=np.float32).reshape(3, 2) - 2
    mm, tr = run(EINSUM, backend, a, b)
    np.testing.assert_allclose(mm, a @ b)
    np.testing.assert_array_equal(tr, a.T)


DYNAMIC_BROADCAST = _main(
    "%x: tensor<1x3xi64>",
    "tensor<2x3x2xi64>",
    """  %s = stablehlo.constant dense<[2, 3, 2]> : tensor<3xi64>
  %0 = "stablehlo.dynamic_broadcast_in_dim"(%x, %s) {broadcast_dimensions = array<i64: 2, 1>}
    : (tensor<1x3xi64>, tensor<3xi64>) -> tensor<2x3x2xi64>
  return %0 : tensor<2x3x2xi64>""",
)

DYNAMIC_PAD = _main(
    "%x: tensor<2x3xi64>",
    "tensor<5x9xi64>",
    """  %v = stablehlo.constant dense<0> : tensor<i64>
  %lo = stablehlo.constant dense<[0, 1]> : tensor<2xi64>
  %hi = stablehlo.constant dense<[2, 1]> : tensor<2xi64>
  %in = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
  %0 = stablehlo.dynamic_pad %x, %v, %lo, %hi, %in
    : (tensor<2x3xi64>, tensor<i64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<5x9xi64>
  return %0 : tensor<5x9xi64>""",
)

REAL_DYNAMIC_SLICE = _main(
    "%x: tensor<2x4xi64>",
    "tensor<2x2xi64>",
    """  %s = stablehlo.constant dense<[0, 1]> : tensor<2xi64>
  %l = stablehlo.constant dense<[2, 4]> : tensor<2xi64>
  %k = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
  %0 = stablehlo.real_dynamic_slice %x, %s, %l, %k
    : (tensor<2x4xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>""",
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_broadcast_in_dim_spec_example(backend):
    (out,) = run(DYNAMIC_BROADCAST, backend, np.array([[1, 2, 3]], np.int64))
    np.testing.assert_array_equal(out, [[[1, 1], [2, 2], [3, 3]], [[1, 1], [2, 2], [3, 3]]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_pad_spec_example(backend):
    (out,) = run(DYNAMIC_PAD, backend, X23)
    want = [
        [0, 1, 0, 0, 2, 0, 0, 3, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 0],
        [0, 4, 0, 0, 5, 0, 0, 6, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 0],
    ]
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_real_dynamic_slice(backend):
    (out,) = run(REAL_DYNAMIC_SLICE, backend, np.arange(8, dtype=np.int64).reshape(2, 4))
    np.testing.assert_array_equal(out, [[1, 3], [5, 7]])


DOT = _main(
    "%m: tensor<2x3xi32>, %v: tensor<3xi32>, %w: tensor<3x2xi32>",
    "(tensor<2xi32>, tensor<i32>, tensor<2x2xi32>)",
    """  %0 = "stablehlo.dot"(%m, %v) : (tensor<2x3xi32>, tensor<3xi32>) -> tensor<2xi32>
  %1 = "stablehlo.dot"(%v, %v) : (tensor<3xi32>, tensor<3xi32>) -> tensor<i32>
  %2 = "stablehlo.dot"(%m, %w) : (tensor<2x3xi32>, tensor<3x2xi32>) -> tensor<2x2xi32>
  return %0, %1, %2 : tensor<2xi32>, tensor<i32>, tensor<2x2xi32>""",
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_deprecated_dot(backend):
    m = np.arange(6, dtype=np.int32).reshape(2, 3)
    v = np.array([1, -2, 3], np.int32)
    w = np.arange(6, dtype=np.int32).reshape(3, 2)
    mv, vv, mw = run(DOT, backend, m, v, w)
    np.testing.assert_array_equal(mv, m @ v)
    assert vv.shape == () and vv == v @ v
    np.testing.assert_array_equal(mw, m @ w)


GATHER_DN = (
    "#stablehlo.gather<offset_dims = [2, 3], collapsed_slice_dims = [0], start_index_map = [1, 0], "
    "index_vector_dim = 2>"
)
DYNAMIC_GATHER = _main(
    "%x: tensor<3x4x2xi64>, %i: tensor<2x3x2xi64>",
    "tensor<2x3x2x2xi64>",
    f"""  %s = stablehlo.constant dense<[1, 2, 2]> : tensor<3xi64>
  %0 = "stablehlo.dynamic_gather"(%x, %i, %s) {{dimension_numbers = {GATHER_DN}}}
    : (tensor<3x4x2xi64>, tensor<2x3x2xi64>, tensor<3xi64>) -> tensor<2x3x2x2xi64>
  return %0 : tensor<2x3x2x2xi64>""",
)


ONNX_GATHER_WINDOWS = pytest.mark.xfail(
    strict=True,
    raises=OpConversionError,
    reason="ONNX backend's gather: a window (slice size > 1) on an indexed dimension is not lowered",
)


@pytest.mark.parametrize("backend", ["jax", "torch", pytest.param("onnx", marks=ONNX_GATHER_WINDOWS)])
def test_dynamic_gather_is_gather_with_operand_slice_sizes(backend):
    """The spec's gather example with ``slice_sizes`` as an operand: index ``(i, j)`` picks
    ``operand[j, i:i+2, 0:2]`` (``start_index_map = [1, 0]``, dimension 0 collapsed)."""
    x = np.arange(1, 25, dtype=np.int64).reshape(3, 4, 2)
    idx = np.array([[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 2]]], np.int64)
    (out,) = run(DYNAMIC_GATHER, backend, x, idx)
    want = [[x[j, i : i + 2, 0:2] for i, j in row] for row in idx]
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(out[0, 2], [[13, 14], [15, 16]])


_SELECT_AND_SCATTER_NO_PADDING = """func.func @main(%x: tensor<4xT>, %s: tensor<2xT>) -> tensor<4xT> {
  %init = stablehlo.constant dense<ZERO> : tensor<T>
  %r = "stablehlo.select_and_scatter"(%x, %s, %init) ({
    ^bb0(%a: tensor<T>, %b: tensor<T>):
      %c = stablehlo.compare GE, %a, %b : (tensor<T>, tensor<T>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
  }, {
    ^bb0(%a: tensor<T>, %b: tensor<T>):
      %c = stablehlo.add %a, %b : tensor<T>
      stablehlo.return %c : tensor<T>
  }) {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>}
    : (tensor<4xT>, tensor<2xT>, tensor<T>) -> tensor<4xT>
  return %r : tensor<4xT>
}"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_select_and_scatter_without_padding(backend, dtype):
    """``padding`` is optional (spec: zero padding when absent): each source value lands on
    its window's maximum (a float max-pool gradient and the general form, on integers)."""
    floating = dtype == np.float32
    text = _SELECT_AND_SCATTER_NO_PADDING.replace("T>", "f32>" if floating else "i32>")
    text = text.replace("ZERO", "0.0" if floating else "0")
    x = np.array([1, 3, 2, 0], dtype)
    (got,) = run(text, backend, x, np.array([10, 20], dtype))
    np.testing.assert_array_equal(got, np.array([0, 10, 20, 0], dtype))
