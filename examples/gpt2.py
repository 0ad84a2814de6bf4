"""A small GPT-2 from transformers, randomly initialised (no download).

``factory()`` returns ``(model, (input_ids,))``: a ``GPT2LMHeadModel`` (2 layers, width 64,
4 heads, vocabulary 1000, 128 positions, eager attention, no KV cache, eval mode) and token
ids of shape ``(2, 16)``, int64. The model returns a ``CausalLMOutputWithCrossAttentions``
whose ``logits`` have shape ``(2, 16, 1000)``, float32. The token embedding and the LM
head share one weight (``transformer.wte.weight``).
"""

from __future__ import annotations

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def config() -> GPT2Config:
    """The small configuration used here."""
    return GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=4,
        vocab_size=1000,
        n_positions=128,
        bos_token_id=999,
        eos_token_id=999,
        use_cache=False,
        attn_implementation="eager",
    )


def factory() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The GPT-2 model with seeded random weights and example token ids ``(2, 16)``."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config()).eval()
    input_ids = torch.randint(0, model.config.vocab_size, (2, 16))
    return model, (input_ids,)
