"""Check one ONNX node through ``from_onnx`` → ``to_jax`` against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from converter.frontends.onnx import from_onnx
from onnx import helper


def single_node_model(
    op: str, inputs: dict, attrs: dict | None = None, n_out: int = 1, opset: int = 18, static: tuple = ()
) -> onnx.ModelProto:
    """A model of one ``op`` node; inputs named in ``static`` become initializers."""
    names = list(inputs)
    node = helper.make_node(op, names, [f"y{i}" for i in range(n_out)], name="n", **(attrs or {}))
    vis = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in inputs.items()
        if n not in static
    ]
    inits = [onnx.numpy_helper.from_array(inputs[n], n) for n in static]
    outs = [helper.make_tensor_value_info(f"y{i}", onnx.TensorProto.UNDEFINED, None) for i in range(n_out)]
    graph = helper.make_graph([node], "g", vis, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def check_node(
    op: str,
    inputs: dict,
    attrs: dict | None = None,
    *,
    n_out: int = 1,
    opset: int = 18,
    static: tuple = (),
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> None:
    """Convert and run; outputs equal onnxruntime's in dtype, shape and value."""
    model = single_node_model(op, inputs, attrs, n_out, opset, static)
    feeds = {n: v for n, v in inputs.items() if n not in static}
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )
    got = from_onnx(model).to_jax()(*feeds.values())
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        g = np.asarray(g)
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, g.shape, e.dtype, e.shape)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


def check_nodes(
    nodes: list,
    inputs: dict,
    *,
    opset: int = 18,
    static: tuple = (),
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> None:
    """:func:`check_node` for several nodes (``helper.make_node``) in one graph, converted and
    compiled once: every node output is a graph output, compared with onnxruntime's."""
    vis = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in inputs.items()
        if n not in static
    ]
    inits = [onnx.numpy_helper.from_array(inputs[n], n) for n in static]
    names = [o for node in nodes for o in node.output if o]
    outs = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in names]
    graph = helper.make_graph(nodes, "g", vis, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)
    feeds = {n: v for n, v in inputs.items() if n not in static}
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )
    got = from_onnx(model).to_jax()(*feeds.values())
    assert len(got) == len(expected) == len(names)
    for name, g, e in zip(names, got, expected, strict=True):
        g = np.asarray(g)
        if g.dtype.name.startswith("float8") and e.dtype == np.uint8:  # onnxruntime gives float8 bits
            g = g.view(np.uint8)
        assert g.dtype == e.dtype and g.shape == e.shape, (name, g.dtype, g.shape, e.dtype, e.shape)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=name)
