# ruff: noqa: E501 - the xfail table keeps one case per line
"""Conformance of the ONNX backend against JAX, on the case table the torch backend's suite
runs (:mod:`tests.backends.conformance_cases`: functions from ``jax.numpy``, ``jax.lax``,
``jax.nn``, ``jax.scipy.special`` and ``jnp.linalg`` across dtypes).

Each case is lowered once with ``jax.jit``; the compiled lowering gives the expected
outputs, and the same StableHLO text goes through ``converter.from_stablehlo`` →
``Module.to_onnx(opset=18)`` → ``onnx.checker.check_model(full_check=True)`` →
onnxruntime (CPU), compared with JAX exactly for integers and bools and within the table's
tolerances for floats. Test ids are the torch suite's.

Every failing case is in :data:`XFAIL_ONNX` with its reason (strict: a listed case that
passes fails the run); nothing is skipped. A case the backend cannot express must fail by
raising, never by returning wrong numbers: the reasons below say which.
"""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import converter
from tests.backends.conformance_cases import Case, case_params, make_args, tolerance
from tests.compare import assert_outputs_close

from .helpers import numpy_of, ort_value

# --------------------------------------------------------------------------- expected failures

XFAIL_ONNX: dict[str, str] = {
    "jnp.arcsin-float64": "onnxruntime CPU has no kernel for Asin-7 on this dtype",
    "jnp.arccos-float64": "onnxruntime CPU has no kernel for Acos-7 on this dtype",
    "jnp.arctan-float64": "onnxruntime CPU has no kernel for Atan-7 on this dtype",
    "jnp.signbit-float32": "stablehlo.bitcast_convert: bitcast_convert float32 -> int32: ONNX has no bitcast",
    "jnp.conj-complex64": "no ONNX rule for stablehlo.complex, stablehlo.imag, stablehlo.real",
    "jnp.real-complex64": "no ONNX rule for stablehlo.real",
    "jnp.imag-complex64": "no ONNX rule for stablehlo.imag",
    "jnp.angle-complex64": "no ONNX rule for stablehlo.imag, stablehlo.real",
    "jnp.isreal-complex64": "no ONNX rule for stablehlo.imag",
    "jnp.spacing-float32": "stablehlo.bitcast_convert: bitcast_convert float32 -> int32: ONNX has no bitcast",
    "jnp.exp[c64]-complex64": "stablehlo.exponential: ONNX operators take no complex values",
    "jnp.abs[c64]-complex64": "stablehlo.abs: ONNX operators take no complex values",
    "jnp.sqrt[c64]-complex64": "stablehlo.sqrt: ONNX operators take no complex values",
    "jnp.log[c64]-complex64": "stablehlo.log: ONNX operators take no complex values",
    "jnp.frexp-float32": "stablehlo.bitcast_convert: bitcast_convert float32 -> int32: ONNX has no bitcast",
    "jnp.add-complex64": "stablehlo.add: ONNX operators take no complex values",
    "jnp.subtract-complex64": "stablehlo.subtract: ONNX operators take no complex values",
    "jnp.multiply-complex64": "stablehlo.multiply: ONNX operators take no complex values",
    "jnp.divide-complex64": "stablehlo.divide: ONNX operators take no complex values",
    "jnp.arctan2-float64": "onnxruntime CPU has no kernel for Atan-7 on this dtype",
    "jnp.copysign-float32": "stablehlo.bitcast_convert: bitcast_convert float32 -> int32: ONNX has no bitcast",
    "jnp.nextafter-float32": "stablehlo.bitcast_convert: bitcast_convert float32 -> int32: ONNX has no bitcast",
    "jnp.nextafter-float64": "stablehlo.bitcast_convert: bitcast_convert float64 -> int64: ONNX has no bitcast",
    "jnp.equal-complex64": "stablehlo.compare: ONNX operators take no complex values",
    "jnp.histogram-float32": "stablehlo.compare: compare with TOTALORDER on floats has no ONNX equivalent",
    "jnp.lexsort-float32": "stablehlo.sort: sort with a comparator other than < or > on the first operand",
    "jnp.searchsorted-float32": "stablehlo.compare: compare with TOTALORDER on floats has no ONNX equivalent",
    "jnp.digitize-float32": "stablehlo.compare: compare with TOTALORDER on floats has no ONNX equivalent",
    "jnp.convolve-float32": "onnxruntime CPU has no kernel for Conv-11 on this dtype",
    "jnp.correlate-float32": "onnxruntime CPU has no kernel for Conv-11 on this dtype",
    "jnp.interp-float32": "stablehlo.compare: compare with TOTALORDER on floats has no ONNX equivalent",
    "jnp.add[u16,i16,c128]-complex128": "stablehlo.add: ONNX operators take no complex values",
    "jnp.exp[c128]-complex128": "stablehlo.exponential: ONNX operators take no complex values",
    "jnp.matmul[c]-complex64": "stablehlo.dot_general: ONNX operators take no complex values",
    "jnp.matmul[c]-complex128": "stablehlo.dot_general: ONNX operators take no complex values",
    "lax.conv[int]-int32": "stablehlo.convolution: convolution on int32: ONNX Conv takes floats only",
    "lax.conv[int]-int8": "stablehlo.convolution: convolution on int8: ONNX Conv takes floats only",
    "lax.conv[f16]-float64": "onnxruntime CPU has no kernel for Conv-11 on this dtype",
    "lax.reduce_window[maxpool_grad]-float32": "no ONNX rule for stablehlo.select_and_scatter",
    "lax.reduce_precision-float32": "no ONNX rule for stablehlo.reduce_precision",
    "lax.reduce_precision[bf16]-float32": "no ONNX rule for stablehlo.reduce_precision",
    "lax.bitcast_convert_type-float32": "stablehlo.bitcast_convert: bitcast_convert float32 -> int32: ONNX has no bitcast",
    "lax.bitcast_convert_type[u8]-float32": "stablehlo.bitcast_convert: bitcast_convert float32 -> uint8: ONNX has no bitcast",
    "lax.complex-float32": "no ONNX rule for stablehlo.complex",
    "lax.conj-complex64": "no ONNX rule for stablehlo.complex, stablehlo.imag, stablehlo.real",
    "lax.nextafter-float32": "stablehlo.bitcast_convert: bitcast_convert float32 -> int32: ONNX has no bitcast",
    "jss.gamma-float32": "stablehlo.bitcast_convert: bitcast_convert float32 -> int32: ONNX has no bitcast",
    "jss.gamma-float64": "stablehlo.bitcast_convert: bitcast_convert float64 -> int64: ONNX has no bitcast",
    "jss.poch-float32": "stablehlo.bitcast_convert: bitcast_convert float32 -> int32: ONNX has no bitcast",
    "linalg.inv-float32": "no ONNX rule for custom_call lapack_sgetrf_ffi, custom_call lapack_strsm_ffi",
    "linalg.inv-float64": "no ONNX rule for custom_call lapack_dgetrf_ffi, custom_call lapack_dtrsm_ffi",
    "linalg.inv[batch]-float32": "no ONNX rule for custom_call lapack_sgetrf_ffi, custom_call lapack_strsm_ffi",
    "linalg.det-float32": "no ONNX rule for custom_call lapack_sgetrf_ffi",
    "linalg.det-float64": "no ONNX rule for custom_call lapack_dgetrf_ffi",
    "linalg.det[general]-float32": "no ONNX rule for custom_call lapack_sgetrf_ffi",
    "linalg.slogdet-float32": "no ONNX rule for custom_call lapack_sgetrf_ffi",
    "linalg.solve-float32": "no ONNX rule for custom_call lapack_sgetrf_ffi, custom_call lapack_strsm_ffi",
    "linalg.solve-float64": "no ONNX rule for custom_call lapack_dgetrf_ffi, custom_call lapack_dtrsm_ffi",
    "linalg.cholesky-float32": "no ONNX rule for custom_call lapack_spotrf_ffi",
    "linalg.cholesky-float64": "no ONNX rule for custom_call lapack_dpotrf_ffi",
    "linalg.cholesky[batch]-float32": "no ONNX rule for custom_call lapack_spotrf_ffi",
    "linalg.qr[recon]-float32": "no ONNX rule for custom_call lapack_sgeqrf_ffi, custom_call lapack_sorgqr_ffi",
    "linalg.qr[r_abs]-float32": "no ONNX rule for custom_call lapack_sgeqrf_ffi, custom_call lapack_sorgqr_ffi",
    "linalg.eigh[vals]-float32": "no ONNX rule for custom_call lapack_ssyevd_ffi",
    "linalg.eigh[vals]-float64": "no ONNX rule for custom_call lapack_dsyevd_ffi",
    "linalg.eigh[recon]-float32": "no ONNX rule for custom_call lapack_ssyevd_ffi",
    "linalg.svd[vals]-float32": "no ONNX rule for custom_call lapack_sgesdd_ffi",
    "linalg.svd[vals]-float64": "no ONNX rule for custom_call lapack_dgesdd_ffi",
    "linalg.svd[recon]-float32": "no ONNX rule for custom_call lapack_sgesdd_ffi",
    "linalg.pinv-float32": "no ONNX rule for custom_call lapack_sgesdd_ffi",
    "linalg.matrix_rank-float32": "no ONNX rule for custom_call lapack_sgesdd_ffi",
    "linalg.norm[nuc]-float32": "no ONNX rule for custom_call lapack_sgesdd_ffi",
    "linalg.norm[2]-float32": "no ONNX rule for custom_call lapack_sgesdd_ffi",
    "linalg.cond-float32": "no ONNX rule for custom_call lapack_sgesdd_ffi",
    "linalg.lstsq-float32": "no ONNX rule for custom_call lapack_sgesdd_ffi",
    "linalg.tensorsolve-float32": "no ONNX rule for custom_call lapack_sgetrf_ffi, custom_call lapack_strsm_ffi",
    "linalg.eig-float32": "no ONNX rule for stablehlo.complex, custom_call lapack_sgeev_ffi",
    "scipy.linalg.lu_factor-float32": "no ONNX rule for custom_call lapack_sgetrf_ffi",
    "scipy.linalg.lu-float32": "no ONNX rule for custom_call lapack_sgetrf_ffi",
    "scipy.linalg.cho_solve-float32": "no ONNX rule for custom_call lapack_spotrf_ffi, custom_call lapack_strsm_ffi",
    "scipy.linalg.solve_triangular-float32": "no ONNX rule for custom_call lapack_strsm_ffi",
    "scipy.linalg.solve_triangular[T]-float32": "no ONNX rule for custom_call lapack_strsm_ffi",
    "scipy.linalg.expm-float32": "no ONNX rule for custom_call lapack_sgetrf_ffi, custom_call lapack_strsm_ffi",
    "jnp.fft.fft-float32": "no ONNX rule for stablehlo.fft",
    "jnp.fft.fft-complex64": "no ONNX rule for stablehlo.fft",
    "jnp.fft.ifft-complex64": "no ONNX rule for stablehlo.fft",
    "jnp.fft.rfft-float32": "no ONNX rule for stablehlo.fft",
    "jnp.fft.irfft-complex64": "no ONNX rule for stablehlo.fft",
    "jnp.fft.fft2-float32": "no ONNX rule for stablehlo.fft",
    "jnp.fft.rfftn-float32": "no ONNX rule for stablehlo.fft",
}


def _params():
    out = []
    for c, dt, cid in case_params():
        marks = [pytest.mark.xfail(reason=XFAIL_ONNX[cid], strict=True)] if cid in XFAIL_ONNX else []
        out.append(pytest.param(c, dt, id=cid, marks=marks))
    return out


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: no constant-folding notices on stderr
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


# LLVM at -O0: a third less compile time for the JAX reference, same float semantics
_XLA_FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def run_case(c: Case, dtype) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(onnxruntime outputs, JAX outputs) of case ``c`` in ``dtype``. The ONNX side runs
    first, so a case the backend refuses costs no XLA compilation."""
    args = make_args(c, dtype)
    lowered = jax.jit(c.fn).lower(*args)
    model = converter.from_stablehlo(lowered.as_text()).to_onnx(opset=18, check=False)
    onnx.checker.check_model(model, full_check=True)
    sess = _session(model)
    feeds = {i.name: ort_value(np.asarray(a)) for i, a in zip(sess.get_inputs(), args, strict=True)}
    got = [numpy_of(v) for v in sess.run_with_ort_values(None, feeds)]
    compiled = lowered.compile(_XLA_FAST_COMPILE)
    want = [np.asarray(w) for w in jax.tree_util.tree_leaves(compiled(*args))]
    return got, want


def _check(c: Case, dtype) -> None:
    got, want = run_case(c, dtype)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        rtol, atol = tolerance(c, w.dtype)
        if w.dtype == ml_dtypes.bfloat16:
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
            g, w = g.astype(np.float32), w.astype(np.float32)
        assert_outputs_close([g], [w], rtol, atol)


@pytest.mark.parametrize(("c", "dtype"), _params())
def test_conformance(c: Case, dtype) -> None:
    _check(c, dtype)


def test_xfail_ids_exist() -> None:
    """Every XFAIL_ONNX key names a case of the table (a renamed case cannot hide there)."""
    ids = {cid for _, _, cid in case_params()}
    assert set(XFAIL_ONNX) <= ids, sorted(set(XFAIL_ONNX) - ids)
