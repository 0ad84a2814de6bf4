"""Round trip a JAX function through StableHLO, the ONNX backend and onnxruntime."""

import ctypes

import jax
import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from converter.backends.onnx import realpairs

import converter
from tests.compare import assert_outputs_close


def run_onnx(fn, *args, opset=18):
    """``fn`` lowered by ``jax.jit``, converted to ONNX, run in onnxruntime; returns
    (onnxruntime outputs, ``jax.jit(fn)`` outputs) as lists of NumPy arrays."""
    lowered = jax.jit(fn).lower(*args)  # converted, and compiled for the reference
    module = converter.from_stablehlo(lowered.as_text())
    model = module.to_onnx(opset=opset)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = run_session(sess, args)
    want = [np.asarray(x) for x in jax.tree_util.tree_leaves(lowered.compile()(*args))]
    return got, want


def run_text(text: str, *args) -> list[np.ndarray]:
    """StableHLO ``text`` converted to ONNX and run in onnxruntime on ``args``."""
    model = converter.from_stablehlo(text).to_onnx()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return run_session(sess, args)


def run_session(sess: ort.InferenceSession, args) -> list[np.ndarray]:
    """``sess`` run on ``args`` (NumPy arrays, complex ones fed as real pairs); outputs as
    NumPy, those the model carries as real pairs made complex again."""
    feeds = realpairs.session_feeds(sess, [ort_value(realpairs.to_pairs(np.asarray(a))) for a in args])
    return realpairs.session_outputs(sess, [numpy_of(v) for v in sess.run_with_ort_values(None, feeds)])


def ort_value(value: np.ndarray) -> ort.OrtValue:
    """An onnxruntime input (bfloat16 from its bits: NumPy has no bfloat16 of its own)."""
    if value.dtype == ml_dtypes.bfloat16:
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            value.view(np.uint16), onnx.TensorProto.BFLOAT16
        )
    return ort.OrtValue.ortvalue_from_numpy(value)


def numpy_of(value: ort.OrtValue) -> np.ndarray:
    """An onnxruntime output as NumPy; bfloat16 (which ``OrtValue.numpy`` refuses) read from
    its buffer as ``ml_dtypes.bfloat16``."""
    if value.data_type() != "tensor(bfloat16)":
        return value.numpy()
    shape = value.shape()
    raw = (ctypes.c_uint16 * int(np.prod(shape))).from_address(value.data_ptr())
    return np.frombuffer(raw, np.uint16).copy().view(ml_dtypes.bfloat16).reshape(shape)


def assert_onnx_same(fn, *args, rtol=1e-5, atol=1e-6):
    got, want = run_onnx(fn, *args)
    assert_outputs_close(got, want, rtol, atol)
