"""Atomic file output: a file is either fully written or not there at all."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed onto ``path``
    (``os.replace``, atomic on POSIX), on failure it is removed and ``path`` is untouched.

    Missing parent directories are created (as ``mkdir -p``), and stay when the write fails.

    Raises:
        OutputError: the directory cannot be created or written (read-only, a file standing
            where a directory should be, a virtual file system such as ``/proc``), ``path``
            is a directory, or writing the temporary file failed (``OSError`` in the body: a
            full disk); names the path and the system's reason.
    """
    target = Path(path)
    tmp_path = _temp_beside(target)
    remove_stale_temps(target)
    try:
        try:
            yield tmp_path
        except OSError as e:  # the write itself: a full disk, a quota, an I/O error
            raise _output_error(target, e) from e
        try:
            if tmp_path.exists():  # mkstemp makes it 0600; give it the mode a plain open() would
                os.chmod(tmp_path, 0o666 & ~_umask())
            os.replace(tmp_path, target)
        except OSError as e:
            raise _output_error(target, e) from e
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


_NO_NEW_FILES = (errno.ENOENT, errno.EACCES, errno.EPERM, errno.EROFS)


def _output_error(target: Path, e: OSError):
    from .errors import OutputError

    reason = e.strerror or str(e) or type(e).__name__
    for parent in target.parents:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                reason = f"{parent} is a file, not a directory"
            elif parent == target.parent and e.errno in (
                errno.ENOENT,
                errno.EACCES,
                errno.EPERM,
                errno.EROFS,
            ):
                reason = f"{reason} (no new files can be made in {parent})"
            break
    return OutputError(f"cannot write {target}: {reason}")


def _temp_beside(target: Path) -> Path:
    """An empty temporary file beside ``target`` (its missing parent directories made).

    Raises:
        OutputError: as :func:`atomic_path`.
    """
    if target.is_dir():
        raise _output_error(target, IsADirectoryError(21, "is a directory"))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise _output_error(target, e) from e
    os.close(fd)
    return Path(tmp)


def _temp_prefix(target: Path) -> str:
    """The start of the names of ``target``'s temporaries: ``.NAME.PID.``, so that a later
    writer of ``target`` can tell those of a process that no longer runs (killed mid-write)."""
    return f".{target.name}.{os.getpid()}."


#: What follows ``.NAME.`` in a temporary of NAME: ``PID.RANDOM.tmp`` (a file),
#: ``PID.RANDOMtmpdir`` (a staging directory); older versions wrote ``RANDOM.tmp`` and
#: ``RANDOM`` (8 characters of ``tempfile``'s alphabet).
_TEMP_NAME = re.compile(r"(?:(?P<pid>[0-9]+)\.[a-z0-9_]{8}(?:\.tmp|tmpdir)|[a-z0-9_]{8}(?:\.tmp)?)")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # another thread of this process may be writing it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # someone else's process
    return True


def remove_stale_temps(target: str | os.PathLike) -> list[Path]:
    """Remove the temporaries that writers of ``target`` left beside it when they were
    killed mid-write (:func:`atomic_path`'s ``.NAME.PID.RANDOM.tmp`` files, the ONNX
    backend's ``.NAME.PID.RANDOMtmpdir`` staging directories, and those of older versions):
    the ones whose process no longer runs. Called by every writer of ``target`` before it
    writes; returns what was removed. Errors removing them are ignored (the next writer
    tries again)."""
    target = Path(target)
    prefix = f".{target.name}."
    removed: list[Path] = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        m = _TEMP_NAME.fullmatch(entry.name[len(prefix) :])
        if m is None or (m.group("pid") is not None and _alive(int(m.group("pid")))):
            continue
        is_dir = entry.is_dir(follow_symlinks=False)
        if is_dir != entry.name.endswith("tmpdir") and m.group("pid") is not None:
            continue
        if m.group("pid") is None and is_dir == entry.name.endswith(".tmp"):
            continue  # older versions: RANDOM.tmp files, RANDOM directories
        try:
            shutil.rmtree(entry.path) if is_dir else os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed


@contextlib.contextmanager
def staging_dir(target: str | os.PathLike) -> Iterator[Path]:
    """A temporary directory beside ``target`` (``.NAME.PID.RANDOMtmpdir``), removed on exit,
    for writers that stage several files before renaming them into place; stale ones of
    ``target`` are removed first (:func:`remove_stale_temps`).

    Raises:
        OutputError: as :func:`atomic_path`.
    """
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=_temp_prefix(target), suffix="tmpdir", dir=target.parent)
    except OSError as e:
        raise _output_error(target, e) from e
    remove_stale_temps(target)
    try:
        yield Path(staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def check_writable(path: str | os.PathLike) -> None:
    """Fail early, before a long conversion, when ``path`` could not be written: makes its
    missing parent directories (as :func:`atomic_path` would) and a temporary file beside it,
    then removes the file.

    Raises:
        OutputError: as :func:`atomic_path`.
    """
    _temp_beside(Path(path)).unlink()


@contextlib.contextmanager
def atomic_paths(*paths: str | os.PathLike) -> Iterator[tuple[Path, ...]]:
    """:func:`atomic_path` for files that go together (a model and its weights): temporary
    paths beside each, renamed onto ``paths`` in the order given once all are written (so
    list the file that refers to the others last); on failure none is touched."""
    with contextlib.ExitStack() as stack:
        yield tuple(stack.enter_context(atomic_path(p)) for p in reversed(paths))[::-1]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, data: bytes | str) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:  # which turns an OSError (disk full, quota) into OutputError
        if isinstance(data, str):
            tmp.write_text(data)
        else:
            tmp.write_bytes(data)


def memory_bytes() -> int:
    """This machine's physical memory in bytes (a generous bound when unknown)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


#: Default of :func:`inflate_budget`: 256 MiB.
DEFAULT_INFLATE_BUDGET = 256 << 20


def _env_bytes(name: str) -> int | None:
    """The byte count in the environment variable ``name`` (``123``, ``512M``, ``4G``, ``1T``;
    binary units), or None when unset or empty.

    Raises:
        InputValueError: the value is not such a count (names the variable).
    """
    from .errors import InputValueError

    value = os.environ.get(name, "").strip()
    if not value:
        return None
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    scale = units.get(value[-1].upper(), 1)
    digits = value[:-1] if value[-1].upper() in units else value
    try:
        count = int(digits) * scale
    except ValueError:
        count = -1
    if count < 0:
        raise InputValueError(f"${name}={value!r}: not a byte count (such as 1073741824, 512M, 4G)")
    return count


def memory_budget() -> int:
    """The most bytes a size declared by an input (a zip member, a tensor a header or config
    declares, an input a signature describes) may claim: ``$CONVERTER_MAX_BYTES`` when set
    (``512M``, ``8G``...), else this machine's physical memory."""
    value = _env_bytes("CONVERTER_MAX_BYTES")
    return memory_bytes() if value is None else value


def inflate_budget() -> int:
    """The most bytes an input may make the converter produce beyond what the file holds: the
    declared sizes of an archive's compressed members (all of them together), and tensors a
    ``.pt2`` declares without storing their data. ``$CONVERTER_MAX_INFLATE`` when set
    (``1G``...), else :data:`DEFAULT_INFLATE_BUDGET` (the converter itself writes archives
    uncompressed, and ``torch.export.save`` too, so only hand-made archives get near it); never
    more than :func:`memory_budget`."""
    value = _env_bytes("CONVERTER_MAX_INFLATE")
    return min(DEFAULT_INFLATE_BUDGET if value is None else value, memory_budget())


def check_size(nbytes: int, what: str, error: type[Exception] | None = None) -> None:
    """Refuse to allocate ``nbytes`` for ``what`` (a file member, a tensor a header
    declares, an input a signature describes) when it exceeds :func:`memory_budget`: the
    input claims sizes it cannot be holding, or this machine cannot load it.

    Raises:
        ParseError (or ``error``): naming ``what``, the claimed size, the budget and how to
            raise it.
    """
    from .errors import ParseError

    limit = memory_budget()
    if nbytes < 0 or nbytes > limit:
        raise (error or ParseError)(
            f"{what} claims {nbytes:,} bytes, more than the memory budget ({limit:,} bytes: this "
            "machine's memory, or $CONVERTER_MAX_BYTES); the file is corrupt or too large to load here"
        )


def check_inflate(nbytes: int, what: str) -> None:
    """Refuse ``nbytes`` of data an input would make the converter decompress or materialize
    beyond the bytes it holds (:func:`inflate_budget`) before any of it is produced.

    Raises:
        ParseError: naming ``what``, the claimed size, the budget and how to raise it.
    """
    from .errors import ParseError

    limit = inflate_budget()
    if nbytes < 0 or nbytes > limit:
        raise ParseError(
            f"{what} would expand to {nbytes:,} bytes, more than the {limit:,} bytes allowed for data "
            "a file does not store as is (compressed members, tensors without data); a zip bomb, or "
            "set $CONVERTER_MAX_INFLATE (such as 4G) to allow it"
        )
