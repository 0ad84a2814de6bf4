"""ONNX's own node tests (``onnx.backend.test.loader.load_model_tests(kind="node")``) through
``from_onnx`` and each backend, at each case's rtol/atol.

Every failing case is listed with its reason in :mod:`onnx_node_xfails` (strict: a listed
case that passes fails the run, so the list stays exact). Pass rate::

    pytest tests/frontends/onnx/test_node_conformance.py -n 2 -q   # passed / xfailed counts

The default run checks ``to_jax`` on every case and ``to_torch`` on a CI-sized slice: every
:data:`SLICE_STEP`-th case in name order (:func:`ci_slice`), converted once for both
backends. ``ONNX_CONFORMANCE_BACKENDS=jax,torch`` runs the listed backends on every case
instead. A backend is one entry of ``BACKENDS`` (its own failures go in ``BACKEND_XFAILS``,
one list whether it runs sliced or in full).
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from onnx_node_cases import node_cases, run_case  # noqa: E402
from onnx_node_xfails import BACKEND_XFAILS, XFAILS  # noqa: E402

_CHOSEN = os.environ.get("ONNX_CONFORMANCE_BACKENDS", "")
#: Backends run on every case (``ONNX_CONFORMANCE_BACKENDS=jax,torch``; default: jax).
BACKENDS = [b for b in _CHOSEN.split(",") if b] or ["jax"]
#: Backends run on :func:`ci_slice` only, when ``ONNX_CONFORMANCE_BACKENDS`` is not set.
SLICED_BACKENDS = [] if _CHOSEN else ["torch"]
#: Every SLICE_STEP-th case (in name order) is in the CI slice: 189 of 1,884 cases; their
#: ``to_torch`` runs added 43 s to the default single-process run (557 s) on 2 shared cores.
SLICE_STEP = 10


def ci_slice(names) -> set[str]:
    """The cases the sliced backends run on: every :data:`SLICE_STEP`-th of ``names`` in
    sorted order, starting with the first (deterministic for a given ONNX release)."""
    return set(sorted(names)[::SLICE_STEP])


def _params():
    names = sorted(node_cases())
    sliced = ci_slice(names)
    for name in names:  # a case's backends in a row: it is converted once
        for backend in [*BACKENDS, *(b for b in SLICED_BACKENDS if name in sliced and b not in BACKENDS)]:
            reason = BACKEND_XFAILS.get(backend, {}).get(name, XFAILS.get(name))  # "" = passes there
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            yield pytest.param(name, backend, marks=marks, id=f"{backend}-{name}")


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("name", "backend"), list(_params()))
def test_node(name: str, backend: str) -> None:
    run_case(name, backend)


def test_xfail_list_names_real_cases() -> None:
    """Every xfail entry names an existing case (no stale entries)."""
    names = set(node_cases())
    stale = sorted(n for n in XFAILS if n not in names)
    assert not stale, stale


def test_default_run_slices_the_torch_backend() -> None:
    """Without ``ONNX_CONFORMANCE_BACKENDS``, ``to_torch`` runs on exactly the CI slice:
    every tenth case by name, the same cases in every run."""
    params = list(_params())
    torch_cases = {p.values[0] for p in params if p.values[1] == "torch"}
    if _CHOSEN:
        assert torch_cases in (set(), set(node_cases()))
        return
    names = sorted(node_cases())
    assert torch_cases == set(names[::SLICE_STEP]) == ci_slice(reversed(names))
    assert len(torch_cases) == -(-len(names) // SLICE_STEP)
    assert {p.values[0] for p in params if p.values[1] == "jax"} == set(names)
