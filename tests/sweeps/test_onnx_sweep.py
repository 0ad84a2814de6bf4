"""The real-world ONNX sweep (``tests/sweeps/onnx_sweep.py``) as a test, run only when asked:
``SWEEP=onnx`` (or ``SWEEP=all``) ``pytest tests/sweeps/test_onnx_sweep.py -s`` exports every model
of the sweep with the torch exporters, converts each file and compares every path with
onnxruntime (6 CPU minutes with the exported files cached, more the first time;
``ONNX_SWEEP_MODELS=bert,conv`` narrows it). It fails on
any cell that is neither ``ok`` nor listed, with its reason, in ``EXPECTED``, and on a listed
cell that passes."""

from __future__ import annotations

import os
import sys

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("SWEEP", "") not in ("onnx", "all"), reason="the ONNX sweep runs with SWEEP=onnx"
)


def test_onnx_sweep() -> None:
    from tests.sweeps import onnx_sweep

    models = os.environ.get("ONNX_SWEEP_MODELS", "")
    results = onnx_sweep.sweep(
        models.split(",") if models else onnx_sweep.all_models(), list(onnx_sweep.VARIANTS), onnx_sweep.PATHS
    )
    print(onnx_sweep.table(results), file=sys.stderr)
    bad = onnx_sweep.unexpected(results)
    assert not bad, "\n".join(bad)
