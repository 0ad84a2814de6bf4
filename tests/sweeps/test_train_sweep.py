"""The training sweep (``tests/sweeps/train_sweep.py``) as tests: converted models trained for a
few optimizer steps (optax or ``torch.optim``) next to the source framework doing the same
training, losses, parameters and buffers compared after every step (torch → JAX, torch →
torch, Flax → torch, ONNX → JAX; tied and frozen parameters, loss inside or outside the
model, gradient checkpointing, bfloat16, autocast, clipping, dropout keys, the training
mode, state_dict round trips, ``torch.compile`` of a training step).

Run only with ``SWEEP=train`` (or ``SWEEP=all``): about 100 CPU seconds. Every cell passes;
nothing is expected to raise.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("SWEEP") not in ("train", "all"),
    reason="the training sweep runs with SWEEP=train or SWEEP=all",
)


def _names() -> list[str]:
    from tests.sweeps.train_sweep import CELLS

    return list(CELLS)


@pytest.mark.parametrize("name", _names() if os.environ.get("SWEEP") in ("train", "all") else [])
def test_program_trains_as_source(name: str) -> None:
    from tests.sweeps.train_sweep import run

    row = run(name)
    failed = {k: v for k, v in row.items() if not k.startswith("_") and not v.startswith("ok")}
    assert not failed, "\n".join(row.get(f"_trace_{k}", v) for k, v in failed.items())
