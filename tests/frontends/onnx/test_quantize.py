"""Rules of frontends/onnx/ops/quantize.py against onnxruntime (edge cases ONNX's node tests
miss): exact integer equality."""

import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(__file__))
from onnx import helper  # noqa: E402
from onnx_oracle import check_node, check_nodes  # noqa: E402


def test_dynamic_quantize_linear_of_zeros_has_scale_one():
    """An all-zero activation (a ReLU output, padding) has range 0: onnxruntime gives scale 1
    and zero point 0, not 0 / 255 (the quantized values were x / 0)."""
    check_node(
        "DynamicQuantizeLinear", {"x": np.zeros((2, 3), np.float32)}, n_out=3, opset=13, rtol=0, atol=0
    )


def test_qlinear_conv_with_per_channel_weight_scales():
    """QLinearConv with one weight scale per output channel (3 of them, the output 4 wide):
    each scale multiplies its own channel."""
    r = np.random.default_rng(4)
    inputs = {
        "x": r.integers(0, 255, (1, 2, 4, 5)).astype(np.uint8),
        "xs": np.array(0.05, np.float32),
        "xz": np.array(128, np.uint8),
        "w": r.integers(-100, 100, (3, 2, 2, 2)).astype(np.int8),
        "ws": np.array([0.01, 0.02, 0.005], np.float32),
        "wz": np.zeros(3, np.int8),
        "ys": np.array(0.2, np.float32),
        "yz": np.array(100, np.uint8),
    }
    inputs["b"] = r.integers(-500, 500, 3).astype(np.int32)
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    nodes = [
        helper.make_node("QLinearConv", names, ["y"]),
        helper.make_node("QLinearConv", [*names, "b"], ["y_bias"]),
    ]
    check_nodes(nodes, inputs, static=tuple(n for n in inputs if n != "x"), atol=1)


def test_quantize_linear_per_axis_blocked_and_by_output_dtype():
    """QuantizeLinear-21: a scale and zero point per channel, per block of 2 along an axis (the
    last block short), the type from output_dtype when there is no zero point (float8
    saturating, or not: out of range becomes inf/NaN), uint8 when neither says."""
    r = np.random.default_rng(6)
    x = (r.standard_normal((2, 3, 5)) * 200).astype(np.float32)
    x[0, 0, :2] = [1e6, -1e6]  # beyond float8's range
    inputs = {
        "x": x,
        "s3": np.array([0.5, 2.0, 4.0], np.float32),
        "z3": np.array([-3, 0, 7], np.int8),
        "sb": (r.random((2, 3, 3)) + 0.5).astype(np.float32),
        "zb": r.integers(-5, 5, (2, 3, 3)).astype(np.int8),
        "s": np.array(3.0, np.float32),
    }
    e4m3 = onnx.TensorProto.FLOAT8E4M3FN
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s3", "z3"], ["per_axis"], axis=1),
        helper.make_node("QuantizeLinear", ["x", "sb", "zb"], ["blocked"], axis=-1, block_size=2),
        helper.make_node("QuantizeLinear", ["x", "s"], ["int8"], output_dtype=onnx.TensorProto.INT8),
        helper.make_node("QuantizeLinear", ["x", "s"], ["f8"], output_dtype=e4m3),
        helper.make_node("QuantizeLinear", ["x", "s"], ["f8_wrap"], output_dtype=e4m3, saturate=0),
        helper.make_node("QuantizeLinear", ["x", "s"], ["u8"]),
    ]
    check_nodes(nodes, inputs, opset=21, static=tuple(n for n in inputs if n != "x"), rtol=0, atol=0)


def test_qlinear_matmul_of_a_vector_with_a_one_element_scale_keeps_the_vector_shape():
    """QLinearMatMul of a 1-D ``a`` ``[K]`` with 1-element 1-D scales: the result is ``[N]``
    (a per-row ``a_scale`` reshape to ``[1, 1]`` would broadcast it to ``[1, N]``)."""
    r = np.random.default_rng(5)
    inputs = {
        "a": r.integers(0, 255, 4).astype(np.uint8),
        "a_s": np.array([0.05], np.float32),
        "a_z": np.array([120], np.uint8),
        "b": r.integers(0, 255, (4, 3)).astype(np.uint8),
        "b_s": np.array([0.02], np.float32),
        "b_z": np.array([130], np.uint8),
        "y_s": np.array([0.1], np.float32),
        "y_z": np.array([128], np.uint8),
    }
    check_node("QLinearMatMul", inputs, opset=13, static=tuple(n for n in inputs if n != "a"), atol=1)
