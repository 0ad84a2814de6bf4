"""The project against its anchors (issue 30), one command, ratios measured in the same run.

    .venv/bin/pip install -e ".[bench]"           # onnxscript (torch.onnx's exporter)
    .venv/bin/pip install -e ".[bench-anchors]"   # optional: onnx2torch, torchax (see below)
    .venv/bin/python benchmarks/compare_anchors.py [--repeat 50] [--gpt2 small] [--record]

Rows (each a median of interleaved runs against an anchor or a floor timed in the same process;
the ONNX files are exported here, by ``torch.onnx.export(dynamo=True)`` when onnxscript is
installed, else by the project's own ``to_onnx``, which the output names):

* ``from_onnx(...).to_torch()`` conversion time of the CNN, GPT-2 and BERT examples (warm: a
  second conversion in the process; the first one also imports ``torch._dynamo``, which every
  ``FakeTensorMode`` loads), against onnx2torch and against the floor any converter pays: reading
  the initializers (``numpy_helper.to_array``) and copying them into torch tensors.
* ONNX → JAX CNN, jitted steady state, against onnxruntime (default and one thread) and the
  floor: the same network written by hand with ``jax.lax`` (NCHW, the same weights), jitted.
* ONNX → torch eager CNN (one torch thread), against onnx2torch and the torch model the ONNX
  file came from.
* ``jax.jit(f.apply)`` per call on a tiny MLP (from ``from_torch``), against the floor: a
  hand-written ``jax.jit`` MLP of the same weights; torchax's ``jit`` when importable.
* ``call_jax`` per call with a new 8x8 tensor each call, over the bare ``jax.jit`` call, with
  the floors timed alongside: the public DLPack round trip (``torch.from_dlpack(f(
  jnp.from_dlpack(t)))``) and the zero-copy crossing call_jax makes, without its checks.
* first call of ``jax.jit(f)`` (trace + compile) of a converted GPT-2, against torchax.

onnx2torch (it imports torchvision at import time) and torchax (its releases pin torch ops of
their own torch version) are anchors only when they import; a row without them says so. The
load average of the machine is printed and recorded with the results (``--record``: the rows go
to ``benchmarks/results.json`` and the table of ``docs/performance.md``, see ``perf_page.py``).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import perf_page  # noqa: E402
from bench_embed import small_overhead  # noqa: E402

import converter  # noqa: E402

OPSET = 20


def optional(name: str):
    """The module ``name``, or None with the reason it does not import."""
    try:
        return __import__(name), ""
    except Exception as e:  # noqa: BLE001 - any failure to import makes the anchor absent
        return None, f"{name} not importable here ({type(e).__name__}: {str(e)[:80]})"


def interleaved(fns: list[Callable[[], object]], repeat: int, warmup: int = 2) -> list[float]:
    """Median wall time of each of ``fns`` over ``repeat`` rounds calling each once, the order
    rotating every round (load from other processes falls on all alike), in seconds."""
    for _ in range(warmup):
        for fn in fns:
            jax.block_until_ready(fn())
    times: list[list[float]] = [[] for _ in fns]
    for r in range(repeat):
        order = list(range(len(fns)))
        order = order[r % len(order) :] + order[: r % len(order)]
        for k in order:
            start = time.perf_counter()
            jax.block_until_ready(fns[k]())
            times[k].append(time.perf_counter() - start)
    return [statistics.median(ts) for ts in times]


def export_onnx(model: torch.nn.Module, args: tuple) -> tuple[onnx.ModelProto, str]:
    """``model`` as ONNX: torch.onnx's dynamo exporter when onnxscript is there, else to_onnx."""
    if optional("onnxscript")[0] is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stderr, sys.stderr = sys.stderr, io.StringIO()  # the exporter's progress lines
            try:
                program = torch.onnx.export(model, args, dynamo=True, opset_version=OPSET, verbose=False)
            finally:
                sys.stderr = stderr
        return program.model_proto, "torch.onnx.export(dynamo=True)"
    return converter.from_torch(model, args).to_onnx(), "to_onnx (onnxscript absent)"


def models(gpt2_size: str) -> dict[str, tuple[torch.nn.Module, tuple]]:
    from bench_gpt2 import gpt2

    from examples import cnn, transformers_small
    from examples import gpt2 as gpt2_example

    gpt = gpt2_example.factory() if gpt2_size == "example" else gpt2(gpt2_size)
    return {"cnn": cnn.factory(), "gpt2": gpt, "bert": transformers_small.bert()}


def weights_floor(model: onnx.ModelProto) -> None:
    """What every ONNX → torch converter does with the weights: read and copy each one."""
    for t in model.graph.initializer:
        torch.tensor(numpy_helper.to_array(t))


def conversion_rows(onnx_models: dict, o2t, repeat: int) -> dict[str, tuple[float, float | None, float]]:
    """Per model: warm ``from_onnx(...).to_torch()`` time, onnx2torch's (None when absent), and
    the weights floor, in seconds."""
    out = {}
    for name, m in onnx_models.items():
        converter.from_onnx(m).to_torch()  # the first conversion also imports torch._dynamo
        fns = [lambda m=m: converter.from_onnx(m).to_torch(), lambda m=m: weights_floor(m)]
        if o2t is not None:
            o2t.convert(m)
            fns.append(lambda m=m: o2t.convert(m))
        times = interleaved(fns, repeat, warmup=0)
        out[name] = (times[0], times[2] if o2t is not None else None, times[1])
    return out


def hand_cnn(model: torch.nn.Module, nhwc: bool = False) -> Callable:
    """The examples' CNN written with ``jax.lax``, with its weights: the floor of what XLA CPU
    makes of this network. NCHW activations and OIHW kernels as torch and ONNX have them, or
    (``nhwc``) NHWC/HWIO with the input transposed once inside the jitted function: whether
    the layout is what costs."""
    p = {
        k: jnp.asarray(v.detach().numpy()) for k, v in model.state_dict().items() if v.dtype.is_floating_point
    }
    if nhwc:
        p = {k: v.transpose(2, 3, 1, 0) if v.ndim == 4 else v for k, v in p.items()}
    dn = ("NHWC", "HWIO", "NHWC") if nhwc else ("NCHW", "OIHW", "NCHW")
    ch = (None, None, None, slice(None)) if nhwc else (None, slice(None), None, None)  # a channel vector
    window = (1, 2, 2, 1) if nhwc else (1, 1, 2, 2)

    def conv(x, w, b=None, groups=1):
        y = jax.lax.conv_general_dilated(
            x, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=dn, feature_group_count=groups
        )
        return y if b is None else y + b[ch]

    def bn(x, i):
        f = f"features.{i}."
        scale = p[f + "weight"] / jnp.sqrt(p[f + "running_var"] + 1e-5)
        return (x - p[f + "running_mean"][ch]) * scale[ch] + p[f + "bias"][ch]

    def pool(x, kind):
        init, op = (-jnp.inf, jax.lax.max) if kind == "max" else (0.0, jax.lax.add)
        y = jax.lax.reduce_window(x, init, op, window, window, "VALID")
        return y if kind == "max" else y / 4

    @jax.jit
    def f(x):
        if nhwc:
            x = x.transpose(0, 2, 3, 1)
        x = pool(jax.nn.relu(bn(conv(x, p["features.0.weight"], p["features.0.bias"]), 1)), "max")
        x = pool(jax.nn.relu(bn(conv(x, p["features.4.weight"]), 5)), "avg")
        x = jax.nn.relu(conv(x, p["features.8.weight"], p["features.8.bias"], groups=2))
        return x.mean(axis=(1, 2) if nhwc else (2, 3)) @ p["head.weight"].T + p["head.bias"]

    return f


def session(m: onnx.ModelProto, threads: int = 0) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    return ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50, help="interleaved rounds per steady state")
    parser.add_argument("--conversions", type=int, default=3, help="interleaved rounds per conversion")
    parser.add_argument(
        "--gpt2",
        default="example",
        help="GPT-2 of the conversion and first-call rows: 'example' (examples/gpt2.py) or a "
        "bench_gpt2.py size ('small' is the 124M model)",
    )
    parser.add_argument("--record", action="store_true", help="store the results (perf_page.py)")
    args = parser.parse_args(argv)
    command = perf_page.command(__file__, argv)
    o2t, o2t_note = optional("onnx2torch")
    torchax, tx_note = optional("torchax")
    one, five, fifteen = os.getloadavg()
    load = f"load average {one:.1f}/{five:.1f}/{fifteen:.1f} on {os.cpu_count()} cores"
    print(f"{load}; torch {torch.__version__}, jax {jax.__version__}, onnxruntime {ort.__version__}")
    for note in (o2t_note, tx_note):
        if note:
            print(f"  note: {note}: its rows show the floor only")
    rows: dict[str, dict[str, str]] = {}

    # --- ONNX files, exported here
    torch_models = models(args.gpt2)
    onnx_models, how = {}, ""
    for name, (model, inputs) in torch_models.items():
        onnx_models[name], how = export_onnx(model, inputs)
    print(f"ONNX files by {how}")

    # --- 1. conversion time
    conv = conversion_rows(onnx_models, o2t, args.conversions)
    print("from_onnx(...).to_torch(), warm (median of interleaved runs)")
    parts = []
    for name, (t, t_o2t, t_floor) in conv.items():
        anchor = f", {t / t_o2t:.2f}x onnx2torch" if t_o2t else ""
        print(
            f"  {name:5s} {t:7.3f} s = {t / t_floor:6.1f}x reading+copying the weights "
            f"({t_floor:.3f} s){anchor}"
        )
        part = f"{name} {t:.2f} s"
        if t_o2t:
            part += f" = {t / t_o2t:.2f}× onnx2torch"
        if t_floor > 0.1 * t:  # weights big enough that reading them is a floor worth showing
            part += f" = {t / t_floor:.1f}× reading+copying its weights"
        parts.append(part)
    rows["anchors_onnx_to_torch_convert"] = dict(
        what=f"`from_onnx(...).to_torch()` conversion, warm (CNN, GPT-2 {args.gpt2}, BERT; {how})",
        result=", ".join(parts) + ("" if o2t else "; onnx2torch absent (needs torchvision)"),
        anchor="onnx2torch `convert`; floor: reading and copying the initializers",
    )

    # --- 2. ONNX -> JAX CNN steady state
    cnn_model, (x_t,) = torch_models["cnn"]
    x = x_t.numpy()
    cnn_onnx = onnx_models["cnn"]
    fn = jax.jit(converter.from_onnx(cnn_onnx).to_jax())
    hand, hand_nhwc = hand_cnn(cnn_model), hand_cnn(cnn_model, nhwc=True)
    feed = {cnn_onnx.graph.input[0].name: x}
    s_default, s_one = session(cnn_onnx), session(cnn_onnx, 1)
    err = max(
        float(np.abs(np.asarray(fn(x)) - cnn_model(x_t).detach().numpy()).max()),
        float(np.abs(np.asarray(hand(x)) - cnn_model(x_t).detach().numpy()).max()),
        float(np.abs(np.asarray(hand_nhwc(x)) - cnn_model(x_t).detach().numpy()).max()),
    )
    t_jax, t_hand, t_nhwc, t_ort, t_ort1 = interleaved(
        [
            lambda: fn(x),
            lambda: hand(x),
            lambda: hand_nhwc(x),
            lambda: s_default.run(None, feed),
            lambda: s_one.run(None, feed),
        ],
        args.repeat,
    )
    print(
        f"ONNX -> JAX CNN jitted: {t_jax * 1e3:.3f} ms = {t_jax / t_ort:.2f}x onnxruntime "
        f"({t_ort * 1e3:.3f} ms), "
        f"{t_jax / t_ort1:.2f}x onnxruntime 1 thread; hand-written jax.lax floor {t_hand * 1e3:.3f} ms = "
        f"{t_hand / t_ort:.2f}x onnxruntime, project {t_jax / t_hand:.2f}x the floor (max err {err:.1e}); "
        f"the floor in NHWC {t_nhwc / t_ort:.2f}x onnxruntime"
    )
    rows["anchors_onnx_jax_cnn"] = dict(
        what="ONNX → JAX: CNN example, jitted steady state",
        result=f"{t_jax / t_ort:.2f}× ({t_jax / t_ort1:.2f}× one thread); floor {t_hand / t_ort:.2f}× "
        f"(project {t_jax / t_hand:.2f}× the floor; NHWC floor {t_nhwc / t_ort:.2f}×)",
        anchor="onnxruntime; floor: the same net hand-written in `jax.lax` (NCHW as ONNX, and NHWC), jitted",
    )

    # --- 3. ONNX -> torch eager CNN
    tm = converter.from_onnx(cnn_onnx).to_torch()
    fns = [lambda: tm(x_t), lambda: cnn_model(x_t)]
    if o2t is not None:
        o2t_cnn = o2t.convert(cnn_onnx).eval()
        fns.append(lambda: o2t_cnn(x_t))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # several threads on a shared 2-core machine make eager torch erratic
    try:
        with torch.no_grad():
            times = interleaved(fns, args.repeat)
    finally:
        torch.set_num_threads(threads)
    versus = f"{times[0] / times[2]:.2f}× onnx2torch, " if o2t else ""
    print(
        f"ONNX -> torch CNN eager: {times[0] * 1e3:.3f} ms = {versus}{times[0] / times[1]:.2f}x "
        "the source torch model"
    )
    rows["anchors_onnx_torch_cnn"] = dict(
        what="ONNX → torch: CNN example, eager (`no_grad`, one thread)",
        result=f"{versus}{times[0] / times[1]:.2f}× the source model"
        + ("" if o2t else " (onnx2torch absent)"),
        anchor="onnx2torch; floor: the torch model the ONNX file came from",
    )

    # --- 4. jax.jit(f.apply) dispatch, tiny MLP
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    xm = torch.randn(2, 8)
    f = converter.from_torch(mlp, (xm,)).to_jax()
    apply = jax.jit(f.apply)
    w = [jnp.asarray(t.detach().numpy()) for t in mlp.parameters()]
    floor = jax.jit(lambda w, x: jnp.maximum(x @ w[0].T + w[1], 0) @ w[2].T + w[3])
    xj = jnp.asarray(xm.numpy())
    fns = [lambda: apply(f.params, xj), lambda: floor(w, xj)]
    t_apply, t_floor = interleaved(fns, args.repeat * 20)
    print(
        f"jax.jit(f.apply) tiny MLP: {t_apply * 1e6:.1f} us = {t_apply / t_floor:.2f}x "
        "a hand-written jax.jit "
        f"({t_floor * 1e6:.1f} us)" + ("" if torchax else " (torchax absent)")
    )
    rows["anchors_dispatch"] = dict(
        what="`jax.jit(f.apply)` per call, tiny MLP",
        result=f"{t_apply / t_floor:.2f}× the floor" + ("" if torchax else " (torchax absent)"),
        anchor="torchax `jit`; floor: a hand-written `jax.jit` MLP, same weights",
    )

    # --- 5. call_jax per call
    small = small_overhead(args.repeat)
    (new, new_p90), (same, _) = small["new"], small["same"]
    (dlpack, _), (zero_copy, _) = small["dlpack"], small["zero_copy"]
    rows["anchors_call_jax"] = dict(
        what="`call_jax` per call, a new 8×8 tensor each call",
        result=f"+{new * 1e6:.1f} µs, p90 +{new_p90 * 1e6:.1f} µs (same tensor +{same * 1e6:.1f} µs); "
        f"target ≤ 8 µs, p90 ≤ 12 µs; floors: public DLPack round trip +{dlpack * 1e6:.1f} µs, "
        f"NumPy view in + DLPack out +{zero_copy * 1e6:.1f} µs",
        anchor="the bare `jax.jit` call; floors: `torch.from_dlpack(f(jnp.from_dlpack(t)))`, and "
        "call_jax's own zero-copy crossing without its checks",
    )

    # --- 6. first call of jax.jit(f) of a converted GPT-2
    gmodel, (ids,) = torch_models["gpt2"]
    module = converter.from_torch(gmodel, (ids,))
    g, h = module.to_jax(), module.to_jax()  # two fresh functions: no trace shared
    with jax.enable_x64(True):  # int64 token ids: JAX narrows them under jax.jit otherwise
        start = time.perf_counter()
        jax.block_until_ready(jax.jit(g)(ids.numpy()))
        first = time.perf_counter() - start
        start = time.perf_counter()
        jax.block_until_ready(jax.jit(h.apply)(h.params, ids.numpy()))
        first_apply = time.perf_counter() - start
    print(
        f"first call of jax.jit(f), GPT-2 {args.gpt2}: {first:.2f} s = {first / first_apply:.2f}x that of "
        f"jax.jit(f.apply) ({first_apply:.2f} s: the weights as arguments, not embedded constants)"
        + ("" if torchax else " (torchax absent)")
    )
    rows["anchors_first_call"] = dict(
        what=f"first call of `jax.jit(f)`, converted GPT-2 {args.gpt2} (trace + compile)",
        result=f"{first:.2f} s, {first / first_apply:.2f}× `jax.jit(f.apply)`'s {first_apply:.2f} s"
        + ("" if torchax else " (torchax absent: no ratio)"),
        anchor="torchax `jit` of the torch model; `jax.jit(f.apply)(f.params, x)` of the same Module",
    )

    if args.record:
        for key, row in rows.items():
            perf_page.record(key, command=command, **{**row, "anchor": f"{row['anchor']}; {load}"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
