# ruff: noqa: E501 - the xfail tables keep one case per line
"""Conformance of the torch and ONNX backends against JAX: functions from ``jax.numpy``,
``jax.lax``, ``jax.nn``, ``jax.scipy.special`` and ``jnp.linalg`` across dtypes (the case table
:mod:`tests.backends.conformance_cases`), compared with JAX's own output exactly for integers
and bools and within the table's tolerances for floats.

Each case is lowered once with ``jax.jit``. The same StableHLO text goes through
``converter.from_stablehlo`` and

* ``to_torch``, run on torch tensors (test ids ``torch-<case>``);
* ``Module.to_onnx(opset=18)`` (26 for the cases in :data:`OPSET`) →
  ``onnx.checker.check_model(full_check=True)`` → onnxruntime on CPU, complex values fed and
  read as real pairs (test ids ``onnx-<case>``).

The reference is that lowering compiled by XLA (LLVM at -O0 and the classic elemental
emitters: two thirds less compile time, the same float semantics up to rounding), computed once per case for both backends: a case's two
tests run one after the other and share it (:func:`reference`).

Every known failure is listed with its reason in its backend's table, :data:`XFAIL_TORCH` or
:data:`XFAIL_ONNX` (strict: a listed case that passes fails the run); nothing is skipped. A
case the ONNX backend cannot express must fail by raising, never by returning wrong numbers:
an ONNX expected failure counts only when it raises one of :data:`REFUSED` (a conversion
error, or onnxruntime refusing the model), so a wrong result fails the run even for a listed
case.

``CONFORMANCE_CASES=all`` runs every case of the table (the full run whose counts
docs/coverage.md gives); the default run takes each case's first dtype and every 4th other
(case, dtype) pair (:func:`~tests.backends.conformance_cases.selected_params`).
"""

from __future__ import annotations

import functools

import jax
import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

import converter
from converter.errors import ConversionError
from tests import xla_fast
from tests.backends.conformance_cases import (
    CASES,
    FULL,
    Case,
    case_params,
    make_args,
    selected_params,
    tolerance,
)
from tests.backends.onnx.helpers import run_session
from tests.backends.torch.helpers import assert_close, numpy_of, torch_of
from tests.compare import assert_outputs_close

# --------------------------------------------------------------------------- expected failures

#: torch backend: case id -> reason.
XFAIL_TORCH: dict[str, str] = {}

#: ONNX backend: case id -> reason, grouped by cause.
XFAIL_ONNX: dict[str, str] = {
    # ---- constructs the backend does not lower yet (it raises)
}


#: ONNX: cases converted at a later opset than the suite's 18: floats read as integer bits
#: (``bitcast_convert`` float -> int or between widths) need ONNX ``BitCast`` (opset 26).
OPSET: dict[str, int] = {
    cid: 26
    for cid in (
        "jnp.signbit-float32",
        "jnp.spacing-float32",
        "jnp.frexp-float32",
        "jnp.copysign-float32",
        "jnp.nextafter-float32",
        "jnp.nextafter-float64",
        "lax.bitcast_convert_type-float32",
        "lax.bitcast_convert_type[u8]-float32",
        "lax.nextafter-float32",
        "jss.gamma-float32",
        "jss.gamma-float64",
        "jss.poch-float32",
    )
}
DEFAULT_OPSET = 18


#: How an ONNX expected failure may fail: the converter refuses the construct, or onnxruntime
#: refuses the model (a missing kernel). A wrong or misshapen result (AssertionError) is never
#: an expected failure: it fails the run even for a listed case.
REFUSED = (
    ConversionError,
    onnx.checker.ValidationError,
    onnx.shape_inference.InferenceError,
    ort_state.NotImplemented,
    ort_state.Fail,
    ort_state.InvalidArgument,
    ort_state.InvalidGraph,
)


#: Each backend's xfail table and what its expected failures may raise (None: anything).
_XFAILS = {"torch": (XFAIL_TORCH, None), "onnx": (XFAIL_ONNX, REFUSED)}


def reason_cases() -> list[str]:
    """Case ids: the first listed case (in table order) of each reason of each backend's xfail
    table, so the default run checks every kind of expected failure."""
    order = {cid: i for i, (_, _, cid) in enumerate(case_params())}
    first: dict[tuple[str, str], str] = {}
    for backend, (table, _) in _XFAILS.items():
        for cid in sorted(table, key=lambda k: order.get(k, len(order))):
            first.setdefault((backend, table[cid]), cid)
    return sorted(set(first.values()), key=lambda k: order.get(k, len(order)))


def _params():
    out = []
    chosen = list(selected_params())
    have = {cid for _, _, cid in chosen}
    wanted = set(reason_cases()) - have
    chosen += [p for p in case_params() if p[2] in wanted]
    for c, dt, cid in chosen:
        for backend, (table, raises) in _XFAILS.items():  # in a row: they share the case's reference
            marks = [pytest.mark.xfail(reason=table[cid], strict=True, raises=raises)] if cid in table else []
            out.append(pytest.param(backend, c, dt, cid, id=f"{backend}-{cid}", marks=marks))
    return out


# --------------------------------------------------------------------------- the reference, once per case


@functools.lru_cache(maxsize=4)
def lowering(cid: str, c: Case, dtype) -> tuple[list[np.ndarray], jax.stages.Lowered, str]:
    """(inputs, ``jax.jit(c.fn)`` lowered on them, its StableHLO text) of case ``cid``,
    kept for the case's other backend."""
    args = make_args(c, dtype)
    lowered = jax.jit(c.fn).lower(*args)
    return args, lowered, lowered.as_text()


@functools.lru_cache(maxsize=4)
def reference(cid: str, c: Case, dtype) -> list[np.ndarray]:
    """JAX's outputs of case ``cid``: its :func:`lowering` compiled by XLA and run, kept for
    the case's other backend (callers must not write to them)."""
    args, lowered, _ = lowering(cid, c, dtype)
    # XLA's fast settings (tests/xla_fast.py): two thirds less compile time for the reference,
    # results within an ulp of the default ones here (tan, expi: rounding of the same formulas)
    compiled = lowered.compile(xla_fast.FAST)
    return [np.asarray(w) for w in jax.tree_util.tree_leaves(compiled(*args))]


# --------------------------------------------------------------------------- the backends


def run_torch(cid: str, c: Case, dtype) -> list[np.ndarray]:
    """The torch backend's outputs of case ``cid`` (NumPy)."""
    args, _, text = lowering(cid, c, dtype)
    module = converter.from_stablehlo(text).to_torch()
    got = module(*[torch_of(a) for a in args])
    return [numpy_of(t) for t in jax.tree_util.tree_leaves(got)]


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: no constant-folding notices on stderr
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run_onnx(cid: str, c: Case, dtype) -> list[np.ndarray]:
    """onnxruntime's outputs of case ``cid`` converted at its opset (complex values read back
    from real pairs)."""
    args, _, text = lowering(cid, c, dtype)
    model = converter.from_stablehlo(text).to_onnx(opset=OPSET.get(cid, DEFAULT_OPSET), check=False)
    onnx.checker.check_model(model, full_check=True)
    return run_session(
        _session(model), args
    )  # complex values as real pairs (converter.backends.onnx.realpairs)


def _check_torch(c: Case, got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        rtol, atol = tolerance(c, w.dtype)
        assert_close([g], [w], rtol=rtol, atol=atol)


def _check_onnx(c: Case, got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        rtol, atol = tolerance(c, w.dtype)
        if w.dtype == ml_dtypes.bfloat16:
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
            g, w = g.astype(np.float32), w.astype(np.float32)
        assert_outputs_close([g], [w], rtol, atol)


@pytest.mark.parametrize(("backend", "c", "dtype", "cid"), _params())
def test_conformance(backend: str, c: Case, dtype, cid: str) -> None:
    # the backend runs first: a case it refuses costs no XLA compilation
    if backend == "torch":
        _check_torch(c, run_torch(cid, c, dtype), reference(cid, c, dtype))
    else:
        _check_onnx(c, run_onnx(cid, c, dtype), reference(cid, c, dtype))


def test_suite_size() -> None:
    """The suite covers at least 300 distinct functions."""
    assert len({c.name.split("[")[0] for c in CASES}) >= 300


def test_default_run_has_a_case_of_every_xfail_reason(monkeypatch) -> None:
    """The first case of each listed reason is run by default even when the every-4th slice
    leaves it out (the tables are empty now: checked with made-up entries)."""
    selected = {cid for _, _, cid in selected_params()}
    left_out = [cid for _, _, cid in case_params() if cid not in selected][:3]
    assert len(left_out) == 3 or FULL
    if FULL:
        return
    monkeypatch.setitem(XFAIL_ONNX, left_out[0], "made-up reason A")
    monkeypatch.setitem(XFAIL_ONNX, left_out[1], "made-up reason A")  # same reason: its first only
    monkeypatch.setitem(XFAIL_TORCH, left_out[2], "made-up reason B")
    ids = {p.values[3] for p in _params()}
    assert left_out[0] in ids and left_out[2] in ids and left_out[1] not in ids
    assert selected <= ids
    for table in (XFAIL_TORCH, XFAIL_ONNX):  # the real tables: every reason has a run case
        for reason in set(table.values()):
            assert any(table.get(cid) == reason for cid in ids), reason


def test_xfail_ids_exist() -> None:
    """Every key of the xfail and opset tables names a case of the table (a renamed case cannot
    hide there)."""
    ids = {cid for _, _, cid in case_params()}
    for table in (XFAIL_TORCH, XFAIL_ONNX, OPSET):
        assert set(table) <= ids, sorted(set(table) - ids)
