"""Rules of frontends/onnx/ops/signal.py against onnxruntime (cases ONNX's node tests miss)."""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from converter.frontends.onnx import from_onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node  # noqa: E402


def test_mel_weight_matrix_bins_with_bit_one_set():
    """MelWeightMatrix with 6 mel bins (``num_mel_bins + 2`` band edges; 6 has bit 1 set, unlike
    the bin counts of ONNX's node tests), its inputs Constant nodes."""
    scalars = {
        "bins": np.array(6, np.int64),
        "dft": np.array(16, np.int64),
        "rate": np.array(8000, np.int64),
        "lo": np.array(0.0, np.float32),
        "hi": np.array(4000.0, np.float32),
    }
    nodes = [
        helper.make_node("Constant", [], [n], value=numpy_helper.from_array(v, n)) for n, v in scalars.items()
    ]
    nodes.append(helper.make_node("MelWeightMatrix", list(scalars), ["y"]))
    out = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (9, 6))
    model = helper.make_model(
        helper.make_graph(nodes, "g", [], [out]), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {}
    )
    (got,) = from_onnx(model).to_jax()()
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-7)


def test_dft_zero_pads_to_a_longer_dft_length():
    """DFT-17 with ``dft_length`` (8) longer than the signal (5): the signal is zero-padded at
    the end (a shorter one is truncated), on a real and on a complex input."""
    r = np.random.default_rng(0)
    for last in (1, 2):
        x = r.standard_normal((2, 5, last)).astype(np.float32)
        inputs = {"x": x, "n": np.array(8, np.int64)}
        check_node("DFT", inputs, {"axis": 1}, opset=17, static=("n",), atol=1e-5)
