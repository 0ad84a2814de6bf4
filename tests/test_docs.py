"""The generated docs are current: ``docs/coverage.md`` is what ``python docs/generate.py``
writes from the registries and the conformance lists now (regenerate after changing either)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_coverage_page_is_current():
    written = (ROOT / "docs" / "coverage.md").read_text()
    assert written == _generator().coverage_md(), "docs/coverage.md is stale: run `python docs/generate.py`"
