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

Q = "!quant.uniform<i8:f32, 0.5:-1>"
R = "!quant.uniform<i8:f32, 0.25:2>"
QUANTIZED = f"""func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {{
  %0 = stablehlo.uniform_quantize %x : (tensor<4xf32>) -> tensor<4x{Q}>
  %1 = stablehlo.add %0, %0 : tensor<4x{Q}>
  %2 = stablehlo.add %1, %0 : tensor<4x{Q}>
  %3 = stablehlo.uniform_dequantize %2 : (tensor<4x{Q}>) -> tensor<4xf32>
  %4 = stablehlo.uniform_quantize %0 : (tensor<4x{Q}>) -> tensor<4x{R}>
  %5 = stablehlo.uniform_dequantize %4 : (tensor<4x{R}>) -> tensor<4xf32>
  return %3, %5 : tensor<4xf32>, tensor<4xf32>
}}"""

# per-axis quantization along dimension 1, and quantized values crossing @main's boundary
PER_AXIS = "!quant.uniform<i8:f32:1, {0.1:1, 0.2:0, 0.5:-3}>"
BOUNDARY = f"""func.func @main(%q: tensor<4x{Q}>, %y: tensor<2x3xf32>)
    -> (tensor<4xf32>, tensor<2x3x{PER_AXIS}>) {{
  %0 = stablehlo.uniform_dequantize %q : (tensor<4x{Q}>) -> tensor<4xf32>
  %1 = stablehlo.uniform_quantize %y : (tensor<2x3xf32>) -> tensor<2x3x{PER_AXIS}>
  return %0, %1 : tensor<4xf32>, tensor<2x3x{PER_AXIS}>
}}"""

SORTED = f"""func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.uniform_quantize %x : (tensor<4xf32>) -> tensor<4x{Q}>
  %1 = "stablehlo.sort"(%0) ({{
  ^bb0(%l: tensor<{Q}>, %r: tensor<{Q}>):
    %c = stablehlo.compare GT, %l, %r : (tensor<{Q}>, tensor<{Q}>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }}) {{dimension = 0 : i64}} : (tensor<4x{Q}>) -> tensor<4x{Q}>
  %2 = stablehlo.uniform_dequantize %1 : (tensor<4x{Q}>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}}"""


def quantize(x, scale, zero_point, axis=None):
    """The spec's ``quantize`` to i8, in the expressed type f32:
    ``round_nearest_even(x / scale + zero_point)`` clamped to [-128, 127] (per axis:
    ``scale``/``zero_point`` along ``axis``)."""
    scale, zero_point = np.asarray(scale, np.float32), np.asarray(zero_point, np.float32)
    if axis is not None:
        shape = [1] * np.ndim(x)
        shape[axis] = -1
        scale, zero_point = scale.reshape(shape), zero_point.reshape(shape)
    q = np.round(np.asarray(x, np.float32) / scale + zero_point)  # NumPy rounds half to even
    return np.clip(q, -128, 127).astype(np.int8)


def dequantize(q, scale, zero_point):
    """The spec's ``dequantize``, in f32: ``(q - zero_point) * scale``."""
    return (q.astype(np.float32) - np.float32(zero_point)) * np.float32(scale)


X4 = np.array([-1.0, 0.3, 1.6, 100.0], np.float32)


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


@pytest.mark.parametrize("backend", BACKENDS)
def test_quantized_add_and_requantize_follow_the_spec(backend):
    """``add`` on quantized tensors is ``quantize(dequantize(a) + dequantize(b))`` (the spec's
    ``dequantize_op_quantize``), saturating at the storage range; ``uniform_quantize`` of a
    quantized tensor requantizes to the new scale and zero point."""
    q = quantize(X4, 0.5, -1)
    once = quantize(dequantize(q, 0.5, -1) * 2, 0.5, -1)
    twice = quantize(dequantize(once, 0.5, -1) + dequantize(q, 0.5, -1), 0.5, -1)
    requantized = quantize(dequantize(q, 0.5, -1), 0.25, 2)
    summed, moved = run(QUANTIZED, backend, X4)
    np.testing.assert_array_equal(summed, dequantize(twice, 0.5, -1))
    np.testing.assert_array_equal(summed, [-3.0, 1.5, 4.5, 64.0])  # 128 saturates to 64
    np.testing.assert_array_equal(moved, dequantize(requantized, 0.25, 2))
    assert summed.dtype == np.float32


@pytest.mark.parametrize("backend", BACKENDS)
def test_quantized_boundary_is_the_storage_type_and_per_axis_scales_apply(backend):
    m = converter.from_stablehlo(BOUNDARY)
    assert [s.dtype for s in m.signature.inputs] == ["int8", "float32"]
    assert [s.dtype for s in m.signature.outputs] == ["float32", "int8"]
    q = np.array([-3, 0, 2, 127], np.int8)
    y = np.array([[0.15, -0.3, 2.0], [-20.0, 0.1, -0.75]], np.float32)
    deq, per_axis = run(BOUNDARY, backend, q, y)
    np.testing.assert_array_equal(deq, dequantize(q, 0.5, -1))
    np.testing.assert_array_equal(per_axis, quantize(y, [0.1, 0.2, 0.5], [1, 0, -3], axis=1))
    assert per_axis.dtype == np.int8


def test_quantized_op_without_a_lowering_is_a_typed_error_naming_it():
    with pytest.raises(UnsupportedOpError) as info:
        converter.from_stablehlo(SORTED, filename="q.mlir")
    found = {m.name: m.location for m in info.value.missing}
    assert found["stablehlo.sort"] == "q.mlir:3:8"
    assert isinstance(info.value, ConversionError) and "quant" in str(info.value)


def test_quantized_ops_named_when_the_dialect_is_missing():
    """Without jaxlib's quant dialect, the reader's error names every op on a line with a
    quantized type (the scan behind that error)."""
    from converter import mlir

    found = {m.name: (m.count, m.location) for m in mlir._quantized_ops(QUANTIZED, "q.mlir")}
    assert found == {
        "stablehlo.uniform_quantize": (2, "q.mlir:2:8"),
        "stablehlo.add": (2, "q.mlir:3:8"),
        "stablehlo.uniform_dequantize": (2, "q.mlir:5:8"),
    }


def test_other_malformed_text_stays_a_parse_error():
    from converter.errors import ParseError

    with pytest.raises(ParseError, match="malformed"):
        converter.from_stablehlo(COMPOSITE.replace("stablehlo.add %a", "stablehlo.nope %a"))


UNUSED_QUANTIZED = f"""func.func @main(%q: tensor<4x{Q}>, %x: tensor<4xf32>) -> tensor<4xf32> {{
  return %x : tensor<4xf32>
}}"""


def test_a_quantized_type_only_in_the_function_type_is_found_and_lowered():
    """A quantized argument nothing reads appears in no op's operands, only in ``@main``'s
    function type: it is still found (``func.func``, once, at its line) and lowered to its
    storage type, so the module's first input is ``int8``."""
    from converter import mlir
    from converter.passes.quant import lower_quantized, quantized_ops

    module = mlir.parse_module(UNUSED_QUANTIZED, filename="q.mlir")
    found = {m.name: (m.count, m.location) for m in quantized_ops(module, "q.mlir")}
    assert found == {"func.func": (1, "q.mlir:1:1")}
    lowered = lower_quantized(module, "q.mlir")
    assert lowered is not module and quantized_ops(lowered) == []
    m = converter.from_stablehlo(UNUSED_QUANTIZED)
    assert [s.dtype for s in m.signature.inputs] == ["int8", "float32"]
