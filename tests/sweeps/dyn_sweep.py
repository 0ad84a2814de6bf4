"""Symbolic sizes along the paths the earlier sweeps did not take.

``tests/sweeps/hf_sweep.py`` runs Hugging Face models with a dynamic batch and sequence through
``to_jax``/``to_torch``/``to_onnx`` (re-export on three models only); ``tests/sweeps/onnx_sweep.py``
runs ONNX files; ``tests/sweeps/jax_sweep.py`` JAX programs. This sweep takes the bundled torch
examples (``examples/mlp.py``, ``cnn.py``, ``gpt2.py``) and a few of the HF sweep's models
(reusing its specs and helpers) with dynamic dimensions along:

- ``reexport``: ``torch.export`` of ``to_torch()`` with ``export_dynamic_shapes()``, run at two
  sizes other than the example one;
- ``onnx``: ``to_onnx()`` in onnxruntime at two sizes (bundled examples; the HF sweep
  already runs its models there);
- ``cli``: the ``convert`` command on a factory that returns ``dynamic_shapes``
  (``path/to/file.py:factory``, the CLI's dynamic form) to ``.onnx`` and ``.pt2``, each run
  at two sizes.

Every cell compares against eager torch: ``ok <max abs error>`` or the error's class.
Run: ``python tests/sweeps/dyn_sweep.py [name ...]``, or ``SWEEP=dyn pytest tests/sweeps/test_dyn_sweep.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # examples.*

import converter  # noqa: E402
from tests.sweeps import hf_sweep  # noqa: E402
from tests.sweeps.hf_sweep import _compare, _err, _flat  # noqa: E402

EXAMPLES = os.path.dirname(os.path.abspath(__file__))
HF_MODELS = ("distilbert", "gpt_neox", "wav2vec2", "convnext", "clip")
PATHS = ("reexport", "onnx", "cli")

#: cells known to fail: ``(program, path) -> reason``
EXPECTED: dict[tuple[str, str], str] = {}


def _example(module: str) -> Callable[[], tuple]:
    def build() -> tuple:
        sys.path.insert(0, EXAMPLES)
        try:
            return __import__(module).factory()
        finally:
            sys.path.remove(EXAMPLES)

    return build


def _bundled() -> list[hf_sweep.Spec]:
    """The bundled examples as HF-sweep specs: positional input ``x``."""
    out = []
    for name, module, shape, axes in (
        ("mlp", "mlp", lambda b, s: (b, 16), {0: "batch"}),
        ("cnn", "cnn", lambda b, s: (b, 3, 4 * s, 4 * s), {0: "batch", 2: "4*side", 3: "4*side"}),
        ("gpt2", "gpt2", lambda b, s: (b, s), {0: "batch", 1: "seq"}),
    ):
        factory = _example(module)
        model = factory()[0]
        vocab = getattr(getattr(model, "config", None), "vocab_size", None)

        def inputs(b: int, s: int, shape=shape, vocab=vocab) -> dict[str, torch.Tensor]:
            g = torch.Generator().manual_seed(b * 100 + s)
            if vocab:
                return {"x": torch.randint(0, vocab, shape(b, s), generator=g)}
            return {"x": torch.randn(*shape(b, s), generator=g)}

        out.append(
            hf_sweep.Spec(
                name,
                lambda model=model: model.eval(),
                inputs,
                {"x": axes},
                sizes=((2, 8), (3, 5), (1, 13)),
                ranges={"side": (2, 16), "seq": (2, 64)},
            )
        )
    return out


def specs() -> list[hf_sweep.Spec]:
    """The sweep's programs: the bundled examples, then the chosen HF models."""
    hf = {s.name: s for s in hf_sweep._specs()}
    return _bundled() + [hf[n] for n in HF_MODELS if n in hf]


def _call(model: Any, spec: hf_sweep.Spec, kw: dict[str, torch.Tensor]) -> Any:
    with torch.no_grad():
        return model(*kw.values()) if spec.name in ("mlp", "cnn", "gpt2") else model(**kw)


def run(spec: hf_sweep.Spec, paths: tuple[str, ...] = PATHS) -> dict[str, str]:
    """One program on every path: ``{path: "ok <err>" | "<Error>: ..."}`` plus ``_trace_*``."""
    row: dict[str, str] = {}
    model = spec.build()
    example = spec.inputs(*spec.sizes[0])
    dynamic = hf_sweep._dynamic_shapes(spec, True)
    positional = spec.name in ("mlp", "cnn", "gpt2")
    args, kwargs = (tuple(example.values()), {}) if positional else ((), example)
    ds = tuple(dynamic.values()) if positional else dynamic
    cases = [spec.inputs(b, s) for b, s in spec.sizes[1:]]
    wants = [_flat(_call(model, spec, kw)) for kw in cases]
    t0 = time.process_time()
    try:
        m = converter.from_torch(model, args, kwargs, dynamic_shapes=ds)
        row["export"] = f"ok {time.process_time() - t0:.1f}s"
    except Exception as e:  # noqa: BLE001 - the sweep reports every failure
        row["export"], row["_trace_export"] = _err(e), traceback.format_exc()
        return row

    def attempt(path: str, fn: Callable[[], float]) -> None:
        if path not in paths:
            return
        try:
            row[path] = f"ok {fn():.1e}"
        except Exception as e:  # noqa: BLE001
            row[path], row[f"_trace_{path}"] = _err(e), traceback.format_exc()

    def compare_all(call: Callable[[dict], Any]) -> float:
        return max(_compare(_flat(call(kw)), w) for kw, w in zip(cases, wants, strict=True))

    def reexport() -> float:
        t = m.to_torch()
        ep = torch.export.export(t, args, kwargs, dynamic_shapes=t.export_dynamic_shapes())
        return compare_all(lambda kw: _call(ep.module(), spec, kw))

    def onnx_session(proto: Any) -> Callable[[dict], Any]:
        import onnxruntime as ort

        sess = ort.InferenceSession(proto, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        outs = [o.name for o in sess.get_outputs()]

        def call(kw: dict) -> dict:
            got = sess.run(None, dict(zip(names, (v.numpy() for v in kw.values()), strict=True)))
            if positional:  # outputs in the source's leaf order
                return dict(zip(wants[0], got, strict=True))
            return {n.removeprefix("outputs"): g for n, g in zip(outs, got, strict=True)}

        return call

    def onnx() -> float:
        call = onnx_session(m.to_onnx().SerializeToString())
        return max(_compare(call(kw), w) for kw, w in zip(cases, wants, strict=True))

    def cli() -> float:
        with tempfile.TemporaryDirectory() as d:
            torch.save({"state": model.state_dict()}, os.path.join(d, "weights.pt"))
            factory = os.path.join(d, "factory.py")
            with open(factory, "w") as f:
                f.write(_FACTORY.format(root=os.path.dirname(EXAMPLES), name=spec.name, d=d))
            worst = 0.0
            for suffix in ("onnx", "pt2"):
                out = os.path.join(d, f"model.{suffix}")
                cmd = [sys.executable, "-m", "converter.tools.cli", f"{factory}:factory", "-o", out]
                env = {**os.environ, "PYTHONPATH": os.path.dirname(EXAMPLES)}
                done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, check=False)
                if done.returncode:
                    raise RuntimeError(f"convert -o model.{suffix}: {done.stderr.strip().splitlines()[-1]}")
                if suffix == "onnx":
                    call = onnx_session(out)
                    got = [call(kw) for kw in cases]
                else:
                    g = torch.export.load(out).module()
                    got = [_flat(_call(g, spec, kw)) for kw in cases]
                worst = max(worst, *(_compare(a, w) for a, w in zip(got, wants, strict=True)))
            return worst

    attempt("reexport", reexport)
    if positional:
        attempt("onnx", onnx)
    attempt("cli", cli)
    return row


# the factory the ``cli`` path converts: the sweep's model with its saved weights, the
# example inputs and the dynamic shapes (``(model, args, kwargs, dynamic_shapes)``)
_FACTORY = """
import sys
sys.path.insert(0, {root!r})
import torch
from tests.sweeps import dyn_sweep, hf_sweep

def factory():
    spec = next(s for s in dyn_sweep.specs() if s.name == {name!r})
    model = spec.build()
    model.load_state_dict(torch.load({d!r} + "/weights.pt")["state"])
    example = spec.inputs(*spec.sizes[0])
    dynamic = hf_sweep._dynamic_shapes(spec, True)
    if spec.name in ("mlp", "cnn", "gpt2"):
        return model, tuple(example.values()), {{}}, tuple(dynamic.values())
    return model, (), example, dynamic
"""

COLUMNS = ("export", *PATHS)


def main(names: list[str] | None = None, verbose: bool = False) -> dict[str, dict[str, str]]:
    """Run the sweep (``names``: a subset) and print the table; returns the rows."""
    rows = {}
    print("| program | " + " | ".join(COLUMNS) + " |\n" + "|---" * (len(COLUMNS) + 1) + "|", flush=True)
    for spec in specs():
        if names and spec.name not in names:
            continue
        t0 = time.process_time()
        rows[spec.name] = row = run(spec)
        cells = " | ".join(row.get(c, "·")[:90] for c in COLUMNS)
        print(f"| {spec.name} | {cells} | ({time.process_time() - t0:.0f} s CPU)", flush=True)
        if verbose:
            for k, v in row.items():
                if k.startswith("_trace"):
                    print(v, file=sys.stderr)
    return rows


__all__ = ["EXPECTED", "main", "run", "specs"]

if __name__ == "__main__":
    argv = sys.argv[1:]
    main([a for a in argv if not a.startswith("-")] or None, verbose="-v" in argv)
