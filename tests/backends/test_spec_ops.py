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
