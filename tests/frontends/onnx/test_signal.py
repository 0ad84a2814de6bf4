"""Rules of frontends/onnx/ops/signal.py against onnxruntime (cases ONNX's node tests miss)."""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from converter.frontends.onnx import from_onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node, single_node_model  # noqa: E402


def test_mel_weight_matrix_bins_with_bit_one_set():
    """MelWeightMatrix with 6 mel bins (``num_mel_bins + 2`` band edges; 6 has bit 1 set, unlike
    the bin counts of ONNX's node tests), its inputs Constant nodes."""
    model = _mel_model(6, 16, 8000, 0.0, 4000.0)
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


def _mel_model(bins, dft, rate, lo, hi, out_type=None):
    """A MelWeightMatrix node on Constant inputs (opset 17); ``out_type`` its
    ``output_datatype`` (None: the attribute left out, float32)."""
    scalars = {
        "bins": np.array(bins, np.int64),
        "dft": np.array(dft, np.int64),
        "rate": np.array(rate, np.int64),
        "lo": np.array(lo, np.float32),
        "hi": np.array(hi, np.float32),
    }
    nodes = [
        helper.make_node("Constant", [], [n], value=numpy_helper.from_array(v, n)) for n, v in scalars.items()
    ]
    attrs = {} if out_type is None else {"output_datatype": out_type}
    nodes.append(helper.make_node("MelWeightMatrix", list(scalars), ["y"], **attrs))
    out = helper.make_tensor_value_info("y", out_type or onnx.TensorProto.FLOAT, [None, None])
    model = helper.make_model(
        helper.make_graph(nodes, "g", [], [out]), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    return model


def test_mel_weight_matrix_odd_half_dft_length_and_repeated_edges():
    """MelWeightMatrix with ``dft_length`` 10 (``10 // 2 + 1 = 6`` rows; the node tests use
    lengths whose half is even) and 6 bins over 11 frequency bins, so some band edges repeat
    (a filter whose left edge is its center) and others do not; output_datatype float64."""
    model = _mel_model(6, 10, 8000, 0.0, 4000.0, onnx.TensorProto.DOUBLE)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {}
    )
    (got,) = from_onnx(model).to_jax()()
    got = np.asarray(got)
    assert got.shape == want.shape == (6, 6) and got.dtype == want.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_dft17_default_axis_truncates_to_shorter_dft_length():
    """DFT-17 without an ``axis`` attribute (default 1) and a ``dft_length`` (3) shorter than
    the signal (5): the signal is truncated to its first 3 samples, real and complex input."""
    r = np.random.default_rng(1)
    for last in (1, 2):
        x = r.standard_normal((2, 5, 3, last)).astype(np.float32)
        check_node("DFT", {"x": x, "n": np.array(3, np.int64)}, opset=17, static=("n",), atol=1e-5)


def test_dft20_without_axis_input_transforms_axis_minus_two():
    """DFT-20 given only the signal: ``axis`` defaults to -2, counted in the full rank (the
    axis just before the real/imaginary components), onesided output of a real signal."""
    x = np.random.default_rng(2).standard_normal((2, 3, 6, 1)).astype(np.float32)
    model = single_node_model("DFT", {"x": x}, {"onesided": 1}, opset=20)
    model.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT  # not inferred
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    (got,) = from_onnx(model).to_jax()(x)
    assert np.asarray(got).shape == want.shape == (2, 3, 4, 2)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_dft_inverse_scales_by_one_over_n():
    """DFT-17 with ``inverse=1``: the inverse transform, scaled by ``1/n`` (ONNX's node tests of
    it are xfailed for their float32 tolerance), against onnxruntime on a complex signal."""
    x = np.random.default_rng(3).standard_normal((2, 6, 2)).astype(np.float32)
    check_node("DFT", {"x": x}, {"axis": 1, "inverse": 1}, opset=17, atol=1e-5)
