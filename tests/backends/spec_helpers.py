"""Run hand-written StableHLO text on one backend (the spec-example tests' shared helper)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import torch

import converter

BACKENDS = ["jax", "torch", "onnx"]


def run(text: str, backend: str, *args: np.ndarray) -> list[np.ndarray]:
    """``text`` read by ``from_stablehlo`` and run on ``backend`` (``"jax"``: ``to_jax``,
    ``"torch"``: ``to_torch``, ``"onnx"``: ``to_onnx`` in onnxruntime); outputs as NumPy."""
    m = converter.from_stablehlo(text)
    if backend == "jax":
        out = m.to_jax()(*args)
    elif backend == "torch":
        out = m.to_torch()(*[torch.from_numpy(a) for a in args])
    else:
        sess = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
        out = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), args, strict=True)})
    out = out if isinstance(out, (list, tuple)) else [out]
    return [np.asarray(o) for o in out]
