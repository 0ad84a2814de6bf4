"""The low-precision and quantization sweep (``tests/sweeps/quant_sweep.py``) as a test, run only
when asked: ``SWEEP=quant`` (or ``SWEEP=all``) ``pytest tests/sweeps/test_quant_sweep.py -s``.
onnxruntime's quantization tools (``quantize_dynamic``, ``quantize_static`` in QDQ and
QOperator formats), float16 conversion and transformer optimizer on the ONNX sweep's BERT,
GPT-2 and convnet exports; torch bfloat16/float16/float8/int8 programs; JAX bfloat16 and
int8 programs; every path against its source framework (``QUANT_SWEEP_ROWS=onnx:bert,jax:``
narrows it). Fails on any cell that is neither ``ok`` nor listed, with its reason, in
``EXPECTED``, and on a listed cell that passes."""

from __future__ import annotations

import os
import sys

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("SWEEP", "") not in ("quant", "all"), reason="the quantization sweep runs with SWEEP=quant"
)


def test_quant_sweep() -> None:
    from tests.sweeps import quant_sweep

    results = quant_sweep.sweep(quant_sweep.select(os.environ.get("QUANT_SWEEP_ROWS", "")), out=sys.stderr)
    print(quant_sweep.table(results), file=sys.stderr)
    bad = quant_sweep.unexpected(results)
    assert not bad, "\n".join(bad)
