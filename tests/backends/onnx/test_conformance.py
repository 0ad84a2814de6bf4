# ruff: noqa: E501 - the xfail table keeps one case per line
"""Conformance of the ONNX backend against JAX, on the case table the torch backend's suite
runs (:mod:`tests.backends.conformance_cases`: functions from ``jax.numpy``, ``jax.lax``,
``jax.nn``, ``jax.scipy.special`` and ``jnp.linalg`` across dtypes).

Each case is lowered once with ``jax.jit``; the compiled lowering gives the expected
outputs, and the same StableHLO text goes through ``converter.from_stablehlo`` →
``Module.to_onnx(opset=18)`` (26 for the cases in :data:`OPSET`) →
``onnx.checker.check_model(full_check=True)`` → onnxruntime (CPU), compared with JAX
exactly for integers and bools and within the table's tolerances for floats. Test ids are the torch suite's.

Every failing case is in :data:`XFAIL_ONNX` with its reason, grouped by cause (strict: a
listed case that passes fails the run); nothing is skipped. A case the backend cannot
express must fail by raising, never by returning wrong numbers: an expected failure counts
only when it raises one of :data:`REFUSED` (a conversion error, or onnxruntime refusing the
model), so a wrong result fails the run even for a listed case.

Runtime: about a minute single-process on 2 cores (``pytest -p no:xdist --durations=5``),
mostly JAX's own lowering and XLA compilation of the references; the ONNX side (conversion,
``check_model``, onnxruntime) runs first, so a refused case costs no XLA compilation, and
the references compile with LLVM at -O0. Every case runs: no subset is selected.
"""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

import converter
from converter.errors import ConversionError
from tests.backends.conformance_cases import Case, case_params, make_args, selected_params, tolerance
from tests.compare import assert_outputs_close

from .helpers import run_session

# --------------------------------------------------------------------------- expected failures

XFAIL_ONNX: dict[str, str] = {
    # ---- constructs the backend does not lower yet (it raises)
}


#: Cases converted at a later opset than the suite's 18: floats read as integer bits
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


#: How an expected failure may fail: the converter refuses the construct, or onnxruntime
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


def _params():
    out = []
    for c, dt, cid in selected_params():
        xfail = pytest.mark.xfail(reason=XFAIL_ONNX.get(cid), strict=True, raises=REFUSED)
        marks = [xfail] if cid in XFAIL_ONNX else []
        out.append(pytest.param(c, dt, OPSET.get(cid, DEFAULT_OPSET), id=cid, marks=marks))
    return out


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: no constant-folding notices on stderr
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


# LLVM at -O0: a third less compile time for the JAX reference, same float semantics
_XLA_FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def run_case(c: Case, dtype, opset: int = DEFAULT_OPSET) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(onnxruntime outputs, JAX outputs) of case ``c`` in ``dtype``, converted at ``opset``.
    The ONNX side runs first, so a case the backend refuses costs no XLA compilation."""
    args = make_args(c, dtype)
    lowered = jax.jit(c.fn).lower(*args)
    model = converter.from_stablehlo(lowered.as_text()).to_onnx(opset=opset, check=False)
    onnx.checker.check_model(model, full_check=True)
    sess = _session(model)
    got = run_session(sess, args)  # complex values as real pairs (backends.onnx.realpairs)
    compiled = lowered.compile(_XLA_FAST_COMPILE)
    want = [np.asarray(w) for w in jax.tree_util.tree_leaves(compiled(*args))]
    return got, want


def _check(c: Case, dtype, opset: int) -> None:
    got, want = run_case(c, dtype, opset)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        rtol, atol = tolerance(c, w.dtype)
        if w.dtype == ml_dtypes.bfloat16:
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
            g, w = g.astype(np.float32), w.astype(np.float32)
        assert_outputs_close([g], [w], rtol, atol)


@pytest.mark.parametrize(("c", "dtype", "opset"), _params())
def test_conformance(c: Case, dtype, opset: int) -> None:
    _check(c, dtype, opset)


def test_xfail_ids_exist() -> None:
    """Every XFAIL_ONNX key names a case of the table (a renamed case cannot hide there)."""
    ids = {cid for _, _, cid in case_params()}
    assert set(XFAIL_ONNX) <= ids, sorted(set(XFAIL_ONNX) - ids)
    assert set(OPSET) <= ids, sorted(set(OPSET) - ids)
