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


# The static-cache decode through to_jax (prefill, then a jitted decode step threading the
# cache) is docs/generation.md's example, run by tests/core/test_doc_snippets.py on the same
# tiny llama; test_symbolic_prompt_length below threads it from a dynamic-length prefill.


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


def test_symbolic_prompt_length(tiny):
    """One prefill module for every prompt length (a ``Dim`` on the prompt): its cache feeds
    the decode step as the fixed-length prefill's does."""
    model, *_, decode, _ = tiny
    prefill, _, _ = gen.convert_static(model, PROMPT, PROMPT + TOKENS, max_prompt=PROMPT + TOKENS)
    assert prefill.signature.inputs[0].shape == (1, "prompt")
    for length in (PROMPT, 6):
        ids = gen.prompt(length)
        expected = gen.torch_generate(model, ids, 2)
        assert gen.greedy_jax(prefill, decode, ids.numpy(), 2) == expected, length


def test_symbolic_size_as_scalar_operand():
    """``t + t.size(1)`` with a dynamic size (StaticCache's ``cumulative_length.add_(kv_length)``):
    torch's type promotion sees the symbolic size as an int (frontends/torch/ops/_util.py)."""
    from torch.export import Dim

    import converter

    class AddLength(torch.nn.Module):
        def forward(self, t):
            return t + t.size(1)

    m = converter.from_torch(AddLength(), (torch.arange(6).reshape(1, 6),), dynamic_shapes=({1: Dim("n")},))
    t = torch.arange(9).reshape(1, 9)
    out = m.to_jax()(t.numpy())
    assert out.dtype == np.int64 and np.array_equal(np.asarray(out), AddLength()(t).numpy())


@pytest.mark.parametrize("arch", [pytest.param(a, marks=slow) for a in gen.ARCHS])
def test_generate_32_tokens_every_path(arch):
    assert gen.main(["--arch", arch, "--tokens", str(SLOW_TOKENS)]) == 0
