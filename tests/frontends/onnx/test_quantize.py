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
