"""The JAX sweep (``tests/sweeps/jax_sweep.py``) as tests: realistic JAX programs (Flax linen and
nnx models, an optax step, lax control flow, custom rules, linalg, pytrees) through
``to_torch`` (eager, autograd, ``torch.compile``, ``torch.export``), ``to_onnx``
(onnxruntime) and ``to_jax`` (jit, grad, vmap), with symbolic shapes where the program has
them, each compared with ``jax.jit``/``jax.grad`` of the source.

Run only with ``SWEEP=jax`` (or ``SWEEP=all``): about 6 CPU minutes. ``KNOWN`` lists the
paths that raise a typed error by design (docs/limitations.md).
"""

from __future__ import annotations

import os
import warnings

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("SWEEP") not in ("jax", "all"), reason="the JAX sweep runs with SWEEP=jax or SWEEP=all"
)

#: (program, path) -> the error class it raises and why
KNOWN = {
    ("decoder_train_step", "onnx"): (
        "OpConversionError",
        "scatter with a window on dynamic shapes (RoPE's slice gradient: indexed dim of slice size 4)",
    ),
    ("linalg_batched", "onnx"): ("DynamicShapeError", "LAPACK calls and scatter on dynamic shapes"),
    ("linalg", "tgrad"): ("NotImplementedError", "no derivative of QR's geqrf/householder_product"),
    ("linalg", "jgrad"): ("OpConversionError", "no derivative of QR's geqrf/householder_product"),
    ("lstm", "texport"): ("OpConversionError", "scan over a symbolic length slices at its loop counter"),
    ("scan_ema", "texport"): ("OpConversionError", "scan over a symbolic length slices at its loop counter"),
}


def _names():
    from tests.sweeps.jax_programs import PROGRAMS

    return sorted(PROGRAMS)


@pytest.mark.parametrize("name", _names() if os.environ.get("SWEEP") in ("jax", "all") else [])
def test_program_every_path(name):
    from tests.sweeps.jax_programs import PROGRAMS
    from tests.sweeps.jax_sweep import Run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = Run(name, PROGRAMS[name]()).run()
    unexpected = {}
    for path, trace in run.failures.items():
        known = KNOWN.get((name, path))
        if known is None or f"{known[0]}:" not in trace:
            unexpected[path] = trace.strip().splitlines()[-1]
    assert not unexpected, unexpected
