"""Rules of frontends/onnx/ops/quantize.py against onnxruntime (edge cases ONNX's node tests
miss): exact integer equality."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node  # noqa: E402


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
    check_node("QLinearConv", inputs, static=("xs", "xz", "w", "ws", "wz", "ys", "yz"), atol=1)
