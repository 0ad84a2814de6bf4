"""Rules of frontends/onnx/ops/training.py (ai.onnx.preview.training) against ONNX's reference
implementation (onnxruntime has no training ops)."""

import numpy as np
import onnx
from onnx import helper

from converter import from_onnx


def test_adam_bias_correction_of_a_small_beta_power():
    """Adam (ai.onnx.preview.training) at step 5 with ``beta = 0.8``: the bias correction
    ``sqrt(1 - beta^t)`` of ``beta^t = 0.33``; against ONNX's reference implementation
    (onnxruntime has no training ops)."""
    from onnx.reference import ReferenceEvaluator

    r = np.random.default_rng(7)
    inputs = {"r": np.array(0.1, np.float32), "t": np.array(5, np.int64)}
    inputs.update({n: r.standard_normal(4).astype(np.float32) for n in ("x", "g", "v")})
    inputs["h"] = r.random(4).astype(np.float32)
    node = helper.make_node(
        "Adam", list(inputs), ["x_new", "v_new", "h_new"], domain="ai.onnx.preview.training", beta=0.8
    )
    vis = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in inputs.items()
    ]
    outs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, (4,)) for n in node.output]
    model = helper.make_model(
        helper.make_graph([node], "g", vis, outs),
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.preview.training", 1)],
    )
    model.ir_version = 8
    want = ReferenceEvaluator(model).run(None, inputs)
    got = from_onnx(model).to_jax()(*inputs.values())
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6)
