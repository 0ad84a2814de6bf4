"""Hugging Face models as users load them (issue 28, item 4): tiny configs, random weights, no
downloads. A decoder at its default ``use_cache=True`` is refused naming ``use_cache=False``;
FNet over a dynamic length is a :class:`DynamicDimensionError` naming the op, its line and
the dimension, never an :class:`ExportError`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import converter
from converter import DynamicDimensionError, ExportError

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def gpt2():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        n_layer=1, n_embd=16, n_head=2, vocab_size=50, n_positions=16, bos_token_id=0, eos_token_id=0
    )
    return transformers.GPT2LMHeadModel(cfg).eval()


def test_decoder_with_default_use_cache_names_use_cache_false(gpt2):
    assert gpt2.config.use_cache  # the default
    ids = torch.arange(6).reshape(1, 6)
    with pytest.raises(ExportError, match=r"returns a DynamicCache.*kwargs=\{'use_cache': False\}"):
        converter.from_torch(gpt2, (ids,))
    module = converter.from_torch(gpt2, (ids,), {"use_cache": False})  # what the message says
    out = module.to_jax()(ids.numpy(), use_cache=False)
    with torch.no_grad():
        expected = gpt2(ids, use_cache=False).logits.numpy()
    np.testing.assert_allclose(np.asarray(out["logits"]), expected, rtol=1e-5, atol=1e-5)


def test_fnet_dynamic_length_is_a_dynamic_dimension_error():
    torch.manual_seed(0)
    cfg = transformers.FNetConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        intermediate_size=32,
        max_position_embeddings=32,
        use_tpu_fourier_optimizations=False,
    )
    model = transformers.FNetModel(cfg).eval()
    ids = torch.arange(8).reshape(1, 8)
    length = torch.export.Dim("L", min=2, max=32)
    with pytest.raises(DynamicDimensionError) as e:
        converter.from_torch(model, (ids,), dynamic_shapes=({1: length},))
    assert not isinstance(e.value, ExportError)
    assert e.value.op_name == "aten._fft_c2c.default"
    assert "modeling_fnet.py:" in e.value.location
    assert e.value.dims == ("L",)
    assert "StableHLO fft needs static lengths" in str(e.value)


def test_beit_with_a_dynamic_batch_converts_to_onnx():
    """BEiT's relative position index is built by a ``slice_scatter`` (a scatter with a static
    window on its indexed dim); with a dynamic batch, ``to_onnx`` converts it and onnxruntime
    matches torch at another batch size."""
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    cfg = transformers.BeitConfig(
        image_size=16,
        patch_size=8,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        use_relative_position_bias=True,
    )
    model = transformers.BeitModel(cfg).eval()
    batch = torch.export.Dim("B", min=1, max=8)
    module = converter.from_torch(model, (torch.randn(2, 3, 16, 16),), dynamic_shapes=({0: batch},))
    session = ort.InferenceSession(module.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    x = torch.randn(3, 3, 16, 16)
    (hidden, *_) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        expected = model(x).last_hidden_state.numpy()
    np.testing.assert_allclose(hidden, expected, rtol=1e-5, atol=1e-5)
