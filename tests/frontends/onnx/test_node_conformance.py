"""ONNX's own node tests (``onnx.backend.test.loader.load_model_tests(kind="node")``) through
``from_onnx`` and each backend, at each case's rtol/atol.

Every failing case is listed with its reason in :mod:`onnx_node_xfails` (strict: a listed
case that passes fails the run, so the list stays exact). Pass rate::

    pytest tests/frontends/onnx/test_node_conformance.py -n 2 -q   # passed / xfailed counts

A backend is one entry of ``BACKENDS`` (its own failures go in ``BACKEND_XFAILS``).
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from onnx_node_cases import node_cases, run_case  # noqa: E402
from onnx_node_xfails import BACKEND_XFAILS, XFAILS  # noqa: E402

# to_torch joins with ONNX_CONFORMANCE_BACKENDS=jax,torch (its own failures: BACKEND_XFAILS["torch"]).
BACKENDS = os.environ.get("ONNX_CONFORMANCE_BACKENDS", "jax").split(",")


def _params():
    for name in sorted(node_cases()):  # a case's backends in a row: it is converted once
        for backend in BACKENDS:
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
