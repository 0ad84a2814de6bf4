"""Dtype plumbing shared by the torch rules.

Torch lacks arithmetic on ``uint16``/``uint32``/``uint64``, so those StableHLO types are
*emulated*: a ``ui16`` value is stored in an ``int32`` tensor and a ``ui32`` value in an
``int64`` tensor (both zero-extended, so they are exact and non-negative; results of wrapping
ops are masked back into range), and a ``ui64`` value is stored bit-for-bit in an ``int64``
tensor (two's-complement wrap makes add/sub/mul exact; compare, convert and shifts reinterpret
the bits). Every other dtype is stored as itself.
"""

from __future__ import annotations

import numpy as np
import torch

from converter import dtypes
from converter.weights import ALIGN

STORAGE: dict[str, torch.dtype] = {"uint16": torch.int32, "uint32": torch.int64, "uint64": torch.int64}
WIDENED = {"uint16": 16, "uint32": 32}
BITS = {
    "bool": 1, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32,
    "int64": 64, "uint64": 64, "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64,
    "complex64": 64, "complex128": 128,
}  # fmt: skip
_SIGNED_OF_WIDTH = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}


def storage_dtype(name: str) -> torch.dtype:
    """The torch dtype that holds values of canonical dtype ``name`` (see module doc)."""
    if name in STORAGE:
        return STORAGE[name]
    return dtypes.torch_dtype(name)


def is_int(name: str) -> bool:
    """True for signed and unsigned integers (not bool)."""
    return name.startswith(("int", "uint"))


def is_unsigned(name: str) -> bool:
    """True for uint8..uint64."""
    return name.startswith("uint")


def is_float(name: str) -> bool:
    """True for real floating-point dtypes."""
    return dtypes.is_floating(name)


def wrap_unsigned(x: torch.Tensor, name: str) -> torch.Tensor:
    """Bring a widened ``uint16``/``uint32`` value back into range (modular wrap)."""
    if name in WIDENED:
        return x & ((1 << WIDENED[name]) - 1)
    return x


def to_bits(x: torch.Tensor, name: str) -> torch.Tensor:
    """The raw bits of ``x`` (canonical dtype ``name``) in a same-width torch dtype."""
    if name in WIDENED:
        return x.to(_SIGNED_OF_WIDTH[WIDENED[name]])
    return x


def from_bits(x: torch.Tensor, name: str) -> torch.Tensor:
    """Inverse of :func:`to_bits`: same-width raw bits to the storage of ``name``."""
    if name in WIDENED:
        return wrap_unsigned(x.to(STORAGE[name]), name)
    return x


def unsigned_wide(x: torch.Tensor, name: str) -> torch.Tensor:
    """Integers of dtype ``name`` reinterpreted as unsigned, in int64 (exact for < 64 bits;
    64-bit values keep their bit pattern)."""
    bits = BITS[name]
    if bits >= 64:
        return x.to(torch.int64)
    if is_unsigned(name):
        return x.to(torch.int64)
    return x.to(torch.int64) & ((1 << bits) - 1)


def numpy_to_torch(arr: np.ndarray, name: str) -> torch.Tensor:
    """A torch tensor in the storage dtype of ``name`` holding NumPy ``arr`` (same shape,
    0-d included: :func:`converter.dtypes.contiguous`), never sharing its memory."""
    arr = dtypes.contiguous(arr)
    if name == "bfloat16":
        return torch.from_numpy(arr.view(np.uint16).copy()).view(torch.bfloat16)
    if name == "uint64":
        return torch.from_numpy(arr.view(np.int64).copy())
    if name in STORAGE:
        return torch.from_numpy(arr.astype(np.int64)).to(STORAGE[name])
    return torch.from_numpy(arr.copy())


def weight_to_torch(arr: np.ndarray, name: str) -> torch.Tensor:
    """:func:`numpy_to_torch` of a weight, then :func:`aligned`, in one copy where it can: an
    array of a dtype torch holds as it is is copied into memory torch allocates (aligned),
    not copied by NumPy and then again by :func:`aligned` (two copies of every
    weight were a third of converting GPT-2 small). ``torch.tensor`` copies a read-only array
    too, without ``torch.from_numpy``'s warning. Not for use while tracing."""
    arr = dtypes.contiguous(arr)
    if name in STORAGE or name in ("bfloat16", "uint64") or arr.dtype not in _PLAIN:
        return aligned(numpy_to_torch(arr, name))
    return aligned(torch.tensor(arr))


_PLAIN = {np.dtype(n) for n in BITS if n not in STORAGE and n not in ("bfloat16", "uint64")}


def aligned(value: torch.Tensor) -> torch.Tensor:
    """``value``, or a copy in memory torch allocated when ``value``'s data is not
    :data:`converter.weights.ALIGN`-aligned (64 bytes, as torch's CPU allocator gives; a
    tensor on a NumPy array's memory may be 16): inductor assumes parameters and constants
    aligned and copies a misaligned one on every call of a ``torch.compile``d module."""
    if value.device.type != "cpu" or not value.numel() or value.data_ptr() % ALIGN == 0:
        return value
    return value.clone()


def scalar_of(value, name: str):
    """A Python scalar for a splat constant element of dtype ``name``."""
    if name == "uint64":
        return int(np.array(value, dtype=np.uint64).view(np.int64))
    if name == "bool":
        return bool(value)
    if is_int(name):
        return int(value)
    if dtypes.is_complex(name):
        return complex(value)
    return float(value)


def result_name(op, i: int = 0) -> str:
    """Canonical dtype name of result ``i`` of ``op``."""
    return op.result_types[i].dtype


def operand_name(op, i: int = 0) -> str:
    """Canonical dtype name of operand ``i`` of ``op``."""
    return op.operand_type(i).dtype
