"""Rules of frontends/onnx/ops/rnn.py (RNN, GRU, LSTM) against onnxruntime (cases the node
suite's default run misses)."""

import os
import sys

import numpy as np

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


def test_lstm_with_peepholes():
    """LSTM with peephole weights ``P`` (input, output, forget: ``H`` columns each)."""
    r = np.random.default_rng(5)
    seq, batch, inp, hid = 3, 2, 4, 3
    inputs = {
        "x": r.standard_normal((seq, batch, inp)).astype(np.float32),
        "w": (r.standard_normal((1, 4 * hid, inp)) * 0.5).astype(np.float32),
        "r": (r.standard_normal((1, 4 * hid, hid)) * 0.5).astype(np.float32),
        "b": (r.standard_normal((1, 8 * hid)) * 0.1).astype(np.float32),
        "lens": np.full(batch, seq, np.int32),
        "h0": np.zeros((1, batch, hid), np.float32),
        "c0": (r.standard_normal((1, batch, hid)) * 0.5).astype(np.float32),
        "p": r.standard_normal((1, 3 * hid)).astype(np.float32),
    }
    check_node("LSTM", inputs, {"hidden_size": hid}, n_out=3, static=("w", "r", "b", "lens", "p"))


def test_lstm_with_coupled_input_and_forget_gates():
    """``input_forget=1``: the forget gate is ``1 - i`` (the input gate), not its own gate."""
    r = np.random.default_rng(6)
    seq, batch, inp, hid = 3, 2, 4, 3
    inputs = {
        "x": r.standard_normal((seq, batch, inp)).astype(np.float32),
        "w": (r.standard_normal((1, 4 * hid, inp)) * 0.5).astype(np.float32),
        "r": (r.standard_normal((1, 4 * hid, hid)) * 0.5).astype(np.float32),
    }
    attrs = {"hidden_size": hid, "input_forget": 1}
    check_node("LSTM", inputs, attrs, n_out=3, static=("w", "r"))
