"""Small, randomly initialised encoder-decoder transformers (no download), for the round-trip
suite. Each function returns ``(model, example_args)``, model in eval mode, eager attention.

- ``t5()``: ``T5Model`` (2+2 layers, width 64); ``input_ids`` and ``decoder_input_ids``
  ``(2, 12)`` and ``(2, 8)`` int64 in ``[1, 1000)``.
- ``whisper()``: ``WhisperModel`` (2+2 layers, width 64, 16 mel bins, 32 encoder positions);
  ``input_features`` ``(1, 16, 64)`` float32 and ``decoder_input_ids`` ``(1, 6)`` int64.
"""

from __future__ import annotations

import torch
from transformers import T5Config, T5Model, WhisperConfig, WhisperModel


class _Positional(torch.nn.Module):
    """Call a seq2seq model positionally with ``use_cache=False`` (no cache objects in the
    outputs) and return its ``last_hidden_state``."""

    def __init__(self, model: torch.nn.Module, first: str):
        super().__init__()
        self.model, self.first = model, first

    def forward(self, inputs: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
        out = self.model(**{self.first: inputs}, decoder_input_ids=decoder_input_ids, use_cache=False)
        return out.last_hidden_state


def t5() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A small T5 encoder-decoder."""
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=1000,
        d_model=64,
        d_kv=16,
        d_ff=128,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        attn_implementation="eager",
    )
    model = _Positional(T5Model(config).eval(), "input_ids").eval()
    return model, (torch.randint(1, 1000, (2, 12)), torch.randint(1, 1000, (2, 8)))


def whisper() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A small Whisper encoder-decoder on a log-mel spectrogram."""
    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=1000,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        num_mel_bins=16,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_source_positions=32,
        max_target_positions=64,
        attn_implementation="eager",
    )
    model = _Positional(WhisperModel(config).eval(), "input_features").eval()
    return model, (torch.randn(1, 16, 64), torch.randint(1, 1000, (1, 6)))
