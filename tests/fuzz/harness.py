"""Run a generated program or module through every conversion path and compare with its source.

Paths of a JAX program (:data:`JAX_PATHS`): ``torch`` (``from_jax(...).to_torch()``),
``onnx`` (``.to_onnx()`` in onnxruntime), ``jax`` (``.to_jax()``) and the round trips
``onnx>jax`` (``from_onnx(m.to_onnx()).to_jax()``) and ``onnx>torch`` (``.to_torch()``);
the reference is ``jax.jit`` of the function. Paths of a torch module
(:data:`TORCH_PATHS`): ``jax``, ``torch``, ``onnx`` and ``jax>torch``
(``from_jax(f.apply, params=f.params).to_torch()``); the reference is eager torch.

:func:`compare` is the fuzzer's comparator: shapes and dtypes equal; integers and bools
exactly; floats with NaN where the reference has NaN, infinities equal (sign included) and
finite values within ``atol + rtol * |expected| + slack`` where ``rtol``/``atol`` are
:data:`converter.tools.validate.TOLERANCES` of the dtype and ``slack`` the difference two correct
implementations may show for this value (``4 * Value.err``, see :mod:`tests.fuzz.programs`).
"""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass

import jax
import numpy as np
import onnxruntime as ort
import torch

import converter
from converter import dtypes
from converter.errors import ConversionError
from converter.tools.validate import as_numpy, to_torch_tree, tolerance
from tests.backends.onnx.helpers import run_session

# --------------------------------------------------------------------------- comparison


def compare(want, got, slack: float = 0.0, scale: float = 1.0) -> str | None:
    """None when ``got`` matches ``want`` (see the module docstring), else what differs.

    ``slack`` is an extra absolute tolerance; ``scale`` multiplies the dtype's ``atol``
    (a reduction of ``n`` terms passes ``n``).
    """
    w, g = as_numpy(want), as_numpy(got)
    if w.shape != g.shape:
        return f"shape {g.shape} != {w.shape}"
    if dtypes.name_of(w.dtype) != dtypes.name_of(g.dtype):
        return f"dtype {dtypes.name_of(g.dtype)} != {dtypes.name_of(w.dtype)}"
    if w.size == 0:
        return None
    if not (np.issubdtype(w.dtype, np.inexact) or dtypes.is_floating(dtypes.name_of(w.dtype))):
        bad = w != g
        if bad.any():
            i = tuple(int(k) for k in np.argwhere(bad)[0])
            return f"{int(bad.sum())} of {w.size} elements differ; at {i}: {g[i]!r} != {w[i]!r}"
        return None
    tol = tolerance(w.dtype)
    w64, g64 = w.astype(np.float64), g.astype(np.float64)
    wn, gn = np.isnan(w64), np.isnan(g64)
    if (wn != gn).any():
        i = tuple(int(k) for k in np.argwhere(wn != gn)[0])
        return f"NaN mismatch at {int((wn != gn).sum())} position(s); at {i}: {g64[i]!r} != {w64[i]!r}"
    winf, ginf = np.isinf(w64), np.isinf(g64)
    bad_inf = (winf | ginf) & ~(w64 == g64) & ~wn
    if bad_inf.any():
        i = tuple(int(k) for k in np.argwhere(bad_inf)[0])
        return f"infinity mismatch at {int(bad_inf.sum())} position(s); at {i}: {g64[i]!r} != {w64[i]!r}"
    fin = ~(wn | winf)
    diff = np.abs(g64 - w64)
    allowed = tol.atol * scale + tol.rtol * np.abs(w64) + slack
    bad = fin & (diff > allowed)
    if bad.any():
        i = tuple(int(k) for k in np.argwhere(bad)[0])
        return (
            f"{int(bad.sum())} of {w.size} elements off by up to {float(diff[bad].max()):.3g} "
            f"(allowed {float(allowed[bad].min()):.3g}); at {i}: {g64[i]!r} != {w64[i]!r}"
        )
    return None


# --------------------------------------------------------------------------- paths


def _leaves(tree) -> list[np.ndarray]:
    return [
        as_numpy(x) for x in jax.tree_util.tree_leaves(tree, is_leaf=lambda t: isinstance(t, torch.Tensor))
    ]


def run_torch(module: converter.Module, args: list[np.ndarray]) -> list[np.ndarray]:
    tm = module.to_torch()
    with torch.no_grad():
        return _leaves(tm(*to_torch_tree(tuple(args))))


def run_onnx(module: converter.Module, args: list[np.ndarray]) -> list[np.ndarray]:
    model = module.to_onnx()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return run_session(sess, args)


def run_jax(module: converter.Module, args: list[np.ndarray]) -> list[np.ndarray]:
    return _leaves(module.to_jax()(*args))


def run_onnx_jax(module: converter.Module, args: list[np.ndarray]) -> list[np.ndarray]:
    again = converter.from_onnx(module.to_onnx())
    return _leaves(again.to_jax()(*args))


def run_jax_torch(module: converter.Module, args: list[np.ndarray]) -> list[np.ndarray]:
    f = module.to_jax()
    again = converter.from_jax(f.apply, *args, params=f.params)
    return run_torch(again, args)


def run_onnx_torch(module: converter.Module, args: list[np.ndarray]) -> list[np.ndarray]:
    again = converter.from_onnx(module.to_onnx())
    return run_torch(again, args)


JAX_PATHS: dict[str, Callable] = {
    "torch": run_torch,
    "onnx": run_onnx,
    "jax": run_jax,
    "onnx>jax": run_onnx_jax,
    "onnx>torch": run_onnx_torch,
}
TORCH_PATHS: dict[str, Callable] = {
    "jax": run_jax,
    "torch": run_torch,
    "onnx": run_onnx,
    "jax>torch": run_jax_torch,
}


# --------------------------------------------------------------------------- outcomes


@dataclass
class Outcome:
    """One (case, path): ``status`` is ``pass``, ``skipped`` (the reference itself refused
    the case: eager torch or ``jax.jit`` raised, so there is nothing to compare),
    ``refused`` (a ``ConversionError``: the converter said no, which is allowed),
    ``error`` (any other exception, or a ``ConversionError`` wrapping one: an op rule that
    crashed) or ``mismatch``."""

    path: str
    status: str
    detail: str = ""


def run_path(path: str, fn: Callable, module, args, want: list[np.ndarray], slacks, scales) -> Outcome:
    """Run one path and compare each output with the reference."""
    try:
        got = fn(module, args)
    except ConversionError as e:
        cause = e.__cause__ or e.__context__
        # an op rule that crashed (a ValueError inside) is a defect, not a refusal
        # (NotImplementedError is a rule saying no)
        crashed = cause is not None and not isinstance(cause, (ConversionError, NotImplementedError))
        status = "error" if crashed else "refused"
        return Outcome(path, status, f"{type(e).__name__}: {e}"[:600])
    except Exception as e:  # noqa: BLE001 - any other failure of a path is a finding
        tb = traceback.format_exception_only(type(e), e)[-1].strip()
        return Outcome(path, "error", tb[:600])
    if len(got) != len(want):
        return Outcome(path, "mismatch", f"{len(got)} outputs, expected {len(want)}")
    for k, (w, g) in enumerate(zip(want, got, strict=True)):
        msg = compare(w, g, slacks[k], scales[k])
        if msg:
            return Outcome(path, "mismatch", f"output {k}: {msg}")
    return Outcome(path, "pass")


class Recorder:
    """Counts outcomes; with ``FUZZ_REPORT=path.jsonl`` appends every non-passing case."""

    def __init__(self):
        self.counts: dict[str, int] = {}
        self.findings: list[dict] = []
        self.report = os.environ.get("FUZZ_REPORT")

    def record(self, kind: str, source: str, outcomes: list[Outcome]) -> None:
        for o in outcomes:
            self.counts[o.status] = self.counts.get(o.status, 0) + 1
            if o.status in ("error", "mismatch", "refused", "skipped"):
                entry = {"kind": kind, "source": source, **asdict(o)}
                self.findings.append(entry)
                if self.report:
                    with open(self.report, "a") as f:
                        f.write(json.dumps(entry) + "\n")
