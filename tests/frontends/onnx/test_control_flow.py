"""Rules of frontends/onnx/ops/control_flow.py: Scan and Loop lowerings against onnxruntime."""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(__file__))
from frontends.onnx import from_onnx  # noqa: E402

F = TensorProto.FLOAT


def _run_both(model, *inputs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    expected = sess.run(None, dict(zip(names, inputs, strict=True)))
    got = from_onnx(model).to_jax()(*inputs)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-6)
    return from_onnx(model).text()


def test_scan_cumulative_sum_reverse():
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["s2"], ["y"])],
        "body",
        [helper.make_tensor_value_info("s", F, [2]), helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("s2", F, [2]), helper.make_tensor_value_info("y", F, [2])],
    )
    node = helper.make_node(
        "Scan", ["s0", "xs"], ["sf", "ys"], body=body, num_scan_inputs=1, scan_input_directions=[1]
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("s0", F, [2]), helper.make_tensor_value_info("xs", F, [5, 2])],
        [helper.make_tensor_value_info("sf", F, [2]), helper.make_tensor_value_info("ys", F, [5, 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    text = _run_both(model, np.zeros(2, np.float32), np.arange(10, dtype=np.float32).reshape(5, 2))
    assert "stablehlo.while" in text  # lax.scan lowers to a while loop


def test_loop_static_trip_count_scan_output():
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["v", "v"], ["sq"]),
            helper.make_node("Add", ["v", "one"], ["v2"]),
            helper.make_node("Identity", ["c"], ["c2"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", F, []),
        ],
        [
            helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v2", F, []),
            helper.make_tensor_value_info("sq", F, []),
        ],
    )
    node = helper.make_node("Loop", ["m", "", "v0"], ["vf", "sqs"], body=body)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("v0", F, [])],
        [helper.make_tensor_value_info("vf", F, []), helper.make_tensor_value_info("sqs", F, [4])],
        initializer=[
            onnx.numpy_helper.from_array(np.array(4, np.int64), "m"),
            onnx.numpy_helper.from_array(np.array(1, np.float32), "one"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    _run_both(model, np.array(1.5, np.float32))


def test_loop_with_a_runtime_trip_count_and_condition():
    """Loop whose trip count and first condition are graph inputs (a ``while_loop``): the
    body doubles ``v`` while it stays below 10; it stops at the trip count or the condition,
    whichever comes first."""
    body = helper.make_graph(
        [helper.make_node("Add", ["v", "v"], ["v2"]), helper.make_node("Less", ["v2", "ten"], ["c2"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", F, []),
        ],
        [
            helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v2", F, []),
        ],
    )
    node = helper.make_node("Loop", ["m", "c0", "v0"], ["vf"], body=body)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("m", TensorProto.INT64, []),
            helper.make_tensor_value_info("c0", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v0", F, []),
        ],
        [helper.make_tensor_value_info("vf", F, [])],
        initializer=[onnx.numpy_helper.from_array(np.array(10, np.float32), "ten")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    for m, c0 in ((100, True), (2, True), (100, False)):  # the condition, the count, no pass
        _run_both(model, np.array(m, np.int64), np.array(c0), np.array(1.5, np.float32))
