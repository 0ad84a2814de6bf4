"""The import graph points one way: ``converter``'s core and its passes never import a
frontend or a backend (backends and frontends import ``converter``, not the reverse; the
``Module.to_*``/``from_*`` façades reach them lazily, inside the calling function)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: modules below the frontends and backends: importing them loads neither
CORE = [
    "converter",
    "converter.dims",
    "converter.dtypes",
    "converter.errors",
    "converter.interpreter",
    "converter.lowering",
    "converter.markers",
    "converter.mlir",
    "converter.module",
    "converter.placement",
    "converter.regions",
    "converter.registry",
    "converter.sdy",
    "converter.signature",
    "converter.passes",
    "converter.passes.dead_args",
    "converter.passes.placement",
    "converter.passes.shapes",
]
#: files that must not import a frontend or a backend anywhere, not even inside a function
NEVER_UPWARD = [
    "converter/dims.py",
    "converter/dtypes.py",
    "converter/markers.py",
    "converter/interpreter.py",
    "converter/lowering.py",
    "converter/placement.py",
    "converter/regions.py",
    "converter/sdy.py",
    "converter/signature.py",
    "converter/passes/__init__.py",
    "converter/passes/_ir.py",
    "converter/passes/dead_args.py",
    "converter/passes/placement.py",
    "converter/passes/shapes.py",
]
UPWARD = ("backends", "frontends")


def test_importing_the_core_loads_no_frontend_or_backend():
    code = "\n".join(
        [
            "import sys",
            *(f"import {m}" for m in CORE),
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {UPWARD + ('torch', 'onnx')!r}))",
        ]
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    cmd = [sys.executable, "-c", code]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _imported(path: str) -> set[str]:
    """Every module ``path`` imports, at any depth (function-level imports included)."""
    with open(os.path.join(ROOT, path)) as f:
        tree = ast.parse(f.read(), path)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", NEVER_UPWARD)
def test_core_and_passes_never_import_frontends_or_backends(path):
    upward = sorted(n for n in _imported(path) if n.split(".")[0] in UPWARD)
    assert not upward, f"{path} imports {upward}"


@pytest.mark.parametrize("path", ["backends/jax/ops/placement.py", "backends/torch/ops/placement.py"])
def test_placement_rules_read_the_vocabulary_not_the_pass(path):
    """The backends' placement rules read placement marks from :mod:`converter.placement`;
    only canonicalizing a module (a transformation) goes through the pass."""
    assert "converter.passes.placement" not in _imported(path)
    assert "converter.placement" in _imported(path)


#: passes a backend may run only through its declared ``PREPARE`` (``converter.passes.prepare``)
_PASS_FUNCTIONS = {
    "ensure_canonical",
    "normalize_placement",
    "strip_placement",
    "without_stop_gradient_markers",
    "narrow_64bit",
    "eliminate_dead_arguments",
}


def _py_files(top: str) -> list[str]:
    out = []
    for base, _, files in os.walk(os.path.join(ROOT, top)):
        out += [os.path.relpath(os.path.join(base, f), ROOT) for f in files if f.endswith(".py")]
    return sorted(out)


def test_backends_run_passes_only_through_their_declared_preparation():
    import backends.jax
    import backends.onnx
    import backends.torch
    from converter.passes import Pass

    for backend in (backends.jax, backends.onnx, backends.torch):
        assert backend.PREPARE and all(isinstance(p, Pass) for p in backend.PREPARE), backend.__name__
    calls = []
    for path in _py_files("backends"):
        with open(os.path.join(ROOT, path)) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in _PASS_FUNCTIONS:
                    calls.append(f"{path}:{node.lineno} {name}()")
    assert not calls, f"backends call passes outside their PREPARE lists: {calls}"


_FRONTENDS = ["frontends/jax.py", "frontends/torch/__init__.py", "frontends/onnx/__init__.py"]


@pytest.mark.parametrize("path", _FRONTENDS)
def test_frontends_lower_through_the_one_lowering_function(path):
    """``converter.lowering`` is the one "flat function -> StableHLO" path (static or symbolic)."""
    with open(os.path.join(ROOT, path)) as f:
        source = f.read()
    assert "converter.lowering" in _imported(path)
    for direct in ("jax.export.export(", ").lower(", "compiler_ir("):
        assert direct not in source, f"{path} lowers by itself ({direct})"
