"""Canonical dtype names and their spellings in StableHLO, NumPy and PyTorch.

The converter names dtypes by NumPy's names (``float32``, ``bfloat16`` via ml_dtypes, ``int64``,
``bool``, ``complex64``). StableHLO element types follow the spec's "Types" section
(``f32``, ``bf16``, ``i64``, ``ui8``, ``i1``, ``complex<f32>``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

# StableHLO element type spelling -> canonical name.
MLIR_TO_NAME: dict[str, str] = {
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "i1": "bool",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "ui8": "uint8",
    "ui16": "uint16",
    "ui32": "uint32",
    "ui64": "uint64",
    "complex<f32>": "complex64",
    "complex<f64>": "complex128",
    "f8E4M3FN": "float8_e4m3fn",
    "f8E5M2": "float8_e5m2",
    # narrow types ONNX uses (Cast, QuantizeLinear); NumPy spellings from ml_dtypes
    "f8E4M3FNUZ": "float8_e4m3fnuz",
    "f8E5M2FNUZ": "float8_e5m2fnuz",
    "f8E8M0FNU": "float8_e8m0fnu",
    "f4E2M1FN": "float4_e2m1fn",
    "f8E3M4": "float8_e3m4",
    "f8E4M3": "float8_e4m3",
    "f8E4M3B11FNUZ": "float8_e4m3b11fnuz",
    "f6E2M3FN": "float6_e2m3fn",
    "f6E3M2FN": "float6_e3m2fn",
    "i4": "int4",
    "ui4": "uint4",
    "i2": "int2",
    "ui2": "uint2",
}
NAME_TO_MLIR: dict[str, str] = {v: k for k, v in MLIR_TO_NAME.items()}

_EXTRA_NUMPY = {
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    **{
        n: np.dtype(getattr(ml_dtypes, n))
        for n in (
            "float8_e4m3fnuz",
            "float8_e5m2fnuz",
            "float8_e8m0fnu",
            "float4_e2m1fn",
            "float8_e3m4",
            "float8_e4m3",
            "float8_e4m3b11fnuz",
            "float6_e2m3fn",
            "float6_e3m2fn",
            "int4",
            "uint4",
            "int2",
            "uint2",
        )
    },
}


def to_numpy(name: str) -> np.dtype:
    """The NumPy dtype for a canonical name (``bfloat16`` comes from ml_dtypes).

    Raises:
        KeyError: an unknown name.
    """
    if name in _EXTRA_NUMPY:
        return _EXTRA_NUMPY[name]
    if name not in NAME_TO_MLIR:
        raise KeyError(f"unknown dtype {name!r}")
    return np.dtype(name)


def name_of(dtype) -> str:
    """The canonical name of a NumPy/JAX dtype, a torch dtype, or a canonical name."""
    if isinstance(dtype, str) and dtype in NAME_TO_MLIR:
        return dtype
    mod = type(dtype).__module__
    if mod.startswith("torch"):
        return str(dtype).removeprefix("torch.")
    return np.dtype(dtype).name


def from_mlir(element_type: str) -> str:
    """The canonical name of a StableHLO element type spelling (``f32`` → ``float32``).

    Raises:
        KeyError: an element type the converter does not model (e.g. ``!stablehlo.token``).
    """
    try:
        return MLIR_TO_NAME[element_type]
    except KeyError:
        raise KeyError(f"unsupported StableHLO element type {element_type!r}") from None


def torch_dtype(name: str):
    """The torch dtype for a canonical name (imports torch)."""
    import torch

    return getattr(torch, name)


def is_floating(name: str) -> bool:
    """True for the real floating-point dtypes."""
    return name.startswith(("float", "bfloat"))


def is_complex(name: str) -> bool:
    """True for complex64 and complex128."""
    return name.startswith("complex")


def is_integer(name: str) -> bool:
    """True for the signed and unsigned integer dtypes (not bool)."""
    return name.startswith(("int", "uint"))


def is_unsigned(name: str) -> bool:
    """True for uint8..uint64."""
    return name.startswith("uint")


def contiguous(value, *, copy: bool = False) -> np.ndarray:
    """``value`` as a C-contiguous NumPy array of the same dtype and shape: a 0-d array stays
    0-d (``np.ascontiguousarray`` alone makes it 1-d). With ``copy``, always a new buffer
    (``torch.from_numpy`` shares memory with the array it is given)."""
    arr = np.asarray(value)
    if copy:
        return np.array(arr, order="C", copy=True)
    return np.ascontiguousarray(arr).reshape(arr.shape)
