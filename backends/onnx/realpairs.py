"""Complex values at an ONNX model's boundary, carried as real pairs.

:func:`converter.backends.onnx.to_onnx` gives a complex input, output or initializer of shape ``S``
as a float tensor of shape ``S + [2]`` (complex64 → float32, complex128 → float64; real part
then imaginary part on the last axis, ``torch.view_as_real``'s layout) and names them in the
model's ``metadata_props`` entry :data:`COMPLEX_AS_REAL_KEY` (JSON ``{"inputs": [...],
"outputs": [...], "initializers": [...]}``). These helpers apply the convention to the
values given to and read from onnxruntime.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

COMPLEX_AS_REAL_KEY = "converter.complex_as_real"


def to_pairs(value: Any) -> Any:
    """A complex NumPy array (or scalar) as its real-pair array (shape ``S`` → ``S + [2]``,
    float32 for complex64, float64 for complex128); any other value unchanged."""
    if not isinstance(value, (np.ndarray, np.generic, complex)) or not np.iscomplexobj(value):
        return value  # also onnxruntime OrtValues, which are fed as they are
    value = np.asarray(value)
    return np.stack([value.real, value.imag], axis=-1)


def from_pairs(value: np.ndarray) -> np.ndarray:
    """The complex array a real-pair array ``S + [2]`` carries (float32 → complex64,
    float64 → complex128).

    Raises:
        ValueError: ``value`` is not a float32/float64 array with a last axis of size 2.
    """
    value = np.asarray(value)
    if value.dtype not in (np.float32, np.float64) or value.ndim == 0 or value.shape[-1] != 2:
        raise ValueError(f"not a real-pair array: {value.dtype} {value.shape}")
    out = np.empty(value.shape[:-1], np.complex64 if value.dtype == np.float32 else np.complex128)
    out.real, out.imag = value[..., 0], value[..., 1]
    return out


def complex_as_real(metadata: Mapping[str, str]) -> dict[str, list[str]]:
    """The names recorded under :data:`COMPLEX_AS_REAL_KEY` in a model's metadata
    (``{p.key: p.value for p in model.metadata_props}``, or onnxruntime's
    ``session.get_modelmeta().custom_metadata_map``); empty kinds when absent."""
    found = json.loads(metadata.get(COMPLEX_AS_REAL_KEY, "{}"))
    return {k: list(found.get(k, [])) for k in ("inputs", "outputs", "initializers")}


def session_feeds(session, values: Sequence[Any]) -> dict[str, Any]:
    """onnxruntime feeds for ``session``'s inputs in order: complex arrays as real pairs."""
    names = [i.name for i in session.get_inputs()]
    return dict(zip(names, (to_pairs(v) for v in values), strict=True))


def session_outputs(session, values: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``session``'s outputs (in order) with those its model carries as real pairs made
    complex again."""
    paired = set(complex_as_real(session.get_modelmeta().custom_metadata_map)["outputs"])
    names = [o.name for o in session.get_outputs()]
    return [from_pairs(v) if n in paired else v for n, v in zip(names, values, strict=True)]
