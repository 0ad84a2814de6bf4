"""The one zip reader of the converter: every zip archive it opens (``.pt2``, ``.shlo``, the
``.pt`` archives inside a ``.pt2``, ``--inputs`` ``.npz``) goes through :func:`open_checked`.

Zip readers disagree on malformed archives: Python's :mod:`zipfile` keeps the *last* of two
central-directory entries with one name, torch's reader (miniz) the *first*; a reader walking
local headers sees members the central directory does not list. A check made with one reader
then proves nothing about what another reads. :func:`check_layout` therefore accepts only
archives that every reader reads the same way (APPNOTE.TXT, the PKWARE zip specification):

* one end-of-central-directory record, the last 22 bytes of the file (no comment, nothing
  after it), with its zip64 record and locator right before it when present, one disk;
* a central directory that starts where the last member ends and holds exactly the entries
  the end record counts, with no two entries of one name;
* members that tile the file from byte 0: each local header exactly where the previous
  member (its header, data and data descriptor) ends, no bytes before, between or after
  them that no entry covers, no overlap;
* each local header agreeing with its central entry: name (bytes), flags, compression
  method (stored or deflated), CRC-32 and sizes (in the header, its zip64 field, or the
  data descriptor that follows the data); no encryption;
* Python's :mod:`zipfile` reading the same entries (names, offsets, sizes).

:func:`open_checked` then gives a :class:`zipfile.ZipFile` over the *same open file* that was
checked, so a caller can hand that file object (not the path, which could be replaced
meanwhile) to the framework that loads it. :func:`read_member` reads a member with a bound
on what decompression may produce (:func:`converter.fileio.inflate_budget`).
"""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from dataclasses import dataclass
from typing import IO

from .errors import ParseError, UntrustedInputError
from .fileio import check_inflate

_LOCAL = b"PK\x03\x04"
_CENTRAL = b"PK\x01\x02"
_END = b"PK\x05\x06"
_END64 = b"PK\x06\x06"
_LOCATOR64 = b"PK\x06\x07"
_DESCRIPTOR = b"PK\x07\x08"
_MAX32 = 0xFFFFFFFF
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


@dataclass(frozen=True)
class Entry:
    """One member as the central directory describes it."""

    name: str
    raw_name: bytes
    flags: int
    method: int
    crc: int
    compress_size: int
    file_size: int
    offset: int


def _zip64_fields(extra: bytes, wanted: list[str], where: str) -> dict[str, int]:
    """The values of the zip64 extra field (id 1) for the fields marked ``0xFFFFFFFF``."""
    pos = 0
    while pos + 4 <= len(extra):
        kind, size = struct.unpack_from("<HH", extra, pos)
        if kind == 1:
            body = extra[pos + 4 : pos + 4 + size]
            if len(body) < 8 * len(wanted):
                break
            return {k: struct.unpack_from("<Q", body, 8 * i)[0] for i, k in enumerate(wanted)}
        pos += 4 + size
    if wanted:
        raise _bad(where, "a zip64 size or offset without its zip64 extra field")
    return {}


def _has_zip64(extra: bytes) -> bool:
    """Whether an extra field holds a zip64 field (then a data descriptor has 8-byte sizes)."""
    pos = 0
    while pos + 4 <= len(extra):
        kind, size = struct.unpack_from("<HH", extra, pos)
        if kind == 1:
            return True
        pos += 4 + size
    return False


def _bad(where: str, why: str) -> UntrustedInputError:
    """A layout readers may read differently: crafted to show a check other bytes than the
    loader reads, so refused as untrusted (no option loads it)."""
    return UntrustedInputError(f"{where}: refused zip archive layout: {why}")


def check_layout(f: IO[bytes], where: str) -> list[Entry]:
    """Check the zip archive in the binary file ``f`` (see the module docstring) and return
    its members in file order. ``where`` names the file in errors.

    Raises:
        ParseError: not a zip archive.
        UntrustedInputError: a layout readers may read differently (names the file and what
            is wrong).
    """
    f.seek(0, os.SEEK_END)
    size = f.tell()

    def read(offset: int, n: int) -> bytes:
        f.seek(offset)
        data = f.read(n)
        if len(data) != n:
            raise _bad(where, f"{n} bytes at offset {offset} run past the end of the file")
        return data

    if size < 22:
        raise ParseError(f"{where}: not a zip file ({size} bytes)")
    end = read(size - 22, 22)
    if end[:4] != _END:
        tail = read(max(0, size - (1 << 16) - 22), min(size, (1 << 16) + 22))
        if _END in tail:  # zipfile would find it and ignore what follows
            raise _bad(where, "an archive comment or data after the end record")
        raise ParseError(f"{where}: not a zip file")
    disk, cd_disk, n_disk, n_total, cd_size, cd_offset, comment = struct.unpack("<HHHHIIH", end[4:])
    if comment or disk or cd_disk or n_disk != n_total:
        raise _bad(where, "a multi-disk archive or an archive comment")
    cd_end = size - 22
    if _MAX32 in (cd_size, cd_offset) or 0xFFFF == n_total:
        if cd_end < 20 + 56:
            raise _bad(where, "a zip64 archive without its zip64 end records")
        loc = read(cd_end - 20, 20)
        if loc[:4] != _LOCATOR64:
            raise _bad(where, "a zip64 archive without its zip64 end locator")
        loc_disk, end64_offset, disks = struct.unpack("<IQI", loc[4:])
        if loc_disk or disks != 1:
            raise _bad(where, "a multi-disk zip64 archive")
        rec = read(end64_offset, 56)
        if rec[:4] != _END64:
            raise _bad(where, "no zip64 end record where its locator points")
        rec_size, _, _, disk, cd_disk, n_disk, n_total, cd_size, cd_offset = struct.unpack(
            "<QHHIIQQQQ", rec[4:]
        )
        if rec_size != 44 or end64_offset + 56 != cd_end - 20 or disk or cd_disk or n_disk != n_total:
            raise _bad(where, "a zip64 end record that is not right before its locator")
        cd_end = end64_offset
    elif size >= 22 + 20 and read(cd_end - 20, 4) == _LOCATOR64:
        loc_disk, end64_offset, disks = struct.unpack("<IQI", read(cd_end - 16, 16))
        if end64_offset + 56 == cd_end - 20 and read(end64_offset, 4) == _END64:
            rec = read(end64_offset, 56)
            *_, n64, cd_size64, cd_offset64 = struct.unpack("<QHHIIQQQQ", rec[4:])
            if (n64, cd_size64, cd_offset64) != (n_total, cd_size, cd_offset):
                raise _bad(where, "zip64 and zip end records that disagree")
            cd_end = end64_offset
    if cd_offset + cd_size != cd_end:
        raise _bad(
            where,
            "bytes between the central directory and the end record, or a central "
            "directory that does not end where the end record starts",
        )

    entries: list[Entry] = []
    cd = read(cd_offset, cd_size)
    pos = 0
    while pos < len(cd):
        if cd[pos : pos + 4] != _CENTRAL or pos + 46 > len(cd):
            raise _bad(where, f"a malformed central directory entry at offset {cd_offset + pos}")
        (_, _, flags, method, _, _, crc, csize, usize, nlen, elen, clen, disk, _, _, offset) = (
            struct.unpack_from("<HHHHHHIIIHHHHHII", cd, pos + 4)
        )
        raw_name = cd[pos + 46 : pos + 46 + nlen]
        extra = cd[pos + 46 + nlen : pos + 46 + nlen + elen]
        pos += 46 + nlen + elen + clen
        if pos > len(cd):
            raise _bad(where, "a central directory entry past the directory's end")
        wanted = [k for k, v in (("u", usize), ("c", csize), ("o", offset)) if v == _MAX32]
        z64 = _zip64_fields(extra, wanted, where)
        usize, csize, offset = z64.get("u", usize), z64.get("c", csize), z64.get("o", offset)
        name = raw_name.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
        if disk:
            raise _bad(where, f"member {name!r} on another disk")
        entries.append(Entry(name, raw_name, flags, method, crc, csize, usize, offset))
    if len(entries) != n_total:
        raise _bad(
            where, f"the end record counts {n_total} members, the central directory lists {len(entries)}"
        )

    names: set[str] = set()
    raws: set[bytes] = set()
    for e in entries:
        if e.name in names or e.raw_name in raws:
            raise _bad(where, f"two members named {e.name!r} (readers differ on which one they read)")
        names.add(e.name)
        raws.add(e.raw_name)
        if e.flags & 0x41 or e.method not in _METHODS:
            raise _bad(where, f"member {e.name!r} is encrypted or uses compression method {e.method}")

    ordered = sorted(entries, key=lambda e: e.offset)
    expected = 0
    for e in ordered:
        if e.offset != expected:
            what = (
                "overlaps the member before it"
                if e.offset < expected
                else "has bytes before it no member covers"
            )
            raise _bad(where, f"member {e.name!r} (at offset {e.offset}) {what}")
        expected = _check_local(read, e, where)
    if expected != cd_offset:
        raise _bad(where, f"{cd_offset - expected} bytes between the last member and the central directory")
    return ordered


def _check_local(read, e: Entry, where: str) -> int:
    """Compare the local header of ``e`` with its central entry; the offset where the member
    (header, data, data descriptor) ends."""
    head = read(e.offset, 30)
    if head[:4] != _LOCAL:
        raise _bad(where, f"no local header for member {e.name!r} at offset {e.offset}")
    _, flags, method, _, _, crc, csize, usize, nlen, elen = struct.unpack("<HHHHHIIIHH", head[4:])
    raw_name = read(e.offset + 30, nlen)
    extra = read(e.offset + 30 + nlen, elen)
    if raw_name != e.raw_name:
        raise _bad(where, f"member {e.name!r} has the local name {raw_name.decode('utf-8', 'replace')!r}")
    if flags != e.flags or method != e.method:
        raise _bad(where, f"member {e.name!r}: local and central flags or compression method differ")
    wanted = [k for k, v in (("u", usize), ("c", csize)) if v == _MAX32]
    z64 = _zip64_fields(extra, wanted, where)
    usize, csize = z64.get("u", usize), z64.get("c", csize)
    data_end = e.offset + 30 + nlen + elen + e.compress_size
    if flags & 0x08:  # sizes and CRC in a data descriptor after the data
        if crc not in (0, e.crc) or csize not in (0, e.compress_size) or usize not in (0, e.file_size):
            raise _bad(where, f"member {e.name!r}: local and central sizes or CRC differ")
        wide = _has_zip64(extra) or e.compress_size >= _MAX32 or e.file_size >= _MAX32
        size = 24 if wide else 16
        desc = read(data_end, size)
        if desc[:4] != _DESCRIPTOR:
            raise _bad(where, f"member {e.name!r}: no data descriptor after its data")
        fields = struct.unpack("<IQQ" if wide else "<III", desc[4:])
        if fields != (e.crc, e.compress_size, e.file_size):
            raise _bad(where, f"member {e.name!r}: its data descriptor and central entry differ")
        return data_end + size
    if (crc, csize, usize) != (e.crc, e.compress_size, e.file_size):
        raise _bad(where, f"member {e.name!r}: local and central sizes or CRC differ")
    return data_end


def open_checked(f: IO[bytes], where: str) -> zipfile.ZipFile:
    """A :class:`zipfile.ZipFile` over the open binary file ``f`` after :func:`check_layout`
    passed and Python's reader found the same members; it reads ``f`` itself (closing the
    ZipFile leaves ``f`` open). The declared sizes of compressed members are checked against
    :func:`converter.fileio.inflate_budget` before anything is decompressed.

    Raises:
        ParseError: as :func:`check_layout`, or compressed members declaring more than the
            budget.
    """
    entries = check_layout(f, where)
    f.seek(0)
    try:
        zf = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise ParseError(f"{where}: not a readable zip archive ({e})") from e
    seen = sorted((i.filename, i.header_offset, i.compress_size, i.file_size) for i in zf.infolist())
    ours = sorted((e.name, e.offset, e.compress_size, e.file_size) for e in entries)
    if seen != ours:
        zf.close()
        raise _bad(where, "Python's zip reader sees other members than the layout check")
    check_inflate(
        sum(e.file_size for e in entries if e.method != zipfile.ZIP_STORED),
        f"{where}: its compressed members",
    )
    return zf


def read_member(zf: zipfile.ZipFile, name: str, where: str) -> bytes:
    """The bytes of member ``name`` of an archive from :func:`open_checked`, decompressed in
    bounded steps to at most its declared size.

    Raises:
        KeyError: no such member.
        ParseError: the data is corrupt (a bad deflate stream, a CRC mismatch); names the
            file and the member.
    """
    info = zf.getinfo(name)
    try:
        with zf.open(info) as member:
            return member.read(info.file_size)
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as e:
        raise ParseError(f"{where}: member {name} is corrupt ({type(e).__name__}: {e})") from e


def is_zip(data: bytes) -> bool:
    """Whether ``data`` starts like a zip archive (a local file header)."""
    return data[:4] == _LOCAL


__all__ = ["Entry", "check_layout", "is_zip", "open_checked", "read_member"]
