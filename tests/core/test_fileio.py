"""``converter.fileio``: the byte budgets read from the environment, the refusal of archives
that would inflate past them, atomic writes that fail (a full disk, a file where a directory
should be), and which temporaries of killed writers are removed."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

import pytest

import converter
from converter import fileio, ziparchive
from tests.zipcraft import Member, build, deflated


@pytest.mark.parametrize(
    "value, count",
    [("123", 123), ("4k", 4 << 10), ("512M", 512 << 20), ("2G", 2 << 30), ("1T", 1 << 40), (" 7 ", 7)],
)
def test_byte_counts_from_the_environment(monkeypatch, value, count):
    monkeypatch.setenv("CONVERTER_MAX_BYTES", value)
    assert fileio.memory_budget() == count
    monkeypatch.setenv("CONVERTER_MAX_BYTES", "1T")
    monkeypatch.setenv("CONVERTER_MAX_INFLATE", value)
    assert fileio.inflate_budget() == count


@pytest.mark.parametrize("value", ["x", "-5", "1.5G", "M", "12Q"])
def test_a_byte_count_that_is_none_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("CONVERTER_MAX_INFLATE", value)
    with pytest.raises(
        converter.InputValueError, match=rf"^\$CONVERTER_MAX_INFLATE='{value}': not a byte count"
    ):
        fileio.inflate_budget()


def test_budget_defaults(monkeypatch):
    """Unset (or empty): the inflate budget is 256 MiB, the memory budget this machine's
    memory, never less than the inflate budget allows; without a page count, 1 TiB."""
    monkeypatch.setenv("CONVERTER_MAX_INFLATE", "")
    monkeypatch.delenv("CONVERTER_MAX_BYTES", raising=False)
    assert (
        fileio.memory_budget()
        == fileio.memory_bytes()
        == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    )
    assert fileio.inflate_budget() == min(256 << 20, fileio.memory_bytes())
    monkeypatch.setenv("CONVERTER_MAX_BYTES", "1M")
    assert fileio.inflate_budget() == 1 << 20  # capped by the memory budget

    def no_sysconf(name):
        raise ValueError(name)

    monkeypatch.setattr(os, "sysconf", no_sysconf)
    assert fileio.memory_bytes() == 1 << 40


def test_check_size_refuses_negative_sizes_and_sizes_past_the_budget(monkeypatch):
    """A claimed size passes from 0 to the memory budget; a negative one (a corrupt header's
    -1 included) or one byte past the budget is refused, naming what claimed it."""
    monkeypatch.setenv("CONVERTER_MAX_BYTES", "1K")
    for ok in (0, 1024):
        fileio.check_size(ok, "t")
    for bad in (-1, -5, 1025):
        with pytest.raises(
            converter.ParseError, match=rf"^t claims {bad:,} bytes, more than the memory budget"
        ):
            fileio.check_size(bad, "t")
    with pytest.raises(converter.InputError, match="^t claims -1 bytes"):
        fileio.check_size(-1, "t", converter.InputError)


def test_compressed_members_past_the_inflate_budget_are_refused(monkeypatch):
    """The declared sizes of an archive's compressed members, together, against the budget:
    1,024 bytes pass a 1K budget, 1,025 do not (before anything is decompressed)."""
    monkeypatch.setenv("CONVERTER_MAX_INFLATE", "1K")

    def archive(sizes):
        out = []
        for i, n in enumerate(sizes):
            data, crc, size = deflated(b"a" * n)
            out.append(Member(f"m{i}", data, method=8, crc=crc, size=size))
        out.append(Member("stored", b"b" * 4000))  # stored members are not counted
        return build(out)

    with ziparchive.open_checked(io.BytesIO(archive([600, 424])), "ok.zip") as zf:
        assert ziparchive.read_member(zf, "m1", "ok.zip") == b"a" * 424
    with pytest.raises(converter.ParseError) as e:
        ziparchive.open_checked(io.BytesIO(archive([600, 425])), "big.zip")
    assert str(e.value).startswith(
        "big.zip: its compressed members would expand to 1,025 bytes, more than the 1,024 bytes allowed"
    )


def test_a_full_disk_fails_the_write_and_leaves_nothing(monkeypatch, tmp_path):
    target = tmp_path / "out.json"

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(converter.OutputError, match=rf"^cannot write {target}: No space left on device$"):
        fileio.atomic_write(target, b"{}")
    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(converter.OutputError, match="No space left on device"):
        fileio.atomic_write(target, "{}")
    assert list(tmp_path.iterdir()) == []


def test_a_staging_dir_under_a_file_names_the_file(tmp_path):
    (tmp_path / "plain").write_text("x")
    target = tmp_path / "plain" / "model.onnx"
    with pytest.raises(
        converter.OutputError, match=rf"cannot write {target}: {tmp_path / 'plain'} is a file"
    ):
        with fileio.staging_dir(target):
            pass
    with fileio.staging_dir(tmp_path / "m.onnx") as staging:
        assert staging.is_dir() and staging.name.startswith(f".m.onnx.{os.getpid()}.")
    assert not staging.exists()


def test_which_stale_temporaries_are_removed(monkeypatch, tmp_path):
    """A dead writer's temporary file (``.tmp``) and staging directory (``tmpdir``) go, and
    older versions' (``RANDOM.tmp`` files, ``RANDOM`` directories); a name of the other kind
    (a ``.tmp`` directory, a ``tmpdir`` file, a ``RANDOM`` file...) and a live process's stay."""
    dead = 99999999  # above any pid_max
    files = {
        f".o.onnx.{dead}.abcd1234.tmp": True,
        f".o.onnx.{dead}.ijkl9012tmpdir": False,
        ".o.onnx.k2j3h4g5.tmp": True,
        ".o.onnx.k2j3h4g5": False,
        f".o.onnx.{os.getpid()}.abcd1234.tmp": False,
    }
    dirs = {
        f".o.onnx.{dead}.abcd1234tmpdir": True,
        f".o.onnx.{dead}.efgh5678.tmp": False,
        ".o.onnx.m2j3h4g5": True,
        ".o.onnx.m2j3h4g5.tmp": False,
    }
    for name in files:
        (tmp_path / name).write_text("x")
    for name in dirs:
        (tmp_path / name).mkdir()
    removed = fileio.remove_stale_temps(tmp_path / "o.onnx")
    gone = {n for n, go in {**files, **dirs}.items() if go}
    assert sorted(p.name for p in removed) == sorted(gone)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted((set(files) | set(dirs)) - gone)
    assert fileio.remove_stale_temps(tmp_path / "missing" / "o.onnx") == []
    (tmp_path / f".o.onnx.{dead}.abcd1234.tmp").write_text("x")

    def refuse(path):
        raise PermissionError(errno.EACCES, "denied", path)

    monkeypatch.setattr(os, "unlink", refuse)  # left for the next writer to try again
    assert fileio.remove_stale_temps(tmp_path / "o.onnx") == []
    assert (tmp_path / f".o.onnx.{dead}.abcd1234.tmp").exists()


def test_zero_bytes_is_a_byte_count_and_inflate_checks_both_ends(monkeypatch):
    """``0`` (and ``0K``) is a budget, not an error; ``check_inflate`` passes 0 to the budget
    and refuses a negative size or one byte past it."""
    monkeypatch.setenv("CONVERTER_MAX_BYTES", "1T")
    monkeypatch.setenv("CONVERTER_MAX_INFLATE", "0K")
    assert fileio.inflate_budget() == 0
    monkeypatch.setenv("CONVERTER_MAX_INFLATE", "2K")
    for ok in (0, 2048):
        fileio.check_inflate(ok, "m")
    for bad in (-1, 2049):
        with pytest.raises(
            converter.ParseError, match=rf"^m would expand to {bad:,} bytes, more than the 2,048"
        ):
            fileio.check_inflate(bad, "m")


def test_written_files_get_the_mode_a_plain_open_gives(tmp_path):
    """Not ``mkstemp``'s 0600: 0666 less the umask, as ``open(path, "w")`` makes it."""
    mask = os.umask(0o027)
    try:
        fileio.atomic_write(tmp_path / "a.json", "{}")
        with open(tmp_path / "plain", "w"):
            pass
    finally:
        os.umask(mask)
    assert (
        (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640 == (tmp_path / "plain").stat().st_mode & 0o777
    )
    assert (tmp_path / "a.json").read_text() == "{}"


def test_files_written_together_go_each_to_its_own_path(tmp_path):
    """``atomic_paths`` yields the temporaries in the order of the paths; a failure leaves
    none of the files (and no temporaries)."""
    a, b = tmp_path / "model.onnx", tmp_path / "sub" / "weights.bin"
    with fileio.atomic_paths(a, b) as (ta, tb):
        assert ta.parent == a.parent and tb.parent == b.parent
        ta.write_text("A")
        tb.write_text("B")
    assert a.read_text() == "A" and b.read_text() == "B"
    with pytest.raises(RuntimeError):
        with fileio.atomic_paths(tmp_path / "x", tmp_path / "y") as (tx, ty):
            tx.write_text("X")
            raise RuntimeError
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "sub"]


def test_unwritable_targets_name_the_reason(monkeypatch, tmp_path):
    """A directory as the target; a directory where no new file can be made (the reason
    names it); ``check_writable`` makes the parents and leaves no file behind."""
    (tmp_path / "d").mkdir()
    with pytest.raises(converter.OutputError, match=rf"^cannot write {tmp_path / 'd'}: is a directory$"):
        fileio.atomic_write(tmp_path / "d", b"")
    fileio.check_writable(tmp_path / "new" / "deep" / "m.onnx")
    assert (tmp_path / "new" / "deep").is_dir() and list((tmp_path / "new" / "deep").iterdir()) == []

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(fileio.tempfile, "mkstemp", refuse)
    target = tmp_path / "d" / "m.onnx"
    with pytest.raises(
        converter.OutputError,
        match=rf"^cannot write {target}: Permission denied \(no new files can be made in {tmp_path / 'd'}\)$",
    ):
        fileio.check_writable(target)


def test_a_temporary_of_another_live_process_stays(monkeypatch, tmp_path):
    """pid 1 (init) is alive; so is a process this one may not signal (someone else's)."""
    names = [".o.onnx.1.abcd1234.tmp", ".o.onnx.4321.abcd1234.tmp"]
    for name in names:
        (tmp_path / name).write_text("x")

    def not_yours(pid, sig):
        if pid != 1:
            raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "kill", not_yours)
    assert fileio.remove_stale_temps(tmp_path / "o.onnx") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)
