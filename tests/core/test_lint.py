"""The repository follows its one ruff configuration (``[tool.ruff]`` in pyproject.toml):
lint rules and formatting, over every Python file."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, ROOT], capture_output=True, text=True, cwd=ROOT, check=False
    )


@pytest.mark.parametrize("args", [("check",), ("format", "--check")], ids=["check", "format"])
def test_ruff(args):
    result = _ruff(*args)
    assert result.returncode == 0, result.stdout + result.stderr
