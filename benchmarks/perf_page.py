"""The performance table of ``docs/performance.md`` and the README, from the benchmarks' results.

    python benchmarks/perf_page.py            # rewrite the table in docs/performance.md and README.md

Every benchmark measures a ratio against an anchor timed in the same run (machines are
noisy; seconds from different runs do not compare). A benchmark run with ``--record`` stores
its ratios in ``benchmarks/results.json`` through :func:`record`; this script renders that
file as one Markdown table (one row per result, with the command that produced it) between
the ``<!-- perf-table -->`` markers of each page. ``tests/core/test_docs.py`` checks the pages hold
the current table.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results.json"
PAGES = [ROOT / "docs" / "performance.md", ROOT / "README.md"]
BEGIN, END = "<!-- perf-table -->", "<!-- /perf-table -->"
FIELDS = ("what", "result", "anchor", "command")


def load() -> dict[str, dict[str, str]]:
    """The recorded results, ``{key: {"what", "result", "anchor", "command"}}``, in table order."""
    return json.loads(RESULTS.read_text())


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file beside it, then a rename)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def command(script: str, argv: list[str] | None = None) -> str:
    """The command line that ran ``script`` with ``argv`` (default ``sys.argv[1:]``), without
    ``--record``: what the table names as the command that produced a result."""
    argv = sys.argv[1:] if argv is None else argv
    rel = Path(script).resolve().relative_to(ROOT)
    return " ".join(["python", str(rel), *(a for a in argv if a != "--record")])


def package_version(name: str) -> str:
    """The installed version of distribution ``name`` (an anchor a row names), or ``absent``."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def record(key: str, *, what: str, result: str, anchor: str, command: str) -> None:
    """Store one benchmark result (replacing the one under ``key``, keeping its place in the
    table; a new key goes last) and re-render the pages' tables.

    ``result`` is the ratio (or range of ratios) as text, ``anchor`` what it is measured
    against in the same run, ``command`` the command line that produced it.
    """
    results = load() if RESULTS.exists() else {}
    results[key] = dict(zip(FIELDS, (what, result, anchor, command), strict=True))
    _write(RESULTS, json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    render()


def table(results: dict[str, dict[str, str]] | None = None) -> str:
    """The Markdown table of ``results`` (default: the recorded ones)."""
    results = load() if results is None else results
    rows = ["| what | result | against (same run) | command |", "|---|---|---|---|"]
    for r in results.values():
        rows.append(f"| {r['what']} | {r['result']} | {r['anchor']} | `{r['command']}` |")
    return "\n".join(rows)


def replace_table(text: str, new: str) -> str:
    """``text`` with the part between the markers replaced by ``new``.

    Raises:
        ValueError: ``text`` does not hold both markers, in order.
    """
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN} ... {END} markers")
    return text[: start + len(BEGIN)] + "\n" + new + "\n" + text[end:]


def render() -> list[Path]:
    """Rewrite the table of every page that holds the markers; returns the pages changed."""
    new, changed = table(), []
    for page in PAGES:
        if not page.exists() or BEGIN not in page.read_text():
            continue
        old = page.read_text()
        text = replace_table(old, new)
        if text != old:
            _write(page, text)
            changed.append(page)
    return changed


def main() -> int:
    for page in render():
        print(f"wrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
