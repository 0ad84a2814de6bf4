"""Every zip the converter opens goes through one layout check (:mod:`converter.ziparchive`):
crafted ``.pt2`` archives whose layouts zip readers read differently (two members of one
name with a pickle payload first, a local header naming another member, a member the central
directory does not list, bytes no member covers, overlapping members, sizes that disagree)
run nothing and are refused by ``convert``, ``convert inspect`` and
``converter.from_torch(path)``; the same for ``.shlo`` and ``--inputs`` ``.npz``. Each
crafted ``.pt2`` is first shown to run its payload under plain ``torch.export.load``
where that reader is fooled."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

import converter
from converter import ziparchive
from converter.tools import cli
from tests.zipcraft import Member, Raw, assemble, build, deflated, deflated_zeros


class _Marker:
    """Unpickling it creates ``path`` (standing in for any command)."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture(scope="module")
def members(tmp_path_factory) -> list[tuple[str, bytes]]:
    """The members of a good ``.pt2`` of a Linear, in order."""
    path = tmp_path_factory.mktemp("zip") / "good.pt2"
    torch.export.save(torch.export.export(torch.nn.Linear(4, 2), (torch.randn(3, 4),)), path)
    with zipfile.ZipFile(path) as zf:
        return [(i.filename, zf.read(i)) for i in zf.infolist()]


def _payload(marker: Path) -> bytes:
    """Sample inputs torch's restricted loader refuses; torch then unpickles them in full."""
    buf = io.BytesIO()
    torch.save((_Marker(marker),), buf)
    return buf.getvalue()


def _inputs_name(members) -> str:
    return next(n for n, _ in members if "/data/sample_inputs/" in n)


def _duplicate(members, marker, name=None):
    """The sample inputs twice at the start: the payload first (torch's reader, whose binary
    search over the sorted names lands on it, runs it), the clean copy last (what
    ``zipfile``, keeping the last of equal names, and so a zipfile-based check reads)."""
    name = name or _inputs_name(members)
    clean = dict(members)[name]
    rest = [Member(n, d) for n, d in members if n != name]
    return build([Member(name, _payload(marker)), Member(name, clean), *rest])


def _local_name_differs(members, marker, name=None):
    """The payload's local header says it is the sample inputs; its central entry names it
    ``model.pt`` of another directory; the clean sample inputs are listed too."""
    name = name or _inputs_name(members)
    out = [Member(n, d) for n, d in members]
    out.insert(0, Member(name.replace("sample_inputs", "sample_inputz"), _payload(marker), local_name=name))
    return build(out)


def _unlisted_member(members, marker, name=None):
    """A member with the payload that the central directory does not list."""
    name = name or _inputs_name(members)
    return build([Member(name, _payload(marker), listed=False)] + [Member(n, d) for n, d in members])


def _prefix(members, marker):
    """Bytes (a payload) before the first member."""
    return build([Member(n, d) for n, d in members], prefix=_payload(marker))


def _trailer(members, marker):
    """Bytes after the end record."""
    return build([Member(n, d) for n, d in members], trailer=b"PK\x05\x06" + bytes(30))


def _gap(members, marker, name=None):
    """Bytes between two members that no entry covers."""
    out = [Member(n, d) for n, d in members]
    out[0].gap = _payload(marker)
    return build(out)


def _overlap(members, marker):
    """A second central entry pointing at the first member's local header."""
    return build([Member(n, d) for n, d in members], extra_central=1)


def _sizes_differ(members, marker):
    """A local header whose size disagrees with the central entry's."""
    out = [Member(n, d) for n, d in members]
    out[-1].local_size = len(out[-1].data) + 7
    return build(out)


LAYOUTS = [
    _duplicate,
    _local_name_differs,
    _unlisted_member,
    _prefix,
    _trailer,
    _gap,
    _overlap,
    _sizes_differ,
]


def test_the_crafting_writer_makes_good_archives(members, tmp_path):
    """Rebuilt without tricks, the archive loads (the crafts differ from it only by theirs)."""
    path = tmp_path / "rebuilt.pt2"
    path.write_bytes(build([Member(n, d) for n, d in members]))
    assert converter.from_torch(path).signature.params


def test_duplicate_names_fool_plain_torch(members, tmp_path):
    """The duplicate-name layout is a real attack: zipfile reads the clean last copy,
    ``torch.export.load`` the payload."""
    shown = tmp_path / "shown"
    path = tmp_path / "dup.pt2"
    path.write_bytes(_duplicate(members, shown))
    with zipfile.ZipFile(path) as zf:  # what a zipfile-based check would have read
        assert b"_Marker" not in zf.read(_inputs_name(members))
    try:
        torch.export.load(path)
    except Exception:  # noqa: BLE001 - torch may fail after running the payload
        pass
    assert shown.exists()


@pytest.mark.parametrize("craft", LAYOUTS, ids=lambda f: f.__name__.strip("_"))
def test_crafted_layouts_are_refused_and_run_nothing(craft, members, tmp_path, capsys):
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.pt2"
    evil.write_bytes(craft(members, marker))
    out = tmp_path / "x.shlo"
    for flags in ([], ["--trust-pickle"]):
        assert cli.main([str(evil), "-o", str(out), *flags]) == 2
        err = capsys.readouterr().err
        assert "refused zip archive layout" in err and str(evil) in err and "Traceback" not in err, err
        assert cli.main(["inspect", str(evil), *flags]) == 2
        assert "refused zip archive layout" in capsys.readouterr().err
    with pytest.raises(converter.UntrustedInputError, match="refused zip archive layout"):
        converter.from_torch(evil)
    with pytest.raises(converter.UntrustedInputError):
        converter.load_pt2(evil, trust_pickle=True)
    assert not marker.exists() and not out.exists()


@pytest.mark.parametrize("craft", [_duplicate, _local_name_differs, _unlisted_member, _gap])
def test_shlo_layouts_are_refused(craft, tmp_path, capsys):
    """The same rule for ``.shlo`` (``converter.load``, ``convert``): the manifest crafted."""
    good = tmp_path / "good.shlo"
    converter.from_torch(torch.nn.Linear(2, 2), (torch.ones(1, 2),)).save(good)
    with zipfile.ZipFile(good) as zf:
        members = [(i.filename, zf.read(i)) for i in zf.infolist()]
    evil = tmp_path / "evil.shlo"
    evil.write_bytes(craft(members, tmp_path / "marker", "manifest.json"))
    with pytest.raises(converter.ModuleFormatError, match="refused zip archive layout"):
        converter.load(evil)
    assert cli.main([str(evil), "-o", str(tmp_path / "o.mlir")]) == 2
    assert "refused zip archive layout" in capsys.readouterr().err


def test_npz_layouts_are_refused(tmp_path):
    good = tmp_path / "good.npz"
    np.savez(good, np.ones(3, np.float32))
    with zipfile.ZipFile(good) as zf:
        members = [(i.filename, zf.read(i)) for i in zf.infolist()]
    evil = tmp_path / "evil.npz"
    evil.write_bytes(build([Member(n, d) for n, d in members] * 2))
    sig = converter.from_jax(lambda x: x + 1, np.ones(3, np.float32)).signature
    from converter.tools.validate import load_inputs

    assert load_inputs(good, sig)[0][0].shape == (3,)
    with pytest.raises(converter.InputError, match="two members named"):
        load_inputs(evil, sig)


def test_zip64_and_data_descriptors_pass(tmp_path):
    """What zipfile writes to a stream (data descriptors) and with zip64 records passes."""
    buf = io.BytesIO()

    class Stream(io.RawIOBase):  # not seekable: zipfile writes data descriptors
        def writable(self):
            return True

        def write(self, b):
            return buf.write(b)

    with zipfile.ZipFile(Stream(), "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a.json", b"{}" * 100)
        with zf.open("b.bin", "w", force_zip64=True) as f:
            f.write(b"x" * 1000)
    entries = ziparchive.check_layout(io.BytesIO(buf.getvalue()), "s")
    assert [e.name for e in entries] == ["a.json", "b.bin"] and entries[0].flags & 0x08
    path = tmp_path / "z.zip"
    with zipfile.ZipFile(path, "w") as zf:
        with zf.open("big", "w", force_zip64=True) as f:
            f.write(b"y" * 100)
    with open(path, "rb") as f, ziparchive.open_checked(f, "z") as zf:
        assert ziparchive.read_member(zf, "big", "z") == b"y" * 100


def test_a_corrupt_deflate_member_names_the_file_and_member(tmp_path):
    data, crc, size = deflated(b'{"format": "converter.Module"}' * 10)
    broken = data[:5] + bytes(b ^ 0xFF for b in data[5:15]) + data[15:]
    path = tmp_path / "corrupt.shlo"
    path.write_bytes(build([Member("manifest.json", broken, method=8, crc=crc, size=size)]))
    with pytest.raises(converter.ModuleFormatError, match=r"corrupt\.shlo: member manifest\.json is corrupt"):
        converter.load(path)


def test_a_declared_size_that_lies_is_bounded(tmp_path):
    """A member declaring 1,000 bytes whose deflate stream holds 64 MiB: reading stops at the
    declared size (the CRC of those bytes then fails)."""
    data = deflated_zeros(64)
    path = tmp_path / "liar.zip"
    path.write_bytes(build([Member("m.json", data, method=8, crc=0, size=1000)]))
    with open(path, "rb") as f, ziparchive.open_checked(f, "liar") as zf:
        with pytest.raises(converter.ParseError, match="member m.json is corrupt"):
            ziparchive.read_member(zf, "m.json", "liar")


# --------------------------------------------------------------------------- each refusal, alone
#
# One crafted archive per refusal of ``check_layout``/``open_checked``, each differing from a good
# archive by that one defect; the message's words name it, so an archive that a missing check
# lets through (or that a later check refuses for another reason) fails the test.

_M64 = 0xFFFFFFFF
_ZIP64_END = {"cd_offset": _M64, "cd_size": _M64, "n_disk": 0xFFFF, "n_total": 0xFFFF}


def _two(**first) -> list[Raw]:
    return [Raw(b"a.txt", b"alpha", **first), Raw(b"b.txt", b"beta")]


def _descriptor(crc: int | None = None, sig: bytes = b"PK\x07\x08") -> bytes:
    """The 16-byte data descriptor of ``b"alpha"`` (its CRC replaced by ``crc``)."""
    return struct.pack("<4sIII", sig, zlib.crc32(b"alpha") if crc is None else crc, 5, 5)


_DD = {"flags": 0x808}
REFUSALS = {
    "zip64 size without extra field": (
        assemble(_two(central={"usize": _M64})),
        "a zip64 size or offset without its zip64 extra field",
    ),
    "zip64 extra field too short": (  # 4 bytes where the 8-byte size should be
        assemble(_two(central={"usize": _M64}, central_extra=struct.pack("<HHI", 1, 4, 5))),
        "a zip64 size or offset without its zip64 extra field",
    ),
    "local zip64 size without extra field": (
        assemble(_two(local={"usize": _M64})),
        "a zip64 size or offset without its zip64 extra field",
    ),
    "local name runs past the file": (
        assemble(_two(local={"nlen": 60000})),
        "60000 bytes at offset 30 run past the end of the file",
    ),
    "archive comment length": (
        assemble(_two(), end={"comment": 3}),
        "a multi-disk archive or an archive comment",
    ),
    "end record on disk 1": (assemble(_two(), end={"disk": 1}), "a multi-disk archive or an archive comment"),
    "central directory on disk 1": (
        assemble(_two(), end={"cd_disk": 1}),
        "a multi-disk archive or an archive comment",
    ),
    "entries on this disk differ from total": (
        assemble(_two(), end={"n_disk": 1}),
        "a multi-disk archive or an archive comment",
    ),
    "zip64 markers in a tiny file": (
        assemble([], end={"n_disk": 0xFFFF, "n_total": 0xFFFF}),
        "a zip64 archive without its zip64 end records",
    ),
    "zip64 markers without locator": (
        assemble(_two(), end=_ZIP64_END),
        "a zip64 archive without its zip64 end locator",
    ),
    "zip64 locator with a signature sorting after the real one": (  # PK\x06\x08, not PK\x06\x07
        assemble(_two(), zip64={}, locator={"sig": b"PK\x06\x08"}, end=_ZIP64_END),
        "a zip64 archive without its zip64 end locator",
    ),
    "zip64 locator of another disk": (
        assemble(_two(), zip64={}, locator={"disk": 1}, end=_ZIP64_END),
        "a multi-disk zip64 archive",
    ),
    "zip64 locator counting two disks": (
        assemble(_two(), zip64={}, locator={"disks": 2}, end=_ZIP64_END),
        "a multi-disk zip64 archive",
    ),
    "zip64 locator pointing at a member": (
        assemble(_two(), zip64={}, locator={"offset": 0}, end=_ZIP64_END),
        "no zip64 end record where its locator points",
    ),
    "zip64 end record of another size": (
        assemble(_two(), zip64={"size": 52}, end=_ZIP64_END),
        "a zip64 end record that is not right before its locator",
    ),
    "zip64 end record on disk 1": (
        assemble(_two(), zip64={"disk": 1}, end=_ZIP64_END),
        "a zip64 end record that is not right before its locator",
    ),
    "zip64 end record entries on this disk differ": (
        assemble(_two(), zip64={"n_disk": 1}, end=_ZIP64_END),
        "a zip64 end record that is not right before its locator",
    ),
    "zip64 end record counting another member number": (
        assemble(_two(), zip64={"n_total": 3, "n_disk": 3}),
        "zip64 and zip end records that disagree",
    ),
    "zip64 end record with another directory offset": (
        assemble(_two(), zip64={"cd_offset": 1}),
        "zip64 and zip end records that disagree",
    ),
    "bytes after the central directory": (
        assemble(_two(), cd_suffix=b"junk", end={"cd_size": 2 * 46 + 10}),
        "bytes between the central directory and the end record, or a central directory that "
        "does not end where the end record starts",
    ),
    "no central entry signature": (
        assemble(_two(), cd_prefix=b"PK\x01\x03" + bytes(60)),
        "a malformed central directory entry at offset 79",  # the members take 79 bytes
    ),
    "truncated central entry": (
        assemble(_two(), cd_suffix=b"PK\x01\x02" + bytes(20)),
        "a malformed central directory entry at offset 181",  # after the two 51-byte entries
    ),
    "central comment past the directory": (
        assemble(_two(central={"clen": 100})),
        "a central directory entry past the directory's end",
    ),
    "member on disk 1": (assemble(_two(central={"disk": 1})), "member 'a.txt' on another disk"),
    "end record counts more members": (
        assemble(_two(), end={"n_disk": 3, "n_total": 3}),
        "the end record counts 3 members, the central directory lists 2",
    ),
    "encrypted member": (
        assemble(_two(local={"flags": 0x801}, central={"flags": 0x801})),
        "member 'a.txt' is encrypted or uses compression method 0",
    ),
    "strongly encrypted member": (
        assemble(_two(local={"flags": 0x840}, central={"flags": 0x840})),
        "member 'a.txt' is encrypted or uses compression method 0",
    ),
    "bzip2 member": (
        assemble(_two(local={"method": 12}, central={"method": 12})),
        "member 'a.txt' is encrypted or uses compression method 12",
    ),
    "bytes before the central directory": (
        assemble(_two(), between=b"junk"),
        "4 bytes between the last member and the central directory",
    ),
    "no local header": (
        assemble(_two(local={"sig": b"PK\x03\x05"})),
        "no local header for member 'a.txt' at offset 0",
    ),
    "local flags differ": (
        assemble(_two(local={"flags": 0x000})),
        "member 'a.txt': local and central flags or compression method differ",
    ),
    "local method differs": (
        assemble(_two(local={"method": 8})),
        "member 'a.txt': local and central flags or compression method differ",
    ),
    "local CRC differs beside a data descriptor": (
        assemble(_two(local={**_DD, "crc": 1}, central=_DD, after=_descriptor())),
        "member 'a.txt': local and central sizes or CRC differ",
    ),
    "local size differs beside a data descriptor": (
        assemble(_two(local={**_DD, "csize": 4, "crc": 0}, central=_DD, after=_descriptor())),
        "member 'a.txt': local and central sizes or CRC differ",
    ),
    "no data descriptor": (
        assemble(_two(local={**_DD, "crc": 0}, central=_DD, after=_descriptor(sig=b"PK\x07\x09"))),
        "member 'a.txt': no data descriptor after its data",
    ),
    "data descriptor differs": (
        assemble(_two(local={**_DD, "crc": 0}, central=_DD, after=_descriptor(crc=7))),
        "member 'a.txt': its data descriptor and central entry differ",
    ),
    "bytes between two members": (
        assemble(_two(after=b"junk")),  # a.txt: 30 + 5 + 5 bytes, then 4 no member covers
        "member 'b.txt' (at offset 44) has bytes before it no member covers",
    ),
    "a member inside another": (
        assemble([Raw(b"a.txt", b"alpha"), Raw(b"b.txt", b"beta", central={"offset": 20})]),
        "member 'b.txt' (at offset 20) overlaps the member before it",
    ),
    "name with a NUL byte": (  # zipfile cuts the name at the NUL: two members named "a" for it
        assemble([Raw(b"a\x00x", b"1"), Raw(b"a\x00y", b"2")]),
        "Python's zip reader sees other members than the layout check",
    ),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_each_refusal_names_its_defect(name):
    data, words = REFUSALS[name]
    with pytest.raises(converter.UntrustedInputError) as e:
        ziparchive.open_checked(io.BytesIO(data), "crafted.zip")
    assert str(e.value) == f"crafted.zip: refused zip archive layout: {words}"


def test_the_refusal_crafts_differ_from_good_archives_only_by_their_defect():
    """Without the defects the same builder's archives pass, with zip64 end records (the
    markers in the end record, or a zip64 record that agrees with it) and data descriptors;
    zipfile reads the same members."""
    dd = _two(local={**_DD, "crc": 0, "csize": 0, "usize": 0}, central=_DD, after=_descriptor())
    for data in (
        assemble(_two()),
        assemble(_two(), zip64={}, end=_ZIP64_END),
        assemble(_two(), zip64={}),
        assemble(dd),
        assemble(_two(central={"usize": _M64}, central_extra=struct.pack("<HHIHHQ", 9, 4, 0, 1, 8, 5))),
    ):
        with ziparchive.open_checked(io.BytesIO(data), "good") as zf:
            assert [ziparchive.read_member(zf, n, "good") for n in ("a.txt", "b.txt")] == [b"alpha", b"beta"]


def test_a_zip64_end_record_hidden_in_a_comment_is_refused():
    """The last central entry's comment ends with a zip64 end record and a locator pointing
    elsewhere: the layout check (which follows the locator) reads the real directory, Python's
    zipfile (which reads the record right before the locator) a directory hidden in the comment
    naming a member hidden in another's data. Only the comparison of the two readers sees it."""
    payload = b"PAYLOAD"
    crc = zlib.crc32(payload)
    inner = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0x800, 0, 0, 0x21, crc, 7, 7, 8, 0)
    inner += b"evil.txt" + payload
    hidden = struct.pack(
        "<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0x800, 0, 0, 0x21, crc, 7, 7, 8, 0, 0, 0, 0, 0, 35
    )
    hidden += b"evil.txt"  # offset 35: ``inner`` in the data of a.txt

    def craft(cd_offset: int) -> bytes:
        end64 = struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, 1, 1, len(hidden), cd_offset)
        tail = hidden + end64 + struct.pack("<4sIQI", b"PK\x06\x07", 0, 0, 1)
        return assemble([Raw(b"a.txt", inner, central={"clen": len(tail)})], cd_suffix=tail)

    data = craft(len(craft(0)) - 22 - 76 - len(hidden))  # zipfile then reads ``hidden`` as is
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.namelist() == ["evil.txt"] and zf.read("evil.txt") == payload
    assert [e.name for e in ziparchive.check_layout(io.BytesIO(data), "c")] == ["a.txt"]
    with pytest.raises(converter.UntrustedInputError, match="Python's zip reader sees other members"):
        ziparchive.open_checked(io.BytesIO(data), "c")


def test_an_archive_zipfile_cannot_read_is_a_parse_error():
    """A zip64 locator counting two disks beside a plain end record: the layout is one reading,
    zipfile refuses multi-disk archives; the error names the file."""
    data = assemble(_two(), zip64={}, locator={"disks": 2})
    assert [e.name for e in ziparchive.check_layout(io.BytesIO(data), "c")] == ["a.txt", "b.txt"]
    with pytest.raises(converter.ParseError, match=r"^c: not a readable zip archive \(zipfiles that span"):
        ziparchive.open_checked(io.BytesIO(data), "c")


def test_member_names_decode_as_their_utf8_flag_says():
    """APPNOTE 4.4.4 bit 11: the name is UTF-8 when set, else IBM code page 437 (as Python's
    zipfile reads it, which the layout check must agree with)."""
    data = assemble(
        [
            Raw(b"\x81.txt", b"alpha", local={"flags": 0}, central={"flags": 0}),  # cp437 0x81: u umlaut
            Raw("é.txt".encode(), b"beta"),  # flag 0x800
        ]
    )
    assert [e.name for e in ziparchive.check_layout(io.BytesIO(data), "n")] == ["\u00fc.txt", "é.txt"]
    with ziparchive.open_checked(io.BytesIO(data), "n") as zf:
        assert ziparchive.read_member(zf, "\u00fc.txt", "n") == b"alpha"
        assert ziparchive.read_member(zf, "é.txt", "n") == b"beta"


def test_what_is_not_a_zip_archive_and_what_follows_one():
    """Shorter than an end record, or no end record at the end: not a zip file (a parse
    error naming the file); an end record followed by a comment or other bytes: refused."""
    for data, words in (
        (bytes(21), r"^t: not a zip file \(21 bytes\)$"),
        (b"not a zip archive at all", r"^t: not a zip file$"),
        (b"PK\x05\x07" + bytes(18), r"^t: not a zip file$"),
    ):
        with pytest.raises(converter.ParseError, match=words) as e:
            ziparchive.check_layout(io.BytesIO(data), "t")
        assert not isinstance(e.value, converter.UntrustedInputError)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("a.txt", b"alpha")
        zf.comment = b"hi"
    for data in (buf.getvalue(), assemble(_two()) + b"x"):
        with pytest.raises(converter.UntrustedInputError) as e:
            ziparchive.check_layout(io.BytesIO(data), "t")
        assert (
            str(e.value) == "t: refused zip archive layout: an archive comment or data after the end record"
        )
    assert ziparchive.is_zip(assemble(_two())) and not ziparchive.is_zip(assemble([]))


def test_empty_archives_pass_with_and_without_zip64_end_records():
    """No members: the end record alone (22 bytes, the smallest zip file), or with the zip64
    end record and locator right before it (22 + 20 + 56 bytes) and the zip64 markers."""
    for data in (assemble([]), assemble([], zip64={}, end=_ZIP64_END)):
        assert ziparchive.check_layout(io.BytesIO(data), "e") == []
        with ziparchive.open_checked(io.BytesIO(data), "e") as zf:
            assert zf.namelist() == []


def test_only_compressed_members_count_against_the_inflate_budget(monkeypatch):
    """The declared sizes of deflated members, all together, against $CONVERTER_MAX_INFLATE;
    a stored member holds its bytes as they are and counts for nothing."""
    monkeypatch.setenv("CONVERTER_MAX_INFLATE", "10")

    def archive(*sizes: int) -> bytes:
        members = [Member("stored.bin", bytes(100))]
        for i, n in enumerate(sizes):
            data, crc, size = deflated(bytes(n))
            members.append(Member(f"d{i}.bin", data, method=8, crc=crc, size=size))
        return build(members)

    with ziparchive.open_checked(io.BytesIO(archive(4, 6)), "b") as zf:
        assert ziparchive.read_member(zf, "stored.bin", "b") == bytes(100)
        assert ziparchive.read_member(zf, "d1.bin", "b") == bytes(6)
    with pytest.raises(converter.ParseError, match=r"^b: its compressed members would expand to 11 bytes"):
        ziparchive.open_checked(io.BytesIO(archive(5, 6)), "b")
