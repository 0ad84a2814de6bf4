"""Small, randomly initialised transformers models for tests and the CLI (no download).

Each function follows the ``path/to/file.py:factory`` contract and returns
``(model, example_args)`` with the model in eval mode and eager attention:

- ``bert()``: ``BertModel`` (2 layers, width 64, 4 heads, vocabulary 1000); token ids
  ``(2, 16)`` int64 in ``[1, 1000)`` (id 0 is the padding index, whose embedding row torch
  never trains).
- ``llama()``: ``LlamaForCausalLM`` (2 layers, width 64, 4 heads, 2 key/value heads, RoPE);
  token ids ``(2, 16)`` int64.
- ``vit()``: ``ViTModel`` (32x32 images, 8x8 patches, 2 layers, width 64); pixels
  ``(2, 3, 32, 32)`` float32, passed directly (no image processor).
"""

from __future__ import annotations

import torch
from transformers import BertConfig, BertModel, LlamaConfig, LlamaForCausalLM, ViTConfig, ViTModel

_SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


def bert() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A small BERT encoder and token ids of shape ``(2, 16)``."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=1000, max_position_embeddings=128, attn_implementation="eager", **_SMALL)
    model = BertModel(config).eval()
    return model, (torch.randint(1, config.vocab_size, (2, 16)),)


def llama() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A small Llama causal LM (grouped-query attention) and token ids of shape ``(2, 16)``."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=1000,
        max_position_embeddings=128,
        num_key_value_heads=2,
        attn_implementation="eager",
        use_cache=False,
        **_SMALL,
    )
    model = LlamaForCausalLM(config).eval()
    return model, (torch.randint(0, config.vocab_size, (2, 16)),)


def vit() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A small ViT encoder and a pixel batch of shape ``(2, 3, 32, 32)``."""
    torch.manual_seed(0)
    config = ViTConfig(image_size=32, patch_size=8, num_channels=3, attn_implementation="eager", **_SMALL)
    model = ViTModel(config).eval()
    return model, (torch.randn(2, 3, 32, 32),)
