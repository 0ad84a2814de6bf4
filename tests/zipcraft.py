"""A zip writer for crafting hostile archives byte by byte (the layouts ``zipfile`` will not
write): duplicate names, local headers that disagree with the central directory, members the
central directory does not list, bytes no member covers, declared sizes that lie."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field


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


@dataclass
class Raw:
    """One member written field by field. ``local``/``central`` override fields of its local
    header or central entry (``sig``, ``flags``, ``method``, ``crc``, ``csize``, ``usize``,
    ``nlen``, ``clen``, ``disk``, ``offset``); ``after`` follows the data (a data descriptor)."""

    name: bytes
    data: bytes = b"data"
    local: dict = field(default_factory=dict)
    central: dict = field(default_factory=dict)
    local_extra: bytes = b""
    central_extra: bytes = b""
    after: bytes = b""


def assemble(
    members: list[Raw],
    *,
    between: bytes = b"",
    cd_prefix: bytes = b"",
    cd_suffix: bytes = b"",
    end: dict | None = None,
    zip64: dict | None = None,
    locator: dict | None = None,
) -> bytes:
    """An archive of ``members``, then ``between``, the central directory (``cd_prefix`` and
    ``cd_suffix`` counted in it), the zip64 end record and locator when ``zip64`` or
    ``locator`` is given (their fields overridden by them: ``size``, ``disk``, ``n_disk``,
    ``n_total``, ``cd_size``, ``cd_offset``; ``sig``, ``disk``, ``offset``, ``disks``), and the end
    record (fields overridden by ``end``: ``disk``, ``cd_disk``, ``n_disk``, ``n_total``,
    ``cd_size``, ``cd_offset``, ``comment``)."""
    out = bytearray()
    central = bytearray(cd_prefix)
    for m in members:
        offset = len(out)
        crc = zlib.crc32(m.data)
        lf = {"sig": b"PK\x03\x04", "flags": 0x800, "method": 0, "crc": crc, "csize": len(m.data)}
        lf.update(usize=len(m.data), nlen=len(m.name))
        lf.update(m.local)
        out += struct.pack(
            "<4sHHHHHIIIHH",
            lf["sig"],
            20,
            lf["flags"],
            lf["method"],
            0,
            0x21,
            lf["crc"],
            lf["csize"],
            lf["usize"],
            lf["nlen"],
            len(m.local_extra),
        )
        out += m.name + m.local_extra + m.data + m.after
        cf = {"flags": 0x800, "method": 0, "crc": crc, "csize": len(m.data), "usize": len(m.data)}
        cf.update(nlen=len(m.name), clen=0, disk=0, offset=offset)
        cf.update(m.central)
        central += struct.pack(
            "<4sHHHHHHIIIHHHHHII",
            b"PK\x01\x02",
            20,
            20,
            cf["flags"],
            cf["method"],
            0,
            0x21,
            cf["crc"],
            cf["csize"],
            cf["usize"],
            cf["nlen"],
            len(m.central_extra),
            cf["clen"],
            cf["disk"],
            0,
            0,
            cf["offset"],
        )
        central += m.name + m.central_extra
    central += cd_suffix
    out += between
    cd_offset = len(out)
    out += central
    n = len(members)
    if zip64 is not None or locator is not None:
        z = {
            "size": 44,
            "disk": 0,
            "n_disk": n,
            "n_total": n,
            "cd_size": len(central),
            "cd_offset": cd_offset,
        }
        z.update(zip64 or {})
        loc = {"sig": b"PK\x06\x07", "disk": 0, "offset": len(out), "disks": 1, **(locator or {})}
        out += struct.pack(
            "<4sQHHIIQQQQ",
            b"PK\x06\x06",
            z["size"],
            45,
            45,
            z["disk"],
            0,
            z["n_disk"],
            z["n_total"],
            z["cd_size"],
            z["cd_offset"],
        )
        out += struct.pack("<4sIQI", loc["sig"], loc["disk"], loc["offset"], loc["disks"])
    e = {"disk": 0, "cd_disk": 0, "n_disk": n, "n_total": n, "cd_size": len(central), "cd_offset": cd_offset}
    e["comment"] = 0
    e.update(end or {})
    out += struct.pack(
        "<4sHHHHIIH",
        b"PK\x05\x06",
        e["disk"],
        e["cd_disk"],
        e["n_disk"],
        e["n_total"],
        e["cd_size"],
        e["cd_offset"],
        e["comment"],
    )
    return bytes(out)
