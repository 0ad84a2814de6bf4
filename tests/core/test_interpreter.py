"""``converter.interpreter``: what the walker itself evaluates for every backend (tuples) and
the constants it folds for the rules that need a static operand."""

from __future__ import annotations

import numpy as np
import pytest

import converter
from converter import mlir
from converter.errors import ConversionError
from converter.interpreter import Interpreter, fold_constant


def test_tuples_are_built_and_read_by_the_walker():
    """``tuple`` packs its operands, ``get_tuple_element`` reads one by index (the spec's
    ``get_tuple_element``), inside ``@main``."""
    text = """
func.func @main(%x: tensor<2xf32>, %y: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %t = stablehlo.tuple %x, %y : tuple<tensor<2xf32>, tensor<2xf32>>
  %a = stablehlo.get_tuple_element %t[1] : (tuple<tensor<2xf32>, tensor<2xf32>>) -> tensor<2xf32>
  %b = stablehlo.get_tuple_element %t[0] : (tuple<tensor<2xf32>, tensor<2xf32>>) -> tensor<2xf32>
  return %a, %b : tensor<2xf32>, tensor<2xf32>
}"""
    x, y = np.array([1, 2], np.float32), np.array([3, 4], np.float32)
    a, b = converter.from_stablehlo(text).to_jax()(x, y)
    np.testing.assert_array_equal(np.asarray(a), y)
    np.testing.assert_array_equal(np.asarray(b), x)
    walker = Interpreter(mlir.parse_module(text))  # a region takes one value per argument
    for args in ((x,), (x, y, y)):
        with pytest.raises(ConversionError, match=rf"^region expects 2 values, got {len(args)}$"):
            walker.run(*args)


def test_constants_fold_through_convert_reshape_and_broadcast():
    module = mlir.parse_module("""
func.func @main(%x: tensor<2x3xi32>) -> (tensor<2x3xi32>, tensor<3xi32>) {
  %c = stablehlo.constant dense<[1.5, 2.5, -3.5]> : tensor<3xf32>
  %i = stablehlo.convert %c : (tensor<3xf32>) -> tensor<3xi32>
  %r = stablehlo.reshape %i : (tensor<3xi32>) -> tensor<1x3xi32>
  %b = stablehlo.broadcast_in_dim %r, dims = [0, 1] : (tensor<1x3xi32>) -> tensor<2x3xi32>
  %s = stablehlo.add %x, %b : tensor<2x3xi32>
  %n = stablehlo.reshape %s : (tensor<2x3xi32>) -> tensor<6xi32>
  %k = stablehlo.slice %n [0:3] : (tensor<6xi32>) -> tensor<3xi32>
  return %s, %k : tensor<2x3xi32>, tensor<3xi32>
}""")
    ops = {o.name + str(i): o for i, o in enumerate(mlir.walk_ops(mlir.main_function(module)))}
    add = ops["stablehlo.add4"]
    folded = fold_constant(add.operands[1])
    assert folded.dtype == np.int32 and folded.tolist() == [[1, 2, -3], [1, 2, -3]]  # convert truncates
    assert fold_constant(ops["stablehlo.reshape2"].results[0]).shape == (1, 3)
    assert fold_constant(add.operands[0]) is None  # a block argument
    assert fold_constant(ops["stablehlo.slice6"].operands[0]) is None  # computed from one
