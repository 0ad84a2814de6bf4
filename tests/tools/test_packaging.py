"""Packaging: ``python -m converter``, the one version source, the declared dependencies and
the ``onnx`` extra (a missing onnx/onnxruntime is an error naming it, never a different model)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

import converter
from converter import MissingDependencyError
from converter._version import __version__

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_python_dash_m_converter_version():
    """``python -m converter --version`` runs the CLI (exit 0) and prints the one version."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "converter", "--version"], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"convert {__version__} (torch "), run.stdout


def test_wheel_installs_everything_inside_the_converter_package(tmp_path):
    """The wheel holds one top-level package, ``converter``: the repository's ``frontends/``
    and ``backends/`` folders land as ``converter/frontends`` and ``converter/backends`` (no
    top-level ``frontends``/``backends``, which would shadow other distributions), every
    package folder of the repository is in it, and nothing else is (no tests, no examples).
    Built from a copy of the sources, so the checkout gets no build/ or egg-info."""
    src = tmp_path / "src"
    for name in ("converter", "frontends", "backends"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        "dist",
        str(src),
    ]
    built = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"converter", f"converter-{__version__}.dist-info"}
    for folder, package in (
        ("converter", "converter"),
        ("frontends", "converter/frontends"),
        ("backends", "converter/backends"),
    ):
        for init in (ROOT / folder).rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.relative_to(ROOT / folder).as_posix()
            assert f"{package}/{rel}" in names, f"{folder}/{rel} is not in the wheel"
    assert "converter/frontends/torch/convert.py" in names and "converter/backends/jax/function.py" in names


def test_one_version_source():
    project = _pyproject()
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "converter._version.__version__"}
    assert converter.__version__ == __version__


def test_declared_dependencies():
    """A torch range (not a pin that would replace the user's torch), the onnx extra, no
    dependency the code never imports, a license."""
    project = _pyproject()["project"]
    deps = project["dependencies"]
    assert "torch>=2.13,<2.16" in deps
    assert not any(d.startswith("safetensors") for d in deps)
    assert set(project["optional-dependencies"]["onnx"]) == {"onnx", "onnxruntime"}
    assert project["license"] == "MIT" and (ROOT / "LICENSE").is_file()
    assert "Programming Language :: Python :: 3" in project["classifiers"]
    for path in ("converter", "frontends", "backends"):
        for py in (ROOT / path).rglob("*.py"):
            assert "import safetensors" not in py.read_text(), py


@pytest.fixture(scope="module")
def tiny_module():
    return converter.from_jax(lambda x: (x * 2.0 + 1.0).sum(axis=0), np.ones((3, 4), np.float32))


def _without(monkeypatch, *names):
    """Simulate an environment without these packages: ``import name`` raises ImportError."""
    for name in names:
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, mod)
        monkeypatch.setitem(sys.modules, name, None)


def test_to_onnx_without_onnxruntime_names_the_extra(tiny_module, monkeypatch):
    """Without onnxruntime, the default (folded) ``to_onnx`` refuses, naming the extra, rather
    than emit a model folded less; ``optimize=False`` (no folding) needs only onnx."""
    import onnx  # noqa: F401 - loaded before onnxruntime disappears

    _without(monkeypatch, "onnxruntime")
    with pytest.raises(MissingDependencyError, match=r"onnxruntime.*pip install 'converter\[onnx\]'") as e:
        tiny_module.to_onnx()
    assert isinstance(e.value, ImportError) and e.value.extra == "onnx"
    model = tiny_module.to_onnx(optimize=False)
    assert [o.name for o in model.graph.output]


def test_from_and_to_onnx_without_onnx_name_the_extra(tiny_module, monkeypatch):
    _without(monkeypatch, "onnx", "onnxruntime")
    with pytest.raises(MissingDependencyError, match=r"to_onnx needs onnx.*converter\[onnx\]"):
        tiny_module.to_onnx(optimize=False)
    with pytest.raises(MissingDependencyError, match=r"from_onnx needs onnx.*converter\[onnx\]"):
        converter.from_onnx("model.onnx")


def test_folding_needs_onnxruntime_even_when_called_directly(monkeypatch):
    """The simplifier's evaluation refuses instead of silently folding nothing."""
    import importlib

    simplify = importlib.import_module("converter.backends.onnx.simplify")
    _without(monkeypatch, "onnxruntime")
    with pytest.raises(MissingDependencyError):
        simplify._run_constants(None, [])


def test_cli_from_onnx_without_onnx_names_the_extra(tmp_path, monkeypatch, capsys):
    from converter.tools import cli

    model = tmp_path / "m.onnx"
    model.write_bytes(b"")
    _without(monkeypatch, "onnx", "onnxruntime")
    status = cli.main(["--from", "onnx", "--to", "jax", str(model), "-o", str(tmp_path / "m.jax")])
    assert status == cli.EXIT_BAD_INPUT
    assert "pip install 'converter[onnx]'" in capsys.readouterr().err
    assert not (tmp_path / "m.jax").exists()
