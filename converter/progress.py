"""Stage reports of long conversions on a terminal (``convert``'s progress display).

Code that does a slow step wraps it in :func:`stage`; nothing is shown unless a caller
turned reporting on with :func:`reporting` (the ``convert`` command does, when stderr is a
terminal and ``--quiet`` is not given). A conversion that ends within ``delay`` seconds
shows nothing; a longer one shows the stage in progress with a spinner and each finished
stage with its time, on stderr, through ``rich``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

_reporter: _Reporter | None = None


class _Reporter:
    def __init__(self, console: Any, delay: float):
        self.console = console
        self.lock = threading.Lock()
        self.done: list[str] = []
        self.current = "starting (importing libraries)"
        self.status: Any = None
        self.timer = threading.Timer(delay, self._show)
        self.timer.daemon = True
        self.timer.start()

    def _show(self) -> None:
        with self.lock:
            if self.timer is None:  # already closed
                return
            for line in self.done:
                self.console.print(line, highlight=False)
            self.status = self.console.status(self.current)
            self.status.start()

    def begin(self, text: str) -> None:
        with self.lock:
            self.current = text
            if self.status is not None:
                self.status.update(text)

    def end(self, text: str) -> None:
        with self.lock:
            line = f"  [green]✓[/green] {text}"
            self.done.append(line)
            if self.status is not None:
                self.console.print(line, highlight=False)

    def close(self) -> None:
        with self.lock:
            self.timer.cancel()
            self.timer = None
            if self.status is not None:
                self.status.stop()


@contextlib.contextmanager
def reporting(enabled: bool = True, *, console: Any = None, delay: float = 2.0) -> Iterator[None]:
    """Show the :func:`stage`\\ s run inside the block (when ``enabled``) on ``console``
    (default: a ``rich`` console on stderr; nothing is shown if it is not a terminal), once
    ``delay`` seconds have passed."""
    global _reporter
    if not enabled:
        yield
        return
    if console is None:
        import sys

        from rich.console import Console

        console = Console(file=sys.stderr)  # this stderr, even while library output is held back
    if not console.is_terminal:
        yield
        return
    previous, _reporter = _reporter, _Reporter(console, delay)
    try:
        yield
    finally:
        _reporter.close()
        _reporter = previous


@contextlib.contextmanager
def stage(text: str) -> Iterator[dict[str, str]]:
    """Report ``text`` as the stage in progress for the block, then as done with its time.
    The block may put a result in the yielded dict's ``"detail"`` (``"1.4 GB"``), shown
    after the time."""
    info: dict[str, str] = {}
    if _reporter is None:
        yield info
        return
    start = time.perf_counter()
    _reporter.begin(f"{text}…")
    yield info
    detail = f", {info['detail']}" if info.get("detail") else ""
    _reporter.end(f"{text} ({time.perf_counter() - start:.1f} s{detail})")


def size_text(nbytes: int) -> str:
    """``1.42 GB``, ``350 MB``, ``12 kB``: ``nbytes`` in decimal units."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} B"


__all__ = ["reporting", "size_text", "stage"]
