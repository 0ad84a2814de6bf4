"""Round trip a JAX function through StableHLO, the ONNX backend and onnxruntime."""

import jax
import numpy as np
import onnxruntime as ort

import converter
from tests.compare import assert_outputs_close


def run_onnx(fn, *args, opset=18):
    """``fn`` lowered by ``jax.jit``, converted to ONNX, run in onnxruntime; returns
    (onnxruntime outputs, ``jax.jit(fn)`` outputs) as lists of NumPy arrays."""
    module = converter.from_stablehlo(jax.jit(fn).lower(*args).as_text())
    model = module.to_onnx(opset=opset)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: np.asarray(a) for i, a in zip(sess.get_inputs(), args, strict=True)}
    got = sess.run(None, feeds)
    want = [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
    return got, want


def assert_onnx_same(fn, *args, rtol=1e-5, atol=1e-6):
    got, want = run_onnx(fn, *args)
    assert_outputs_close(got, want, rtol, atol)
