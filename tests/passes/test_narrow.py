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


def test_the_message_lists_twenty_problems_and_counts_the_rest():
    """Every problem stays in ``problems``; the message lists the first 20 and counts the rest."""
    problems = [f"stablehlo.add #{i}: may overflow" for i in range(23)]
    e = NarrowingError(problems)
    assert e.problems == problems
    text = str(e)
    assert "(23 problem(s))" in text and "stablehlo.add #19: may overflow" in text
    assert "stablehlo.add #20" not in text and "  ... and 3 more" in text
    assert "... and" not in str(NarrowingError(problems[:20]))


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


LOOP_GUARD = """
func.func @main(%x: tensor<i64>) -> tensor<i1> {
  %z = stablehlo.constant dense<0> : tensor<i32>
  %f = stablehlo.constant dense<false> : tensor<i1>
  %r:3 = stablehlo.while(%i = %z, %v = %x, %pos = %f) : tensor<i32>, tensor<i64>, tensor<i1>
  cond {
    %k = stablehlo.constant dense<3> : tensor<i32>
    %p = stablehlo.compare LT, %i, %k, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    %big = stablehlo.constant dense<2147483647> : tensor<i64>
    %w = stablehlo.add %v, %big : tensor<i64>
    %five = stablehlo.constant dense<5> : tensor<i32>
    %g = stablehlo.compare LT, %i, %five, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %s = stablehlo.select %g, %w, %v : tensor<i1>, tensor<i64>
    %zero = stablehlo.constant dense<0> : tensor<i64>
    %q = stablehlo.compare GT, %s, %zero, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %j, %v, %q : tensor<i32>, tensor<i64>, tensor<i1>
  }
  return %r#2 : tensor<i1>
}"""


def test_a_guard_on_a_loop_counter_of_unknown_range_does_not_hide_a_branch():
    """``select(i < 5, x + (2**31 - 1), x)`` in a loop body: the counter ``i`` changes each
    iteration, so its range is unknown there, and ``i < 5`` may hold (it does: ``i`` runs
    0, 1, 2): the add is picked, and overflows int32 for ``x >= 1`` (``x + 2**31 - 1 > 0``
    would wrap to false), so the module is refused, not narrowed as if the branch were never
    taken."""
    m = converter.from_stablehlo(LOOP_GUARD)
    with jax.enable_x64(True):
        assert bool(m.to_jax(x64=True)(np.int64(1)))  # 2**31 > 0 in 64 bits
    _refused(LOOP_GUARD, r"stablehlo.add: may compute values in \[-1, 4294967294\]")


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


# --------------------------------------------------------------------------- the interval rules
#
# Each elementwise rule against the StableHLO spec's semantics: the range it gives is the exact
# hand-derived one, and holds every value the op computes over all operands in the given ranges.

_SPEC = {  # the spec's integer semantics, on Python ints
    "stablehlo.subtract": lambda x, y: x - y,
    "stablehlo.minimum": min,
    "stablehlo.maximum": max,
    "stablehlo.divide": lambda x, y: abs(x) // abs(y) * (1 if (x >= 0) == (y > 0) else -1),  # toward 0
    "stablehlo.remainder": lambda x, y: x - y * (abs(x) // abs(y) * (1 if (x >= 0) == (y > 0) else -1)),
    "stablehlo.negate": lambda x: -x,
    "stablehlo.abs": abs,
    "stablehlo.sign": lambda x: (x > 0) - (x < 0),
    "stablehlo.clamp": lambda lo, x, hi: min(max(x, lo), hi),
    "stablehlo.not": lambda x: ~x,
    "stablehlo.and": lambda x, y: x & y,
    "stablehlo.or": lambda x, y: x | y,
    "stablehlo.xor": lambda x, y: x ^ y,
    "stablehlo.shift_left": lambda x, y: x << y,
    "stablehlo.shift_right_arithmetic": lambda x, y: x >> y,
    "stablehlo.shift_right_logical": lambda x, y: x >> y,  # of non-negative values
}

RANGES = [
    ("stablehlo.subtract", [(-3, 5), (2, 4)], (-7, 3)),
    ("stablehlo.minimum", [(-3, 5), (2, 4)], (-3, 4)),
    ("stablehlo.divide", [(-7, 9), (2, 4)], (-3, 4)),
    ("stablehlo.divide", [(-7, 9), (-3, -2)], (-4, 3)),
    ("stablehlo.divide", [(-7, 9), (-1, 2)], None),  # a divisor of 0 may occur
    ("stablehlo.divide", [(-7, 9), (0, 4)], None),  # 0 at either end of the divisor's range
    ("stablehlo.divide", [(-7, 9), (-4, 0)], None),
    ("stablehlo.divide", [(-7, 9), (1, 1)], (-7, 9)),
    ("stablehlo.remainder", [(-7, 9), (2, 4)], (-3, 3)),
    ("stablehlo.remainder", [(0, 9), (-4, -2)], (0, 3)),  # the dividend's sign
    ("stablehlo.remainder", [(-9, 0), (2, 3)], (-2, 0)),
    ("stablehlo.remainder", [(1, 2), (5, 6)], (0, 2)),  # |x| < |y|: x itself
    ("stablehlo.remainder", [(-1, 9), (5, 6)], (-1, 5)),
    ("stablehlo.remainder", [(-7, 9), (0, 4)], None),
    ("stablehlo.remainder", [(-7, 9), (-4, 0)], None),
    ("stablehlo.negate", [(2, 5)], (-5, -2)),
    ("stablehlo.abs", [(-3, 5)], (0, 5)),
    ("stablehlo.abs", [(-7, -2)], (2, 7)),
    ("stablehlo.abs", [(2, 5)], (2, 5)),
    ("stablehlo.sign", [(-3, 5)], (-1, 1)),
    ("stablehlo.sign", [(0, 5)], (0, 1)),
    ("stablehlo.sign", [(-4, 0)], (-1, 0)),
    ("stablehlo.sign", [(2, 5)], (1, 1)),
    ("stablehlo.sign", [(-5, -2)], (-1, -1)),
    ("stablehlo.clamp", [(0, 2), (-10, 10), (5, 7)], (0, 7)),
    ("stablehlo.clamp", [(-1, 1), (3, 4), (5, 9)], (3, 4)),
    ("stablehlo.not", [(-3, 5)], (-6, 2)),
    ("stablehlo.and", [(0, 12), (0, 5)], (0, 5)),
    ("stablehlo.and", [(-1, 12), (0, 5)], None),  # a negative operand: any bits
    ("stablehlo.or", [(0, 12), (0, 5)], (0, 15)),
    ("stablehlo.xor", [(0, 4), (0, 12)], (0, 15)),
    ("stablehlo.xor", [(0, 4), (-2, 3)], None),
    ("stablehlo.shift_left", [(1, 3), (0, 2)], (1, 12)),
    ("stablehlo.shift_left", [(1, 3), (0, 31)], None),  # may leave 32 bits
    ("stablehlo.shift_left", [(0, 1), (0, 30)], (0, 2**30)),  # the largest shift it bounds
    ("stablehlo.shift_left", [(-1, 3), (0, 2)], None),
    ("stablehlo.shift_left", [(1, 3), (-1, 2)], None),
    ("stablehlo.shift_right_arithmetic", [(-8, 8), (0, 2)], (-8, 8)),
    ("stablehlo.shift_right_arithmetic", [(3, 8), (1, 2)], (0, 8)),
    ("stablehlo.shift_right_arithmetic", [(-8, 8), (-1, 2)], None),
    ("stablehlo.shift_right_logical", [(0, 9), (1, 2)], (0, 9)),
    ("stablehlo.shift_right_logical", [(0, 9), (0, 2)], (0, 9)),  # a shift by 0
    ("stablehlo.shift_right_logical", [(-1, 9), (1, 2)], None),  # -1 is all ones
    ("stablehlo.shift_right_logical", [(0, 9), (-1, 2)], None),
]


@pytest.mark.parametrize("name, operands, want", RANGES, ids=lambda v: v if isinstance(v, str) else None)
def test_elementwise_ranges_hold_what_the_spec_computes(name, operands, want):
    from itertools import product

    from converter.passes.narrow import _elementwise

    assert _elementwise(name, [*operands]) == want
    assert _elementwise(name, [None, *operands[1:]]) is None  # an unknown operand: unknown
    if want is not None:
        values = [_SPEC[name](*xs) for xs in product(*(range(lo, hi + 1) for lo, hi in operands))]
        assert want[0] <= min(values) and max(values) <= want[1]


def test_a_range_fits_the_32_bit_type_of_its_signedness():
    """An i64 value narrows to i32 when its range lies in [-2**31, 2**31 - 1], a ui64 one
    to ui32 when it lies in [0, 2**32 - 1] (both bounds included); an unknown range never.
    A union of ranges is unknown when one of them is, or when there are none."""
    from converter.passes.narrow import _fits, _union

    assert _fits((-(2**31), 2**31 - 1), "i64") and _fits((0, 2**32 - 1), "ui64")
    assert not _fits((-(2**31) - 1, 0), "i64") and not _fits((0, 2**31), "i64")
    assert not _fits((-1, 0), "ui64") and not _fits((0, 2**32), "ui64")
    assert not _fits(None, "i64") and not _fits(None, "ui64")
    assert _union([(1, 2), (-3, 0), (0, 5)]) == (-3, 5)
    assert _union([(1, 2), None]) is None and _union([]) is None


def test_type_ranges_and_refined_comparisons():
    from jaxlib.mlir import ir

    from converter import mlir
    from converter.passes.narrow import _refine, _type_range

    with mlir.context():
        ranges = {
            t: _type_range(ir.Type.parse(f"tensor<2x{t}>"))
            for t in ("i1", "i8", "ui8", "ui16", "i32", "ui32")
        }
        assert ranges == {
            "i1": (0, 1),
            "i8": (-128, 127),
            "ui8": (0, 255),
            "ui16": (0, 65535),
            "i32": (-(2**31), 2**31 - 1),
            "ui32": (0, 2**32 - 1),
        }
        assert [
            _type_range(ir.Type.parse(t)) for t in ("tensor<2xi64>", "tensor<2xf32>", "!stablehlo.token")
        ] == [None] * 3
    # x in [0, 10] where x <dir> y for some y in [3, 5] (and where not)
    assert [_refine((0, 10), d, (3, 5)) for d in ("LT", "LE", "GT", "GE", "EQ", "NE")] == [
        (0, 4),
        (0, 5),
        (4, 10),
        (3, 10),
        (3, 5),
        (0, 10),
    ]
    assert _refine((0, 2), "EQ", (3, 5)) == "empty" and _refine((6, 9), "LE", (3, 5)) == "empty"
    assert _refine(None, "GE", (3, 5)) is None  # no upper bound: unknown


def _narrow_and_run(text: str, *args):
    """The narrowed module's int32 results and the source's int64 ones."""
    m = converter.from_stablehlo(text)
    n = narrow_64bit(m)
    with jax.enable_x64(True):
        want = [np.asarray(v) for v in jax.tree.leaves(m.to_jax(x64=True)(*args))]
    with jax.enable_x64(False):
        got = [np.asarray(v) for v in jax.tree.leaves(n.to_jax()(*args))]
    return got, want


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(  # an empty constant holds no value: the concatenation is the iota's
            """%e = stablehlo.constant dense<> : tensor<0xi64>
  %i = stablehlo.iota dim = 0 : tensor<3xi64>
  %v = stablehlo.concatenate %e, %i, dim = 0 : (tensor<0xi64>, tensor<3xi64>) -> tensor<3xi64>""",
            id="empty-constant",
        ),
        pytest.param(
            """%i = stablehlo.iota dim = 0 : tensor<3xi64>
  %k = stablehlo.constant dense<5> : tensor<3xi64>
  %v, %u = stablehlo.optimization_barrier %i, %k : tensor<3xi64>, tensor<3xi64>""",
            id="optimization-barrier",
        ),
        pytest.param(
            """%i = stablehlo.iota dim = 0 : tensor<3xi64>
  %v = "stablehlo.sort"(%i) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%a: tensor<i64>, %b: tensor<i64>):
      %gt = stablehlo.compare GT, %a, %b, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %gt : tensor<i1>
  }) : (tensor<3xi64>) -> tensor<3xi64>""",
            id="sort",
        ),
        pytest.param(  # a scatter keeping the larger value: the values of both
            """%i = stablehlo.iota dim = 0 : tensor<3xi64>
  %idx = stablehlo.constant dense<[[1]]> : tensor<1x1xi32>
  %u = stablehlo.constant dense<[7]> : tensor<1xi64>
  %v = "stablehlo.scatter"(%i, %idx, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
      update_window_dims = [], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>}> ({
    ^bb0(%a: tensor<i64>, %b: tensor<i64>):
      %m = stablehlo.maximum %a, %b : tensor<i64>
      stablehlo.return %m : tensor<i64>
  }) : (tensor<3xi64>, tensor<1x1xi32>, tensor<1xi64>) -> tensor<3xi64>""",
            id="scatter-max",
        ),
        pytest.param(  # a convert to a narrower type that holds the values keeps their range
            """%i = stablehlo.iota dim = 0 : tensor<3xi64>
  %n = stablehlo.convert %i : (tensor<3xi64>) -> tensor<3xi8>
  %v = stablehlo.convert %n : (tensor<3xi8>) -> tensor<3xi64>""",
            id="convert-through-i8",
        ),
        pytest.param(  # a convert of non-negative values to ui64 keeps their range
            """%i = stablehlo.iota dim = 0 : tensor<3xi64>
  %u = stablehlo.convert %i : (tensor<3xi64>) -> tensor<3xui64>
  %v = stablehlo.convert %u : (tensor<3xui64>) -> tensor<3xi64>""",
            id="convert-through-ui64",
        ),
    ],
)
def test_bounded_values_through_ops_with_rules(body):
    """Each value ends at most 7, so ``v + (2**31 - 8)`` fits int32 exactly: narrowed, and
    the same numbers; a rule that lost the bound would refuse the ``add``."""
    text = f"""
func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {{
  {body}
  %big = stablehlo.constant dense<2147483640> : tensor<3xi64>
  %r = stablehlo.add %v, %big : tensor<3xi64>
  return %r : tensor<3xi64>
}}"""
    got, want = _narrow_and_run(text, np.zeros(3, np.int64))
    assert got[0].dtype == np.int32
    np.testing.assert_array_equal(got[0], want[0])


SUBTRACT = """
func.func @main(%x: tensor<4xi64>) -> tensor<4xi64> {
  %alo = stablehlo.constant dense<ALO> : tensor<4xi64>
  %ahi = stablehlo.constant dense<AHI> : tensor<4xi64>
  %blo = stablehlo.constant dense<BLO> : tensor<4xi64>
  %bhi = stablehlo.constant dense<BHI> : tensor<4xi64>
  %a = stablehlo.clamp %alo, %x, %ahi : tensor<4xi64>
  %b = stablehlo.clamp %blo, %x, %bhi : tensor<4xi64>
  %d = stablehlo.subtract %a, %b : tensor<4xi64>
  %big = stablehlo.constant dense<2147483640> : tensor<4xi64>
  %r = stablehlo.add %d, %big : tensor<4xi64>
  return %r : tensor<4xi64>
}"""


def _subtract(a: tuple[int, int], b: tuple[int, int]) -> str:
    text = SUBTRACT.replace("ALO", str(a[0])).replace("AHI", str(a[1]))
    return text.replace("BLO", str(b[0])).replace("BHI", str(b[1]))


def test_a_subtract_of_bounded_operands_is_bounded_by_their_difference():
    """``clamp(x, -5, 5) - clamp(x, 0, 10)`` lies in [-15, 5]: plus 2**31 - 8 it fits int32
    (narrowed, the same numbers as in int64); ``clamp(x, 0, 2**31 - 1) - clamp(x, -10, 0)``
    reaches 2**31 + 9, outside int32 though both operands are inside: the subtract is refused."""
    got, want = _narrow_and_run(_subtract((-5, 5), (0, 10)), np.array([-7, -5, 3, 12], np.int64))
    assert got[0].dtype == np.int32
    np.testing.assert_array_equal(got[0], want[0])
    assert want[0].tolist() == [2147483640 - 5, 2147483640 - 5, 2147483640, 2147483640 - 5]
    _refused(
        _subtract((0, 2**31 - 1), (-10, 0)), r"stablehlo.subtract: may compute values in \[0, 2147483657\]"
    )


def test_a_narrow_type_that_wraps_keeps_its_own_range():
    """``100 + 100`` in int8 wraps (to -56): its range is int8's, not [200, 200]; times 2**24
    that stays within int32 (a [200, 200] range would not, and be refused)."""
    text = """
func.func @main(%x: tensor<2xi8>) -> tensor<2xi64> {
  %y = stablehlo.add %x, %x : tensor<2xi8>
  %z = stablehlo.convert %y : (tensor<2xi8>) -> tensor<2xi64>
  %s = stablehlo.constant dense<16777216> : tensor<2xi64>
  %r = stablehlo.multiply %z, %s : tensor<2xi64>
  return %r : tensor<2xi64>
}"""
    got, want = _narrow_and_run(text, np.array([100, -3], np.int8))
    assert got[0].dtype == np.int32 and got[0].tolist() == want[0].tolist() == [-56 * 2**24, -6 * 2**24]
    _refused(
        text.replace(
            "%y = stablehlo.add %x, %x : tensor<2xi8>", "%y = stablehlo.constant dense<100> : tensor<2xi8>"
        ).replace("16777216", "33554432"),
        r"stablehlo.multiply: may compute values in \[3355443200, 3355443200\]",
    )


SCATTER_MUL = """
func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {
  %i = stablehlo.iota dim = 0 : tensor<3xi64>
  %idx = stablehlo.constant dense<[[1]]> : tensor<1x1xi32>
  %u = stablehlo.constant dense<[7]> : tensor<1xi64>
  %v = "stablehlo.scatter"(%i, %idx, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
      update_window_dims = [], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>}> ({
    ^bb0(%a: tensor<i64>, %b: tensor<i64>):
      %m = stablehlo.multiply %a, %b : tensor<i64>
      stablehlo.return %m : tensor<i64>
  }) : (tensor<3xi64>, tensor<1x1xi32>, tensor<1xi64>) -> tensor<3xi64>
  %one = stablehlo.constant dense<1> : tensor<3xi64>
  %r = stablehlo.add %v, %one : tensor<3xi64>
  return %r : tensor<3xi64>
}"""


@pytest.mark.parametrize(
    "text, words",
    [
        pytest.param(
            SCATTER_MUL, r"stablehlo.scatter: may compute an unbounded value", id="scatter-multiply"
        ),
        pytest.param(
            """
func.func @main(%x: tensor<3xi32>) -> tensor<3xui64> {
  %y = stablehlo.convert %x : (tensor<3xi32>) -> tensor<3xui64>
  return %y : tensor<3xui64>
}""",
            r"stablehlo.convert: may compute an unbounded value",  # -1 becomes 2**64 - 1
            id="negative-to-ui64",
        ),
        pytest.param(
            """
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %m = "stablehlo.map"(%x) <{dimensions = array<i64: 0>}> ({
    ^bb0(%a: tensor<f32>):
      %d = stablehlo.convert %a : (tensor<f32>) -> tensor<f64>
      %b = stablehlo.convert %d : (tensor<f64>) -> tensor<f32>
      stablehlo.return %b : tensor<f32>
  }) : (tensor<3xf32>) -> tensor<3xf32>
  return %m : tensor<3xf32>
}""",
            r"stablehlo.convert: computes in float64",  # found inside the region of an op without a rule
            id="nested-in-map",
        ),
    ],
)
def test_unbounded_values_are_refused(text, words):
    e = _refused(text, words)
    assert len(e.problems) == 1


def test_check_narrowable_and_open_dimensions():
    """``check_narrowable`` raises what ``narrow_64bit`` would and returns None otherwise; with
    a problem and a dimension without a maximum, the error says a declared one may help."""
    from converter.passes.narrow import check_narrowable

    good = converter.from_stablehlo(WRAP)
    assert check_narrowable(good) is None
    assert check_narrowable(Module(good.mlir, good.signature.replace(dim_ranges={"b": [1, None]}))) is None
    bad = converter.from_stablehlo(WRAP.replace("%neg, %w, %i", "%neg, %i, %w"))
    with pytest.raises(NarrowingError, match="stablehlo.add: may compute values") as e:
        check_narrowable(bad)
    assert len(e.value.problems) == 1
    opened = Module(bad.mlir, bad.signature.replace(dim_ranges={"b": [1, None], "s": [1, 8]}))
    with pytest.raises(NarrowingError) as e:
        check_narrowable(opened)
    assert len(e.value.problems) == 2 and e.value.problems[1].startswith(
        "dimension(s) 'b' have no declared maximum, so their sizes are taken up to 2**31 - 1"
    )
    with pytest.raises(NarrowingError) as e:
        check_narrowable(Module(bad.mlir, bad.signature.replace(dim_ranges={"s": [1, 8]})))
    assert len(e.value.problems) == 1


def test_a_dynamic_iota_spans_the_largest_dimension_size():
    """Without declared maxima a dynamic ``iota`` counts up to ``2**31 - 2``: adding 2 may
    overflow, and the error gives the range."""
    _refused(
        """
func.func @main(%x: tensor<?xi64>) -> tensor<?xi64> {
  %s = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?xi64>) -> tensor<i32>
  %r = stablehlo.reshape %s : (tensor<i32>) -> tensor<1xi32>
  %i = stablehlo.dynamic_iota %r, dim = 0 : (tensor<1xi32>) -> tensor<?xi64>
  %c = stablehlo.constant dense<2> : tensor<1xi64>
  %b = stablehlo.dynamic_broadcast_in_dim %c, %r, dims = [0] : (tensor<1xi64>, tensor<1xi32>) -> tensor<?xi64>
  %y = stablehlo.add %i, %b : tensor<?xi64>
  return %y : tensor<?xi64>
}""",
        r"stablehlo.add: may compute values in \[2, 2147483648\], outside",
    )


def test_a_scatter_add_adds_at_most_every_update():
    """``iota(3)`` scatter-added with two updates of 7: values in [0, 2 + 2 * 7]; ``+ 2**31 - 17``
    fits int32 exactly, ``+ 2**31 - 16`` may not (the error gives the range)."""
    text = """
func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {
  %i = stablehlo.iota dim = 0 : tensor<3xi64>
  %idx = stablehlo.constant dense<[[1], [2]]> : tensor<2x1xi32>
  %u = stablehlo.constant dense<[7, 7]> : tensor<2xi64>
  %v = "stablehlo.scatter"(%i, %idx, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
      update_window_dims = [], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>}> ({
    ^bb0(%a: tensor<i64>, %b: tensor<i64>):
      %s = stablehlo.add %a, %b : tensor<i64>
      stablehlo.return %s : tensor<i64>
  }) : (tensor<3xi64>, tensor<2x1xi32>, tensor<2xi64>) -> tensor<3xi64>
  %big = stablehlo.constant dense<2147483631> : tensor<3xi64>
  %r = stablehlo.add %v, %big : tensor<3xi64>
  return %r : tensor<3xi64>
}"""
    got, want = _narrow_and_run(text, np.zeros(3, np.int64))
    assert got[0].dtype == np.int32 and got[0].tolist() == want[0].tolist() == [
        2147483631,
        2147483639,
        2147483640,
    ]
    _refused(
        text.replace("2147483631", "2147483632"),
        r"stablehlo.add: may compute values in \[2147483632, 2147483648\]",
    )


def test_a_guard_bounds_a_clamp_with_scalar_limits():
    """``select(i < 0, clamp(-5, i, 100) + (2**31 - 48), i)``: where it is picked, the clamp
    is in [-5, -1] (its scalar limits read as they are, the guarded ``i`` refined), so the sum
    fits; unguarded (up to 100) it would not."""
    text = """
func.func @main(%i: tensor<3xi64>) -> tensor<3xi64> {
  %z = stablehlo.constant dense<0> : tensor<3xi64>
  %n = stablehlo.constant dense<2147483600> : tensor<3xi64>
  %lo = stablehlo.constant dense<-5> : tensor<i64>
  %hi = stablehlo.constant dense<100> : tensor<i64>
  %neg = stablehlo.compare LT, %i, %z, SIGNED : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %c = stablehlo.clamp %lo, %i, %hi : (tensor<i64>, tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
  %w = stablehlo.add %c, %n : tensor<3xi64>
  %r = stablehlo.select %neg, %w, %i : tensor<3xi1>, tensor<3xi64>
  return %r : tensor<3xi64>
}"""
    got, want = _narrow_and_run(text, np.array([-9, -2, 2**31 - 1], np.int64))
    assert got[0].dtype == np.int32 and got[0].tolist() == want[0].tolist() == [
        2147483595,
        2147483598,
        2**31 - 1,
    ]
    _refused(
        text.replace("%neg, %w, %i", "%neg, %i, %w"),
        r"stablehlo.add: may compute values in \[2147483595, 2147483700\]",
    )


def test_a_static_iota_counts_to_its_size_minus_one():
    """``iota`` of 2**31 elements ends at 2**31 - 1, the largest int32: narrowed (nothing is
    run, only analysed); of 2**31 + 1 elements it ends at 2**31: refused, giving the range."""
    text = """
func.func @main() -> tensor<SIZExi64> {
  %i = stablehlo.iota dim = 0 : tensor<SIZExi64>
  return %i : tensor<SIZExi64>
}"""
    n = _narrow(text.replace("SIZE", str(2**31)))
    assert "tensor<2147483648xi32>" in n.text() and "xi64>" not in n.text()
    _refused(text.replace("SIZE", str(2**31 + 1)), r"stablehlo.iota: may compute values in \[0, 2147483648\]")


def test_refined_ranges_at_their_limits_and_the_largest_dimension_size():
    """``_refine`` of an unknown range: one side bounded stays unknown, ``EQ`` takes the
    bound's range (no comparison empties it); a range reaching ``-2**63`` or up to ``2**64 - 1`` is kept, one
    past is unknown; ``EQ`` of a one-value range that meets the bound is that value.
    ``_dim_max`` is the largest declared maximum, ``2**31 - 1`` when one is open or none is
    declared, and a maximum past ``2**31 - 1`` is a problem. ``_leaf_range``: an input is
    the whole 32-bit range of its signedness, a parameter its values, an empty one ``(0, 0)``."""
    import types

    from converter.passes.narrow import I32, U32, _dim_max, _leaf_range, _refine
    from converter.signature import LeafSpec

    for d in ("LT", "LE", "GT", "GE", "NE"):
        assert _refine(None, d, (3, 5)) is None, d
    assert _refine(None, "EQ", (3, 5)) == (3, 5)  # equal to a value of the bound: bounded both ways
    assert _refine((-(2**63), 5), "LE", (0, 9)) == (-(2**63), 5)
    assert _refine((-(2**63) - 1, 5), "LE", (0, 9)) is None
    assert _refine((0, 2**64 - 1), "GE", (1, 2)) == (1, 2**64 - 1)
    assert _refine((0, 2**64), "GE", (1, 2)) is None
    assert _refine((3, 3), "EQ", (3, 5)) == (3, 3) and _refine((3, 3), "LT", (3, 5)) == (3, 3)
    assert _refine((3, 3), "GT", (3, 5)) == "empty"

    def dim_max(ranges):
        problems: list[str] = []
        module = types.SimpleNamespace(signature=types.SimpleNamespace(dim_ranges=ranges))
        return _dim_max(module, problems), problems

    assert dim_max({}) == (I32[1], [])
    assert dim_max({"a": [1, 8], "b": [2, 5]}) == (8, [])
    assert dim_max({"a": [1, None], "b": [2, 5]}) == (I32[1], [])
    assert dim_max({"a": [1, 2**31 - 1]}) == (2**31 - 1, [])
    too_large = "dimension 'a': its declared maximum 2147483648 does not fit in 32 bits"
    assert dim_max({"a": [1, 2**31]})[1] == [too_large]
    params = {"w": np.array([-4, 7], np.int64), "e": np.zeros(0, np.int64), "x": np.array([9], np.int64)}
    assert _leaf_range(LeafSpec("x", (1,), "int64"), params) == I32  # an input: checked at call time
    assert _leaf_range(LeafSpec("u", (1,), "uint64"), params) == U32
    assert _leaf_range(LeafSpec("w", (2,), "int64", "parameter"), params) == (-4, 7)
    assert _leaf_range(LeafSpec("e", (0,), "int64", "buffer"), params) == (0, 0)
    assert _leaf_range(LeafSpec("w", (2,), "int32", "parameter"), params) is None


CALL_AND_IF = """
func.func private @inc(%a: tensor<3xi64>) -> tensor<3xi64> {
  %one = stablehlo.constant dense<1> : tensor<3xi64>
  %r = stablehlo.add %a, %one : tensor<3xi64>
  return %r : tensor<3xi64>
}
func.func @main(%p: tensor<i1>) -> tensor<3xi64> {
  %i = stablehlo.iota dim = 0 : tensor<3xi64>
  %v = func.call @inc(%i) : (tensor<3xi64>) -> tensor<3xi64>
  %w = "stablehlo.if"(%p) ({
    stablehlo.return %v : tensor<3xi64>
  }, {
    %k = stablehlo.constant dense<K> : tensor<3xi64>
    stablehlo.return %k : tensor<3xi64>
  }) : (tensor<i1>) -> tensor<3xi64>
  %big = stablehlo.constant dense<BIG> : tensor<3xi64>
  %r = stablehlo.add %w, %big : tensor<3xi64>
  return %r : tensor<3xi64>
}"""


@pytest.mark.parametrize(
    "k, big, fits",
    [
        (7, 2**31 - 8, True),  # the else branch's 7 is the largest value
        (8, 2**31 - 8, False),
        (0, 2**31 - 4, True),  # the call's iota + 1 ends at 3
        (0, 2**31 - 3, False),
    ],
)
def test_a_call_and_an_if_give_the_union_of_what_they_return(k, big, fits):
    """``func.call``'s results have the range its callee computes for the call's operand
    ranges (``iota + 1``: [1, 3]); an ``if``'s result the union of its branches' ranges: the
    add after them fits int32 exactly up to the larger bound."""
    from converter.passes.narrow import check_narrowable

    m = converter.from_stablehlo(CALL_AND_IF.replace("BIG", str(big)).replace("K", str(k)))
    if fits:
        assert check_narrowable(m) is None
    else:
        with pytest.raises(NarrowingError, match=rf"stablehlo.add: may compute values in \[.*, {2**31}\]"):
            check_narrowable(m)
