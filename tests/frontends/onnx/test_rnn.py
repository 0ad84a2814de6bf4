"""Rules of frontends/onnx/ops/rnn.py (RNN, GRU, LSTM) against onnxruntime (cases the node
suite's default run misses)."""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from converter import from_onnx

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node  # noqa: E402


def test_bidirectional_gru_takes_each_directions_activations():
    """A bidirectional GRU with its activations named per direction (forward: the defaults,
    reverse: HardSigmoid and Tanh): each direction's activation functions come from its own
    part of the list. Then an RNN's (LeakyRelu and Elu, of negative values too)."""
    r = np.random.default_rng(1)
    seq, batch, inp, hid = 3, 2, 4, 3
    inputs = {
        "x": r.standard_normal((seq, batch, inp)).astype(np.float32),
        "w": r.standard_normal((2, 3 * hid, inp)).astype(np.float32) * 0.5,
        "r": r.standard_normal((2, 3 * hid, hid)).astype(np.float32) * 0.5,
    }
    attrs = {
        "hidden_size": hid,
        "direction": "bidirectional",
        "activations": ["Sigmoid", "Tanh", "HardSigmoid", "Tanh"],
    }
    check_node("GRU", inputs, attrs, n_out=2, static=("w", "r"))
    # a bidirectional RNN: LeakyRelu forward, Elu in reverse, each with its own alpha
    inputs = {**inputs, "w": inputs["w"][:, :hid], "r": inputs["r"][:, :hid]}
    attrs = {**attrs, "activations": ["LeakyRelu", "Elu"], "activation_alpha": [0.1, 0.7]}
    check_node("RNN", inputs, attrs, n_out=2, static=("w", "r"))


def _gru_inputs(r, *, seq, batch, inp, hid, bias_scale):
    """One direction's GRU inputs: ``x``, weights ``w``/``r`` scaled by 0.5, bias ``b``."""
    return {
        "x": r.standard_normal((seq, batch, inp)).astype(np.float32),
        "w": (r.standard_normal((1, 3 * hid, inp)) * 0.5).astype(np.float32),
        "r": (r.standard_normal((1, 3 * hid, hid)) * 0.5).astype(np.float32),
        "b": (r.standard_normal((1, 6 * hid)) * bias_scale).astype(np.float32),
    }


@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru_with_bias_matches_onnxruntime(linear_before_reset):
    """A GRU with a bias ``B`` (``Wb`` then ``Rb``, ``3 * hidden`` each), the reset gate
    applied before or after the recurrent weights."""
    hid = 3
    inputs = _gru_inputs(np.random.default_rng(3), seq=3, batch=2, inp=4, hid=hid, bias_scale=1.0)
    attrs = {"hidden_size": hid, "linear_before_reset": linear_before_reset}
    check_node("GRU", inputs, attrs, n_out=2, static=("w", "r", "b"))


def _rnns(kinds: list[dict], x: np.ndarray, w: np.ndarray, r: np.ndarray) -> onnx.ModelProto:
    """One bidirectional RNN node per attribute dict of ``kinds``, all on ``x`` (outputs
    ``y0``, ``y1``, ...)."""
    seq, batch, _ = x.shape
    hid = w.shape[1]
    nodes = [
        helper.make_node("RNN", ["x", "w", "r"], [f"y{i}"], hidden_size=hid, direction="bidirectional", **k)
        for i, k in enumerate(kinds)
    ]
    outs = [
        helper.make_tensor_value_info(f"y{i}", onnx.TensorProto.FLOAT, [seq, 2, batch, hid])
        for i in range(len(kinds))
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        outs,
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(r, "r")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


_R = np.random.default_rng(2)
_X = (_R.standard_normal((3, 2, 4)) * 2).astype(np.float32)
_W = _R.standard_normal((2, 3, 4)).astype(np.float32)
_RW = (_R.standard_normal((2, 3, 3)) * 0.5).astype(np.float32)


def test_rnn_activations_with_given_alphas_and_betas():
    """The RNN family's other activation functions, forward and reverse in three
    bidirectional RNNs of one model, their alpha and beta given (consumed in order by the
    functions that take them): ThresholdedRelu and Affine, ScaledTanh and Softsign,
    Softplus and Relu."""
    kinds = [
        {
            "activations": ["ThresholdedRelu", "Affine"],
            "activation_alpha": [0.5, 0.7],
            "activation_beta": [0.2],
        },
        {"activations": ["ScaledTanh", "Softsign"], "activation_alpha": [0.8], "activation_beta": [1.5]},
        {"activations": ["Softplus", "Relu"]},
    ]
    model = _rnns(kinds, _X, _W, _RW)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": _X}
    )
    assert 0.1 < np.mean(want[0][:, 0] == 0) < 0.9  # the threshold keeps some values and zeroes others
    got = from_onnx(model).to_jax()(_X)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6)


def test_rnn_activation_defaults_are_the_operators():
    """Without ``activation_alpha``/``activation_beta`` each function takes its ONNX
    operator's defaults (the RNN page): ThresholdedRelu ``alpha = 1`` (``x > 1`` passes),
    Affine ``alpha = 1``, ``beta = 0``. onnxruntime takes 0 for both instead, so one step is
    checked against the page's formula, ``f(x W^T)`` (no bias, zero initial state)."""
    x = _X[1:2]
    model = _rnns([{"activations": ["ThresholdedRelu", "Affine"]}], x, _W, _RW)
    (got,) = from_onnx(model).to_jax()(x)
    z = np.einsum("bi,dhi->dbh", x[0], _W)  # (directions, batch, hidden)
    assert np.any((z[0] > 0) & (z[0] < 1)) and np.any((z[0] > 1) & (z[0] < 2))  # around the threshold
    want = np.stack([np.where(z[0] > 1, z[0], 0), z[1]])[None]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def _lstm_inputs(r: np.random.Generator, seq: int, batch: int, inp: int, hid: int, bias: bool = True) -> dict:
    """An LSTM node's ``x``, ``w``, ``r`` (and ``b``) drawn from ``r``, in that order."""
    inputs = {
        "x": r.standard_normal((seq, batch, inp)).astype(np.float32),
        "w": (r.standard_normal((1, 4 * hid, inp)) * 0.5).astype(np.float32),
        "r": (r.standard_normal((1, 4 * hid, hid)) * 0.5).astype(np.float32),
    }
    if bias:
        inputs["b"] = (r.standard_normal((1, 8 * hid)) * 0.1).astype(np.float32)
    return inputs


def test_lstm_with_peepholes():
    """LSTM with peephole weights ``P`` (input, output, forget: ``H`` columns each)."""
    r = np.random.default_rng(5)
    seq, batch, inp, hid = 3, 2, 4, 3
    inputs = _lstm_inputs(r, seq, batch, inp, hid)
    inputs["lens"] = np.full(batch, seq, np.int32)
    inputs["h0"] = np.zeros((1, batch, hid), np.float32)
    inputs["c0"] = (r.standard_normal((1, batch, hid)) * 0.5).astype(np.float32)
    inputs["p"] = r.standard_normal((1, 3 * hid)).astype(np.float32)
    check_node("LSTM", inputs, {"hidden_size": hid}, n_out=3, static=("w", "r", "b", "lens", "p"))


def test_lstm_with_coupled_input_and_forget_gates():
    """``input_forget=1``: the forget gate is ``1 - i`` (the input gate), not its own gate."""
    inputs = _lstm_inputs(np.random.default_rng(6), 3, 2, 4, 3, bias=False)
    attrs = {"hidden_size": 3, "input_forget": 1}
    check_node("LSTM", inputs, attrs, n_out=3, static=("w", "r"))


def test_lstm_outputs_past_a_shorter_sequence_are_zero():
    """``sequence_lens`` shorter than the input: ``Y`` is 0 past each sequence's end and
    ``Y_h``/``Y_c`` hold the state at its last step (onnxruntime's reading of the operator)."""
    inputs = _lstm_inputs(np.random.default_rng(6), 4, 3, 2, 3)
    inputs["lens"] = np.array([4, 1, 2], np.int32)
    check_node("LSTM", inputs, {"hidden_size": 3}, n_out=3, static=("w", "r", "b", "lens"))


def test_rnn_family_batch_first_with_clip():
    """``layout=1`` (opset 14): ``X`` is ``[batch, seq, input]``, the states ``[batch, dirs,
    hidden]`` and ``Y`` ``[batch, seq, dirs, hidden]``; the RNN's zero initial state takes its
    batch from ``X``'s first axis (batch 2, sequence 3) where no initial state is given (the
    RNN's and GRU's ``initial_h``, the LSTM's ``initial_c``). With ``clip``, each gate's input
    (RNN's, GRU's ``z``, ``r`` and ``h~``, LSTM's four) is clamped to ``[-clip, clip]``
    before its activation. onnxruntime runs only ``layout=0``: the oracle is the same nodes
    there on the transposed inputs, outputs transposed back."""
    rng = np.random.default_rng(11)
    seq, batch, inp, hid = 3, 2, 4, 3

    def a(*shape, scale=0.5):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    x, h0 = a(batch, seq, inp, scale=2.0), a(batch, 1, hid)
    t = lambda v: np.swapaxes(v, 0, 1)  # noqa: E731
    weights = {f"{k}{g}": a(1, g * hid, inp if k == "w" else hid) for k in "wr" for g in (1, 3, 4)}

    def model(layout):
        common = {"hidden_size": hid, "layout": layout, "clip": 0.4}
        nodes = [
            helper.make_node("RNN", ["x", "w1", "r1"], ["rnn_y", "rnn_h"], **common),
            helper.make_node("GRU", ["x", "w3", "r3"], ["gru_y", "gru_h"], **common),
            helper.make_node("LSTM", ["x", "w4", "r4", "", "", "h0"], ["ly", "lh", "lc"], **common),
        ]
        names = [o for node in nodes for o in node.output]
        vi = helper.make_tensor_value_info
        feeds = {"x": x, "h0": h0}
        ins = [vi(n, onnx.TensorProto.FLOAT, v.shape if layout else t(v).shape) for n, v in feeds.items()]
        outs = [vi(n, onnx.TensorProto.UNDEFINED, None) for n in names]
        inits = [numpy_helper.from_array(v, k) for k, v in weights.items()]
        graph = helper.make_graph(nodes, "g", ins, outs, inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
        m.ir_version = 8
        return onnx.shape_inference.infer_shapes(m)

    sess = ort.InferenceSession(model(0).SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": t(x), "h0": t(h0)})
    want = [np.transpose(w, (2, 0, 1, 3)) if w.ndim == 4 else t(w) for w in want]
    got = from_onnx(model(1)).to_jax()(x, h0)
    assert len(got) == len(want) == 7
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).shape == w.shape
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


def test_reverse_gru_with_sequence_lens():
    """A reverse GRU with ``sequence_lens``: it starts at each sequence's own last step, ``Y``
    is 0 past the end and ``Y_h`` holds the state after step 0."""
    hid = 3
    inputs = _gru_inputs(np.random.default_rng(13), seq=4, batch=3, inp=2, hid=hid, bias_scale=0.1)
    inputs["lens"] = np.array([2, 4, 1], np.int32)
    attrs = {"hidden_size": hid, "direction": "reverse"}
    check_node("GRU", inputs, attrs, n_out=2, static=("w", "r", "b", "lens"), atol=1e-5)
