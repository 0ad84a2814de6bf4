"""Convert a JAX function to native torch through StableHLO and compare with JAX."""

import jax
import ml_dtypes
import numpy as np
import torch

import converter
from tests.compare import assert_complex_close


def to_torch_module(fn, *args):
    """``fn`` lowered by ``jax.jit`` to StableHLO, read back, and converted to torch."""
    return converter.from_stablehlo(jax.jit(fn).lower(*args).as_text()).to_torch()


def torch_of(x):
    """A torch tensor with the dtype and values of NumPy/JAX array ``x`` (bf16 included)."""
    a = np.asarray(x)
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.uint16).copy()).view(torch.bfloat16)
    if a.dtype in (np.uint16, np.uint32, np.uint64):
        return torch.from_numpy(a.copy())
    return torch.from_numpy(np.array(a, copy=True))


def numpy_of(t):
    """NumPy array of a torch tensor (bf16 as ml_dtypes.bfloat16)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def run_both(fn, *args):
    """(torch outputs, JAX outputs) as lists of NumPy arrays."""
    module = to_torch_module(fn, *args)
    got = module(*[torch_of(a) for a in args])
    got = [numpy_of(t) for t in jax.tree_util.tree_leaves(got, is_leaf=lambda t: isinstance(t, torch.Tensor))]
    return got, leaves(jax.jit(fn)(*args))


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    """Exact for integers and bools, within ``rtol``/``atol`` for floats (NaN == NaN)."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if np.iscomplexobj(w):
            assert_complex_close(g, w, rtol, atol)
        elif np.issubdtype(w.dtype, np.inexact) or w.dtype == ml_dtypes.bfloat16:
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            np.testing.assert_allclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


def assert_same(fn, *args, rtol=1e-5, atol=1e-6):
    """The torch conversion of ``fn`` reproduces ``jax.jit(fn)`` on ``args``."""
    got, want = run_both(fn, *args)
    assert_close(got, want, rtol, atol)
