"""Sweep of real-world ONNX files through ``converter.from_onnx`` and the three backends.

The files are what exporters write, made here without network access: tiny Hugging Face
models (configs only, random weights: BERT, DistilBERT, GPT-2, Llama, T5 encoder, BART, ViT,
Whisper encoder) and small torch modules (a BatchNorm + ``interpolate`` convnet, ``nn.LSTM``,
``nn.GRU``, ``nn.MultiheadAttention``), each exported

- ``dynamo``: ``torch.onnx.export(..., dynamo=True)`` with ``dynamic_shapes`` on batch and
  sequence,
- ``ts13`` / ``ts17``: the TorchScript exporter (``dynamo=False``) at opsets 13 and 17 with
  ``dynamic_axes``,
- ``ort``: the ``ts17`` file after onnxruntime's basic offline graph optimizations (only when
  the result stays in the standard domain),
- ``ext``: the ``ts17`` file saved with its weights as external data,

plus the light models of the onnx wheel with seeded random weights (``examples/onnx_light.py``,
static shapes, variant ``light``).

Each file goes through ``converter.from_onnx`` and then

- ``jax``: ``to_jax()`` against onnxruntime on the file, at two values of each dynamic axis,
- ``torch``: ``to_torch()`` (eager) against onnxruntime at the same sizes; ``export``:
  ``torch.export`` of that module with its dynamic shapes, run at the second size,
- ``onnx``: ``to_onnx()`` run by onnxruntime against onnxruntime on the file.

Every cell is ``ok`` with the largest error relative to the reference's scale
(``max|a - b| / (1 + max|b|)``, float32 tolerance 1e-4), ``FAIL`` with that error, or the
error's class. ``python tests/sweeps/onnx_sweep.py`` runs everything and prints the table (6 CPU
minutes with the exported files cached, more the first time); ``--models bert,lstm
--variants ts17 --paths jax`` narrows it.
Exported files are cached in ``$ONNX_SWEEP_DIR`` (default: a ``onnx_sweep`` directory in the
system's temporary directory). ``SWEEP=onnx pytest tests/sweeps/test_onnx_sweep.py`` runs it as a
test that fails on any cell that is neither ``ok`` nor listed in :data:`EXPECTED`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)  # examples.onnx_light

TOL = 1e-4
SIZES = ((1, 5), (3, 11))  # (batch, sequence) pairs the converted models are run at
EXPORT_SIZE = (2, 8)  # the example inputs' sizes at export
VARIANTS = ("dynamo", "ts13", "ts17", "ort", "ext")
HF_MODELS = ("bert", "distilbert", "gpt2", "llama", "t5enc", "bart", "vit", "whisper")
SMALL_MODELS = ("conv", "lstm", "gru", "mha")
PATHS = ("jax", "torch", "export", "onnx")
EXPORT_ON = ("bert", "gpt2", "conv", "lstm")  # models whose to_torch() is re-exported
_TS = ("ts13", "ts17", "ort", "ext")
#: Cells known to fail, with the reason: ``(model, variant, path) -> reason`` (path ``file``:
#: the exporter or onnxruntime fails on the file itself).
EXPECTED: dict[tuple[str, str, str], str] = {
    **{
        ("bert", v, "export"): (
            "torch.export asks for Dim('seq', max=64): export_dynamic_shapes() does not carry the "
            "position table's shape assertion"
        )
        for v in ("dynamo", *_TS)
    },
    **{
        ("conv", v, "export"): (
            "torch.export's own contiguity checks guard the strided conv's output sizes != 1 and ask "
            "for Dim('h', min=3): export_dynamic_shapes() gives min=0, UserError"
        )
        for v in ("dynamo", *_TS)
    },
    **{
        ("lstm", v, "export"): (
            "the scan over the symbolic sequence slices at its loop counter (tensor data): no "
            "symbolic form under torch.export, OpConversionError (SymbolicSizeError)"
        )
        for v in ("dynamo", *_TS)
    },
    ("mha", "ts13", "file"): "the TorchScript exporter has scaled_dot_product_attention from opset 14",
    **{
        ("mha", v, "file"): "the TorchScript exporter traced MultiheadAttention's sizes: onnxruntime "
        "fails on other sizes (the converted function raises too, the jax cell)"
        for v in ("ts17", "ort", "ext")
    },
}


@dataclass
class Spec:
    """A torch model to export: ``build()`` gives the module, ``inputs(batch, seq)`` a dict of
    named example tensors (in the forward's order), ``dynamic`` the dynamic axes of each input
    (``{name: {axis: "batch" | "seq"}}``)."""

    build: Callable[[], Any]
    inputs: Callable[[int, int], dict[str, Any]]
    dynamic: dict[str, dict[int, str]]
    outputs: list[str] = field(default_factory=lambda: ["out"])


def _first(model, names: list[str]):
    """A wrapper passing its positional inputs to a Hugging Face model by keyword (``names``)
    and returning the first output, a tensor (``last_hidden_state`` / ``logits``)."""
    import torch

    class First(torch.nn.Module):
        varargs = True

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            return self.model(**dict(zip(names, args, strict=True)), return_dict=False)[0]

    return First()


def _ids(vocab: int):
    def make(b: int, s: int) -> dict[str, Any]:
        import torch

        g = torch.Generator().manual_seed(b * 100 + s)
        return {"input_ids": torch.randint(1, vocab, (b, s), generator=g)}

    return make


def _ids_mask(vocab: int):
    def make(b: int, s: int) -> dict[str, Any]:
        import torch

        g = torch.Generator().manual_seed(b * 100 + s)
        mask = torch.ones(b, s, dtype=torch.int64)
        mask[0, s - 2 :] = 0  # padding at the end of the first row
        return {"input_ids": torch.randint(1, vocab, (b, s), generator=g), "attention_mask": mask}

    return make


_BS = {0: "batch", 1: "seq"}
_SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)


def _hf(config_cls, model_cls, names=("input_ids", "attention_mask"), **config):
    def build():
        import torch

        torch.manual_seed(0)
        cfg = config_cls(attn_implementation="eager", **config)
        return _first(model_cls(cfg), list(names)).eval()

    return build


def _specs() -> dict[str, Spec]:
    import torch
    import transformers as tr

    specs: dict[str, Spec] = {}
    specs["bert"] = Spec(
        _hf(tr.BertConfig, tr.BertModel, vocab_size=200, max_position_embeddings=64, **_SMALL),
        _ids_mask(200),
        {"input_ids": _BS, "attention_mask": _BS},
    )
    specs["distilbert"] = Spec(
        _hf(
            tr.DistilBertConfig,
            tr.DistilBertModel,
            vocab_size=200,
            max_position_embeddings=64,
            dim=32,
            n_layers=2,
            n_heads=4,
            hidden_dim=64,
        ),
        _ids_mask(200),
        {"input_ids": _BS, "attention_mask": _BS},
    )
    specs["gpt2"] = Spec(
        _hf(
            tr.GPT2Config,
            tr.GPT2Model,
            vocab_size=200,
            n_positions=64,
            n_embd=32,
            n_layer=2,
            n_head=4,
            use_cache=False,
            bos_token_id=1,
            eos_token_id=2,
        ),
        _ids_mask(200),
        {"input_ids": _BS, "attention_mask": _BS},
    )
    specs["llama"] = Spec(
        _hf(
            tr.LlamaConfig,
            tr.LlamaForCausalLM,
            vocab_size=200,
            max_position_embeddings=64,
            num_key_value_heads=2,
            use_cache=False,
            **_SMALL,
        ),
        _ids_mask(200),
        {"input_ids": _BS, "attention_mask": _BS},
    )
    specs["t5enc"] = Spec(
        _hf(
            tr.T5Config,
            tr.T5EncoderModel,
            vocab_size=200,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            use_cache=False,
        ),
        _ids_mask(200),
        {"input_ids": _BS, "attention_mask": _BS},
    )
    specs["bart"] = Spec(
        _hf(
            tr.BartConfig,
            tr.BartModel,
            vocab_size=200,
            max_position_embeddings=64,
            d_model=32,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            use_cache=False,
        ),
        _ids_mask(200),
        {"input_ids": _BS, "attention_mask": _BS},
    )

    def pixels(b: int, s: int) -> dict[str, Any]:  # the sequence axis is not dynamic for ViT
        g = torch.Generator().manual_seed(b)
        return {"pixel_values": torch.randn(b, 3, 16, 16, generator=g)}

    specs["vit"] = Spec(
        _hf(
            tr.ViTConfig,
            tr.ViTModel,
            ("pixel_values",),
            image_size=16,
            patch_size=4,
            num_channels=3,
            **_SMALL,
        ),
        pixels,
        {"pixel_values": {0: "batch"}},
    )

    def features(b: int, s: int) -> dict[str, Any]:  # Whisper's encoder needs 2 * max_source_positions frames
        g = torch.Generator().manual_seed(b)
        return {"input_features": torch.randn(b, 16, 32, generator=g)}

    specs["whisper"] = Spec(
        _hf(
            tr.WhisperConfig,
            lambda c: tr.WhisperModel(c).get_encoder(),
            ("input_features",),
            vocab_size=200,
            num_mel_bins=16,
            d_model=32,
            encoder_layers=2,
            decoder_layers=1,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            max_source_positions=16,
            max_target_positions=16,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
        ),
        features,
        {"input_features": {0: "batch"}},
    )

    class Conv(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.c2 = torch.nn.Conv2d(8, 4, 3, padding=1, stride=2)
            self.up = torch.nn.Upsample(scale_factor=2, mode="nearest")

        def forward(self, x):
            y = torch.relu(self.bn(self.c1(x)))
            y = self.up(self.c2(y))
            z = torch.nn.functional.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
            return torch.nn.functional.adaptive_avg_pool2d(z, 1).flatten(1) + y.mean((2, 3))

    def conv_build():
        torch.manual_seed(0)
        m = Conv()
        with torch.no_grad():
            m.bn.running_mean.uniform_(-0.5, 0.5)
            m.bn.running_var.uniform_(0.5, 1.5)
        return m.eval()

    def image(b: int, s: int) -> dict[str, Any]:
        g = torch.Generator().manual_seed(b * 100 + s)
        return {"x": torch.randn(b, 3, 2 * s, 2 * s, generator=g)}

    specs["conv"] = Spec(conv_build, image, {"x": {0: "batch", 2: "h", 3: "w"}})

    class Rnn(torch.nn.Module):
        def __init__(self, cell):
            super().__init__()
            self.rnn = cell(8, 16, num_layers=2, batch_first=True, bidirectional=True)
            self.head = torch.nn.Linear(32, 4)

        def forward(self, x):
            return self.head(self.rnn(x)[0])

    def seq(b: int, s: int) -> dict[str, Any]:
        g = torch.Generator().manual_seed(b * 100 + s)
        return {"x": torch.randn(b, s, 8, generator=g)}

    def rnn_build(cell):
        def build():
            torch.manual_seed(0)
            return Rnn(cell).eval()

        return build

    specs["lstm"] = Spec(rnn_build(torch.nn.LSTM), seq, {"x": _BS})
    specs["gru"] = Spec(rnn_build(torch.nn.GRU), seq, {"x": _BS})

    class Mha(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(16, 4, batch_first=True)
            self.norm = torch.nn.LayerNorm(16)

        def forward(self, x):
            return self.norm(x + self.attn(x, x, x, need_weights=False)[0])

    def mha_build():
        torch.manual_seed(0)
        return Mha().eval()

    def tokens(b: int, s: int) -> dict[str, Any]:
        g = torch.Generator().manual_seed(b * 100 + s)
        return {"x": torch.randn(b, s, 16, generator=g)}

    specs["mha"] = Spec(mha_build, tokens, {"x": _BS})
    return specs


def cache_dir() -> str:
    d = os.environ.get("ONNX_SWEEP_DIR") or os.path.join(tempfile.gettempdir(), "onnx_sweep")
    os.makedirs(d, exist_ok=True)
    return d


@contextlib.contextmanager
def _quiet():
    """Hold back the exporters' prints and warnings."""
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        warnings.simplefilter("ignore")
        yield


def export(name: str, spec: Spec, variant: str) -> str:
    """The path of ``name`` exported as ``variant`` (written once, then cached)."""
    import onnx
    import torch

    d = cache_dir()
    path = os.path.join(d, f"{name}.{variant}.onnx")
    if os.path.exists(path):
        return path
    if variant in ("ort", "ext"):
        base = export(name, spec, "ts17")
        tmp = path + ".tmp"
        if variant == "ort":
            import onnxruntime as ort

            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            so.optimized_model_filepath = tmp
            ort.InferenceSession(base, so, providers=["CPUExecutionProvider"])
            model = onnx.load(tmp)
            os.remove(tmp)
            domains = {n.domain for n in model.graph.node} - {"", "ai.onnx"}
            if domains:
                raise RuntimeError(f"onnxruntime's basic optimizations left domains {sorted(domains)}")
            onnx.save(model, path)
        else:
            model = onnx.load(base)
            data = f"{name}.ext.onnx.data"
            onnx.save_model(
                model,
                path,
                save_as_external_data=True,
                all_tensors_to_one_file=True,
                location=data,
                size_threshold=0,
            )
        return path
    model = spec.build()
    inputs = spec.inputs(*EXPORT_SIZE)
    args = tuple(inputs.values())
    tmp = path + ".tmp.onnx"
    # Grad mode on: under no_grad an eval nn.MultiheadAttention takes its fast path,
    # aten::_native_multi_head_attention, which the TorchScript exporter refuses.
    with _quiet():
        if variant == "dynamo":
            # Dim.AUTO: the exporter keeps dynamic what the model allows (torch.export
            # specializes an LSTM's sequence length, for one) and names the dimensions itself.
            shapes = {k: {a: torch.export.Dim.AUTO for a in ax} for k, ax in spec.dynamic.items()}
            specs = tuple(shapes[k] for k in inputs)
            if getattr(model, "varargs", False):  # forward(*args)
                specs = {"args": specs}
            prog = torch.onnx.export(
                model,
                args,
                dynamic_shapes=specs,
                dynamo=True,
                input_names=list(inputs),
                output_names=spec.outputs,
            )
            prog.save(tmp)
        else:
            torch.onnx.export(
                model,
                args,
                tmp,
                dynamo=False,
                opset_version=int(variant[2:]),
                input_names=list(inputs),
                output_names=spec.outputs,
                dynamic_axes=dict(spec.dynamic),
            )
    model_proto = onnx.load(tmp)
    os.remove(tmp)
    onnx.save(model_proto, path)
    return path


def light_path(name: str) -> str:
    """The light model ``name`` with seeded random weights, written once."""
    import onnx

    from examples import onnx_light

    path = os.path.join(cache_dir(), f"{name}.light.onnx")
    if not os.path.exists(path):
        onnx.save(onnx_light.load(name), path)
    return path


def _feeds(spec: Spec, path: str) -> list[dict[str, np.ndarray]]:
    """Inputs at each of :data:`SIZES`, keeping the export size on an axis that the file
    made static (a ``dynamo`` export specializes what the model does not allow dynamic)."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    static: set[str] = set()
    for vi in graph.input:
        for axis, name in spec.dynamic.get(vi.name, {}).items():
            if vi.type.tensor_type.shape.dim[axis].HasField("dim_value"):
                static.add("batch" if name == "batch" else "seq")
    sizes = [
        (EXPORT_SIZE[0] if "batch" in static else b, EXPORT_SIZE[1] if "seq" in static else s)
        for b, s in SIZES
    ]
    return [{k: v.numpy() for k, v in spec.inputs(b, s).items()} for b, s in sizes]


def _err(got: Any, want: np.ndarray) -> float:
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError(f"shape {got.shape} != {want.shape}")
    if want.size == 0:
        return 0.0
    if want.dtype.kind in "iub":
        return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
    return float(np.max(np.abs(got.astype(np.float64) - want)) / (1.0 + np.max(np.abs(want))))


def _worst(outs: Any, refs: list[np.ndarray]) -> float:
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    if len(outs) != len(refs):
        raise AssertionError(f"{len(outs)} outputs, onnxruntime gives {len(refs)}")
    return max(
        _err(np.asarray(o.detach() if hasattr(o, "detach") else o), r)
        for o, r in zip(outs, refs, strict=True)
    )


def _cell(fn: Callable[[], float]) -> tuple[str, str]:
    """Run one check: ``("ok" | "FAIL" | error class, detail)``."""
    t = time.process_time()
    try:
        err = fn()
    except Exception as e:  # noqa: BLE001 - the sweep records every failure
        msg = f"{type(e).__name__}: {' | '.join(str(e).splitlines()[:4])}"[:400]
        if os.environ.get("ONNX_SWEEP_TRACE"):
            traceback.print_exc()
        return type(e).__name__, msg
    cpu = time.process_time() - t
    return ("ok" if err <= TOL else "FAIL"), f"{err:.1e} ({cpu:.0f}s)"


def _refuses(path: str, names: list[str], feeds: list[dict[str, np.ndarray]]) -> float:
    """0.0 when the converted JAX function (or the conversion) raises on some feed that
    onnxruntime fails on too; an AssertionError when it returns numbers there."""
    import converter

    for feed in feeds:
        try:
            converter.from_onnx(path).to_jax()(*[feed[k] for k in names])
        except converter.ConversionError:
            return 0.0
    raise AssertionError("returns outputs where onnxruntime fails")


def run_file(path: str, feeds: list[dict[str, np.ndarray]], paths: tuple[str, ...], reexport: bool) -> dict:
    """Every path of ``paths`` on the ONNX file ``path``, each feed compared with onnxruntime."""
    import onnxruntime as ort
    import torch

    import converter

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feeds = [{k: f[k] for k in names} for f in feeds]
    try:
        refs = [sess.run(None, f) for f in feeds]
    except Exception as e:  # noqa: BLE001 - a file dynamic in name only (traced constant sizes)
        return {
            "file": ("OnnxruntimeFails", f"onnxruntime fails on the file: {str(e)[:300]}"),
            "jax": _cell(lambda: _refuses(path, names, feeds)),
        }
    row: dict[str, tuple[str, str]] = {}
    mod: list[Any] = []

    def convert() -> float:
        mod.append(converter.from_onnx(path))
        return 0.0

    row["from_onnx"] = _cell(convert)
    if not mod:
        return row
    m = mod[0]
    if "jax" in paths:

        def jax_path() -> float:
            f = m.to_jax()
            return max(
                _worst(f(*[feed[k] for k in names]), ref) for feed, ref in zip(feeds, refs, strict=True)
            )

        row["jax"] = _cell(jax_path)
    tm: list[Any] = []
    if "torch" in paths or "export" in paths:

        def torch_path() -> float:
            t = m.to_torch()
            tm.append(t)
            with torch.no_grad():
                return max(
                    _worst(t(*[torch.from_numpy(feed[k]) for k in names]), ref)
                    for feed, ref in zip(feeds, refs, strict=True)
                )

        row["torch"] = _cell(torch_path)
    if "export" in paths and reexport and tm:

        def export_path() -> float:
            t = tm[0]
            # exported at the larger size (torch.export specializes an example's size-1
            # dimensions), run at the other
            args = tuple(torch.from_numpy(feeds[-1][k]) for k in names)
            ep = torch.export.export(t, args, dynamic_shapes=t.export_dynamic_shapes())
            with torch.no_grad():
                got = ep.module()(*[torch.from_numpy(feeds[0][k]) for k in names])
            return _worst(got, refs[0])

        row["export"] = _cell(export_path)
    if "onnx" in paths:

        def onnx_path() -> float:
            proto = m.to_onnx()
            s2 = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
            n2 = [i.name for i in s2.get_inputs()]
            if len(n2) != len(names):
                raise AssertionError(f"to_onnx inputs {n2}, source {names}")
            return max(
                _worst(s2.run(None, {a: feed[b] for a, b in zip(n2, names, strict=True)}), ref)
                for feed, ref in zip(feeds, refs, strict=True)
            )

        row["onnx"] = _cell(onnx_path)
    return row


def _light_feeds(path: str) -> list[dict[str, np.ndarray]]:
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    return [{i.name: rng.standard_normal(i.shape).astype(np.float32) for i in sess.get_inputs()}]


def _say(out, name: str, variant: str, path: str, status: str, detail: str) -> None:
    print(f"{name:12s} {variant:7s} {path:9s} {status:6s} {detail}", file=out, flush=True)


def sweep(models: list[str], variants: list[str], paths: tuple[str, ...], out=sys.stdout) -> dict:
    """Run the sweep, printing one line per cell as it goes; returns ``{(model, variant): row}``
    with ``row[path] = (status, detail)`` (``row["file"]`` when the file could not be made)."""
    from examples import onnx_light

    specs = _specs()
    results: dict[tuple[str, str], dict] = {}
    for name in models:
        if name in onnx_light.NAMES:
            jobs = [("light", lambda n=name: light_path(n))]
        else:
            jobs = [(v, lambda n=name, v=v: export(n, specs[n], v)) for v in variants]
        for variant, make in jobs:
            t = time.process_time()
            try:
                with _quiet():
                    path = make()
            except Exception as e:  # noqa: BLE001 - an exporter failure is a row too
                results[name, variant] = {"file": (type(e).__name__, str(e).splitlines()[0][:200])}
                _say(out, name, variant, "file", type(e).__name__, str(e)[:200])
                continue
            if variant == "light":
                feeds, reexport = _light_feeds(path), False
            else:
                feeds, reexport = _feeds(specs[name], path), name in EXPORT_ON
            row = run_file(path, feeds, paths, reexport)
            results[name, variant] = row
            for p, (status, detail) in row.items():
                _say(out, name, variant, p, status, detail)
            _say(out, name, variant, "cpu", "", f"{time.process_time() - t:.0f}s")
    return results


def _short(column: str, status: str, detail: str) -> str:
    if status == "ok":
        return "ok" if column == "from_onnx" else f"ok {detail.split(' ')[0]}"
    return f"FAIL {detail.split(' ')[0]}" if status == "FAIL" else status


def table(results: dict) -> str:
    """The results as a markdown table: one row per file, one column per path (``ok`` with
    the error, ``FAIL`` with it, or the error class; ``file: <class>`` when the exporter
    failed; ``*`` marks a cell listed in :data:`EXPECTED`)."""
    cols = ["from_onnx", *PATHS]
    lines = ["| model | file | " + " | ".join(cols) + " |", "|---" * (len(cols) + 2) + "|"]
    for (name, variant), row in results.items():
        cells = [
            _short(c, *row[c]) + (" *" if (name, variant, c) in EXPECTED else "") if c in row else ""
            for c in cols
        ]
        if "file" in row:
            cells[0] = f"file: {row['file'][0]}" + (" *" if (name, variant, "file") in EXPECTED else "")
        lines.append(f"| {name} | {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def unexpected(results: dict) -> list[str]:
    """Cells that are neither ``ok`` nor listed in :data:`EXPECTED` (a failing exporter
    counts only when listed as ``(model, variant, "file")``), and listed cells that pass."""
    bad = []
    for (name, variant), row in results.items():
        for column, (status, detail) in row.items():
            listed = (name, variant, column) in EXPECTED
            if status != "ok" and not listed:
                bad.append(f"{name}/{variant}/{column}: {detail}")
            elif status == "ok" and listed:
                bad.append(f"{name}/{variant}/{column}: passes but is listed in EXPECTED")
    return bad


def all_models() -> list[str]:
    from examples import onnx_light

    return [*HF_MODELS, *SMALL_MODELS, *onnx_light.NAMES]


def main(argv: list[str] | None = None) -> int:
    """``python tests/sweeps/onnx_sweep.py [--models a,b] [--variants ...] [--paths ...]``: prints
    the table; exit status 1 when a cell is unexpected (:func:`unexpected`)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(all_models()))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--paths", default=",".join(PATHS))
    a = p.parse_args(argv)
    results = sweep(a.models.split(","), a.variants.split(","), tuple(a.paths.split(",")))
    print(table(results))
    bad = unexpected(results)
    for line in bad:
        print("unexpected:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    sys.exit(main())
