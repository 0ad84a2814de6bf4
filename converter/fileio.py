"""Atomic file output: a file is either fully written or not there at all."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed onto ``path``
    (``os.replace``, atomic on POSIX), on failure it is removed and ``path`` is untouched."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.exists():  # mkstemp makes it 0600; give it the mode a plain open() would
            os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, target)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


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
        if isinstance(data, str):
            tmp.write_text(data)
        else:
            tmp.write_bytes(data)
