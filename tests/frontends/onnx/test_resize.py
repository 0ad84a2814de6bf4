"""Rules of frontends/onnx/ops/resize.py against onnxruntime (edge cases ONNX's node tests miss)."""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from frontends.onnx import from_onnx

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node  # noqa: E402

X = np.random.default_rng(0).standard_normal((1, 1, 4, 5)).astype(np.float32)


def _resize_model(roi: np.ndarray, scales: np.ndarray, attrs: dict) -> onnx.ModelProto:
    """``Resize(x, roi, scales)`` with ``roi`` and ``scales`` as Constant nodes."""
    consts = [
        helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))
        for name, value in (("roi", roi), ("scales", scales))
    ]
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], **attrs)
    graph = helper.make_graph(
        [*consts, node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, X.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (1, 1, 1, 3))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_tf_crop_and_resize_to_length_one(mode):
    """An output length of 1 samples the roi's centre, ``0.5 * (start + end) * (L - 1)`` (the
    ``length_resized == 1`` branch of the Resize page's ``tf_crop_and_resize``)."""
    roi = np.array([0, 0, 0.2, 0.1, 1, 1, 0.7, 0.9], np.float32)
    scales = np.array([1, 1, 0.25, 0.6], np.float32)  # heights 4 -> 1, widths 5 -> 3
    model = _resize_model(roi, scales, {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize"})
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": X}
    )
    (got,) = from_onnx(model).to_jax()(X)
    assert want.shape == (1, 1, 1, 3)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


def test_sizes_keeping_the_aspect_ratio():
    """Resize-18 of the last two axes to ``sizes`` with ``keep_aspect_ratio_policy``
    ``not_smaller``: 4x5 into 7x7 takes the larger scale, 7/4, for both axes, so the output
    is 7x9 (the policy also decides the output shape)."""
    empty = np.zeros(0, np.float32)
    check_node(
        "Resize",
        {"x": X, "roi": empty, "scales": empty, "sizes": np.array([7, 7], np.int64)},
        {"mode": "linear", "keep_aspect_ratio_policy": "not_smaller", "axes": [2, 3]},
        static=("roi", "scales", "sizes"),
    )
