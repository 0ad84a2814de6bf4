"""Computations that branch on a size, with a dynamic dimension (issue 27, item 2).

Transformers' Phi-3 "longrope" picks short- or long-context rotary frequencies on
``max(position_ids) + 1 > original_max_position_embeddings``. ``torch.export`` keeps that
condition as an ``aten.where`` on a value computed from the symbolic length, and the
converted module selects on it at every length. What went wrong was the source model:
the traced forward stored its long-context frequencies as a plain attribute, which
``torch.export`` left on the user's model as a FakeTensor, and the eager model then kept
the short frequencies for every length. ``from_torch`` now leaves the model as it found it.

Dynamic NTK rope branches in Python on the length's value (``if seq_len >
max_seq_len_cached``): ``torch.export`` cannot trace that (a data-dependent guard), and the
conversion is refused with an ``ExportError`` naming that line, never converted with one
branch.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

import converter
from converter.errors import ExportError

HEAD_DIM = 8
ORIGINAL = 16  # original_max_position_embeddings
LENGTHS = (8, ORIGINAL, ORIGINAL + 1, 40)  # both sides of the switch


class Rope(torch.nn.Module):
    """A rotary embedding module called as the decoder calls it, positions ``arange(seq)``."""

    def __init__(self, rope: torch.nn.Module):
        super().__init__()
        self.rope = rope

    def forward(self, x):
        pos = torch.arange(x.shape[1]).unsqueeze(0)
        return self.rope(x, pos)


def _longrope() -> Rope:
    tr = pytest.importorskip("transformers")
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

    config = tr.Phi3Config(
        vocab_size=200,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        num_key_value_heads=2,
        max_position_embeddings=64,
        original_max_position_embeddings=ORIGINAL,
        rope_scaling={
            "type": "longrope",
            "short_factor": [1.0 + 0.1 * i for i in range(HEAD_DIM // 2)],
            "long_factor": [2.0 + 0.3 * i for i in range(HEAD_DIM // 2)],
        },
    )
    return Rope(Phi3RotaryEmbedding(config=config)).eval()


def _dynamic_ntk() -> Rope:
    tr = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = tr.LlamaConfig(
        vocab_size=200,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=ORIGINAL,
        rope_scaling={"rope_type": "dynamic", "factor": 2.0},
    )
    return Rope(LlamaRotaryEmbedding(config=config)).eval()


@pytest.fixture(scope="module")
def longrope():
    """The model converted with a dynamic length, and a fresh copy never exported."""
    model, fresh = _longrope(), _longrope()
    module = converter.from_torch(
        model, (torch.randn(2, 8, 32),), dynamic_shapes=({1: Dim("seq", min=2, max=64)},)
    )
    return model, fresh, module


def test_longrope_switch_kept_on_every_backend(longrope):
    _, fresh, module = longrope
    f, t = module.to_jax(), module.to_torch()
    session = ort.InferenceSession(module.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        for n in LENGTHS:
            x = torch.randn(2, n, 32)
            cos, sin = fresh(x)
            got = {
                "jax": [np.asarray(v) for v in f(x.numpy())],
                "torch": [v.numpy() for v in t(x)],
                "onnx": session.run(None, {"args[0]": x.numpy()})[:2],
            }
            for backend, (c, s) in got.items():
                np.testing.assert_allclose(c, cos.numpy(), rtol=1e-5, atol=1e-5, err_msg=f"{backend} {n}")
                np.testing.assert_allclose(s, sin.numpy(), rtol=1e-5, atol=1e-5, err_msg=f"{backend} {n}")
    # the two sets of frequencies differ: a module keeping one branch fails above
    with torch.no_grad():
        short, long_ = fresh(torch.randn(1, ORIGINAL, 32))[0], fresh(torch.randn(1, ORIGINAL + 1, 32))[0]
    assert not torch.allclose(short[0, 1:ORIGINAL], long_[0, 1:ORIGINAL], atol=1e-3)


def test_longrope_source_model_left_as_it_was(longrope):
    """The user's model computes what a never-exported copy computes after the conversion
    (before the fix it held a FakeTensor and kept the short frequencies: off by 2.4)."""
    model, fresh, _ = longrope
    assert "long_inv_freq" not in vars(model.rope)
    with torch.no_grad():
        for n in (ORIGINAL + 1, 40, 8):
            x = torch.randn(1, n, 32)
            for got, want in zip(model(x), fresh(x), strict=True):
                torch.testing.assert_close(got, want)


class Caching(torch.nn.Module):
    """Stores tensors, counters and a buffer on itself in ``forward``, as transformers' rope
    does (the tensors)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.full((3,), 3.0))
        self.calls = 0
        self.last_shape = None

    def forward(self, x):
        self.calls += 1
        if getattr(self, "cached", None) is None:
            self.cached = torch.full((3,), 2.0)
        self.last_shape = x.shape
        if "ones" not in self._buffers:  # a buffer entry and a non-persistent name added
            self.register_buffer("ones", torch.ones(3), persistent=False)
        return x * self.cached * self.scale * self.ones


def test_attributes_the_traced_forward_sets_are_put_back():
    model = Caching()
    inner = torch.nn.Sequential(model)
    before = dict(vars(model)), dict(model._buffers), set(model._non_persistent_buffers_set)
    module = converter.from_torch(inner, (torch.randn(4, 3),), dynamic_shapes=({0: Dim("n")},))
    assert (dict(vars(model)), dict(model._buffers), set(model._non_persistent_buffers_set)) == before
    assert model.calls == 0 and "cached" not in vars(model) and "ones" not in model._buffers
    x = torch.randn(5, 3)
    np.testing.assert_allclose(np.asarray(module.to_jax()(x.numpy())), (x * 6).numpy(), rtol=1e-6)
    torch.testing.assert_close(model(x), x * 6)  # the eager model still computes (real tensors)


def test_dynamic_ntk_is_refused_naming_the_length_branch():
    model, fresh = _dynamic_ntk(), _dynamic_ntk()
    with pytest.raises(ExportError, match=r"modeling_rope_utils\.py:\d+: if seq_len > max_seq_len_cached"):
        converter.from_torch(model, (torch.randn(2, 8, 32),), dynamic_shapes=({1: Dim("seq", max=64)},))
    with torch.no_grad():  # the failed export left the model as it was too
        x = torch.randn(1, 40, 32)
        for got, want in zip(model(x), fresh(x), strict=True):
            torch.testing.assert_close(got, want)
