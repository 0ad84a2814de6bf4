"""``converter.regions``: the sort comparators every backend recognizes, written with the left
element on either side of the compare, checked against XLA."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

import converter
from converter.regions import classify_sort_keys
from tests.compare import run_xla

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
