"""Rules of frontends/onnx/ops/reductions.py against onnxruntime."""

import os
import sys

import numpy as np
import pytest
from onnx import helper

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node, check_nodes  # noqa: E402

X = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2", "ReduceLogSumExp"])
def test_reduce_axes_input(op):
    check_node(op, {"x": X, "a": np.array([0, -1], np.int64)}, {"keepdims": 0}, static=("a",))


def test_reduce_axes_attribute_opset13():
    check_node("ReduceMean", {"x": X}, {"axes": [1]}, opset=13)


def test_softmax_opset11_flattens():
    check_node("Softmax", {"x": X}, {"axis": 1}, opset=11)


def test_topk_ties_and_cumsum():
    check_node(
        "TopK",
        {"x": np.array([[3, 1, 3, 2]], np.float32), "k": np.array([2], np.int64)},
        n_out=2,
        static=("k",),
    )
    check_node("CumSum", {"x": X, "a": np.array(1, np.int64)}, {"exclusive": 1, "reverse": 1}, static=("a",))


def test_topk_largest_of_unsigned_integers():
    """The largest of unsigned values sort on the bitwise complement (negation would wrap):
    ties keep their lower index first."""
    x = np.array([[3, 250, 7, 250, 0, 255]], np.uint8)
    check_node("TopK", {"x": x, "k": np.array([4], np.int64)}, n_out=2, static=("k",))


def test_opset_1_to_11_rules():
    """LogSoftmax/Hardmax before opset 13 (input coerced to 2-D at ``axis``), TopK-1 (``k``
    an attribute)."""
    x = np.random.default_rng(4).standard_normal((2, 3, 4)).astype(np.float32)
    check_node("LogSoftmax", {"x": x}, {"axis": 1}, opset=11)
    check_node("Hardmax", {"x": x}, {"axis": 2}, opset=11)
    check_node("TopK", {"x": x}, {"axis": 1, "k": 2}, n_out=2, opset=9)
    check_node("TopK", {"x": x}, {"k": 2}, n_out=2, opset=9)  # the default axis: the last


def test_reductions_of_empty_sets_and_a_negative_axis_of_a_vector():
    """Reducing an empty axis gives each reduction's identity (ReduceMax: -inf for floats,
    the type's minimum for integers; ReduceMin: +inf / the maximum; ReduceLogSumExp: -inf),
    in the output shape with or without the kept axis; ``axes=[-1]`` of a 1-D input is its
    only axis; ReduceLogSumExp of values whose ``exp`` overflows float32 stays finite."""
    mk = helper.make_node
    nodes = [
        mk("ReduceMax", ["xf", "ax"], ["maxf"], keepdims=0),
        mk("ReduceMin", ["xf", "ax"], ["minf"]),
        mk("ReduceMax", ["xi", "ax"], ["maxi"], keepdims=0),
        mk("ReduceMin", ["xi", "ax"], ["mini"], keepdims=0),
        mk("ReduceLogSumExp", ["xf", "ax"], ["lse"], keepdims=0),
        mk("ReduceSum", ["x1", "neg"], ["sum1"], keepdims=0),
        mk("ReduceLogSumExp", ["big", "neg"], ["lse_big"], keepdims=0),
    ]
    inputs = {
        "xf": np.zeros((2, 0, 3), np.float32),
        "xi": np.zeros((2, 0, 3), np.int32),
        "x1": np.arange(4, dtype=np.float32),
        "ax": np.array([1], np.int64),
        "neg": np.array([-1], np.int64),
        "big": np.array([[100.0, 99.0], [-100.0, -101.0]], np.float32),  # exp overflows float32
    }
    check_nodes(nodes, inputs, static=("ax", "neg"))
