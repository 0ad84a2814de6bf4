"""The project against its anchors (issue 30), one command, ratios measured in the same run.

    .venv/bin/pip install -e ".[bench]"                 # onnxscript (torch.onnx's exporter)
    .venv/bin/pip install -e ".[bench-anchors]"         # optional: torchax 0.0.4 (see below)
    .venv/bin/pip install --no-deps onnx2torch==1.5.15  # optional, never with its dependencies
    .venv/bin/python benchmarks/compare_anchors.py [--repeat 50] [--gpt2 small] [--record]

Rows (each a median of interleaved runs against an anchor or a floor timed in the same process;
the ONNX files are exported here, by ``torch.onnx.export(dynamo=True)`` at opset 18 when
onnxscript is installed, else by the project's own ``to_onnx``, which the output names, then
rewritten to opset 17, the newest onnx2torch reads, by exact rewrites (``opset17``); every row
converts the same files):

* ``from_onnx(...).to_torch()`` conversion time of the CNN, GPT-2 and BERT examples (warm: a
  second conversion in the process; the first one also imports ``torch._dynamo``, which every
  ``FakeTensorMode`` loads), against onnx2torch and against the floor any converter pays: reading
  the initializers (``numpy_helper.to_array``) and copying them into torch tensors; and the
  frameworks' floor on this route (``framework_floor``): JAX tracing and lowering the same
  computation by ``jax.jit(...).lower()`` with the least Python per op, plus torch.fx building
  the converted graph.
* ONNX → JAX CNN, jitted steady state, against onnxruntime (default and one thread) and the
  floor: the same network written by hand with ``jax.lax`` (NCHW, the same weights), jitted.
* ONNX → torch eager CNN (one torch thread), against onnx2torch and the torch model the ONNX
  file came from.
* ``call_jax`` per call with a new 8x8 tensor each call, over the bare ``jax.jit`` call, with
  the floors timed alongside: the public DLPack round trip (``torch.from_dlpack(f(
  jnp.from_dlpack(t)))``) and the zero-copy crossing call_jax makes, without its checks.
* ``jax.jit(f.apply)`` per call on a tiny MLP (from ``from_torch``), against torchax (``jax.jit``
  of the function ``torchax.extract_jax`` gives) and the floor: a hand-written ``jax.jit`` MLP
  of the same weights.
* first call of ``jax.jit(f)`` (trace + compile) of a converted GPT-2, against torchax (its
  ``extract_jax`` function under ``jax.jit``, weights as arguments) and ``jax.jit(f.apply)``:
  medians of ``--first-calls`` rounds, each call in a fresh process, the order rotating
  (``bench_first_call.py``, which also splits the stages and measures the floors).

The anchors are optional; a row without one says so. onnx2torch: its package requires
torchvision, which must not be installed here (its wheels pull a torch build of their own), so
it goes in with ``--no-deps``; only its NonMaxSuppression and RoiAlign converters import
torchvision, and when torchvision is absent ``import_onnx2torch`` imports them against a stub
that raises on any use (the files converted here hold neither op: checked), removed from
``sys.modules`` right after the import. torchax: 0.0.5 to 0.0.13 fail to import beside torch
2.13 and 2.14 (they name ``aten.prod.dim_Dimname``, which those releases no longer have); 0.0.4
imports and runs. The load average of the machine is printed and recorded with the results
(``--record``: the rows go to ``benchmarks/results.json`` and the table of
``docs/performance.md``, see ``perf_page.py``).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
import types
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
from bench_first_call import first_call_row, first_calls  # noqa: E402
from perf_page import package_version  # noqa: E402

import converter  # noqa: E402

OPSET = 18  # the exporter's, rewritten to opset 17 (opset17)


def optional(name: str):
    """The module ``name``, or None with the reason it does not import."""
    try:
        return __import__(name), ""
    except Exception as e:  # noqa: BLE001 - any failure to import makes the anchor absent
        return None, f"{name} not importable here ({type(e).__name__}: {str(e)[:80]})"


class _Refuse(types.ModuleType):
    """A stand-in module whose every attribute is a function that raises when called."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)

        def refuse(*args, **kwargs):
            raise RuntimeError(f"{self.__name__}.{name} called: torchvision is not installed (a stub)")

        return refuse


def import_onnx2torch():
    """onnx2torch, or None with the reason it does not import, and a note on how it was
    imported. Without torchvision its two converters that use it (NonMaxSuppression,
    RoiAlign) import against a stub that raises when called; the stub leaves ``sys.modules``
    right after the import, so nothing else in the process sees a torchvision."""
    try:
        import torchvision  # noqa: F401
    except ImportError:
        stub = {"torchvision": _Refuse("torchvision"), "torchvision.ops": _Refuse("torchvision.ops")}
        stub["torchvision"].ops = stub["torchvision.ops"]
        sys.modules.update(stub)
        try:
            module, note = optional("onnx2torch")
        finally:
            for name in stub:
                sys.modules.pop(name, None)
        return module, note, "without torchvision: its NMS/RoiAlign converters see a stub that raises"
    return (*optional("onnx2torch"), "")


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
    """``model`` as ONNX at opset 18: torch.onnx's dynamo exporter when onnxscript is there,
    else to_onnx."""
    if optional("onnxscript")[0] is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stderr, sys.stderr = sys.stderr, io.StringIO()  # the exporter's progress lines
            try:
                program = torch.onnx.export(model, args, dynamo=True, opset_version=OPSET, verbose=False)
            finally:
                sys.stderr = stderr
        return program.model_proto, f"torch.onnx.export(dynamo=True, opset_version={OPSET})"
    return converter.from_torch(model, args).to_onnx(
        opset=OPSET
    ), f"to_onnx(opset={OPSET}) (onnxscript absent)"


# operators whose opset-18 version differs from their opset-17 one (onnx's operator changelog)
_CHANGED_IN_18 = {
    "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "CenterCropPad", "Col2Im",
    "GroupNormalization", "LpPool", "OptionalGetElement", "OptionalHasElement", "Pad",
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
    "ReduceMin", "ReduceProd", "ReduceSumSquare", "Resize", "ScatterElements", "ScatterND",
    "Split",
}  # fmt: skip


def opset17(model: onnx.ModelProto) -> onnx.ModelProto:
    """An opset-18 ``model`` as the same computation at opset 17 (onnx2torch 1.5.15 reads
    opsets up to 17; onnx's version converter has no Split 18 → 17 adapter). Exact rewrites
    only: ``Split``'s ``num_outputs`` as the ``split`` sizes it means (ONNX Split-18: equal
    parts, the last one smaller), ``ReduceMean``'s constant ``axes`` input as the attribute,
    and ``Reshape``'s ``allowzero=1`` dropped where the shape is a constant holding no 0 (the
    attribute changes nothing then).

    Raises:
        ValueError: ``model`` is not at opset 18, or holds an operator changed in opset 18
            that these rewrites do not cover, or a case they cannot rewrite exactly.
    """
    from onnx import helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    if [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] != [18]:
        raise ValueError(f"not an opset-18 model: {model.opset_import}")
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph
    shapes = {
        v.name: [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
        for v in [*inferred.value_info, *inferred.input]
    }
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        attrs = {a.name: a for a in node.attribute}
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            raise ValueError(f"{node.op_type} {node.name}: subgraphs are not rewritten here")
        if node.op_type == "Reshape" and "allowzero" in attrs and attrs["allowzero"].i == 1:
            shape = consts.get(node.input[1])
            if shape is None or (shape == 0).any():
                raise ValueError(f"Reshape {node.name}: allowzero=1 with a shape that may hold 0")
            node.attribute.remove(attrs["allowzero"])
        elif node.op_type == "Split":  # Split-13 with the sizes as an input, or an even split
            if "num_outputs" not in attrs:
                continue
            parts = attrs["num_outputs"].i
            axis = attrs["axis"].i if "axis" in attrs else 0
            size = shapes.get(node.input[0], [None] * (axis + 1))[axis]
            if size is None:
                raise ValueError(f"Split {node.name}: the split dimension is not static")
            chunk = -(-size // parts)
            sizes = np.array([min(chunk, size - i * chunk) for i in range(parts)], np.int64)
            if (sizes <= 0).any():
                raise ValueError(f"Split {node.name}: {size} does not split into {parts} parts")
            name = f"{node.output[0]}__split_sizes"
            graph.initializer.append(numpy_helper.from_array(sizes, name))
            node.input.append(name)
            node.attribute.remove(attrs["num_outputs"])
        elif node.op_type == "ReduceMean":
            if "noop_with_empty_axes" in attrs:
                if attrs["noop_with_empty_axes"].i:
                    raise ValueError(f"ReduceMean {node.name}: noop_with_empty_axes=1")
                node.attribute.remove(attrs["noop_with_empty_axes"])
            if len(node.input) > 1 and node.input[1]:
                axes = consts.get(node.input[1])
                if axes is None or axes.size == 0:
                    raise ValueError(f"ReduceMean {node.name}: axes not a constant, or empty")
                del node.input[1]
                node.attribute.append(helper.make_attribute("axes", [int(a) for a in axes.ravel()]))
        elif node.op_type in _CHANGED_IN_18 and node.domain in ("", "ai.onnx"):
            raise ValueError(f"{node.op_type} changed in opset 18: no rewrite to 17 here")
    used = {name for node in graph.node for name in node.input}
    kept = [t for t in graph.initializer if t.name in used or t.name in {o.name for o in graph.output}]
    del graph.initializer[:]
    graph.initializer.extend(kept)  # the axes that became attributes
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = 17
    onnx.checker.check_model(model)
    return model


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


def check_outputs(torch_models: dict, onnx_models: dict, o2t) -> str:
    """Assert that the torch modules converted from ``onnx_models`` by ``from_onnx(...).to_torch()``
    and by onnx2torch (when present) give the source models' first outputs (1e-4); returns the
    largest differences, for the output."""
    first = lambda out: out if isinstance(out, torch.Tensor) else out[0]  # noqa: E731
    errs = []
    with torch.no_grad():
        for name, (model, inputs) in torch_models.items():
            want = first(model(*inputs))
            got = {"project": converter.from_onnx(onnx_models[name]).to_torch()(*inputs)}
            if o2t is not None:
                got["onnx2torch"] = o2t.convert(onnx_models[name]).eval()(*inputs)
            for who, out in got.items():
                err = float((first(out) - want).abs().max())
                assert err < 1e-4, f"{who} on {name}: max error {err}"
                errs.append(f"{name} {who} {err:.1e}")
    return ", ".join(errs)


def framework_floor(model: onnx.ModelProto) -> tuple[Callable[[], object], Callable[[], object]]:
    """What JAX and torch.fx alone cost on the conversion of ``model`` (ONNX → StableHLO through
    JAX, StableHLO → an FX graph): two functions, timed apart.

    - JAX: ``jax.jit(...).lower()`` of the same computation with the least Python per op: the
      jaxpr of the converted module (``jax.make_jaxpr`` of its ``to_jax`` function, weights as
      arguments) bound again by ``jax.core.eval_jaxpr`` (tracing that binds each primitive,
      then JAX's lowering to StableHLO, a fresh MLIR context included);
    - FX: the converted torch graph's nodes copied into a new ``GraphModule`` (node creation,
      code generation, ``compile``).
    """
    module = converter.from_onnx(model)
    f = module.to_jax(x64=True)
    inputs = [jax.ShapeDtypeStruct(s.shape, np.dtype(s.dtype)) for s in module.signature.inputs]
    params = jax.tree.map(lambda p: jax.ShapeDtypeStruct(p.shape, p.dtype), f.params)
    with jax.enable_x64(True):
        closed = jax.make_jaxpr(f.apply)(params, *inputs)
    avals = [v.aval for v in closed.jaxpr.invars]
    graph = module.to_torch().graph_module

    def lower():
        with jax.enable_x64(True):
            fn = jax.jit(lambda *a: jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *a), keep_unused=True)
            return fn.lower(*avals).compiler_ir("stablehlo")

    def build():
        g = torch.fx.Graph()
        g.output(g.graph_copy(graph.graph, {}))
        return torch.fx.GraphModule(graph, g)

    return lower, build


def conversion_rows(
    onnx_models: dict, o2t, repeat: int
) -> dict[str, tuple[float, float | None, float, float, float]]:
    """Per model: warm ``from_onnx(...).to_torch()`` time, onnx2torch's (None when absent), the
    weights floor, and the framework floors (:func:`framework_floor`: JAX's lowering, FX's
    graph building), in seconds."""
    out = {}
    for name, m in onnx_models.items():
        converter.from_onnx(m).to_torch()  # the first conversion also imports torch._dynamo
        lower, build = framework_floor(m)
        fns = [lambda m=m: converter.from_onnx(m).to_torch(), lambda m=m: weights_floor(m), lower, build]
        if o2t is not None:
            o2t.convert(m)
            fns.append(lambda m=m: o2t.convert(m))
        times = interleaved(fns, repeat, warmup=1)
        out[name] = (times[0], times[4] if o2t is not None else None, times[1], times[2], times[3])
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
    parser.add_argument("--first-calls", type=int, default=3, help="rounds of the first-call row")
    parser.add_argument(
        "--gpt2",
        default="example",
        help="GPT-2 of the conversion and first-call rows: 'example' (examples/gpt2.py) or a "
        "bench_gpt2.py size ('small' is the 124M model)",
    )
    parser.add_argument("--record", action="store_true", help="store the results (perf_page.py)")
    args = parser.parse_args(argv)
    command = perf_page.command(__file__, argv)
    o2t, o2t_note, o2t_how = import_onnx2torch()
    one, five, fifteen = os.getloadavg()
    load = f"load average {one:.1f}/{five:.1f}/{fifteen:.1f} on {os.cpu_count()} cores"
    print(f"{load}; torch {torch.__version__}, jax {jax.__version__}, onnxruntime {ort.__version__}")
    if o2t is not None:
        print(f"  onnx2torch {package_version('onnx2torch')}" + (f" ({o2t_how})" if o2t_how else ""))
    else:
        print(f"  note: {o2t_note}: its rows show the floor only")
    rows: dict[str, dict[str, str]] = {}

    # call_jax's per-call row first: before torchax is imported (it renames torch's
    # privateuse1 device) and before the other rows' models, onnxruntime sessions (whose
    # thread pools spin after each run) and compiled programs share the process with it
    small = small_overhead(args.repeat)

    # --- ONNX files, exported here
    torch_models = models(args.gpt2)
    onnx_models, how, rewritten = {}, "", True
    for name, (model, inputs) in torch_models.items():
        exported, how = export_onnx(model, inputs)
        try:
            onnx_models[name] = opset17(exported)
        except ValueError as e:  # the project converts the opset-18 file; onnx2torch cannot read it
            print(f"  note: {name} stays at opset {OPSET} ({e}): onnx2torch left out")
            onnx_models[name], o2t, rewritten = exported, None, False
        if o2t is not None:
            held = {n.op_type for n in onnx_models[name].graph.node} & {"NonMaxSuppression", "RoiAlign"}
            assert not held, f"{name} holds {held}: onnx2torch would call the torchvision stub"
    how += ", rewritten to opset 17 (opset17)" if rewritten else ""
    print(f"ONNX files by {how}")

    print(f"  max errors against the source models: {check_outputs(torch_models, onnx_models, o2t)}")

    # --- 1. conversion time
    conv = conversion_rows(onnx_models, o2t, args.conversions)
    print("from_onnx(...).to_torch(), warm (median of interleaved runs)")
    parts = []
    for name, (t, t_o2t, t_floor, t_jax, t_fx) in conv.items():
        anchor = f", {t / t_o2t:.2f}x onnx2torch ({t_o2t:.3f} s)" if t_o2t else ""
        frameworks = t_jax + t_fx
        print(
            f"  {name:5s} {t:7.3f} s = {t / t_floor:6.1f}x reading+copying the weights "
            f"({t_floor:.3f} s){anchor}; framework floor {frameworks:.3f} s (JAX lowering "
            f"{t_jax:.3f} s + FX build {t_fx:.3f} s)"
            + (f" = {frameworks / t_o2t:.2f}x onnx2torch" if t_o2t else "")
        )
        part = f"{name} {t:.2f} s"
        if t_o2t:
            part += f" = {t / t_o2t:.2f}× onnx2torch"
        if t_floor > 0.1 * t:  # weights big enough that reading them is a floor worth showing
            part += f" = {t / t_floor:.1f}× reading+copying its weights"
        ratio = f" = {frameworks / t_o2t:.2f}×" if t_o2t else ""
        part += f" (framework floor {frameworks:.2f} s{ratio})"
        parts.append(part)
    rows["anchors_onnx_to_torch_convert"] = dict(
        what=f"`from_onnx(...).to_torch()` conversion, warm (CNN, GPT-2 {args.gpt2}, BERT; {how})",
        result=", ".join(parts) + ("" if o2t else "; onnx2torch absent"),
        anchor=f"onnx2torch {package_version('onnx2torch')} `convert`; floors: reading and copying the "
        "initializers, and the frameworks' (JAX lowering the same jaxpr with `jax.jit(...).lower()`, "
        "torch.fx building the converted graph)",
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
        with torch.no_grad():
            o2t_err = float((o2t_cnn(x_t) - cnn_model(x_t)).abs().max())
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
        f"the source torch model ({times[1] * 1e3:.3f} ms)"
        + (f"; onnx2torch {times[2] * 1e3:.3f} ms (max err {o2t_err:.1e})" if o2t else "")
    )
    rows["anchors_onnx_torch_cnn"] = dict(
        what="ONNX → torch: CNN example, eager (`no_grad`, one thread)",
        result=f"{versus}{times[0] / times[1]:.2f}× the source model"
        + ("" if o2t else " (onnx2torch absent)"),
        anchor="onnx2torch; floor: the torch model the ONNX file came from",
    )

    # --- 5. call_jax per call (measured above)
    (new, new_p90), (same, _) = small["new"], small["same"]
    (dlpack, dlpack_p90), (zero_copy, zero_copy_p90) = small["dlpack"], small["zero_copy"]
    call_jax_row = dict(
        what="`call_jax` per call, a new 8×8 tensor each call",
        result=f"+{new * 1e6:.1f} µs, p90 +{new_p90 * 1e6:.1f} µs (same tensor +{same * 1e6:.1f} µs); "
        f"target ≤ 8 µs, p90 ≤ 12 µs; floors: public DLPack round trip +{dlpack * 1e6:.1f} µs "
        f"(p90 +{dlpack_p90 * 1e6:.1f} µs), NumPy view in + DLPack out +{zero_copy * 1e6:.1f} µs "
        f"(p90 +{zero_copy_p90 * 1e6:.1f} µs)",
        anchor="the bare `jax.jit` call; floors: `torch.from_dlpack(f(jnp.from_dlpack(t)))`, and "
        "call_jax's own zero-copy crossing without its checks",
    )
    torchax, tx_note = optional("torchax")
    print(f"  torchax {package_version('torchax')}" if torchax is not None else f"  note: {tx_note}")

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
    if torchax is not None:
        states, tx_fn = torchax.extract_jax(mlp)
        tx_jit, tx_args = jax.jit(tx_fn), (xj,)
        want = mlp(xm).detach().numpy()  # float32 sums in another order: not bitwise
        np.testing.assert_allclose(np.asarray(tx_jit(states, tx_args)), want, rtol=1e-5, atol=1e-6)
        fns.append(lambda: tx_jit(states, tx_args))
    times = interleaved(fns, args.repeat * 20)
    t_apply, t_floor = times[:2]
    versus = f"{t_apply / times[2]:.2f}× torchax ({times[2] * 1e6:.1f} us), " if torchax else ""
    print(
        f"jax.jit(f.apply) tiny MLP: {t_apply * 1e6:.1f} us = {versus}{t_apply / t_floor:.2f}x "
        f"a hand-written jax.jit ({t_floor * 1e6:.1f} us)" + ("" if torchax else " (torchax absent)")
    )
    rows["anchors_dispatch"] = dict(
        what="`jax.jit(f.apply)` per call, tiny MLP",
        result=f"{versus.replace(' us', ' µs')}{t_apply / t_floor:.2f}× the floor"
        + ("" if torchax else " (torchax absent)"),
        anchor=f"torchax {package_version('torchax')}: `jax.jit` of `extract_jax`'s function; floor: a "
        "hand-written `jax.jit` MLP, same weights",
    )
    rows["anchors_call_jax"] = call_jax_row

    # --- 6. first call of jax.jit(f) of a converted GPT-2
    gmodel, (ids,) = torch_models["gpt2"]
    med = first_calls(gmodel, ids, args.gpt2, args.first_calls)  # every variant and floor
    first, first_apply = med["jit(f)"]["total"], med["jit(f.apply)"]["total"]
    first_tx = med["torchax"]["total"] if "torchax" in med else None
    versus = f" = {first / first_tx:.2f}x torchax ({first_tx:.2f} s)" if first_tx else " (torchax absent)"
    print(
        f"first call of jax.jit(f), GPT-2 {args.gpt2}: {first:.2f} s{versus}; "
        f"jax.jit(f.apply) {first_apply:.2f} s"
        + (f" = {first_apply / first_tx:.2f}x torchax" if first_tx else "")
        + " (the weights as arguments, not embedded constants)"
    )
    rows["anchors_first_call"] = first_call_row(med, args.gpt2, args.first_calls)

    if args.record:
        for key, row in rows.items():
            perf_page.record(key, command=command, **{**row, "anchor": f"{row['anchor']}; {load}"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
