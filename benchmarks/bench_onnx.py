"""to_onnx against ``torch.onnx.export(..., dynamo=True)`` on the CNN, GPT-2 and BERT examples.

    .venv/bin/pip install -e ".[bench]"      # onnxscript, which torch.onnx's exporter needs
    .venv/bin/python benchmarks/bench_onnx.py [--repeat 200] [--models cnn,gpt2,bert]

For each model, both exports of the same torch model at the same opset are run in
onnxruntime (CPU, one session each, same input) and compared: node count, node-type
histogram, initializer bytes against the model's parameter bytes, steady-state latency
(median of interleaved pairs), and the largest difference between the two outputs. Ratios are
``to_onnx / torch.onnx`` (the targets: node count and latency ≤ 1.2, initializer bytes
≤ 1.05 × the weights).
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import converter  # noqa: E402

OPSET = 20  # torch.onnx's default, and the first with ONNX Gelu


def _factories():
    from examples import cnn, gpt2, transformers_small

    return {"cnn": cnn.factory, "gpt2": gpt2.factory, "bert": transformers_small.bert}


def _histogram(model: onnx.ModelProto) -> str:
    counts = collections.Counter(n.op_type for n in model.graph.node)
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _init_bytes(model: onnx.ModelProto) -> int:
    return sum(onnx.numpy_helper.to_array(t).nbytes for t in model.graph.initializer)


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # a 2-core machine shared with other work: one thread each
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def interleaved(a, b, repeat: int, warmup: int = 3) -> tuple[float, float]:
    """Median wall times of ``a()`` and ``b()`` timed in alternating pairs (the order flips
    every pair), so that load from other jobs falls on both alike; in seconds."""
    for _ in range(warmup):
        a(), b()
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(repeat):
        for k in (0, 1) if i % 2 == 0 else (1, 0):
            fn = (a, b)[k]
            start = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def _torch_onnx(model, args) -> onnx.ModelProto:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, args, dynamo=True, opset_version=OPSET, verbose=False)
    return program.model_proto


def bench(name: str, factory, repeat: int) -> dict:
    """Export ``factory()``'s model both ways and measure; returns the figures."""
    import torch

    model, args = factory()
    start = time.perf_counter()
    module = converter.from_torch(model, args)
    ours = module.to_onnx(opset=OPSET)
    t_ours = time.perf_counter() - start
    weights = sum(np.asarray(v).nbytes for v in module.params.values())  # tied weights once
    start = time.perf_counter()
    ref = _torch_onnx(model, args)
    t_ref = time.perf_counter() - start
    feeds = [a.numpy() for a in args]
    s_ours, s_ref = _session(ours), _session(ref)
    f_ours = dict(zip([i.name for i in s_ours.get_inputs()], feeds, strict=True))
    f_ref = dict(zip([i.name for i in s_ref.get_inputs()], feeds, strict=True))
    y_ours, y_ref = s_ours.run(None, f_ours)[0], s_ref.run(None, f_ref)[0]
    with torch.no_grad():
        out = model(*args)
    eager = (out if isinstance(out, torch.Tensor) else out[0]).numpy()
    lat_ours, lat_ref = interleaved(lambda: s_ours.run(None, f_ours), lambda: s_ref.run(None, f_ref), repeat)
    return {
        "name": name,
        "nodes": (len(ours.graph.node), len(ref.graph.node)),
        "hist": (_histogram(ours), _histogram(ref)),
        "init": (_init_bytes(ours), _init_bytes(ref)),
        "weights": weights,
        "latency": (lat_ours, lat_ref),
        "export": (t_ours, t_ref),
        "err": (float(np.abs(y_ours - eager).max()), float(np.abs(y_ref - eager).max())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--models", default="cnn,gpt2,bert")
    parser.add_argument("--record", action="store_true", help="store the result in the performance tables")
    args = parser.parse_args(argv)
    factories = _factories()
    rows = [bench(n, factories[n], args.repeat) for n in args.models.split(",")]
    for r in rows:
        (n_o, n_r), (i_o, i_r), (l_o, l_r) = r["nodes"], r["init"], r["latency"]
        print(
            f"{r['name']}: opset {OPSET}; max |output - eager torch|: to_onnx {r['err'][0]:.1e}, "
            f"torch.onnx {r['err'][1]:.1e}"
        )
        print(f"  to_onnx    nodes: {r['hist'][0]}")
        print(f"  torch.onnx nodes: {r['hist'][1]}")
        print(f"  export time          {r['export'][0]:7.2f} s   vs {r['export'][1]:7.2f} s")
        print(
            f"  initializer bytes {i_o:10d}   vs {i_r:10d}   weights {r['weights']} "
            f"(to_onnx {i_o / r['weights']:.3f} x weights; target <= 1.05)"
        )
    print()
    head = ("model", "nodes", "ratio", "latency ms", "ratio", "init/weights")
    print("{:6s} {:>14s} {:>6s} {:>18s} {:>6s} {:>12s}".format(*head))
    for r in rows:
        (n_o, n_r), (i_o, _), (l_o, l_r) = r["nodes"], r["init"], r["latency"]
        print(
            f"{r['name']:6s} {n_o:6d} / {n_r:5d} {n_o / n_r:6.2f} {l_o * 1e3:8.3f} / {l_r * 1e3:7.3f} "
            f"{l_o / l_r:6.2f} {i_o / r['weights']:12.3f}"
        )
    print("(ratios: to_onnx / torch.onnx; targets: nodes and latency <= 1.2, init/weights <= 1.05)")
    if args.record:
        import perf_page  # benchmarks/

        def span(ratios: list[float]) -> str:
            lo, hi = min(ratios), max(ratios)
            return f"{lo:.2f}×" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}×"

        nodes = span([r["nodes"][0] / r["nodes"][1] for r in rows])
        latency = span([r["latency"][0] / r["latency"][1] for r in rows])
        names = ", ".join(r["name"].upper() if len(r["name"]) <= 4 else r["name"] for r in rows)
        perf_page.record(
            "onnx_export",
            what=f"`to_onnx` of the {names} examples in onnxruntime",
            result=f"nodes {nodes}, latency {latency} (target ≤ 1.2×)",
            anchor="`torch.onnx.export(dynamo=True)`",
            command=perf_page.command(__file__, argv),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
