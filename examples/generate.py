"""Greedy generation with a converted Hugging Face causal LM, two ways people do it.

1. **Symbolic sequence length** (no cache): the model is converted once with
   ``dynamic_shapes`` (a ``Dim("seq")`` on ``input_ids``) and re-called on the growing
   sequence; each new length is one specialization of the same module (:func:`greedy_dynamic`).
2. **Static KV cache** (transformers' ``StaticCache``): :class:`StaticCacheLM` owns the
   cache tensors as registered buffers and calls the model with ``cache=`` and explicit
   positions, so ``torch.export`` records the cache writes as ``BUFFER_MUTATION``\\ s. A
   prefill module (the prompt, fixed length) and a decode-step module (one token) are
   converted; the cache is threaded through ``apply(params, ..., mutable=True)`` in JAX
   (:func:`greedy_jax`), lives in the buffers of the ``to_torch`` modules
   (:func:`greedy_torch`), and is fed and read back as graph inputs / ``updated:<name>``
   outputs in onnxruntime (:func:`greedy_onnx`).

Every path is compared with ``model.generate(do_sample=False)``. The models are small and
randomly initialised from a config (Llama or Qwen2; no download)::

    python examples/generate.py                        # llama, 32 tokens, every path
    python examples/generate.py --arch qwen2 --tokens 16 --paths jax,onnx
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch
from torch.export import Dim

import converter

ARCHS = ("llama", "qwen2")
PATHS = ("dynamic", "jax", "torch", "onnx")


def build(arch: str = "llama", *, layers: int = 2, seed: int = 0) -> torch.nn.Module:
    """A small randomly initialised causal LM in eval mode: ``arch`` is ``"llama"``
    (``LlamaForCausalLM``) or ``"qwen2"`` (``Qwen2ForCausalLM``, biased q/k/v); width 64, 4
    heads, 2 key/value heads (grouped-query attention), vocabulary 128, eager attention.
    ``initializer_range`` is larger than the default so that greedy decoding does not sit on
    near-ties between logits (random models at 0.02 give almost uniform logits)."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    kinds = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}
    if arch not in kinds:
        raise ValueError(f"arch must be one of {ARCHS}, not {arch!r}")
    config_cls, model_cls = kinds[arch]
    config = config_cls(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        initializer_range=0.2,
        attn_implementation="eager",
    )
    torch.manual_seed(seed)
    return model_cls(config).eval()


def prompt(length: int = 8, seed: int = 1, vocab: int = 128) -> torch.Tensor:
    """Token ids ``(1, length)`` int64."""
    return torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(seed))


def torch_generate(model: torch.nn.Module, ids: torch.Tensor, n: int) -> list[int]:
    """The ``n`` tokens ``model.generate(do_sample=False, max_new_tokens=n)`` appends."""
    with torch.no_grad():
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n, min_new_tokens=n
        )
    return out[0, ids.shape[1] :].tolist()


# --------------------------------------------------------------------------- 1. symbolic length


class Logits(torch.nn.Module):
    """``model(input_ids).logits`` without a cache: ``(batch, seq)`` int64 → ``(batch, seq, vocab)``."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, use_cache=False).logits


def convert_dynamic(model: torch.nn.Module, ids: torch.Tensor, max_len: int = 128) -> converter.Module:
    """One conversion of :class:`Logits` with ``input_ids`` of symbolic length ``seq`` in ``[2, max_len]``."""
    seq = Dim("seq", min=2, max=max_len)
    return converter.from_torch(Logits(model), (ids,), dynamic_shapes=({1: seq},))


def greedy_dynamic(f: Callable, ids: np.ndarray, n: int) -> list[int]:
    """Greedy decoding by re-calling ``f`` (the converted :class:`Logits`) on the whole sequence."""
    seq = np.asarray(ids)
    out = []
    for _ in range(n):
        logits = np.asarray(f(seq))
        token = int(logits[0, -1].argmax())
        out.append(token)
        seq = np.concatenate([seq, np.array([[token]], seq.dtype)], axis=1)
    return out


# --------------------------------------------------------------------------- 2. static KV cache


class StaticCacheLM(torch.nn.Module):
    """A causal LM with a ``transformers.StaticCache`` whose tensors are this module's buffers.

    ``forward(input_ids (batch, q) int64, cache_position (q,) int64) -> logits (batch, q, vocab)``
    writes the new keys and values at ``cache_position`` into the buffers ``key_cache_<i>``,
    ``value_cache_<i>`` (``(batch, kv_heads, max_cache_len, head_dim)``) and sets
    ``cumulative_length_<i>``: ``torch.export`` records them as buffer mutations, which the
    converted module returns as updates. The cache layers are re-bound to the buffers at each
    call because non-strict ``torch.export`` substitutes a module's buffers while tracing;
    a cache that kept the original tensors would be traced as constants and its writes lost
    (transformers' own ``TorchExportableModuleWithStaticCache`` exports with ``strict=True``
    instead).
    """

    def __init__(self, model: torch.nn.Module, max_cache_len: int, batch_size: int = 1):
        from transformers import StaticCache

        super().__init__()
        self.model = model
        config = model.config
        self.cache = StaticCache(config=config, max_cache_len=max_cache_len)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.cache.early_initialization(
            batch_size, config.num_key_value_heads, head_dim, model.dtype, torch.device("cpu")
        )
        for i, layer in enumerate(self.cache.layers):
            self.register_buffer(f"key_cache_{i}", layer.keys, persistent=False)
            self.register_buffer(f"value_cache_{i}", layer.values, persistent=False)
            self.register_buffer(f"cumulative_length_{i}", layer.cumulative_length, persistent=False)

    def cache_names(self) -> list[str]:
        """The names of the cache buffers."""
        return [n for n, _ in self.named_buffers() if n.split("_")[0] in ("key", "value", "cumulative")]

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.cache.layers):
            layer.keys = getattr(self, f"key_cache_{i}")
            layer.values = getattr(self, f"value_cache_{i}")
            layer.cumulative_length = getattr(self, f"cumulative_length_{i}")
            layer.cumulative_length.copy_(cache_position[0])
        out = self.model(
            input_ids=input_ids, cache=self.cache, position_ids=cache_position[None], use_cache=True
        )
        return out.logits


def convert_static(
    model: torch.nn.Module, prompt_len: int, max_cache_len: int, max_prompt: int | None = None
) -> tuple[converter.Module, converter.Module, list[str]]:
    """The prefill module (``input_ids (1, prompt_len)``; with ``max_prompt``, of symbolic
    length ``prompt`` in ``[2, max_prompt]``, one module for every prompt length), the
    decode-step module (``input_ids (1, 1)``) and the cache buffer names, converted from
    :class:`StaticCacheLM`."""
    wrapper = StaticCacheLM(model, max_cache_len)
    example = (prompt(prompt_len), torch.arange(prompt_len))
    if max_prompt is None:
        prefill = converter.from_torch(wrapper, example)
    else:
        length = Dim("prompt", min=2, max=max_prompt)
        prefill = converter.from_torch(wrapper, example, dynamic_shapes=({1: length}, {0: length}))
    decode = converter.from_torch(wrapper, (prompt(1), torch.tensor([prompt_len])))
    return prefill, decode, wrapper.cache_names()


def greedy_jax(prefill: converter.Module, decode: converter.Module, ids: np.ndarray, n: int) -> list[int]:
    """Greedy decoding in JAX: a jitted prefill, then ``n - 1`` jitted decode steps, the cache
    threaded through ``apply(params, ..., mutable=True)`` (the updates replace the cache
    entries of ``params``)."""
    import jax

    fp, fd = prefill.to_jax(), decode.to_jax()
    params = dict(fd.params)  # same weights and (zero) initial cache as fp.params
    p = ids.shape[1]
    fill = jax.jit(lambda params, ids, pos: fp.apply(params, ids, pos, mutable=True))
    step = jax.jit(lambda params, token, pos: fd.apply(params, token, pos, mutable=True))
    with jax.enable_x64(True):  # int64 ids and positions under jax.jit: else JAX narrows them first
        logits, updates = fill(params, ids, np.arange(p))
        params.update(updates)
        tokens = [int(np.asarray(logits)[0, -1].argmax())]
        for i in range(n - 1):
            logits, updates = step(params, np.array([[tokens[-1]]]), np.array([p + i]))
            params.update(updates)
            tokens.append(int(np.asarray(logits)[0, -1].argmax()))
    return tokens


def greedy_torch(
    prefill: converter.Module, decode: converter.Module, names: list[str], ids: torch.Tensor, n: int
) -> list[int]:
    """Greedy decoding with the ``to_torch`` modules, which update their cache buffers in
    place; the prefill's cache is copied into the decode module once."""
    tp, td = prefill.to_torch(), decode.to_torch()
    p = ids.shape[1]
    with torch.no_grad():
        logits = tp(ids, torch.arange(p))
        src, dst = dict(tp.named_buffers()), dict(td.named_buffers())  # non-persistent: not in state_dict()
        for name in names:
            dst[name].copy_(src[name])
        tokens = [int(logits[0, -1].argmax())]
        for i in range(n - 1):
            logits = td(torch.tensor([[tokens[-1]]]), torch.tensor([p + i]))
            tokens.append(int(logits[0, -1].argmax()))
    return tokens


def onnx_session(module: converter.Module, names: list[str]):
    """An onnxruntime session of ``module.to_onnx()`` whose cache initializers are also graph
    inputs (so each call feeds them; ONNX lets a graph input override the initializer of the
    same name), the names of its two token/position inputs and of the cache entries it reads
    (``cumulative_length_<i>`` is overwritten from ``cache_position`` before any use, so the
    model has no initializer for it; only its ``updated:`` output)."""
    import onnx
    import onnxruntime as ort

    proto = module.to_onnx()
    inits = {t.name: t for t in proto.graph.initializer}
    fed = [name for name in names if name in inits]
    for name in fed:
        t = inits[name]
        proto.graph.input.append(onnx.helper.make_tensor_value_info(name, t.data_type, list(t.dims)))
    onnx.checker.check_model(proto)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session, [i.name for i in session.get_inputs()][:2], fed


def greedy_onnx(
    prefill: converter.Module, decode: converter.Module, names: list[str], ids: np.ndarray, n: int
) -> list[int]:
    """Greedy decoding in onnxruntime: the cache is fed as inputs and read back from the
    ``updated:<name>`` outputs."""
    sp, (ids_p, pos_p), names = onnx_session(prefill, names)
    sd, (ids_d, pos_d), _ = onnx_session(decode, names)
    cache = {name: np.asarray(prefill.params[name]) for name in names}
    updated = [f"updated:{name}" for name in names]
    p = ids.shape[1]
    res = sp.run([sp.get_outputs()[0].name, *updated], {ids_p: ids, pos_p: np.arange(p), **cache})
    cache = dict(zip(names, res[1:], strict=True))
    tokens = [int(res[0][0, -1].argmax())]
    out_d = sd.get_outputs()[0].name
    for i in range(n - 1):
        res = sd.run([out_d, *updated], {ids_d: np.array([[tokens[-1]]]), pos_d: np.array([p + i]), **cache})
        cache = dict(zip(names, res[1:], strict=True))
        tokens.append(int(res[0][0, -1].argmax()))
    return tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", choices=ARCHS, default="llama")
    parser.add_argument("--tokens", type=int, default=32, help="new tokens to generate")
    parser.add_argument("--prompt", type=int, default=8, help="prompt length")
    parser.add_argument(
        "--paths", default=",".join(PATHS), help=f"comma-separated subset of {','.join(PATHS)}"
    )
    args = parser.parse_args(argv)
    paths = args.paths.split(",")
    if unknown := set(paths) - set(PATHS):
        parser.error(f"unknown paths {sorted(unknown)}; choose from {PATHS}")

    model = build(args.arch)
    ids = prompt(args.prompt)
    expected = torch_generate(model, ids, args.tokens)
    print(f"{args.arch}: torch generate(do_sample=False): {expected}")
    ok = True

    def report(name: str, tokens: list[int], seconds: float) -> None:
        nonlocal ok
        same = tokens == expected
        ok &= same
        print(f"{name:>8}: {'same tokens' if same else f'DIFFERENT: {tokens}'} ({seconds:.1f} s)")

    if "dynamic" in paths:
        t0 = time.perf_counter()
        m = convert_dynamic(model, ids, max_len=args.prompt + args.tokens)
        report("dynamic", greedy_dynamic(m.to_jax(), ids.numpy(), args.tokens), time.perf_counter() - t0)
    static = [p for p in paths if p != "dynamic"]
    if static:
        t0 = time.perf_counter()
        prefill, decode, names = convert_static(model, args.prompt, args.prompt + args.tokens)
        print(f"  static cache: converted prefill and decode step in {time.perf_counter() - t0:.1f} s")
        runs = {
            "jax": lambda: greedy_jax(prefill, decode, ids.numpy(), args.tokens),
            "torch": lambda: greedy_torch(prefill, decode, names, ids, args.tokens),
            "onnx": lambda: greedy_onnx(prefill, decode, names, ids.numpy(), args.tokens),
        }
        for name in static:
            t0 = time.perf_counter()
            report(name, runs[name](), time.perf_counter() - t0)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
