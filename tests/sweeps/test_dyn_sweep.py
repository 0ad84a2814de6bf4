"""The symbolic-size sweep (``tests/sweeps/dyn_sweep.py``) as tests, run only with ``SWEEP=dyn``
(or ``SWEEP=all``, or ``SWEEP=mlp,gpt2``): the bundled torch examples and a few Hugging Face
models with dynamic dimensions through ``torch.export`` of ``to_torch()``, ``to_onnx`` in
onnxruntime and the ``convert`` CLI's dynamic factory form, each at two sizes against eager
torch. Not in the default run (about 6 CPU minutes).
"""

from __future__ import annotations

import os

import pytest

SWEEP = os.environ.get("SWEEP", "")
pytestmark = pytest.mark.skipif(not SWEEP, reason="the symbolic-size sweep runs with SWEEP=dyn")

if SWEEP:
    from tests.sweeps import dyn_sweep

    NAMES = [s.name for s in dyn_sweep.specs()]
    SELECTED = NAMES if SWEEP in ("dyn", "all") else [n for n in NAMES if n in SWEEP.split(",")]
else:
    SELECTED = []


@pytest.mark.parametrize("name", SELECTED)
def test_dynamic_program(name: str) -> None:
    spec = next(s for s in dyn_sweep.specs() if s.name == name)
    row = dyn_sweep.run(spec)
    cells = {k: v for k, v in row.items() if not k.startswith("_")}
    print(name, cells)
    failed = {
        k: v
        for k, v in cells.items()
        if not v.startswith("ok") and not v.startswith(dyn_sweep.EXPECTED.get((name, k), "\0"))
    }
    assert not failed, "\n".join(row.get(f"_trace_{k}", v) for k, v in failed.items())
