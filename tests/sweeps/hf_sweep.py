"""Sweep of Hugging Face torch architectures through every path, with a dynamic sequence length.

Each model is built from a tiny config (1-2 layers, width 32, vocabulary 200, random weights,
``torch.manual_seed(0)``, eager attention, no cache), called with keyword inputs as a user
calls it, exported by ``converter.from_torch`` with ``torch.export`` dynamic dimensions
(``Dim("batch")`` and ``Dim("seq")`` for token inputs, the audio length for Wav2Vec2, the
batch for images), then run at two input sizes other than the example one and compared with
eager torch on:

- ``jax``: ``Module.to_jax()``; ``grad``: ``jax.grad`` of a weighted sum of the outputs
  through ``f.apply`` against torch autograd, every parameter (a few models);
- ``torch``: ``Module.to_torch()`` eagerly; ``reexport``: ``torch.export`` of that module
  with ``export_dynamic_shapes()``, run at both sizes (a few models);
- ``onnx``: ``Module.to_onnx()`` in onnxruntime.

Prints a table model x path -> ``ok <max abs error>`` or the error class and message.
Run: ``python tests/sweeps/hf_sweep.py [model ...]`` (all models without arguments), or through
pytest with ``SWEEP=all`` (or ``SWEEP=mistral,bart``): ``tests/sweeps/test_hf_sweep.py``.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch.export import Dim

import converter

RTOL = ATOL = 1e-4  # float32 through several ops: the tolerance test_dynamic.py uses for GPT-2
V = 200  # vocabulary
_TXT = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64)
_DEC = dict(vocab_size=V, max_position_embeddings=128, use_cache=False, attn_implementation="eager")


@dataclasses.dataclass
class Spec:
    """One architecture: ``build()`` returns the model in eval mode; ``inputs(batch, seq)`` its
    keyword inputs at that size; ``dims`` maps each input to ``{axis: "batch" | "seq" | ...}``;
    ``sizes`` the example size then the two compared sizes."""

    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[int, int], dict[str, torch.Tensor]]
    dims: dict[str, dict[int, str]]
    sizes: tuple[tuple[int, int], ...] = ((2, 8), (3, 5), (2, 13))
    ranges: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    grad: bool = False
    reexport: bool = False


def _tokens(b: int, s: int, *, lo: int = 3, mask: bool = True) -> dict[str, torch.Tensor]:
    """Token ids in ``[lo, V)`` and an attention mask whose last row ends in two pads."""
    g = torch.Generator().manual_seed(b * 1000 + s)
    out = {"input_ids": torch.randint(lo, V, (b, s), generator=g)}
    if mask:
        m = torch.ones(b, s, dtype=torch.long)
        m[-1, -2:] = 0
        out["attention_mask"] = m
    return out


_TOK = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


def _text(cls: Any, config: Any) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        torch.manual_seed(0)
        return cls(config()).eval()

    return build


def _specs() -> list[Spec]:
    import transformers as tr

    def causal(
        name: str, cfg: str, model: str, grad: bool = False, reexport: bool = False, **kw: Any
    ) -> Spec:
        config = lambda: getattr(tr, cfg)(**{**_DEC, **kw})  # noqa: E731
        return Spec(name, _text(getattr(tr, model), config), _tokens, _TOK, grad=grad, reexport=reexport)

    def encoder(name: str, cfg: str, model: str, lo: int = 3, **kw: Any) -> Spec:
        config = lambda: getattr(tr, cfg)(vocab_size=V, attn_implementation="eager", **kw)  # noqa: E731
        return Spec(name, _text(getattr(tr, model), config), lambda b, s: _tokens(b, s, lo=lo), _TOK)

    def pixels(b: int, s: int) -> dict[str, torch.Tensor]:
        return {"pixel_values": torch.randn(b, 3, 32, 32, generator=torch.Generator().manual_seed(b))}

    img = {"pixel_values": {0: "batch"}}
    img_sizes = ((2, 0), (3, 0), (5, 0))

    def vision(name: str, cfg: str, model: str, **kw: Any) -> Spec:
        config = lambda: getattr(tr, cfg)(**kw)  # noqa: E731
        return Spec(name, _text(getattr(tr, model), config), pixels, img, img_sizes)

    def bart_inputs(b: int, s: int) -> dict[str, torch.Tensor]:
        out = _tokens(b, s)
        out["decoder_input_ids"] = _tokens(b, s + 3, mask=False)["input_ids"]
        return out

    def clip_inputs(b: int, s: int) -> dict[str, torch.Tensor]:
        return {**_tokens(b, s), **pixels(b + 1, 0)}

    def audio(b: int, s: int) -> dict[str, torch.Tensor]:
        return {"input_values": torch.randn(b, 40 * s, generator=torch.Generator().manual_seed(s))}

    return [
        causal(
            "mistral",
            "MistralConfig",
            "MistralForCausalLM",
            grad=True,
            reexport=True,
            num_key_value_heads=2,
            sliding_window=4,
            **_TXT,
        ),
        causal(
            "mixtral",
            "MixtralConfig",
            "MixtralForCausalLM",
            num_key_value_heads=2,
            num_local_experts=4,
            num_experts_per_tok=2,
            **_TXT,
        ),
        causal("gemma", "GemmaConfig", "GemmaForCausalLM", num_key_value_heads=1, head_dim=8, **_TXT),
        causal(
            "gemma2",
            "Gemma2Config",
            "Gemma2ForCausalLM",
            reexport=True,
            num_key_value_heads=2,
            head_dim=8,
            sliding_window=4,
            final_logit_softcapping=30.0,
            attn_logit_softcapping=50.0,
            **{**_TXT, "num_hidden_layers": 2},
        ),
        causal("phi", "PhiConfig", "PhiForCausalLM", partial_rotary_factor=0.5, **_TXT),
        causal(
            "phi3",
            "Phi3Config",
            "Phi3ForCausalLM",
            num_key_value_heads=2,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            **_TXT,
        ),
        causal("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM", rotary_pct=0.25, **_TXT),
        causal(
            "gptj",
            "GPTJConfig",
            "GPTJForCausalLM",
            n_embd=32,
            n_layer=1,
            n_head=4,
            rotary_dim=4,
            n_positions=128,
        ),
        causal(
            "falcon",
            "FalconConfig",
            "FalconForCausalLM",
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=4,
        ),
        causal(
            "falcon_alibi",
            "FalconConfig",
            "FalconForCausalLM",
            alibi=True,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=4,
        ),
        causal(
            "opt",
            "OPTConfig",
            "OPTForCausalLM",
            hidden_size=32,
            num_hidden_layers=1,
            ffn_dim=64,
            num_attention_heads=4,
            word_embed_proj_dim=32,
        ),
        causal("bloom", "BloomConfig", "BloomForCausalLM", hidden_size=32, n_layer=1, n_head=4),
        encoder(
            "distilbert",
            "DistilBertConfig",
            "DistilBertModel",
            dim=32,
            n_layers=1,
            n_heads=4,
            hidden_dim=64,
            max_position_embeddings=128,
        ),
        encoder("roberta", "RobertaConfig", "RobertaModel", max_position_embeddings=130, **_TXT),
        encoder(
            "albert", "AlbertConfig", "AlbertModel", embedding_size=16, max_position_embeddings=128, **_TXT
        ),
        encoder(
            "electra", "ElectraConfig", "ElectraModel", embedding_size=16, max_position_embeddings=128, **_TXT
        ),
        encoder(
            "deberta_v2",
            "DebertaV2Config",
            "DebertaV2Model",
            relative_attention=True,
            position_buckets=8,
            max_relative_positions=32,
            pos_att_type=["p2c", "c2p"],
            norm_rel_ebd="layer_norm",
            share_att_key=True,
            max_position_embeddings=128,
            **_TXT,
        ),
        Spec(
            "bart",
            _text(
                tr.BartForConditionalGeneration,
                lambda: tr.BartConfig(
                    vocab_size=V,
                    d_model=32,
                    encoder_layers=1,
                    decoder_layers=1,
                    encoder_attention_heads=4,
                    decoder_attention_heads=4,
                    encoder_ffn_dim=64,
                    decoder_ffn_dim=64,
                    max_position_embeddings=128,
                    use_cache=False,
                    attn_implementation="eager",
                ),
            ),
            bart_inputs,
            {**_TOK, "decoder_input_ids": {0: "batch", 1: "tgt"}},
            grad=True,
            reexport=True,
        ),
        vision(
            "convnext", "ConvNextConfig", "ConvNextModel", num_stages=2, hidden_sizes=[8, 16], depths=[1, 1]
        ),
        vision(
            "swin",
            "SwinConfig",
            "SwinModel",
            image_size=32,
            patch_size=4,
            embed_dim=16,
            depths=[1, 1],
            num_heads=[2, 2],
            window_size=2,
            attn_implementation="eager",
        ),
        vision(
            "resnet",
            "ResNetConfig",
            "ResNetModel",
            embedding_size=8,
            hidden_sizes=[8, 16],
            depths=[1, 1],
            layer_type="basic",
        ),
        vision(
            "segformer",
            "SegformerConfig",
            "SegformerForSemanticSegmentation",
            num_encoder_blocks=2,
            depths=[1, 1],
            sr_ratios=[2, 1],
            hidden_sizes=[8, 16],
            patch_sizes=[7, 3],
            strides=[4, 2],
            num_attention_heads=[1, 2],
            mlp_ratios=[2, 2],
            decoder_hidden_size=16,
            num_labels=3,
        ),
        Spec(
            "wav2vec2",
            _text(
                tr.Wav2Vec2Model,
                lambda: tr.Wav2Vec2Config(
                    hidden_size=32,
                    num_hidden_layers=1,
                    num_attention_heads=4,
                    intermediate_size=64,
                    conv_dim=(16, 16),
                    conv_stride=(5, 2),
                    conv_kernel=(10, 3),
                    num_conv_pos_embeddings=16,
                    num_conv_pos_embedding_groups=4,
                    feat_extract_norm="group",
                    attn_implementation="eager",
                ),
            ),
            audio,
            {"input_values": {0: "batch", 1: "10*frames"}},  # torch.export: the length a multiple of 10
            grad=True,
            ranges={"frames": (10, 400)},
        ),
        Spec(
            "clip",
            _text(
                tr.CLIPModel,
                lambda: tr.CLIPConfig(
                    text_config=dict(
                        vocab_size=V,
                        hidden_size=32,
                        intermediate_size=64,
                        num_hidden_layers=1,
                        num_attention_heads=4,
                        max_position_embeddings=32,
                    ),
                    vision_config=dict(
                        hidden_size=32,
                        intermediate_size=64,
                        num_hidden_layers=1,
                        num_attention_heads=4,
                        image_size=32,
                        patch_size=8,
                    ),
                    projection_dim=16,
                    attn_implementation="eager",
                ),
            ),
            clip_inputs,
            {**_TOK, "pixel_values": {0: "images"}},
            ranges={"seq": (2, 32)},
        ),
        causal(
            "mamba",
            "MambaConfig",
            "MambaForCausalLM",
            hidden_size=32,
            state_size=4,
            num_hidden_layers=1,
            expand=2,
            conv_kernel=4,
        ),
        causal("qwen3", "Qwen3Config", "Qwen3ForCausalLM", num_key_value_heads=2, head_dim=8, **_TXT),
        causal(
            "qwen2_moe",
            "Qwen2MoeConfig",
            "Qwen2MoeForCausalLM",
            num_key_value_heads=2,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=32,
            **_TXT,
        ),
        causal("starcoder2", "Starcoder2Config", "Starcoder2ForCausalLM", num_key_value_heads=2, **_TXT),
        causal(
            "gemma3",
            "Gemma3TextConfig",
            "Gemma3ForCausalLM",
            num_key_value_heads=2,
            head_dim=8,
            sliding_window=4,
            **{**_TXT, "num_hidden_layers": 2},
        ),
        dataclasses.replace(  # torch.export: its embedding shift needs seq != 2
            encoder(
                "mobilebert",
                "MobileBertConfig",
                "MobileBertModel",
                embedding_size=16,
                intra_bottleneck_size=16,
                true_hidden_size=16,
                num_feedforward_networks=1,
                max_position_embeddings=128,
                **_TXT,
            ),
            ranges={"seq": (3, 64)},
        ),
        vision(
            "dinov2",
            "Dinov2Config",
            "Dinov2Model",
            image_size=32,
            patch_size=8,
            attn_implementation="eager",
            **{k: v for k, v in _TXT.items() if k != "intermediate_size"},
        ),
    ]


def _flat(out: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """Leaves of a (nested) output by path; ``None`` leaves dropped."""
    if isinstance(out, Mapping) or hasattr(out, "to_tuple"):
        items = [(f"['{k}']", v) for k, v in out.items()]
    elif isinstance(out, (tuple, list)):
        items = [(f"[{i}]", v) for i, v in enumerate(out)]
    elif out is None:
        return {}
    else:
        v = out.detach().numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
        return {prefix: v}
    flat: dict[str, np.ndarray] = {}
    for k, v in items:
        flat.update(_flat(v, prefix + k))
    return flat


def _compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    """Max abs error over every output; raises ``AssertionError`` beyond the tolerance."""
    if sorted(got) != sorted(want):
        raise AssertionError(f"outputs {sorted(got)} != torch's {sorted(want)}")
    worst = 0.0
    for k, w in want.items():
        g = np.asarray(got[k])
        if g.shape != w.shape:
            raise AssertionError(f"{k}: shape {g.shape} != torch's {w.shape}")
        if w.dtype == np.bool_ or np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=k)
            continue
        if not np.all(np.isfinite(w)):
            raise AssertionError(f"{k}: torch's output is not finite")
        err = float(np.max(np.abs(g.astype(np.float64) - w), initial=0.0))
        worst = max(worst, err)
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=k)
    return worst


def _dynamic_shapes(spec: Spec, batch_dynamic: bool) -> dict[str, dict[int, Any]]:
    made: dict[str, Any] = {}

    def dim(name: str) -> Any:
        if "*" in name:  # a derived dimension, "10*frames"
            k, base = name.split("*")
            return int(k) * dim(base)
        if name not in made:
            lo, hi = spec.ranges.get(name, (1 if name in ("batch", "images") else 2, 64))
            made[name] = Dim(name, min=lo, max=hi)
        return made[name]

    return {
        k: {ax: dim(n) for ax, n in axes.items() if batch_dynamic or n not in ("batch", "images")}
        for k, axes in spec.dims.items()
    }


def _err(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0][:150] if msg else ''}"


def run(spec: Spec, paths: tuple[str, ...] = ("jax", "grad", "torch", "reexport", "onnx")) -> dict[str, str]:
    """Convert and run one architecture on every path; ``{path: "ok <err>" | "<Error>: ..."}``."""
    row: dict[str, str] = {}
    t0 = time.process_time()
    try:
        model = spec.build()
        example = spec.inputs(*spec.sizes[0])
    except Exception as e:  # noqa: BLE001 - the sweep reports every failure
        row["export"] = _err(e)
        row["_trace"] = traceback.format_exc()
        return row
    # dynamic batch and sequence; else a static batch; else static shapes (the error kept)
    m, first = None, None
    for how, batch in (("", True), (" (static batch)", False)):
        try:
            m = converter.from_torch(model, (), example, dynamic_shapes=_dynamic_shapes(spec, batch))
            row["export"] = "ok" + how
            break
        except Exception as e:  # noqa: BLE001
            first = first or e
            row["_trace"] = traceback.format_exc()
    if m is None:
        try:
            m = converter.from_torch(model, (), example)
            row["export"] = f"STATIC ONLY ({_err(first)[:100]})"
        except Exception as e:  # noqa: BLE001
            row["export"] = _err(first)
            row["_trace_static"] = traceback.format_exc() + f"\nstatic: {_err(e)}"
            return row
    row["export"] += f" {time.process_time() - t0:.1f}s"
    if row["export"].startswith("STATIC"):
        sizes = [spec.sizes[0]]
    elif "static batch" in row["export"]:
        sizes = [(spec.sizes[0][0], s) for _, s in spec.sizes[1:]]
    else:
        sizes = list(spec.sizes[1:])
    cases = [spec.inputs(b, s) for b, s in sizes]
    with torch.no_grad():
        wants = [_flat(model(**kw)) for kw in cases]

    def attempt(path: str, fn: Callable[[], float]) -> None:
        if path not in paths:
            return
        try:
            row[path] = f"ok {fn():.1e}"
        except Exception as e:  # noqa: BLE001
            row[path] = _err(e)
            row[f"_trace_{path}"] = traceback.format_exc()

    def jax_path() -> float:
        f = m.to_jax()
        return max(
            _compare(_flat(f(**{k: v.numpy() for k, v in kw.items()})), w)
            for kw, w in zip(cases, wants, strict=True)
        )

    def torch_path() -> float:
        t = m.to_torch()
        with torch.no_grad():
            return max(_compare(_flat(t(**kw)), w) for kw, w in zip(cases, wants, strict=True))

    def reexport_path() -> float:
        t = m.to_torch()
        ep = torch.export.export(t, (), example, dynamic_shapes=t.export_dynamic_shapes())
        g = ep.module()
        with torch.no_grad():
            return max(_compare(_flat(g(**kw)), w) for kw, w in zip(cases, wants, strict=True))

    def onnx_path() -> float:
        import onnxruntime as ort

        sess = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        worst = 0.0
        for kw, w in zip(cases, wants, strict=True):
            got = sess.run(None, {f"kwargs['{k}']": v.numpy() for k, v in kw.items()})
            worst = max(
                worst, _compare({n.removeprefix("outputs"): g for n, g in zip(names, got, strict=True)}, w)
            )
        return worst

    def grad_path() -> float:
        import jax
        import jax.numpy as jnp

        kw = cases[0]
        f = m.to_jax()
        model.zero_grad()
        out = _torch_flat(model(**kw))
        rng = np.random.default_rng(0)
        ws = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32) for k, v in out.items()}
        sum((v * torch.from_numpy(ws[k])).sum() for k, v in out.items()).backward()
        want = {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}
        np_kw = {k: v.numpy() for k, v in kw.items()}

        def loss(params: dict) -> Any:
            flat = _flat_jax(f.apply({**f.params, **params}, **np_kw))
            return sum(jnp.sum(v * ws[k]) for k, v in flat.items())

        got = jax.grad(loss)({n: f.params[n] for n in want})
        worst = 0.0
        for n, w in want.items():
            g = np.asarray(got[n])
            worst = max(worst, float(np.max(np.abs(g - w), initial=0.0)))
            np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4, err_msg=n)
        return worst

    if spec.grad:
        attempt("grad", grad_path)
    attempt("jax", jax_path)
    attempt("torch", torch_path)
    if spec.reexport:
        attempt("reexport", reexport_path)
    attempt("onnx", onnx_path)
    return row


def _torch_flat(out: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    """Floating tensor leaves of a torch output by path (for a loss)."""
    if isinstance(out, Mapping) or hasattr(out, "to_tuple"):
        items = [(f"['{k}']", v) for k, v in out.items()]
    elif isinstance(out, (tuple, list)):
        items = [(f"[{i}]", v) for i, v in enumerate(out)]
    else:
        return {prefix: out} if isinstance(out, torch.Tensor) and out.is_floating_point() else {}
    flat: dict[str, torch.Tensor] = {}
    for k, v in items:
        flat.update(_torch_flat(v, prefix + k))
    return flat


def _flat_jax(out: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(out, Mapping):
        items = [(f"['{k}']", v) for k, v in out.items()]
    elif isinstance(out, (tuple, list)):
        items = [(f"[{i}]", v) for i, v in enumerate(out)]
    else:
        return {prefix: out} if np.issubdtype(out.dtype, np.floating) else {}
    flat: dict[str, Any] = {}
    for k, v in items:
        flat.update(_flat_jax(v, prefix + k))
    return flat


COLUMNS = ("export", "jax", "grad", "torch", "reexport", "onnx")


def main(names: list[str] | None = None, verbose: bool = False) -> dict[str, dict[str, str]]:
    """Run the sweep (``names``: a subset) and print the table; returns the rows."""
    specs = [s for s in _specs() if not names or s.name in names]
    rows = {}
    for spec in specs:
        t0 = time.process_time()
        rows[spec.name] = row = run(spec)
        cells = " | ".join(f"{c}: {row[c]}" for c in COLUMNS if c in row)
        print(f"{spec.name:13s} {time.process_time() - t0:5.1f}s CPU | {cells}", flush=True)
        if verbose:
            for k, v in row.items():
                if k.startswith("_trace"):
                    print(v, file=sys.stderr)
    return rows


if __name__ == "__main__":
    args = sys.argv[1:]
    main([a for a in args if not a.startswith("-")] or None, verbose="-v" in args)
