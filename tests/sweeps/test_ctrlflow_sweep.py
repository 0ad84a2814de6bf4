"""The control-flow sweep (``tests/sweeps/ctrlflow_sweep.py``) as tests: loops, conditionals and
loop-carried state written in JAX (``lax.cond``/``switch``/``while_loop``/``fori_loop``/
``scan``/``map``/``associative_scan``), torch (``torch.export`` higher-order ops, buffers
updated in place across calls) and ONNX (hand-built ``Loop``/``If``/``Scan`` and what the
TorchScript and dynamo exporters write), each through every path and compared with its
source (``jax.jit``/``jax.grad``, eager torch, onnxruntime).

Run only with ``SWEEP=ctrlflow`` (or ``SWEEP=all``): about 2 CPU minutes. ``KNOWN`` lists the
paths that raise a typed error by design (docs/limitations.md).
"""

from __future__ import annotations

import os
import warnings

import pytest

_ON = os.environ.get("SWEEP") in ("ctrlflow", "all")
pytestmark = pytest.mark.skipif(
    not _ON, reason="the control-flow sweep runs with SWEEP=ctrlflow or SWEEP=all"
)

_EARLY_END = "the body computes the Loop's condition from data: the scan outputs' length depends on it"
#: (program, path) -> the error class it raises and why
KNOWN = {
    ("onnx:loop_dyn_cond_scan", "convert"): ("OpConversionError", _EARLY_END),
    ("onnx:loop_long_dyn_cond_scan", "convert"): ("OpConversionError", _EARLY_END),
    ("torch:while_counter", "jit"): (
        "SignatureMismatchError",
        "an int64 input under jax.jit with x64 off (the test run may turn x64 on): JAX narrows it "
        "before the function sees it",
    ),
}


def _names():
    from tests.sweeps.ctrlflow_sweep import all_programs

    return all_programs()


@pytest.mark.parametrize("name", _names() if _ON else [])
def test_program_every_path(name):
    from tests.sweeps.ctrlflow_sweep import run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, failures = run(name)
    unexpected = {}
    for path, trace in failures.items():
        known = KNOWN.get((name, path))
        if known is None or known[0] not in trace:
            unexpected[path] = trace.strip().splitlines()[-1]
    assert not unexpected, unexpected
    import jax

    for key in KNOWN:
        if key[0] == name and not (key == ("torch:while_counter", "jit") and jax.config.jax_enable_x64):
            assert key[1] in failures, f"{key} no longer raises: take it out of KNOWN"
