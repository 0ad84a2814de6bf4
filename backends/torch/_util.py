"""Dtype plumbing shared by the torch rules.

Torch lacks arithmetic on ``uint16``/``uint32``/``uint64``, so those StableHLO types are
*emulated*: a ``ui16`` value is stored in an ``int32`` tensor and a ``ui32`` value in an
``int64`` tensor (both zero-extended, so they are exact and non-negative; results of wrapping
ops are masked back into range), and a ``ui64`` value is stored bit-for-bit in an ``int64``
tensor (two's-complement wrap makes add/sub/mul exact; compare, convert and shifts reinterpret
the bits). Element types torch declares but cannot compute with, or lacks, are *carried*
(:data:`ROUNDED`): ``int2``/``int4`` in ``int8`` and ``uint2``/``uint4`` in ``uint8``, wrapped
back into range (two's complement, modulo ``2**bits``) after every op that makes one; the
narrow floats (``float8_e3m4``, ``float8_e4m3``, ``float8_e4m3b11fnuz``, ``float6_e2m3fn``,
``float6_e3m2fn``, ``float4_e2m1fn``, and torch's ``float8_e4m3fn``, ``float8_e5m2``,
``float8_e4m3fnuz``, ``float8_e5m2fnuz``, on which torch's CPU kernels do no arithmetic) in
``float32``, rounded to the format (to nearest, ties to even, its own overflow, NaN and
signed-zero rules, as ml_dtypes and XLA convert) after every op that makes one: float32 holds
every such value and the exact result of ``+ - *`` on two of them, and rounds ``/``/``sqrt``
innocuously (24 >= 2 * 5 + 2 bits). Inputs and outputs of the types torch lacks
(:data:`CARRIED`) are their storage tensors; torch's float8 types are returned in their own
dtype. Every other dtype is stored as itself.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

from converter import dtypes
from converter.weights import ALIGN

#: sub-byte integers: storage dtype, bit width
NARROW_INTS: dict[str, tuple[torch.dtype, int]] = {
    "int2": (torch.int8, 2), "int4": (torch.int8, 4), "uint2": (torch.uint8, 2), "uint4": (torch.uint8, 4),
}  # fmt: skip
#: floats torch lacks (ml_dtypes names), carried in float32
_LACKED_FLOATS = (
    "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
)  # fmt: skip
#: float8 types torch has but cannot compute with on CPU: carried likewise, returned in their dtype
_TORCH_FLOAT8 = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
#: every narrow float carried in float32 and rounded per op
NARROW_FLOATS = (*_LACKED_FLOATS, *_TORCH_FLOAT8)
#: carried types whose inputs and outputs are their storage tensors (torch has no such dtype,
#: or none it can hold values of)
CARRIED = frozenset((*NARROW_INTS, *_LACKED_FLOATS))
#: types brought back into range after every op that makes one (:func:`wrap_carried`)
ROUNDED = frozenset((*NARROW_INTS, *NARROW_FLOATS))
STORAGE: dict[str, torch.dtype] = {
    "uint16": torch.int32, "uint32": torch.int64, "uint64": torch.int64,
    **{n: t for n, (t, _) in NARROW_INTS.items()}, **dict.fromkeys(NARROW_FLOATS, torch.float32),
}  # fmt: skip
#: float8 types torch has and passes through, copied from NumPy through their bytes
_TORCH_FLOAT8_BYTES = ("float8_e8m0fnu",)
WIDENED = {"uint16": 16, "uint32": 32}
BITS = {
    "bool": 1, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32,
    "int64": 64, "uint64": 64, "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64,
    "complex64": 64, "complex128": 128, "int2": 2, "int4": 4, "uint2": 2, "uint4": 4,
}  # fmt: skip
_SIGNED_OF_WIDTH = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}


def storage_dtype(name: str) -> torch.dtype:
    """The torch dtype that holds values of canonical dtype ``name`` (see module doc)."""
    if name in STORAGE:
        return STORAGE[name]
    return dtypes.torch_dtype(name)


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


def wrap_carried(x: torch.Tensor, name: str) -> torch.Tensor:
    """A carried value (:data:`CARRIED`) brought back into its type: a sub-byte integer wrapped
    modulo ``2**bits`` (sign-extended for ``int2``/``int4``), a narrow float rounded to its
    format (:func:`round_to_format`); widened unsigned types as :func:`wrap_unsigned`."""
    if name in NARROW_INTS:
        storage, bits = NARROW_INTS[name]
        mask = (1 << bits) - 1
        if name.startswith("uint"):
            return (x & mask).to(storage)
        half = 1 << (bits - 1)
        return (((x + half) & mask) - half).to(storage)
    if name in NARROW_FLOATS:
        return round_to_format(x, name)
    return wrap_unsigned(x, name)


def _format_table(name: str) -> dict:
    """The rounding table of narrow float ``name`` from ml_dtypes: its non-negative finite
    values, the midpoints between them, which midpoints round up (the upper neighbour's
    code is even), and what overflow, infinity and NaN become."""
    ml = dtypes.to_numpy(name)
    bits = ml_dtypes.finfo(ml).bits
    codes = np.arange(1 << bits, dtype=np.uint8)
    values = codes.view(ml).astype(np.float64)
    keep = np.isfinite(values) & ~np.signbit(values)
    pos, pcodes = values[keep], codes[keep]
    order = np.argsort(pos, kind="stable")
    pos, pcodes = pos[order], pcodes[order]
    uniq = np.concatenate([[True], pos[1:] != pos[:-1]])
    pos, pcodes = pos[uniq], pcodes[uniq]
    mids = (pos[:-1] + pos[1:]) / 2
    top = pos[-1] + (pos[-1] - pos[-2]) / 2
    over = float(np.array(2 * top, np.float64).astype(ml).astype(np.float64))
    return {
        "pos": pos,
        "mids": np.concatenate([mids, [top]]),
        "tie_up": np.concatenate([(pcodes[1:] & 1) == 0, [False]]),
        "top_tie_over": bool(np.array(top, np.float64).astype(ml).astype(np.float64) != pos[-1]),
        "over": over,
        "inf": float(np.array(np.inf, np.float64).astype(ml).astype(np.float64)),
        "nan": float(np.array(np.nan, np.float64).astype(ml).astype(np.float64)),
        "neg_zero": bool(np.signbit(np.array(-0.0, np.float64).astype(ml).astype(np.float64))),
    }


_TABLES: dict[str, dict] = {}


def round_to_format(x: torch.Tensor, name: str) -> torch.Tensor:
    """``x`` (a float tensor) rounded to narrow float format ``name`` (one of
    :data:`NARROW_FLOATS`) as float32: round to nearest, ties to the even code; beyond the
    largest value (and at the midpoint past it when that rounds up) the format's overflow
    value (inf, NaN, or saturation, as ml_dtypes converts); NaN and inf mapped likewise; the
    sign kept, zero's too where the format has -0."""
    table = _TABLES.get(name)
    if table is None:
        table = _TABLES.setdefault(name, _format_table(name))
    # tensors made per call (the recorder records them as constants; a cached tensor could
    # belong to another trace's fake mode)
    pos = torch.from_numpy(table["pos"].copy()).to(x.device)
    mids = torch.from_numpy(table["mids"].copy()).to(x.device)
    tie_up = torch.from_numpy(table["tie_up"].copy()).to(x.device)
    a = x.to(torch.float64).abs()
    # flat indices: a 0-d index tensor would read as a data-dependent Python int when traced
    idx = torch.bucketize(a, mids).clamp(max=pos.numel() - 1).reshape(-1)
    up = (a.reshape(-1) == mids[idx]) & tie_up[idx]
    r = pos[torch.where(up, (idx + 1).clamp(max=pos.numel() - 1), idx)].reshape(a.shape)
    top = float(table["mids"][-1])
    over = (a > top) | ((a == top) & table["top_tie_over"])
    r = torch.where(over, torch.full_like(r, table["over"]), r)
    r = torch.where(torch.isinf(a), torch.full_like(r, table["inf"]), r)
    r = torch.copysign(r, x.to(torch.float64))
    if not table["neg_zero"]:
        r = torch.where(r == 0, torch.zeros_like(r), r)
    r = torch.where(torch.isnan(a), torch.full_like(r, table["nan"]), r)
    return r.to(torch.float32)


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
    if name in NARROW_FLOATS:
        return torch.from_numpy(arr.astype(np.float32))
    if name in _TORCH_FLOAT8_BYTES:
        return torch.from_numpy(arr.view(np.uint8).copy()).view(dtypes.torch_dtype(name))
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
    if dtypes.is_integer(name):
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
