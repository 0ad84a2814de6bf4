"""Run one small StableHLO module (written from the StableHLO spec's examples and semantics) on
every backend: ``to_jax``, ``to_torch`` and ``to_onnx`` run by onnxruntime."""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
import torch

import converter
from tests.backends.onnx.helpers import run_session
from tests.backends.torch.helpers import numpy_of, torch_of

BACKENDS = ("jax", "torch", "onnx")


def run(text: str, backend: str, *args) -> list[np.ndarray]:
    """The outputs of StableHLO ``text``'s ``@main`` on ``args`` (NumPy) through ``backend``
    (each module converted once per backend: the cases of one module share it)."""
    fn = _converted(text, backend)
    if backend == "jax":
        out = fn(*args)
        return [np.asarray(x) for x in (out if isinstance(out, (tuple, list)) else [out])]
    if backend == "torch":
        out = fn(*[_torch(a) for a in args])
        return [_numpy(x) for x in (out if isinstance(out, (tuple, list)) else [out])]
    return run_session(fn, list(args))


@functools.lru_cache(maxsize=64)
def _converted(text: str, backend: str):
    module = converter.from_stablehlo(text)
    if backend == "jax":
        return module.to_jax()
    if backend == "torch":
        return module.to_torch()
    model = module.to_onnx()
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _torch(a: np.ndarray):
    """A NumPy input as torch; ml_dtypes' float8 arrays as torch's float8 through their bytes."""
    a = np.asarray(a)
    if a.dtype.name in ("int2", "int4", "uint2", "uint4"):
        return a  # torch has no such tensors: the backend takes the NumPy array
    if a.dtype.name.startswith("float8"):
        return torch.from_numpy(a.view(np.uint8).copy()).view(getattr(torch, a.dtype.name))
    return torch_of(a)


def _numpy(t) -> np.ndarray:
    """A torch output as NumPy; torch's float8 types (which ``Tensor.numpy`` refuses) from
    their bytes as ml_dtypes'."""
    name = str(t.dtype).removeprefix("torch.")
    if name.startswith("float8"):
        return t.detach().view(torch.uint8).numpy().view(getattr(ml_dtypes, name))
    return numpy_of(t)


def expect_eq(got: np.ndarray, want, dtype=None) -> None:
    """``check.expect_eq_const``: same values (NaN == NaN, -0.0 != 0.0 for floats) and shape."""
    want = np.asarray(want, dtype=dtype if dtype is not None else got.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.dtype.kind == "f" or want.dtype.kind == "f":
        g, w = got.astype(np.float64), want.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_array_equal(np.where(np.isnan(g), 0, g), np.where(np.isnan(w), 0, w))
        nan = np.isnan(w)  # a NaN's sign bit is not a value
        np.testing.assert_array_equal(np.signbit(g)[~nan], np.signbit(w)[~nan])
    else:
        np.testing.assert_array_equal(got, want)


backends = pytest.mark.parametrize("backend", BACKENDS)
