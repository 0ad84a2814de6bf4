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


def test_site_builds_strict(tmp_path):
    """``mkdocs build --strict``: every page in the nav, no broken link or anchor, every API
    object of the reference page found and its docstring rendered."""
    import os
    import subprocess
    import sys

    missing = [
        m
        for m in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
        if importlib.util.find_spec(m.split(".")[0]) is None
    ]
    if missing:
        import pytest

        pytest.skip(f"the docs tools are not installed ({', '.join(missing)}): pip install -e '.[test]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-q",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "index.html").read_text().count('id="converter.') > 20


def test_performance_tables_are_current():
    """docs/performance.md and the README hold the table ``benchmarks/perf_page.py`` renders
    from ``benchmarks/results.json`` (run it after recording or editing a result)."""
    spec = importlib.util.spec_from_file_location("perf_page", ROOT / "benchmarks" / "perf_page.py")
    perf_page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(perf_page)
    table = perf_page.table()
    assert table.count("\n") >= 10
    for page in perf_page.PAGES:
        text = page.read_text()
        assert perf_page.replace_table(text, table) == text, (
            f"{page.name}: run `python benchmarks/perf_page.py`"
        )
