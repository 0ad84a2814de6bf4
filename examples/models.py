"""The torch example models by name, for tests, benchmarks and the CLI docs.

``TORCH_MODELS[name] = (module under examples/, factory function)``; :func:`load` calls the
factory and returns ``(model, example_args)``.
"""

from __future__ import annotations

import importlib

TORCH_MODELS: dict[str, tuple[str, str]] = {
    "mlp": ("mlp", "factory"),
    "cnn": ("cnn", "factory"),
    "gpt2": ("gpt2", "factory"),
    "bert": ("transformers_small", "bert"),
    "llama": ("transformers_small", "llama"),
    "vit": ("transformers_small", "vit"),
    "t5": ("transformers_seq2seq", "t5"),
    "whisper": ("transformers_seq2seq", "whisper"),
}


def load(name: str):
    """``(model, example_args)`` of the example model ``name`` (a key of TORCH_MODELS)."""
    module, fn = TORCH_MODELS[name]
    return getattr(importlib.import_module(f"examples.{module}"), fn)()
