"""``from_stablehlo`` on multi-function modules: ``func.call`` and ``stablehlo.composite``
(which runs its ``decomposition`` function, per the spec's ``composite`` section) on every
backend, and modules with the ``quant`` dialect's uniform quantized types, which jaxlib's
MLIR bindings cannot represent: a typed error naming each quantized op and its line."""

from __future__ import annotations

import numpy as np
import pytest

import converter
from converter.errors import ConversionError, UnsupportedOpError
from tests.backends.spec_helpers import BACKENDS, run

CALLS = """
func.func private @scale(%a: tensor<3xf32>, %k: tensor<f32>) -> tensor<3xf32> {
  %kb = stablehlo.broadcast_in_dim %k, dims = [] : (tensor<f32>) -> tensor<3xf32>
  %r = stablehlo.multiply %a, %kb : tensor<3xf32>
  return %r : tensor<3xf32>
}
func.func private @affine(%a: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %two = stablehlo.constant dense<2.0> : tensor<f32>
  %s = func.call @scale(%a, %two) : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %one = stablehlo.constant dense<1.0> : tensor<3xf32>
  %t = stablehlo.add %s, %one : tensor<3xf32>
  return %t, %s : tensor<3xf32>, tensor<3xf32>
}
func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %0:2 = func.call @affine(%x) : (tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  %1:2 = func.call @affine(%0#0) : (tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return %1#0, %0#1 : tensor<3xf32>, tensor<3xf32>
}
"""

# the spec's composite example, with a decomposition that itself calls a function
COMPOSITE = """
func.func private @my_op(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %s = stablehlo.add %a, %b : tensor<f32>
  %r = func.call @square(%s) : (tensor<f32>) -> tensor<f32>
  return %r : tensor<f32>
}
func.func private @square(%a: tensor<f32>) -> tensor<f32> {
  %r = stablehlo.multiply %a, %a : tensor<f32>
  return %r : tensor<f32>
}
func.func @main(%x: tensor<f32>, %y: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.composite "my_namespace.my_op" %x, %y {
    composite_attributes = {my_attribute = "my_value"},
    decomposition = @my_op,
    version = 1 : i32
  } : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
"""

QUANTIZED = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.uniform_quantize %x : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.5:-1>>
  %1 = stablehlo.add %0, %0 : tensor<4x!quant.uniform<i8:f32, 0.5:-1>>
  %2 = stablehlo.add %1, %0 : tensor<4x!quant.uniform<i8:f32, 0.5:-1>>
  %3 = stablehlo.uniform_dequantize %2 : (tensor<4x!quant.uniform<i8:f32, 0.5:-1>>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_func_call_across_functions(backend):
    x = np.array([1.0, -2.0, 0.5], np.float32)
    first, scaled = run(CALLS, backend, x)
    np.testing.assert_array_equal(scaled, 2 * x)
    np.testing.assert_array_equal(first, 2 * (2 * x + 1) + 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_composite_runs_its_decomposition(backend):
    (out,) = run(COMPOSITE, backend, np.array(1.5, np.float32), np.array(2.0, np.float32))
    assert out.shape == () and out == np.float32(3.5) ** 2


def test_quantized_module_is_a_typed_error_naming_each_op():
    with pytest.raises(UnsupportedOpError) as info:
        converter.from_stablehlo(QUANTIZED, filename="q.mlir")
    err = info.value
    assert isinstance(err, ConversionError)
    found = {m.name: (m.count, m.location) for m in err.missing}
    assert found == {
        "stablehlo.uniform_quantize": (1, "q.mlir:2:8"),
        "stablehlo.add": (2, "q.mlir:3:8"),
        "stablehlo.uniform_dequantize": (1, "q.mlir:5:8"),
    }
    assert "quant dialect" in str(err)


def test_quantized_function_signature_is_named():
    text = QUANTIZED.replace(
        "%x: tensor<4xf32>) -> tensor<4xf32>",
        "%x: tensor<4x!quant.uniform<i8:f32, 0.5:-1>>) -> tensor<4xf32>",
    )
    with pytest.raises(UnsupportedOpError, match=r"func\.func \(x1, first at <input>:1:1\)"):
        converter.from_stablehlo(text)


def test_other_malformed_text_stays_a_parse_error():
    from converter.errors import ParseError

    with pytest.raises(ParseError, match="malformed"):
        converter.from_stablehlo(COMPOSITE.replace("stablehlo.add %a", "stablehlo.nope %a"))
