"""ONNX's own node tests (``onnx.backend.test.loader.load_model_tests(kind="node")``) through
``from_onnx`` and each backend, at each case's rtol/atol.

Every failing case is listed with its reason in :mod:`onnx_node_xfails` (strict: a listed
case that passes fails the run, so the list stays exact). Pass rate::

    pytest tests/frontends/onnx/test_node_conformance.py -n 2 -q   # passed / xfailed counts

The default (CI) run checks ``to_jax`` on every fourth case and ``to_torch`` on every
twentieth, in name order (:data:`STEPS`, :func:`ci_slice`), each case converted once for both
backends. ``ONNX_CONFORMANCE_BACKENDS=jax,torch`` runs the listed backends on every case
(the full conformance run whose counts the README gives). A backend's own failures go in
``BACKEND_XFAILS``: one list whether it runs sliced or in full.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from onnx_node_cases import node_cases, run_case  # noqa: E402
from onnx_node_xfails import BACKEND_XFAILS, XFAILS  # noqa: E402

_CHOSEN = [b for b in os.environ.get("ONNX_CONFORMANCE_BACKENDS", "").split(",") if b]
#: Backend -> every how many cases (in name order) it runs on. Default: to_jax on every
#: fourth case, to_torch on every twentieth (every second and tenth took 234 s of one core,
#: too much of CI's 20 minutes); ``ONNX_CONFORMANCE_BACKENDS`` runs the listed
#: backends on every case.
STEPS = {b: 1 for b in _CHOSEN} or {"jax": 4, "torch": 20}


def ci_slice(names, step: int) -> set[str]:
    """Every ``step``-th of ``names`` in sorted order, starting with the first
    (deterministic for a given ONNX release)."""
    return set(sorted(names)[::step])


def _params():
    names = sorted(node_cases())
    chosen = {b: ci_slice(names, step) for b, step in STEPS.items()}
    for name in names:  # a case's backends in a row: it is converted once
        for backend in (b for b, cases in chosen.items() if name in cases):
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


def test_default_run_slices_are_exact() -> None:
    """Each backend runs on exactly its slice (every case when chosen), the same cases in
    every run."""
    params = list(_params())
    names = sorted(node_cases())
    for backend, step in STEPS.items():
        cases = {p.values[0] for p in params if p.values[1] == backend}
        assert cases == set(names[::step]) == ci_slice(reversed(names), step)
        assert len(cases) == -(-len(names) // step)
