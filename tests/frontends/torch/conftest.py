"""The ``check`` fixture of the ATen-rule tests: convert a function with
``converter.from_torch``, assert the ATen ops under test are really in the exported graph
(so the test exercises their rules), run the JAX backend and compare with eager torch:
same shapes and dtypes, values within tolerance (exact for integers and bools)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from converter.frontends.torch import export
from torch.utils._pytree import tree_flatten, tree_leaves, tree_unflatten

import converter
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


def _assert_ops(ep, ops) -> None:
    present = graph_ops(ep)
    missing = [op for op in ([ops] if isinstance(ops, str) else ops) if op not in present]
    assert not missing, f"{missing} not in the exported graph: {sorted(present)}"


def run_check(fn, *args, ops=(), rtol=1e-6, atol=1e-6):
    """Compare ``fn(*args)`` (tensor args) in eager torch and through the converter.

    Returns the JAX outputs (flat list of NumPy arrays)."""
    module = fn if isinstance(fn, torch.nn.Module) else Fn(fn)
    ep = export(module, args)
    _assert_ops(ep, ops)
    jfn = converter.from_torch(ep).to_jax()
    with torch.no_grad():
        ref = [t for t in tree_leaves(module(*args)) if isinstance(t, torch.Tensor)]
    out = [np.asarray(o) for o in tree_leaves(jfn(*(to_numpy(a) for a in args)))]
    assert_jax_matches(out, ref, rtol, atol)
    return out


def assert_jax_matches(out, ref, rtol, atol) -> None:
    """:func:`run_check`'s comparison of JAX outputs ``out`` with eager torch's ``ref``."""
    assert len(out) == len(ref)
    for i, (o, r) in enumerate(zip(out, ref, strict=True)):
        o, r = np.asarray(o), to_numpy(r)
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


class _Batch(torch.nn.Module):
    """Several functions in one program: ``forward`` takes every function's tensors in a row
    and returns every function's tensor outputs in a row."""

    def __init__(self, fns, counts):
        super().__init__()
        self.fns, self.counts = fns, counts

    def forward(self, *tensors):
        out, at = [], 0
        for fn, n in zip(self.fns, self.counts, strict=True):
            out.extend(t for t in tree_leaves(fn(*tensors[at : at + n])) if isinstance(t, torch.Tensor))
            at += n
        return tuple(out)


def convert_batch(cases: dict, ops=(), targets=("jax",)) -> dict[str, dict[str, list]]:
    """Cases ``{name: (fn, args)}`` converted as ONE program (one ``torch.export``,
    ``from_torch`` and compilation per target instead of one per case), the ATen ops ``ops``
    asserted present in its graph.

    Returns ``{name: {"eager": [...], target: [...]}}``: each case's tensor outputs from eager
    torch (the function run alone on its own arguments) and from each of ``targets``
    (``jax``: ``to_jax``, NumPy arrays; ``torch``: ``to_torch``, tensors)."""
    fns = [fn for fn, _ in cases.values()]
    args = [tuple(a.clone() for a in case_args) for _, case_args in cases.values()]
    with torch.no_grad():
        eager = [
            [t for t in tree_leaves(fn(*[a.clone() for a in a_])) if isinstance(t, torch.Tensor)]
            for fn, a_ in zip(fns, args, strict=True)
        ]
    flat = tuple(a for a_ in args for a in a_)
    ep = export(_Batch(fns, [len(a) for a in args]), flat)
    _assert_ops(ep, ops)
    module = converter.from_torch(ep)
    got = {}
    if "jax" in targets:
        got["jax"] = [np.asarray(o) for o in tree_leaves(module.to_jax()(*(to_numpy(a) for a in flat)))]
    if "torch" in targets:
        with torch.no_grad():
            got["torch"] = list(module.to_torch()(*[a.clone() for a in flat]))
    out, at = {}, 0
    for name, ref in zip(cases, eager, strict=True):
        out[name] = {"eager": ref, **{t: g[at : at + len(ref)] for t, g in got.items()}}
        at += len(ref)
    assert all(len(g) == at for g in got.values()), {t: len(g) for t, g in got.items()}
    return out


def run_check_batch(cases: dict, ops=(), rtol=1e-6, atol=1e-6) -> None:
    """:func:`run_check` of each case ``{name: (fn, args)}``, the cases converted as one
    program (:func:`convert_batch`); the failures are reported together, each named."""
    failures = []
    for name, r in convert_batch(cases, ops).items():
        try:
            assert_jax_matches(r["jax"], r["eager"], rtol, atol)
        except AssertionError as e:
            failures.append(f"{name}: {e}")
    assert not failures, "\n".join(failures)


@pytest.fixture
def check():
    """``check(fn, *tensors, ops=("aten.x.default", ...), rtol=1e-6, atol=1e-6)``."""
    return run_check


def check_rule(rule, op, *args, rtol=1e-6, atol=1e-6, **kwargs) -> None:
    """``rule`` (a rule function, imported: not through the registry, so no registry
    coverage is recorded) called on ``args``, their tensors as JAX arrays, under one
    ``jax.jit``, against eager ``op(*args, **kwargs)`` as :func:`run_check` compares.

    For the rules of ops the Core ATen decompositions replace before any conversion reaches
    them (``tests/registry_coverage.py``), which serve programs decomposed with another table."""
    import jax

    leaves, spec = tree_flatten(args)  # tensors in lists too (``stack``'s ``tensors``)
    tensors = [to_numpy(a) for a in leaves if isinstance(a, torch.Tensor)]

    def call(*arrays):
        it = iter(arrays)
        return rule(
            *tree_unflatten([next(it) if isinstance(a, torch.Tensor) else a for a in leaves], spec), **kwargs
        )

    ref = [t for t in tree_leaves(op(*args, **kwargs)) if isinstance(t, torch.Tensor)]
    assert_jax_matches([np.asarray(o) for o in tree_leaves(jax.jit(call)(*tensors))], ref, rtol, atol)
