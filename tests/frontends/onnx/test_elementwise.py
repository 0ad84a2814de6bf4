"""Rules of frontends/onnx/ops/elementwise.py against onnxruntime (shapes/dtypes beyond the
node suite's)."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node  # noqa: E402

R = np.random.default_rng(0)
X = R.standard_normal((2, 3, 4)).astype(np.float32)


@pytest.mark.parametrize(
    "op", ["Abs", "Neg", "Exp", "Tanh", "Sigmoid", "Relu", "Floor", "Erf", "Softsign", "Sign"]
)
def test_unary(op):
    check_node(op, {"x": X})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"])
def test_binary_broadcast(op):
    check_node(op, {"a": np.abs(X) + 0.5, "b": (R.random((3, 1)) + 0.5).astype(np.float32)})


def test_integer_div_truncates():
    check_node("Div", {"a": np.array([-7, 7, -8], np.int32), "b": np.array([2, -2, 3], np.int32)})


def test_mod_sign_of_divisor():
    check_node("Mod", {"a": np.array([-7, 7, -8], np.int64), "b": np.array([3, -3, 5], np.int64)})


def test_clip_with_initializer_bounds():
    check_node("Clip", {"x": X, "lo": np.float32(-0.5), "hi": np.float32(0.5)}, static=("lo", "hi"))


def test_cast_float_to_int_truncates():
    check_node("Cast", {"x": np.array([-1.7, 1.7, 2.5], np.float32)}, {"to": 6})


def test_clip_6_attribute_bounds():
    """Clip-6 (the rule of opsets 7 to 10) takes its bounds as attributes (Clip-11 on: inputs)."""
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    check_node("Clip", {"x": x}, {"min": -1.5, "max": 2.0}, opset=10)
