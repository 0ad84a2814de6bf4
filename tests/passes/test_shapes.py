"""``converter.passes.shapes``: a shape-polymorphic module refined to concrete shapes."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import converter
from converter.errors import ConversionError, SignatureMismatchError
from converter.passes.shapes import bind_dims, module_is_dynamic, refine, specialize


def _poly() -> converter.Module:
    """``f(x: (b, 3), y: (b, 3)) = sum(x * y, axis=1)`` with a symbolic ``b``."""
    b = jax.export.symbolic_shape("b")[0]
    spec = jax.ShapeDtypeStruct((b, 3), jnp.float32)
    exp = jax.export.export(jax.jit(lambda x, y: jnp.sum(x * y, axis=1)))(spec, spec)
    return converter.from_jax(exp)


def test_refine_makes_every_shape_static():
    m = _poly()
    assert module_is_dynamic(m) and "get_dimension_size" in m.text()
    refined = refine(m.mlir, [(4, 3), (4, 3)])
    text = converter.mlir.module_text(refined, debug_info=False)
    assert "?" not in text and "shape_assertion" not in text and "tensor<4xf32>" in text


def test_specialize_by_name_or_order():
    m = _poly()
    names = [s.name for s in m.signature.inputs]
    by_name = specialize(m, {n: (2, 3) for n in names})
    by_order = m.specialize([(2, 3), (2, 3)])
    for s in (by_name, by_order):
        assert [i.shape for i in s.signature.inputs] == [(2, 3), (2, 3)]
        assert s.signature.outputs[0].shape == (2,) and not module_is_dynamic(s)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(np.asarray(by_name.to_jax()(x, x)), (x * x).sum(1), rtol=1e-6)
    assert specialize(by_name, [(2, 3), (2, 3)]) is by_name  # static modules come back as is


def test_specialize_names_unknown_missing_and_miscounted_shapes():
    m = _poly()
    a, b = (s.name for s in m.signature.inputs)
    unknown = rf"unknown inputs \['z'\], missing shapes for \[{re.escape(repr(b))}\]"
    with pytest.raises(ConversionError, match=unknown):
        specialize(m, {a: (2, 3), "z": (2, 3)})
    with pytest.raises(ConversionError, match=r"input_shapes: 2 inputs, got 1 shapes"):
        specialize(m, [(2, 3)])
    with pytest.raises(ConversionError, match=r"@main takes 2 arguments, got 1 shapes"):
        refine(m.mlir, [(2, 3)])


def test_shape_assertion_failure_is_reported():
    with pytest.raises(ConversionError, match="Expected value >= 1 for dimension variable 'b'"):
        refine(_poly().mlir, [(0, 3), (0, 3)])


def test_refinement_that_fails_in_mlir_is_a_conversion_error():
    """Sizes the module's ops cannot take (an ``add`` of ``?`` operands refined to 2 and 3)
    fail in MLIR's refinement pass; the failure comes back as a ConversionError naming the
    op, not as MLIR's own exception."""
    text = """
    func.func @main(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
      %0 = stablehlo.add %a, %b : tensor<?xf32>
      return %0 : tensor<?xf32>
    }"""
    m = converter.from_stablehlo(text)
    with pytest.raises(ConversionError, match=r"shapes \[\(2,\), \(3,\)\].*stablehlo.add"):
        refine(m.mlir, [(2,), (3,)])
    assert "tensor<2xf32>" in converter.mlir.module_text(refine(m.mlir, [(2,), (2,)]), debug_info=False)


def test_one_dimension_name_is_one_size():
    m = _poly()
    with pytest.raises(SignatureMismatchError, match="dimension 'b' is 2 in .* but 5 in"):
        bind_dims(m.signature.inputs, [(2, 3), (5, 3)])
    with pytest.raises(SignatureMismatchError, match="dimension 'b'"):
        m.to_jax()(np.ones((2, 3), np.float32), np.ones((5, 3), np.float32))
    with pytest.raises(ConversionError, match="cannot take shape"):
        refine(m.mlir, [(2, 4), (2, 4)])


def test_derived_dimensions_are_evaluated_and_solved():
    """Expressions of names (a torch derived ``Dim``, ``jax.export``'s ``2*s + 1``) are checked
    with their arithmetic, and a lone unknown name of a linear one is solved for."""
    from converter.signature import LeafSpec

    specs = [LeafSpec("x", ("s",), "float32"), LeafSpec("y", ("s + 3",), "float32"),
             LeafSpec("z", ("2*s - 1",), "float32"), LeafSpec("w", ("s // 2",), "float32")]  # fmt: skip
    assert bind_dims(specs, [(5,), (8,), (9,), (2,)]) == {"s": 5}
    for bad in ([(5,), (2,), (9,), (2,)], [(5,), (8,), (11,), (2,)], [(5,), (8,), (9,), (3,)]):
        with pytest.raises(SignatureMismatchError, match="which no sizes of its dimensions make"):
            bind_dims(specs, bad)
    # no plain "t": solved from "t + 3" (t = 4), then checked against "2*t - 1"
    solved = [LeafSpec("y", ("t + 3",), "float32"), LeafSpec("z", ("2*t - 1",), "float32")]
    assert bind_dims(solved, [(7,), (7,)]) == {"t": 4}
    with pytest.raises(SignatureMismatchError):
        bind_dims(solved, [(7,), (8,)])
    # solved from a coefficient other than 1 (t = (13 - 1) / 3), which 14 does not divide
    scaled = [LeafSpec("z", ("3*t + 1",), "float32"), LeafSpec("y", ("t + 3",), "float32")]
    assert bind_dims(scaled, [(13,), (7,)]) == {"t": 4}
    with pytest.raises(SignatureMismatchError, match=r"'3\*t \+ 1' of z is 14"):
        bind_dims(scaled, [(14,), (7,)])


def test_dimension_ranges_bound_each_named_size_inclusively():
    """``dim_ranges`` bounds hold at their ends; a None or missing bound is open (``-inf`` or
    ``inf`` in the message); a range of a dimension the specs do not name is skipped."""
    from converter.signature import LeafSpec

    specs = [LeafSpec("x", ("b", "s"), "float32")]
    ranges = {"absent": [7, 7], "b": [None, 4], "s": [3]}
    assert bind_dims(specs, [(4, 3)], ranges) == {"b": 4, "s": 3}
    assert bind_dims(specs, [(1, 10**6)], ranges) == {"b": 1, "s": 10**6}
    with pytest.raises(SignatureMismatchError, match=r"'b' is 5 in x, outside its range \[-inf, 4\]$"):
        bind_dims(specs, [(5, 3)], ranges)
    with pytest.raises(SignatureMismatchError, match=r"'s' is 2 in x, outside its range \[3, inf\]$"):
        bind_dims(specs, [(4, 2)], ranges)


def test_symbolic_shapes_name_each_dimension_and_bound_it():
    """A named dimension is one ``jax.export`` variable (other characters as ``_``, a
    leading digit prefixed), an expression stays one, an unnamed one is ``d<input>_<axis>``;
    the ranges are the scope's constraints."""
    from converter.passes.shapes import symbolic_shapes

    shapes = symbolic_shapes(
        [(3, None), ("batch-size", "2*n"), (4, 5), ("9x", "n")], {"n": [2, 8], "batch_size": [1, None]}
    )
    assert [tuple(str(d) for d in s) for s in shapes] == [
        ("3", "d0_1"),
        ("batch_size", "2*n"),
        ("4", "5"),
        ("d_9x", "n"),
    ]
    assert shapes[2] == (4, 5) and all(isinstance(d, int) for d in shapes[2])
    n = shapes[3][1]
    assert n >= 2 and n <= 8 and not n >= 9
    with pytest.raises(jax.errors.InconclusiveDimensionOperation):
        bool(shapes[1][0] >= 2)  # batch_size >= 1 only: no constraint beyond the default


DIMS = """
func.func @main(%x: tensor<?x3xf32>, %g: tensor<i64> {jax.global_constant = "b"})
    -> (tensor<2xi64>, tensor<i64>) {
  %d = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x3xf32>) -> tensor<i32>
  %d64 = stablehlo.convert %d : (tensor<i32>) -> tensor<i64>
  %two = stablehlo.constant dense<2> : tensor<i64>
  %m = stablehlo.multiply %d64, %two : tensor<i64>
  %five = stablehlo.constant dense<5> : tensor<i64>
  %k = stablehlo.add %m, %five : tensor<i64>
  %bc = stablehlo.broadcast_in_dim %k, dims = [] : (tensor<i64>) -> tensor<2xi64>
  %seven = stablehlo.constant dense<7> : tensor<i64>
  %eight = stablehlo.constant dense<8> : tensor<i64>
  %cs = stablehlo.add %seven, %eight : tensor<i64>
  %data = stablehlo.add %five, %cs : tensor<i64>
  %h = stablehlo.subtract %g, %k : tensor<i64>
  %out = stablehlo.add %data, %h : tensor<i64>
  return %bc, %out : tensor<2xi64>, tensor<i64>
}
"""


def test_dimension_values_follow_size_arithmetic_only():
    """``dimension_values``: a ``get_dimension_size`` result and a ``jax.global_constant``
    argument are sizes, and so is size arithmetic on sizes and constants (``convert``,
    ``multiply``, ``add``, ``subtract``); a constant counts only when every use computes a
    size. A size fed to an op outside that arithmetic (``broadcast_in_dim``), arithmetic of
    constants alone, and arithmetic reading a non-size value compute data."""
    from converter import mlir
    from converter.passes.shapes import dimension_values

    module = mlir.parse_module(DIMS)
    main = mlir.main_function(module)
    names = ["d", "d64", "two", "m", "five", "k", "bc", "seven", "eight", "cs", "data", "h", "out"]
    ops = [op for op in mlir.walk_ops(main) if op.results]
    assert len(ops) == len(names)
    values = dict(zip(names, (op.results[0] for op in ops), strict=True))
    dims = dimension_values(main)
    found = {n for n, v in values.items() if v in dims}
    assert found == {"d", "d64", "two", "m", "k", "h"}
    block = main.regions[0].blocks[0]
    assert block.arguments[1] in dims and block.arguments[0] not in dims
