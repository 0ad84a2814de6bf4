"""The ``check`` fixture of the ATen-rule tests: convert a function with
``converter.from_torch``, assert the ATen ops under test are really in the exported graph
(so the test exercises their rules), run the JAX backend and compare with eager torch:
same shapes and dtypes, values within tolerance (exact for integers and bools)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils._pytree import tree_leaves

import converter
from frontends.torch import export
from tests.compare import assert_complex_close


class Fn(torch.nn.Module):
    """Wraps a function of tensors as a module for ``torch.export``."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.detach().numpy()


def graph_ops(ep) -> set[str]:
    return {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}


def run_check(fn, *args, ops=(), rtol=1e-6, atol=1e-6):
    """Compare ``fn(*args)`` (tensor args) in eager torch and through the converter.

    Returns the JAX outputs (flat list of NumPy arrays)."""
    module = fn if isinstance(fn, torch.nn.Module) else Fn(fn)
    ep = export(module, args)
    present = graph_ops(ep)
    missing = [op for op in ([ops] if isinstance(ops, str) else ops) if op not in present]
    assert not missing, f"{missing} not in the exported graph: {sorted(present)}"
    jfn = converter.from_torch(ep).to_jax()
    with torch.no_grad():
        ref = [t for t in tree_leaves(module(*args)) if isinstance(t, torch.Tensor)]
    out = [np.asarray(o) for o in tree_leaves(jfn(*(to_numpy(a) for a in args)))]
    assert len(out) == len(ref)
    for i, (o, r) in enumerate(zip(out, ref, strict=True)):
        r = to_numpy(r)
        assert o.shape == r.shape, f"output {i}: shape {o.shape}, torch {r.shape}"
        assert o.dtype == r.dtype, f"output {i}: dtype {o.dtype}, torch {r.dtype}"
        if r.dtype.kind in "fcV":  # float, complex, bfloat16
            if r.dtype.kind == "c":
                assert_complex_close(o, r, rtol, atol, err_msg=f"output {i}")
                continue
            np.testing.assert_allclose(
                o.astype(np.float64),
                r.astype(np.float64),
                rtol=rtol,
                atol=atol,
                equal_nan=True,
                err_msg=f"output {i}",
            )
        else:
            np.testing.assert_array_equal(o, r, err_msg=f"output {i}")
    return out


@pytest.fixture
def check():
    """``check(fn, *tensors, ops=("aten.x.default", ...), rtol=1e-6, atol=1e-6)``."""
    return run_check
