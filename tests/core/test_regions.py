"""``converter.regions``: the region bodies every backend recognizes (reduce/scatter
combiners, sort comparators, select_and_scatter selects). A body recognized as something it
does not compute would give wrong numbers in every backend, so each near miss is here too."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

import converter
from converter import mlir, regions
from converter.regions import classify_sort_keys
from tests.compare import run_xla


def _regions(text: str) -> list:
    """The regions of the first op with regions in ``@main``."""
    module = mlir.parse_module(text)
    _regions.keep.append(module)  # the regions live as long as their module
    op = next(o for o in mlir.walk_ops(mlir.main_function(module)) if len(o.regions))
    return list(op.regions)


_regions.keep = []

REDUCE = """
module {
  sdy.mesh @mesh = <["x"=1]>
  func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<f32> {
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %r = stablehlo.reduce(%x init: %z) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
      reducer(%a: tensor<f32>, %b: tensor<f32>) {
        BODY
      }
    return %r : tensor<f32>
  }
}"""


@pytest.mark.parametrize(
    "body, kind",
    [
        ("%s = stablehlo.add %a, %b : tensor<f32>\n stablehlo.return %s : tensor<f32>", "add"),
        ("%s = stablehlo.add %b, %a : tensor<f32>\n stablehlo.return %s : tensor<f32>", "add"),
        ("%s = stablehlo.maximum %a, %b : tensor<f32>\n stablehlo.return %s : tensor<f32>", "max"),
        ("%s = stablehlo.multiply %a, %b : tensor<f32>\n stablehlo.return %s : tensor<f32>", "mul"),
        ("stablehlo.return %b : tensor<f32>", "replace"),  # scatter's overwrite
        ("stablehlo.return %a : tensor<f32>", None),  # keeps the operand: not an overwrite
        ("%s = stablehlo.add %a, %a : tensor<f32>\n stablehlo.return %s : tensor<f32>", None),  # 2a
        ("%s = stablehlo.subtract %a, %b : tensor<f32>\n stablehlo.return %s : tensor<f32>", None),
        ("%s = stablehlo.add %a, %b : tensor<f32>\n stablehlo.return %a : tensor<f32>", None),
        (
            "%s = stablehlo.add %a, %b : tensor<f32>\n %t = stablehlo.multiply %s, %s : tensor<f32>\n"
            " stablehlo.return %t : tensor<f32>",
            None,
        ),
        (  # JAX's sharding constraint on a collective's combiner result
            "%s = stablehlo.add %a, %b : tensor<f32>\n"
            " %c = sdy.sharding_constraint %s <@mesh, []> : tensor<f32>\n stablehlo.return %c : tensor<f32>",
            "add",
        ),
        (  # a constraint on another value than the combined one
            "%s = stablehlo.add %a, %b : tensor<f32>\n"
            " %c = sdy.sharding_constraint %a <@mesh, []> : tensor<f32>\n stablehlo.return %c : tensor<f32>",
            None,
        ),
    ],
)
def test_classify_combiner(body, kind):
    (region,) = _regions(REDUCE.replace("BODY", body))
    assert regions.classify_combiner(region) == kind


def test_a_two_operand_reducer_is_no_combiner():
    text = """
func.func @main(%x: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<f32>, tensor<i32>) {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %k = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.reduce(%x init: %z), (%i init: %k) across dimensions = [0]
      : (tensor<4xf32>, tensor<4xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<i32>, %d: tensor<i32>) {
      %s = stablehlo.add %a, %b : tensor<f32>
      %t = stablehlo.add %c, %d : tensor<i32>
      stablehlo.return %s, %t : tensor<f32>, tensor<i32>
    }
  return %r#0, %r#1 : tensor<f32>, tensor<i32>
}"""
    (region,) = _regions(text)
    assert regions.classify_combiner(region) is None


SORT = """
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>, %w: tensor<f32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %r:2 = "stablehlo.sort"(%x, %y) <{dimension = 0 : i64}> ({
    ^bb0(%a0: tensor<f32>, %b0: tensor<f32>, %a1: tensor<f32>, %b1: tensor<f32>):
      BODY
  }) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %r#0 : tensor<4xf32>
}"""


def _cmp(name, direction, lhs, rhs, kind="FLOAT"):
    kind = f", {kind}" if kind else ""
    types = "(tensor<f32>, tensor<f32>) -> tensor<i1>"
    return f"%{name} = stablehlo.compare {direction}, %{lhs}, %{rhs}{kind} : {types}"


_RET = "stablehlo.return %r : tensor<i1>"
_LEX = "\n".join(
    [
        _cmp("lt0", "LT", "a0", "b0"),
        _cmp("eq0", "EQ", "a0", "b0"),
        _cmp("lt1", "GT", "a1", "b1", "TOTALORDER"),
        "%t = stablehlo.and %eq0, %lt1 : tensor<i1>",
        "%r = stablehlo.or %lt0, %t : tensor<i1>",
        _RET,
    ]
)
_CANON = "\n".join(  # -0.0 as +0.0 through a select against a constant captured from outside
    [
        _cmp("za", "EQ", "a0", "c"),
        "%sa = stablehlo.select %za, %c, %a0 : tensor<i1>, tensor<f32>",
        _cmp("zb", "EQ", "b0", "c"),
        "%sb = stablehlo.select %zb, %c, %b0 : tensor<i1>, tensor<f32>",
        _cmp("r", "LT", "sa", "sb", "TOTALORDER"),
        _RET,
    ]
)


@pytest.mark.parametrize(
    "body, keys",
    [
        (_cmp("r", "LT", "a0", "b0") + "\n" + _RET, [(0, "ascending", "FLOAT")]),
        (_cmp("r", "GT", "a0", "b0") + "\n" + _RET, [(0, "descending", "FLOAT")]),
        (_cmp("r", "GT", "a0", "b0", None) + "\n" + _RET, [(0, "descending", None)]),  # no compare_type
        (_cmp("r", "LT", "b1", "a1", "SIGNED") + "\n" + _RET, [(1, "descending", "SIGNED")]),  # flipped
        (_LEX, [(0, "ascending", "FLOAT"), (1, "descending", "TOTALORDER")]),
        (  # the operands of or/and in the other order
            _LEX.replace("%eq0, %lt1", "%lt1, %eq0").replace("%lt0, %t", "%t, %lt0"),
            [(0, "ascending", "FLOAT"), (1, "descending", "TOTALORDER")],
        ),
        (_CANON, [(0, "ascending", "TOTALORDER")]),
        (_cmp("r", "LE", "a0", "b0") + "\n" + _RET, None),  # not a strict order
        (_cmp("r", "LT", "a0", "b1") + "\n" + _RET, None),  # two operands' elements
        (_cmp("r", "LT", "a0", "a0") + "\n" + _RET, None),
        (_cmp("r", "LT", "c", "b0") + "\n" + _RET, None),  # a side computed from no element
        (_cmp("r", "LT", "a0", "c") + "\n" + _RET, None),
        (_CANON.replace("%c, %a0", "%w, %a0").replace("%c, %b0", "%w, %b0"), None),  # a captured argument
        (  # a value reordered by an op other than compare/select
            "%na = stablehlo.negate %a0 : tensor<f32>\n%nb = stablehlo.negate %b0 : tensor<f32>\n"
            + _cmp("r", "LT", "na", "nb")
            + "\n"
            + _RET,
            None,
        ),
        (_CANON.replace("%c, %a0", "%c, %a1"), None),  # a select mixing two operands' elements
        (
            "%na = stablehlo.negate %a0 : tensor<f32>\n" + _CANON.replace("%c, %a0 :", "%na, %a0 :"),
            None,
        ),
        (_LEX.replace(_cmp("eq0", "EQ", "a0", "b0"), _cmp("eq0", "EQ", "a1", "b1")), None),  # tie on key 1
        (_LEX.replace("stablehlo.and", "stablehlo.or"), None),
        (_LEX.replace("stablehlo.or %lt0", "stablehlo.and %lt0"), None),
        (_LEX.replace(_cmp("lt1", "GT", "a1", "b1", "TOTALORDER"), _cmp("lt1", "GT", "a0", "b0")), None),
    ],
)
def test_classify_sort_keys(body, keys):
    (region,) = _regions(SORT.replace("BODY", body))
    got = regions.classify_sort_keys(region)
    assert (None if got is None else [(k.operand, k.direction, k.compare_type) for k in got]) == keys
    if got:  # the first key's value: computed from the left element (a block argument or a select)
        value, args = got[0].value, list(region.blocks[0].arguments)
        left = 2 * got[0].operand
        assert value == args[left] if value in args else value.owner.name == "stablehlo.select"
        assert value != args[left + 1]


_I1 = "(tensor<i1>, tensor<i1>) -> tensor<i1>"
I1_SORT = """
func.func @main(%x: tensor<4xi1>) -> tensor<4xi1> {
  %r = "stablehlo.sort"(%x) <{dimension = 0 : i64}> ({
    ^bb0(%a: tensor<i1>, %b: tensor<i1>):
      BODY
  }) : (tensor<4xi1>) -> tensor<4xi1>
  return %r : tensor<4xi1>
}"""


@pytest.mark.parametrize(
    "body, direction",
    [
        (
            f"%c = stablehlo.compare GE, %a, %b : {_I1}\nstablehlo.return %c : tensor<i1>",
            "GE",
        ),
        (
            f"%c = stablehlo.compare LT, %a, %b : {_I1}\nstablehlo.return %c : tensor<i1>",
            "LT",
        ),
        (
            f"%c = stablehlo.compare EQ, %a, %b : {_I1}\nstablehlo.return %c : tensor<i1>",
            None,
        ),
        (
            f"%c = stablehlo.compare GE, %b, %a : {_I1}\nstablehlo.return %c : tensor<i1>",
            None,
        ),
        (
            f"%c = stablehlo.compare GE, %a, %b : {_I1}\nstablehlo.return %a : tensor<i1>",
            None,
        ),
        ("%c = stablehlo.and %a, %b : tensor<i1>\nstablehlo.return %c : tensor<i1>", None),
        ("stablehlo.return %a : tensor<i1>", None),
    ],
)
def test_classify_select(body, direction):
    """A ``select_and_scatter`` select body (the same region shape as a one-operand sort's)."""
    (region,) = _regions(I1_SORT.replace("BODY", body))
    assert regions.classify_select(region) == direction


#: (comparator body on (%a, %b) and (%c, %d), keys it sorts by: (operand, order), ...)
_COMPARATORS = {
    "a < b": ("%r = stablehlo.compare LT, %a, %b, SIGNED", [(0, "ascending")]),
    "b > a": ("%r = stablehlo.compare GT, %b, %a, SIGNED", [(0, "ascending")]),
    "b < a": ("%r = stablehlo.compare LT, %b, %a, SIGNED", [(0, "descending")]),
    "d < c, then a < b": (
        """%lt = stablehlo.compare LT, %d, %c, SIGNED
    %eq = stablehlo.compare EQ, %d, %c, SIGNED
    %lt0 = stablehlo.compare LT, %a, %b, SIGNED
    %and = stablehlo.and %eq, %lt0
    %r = stablehlo.or %lt, %and""",
        [(1, "descending"), (0, "ascending")],
    ),
}


def _sort_text(body: str) -> str:
    body = "\n    ".join(
        f"{line.strip()} : tensor<i1>"
        if "stablehlo.and" in line or "stablehlo.or" in line
        else f"{line.strip()} : (tensor<i32>, tensor<i32>) -> tensor<i1>"
        for line in body.splitlines()
    )
    return f"""
func.func public @main(%x: tensor<6xi32>, %y: tensor<6xi32>) -> (tensor<6xi32>, tensor<6xi32>) {{
  %0:2 = "stablehlo.sort"(%x, %y) <{{dimension = 0 : i64, is_stable = true}}> ({{
  ^bb0(%a: tensor<i32>, %b: tensor<i32>, %c: tensor<i32>, %d: tensor<i32>):
    {body}
    stablehlo.return %r : tensor<i1>
  }}) : (tensor<6xi32>, tensor<6xi32>) -> (tensor<6xi32>, tensor<6xi32>)
  return %0#0, %0#1 : tensor<6xi32>, tensor<6xi32>
}}"""


@pytest.mark.parametrize("name", list(_COMPARATORS))
def test_sort_keys_read_the_left_element_on_either_side(name):
    """A key's compared value is the side computed from the operand's left element (block
    argument ``2k``), whichever side of the compare it is on; every backend then sorts as XLA
    does (ties of the most significant key kept in input order or broken by the next)."""
    body, keys = _COMPARATORS[name]
    module = converter.from_stablehlo(_sort_text(body))
    sort = next(op for op in module.mlir.body.operations[0].regions[0].blocks[0].operations)
    region = sort.operation.regions[0]
    found = classify_sort_keys(region)
    assert [(k.operand, k.direction) for k in found] == keys
    args = list(region.blocks[0].arguments)
    assert all(k.value == args[2 * k.operand] for k in found)
    if name == "a < b":  # the plain form: every sort test has it
        return
    x = np.array([3, 1, 2, 3, 0, 1], np.int32)
    y = np.array([5, 7, 7, 1, 5, 9], np.int32)
    want = run_xla(_sort_text(body), x, y)
    got_jax = [np.asarray(v) for v in module.to_jax()(x, y)]
    got_torch = [v.numpy() for v in module.to_torch()(torch.from_numpy(x), torch.from_numpy(y))]
    sess = ort.InferenceSession(module.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    got_onnx = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], (x, y), strict=True)))
    for got in (got_jax, got_torch, got_onnx):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


_COUNTED = """
func.func @main(%x: tensor<f32>, %s: tensor<i64>) -> (tensor<i64>, tensor<i64>) {
  %start = stablehlo.constant dense<2> : tensor<i64>
  %r = stablehlo.while(%i = %start) : tensor<i64>
  cond {
    %lim = stablehlo.constant dense<11> : tensor<i64>
    %p = stablehlo.compare LT, %i, %lim, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %step = stablehlo.constant dense<3> : tensor<i64>
    %n = stablehlo.add %i, %step : tensor<i64>
    stablehlo.return %n : tensor<i64>
  }
  %q = stablehlo.while(%i = %start) : tensor<i64>
  cond {
    %lim = stablehlo.constant dense<11> : tensor<i64>
    %p = stablehlo.compare LT, %i, %lim, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %n = stablehlo.add %i, %s : tensor<i64>
    stablehlo.return %n : tensor<i64>
  }
  return %r, %q : tensor<i64>, tensor<i64>
}"""


def test_static_trip_count_is_bounded_by_max_trips():
    """``i = 2; while i < 11: i += 3`` runs 3 times: counted up to ``max_trips`` (the bound
    included), None past it; a step that is no constant (an argument) is not counted."""
    import types

    from converter.interpreter import fold_constant

    module = mlir.parse_module(_COUNTED)
    _regions.keep.append(module)
    loops = [mlir.Op(o) for o in mlir.walk_ops(mlir.main_function(module)) if o.name == "stablehlo.while"]
    interp = types.SimpleNamespace(static_operand=lambda op, i: fold_constant(op.operands[i]))
    counted, unknown_step = loops
    assert regions.static_trip_count(interp, counted) == 3
    assert regions.static_trip_count(interp, counted, max_trips=3) == 3
    assert regions.static_trip_count(interp, counted, max_trips=2) is None
    assert regions.static_trip_count(interp, unknown_step) is None
