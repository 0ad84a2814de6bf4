"""``check_targets``: an ATen-rule test on both backends. The function is converted once
(``converter.from_torch``) and its ``to_jax`` and ``to_torch`` conversions are each compared
with eager torch: same shapes and dtypes, values within tolerance (exact for integers and
bools). The ATen ops under test must be in the exported graph."""

from __future__ import annotations

import numpy as np
import torch
from converter.frontends.torch import export
from torch.utils._pytree import tree_leaves

import converter
from tests.compare import assert_complex_close
from tests.frontends.torch.conftest import Fn, convert_batch, graph_ops, to_numpy


def _assert_matches(got, ref, rtol, atol, target):
    assert len(got) == len(ref), f"{target}: {len(got)} outputs, torch gives {len(ref)}"
    for i, (o, r) in enumerate(zip(got, ref, strict=True)):
        o, r = np.asarray(o), to_numpy(r)
        where = f"{target} output {i}"
        assert o.shape == r.shape, f"{where}: shape {o.shape}, torch {r.shape}"
        assert o.dtype == r.dtype, f"{where}: dtype {o.dtype}, torch {r.dtype}"
        if r.dtype.kind in "fcV":
            if r.dtype.kind == "c":
                assert_complex_close(o, r, rtol, atol, err_msg=where)
                continue
            np.testing.assert_allclose(
                o.astype(np.float64),
                r.astype(np.float64),
                rtol=rtol,
                atol=atol,
                equal_nan=True,
                err_msg=where,
            )
        else:
            np.testing.assert_array_equal(o, r, err_msg=where)


def check_targets(fn, *args, ops=(), rtol=1e-6, atol=1e-6) -> None:
    """Compare ``fn(*args)`` in eager torch with its ``to_jax`` and ``to_torch`` conversions.

    Raises:
        AssertionError: an op of ``ops`` is missing from the exported graph, or an output
            of either target differs from eager torch.
    """
    module = fn if isinstance(fn, torch.nn.Module) else Fn(fn)
    ep = export(module, args)
    present = graph_ops(ep)
    missing = [op for op in ([ops] if isinstance(ops, str) else ops) if op not in present]
    assert not missing, f"{missing} not in the exported graph: {sorted(present)}"
    m = converter.from_torch(ep)
    with torch.no_grad():
        ref = [t for t in tree_leaves(module(*[a.clone() for a in args])) if isinstance(t, torch.Tensor)]
        got_torch = [t for t in tree_leaves(m.to_torch()(*[a.clone() for a in args]))]
    got_jax = tree_leaves(m.to_jax()(*(to_numpy(a) for a in args)))
    _assert_matches(got_jax, ref, rtol, atol, "to_jax")
    _assert_matches([to_numpy(t) for t in got_torch], ref, rtol, atol, "to_torch")


def check_targets_batch(cases: dict, ops=(), rtol=1e-6, atol=1e-6) -> None:
    """:func:`check_targets` of each case ``{name: (fn, args)}``, the cases converted as one
    program (:func:`tests.frontends.torch.conftest.convert_batch`: one export, conversion and
    compilation per target); the failures are reported together, each named by its case.

    Raises:
        AssertionError: an op of ``ops`` is missing from the program's graph, or an output of
            a case on either target differs from eager torch.
    """
    failures = []
    for name, r in convert_batch(cases, ops, targets=("jax", "torch")).items():
        for target, got in (("to_jax", r["jax"]), ("to_torch", [to_numpy(t) for t in r["torch"]])):
            try:
                _assert_matches(got, r["eager"], rtol, atol, target)
            except AssertionError as e:
                failures.append(f"{name}: {e}")
    assert not failures, "\n".join(failures)
