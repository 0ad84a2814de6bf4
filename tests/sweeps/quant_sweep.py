"""Sweep of low-precision and quantized programs through ``converter`` and every backend.

ONNX files as onnxruntime's own tools write them, from the TorchScript exports of the ONNX
sweep (``tests/sweeps/onnx_sweep.py``: tiny BERT and GPT-2, the BatchNorm convnet ``conv``, the
bidirectional 2-layer ``lstm``):

- ``float``: the exported file;
- ``dyn`` / ``dyn-u8`` / ``dyn-pc``: ``quantize_dynamic`` (DynamicQuantizeLinear +
  MatMulInteger / ConvInteger): int8 weights, uint8 weights, int8 per channel;
- ``qdq`` / ``qdq-s8`` / ``qdq-16`` / ``qop``: ``quantize_static`` with a small calibration
  reader: QDQ format (QuantizeLinear/DequantizeLinear pairs) with uint8, int8 and int16
  activations, and QOperator format (QLinearConv, QLinearMatMul, com.microsoft QLinearAdd,
  QGemm, QLinearSoftmax..., per channel);
- ``fp16`` / ``fp16-io``: ``convert_float_to_float16`` with ``keep_io_types`` True / False;
- ``opt`` / ``opt-fp16`` / ``opt99``: ``onnxruntime.transformers.optimizer.optimize_model``
  (com.microsoft Attention, EmbedLayerNormalization, SkipLayerNormalization, BiasGelu,
  FastGelu...), then float16; ``opt99`` with onnxruntime's own offline fusions too.

Each file goes through ``from_onnx`` and ``to_jax`` / ``to_torch`` / ``to_onnx`` (run by
onnxruntime) against onnxruntime on the file, at two sizes (float16 within 2e-2, quantized
within 2e-2 of the output scale, float within 1e-4). The quantized files' reference is
onnxruntime *without* its graph optimizations, the file's own semantics: its default session
fuses QDQ groups into integer kernels that round differently (column ``ort-opt``: how far its
default session is from that reference). The ``int`` column compares every integer-typed
intermediate value of the file (each quantized activation and integer accumulator, made
graph outputs) between ``to_jax`` and onnxruntime: ``ok`` when no element differs by more
than 1 (4 for the 16-bit ``qdq-16``): a rounding at a half flipped by float noise upstream
(exact integer semantics are the focused tests' job, ``tests/frontends/onnx/test_quantize.py``
and ``test_contrib.py``).

Torch rows: modules in bfloat16/float16 (linear, layer_norm, softmax, sum, mean, bmm; a tiny
GPT-2 ``.to(torch.bfloat16)``), casts to int8/uint8/int32 and float8, ``torch._int_mm``,
``torch.ao`` dynamic int8 Linear, through ``from_torch`` → ``to_jax`` / ``to_torch`` /
``to_onnx`` against eager torch. JAX rows: a bfloat16 Flax MLP, ``dot_general`` with and
without ``preferred_element_type`` on bf16 and int8, an int8 → int32 convolution, float →
int casts, against ``jax.jit``. Their cells show the error over the output dtype's tolerance
(:data:`DTYPE_TOLS`; integers exactly): ``ok`` at most 1.

Cells: ``ok`` with the error, ``FAIL`` with it, or the error class; ``*`` marks a cell listed
in :data:`EXPECTED` with its reason. ``python tests/sweeps/quant_sweep.py [--rows onnx:bert,jax:]``
prints the table (``QUANT_SWEEP_TRACE=1``: tracebacks); ``SWEEP=quant pytest
tests/sweeps/test_quant_sweep.py -s`` runs it as a test. Files are cached with the ONNX sweep's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests.sweeps import onnx_sweep  # noqa: E402

ONNX_MODELS = ("bert", "gpt2", "conv", "lstm")
ONNX_VARIANTS = (
    "float", "dyn", "dyn-u8", "dyn-pc", "qdq", "qdq-s8", "qdq-16", "qop",
    "fp16", "fp16-io", "opt", "opt-fp16", "opt99",
)  # fmt: skip
#: Variants whose reference is onnxruntime without its graph optimizations: onnxruntime runs
#: QDQ groups (DequantizeLinear -> op -> QuantizeLinear) as fused integer kernels with their
#: own rounding, an approximation of the file's semantics (the ``ort-opt`` column: how far).
QUANTIZED = ("dyn", "dyn-u8", "dyn-pc", "qdq", "qdq-s8", "qdq-16", "qop")
ONNX_PATHS = ("from_onnx", "jax", "torch", "onnx", "int")
TOLS = {"float": 1e-4, "fp16": 2e-2, "quant": 2e-2}
#: Cells known to fail, with the reason: ``(row, path) -> reason``.
_WRAP = (
    "eager torch on x86 wraps out-of-range float -> int casts (200.0 -> int8 -56, -1.5 -> uint8 255, "
    "1e10 -> int32 -2**31: C++ undefined behaviour; torch on CUDA and ARM saturates); every backend "
    "follows XLA: saturate, NaN -> 0"
)
EXPECTED: dict[tuple[str, str], str] = {
    **{("torch:cast-int", p): _WRAP for p in ("jax", "torch", "onnx")},
    **{
        (f"onnx:lstm:{v}", "int"): (
            "onnxruntime's DynamicQuantizeLSTM also quantizes the LSTM's activations to uint8 (the "
            "converter dequantizes the weights only): outputs within 1e-3, so the head's int32 "
            "accumulators downstream differ by hundreds"
        )
        for v in ("dyn", "dyn-u8", "dyn-pc")
    },
    **{
        (f"{k}:cast-fp8", "onnx"): "to_onnx has no float8 types: OpConversionError naming the convert"
        for k in ("torch", "jax")
    },
    ("torch:ao-dynamic-int8", "convert"): (
        "torch.export fails on torch.ao's packed quantized Linear (LinearPackedParamsBase): ExportError"
    ),
}


def _tol(variant: str) -> float:
    if "fp16" in variant:
        return TOLS["fp16"]
    if variant in QUANTIZED:
        return TOLS["quant"]
    return TOLS["float"]


class _Reader:
    """A calibration reader over a few seeded example inputs."""

    def __init__(self, feeds: list[dict[str, np.ndarray]]):
        self._it = iter(feeds)

    def get_next(self):
        return next(self._it, None)


def _onnx_base(name: str) -> tuple[str, onnx_sweep.Spec]:
    spec = onnx_sweep._specs()[name]
    return onnx_sweep.export(name, spec, "ts17"), spec


def onnx_file(name: str, variant: str) -> str:
    """The ``ts17`` export of ``name`` after ``variant`` (written once to the sweep's cache)."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    base, spec = _onnx_base(name)
    if variant == "float":
        return base
    path = os.path.join(onnx_sweep.cache_dir(), f"{name}.{variant}.q.onnx")
    if os.path.exists(path):
        return path
    with onnx_sweep._quiet():
        if variant in ("dyn", "dyn-u8", "dyn-pc"):
            weights = QuantType.QUInt8 if variant == "dyn-u8" else QuantType.QInt8
            quantize_dynamic(base, path, per_channel=variant == "dyn-pc", weight_type=weights)
        elif variant in ("qdq", "qdq-s8", "qdq-16", "qop"):
            feeds = [{k: v.numpy() for k, v in spec.inputs(2, 8).items()}]
            feeds += [{k: v.numpy() for k, v in spec.inputs(3, 6).items()}]
            assert issubclass(_Reader, object) and CalibrationDataReader
            quantize_static(
                base,
                path,
                _Reader(feeds),
                quant_format=QuantFormat.QOperator if variant == "qop" else QuantFormat.QDQ,
                activation_type={"qdq-s8": QuantType.QInt8, "qdq-16": QuantType.QInt16}.get(
                    variant, QuantType.QUInt8
                ),
                weight_type=QuantType.QInt8,
                per_channel=variant == "qop",
            )
        elif variant in ("fp16", "fp16-io"):
            from onnxruntime.transformers.float16 import convert_float_to_float16

            model = convert_float_to_float16(onnx.load(base), keep_io_types=variant == "fp16")
            onnx.save(model, path)
        elif variant in ("opt", "opt-fp16", "opt99"):
            from onnxruntime.transformers.optimizer import optimize_model

            kind = {"bert": "bert", "gpt2": "gpt2"}.get(name)
            if kind is None:
                raise NotImplementedError(f"optimize_model has no model type for {name}")
            level = 99 if variant == "opt99" else None  # 99: onnxruntime's own fusions too
            opt = optimize_model(
                base, model_type=kind, num_heads=4, hidden_size=32, opt_level=level, use_gpu=False
            )
            if variant == "opt-fp16":
                opt.convert_float_to_float16(keep_io_types=True)
            opt.save_model_to_file(path)
        else:
            raise ValueError(variant)
    return path


def _session(path_or_bytes, optimize: bool = True):
    """An onnxruntime CPU session on one thread; ``optimize=False`` turns off its graph
    optimizations (which run QDQ groups such as DequantizeLinear → Resize → QuantizeLinear as
    one integer kernel with its own rounding: the file's own semantics are the unfused ones)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path_or_bytes, so, providers=["CPUExecutionProvider"])


_ORT_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64}


def _feeds(sess, spec: onnx_sweep.Spec, path: str) -> list[dict[str, np.ndarray]]:
    feeds = onnx_sweep._feeds(spec, path)
    types = {i.name: _ORT_DTYPES.get(i.type) for i in sess.get_inputs()}
    return [{k: v.astype(types[k]) if types.get(k) else v for k, v in f.items() if k in types} for f in feeds]


def _with_int_outputs(path: str) -> tuple[bytes, list[str]]:
    """The model at ``path`` with every integer-typed intermediate value (not an input,
    initializer or output) as an extra graph output; the names added."""
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(path))
    g = model.graph
    skip = {i.name for i in g.input} | {i.name for i in g.initializer} | {o.name for o in g.output}
    ints = {
        onnx.TensorProto.INT8,
        onnx.TensorProto.UINT8,
        onnx.TensorProto.INT32,
        onnx.TensorProto.INT16,
        onnx.TensorProto.UINT16,
    }
    producers = {o for n in g.node if n.op_type not in ("Constant", "Shape") for o in n.output}
    added = []
    for vi in g.value_info:
        if vi.name in skip or vi.name not in producers:
            continue
        if vi.type.tensor_type.elem_type in ints and vi.type.tensor_type.HasField("shape"):
            g.output.append(vi)
            added.append(vi.name)
    return model.SerializeToString(), added


def _int_err(got: list, want: list) -> float:
    """Largest integer difference over the values (a 1 is a rounding at a half flipped by
    float noise upstream: bilinear weights of 1/4 put many values on halves)."""
    worst = 0.0
    for a, b in zip(got, want, strict=True):
        a = np.asarray(a).astype(np.int64)
        b = np.asarray(b).astype(np.int64)
        if a.shape != b.shape:
            raise AssertionError(f"shape {a.shape} != {b.shape}")
        worst = max(worst, float(np.abs(a - b).max(initial=0)))
    return worst


def _cell(fn: Callable[[], float], tol: float) -> tuple[str, str]:
    t = time.process_time()
    try:
        err = fn()
    except Exception as e:  # noqa: BLE001 - the sweep records every failure
        if os.environ.get("QUANT_SWEEP_TRACE"):
            traceback.print_exc()
        return type(e).__name__, f"{type(e).__name__}: {' | '.join(str(e).splitlines()[:4])}"[:400]
    return ("ok" if err <= tol else "FAIL"), f"{err:.1e} ({time.process_time() - t:.0f}s)"


def run_onnx(name: str, variant: str, paths: tuple[str, ...] = ONNX_PATHS) -> dict[str, tuple[str, str]]:
    """Every path of one quantized/low-precision file against onnxruntime."""
    import torch

    import converter

    tol = _tol(variant)
    row: dict[str, tuple[str, str]] = {}
    try:
        with onnx_sweep._quiet():
            path = onnx_file(name, variant)
    except Exception as e:  # noqa: BLE001 - a tool failing on the file is a row too
        return {"file": (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")}
    sess = _session(path, optimize=variant not in QUANTIZED)
    _, spec = _onnx_base(name)
    names = [i.name for i in sess.get_inputs()]
    feeds = _feeds(sess, spec, path)
    refs = [sess.run(None, f) for f in feeds]
    if variant in QUANTIZED:
        fused = _session(path)
        row["ort-opt"] = _cell(
            lambda: max(onnx_sweep._worst(fused.run(None, f), r) for f, r in zip(feeds, refs, strict=True)),
            1.0,
        )
    mod: list[Any] = []

    def convert() -> float:
        mod.append(converter.from_onnx(path))
        return 0.0

    row["from_onnx"] = _cell(convert, tol)
    if not mod:
        return row
    m = mod[0]
    if "jax" in paths:
        row["jax"] = _cell(
            lambda: max(
                onnx_sweep._worst(m.to_jax()(*[f[k] for k in names]), r)
                for f, r in zip(feeds, refs, strict=True)
            ),
            tol,
        )
    if "torch" in paths:

        def torch_path() -> float:
            t = m.to_torch()
            with torch.no_grad():
                return max(
                    onnx_sweep._worst(t(*[torch.from_numpy(f[k]) for k in names]), r)
                    for f, r in zip(feeds, refs, strict=True)
                )

        row["torch"] = _cell(torch_path, tol)
    if "onnx" in paths:

        def onnx_path() -> float:
            s2 = _session(m.to_onnx().SerializeToString())
            n2 = [i.name for i in s2.get_inputs()]
            return max(
                onnx_sweep._worst(s2.run(None, {a: f[b] for a, b in zip(n2, names, strict=True)}), r)
                for f, r in zip(feeds, refs, strict=True)
            )

        row["onnx"] = _cell(onnx_path, tol)
    if "int" in paths:
        data, added = _with_int_outputs(path)
        if added:

            def int_path() -> float:
                s = _session(data, optimize=False)
                n_out = len(s.get_outputs())
                mi = converter.from_onnx(data).to_jax()
                worst = 0.0
                for f in feeds:
                    want = s.run(None, f)[n_out - len(added) :]
                    got = mi(*[f[k] for k in names])
                    got = list(got)[n_out - len(added) :]
                    worst = max(worst, _int_err(got, want))
                return worst

            # 16-bit steps are 256x finer: float noise upstream (Erf, Exp) moves a few steps
            row["int"] = _cell(int_path, 4.0 if variant == "qdq-16" else 1.0)
    return row


# --- torch and JAX low precision: programs run by their source framework ---

#: Tolerance per output dtype: the error is ``max|a - b| / (1 + max|b|)``, NaNs at the same
#: places; integer outputs exactly.
DTYPE_TOLS = {"bfloat16": 1.6e-2, "float16": 2e-3, "float32": 1e-5, "float64": 1e-12}


def _np(v) -> np.ndarray:
    import ml_dtypes
    import torch

    if isinstance(v, torch.Tensor):
        v = v.detach()
        if v.dtype == torch.bfloat16:
            return v.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        if v.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            return v.float().numpy()
        return v.numpy()
    return np.asarray(v)


def _to_torch(v):
    import ml_dtypes
    import torch

    v = np.asarray(v)
    if v.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(v.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(v.copy())


def _close(got, want) -> float:
    """The error of ``got`` against ``want`` (leaves of equal count), scaled to the
    tolerance of each leaf's dtype: ``<= 1`` is within it."""
    import jax

    gl, wl = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    if len(gl) != len(wl):
        raise AssertionError(f"{len(gl)} outputs, the source gives {len(wl)}")
    worst = 0.0
    for g, w in zip(gl, wl, strict=True):
        g, w = _np(g), _np(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            raise AssertionError(f"{g.dtype}{list(g.shape)}, the source gives {w.dtype}{list(w.shape)}")
        gf, wf = g.astype(np.float64), w.astype(np.float64)
        if not np.array_equal(np.isnan(gf), np.isnan(wf)):
            return float("inf")
        ok = ~np.isnan(wf)
        if not ok.any():
            continue
        d = np.abs(gf[ok] - wf[ok])
        if w.dtype.kind in "iub":
            worst = max(worst, float(d.max()) * 1e9)  # any difference fails
            continue
        tol = DTYPE_TOLS.get(w.dtype.name, 1e-5)
        inf = np.isinf(wf[ok])
        if not np.array_equal(gf[ok][inf], wf[ok][inf]):
            return float("inf")
        fin = ~inf
        scale = 1.0 + (np.abs(wf[ok][fin]).max() if fin.any() else 0.0)
        worst = max(worst, float(d[fin].max(initial=0.0)) / scale / tol)
    return worst


def _ort_run(proto, args) -> list:
    """``proto`` run by onnxruntime on NumPy ``args`` (bfloat16 through its bits)."""
    from tests.backends.onnx.helpers import numpy_of, ort_value

    sess = _session(proto.SerializeToString())
    feeds = {i.name: ort_value(np.asarray(a)) for i, a in zip(sess.get_inputs(), args, strict=True)}
    return [numpy_of(v) for v in sess.run_with_ort_values(None, feeds)]


def _torch_programs() -> dict[str, Callable[[], tuple[Any, tuple]]]:
    """``name -> () -> (module, example args)`` of the torch rows."""
    import torch

    class Ops(torch.nn.Module):
        """Ops whose accumulation dtype matters: matmul, sum, mean, softmax, layer_norm."""

        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 64)
            self.ln = torch.nn.LayerNorm(64)

        def forward(self, x):
            h = self.ln(self.lin(x))
            p = torch.softmax(h * 4, -1)
            return h.sum(-1), x.mean((1, 2)), p @ self.lin.weight, torch.bmm(x, x.transpose(1, 2)).sum(0)

    def ops(dtype):
        def make():
            torch.manual_seed(0)
            return Ops().to(dtype).eval(), ((torch.randn(4, 8, 64) * 3).to(dtype),)

        return make

    class Nn(torch.nn.Module):
        """Reductions and normalizations torch computes in float32 for low-precision inputs."""

        def forward(self, q, k, v):
            f = torch.nn.functional
            return (
                f.scaled_dot_product_attention(q, k, v, is_causal=True),
                f.log_softmax(q, -1), q.cumsum(-1), q.var(-1), torch.linalg.vector_norm(q, dim=-1),
                f.gelu(q, approximate="tanh"), q.prod(-1), torch.logsumexp(q, -1), f.rms_norm(q, (16,)),
                f.group_norm(q, 2),
            )  # fmt: skip

    def nn(dtype):
        def make():
            g = torch.Generator().manual_seed(0)
            return Nn(), tuple((torch.randn(2, 4, 64, 16, generator=g) * 2).to(dtype) for _ in range(3))

        return make

    def gpt2_bf16():
        import transformers as tr

        torch.manual_seed(0)
        cfg = tr.GPT2Config(
            n_layer=2, n_embd=32, n_head=4, vocab_size=100, n_positions=32, use_cache=False,
            attn_implementation="eager", bos_token_id=1, eos_token_id=2,
        )  # fmt: skip
        model = onnx_sweep._first(tr.GPT2LMHeadModel(cfg), ["input_ids"]).to(torch.bfloat16).eval()
        return model, (torch.randint(0, 100, (2, 8)),)

    class Casts(torch.nn.Module):
        def forward(self, x):
            return x.to(torch.int8), x.to(torch.uint8), x.to(torch.int32)

    class Fp8(torch.nn.Module):
        def forward(self, x):
            return (
                x.to(torch.float8_e4m3fn).float(),
                x.to(torch.float8_e5m2).float(),
                x.bfloat16().to(torch.float8_e4m3fn).float(),
            )

    big = torch.tensor([0.3, 1.5, 2.5, -0.5, 127.4, 128.6, 200.0, 300.0, -129.0, -200.0, 1e10, float("nan")])
    fp8 = torch.tensor([0.1, -3.3, 448.0, 464.0, 500.0, -1e5, 57344.0, 61440.0, float("inf"), float("nan")])

    class IntMM(torch.nn.Module):
        def forward(self, a, b):
            return torch._int_mm(a, b)

    def int_mm():
        g = torch.Generator().manual_seed(0)
        a = torch.randint(-128, 128, (32, 64), dtype=torch.int8, generator=g)
        return IntMM(), (a, torch.randint(-128, 128, (64, 32), dtype=torch.int8, generator=g))

    def ao_dynamic():
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
        q = torch.ao.quantization.quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8)
        return q, (torch.randn(4, 16),)

    return {
        "ops-bf16": ops(torch.bfloat16),
        "ops-fp16": ops(torch.float16),
        "nn-bf16": nn(torch.bfloat16),
        "nn-fp16": nn(torch.float16),
        "gpt2-bf16": gpt2_bf16,
        "cast-int": lambda: (Casts(), (big,)),
        "cast-fp8": lambda: (Fp8(), (fp8,)),
        "int-mm": int_mm,
        "ao-dynamic-int8": ao_dynamic,
    }


def _jax_programs() -> dict[str, Callable[[], tuple[Callable, tuple]]]:
    """``name -> () -> (function, example args)`` of the JAX rows."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def flax_bf16():
        import flax.linen as nn

        class Mlp(nn.Module):
            @nn.compact
            def __call__(self, x):
                h = nn.Dense(64, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)(x)
                h = nn.LayerNorm(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)(nn.gelu(h))
                return nn.Dense(16, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)(h).sum(0)

        x = jax.random.normal(jax.random.key(0), (8, 32), jnp.bfloat16) * 2
        params = Mlp().init(jax.random.key(1), x)
        return (lambda p, x: Mlp().apply(p, x)), (params, x)

    def dot(a_dtype, pref):
        def make():
            k1, k2 = jax.random.split(jax.random.key(0))
            if jnp.issubdtype(a_dtype, jnp.integer):
                a = jax.random.randint(k1, (16, 64), -128, 128).astype(a_dtype)
                b = jax.random.randint(k2, (64, 8), -128, 128).astype(a_dtype)
            else:
                a = (jax.random.normal(k1, (16, 64)) * 3).astype(a_dtype)
                b = (jax.random.normal(k2, (64, 8)) * 3).astype(a_dtype)
            dims = (((1,), (0,)), ((), ()))
            return (lambda a, b: lax.dot_general(a, b, dims, preferred_element_type=pref)), (a, b)

        return make

    def conv_int8():
        k1, k2 = jax.random.split(jax.random.key(0))
        x = jax.random.randint(k1, (2, 3, 8, 8), -128, 128).astype(jnp.int8)
        w = jax.random.randint(k2, (4, 3, 3, 3), -128, 128).astype(jnp.int8)
        return (
            lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", preferred_element_type=jnp.int32)
        ), (x, w)

    def cast_int():
        x = jnp.array([0.5, -1.5, 128.6, 200.0, 300.0, -200.0, 1e10, jnp.nan], jnp.float32)
        return (lambda x: (x.astype(jnp.int8), x.astype(jnp.uint8), x.astype(jnp.int32))), (x,)

    def cast_fp8():
        x = jnp.array([0.1, 448.0, 464.0, 465.0, -500.0, jnp.inf, jnp.nan, 6e4, 1e6], jnp.float32)
        return (
            lambda x: tuple(x.astype(t).astype(jnp.float32) for t in (jnp.float8_e4m3fn, jnp.float8_e5m2))
        ), (x,)

    return {
        "flax-mlp-bf16": flax_bf16,
        "dot-bf16-f32": dot(jnp.bfloat16, jnp.float32),
        "dot-bf16-bf16": dot(jnp.bfloat16, None),
        "dot-int8-i32": dot(jnp.int8, jnp.int32),
        "dot-int8-i8": dot(jnp.int8, None),
        "conv-int8-i32": conv_int8,
        "cast-int": cast_int,
        "cast-fp8": cast_fp8,
    }


LP_PATHS = ("convert", "jax", "torch", "onnx")


def run_torch(name: str) -> dict[str, tuple[str, str]]:
    """A torch row: ``from_torch`` → to_jax / to_torch / to_onnx against eager torch."""
    import torch

    import converter

    module, args = _torch_programs()[name]()
    with torch.no_grad():
        want = module(*args)
    nargs = [_np(a) for a in args]
    mod: list[Any] = []

    def convert() -> float:
        mod.append(converter.from_torch(module, args))
        return 0.0

    row = {"convert": _cell(convert, 1.0)}
    if not mod:
        return row
    m = mod[0]
    row["jax"] = _cell(lambda: _close(m.to_jax()(*nargs), want), 1.0)

    def torch_path() -> float:
        with torch.no_grad():
            return _close(m.to_torch()(*args), want)

    row["torch"] = _cell(torch_path, 1.0)
    row["onnx"] = _cell(lambda: _close(_ort_run(m.to_onnx(), nargs), want), 1.0)
    return row


def run_jax(name: str) -> dict[str, tuple[str, str]]:
    """A JAX row: ``from_jax`` → to_jax / to_torch / to_onnx against ``jax.jit``."""
    import jax
    import torch

    import converter

    fn, args = _jax_programs()[name]()
    want = jax.jit(fn)(*args)
    mod: list[Any] = []

    def convert() -> float:
        mod.append(converter.from_jax(fn, *args))
        return 0.0

    row = {"convert": _cell(convert, 1.0)}
    if not mod:
        return row
    m = mod[0]
    leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
    row["jax"] = _cell(lambda: _close(m.to_jax()(*args), want), 1.0)

    def torch_path() -> float:
        t = m.to_torch()
        with torch.no_grad():
            return _close(t(*jax.tree_util.tree_map(lambda a: _to_torch(a), args)), want)

    row["torch"] = _cell(torch_path, 1.0)
    row["onnx"] = _cell(lambda: _close(_ort_run(m.to_onnx(), leaves), want), 1.0)
    return row


def _say(out, row: str, path: str, status: str, detail: str) -> None:
    print(f"{row:22s} {path:9s} {status:6s} {detail}", file=out, flush=True)


#: Models the transformer optimizer has a model type for (the ``opt*`` variants).
OPTIMIZED = ("bert", "gpt2")


#: Files onnxruntime 1.32 cannot load (its session creation segfaults on the float16 LSTM):
#: no reference, left out.
NO_REFERENCE = ("onnx:lstm:fp16", "onnx:lstm:fp16-io")


def onnx_rows() -> list[str]:
    rows = [f"onnx:{m}:{v}" for m in ONNX_MODELS for v in ONNX_VARIANTS]
    return [r for r in rows if r not in NO_REFERENCE and (r.split(":")[1] in OPTIMIZED or ":opt" not in r)]


def all_rows() -> list[str]:
    return [*onnx_rows(), *(f"torch:{n}" for n in _torch_programs()), *(f"jax:{n}" for n in _jax_programs())]


def select(prefixes: str) -> list[str]:
    """The rows starting with one of the comma-separated ``prefixes`` (all rows for "")."""
    return [r for r in all_rows() if not prefixes or any(r.startswith(x) for x in prefixes.split(","))]


def sweep(rows: list[str], out=sys.stdout) -> dict[str, dict[str, tuple[str, str]]]:
    """Run the rows (``onnx:<model>:<variant>``, ``torch:<program>``, ``jax:<program>``),
    printing each cell as it goes; returns ``{row: {path: (status, detail)}}``."""
    results: dict[str, dict[str, tuple[str, str]]] = {}
    for r in rows:
        t = time.process_time()
        kind, _, rest = r.partition(":")
        if kind == "onnx":
            name, variant = rest.split(":")
            res = run_onnx(name, variant)
        elif kind == "torch":
            res = run_torch(rest)
        elif kind == "jax":
            res = run_jax(rest)
        else:
            raise ValueError(r)
        results[r] = res
        for p, (status, detail) in res.items():
            _say(out, r, p, status, detail)
        _say(out, r, "cpu", "", f"{time.process_time() - t:.0f}s")
    return results


def table(results: dict) -> str:
    """The results as a markdown table: one row per program, one column per path."""
    cols = sorted({c for row in results.values() for c in row}, key=lambda c: (c != "file", c))
    lines = ["| program | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, row in results.items():
        cells = []
        for c in cols:
            if c not in row:
                cells.append("")
                continue
            status, detail = row[c]
            s = f"{status} {detail.split(' ')[0]}" if status in ("ok", "FAIL") else status
            cells.append(s + (" *" if (name, c) in EXPECTED else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def unexpected(results: dict) -> list[str]:
    """Cells neither ``ok`` nor listed in :data:`EXPECTED`, and listed cells that pass."""
    bad = []
    for name, row in results.items():
        for column, (status, detail) in row.items():
            listed = (name, column) in EXPECTED
            if status != "ok" and not listed:
                bad.append(f"{name}/{column}: {detail}")
            elif status == "ok" and listed:
                bad.append(f"{name}/{column}: passes but is listed in EXPECTED")
    return bad


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default="")
    a = p.parse_args(argv)
    results = sweep(select(a.rows))
    print(table(results))
    bad = unexpected(results)
    for line in bad:
        print("unexpected:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    sys.exit(main())
