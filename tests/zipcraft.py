"""A zip writer for crafting hostile archives byte by byte (the layouts ``zipfile`` will not
write): duplicate names, local headers that disagree with the central directory, members the
central directory does not list, bytes no member covers, declared sizes that lie."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass


@dataclass
class Member:
    """One member. ``data`` is what the local header is followed by (already compressed when
    ``method`` is 8); ``crc``/``size`` default to those of ``data`` (stored) and may lie.
    ``local_name`` differs from ``name`` to make the headers disagree; ``listed=False``
    leaves it out of the central directory; ``gap`` bytes follow its data."""

    name: str
    data: bytes
    method: int = 0
    crc: int | None = None
    size: int | None = None
    local_name: str | None = None
    local_size: int | None = None
    listed: bool = True
    gap: bytes = b""


def deflated(data_or_zeros: bytes | int) -> tuple[bytes, int, int]:
    """``(raw deflate stream, crc32, size)`` of ``data``, or of that many zero bytes (made in
    1 MiB steps, never held whole)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    if isinstance(data_or_zeros, bytes):
        return comp.compress(data_or_zeros) + comp.flush(), zlib.crc32(data_or_zeros), len(data_or_zeros)
    chunk = bytes(1 << 20)
    out, crc, left = [], 0, data_or_zeros
    while left:
        piece = chunk[: min(left, len(chunk))]
        out.append(comp.compress(piece))
        crc = zlib.crc32(piece, crc)
        left -= len(piece)
    out.append(comp.flush())
    return b"".join(out), crc, data_or_zeros


def build(
    members: list[Member], *, prefix: bytes = b"", trailer: bytes = b"", extra_central: int = 0
) -> bytes:
    """The archive: ``prefix``, each member's local header and data, the central directory
    (``extra_central``: that many more entries pointing at the first member), the end record,
    ``trailer``."""
    out = bytearray(prefix)
    central = bytearray()
    count = 0
    first_offset = None
    for m in members:
        offset = len(out)
        first_offset = offset if first_offset is None else first_offset
        crc = zlib.crc32(m.data) if m.crc is None else m.crc
        size = len(m.data) if m.size is None else m.size
        lname = (m.local_name or m.name).encode()
        lsize = size if m.local_size is None else m.local_size
        out += struct.pack(
            "<4sHHHHHIIIHH",
            b"PK\x03\x04",
            20,
            0x800,
            m.method,
            0,
            0x21,
            crc,
            len(m.data),
            lsize,
            len(lname),
            0,
        )
        out += lname + m.data + m.gap
        if m.listed:
            central += _central(m.name.encode(), m.method, crc, len(m.data), size, offset)
            count += 1
    first = members[0]
    for _ in range(extra_central):
        central += _central(
            (first.name + "x").encode(),
            first.method,
            zlib.crc32(first.data),
            len(first.data),
            len(first.data),
            0,
        )
        count += 1
    cd_offset = len(out)
    out += central
    out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, len(central), cd_offset, 0)
    return bytes(out + trailer)


def _central(name: bytes, method: int, crc: int, csize: int, size: int, offset: int) -> bytes:
    return (
        struct.pack(
            "<4sHHHHHHIIIHHHHHII",
            b"PK\x01\x02",
            20,
            20,
            0x800,
            method,
            0,
            0x21,
            crc,
            csize,
            size,
            len(name),
            0,
            0,
            0,
            0,
            0o644 << 16,
            offset,
        )
        + name
    )
