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
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import converter
from converter import ziparchive
from converter.tools import cli
from tests.zipcraft import Member, build, deflated, deflated_zeros


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
