"""The Hugging Face architecture sweep (``tests/sweeps/hf_sweep.py``) as tests, run only with
``SWEEP=all`` (or ``SWEEP=mistral,bart``): each model through ``from_torch`` with a dynamic
batch and sequence length, then ``to_jax`` (and ``jax.grad`` on some), ``to_torch`` (and
``torch.export`` of it on some) and ``to_onnx`` in onnxruntime, at two sizes against eager
torch. About 4 CPU minutes for all 31 models; not in the default run.

``EXPECTED`` lists what does not convert with a dynamic sequence length, each with the
error it must raise (a typed error, never wrong numbers); the static conversion of those is
still compared.
"""

from __future__ import annotations

import os

import pytest

from tests.sweeps import hf_sweep

SWEEP = os.environ.get("SWEEP", "")
NAMES = [s.name for s in hf_sweep._specs()] if SWEEP else []
SELECTED = NAMES if SWEEP == "all" else [n for n in NAMES if n in SWEEP.split(",")]

# model -> the start of its export cell: out of reach of a dynamic sequence length
EXPECTED = {
    # MambaForCausalLM's slow path loops over the sequence in Python (no CUDA kernels on CPU):
    # torch.export specializes the length ("Constraints violated (seq)"); static shapes convert
    "mamba": "STATIC ONLY (ExportError",
}

pytestmark = pytest.mark.skipif(not SWEEP, reason="the HF sweep runs with SWEEP=all (or SWEEP=name,...)")


@pytest.mark.parametrize("name", SELECTED)
def test_hf_model(name: str) -> None:
    spec = next(s for s in hf_sweep._specs() if s.name == name)
    row = hf_sweep.run(spec)
    cells = {k: v for k, v in row.items() if not k.startswith("_")}
    print(name, cells)
    if name in EXPECTED:
        assert row["export"].startswith(EXPECTED[name]), row["export"]
    else:
        dynamic = row["export"].startswith("ok") and "static" not in row["export"]
        assert dynamic, row.get("_trace", row["export"])
    failed = {k: v for k, v in cells.items() if k != "export" and not v.startswith("ok")}
    assert not failed, "\n".join(row.get(f"_trace_{k}", v) for k, v in failed.items())
