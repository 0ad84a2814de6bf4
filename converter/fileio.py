"""Atomic file output: a file is either fully written or not there at all."""

from __future__ import annotations

import contextlib
import errno
import os
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
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise _output_error(target, e) from e
    os.close(fd)
    return Path(tmp)


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
    with atomic_path(path) as tmp:
        try:
            if isinstance(data, str):
                tmp.write_text(data)
            else:
                tmp.write_bytes(data)
        except OSError as e:  # disk full, quota
            raise _output_error(Path(path), e) from e


def memory_bytes() -> int:
    """This machine's physical memory in bytes (a generous bound when unknown)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


def check_size(nbytes: int, what: str) -> None:
    """Refuse to allocate ``nbytes`` for ``what`` (a file member, a tensor a header
    declares) when it exceeds this machine's physical memory: the input claims sizes it
    cannot be holding, or this machine cannot load it.

    Raises:
        ParseError: naming ``what``, the claimed size and the memory available.
    """
    from .errors import ParseError

    limit = memory_bytes()
    if nbytes < 0 or nbytes > limit:
        raise ParseError(
            f"{what} claims {nbytes:,} bytes, more than this machine's memory ({limit:,} bytes); "
            "the file is corrupt or too large to load here"
        )
