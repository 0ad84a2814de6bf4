"""Rules of frontends/onnx/ops/nn.py against onnxruntime."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node  # noqa: E402

R = np.random.default_rng(0)
X = R.standard_normal((1, 4, 9, 9)).astype(np.float32)


def test_grouped_strided_conv_same_upper():
    w = R.standard_normal((6, 2, 3, 3)).astype(np.float32)
    check_node(
        "Conv",
        {"x": X, "w": w},
        {"group": 2, "strides": [2, 2], "auto_pad": "SAME_UPPER"},
        static=("w",),
        rtol=1e-4,
        atol=1e-5,
    )


def test_conv_transpose_output_padding():
    w = R.standard_normal((4, 3, 3, 3)).astype(np.float32)
    check_node(
        "ConvTranspose",
        {"x": X, "w": w},
        {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
        static=("w",),
        rtol=1e-4,
        atol=1e-5,
    )


def test_pools_ceil_mode():
    check_node("MaxPool", {"x": X}, {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1})
    check_node(
        "AveragePool",
        {"x": X},
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    )


def test_batch_norm_inference():
    c = X.shape[1]
    stats = {n: (R.random(c) + 0.5).astype(np.float32) for n in ("s", "b", "m", "v")}
    check_node("BatchNormalization", {"x": X, **stats}, static=("s", "b", "m", "v"))
