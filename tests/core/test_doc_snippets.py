"""The ``python`` code blocks of README.md and docs/*.md run.

The blocks of one file run in order in one namespace (later blocks use earlier names), in a
temporary directory. A block that cannot run on its own (it needs a file the reader made, or
is an outline) is preceded by the line ``<!-- doc-test: skip (reason) -->``; keep those few.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP = re.compile(r"<!-- doc-test: skip \((.+?)\) -->\n$")
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """``(line, code, skip reason or None)`` for each python block of ``path``."""
    text = path.read_text()
    found = []
    for m in BLOCK.finditer(text):
        before = text[: m.start()]
        prev = before[before.rstrip("\n").rfind("\n") + 1 :] if before else ""
        skip = SKIP.search(prev)
        found.append((before.count("\n") + 1, m.group(1), skip.group(1) if skip else None))
    return found


DOCS = [p for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))] if blocks(p)]


def test_skip_markers_are_few():
    total = sum(len(blocks(p)) for p in DOCS)
    skipped = sum(1 for p in DOCS for b in blocks(p) if b[2])
    assert total >= 10 and skipped <= total // 2, (total, skipped)


@pytest.fixture
def fresh_jax_config():
    """A reader's process: 32-bit JAX (the suite's conftest switches x64 on)."""
    import jax

    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    yield
    jax.config.update("jax_enable_x64", previous)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(doc, tmp_path, monkeypatch, fresh_jax_config):
    monkeypatch.chdir(tmp_path)
    # a real module: torch.compile/torch.cond import the module of the functions they trace
    module = types.ModuleType("__doc_snippet__")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace: dict = module.__dict__
    ran = 0
    for line, code, skip in blocks(doc):
        if skip:
            continue
        try:
            exec(compile(code, f"{doc.name}:{line}", "exec"), namespace)
        except Exception as e:
            where = f"{doc.relative_to(ROOT)}, block at line {line}"
            raise AssertionError(f"{where}: {type(e).__name__}: {e}") from e
        ran += 1
    if ran == 0:
        pytest.skip("every block of this file is marked skip")
