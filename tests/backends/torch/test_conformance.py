"""Conformance of the torch backend against JAX: functions from ``jax.numpy``, ``jax.lax``,
``jax.nn``, ``jax.scipy.special`` and ``jnp.linalg`` across dtypes, each lowered with
``jax.jit``, read with ``converter.from_stablehlo``, converted with ``to_torch`` and compared
with JAX's own output (exactly for integers and bools, a dtype tolerance for floats).

The case table is :mod:`tests.backends.conformance_cases` (shared with the ONNX backend's
suite). Every known failure is listed in :data:`XFAIL` with its reason; nothing else is skipped.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import converter
from tests.backends.conformance_cases import CASES, Case, make_args, selected_params, tolerance

from .helpers import assert_close, numpy_of, torch_of

# --------------------------------------------------------------------------- expected failures

XFAIL: dict[str, str] = {}


def _params():
    out = []
    for c, dt, cid in selected_params():
        marks = [pytest.mark.xfail(reason=XFAIL[cid], strict=True)] if cid in XFAIL else []
        out.append(pytest.param(c, dt, id=cid, marks=marks))
    return out


def _check(c: Case, dtype) -> None:
    args = make_args(c, dtype)
    lowered = jax.jit(c.fn).lower(*args)
    want = [np.asarray(w) for w in jax.tree_util.tree_leaves(lowered.compile()(*args))]
    module = converter.from_stablehlo(lowered.as_text()).to_torch()  # the same lowering, once
    got = module(*[torch_of(a) for a in args])
    got = [numpy_of(t) for t in jax.tree_util.tree_leaves(got)]
    for g, w in zip(got, want, strict=True):
        rtol, atol = tolerance(c, w.dtype)
        assert_close([g], [w], rtol=rtol, atol=atol)


@pytest.mark.parametrize(("c", "dtype"), _params())
def test_conformance(c: Case, dtype) -> None:
    _check(c, dtype)


def test_suite_size() -> None:
    """The suite covers at least 300 distinct functions."""
    assert len({c.name.split("[")[0] for c in CASES}) >= 300
