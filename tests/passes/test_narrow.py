"""``narrow_64bit``: 64-bit integers computed in 32 bits only where that is exact; every
other case refuses with :class:`NarrowingError` naming the op (or leaf) at fault."""

import dataclasses

import jax
import numpy as np
import pytest

import converter
from converter.errors import NarrowingError
from converter.module import Module
from converter.passes import NARROW_64BIT, run_passes
from converter.passes.narrow import narrow_64bit


def _narrow(text: str) -> Module:
    return run_passes(converter.from_stablehlo(text), [NARROW_64BIT])


def _refused(text: str, match: str) -> NarrowingError:
    with pytest.raises(NarrowingError, match=match) as e:
        _narrow(text)
    return e.value


POSITIONS = """
func.func @main(%ids: tensor<2x4xi64>) -> (tensor<2x4xi64>, tensor<2x4xi64>) {
  %i = stablehlo.iota dim = 0 : tensor<4xi64>
  %c = stablehlo.constant dense<7> : tensor<i64>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i64>) -> tensor<4xi64>
  %p = stablehlo.multiply %i, %b : tensor<4xi64>
  %q = stablehlo.broadcast_in_dim %p, dims = [1] : (tensor<4xi64>) -> tensor<2x4xi64>
  %z = stablehlo.constant dense<0> : tensor<2x4xi64>
  %m = stablehlo.compare GT, %ids, %z, SIGNED : (tensor<2x4xi64>, tensor<2x4xi64>) -> tensor<2x4xi1>
  %one = stablehlo.convert %m : (tensor<2x4xi1>) -> tensor<2x4xi64>
  %init = stablehlo.constant dense<0> : tensor<i64>
  %cs = "stablehlo.reduce_window"(%one, %init) <{window_dimensions = array<i64: 1, 4>,
      padding = dense<[[0, 0], [3, 0]]> : tensor<2x2xi64>}> ({
    ^bb0(%a: tensor<i64>, %e: tensor<i64>):
      %s = stablehlo.add %a, %e : tensor<i64>
      stablehlo.return %s : tensor<i64>
  }) : (tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %r = stablehlo.add %q, %cs : tensor<2x4xi64>
  return %ids, %r : tensor<2x4xi64>, tensor<2x4xi64>
}
"""


def test_index_arithmetic_is_narrowed_and_computes_the_same():
    m = converter.from_stablehlo(POSITIONS)
    n = narrow_64bit(m)
    assert "i64>" not in n.text(debug_info=False).replace("array<i64", "").replace("tensor<2x2xi64>", "")
    assert [s.dtype for s in n.signature.inputs + n.signature.outputs] == ["int32"] * 3
    assert n.signature.narrowed == {"args[0]": "int64", "outputs[0]": "int64", "outputs[1]": "int64"}
    assert m.signature.inputs[0].dtype == "int64" and "i32" not in m.text()  # the input is not mutated
    ids = np.array([[3, 0, -2, 5], [1, 1, 0, 2]], np.int64)
    with jax.enable_x64(True):
        want = [np.asarray(v) for v in m.to_jax(x64=True)(ids)]
    with jax.enable_x64(False):
        got = [np.asarray(v) for v in n.to_jax()(ids)]
    assert all(g.dtype == np.int32 for g in got)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_a_constant_outside_int32_is_named():
    _refused(
        """
func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {
  %c = stablehlo.constant dense<8589934592> : tensor<3xi64>
  %y = stablehlo.add %x, %c : tensor<3xi64>
  return %y : tensor<3xi64>
}""",
        r"stablehlo.constant.*\[8589934592, 8589934592\], outside the 32-bit range",
    )


def test_arithmetic_on_an_input_that_may_overflow_is_named():
    e = _refused(
        """
func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {
  %c = stablehlo.constant dense<1> : tensor<3xi64>
  %y = stablehlo.add %x, %c : tensor<3xi64>
  return %y : tensor<3xi64>
}""",
        r"stablehlo.add: may compute values in \[-2147483647, 2147483648\]",
    )
    assert len(e.problems) == 1 and "to_jax(x64=True)" in str(e)


WRAP = """
func.func @main(%i: tensor<3xi64>) -> tensor<3xi64> {
  %z = stablehlo.constant dense<0> : tensor<3xi64>
  %n = stablehlo.constant dense<50> : tensor<3xi64>
  %neg = stablehlo.compare LT, %i, %z, SIGNED : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %w = stablehlo.add %i, %n : tensor<3xi64>
  %r = stablehlo.select %neg, %w, %i : tensor<3xi1>, tensor<3xi64>
  return %r : tensor<3xi64>
}"""


def test_a_guarded_wrap_is_exact_and_an_unguarded_one_is_not():
    """JAX's negative-index wrap ``select(i < 0, i + n, i)``: ``i + n`` overflows int32 only
    in lanes where ``select`` does not pick it."""
    n = _narrow(WRAP)
    ids = np.array([-3, 4, 2**31 - 1], np.int64)
    with jax.enable_x64(False):
        np.testing.assert_array_equal(np.asarray(n.to_jax()(ids)), [47, 4, 2**31 - 1])
    _refused(WRAP.replace("%neg, %w, %i", "%neg, %i, %w"), r"stablehlo.add: may compute values")


def test_while_carried_int64_and_custom_calls_are_refused():
    e = _refused(
        """
func.func @main(%x: tensor<i64>) -> tensor<i64> {
  %r = stablehlo.while(%c = %x) : tensor<i64>
  cond {
    %k = stablehlo.constant dense<5> : tensor<i64>
    %p = stablehlo.compare LT, %c, %k, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i64>
    %n = stablehlo.add %c, %one : tensor<i64>
    stablehlo.return %n : tensor<i64>
  }
  %y = stablehlo.custom_call @foo(%r) : (tensor<i64>) -> tensor<i64>
  return %y : tensor<i64>
}""",
        r"stablehlo.while: carries a 64-bit integer",
    )
    assert len(e.problems) == 2 and "stablehlo.custom_call: has no 32-bit narrowing rule" in e.problems[1]


def test_float64_is_not_narrowed():
    _refused(
        """
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %d = stablehlo.convert %x : (tensor<3xf32>) -> tensor<3xf64>
  %y = stablehlo.multiply %d, %d : tensor<3xf64>
  %z = stablehlo.convert %y : (tensor<3xf64>) -> tensor<3xf32>
  return %z : tensor<3xf32>
}""",
        r"stablehlo.convert: computes in float64 \(float32 is not within its tolerance\)",
    )


def test_parameters_and_declared_ranges():
    text = """
func.func @main(%w: tensor<3xi64>, %x: tensor<3xi64>) -> tensor<3xi64> {
  %y = stablehlo.add %w, %w : tensor<3xi64>
  %m = stablehlo.compare LT, %x, %y, SIGNED : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %r = stablehlo.select %m, %x, %y : tensor<3xi1>, tensor<3xi64>
  return %r : tensor<3xi64>
}"""
    m = converter.from_stablehlo(text)
    sig = m.signature  # args[0] becomes the buffer "w"
    w = dataclasses.replace(sig.inputs[0], name="w", kind="buffer")
    tree = {
        "kind": "tuple",
        "children": [{"kind": "tuple", "children": [{"kind": "leaf"}]}, sig.in_tree["children"][1]],
    }
    as_param = sig.replace(params=(w,), inputs=sig.inputs[1:], in_tree=tree)
    small = Module(m.mlir, as_param, {"w": np.array([1, -5, 9], np.int64)})
    n = narrow_64bit(small)
    assert n.params["w"].dtype == np.int32 and n.params["w"].tolist() == [1, -5, 9]
    big = Module(m.mlir, as_param, {"w": np.array([1, 2**40, 9], np.int64)})
    with pytest.raises(NarrowingError, match=r"w: its values \[1, 1099511627776\] do not fit"):
        narrow_64bit(big)
    ranged = Module(m.mlir, as_param.replace(dim_ranges={"b": [1, 2**40]}), small.params)
    with pytest.raises(NarrowingError, match=r"dimension 'b': its declared maximum 1099511627776"):
        narrow_64bit(ranged)


_MASK_SUM = """
func.func @main(%m: tensor<3x8xi1>) -> tensor<3xi64> {
  %a = stablehlo.convert %m : (tensor<3x8xi1>) -> tensor<3x8xi64>
  %c = stablehlo.constant dense<SCALE> : tensor<3x8xi64>
  %v = stablehlo.multiply %a, %c : tensor<3x8xi64>
  %z = stablehlo.constant dense<0> : tensor<i64>
  %s = stablehlo.reduce(%v init: %z) applies stablehlo.add across dimensions = [1]
      : (tensor<3x8xi64>, tensor<i64>) -> tensor<3xi64>
  return %s : tensor<3xi64>
}"""


def test_integer_sum_is_bounded_by_the_reduced_count():
    """A ``reduce`` add of values in ``[0, c]`` over 8 elements (the operand's reduced
    dimension, not the init's shape) lies in ``[0, 8c]``: narrowed for ``c = 2**27``,
    refused for ``c = 2**28`` (``8 * 2**28`` is past int32)."""
    n = _narrow(_MASK_SUM.replace("SCALE", str(2**27)))
    mask = np.random.default_rng(0).random((3, 8)) < 0.5
    mask[0] = True
    with jax.enable_x64(False):
        got = np.asarray(n.to_jax()(mask))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, mask.sum(1) * 2**27)
    _refused(
        _MASK_SUM.replace("SCALE", str(2**28)), r"stablehlo.reduce: may compute values in \[0, 2147483648\]"
    )


def test_integer_dot_general_is_bounded_by_its_contracted_size():
    """A dynamic cumsum lowers to a dot of 0/1 values with a triangular mask: k products."""
    text = """
func.func @main(%m: tensor<2x16xi1>) -> tensor<2x16xi64> {
  %a = stablehlo.convert %m : (tensor<2x16xi1>) -> tensor<2x16xi64>
  %i = stablehlo.iota dim = 0 : tensor<16x16xi64>
  %j = stablehlo.iota dim = 1 : tensor<16x16xi64>
  %le = stablehlo.compare LE, %i, %j, SIGNED : (tensor<16x16xi64>, tensor<16x16xi64>) -> tensor<16x16xi1>
  %t = stablehlo.convert %le : (tensor<16x16xi1>) -> tensor<16x16xi64>
  %c = stablehlo.dot_general %a, %t, contracting_dims = [1] x [0]
      : (tensor<2x16xi64>, tensor<16x16xi64>) -> tensor<2x16xi64>
  return %c : tensor<2x16xi64>
}"""
    n = _narrow(text)
    mask = np.random.default_rng(0).random((2, 16)) < 0.5
    with jax.enable_x64(False):
        got = np.asarray(n.to_jax()(mask))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.cumsum(mask, axis=1))
    _refused(
        """
func.func @main(%x: tensor<4xi64>) -> tensor<i64> {
  %d = stablehlo.dot_general %x, %x, contracting_dims = [0] x [0]
      : (tensor<4xi64>, tensor<4xi64>) -> tensor<i64>
  return %d : tensor<i64>
}""",
        r"stablehlo.dot_general: may compute values in \[-18446744065119617024, 18446744073709551616\]",
    )
