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


def deflated(data: bytes) -> tuple[bytes, int, int]:
    """``(raw deflate stream, crc32, size)`` of ``data``."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    return comp.compress(data) + comp.flush(), zlib.crc32(data), len(data)


def deflated_zeros(mib: int) -> bytes:
    """A raw deflate stream of ``mib`` MiB of zero bytes (about 1 KiB per MiB), made from one
    compressed MiB repeated (each ends with a full flush, so the copies stand alone); its
    CRC is not computed (the archives holding it are refused before anything is read)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = comp.compress(bytes(1 << 20)) + comp.flush(zlib.Z_FULL_FLUSH)
    return block * mib + comp.flush()


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
