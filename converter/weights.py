"""Parameter storage without extra copies: 64-byte aligned NumPy arrays (which JAX on CPU
takes without copying), a streaming safetensors writer and a memory-mapping reader.

The safetensors format (https://huggingface.co/docs/safetensors): 8 bytes little-endian
header length ``N``, ``N`` bytes of JSON header (``{name: {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__": {str: str}}``, padded with spaces), then the
tensors' bytes, contiguous, offsets relative to the end of the header. Files written here
pad the header so that the data starts at a multiple of :data:`ALIGN` bytes *of the file
that holds it* (a ``.shlo`` zip archive or a plain ``.safetensors`` file), and put the
tensors whose sizes are multiples of :data:`ALIGN` first: those are all aligned, so a
memory-mapped read gives arrays JAX uses in place.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import struct
import zipfile
from collections.abc import Mapping
from typing import IO, Any

import numpy as np

from . import dtypes
from .errors import ModuleFormatError

ALIGN = 64  # bytes; XLA's CPU client aliases host buffers aligned to this

#: canonical dtype name -> safetensors dtype code (the types safetensors names; others are
#: stored as raw bytes, see :func:`write_safetensors`)
SAFETENSORS_DTYPES: dict[str, str] = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint64": "U64",
    "uint32": "U32",
    "uint16": "U16",
    "uint8": "U8",
    "bool": "BOOL",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
}
_FROM_CODE = {code: name for name, code in SAFETENSORS_DTYPES.items()}


def aligned_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts at a multiple of :data:`ALIGN`
    bytes (``jax.device_put`` on CPU then shares it instead of copying)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def aligned_copy(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous, :data:`ALIGN`-aligned copy of ``arr``."""
    out = aligned_empty(arr.shape, arr.dtype)
    np.copyto(out, arr, casting="no")
    return out


def _raw_bytes(arr: np.ndarray) -> memoryview:
    """The bytes of a C-contiguous array, without copying (ml_dtypes types included)."""
    return memoryview(arr.reshape(-1).view(np.uint8))


def _entry(arr: np.ndarray) -> tuple[str, list[int], bool]:
    """``(safetensors dtype, shape, raw)``: dtypes safetensors does not name (complex,
    int4...) are stored as ``U8`` of shape ``shape + [itemsize]`` (``raw``)."""
    name = dtypes.name_of(arr.dtype)
    code = SAFETENSORS_DTYPES.get(name)
    if code is not None:
        return code, list(arr.shape), False
    return "U8", [*arr.shape, arr.dtype.itemsize], True


def write_safetensors(
    f: IO[bytes],
    params: Mapping[str, np.ndarray],
    *,
    metadata: Mapping[str, str] | None = None,
    offset: int = 0,
) -> int:
    """Write ``params`` to the binary file ``f`` in safetensors format, each array's bytes
    straight from its memory (no copy of the whole set). ``offset`` is where ``f``'s first
    byte sits in the file on disk, so that the data is :data:`ALIGN`-aligned there.

    The metadata records every parameter's canonical dtype (``"dtypes"``, JSON) so
    :func:`read_safetensors` restores those safetensors has no code for (stored as raw
    bytes). Returns the number of bytes written.
    """
    arrays = {name: dtypes.contiguous(v) for name, v in params.items()}
    order = sorted(arrays, key=lambda n: arrays[n].nbytes % ALIGN != 0)  # stable: aligned ones first
    header: dict[str, Any] = {}
    raw = []
    begin = 0
    for name in order:
        code, shape, is_raw = _entry(arrays[name])
        end = begin + arrays[name].nbytes
        header[name] = {"dtype": code, "shape": shape, "data_offsets": [begin, end]}
        if is_raw:
            raw.append(name)
        begin = end
    meta = {"dtypes": json.dumps({n: dtypes.name_of(a.dtype) for n, a in arrays.items()})}
    if raw:
        meta["raw"] = json.dumps(raw)
    meta.update(metadata or {})
    header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((-(offset + 8 + len(text))) % ALIGN)
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    for name in order:
        if arrays[name].nbytes:
            f.write(_raw_bytes(arrays[name]))
    return 8 + len(text) + begin


def save_safetensors(path: str | os.PathLike, params: Mapping[str, np.ndarray], **kwargs: Any) -> None:
    """:func:`write_safetensors` into a new file at ``path`` (not atomic by itself: write to
    a :func:`converter.fileio.atomic_path`)."""
    with open(path, "wb") as f:
        write_safetensors(f, params, **kwargs)


def read_safetensors(
    path: str | os.PathLike | IO[bytes], offset: int = 0, length: int | None = None
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Memory-map the safetensors data at ``offset`` (``length`` bytes, default to the end)
    of the file ``path``: ``(arrays by name, metadata)``. The arrays are read-only views of
    the mapping (pages are read on first touch and shared with the page cache; nothing is
    copied), with the dtypes the ``"dtypes"`` metadata records. ``path`` may be an open
    binary file (mapped through its descriptor).

    Raises:
        ModuleFormatError: the data is not safetensors (names the file).
    """
    if hasattr(path, "fileno"):  # an open file (the one a check read): map it, not its path
        size = os.fstat(path.fileno()).st_size
        mm = mmap.mmap(path.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        path = getattr(path, "name", "<file>")
    else:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    buf = np.frombuffer(mm, np.uint8) if size else np.zeros(0, np.uint8)
    end = size if length is None else offset + length
    return parse_safetensors(buf[offset:end], str(path))


def parse_safetensors(buf: np.ndarray, where: str = "safetensors data") -> tuple[dict, dict[str, str]]:
    """:func:`read_safetensors` of a ``uint8`` buffer in memory (views of it, no copies).

    Raises:
        ModuleFormatError: the data is not safetensors (names ``where``).
    """
    try:
        (n,) = struct.unpack("<Q", bytes(buf[:8]))
        if 8 + n > len(buf):
            raise ValueError("header past the end")
        header = json.loads(bytes(buf[8 : 8 + n]))
        meta = header.pop("__metadata__", None) or {}
        kinds = json.loads(meta.get("dtypes") or "{}")
        raw = set(json.loads(meta.get("raw") or "[]"))
        start = 8 + n
        out = {}
        for name, info in header.items():
            begin, stop = info["data_offsets"]
            stored = np.dtype(dtypes.to_numpy(_FROM_CODE[info["dtype"]]))
            shape = tuple(info["shape"])
            if not all(isinstance(d, int) and d >= 0 for d in shape) or not 0 <= begin <= stop:
                raise ValueError(f"tensor {name!r}: invalid shape {list(shape)} or offsets {[begin, stop]}")
            if start + stop > len(buf) or stop - begin != math.prod(shape) * stored.itemsize:
                raise ValueError(f"tensor {name!r}: data offsets {info['data_offsets']} do not fit")
            arr = buf[start + begin : start + stop].view(stored).reshape(shape)
            kind = kinds.get(name)
            if kind is not None and dtypes.to_numpy(kind) != stored:
                arr = arr.view(dtypes.to_numpy(kind))  # bfloat16 kept as U16 by older files
                if name in raw:
                    arr = arr.reshape(shape[:-1])
            out[name] = arr
    except (ValueError, KeyError, TypeError, struct.error, json.JSONDecodeError) as e:
        raise ModuleFormatError(f"{where}: corrupt safetensors data ({e})") from None
    return out, {k: v for k, v in meta.items() if k not in ("dtypes", "raw")}


def zip_member_offset(path: str | os.PathLike, zf: zipfile.ZipFile, name: str) -> tuple[int, int] | None:
    """``(offset, length)`` in the file ``path`` of the zip archive member ``name``'s bytes;
    None for a compressed member (which cannot be memory-mapped)."""
    info = zf.getinfo(name)
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    f = zf.fp
    f.seek(info.header_offset)
    local = f.read(30)
    if local[:4] != b"PK\x03\x04":
        raise ModuleFormatError(f"{path}: bad zip local header for {name}")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return info.header_offset + 30 + name_len + extra_len, info.file_size


def nbytes(params: Mapping[str, Any]) -> int:
    """The total size of ``params`` in bytes."""
    return sum(int(np.asarray(v).nbytes) for v in params.values())


def external_threshold(default: int) -> int:
    """The size in bytes from which artifacts keep their parameters outside the model file:
    ``$CONVERTER_EXTERNAL_THRESHOLD`` when set (tests lower it), else ``default``."""
    value = os.environ.get("CONVERTER_EXTERNAL_THRESHOLD")
    return int(value) if value else default


__all__ = [
    "ALIGN",
    "aligned_copy",
    "aligned_empty",
    "external_threshold",
    "nbytes",
    "parse_safetensors",
    "read_safetensors",
    "save_safetensors",
    "write_safetensors",
    "zip_member_offset",
]
