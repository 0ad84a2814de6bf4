"""The generated docs are current: ``docs/coverage.md`` is what ``python docs/generate.py``
writes from the registries and the conformance lists now (regenerate after changing either)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_coverage_page_is_current():
    written = (ROOT / "docs" / "coverage.md").read_text()
    assert written == _generator().coverage_md(), "docs/coverage.md is stale: run `python docs/generate.py`"


def test_onnx_ops_table_is_current():
    """The ops table of docs/onnx.md is the one the generator writes from the ONNX registry."""
    written = (ROOT / "docs" / "onnx.md").read_text()
    stale = "docs/onnx.md's ops table is stale: run `python docs/generate.py`"
    assert written == _generator().onnx_md(written), stale


def test_site_builds_strict(tmp_path):
    """``mkdocs build --strict`` (mkdocs.yml): every page in the nav, no broken link or anchor,
    every API object of docs/reference.md found and its docstring rendered. (Not ``-q``: mkdocs
    then hides the warnings from its strict-mode count and passes.)"""
    missing = [m for m in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers") if not find_spec(m)]
    if missing:
        pytest.skip(f"the docs tools are not installed ({', '.join(missing)}): pip install -e '.[test]'")
    site = tmp_path / "site"
    argv = [
        sys.executable,
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "-f",
        str(ROOT / "mkdocs.yml"),
        "-d",
        str(site),
    ]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    log = done.stdout + done.stderr
    assert done.returncode == 0 and "WARNING" not in log, log
    assert (site / "reference" / "index.html").read_text().count('id="converter.') > 20


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
