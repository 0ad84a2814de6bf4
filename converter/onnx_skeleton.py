"""A weightless stand-in of an ONNX model for ``onnx.checker`` and shape inference.

Both serialize the whole ``ModelProto`` they are given (a 232 MB AlexNet: 1.5 s of checking);
large floating initializers never decide a shape, so they are given as typed graph inputs
instead. Used by ``from_onnx`` before it converts and by ``to_onnx(check=True)`` in memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

#: Floating initializers larger than this (bytes) go to the checker and shape inference as
#: typed graph inputs.
SKELETON_BYTES = 1 << 16
_FLOATING = frozenset(
    {
        onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
        onnx.TensorProto.BFLOAT16, onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128,
    }
)  # fmt: skip


def in_memory_bytes(t: onnx.TensorProto) -> int:
    """The bytes its dims give a floating initializer held in the proto (0 for other types
    and external data): from the dims, since reading ``raw_data`` copies it."""
    if t.data_location == onnx.TensorProto.EXTERNAL or t.data_type not in _FLOATING:
        return 0
    return int(np.prod(t.dims, dtype=np.int64)) * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize


def skeleton(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each floating initializer above :data:`SKELETON_BYTES` replaced by a
    graph input of its type and shape (``model`` itself when there is none): the checker and
    shape inference then see the same graph without serializing the weights (on a 232 MB
    AlexNet they took 1.5 s of 1.7 s). Whether those initializers' data fit their dims is
    left to the caller (``from_onnx`` checks it when it reads them)."""
    graph = model.graph
    big = [t for t in graph.initializer if in_memory_bytes(t) > SKELETON_BYTES]
    if not big:
        return model
    out = onnx.ModelProto()
    for field, value in model.ListFields():
        if field.name != "graph":
            _copy_field(out, field, value)
    for field, value in graph.ListFields():
        if field.name != "initializer":
            _copy_field(out.graph, field, value)
    names = {t.name for t in big}
    out.graph.initializer.extend(t for t in graph.initializer if t.name not in names)
    inputs = {v.name for v in graph.input}
    out.graph.input.extend(
        onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
        for t in big
        if t.name not in inputs
    )
    return out


def _copy_field(target: Any, field: Any, value: Any) -> None:
    if hasattr(value, "extend"):  # a repeated field
        getattr(target, field.name).extend(value)
    elif hasattr(value, "CopyFrom"):  # a message
        getattr(target, field.name).CopyFrom(value)
    else:
        setattr(target, field.name, value)


__all__ = ["SKELETON_BYTES", "in_memory_bytes", "skeleton"]
