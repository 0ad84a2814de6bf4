"""Greedy generation with converted Hugging Face causal LMs (examples/generate.py): the
tokens of every path equal ``model.generate(do_sample=False)``'s.

The default run uses a one-layer Llama and a few tokens; ``GENERATE_TESTS=all`` adds the
slow variants (two layers, Llama and Qwen2, 32 tokens on every path).
"""

from __future__ import annotations

import os

import jax
import numpy as np
import pytest
import torch

from examples import generate as gen

PROMPT = 4
TOKENS = 4
SLOW_TOKENS = 32
LONG = os.environ.get("GENERATE_TESTS") == "all"
slow = [pytest.mark.slow, pytest.mark.skipif(not LONG, reason="slow: set GENERATE_TESTS=all")]


@pytest.fixture(scope="module")
def tiny():
    """``(model, prompt ids, the tokens torch generates, prefill, decode, cache names)``."""
    model = gen.build("llama", layers=1)
    ids = gen.prompt(PROMPT)
    expected = gen.torch_generate(model, ids, TOKENS)
    prefill, decode, names = gen.convert_static(model, PROMPT, PROMPT + TOKENS)
    return model, ids, expected, prefill, decode, names


def test_static_cache_is_state(tiny):
    *_, prefill, decode, names = tiny
    assert sorted(m.target for m in decode.signature.mutations) == sorted(names)
    assert {n.split("_")[0] for n in names} == {"key", "value", "cumulative"}


def test_static_cache_jax(tiny):
    _, ids, expected, prefill, decode, _ = tiny
    assert gen.greedy_jax(prefill, decode, ids.numpy(), TOKENS) == expected


def test_static_cache_torch(tiny):
    _, ids, expected, prefill, decode, names = tiny
    assert gen.greedy_torch(prefill, decode, names, ids, TOKENS) == expected


def test_static_cache_onnx(tiny):
    _, ids, expected, prefill, decode, names = tiny
    assert gen.greedy_onnx(prefill, decode, names, ids.numpy(), TOKENS) == expected


def test_cache_really_carries_the_context(tiny):
    """A decode step with an empty cache forgets the prompt: its logits differ from the
    threaded run's (the cache, not the token alone, produces the right tokens)."""
    model, ids, _, _, decode, _ = tiny
    f = decode.to_jax()
    empty = np.asarray(jax.jit(f.apply)(f.params, ids[:, -1:].numpy(), np.array([PROMPT - 1])))
    with torch.no_grad():
        full = model(input_ids=ids, use_cache=False).logits[:, -1:].numpy()
    assert np.abs(empty - full).max() > 1e-2


def test_symbolic_length(tiny):
    model, ids, expected, *_ = tiny
    m = gen.convert_dynamic(model, ids, max_len=PROMPT + TOKENS)
    assert m.signature.inputs[0].shape == (1, "seq")
    assert gen.greedy_dynamic(m.to_jax(), ids.numpy(), 3) == expected[:3]


@pytest.mark.parametrize("arch", [pytest.param(a, marks=slow) for a in gen.ARCHS])
def test_generate_32_tokens_every_path(arch):
    assert gen.main(["--arch", arch, "--tokens", str(SLOW_TOKENS)]) == 0
