"""Rules of frontends/onnx/ops/sequence.py (sequences and optionals) against onnxruntime."""

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from converter import from_onnx

X = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)


def test_optional_get_element():
    """Optional then OptionalGetElement (and OptionalHasElement) on a tensor."""
    x = X[0]
    nodes = [
        helper.make_node("Optional", ["x"], ["o"]),
        helper.make_node("OptionalGetElement", ["o"], ["y"]),
        helper.make_node("OptionalHasElement", ["o"], ["h"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [
            helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, x.shape),
            helper.make_tensor_value_info("h", onnx.TensorProto.BOOL, []),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    got = from_onnx(model).to_jax()(x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w)
