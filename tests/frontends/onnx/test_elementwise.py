"""Rules of frontends/onnx/ops/elementwise.py against onnxruntime (shapes/dtypes beyond the
node suite's)."""

import os
import sys

import numpy as np
import onnxruntime as ort
import pytest
from converter.frontends.onnx import from_onnx

from converter.errors import OpConversionError

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node, single_node_model  # noqa: E402

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


def test_clip_6_bound_inputs_are_refused_unchecked():
    """Clip-6 has one input (its bounds are attributes): a node giving ``min``/``max`` as
    inputs, converted unchecked, is refused (as onnxruntime refuses it), never clipped by them."""
    x = np.linspace(-3, 3, 12, dtype=np.float32)
    inputs = {"x": x, "lo": np.float32(-0.5), "hi": np.float32(0.5)}
    model = single_node_model("Clip", inputs, opset=10, static=("lo", "hi"))
    with pytest.raises(Exception, match="input size 3"):
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(OpConversionError, match="Clip"):
        from_onnx(model, check=False).to_jax()(x)


_NARROW = {"int4": (22, -8, 7), "uint4": (21, 0, 15), "int2": (26, -2, 1), "uint2": (25, 0, 3)}


@pytest.mark.parametrize("opset", [21, 25])
@pytest.mark.parametrize("to", ["int4", "uint4", "int2", "uint2"])
def test_cast_to_narrow_integers(to, opset):
    """Cast-21..25 to 4-/2-bit integers. From integers the spec says: discard the higher bits
    and reinterpret (two's complement wrap). From floats: truncate toward zero, and an
    out-of-range value is undefined by the spec: this converter saturates it (NaN to 0), as
    onnxruntime does; never a wrapped value of the other sign."""
    import ml_dtypes
    from converter.frontends.onnx import from_onnx
    from onnx_oracle import single_node_model

    code, lo, hi = _NARROW[to]
    if opset < 25 and "2" in to:
        pytest.skip("INT2/UINT2 came with Cast-25")
    dtype = np.dtype(getattr(ml_dtypes, to))
    ints = np.arange(-20, 21, dtype=np.int32)
    floats = [-1e30, -9.7, lo - 1, lo - 0.5, -1.9, -0.5, 0.5, 1.9, hi + 0.9, hi + 1, 37.2, 1e30, np.nan]
    floats = np.array(floats, np.float32)
    for x, want in (
        (ints, (ints - lo) % (hi - lo + 1) + lo),
        (floats, np.nan_to_num(np.clip(np.trunc(floats), lo, hi), nan=0.0)),
    ):
        model = single_node_model("Cast", {"x": x}, {"to": code}, opset=opset)
        (got,) = from_onnx(model).to_jax()(x)
        got = np.asarray(got)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.astype(np.int64), want.astype(np.int64), err_msg=f"{x.dtype}")


def test_elu_without_alpha_takes_the_default():
    """Elu's ``alpha`` attribute omitted: the schema's default 1.0 (the node suite's default
    run has only the case with an explicit alpha)."""
    check_node("Elu", {"x": np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)})
