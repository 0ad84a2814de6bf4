"""The layering rule of ``docs/design.md``, checked over every file (built from globs, so a new
file is covered the day it is added):

- core (``converter/*.py``) and passes (``converter/passes/``) never import a frontend, a
  backend or a tool; the only exceptions are the public façades, which reach them lazily
  inside the calling function (``converter/__init__.py``; ``Module.to_*`` in ``module.py``);
- frontends and backends never import each other, nor a tool;
- among tools the arrows go one way (no import cycle, lazy ``importlib`` subcommands included);
- no module imports another module's private (``_name``) definitions;
- private torch internals (``torch._*``) are used only in ``converter/_torch_internal.py``,
  private JAX internals (``jax._src``) only in ``converter/_jax_internal.py``.
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: repository folder -> the dotted package it installs as
PACKAGES = {"converter": "converter", "frontends": "converter.frontends", "backends": "converter.backends"}


def _files(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def _dotted(path: Path) -> str:
    rel = path.relative_to(ROOT)
    parts = list(rel.with_suffix("").parts)
    parts[0] = PACKAGES[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> str:
    for prefix, layer in (
        ("converter.frontends", "frontends"),
        ("converter.backends", "backends"),
        ("converter.tools", "tools"),
        ("converter.passes", "passes"),
    ):
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return "core" if module.split(".")[0] == "converter" else "external"


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


ALL = [p for folder in PACKAGES for p in _files(folder)]
#: ``python -m converter``: the command line's entry point, a tool in the core's folder
ENTRY_POINTS = {"converter/__main__.py"}
CORE = [p for p in ALL if _layer(_dotted(p)) in ("core", "passes") and _rel(p) not in ENTRY_POINTS]
#: core files allowed to reach a frontend, backend or tool, lazily (inside a function)
FACADES = {"converter/__init__.py", "converter/module.py"}
#: core modules that exist to wrap one framework (importing them loads it, by design)
FRAMEWORK_WRAPPERS = {"converter.onnx_skeleton", "converter._torch_internal", "converter.__main__"}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """``path`` parsed (once per process: every check reads the same files)."""
    return ast.parse(path.read_text(), str(path))


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of ``path``'s tree (``ast.walk``), once per process."""
    return tuple(ast.walk(_tree(path)))


@functools.cache
def _imports(path: Path, *, lazy: bool = True) -> list[tuple[str, list[str], int]]:
    """``(module, imported names, line)`` for every import of ``path`` (relative imports
    resolved); with ``lazy=False`` only module-level ones (not inside a function, nor under
    ``if TYPE_CHECKING``)."""
    tree = _tree(path)
    package = _dotted(path) if path.name == "__init__.py" else _dotted(path).rpartition(".")[0]
    found: list[tuple[str, list[str], int]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if lazy:
                    visit(child, False)
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                found.extend((a.name, [], child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - child.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                found.append((base, [a.name for a in child.names], child.lineno))
            visit(child, top)

    visit(tree, True)
    return found


def _targets(module: str, names: list[str]) -> list[str]:
    """The modules an import reaches: ``from pkg import sub`` reaches ``pkg.sub`` too."""
    return [module, *(f"{module}.{n}" for n in names)]


def test_importing_the_core_loads_no_frontend_backend_or_tool():
    core = sorted({_dotted(p) for p in CORE} - FRAMEWORK_WRAPPERS)
    code = "\n".join(
        [
            "import sys",
            *(f"import {m}" for m in core),
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'onnx')"
            " or m.startswith(('converter.frontends', 'converter.backends', 'converter.tools'))))",
        ]
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("path", CORE, ids=_rel)
def test_core_and_passes_never_import_upward(path):
    lazy = _rel(path) not in FACADES  # a façade may import upward inside a function only
    upward = [
        f"line {line}: {t}"
        for module, names, line in _imports(path, lazy=lazy)
        for t in _targets(module, names)[:1]
        if _layer(t) in ("frontends", "backends", "tools")
    ]
    assert not upward, f"{_rel(path)} imports upward: {upward}"


@pytest.mark.parametrize("folder", ["frontends", "backends"])
def test_frontends_and_backends_never_import_each_other_or_tools(folder):
    other = {"frontends": "backends", "backends": "frontends"}[folder]
    bad = [
        f"{_rel(p)}:{line}: {module}"
        for p in _files(folder)
        for module, names, line in _imports(p)
        if _layer(module) in (other, "tools")
    ]
    assert not bad, bad


def _tool_graph() -> dict[str, set[str]]:
    tools = {_dotted(p): p for p in _files("converter/tools")}
    graph: dict[str, set[str]] = {m: set() for m in tools}
    for m, p in tools.items():
        for module, names, _ in _imports(p):
            graph[m].update(t for t in _targets(module, names) if t in tools and t != m)
        # lazy subcommands named by string (``SUBCOMMANDS = {"validate": "converter.tools.validate"}``)
        for node in _nodes(p):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in tools:
                if node.value != m:
                    graph[m].add(node.value)
    return graph


def test_tool_imports_point_one_way():
    graph = _tool_graph()
    state: dict[str, int] = {}
    cycle: list[str] = []

    def dfs(node: str, stack: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle.extend([*stack[stack.index(nxt) :], nxt] if nxt in stack else [node, nxt])
                return True
            if state.get(nxt) is None and dfs(nxt, [*stack, nxt]):
                return True
        state[node] = 2
        return False

    for n in sorted(graph):
        if state.get(n) is None and dfs(n, [n]):
            break
    assert not cycle, "tool import cycle: " + " -> ".join(cycle)


def test_no_module_imports_another_modules_private_names():
    bad = []
    for p in ALL:
        for module, names, line in _imports(p):
            if _layer(module) == "external":
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            # a private *module* of the package (``_jax_internal``, ``_contract``) is its internal API
            private = [n for n in private if not (ROOT / _folder_of(module) / f"{n}.py").exists()]
            if private:
                bad.append(f"{_rel(p)}:{line}: from {module} import {', '.join(private)}")
    assert not bad, "\n".join(bad)


def _folder_of(module: str) -> str:
    parts = module.split(".")
    for folder, dotted in sorted(PACKAGES.items(), key=lambda kv: -len(kv[1])):
        d = dotted.split(".")
        if parts[: len(d)] == d:
            return "/".join([folder, *parts[len(d) :]])
    return module.replace(".", "/")


#: underscore names torch documents for users (``torch._check`` and its kin, the assertions
#: ``torch.export`` asks models to use)
DOCUMENTED = {"torch._check", "torch._check_is_size", "torch._assert", "torch._assert_async"}

PRIVATE_FRAMEWORK = {
    "torch": ("converter/_torch_internal.py",),
    "jax": ("converter/_jax_internal.py",),
}


@pytest.mark.parametrize("framework", sorted(PRIVATE_FRAMEWORK))
def test_private_framework_internals_live_in_one_module(framework):
    allowed = PRIVATE_FRAMEWORK[framework]
    prefix = {"torch": "torch._", "jax": "jax._src"}[framework]
    bad = []
    for p in ALL:
        if _rel(p) in allowed:
            continue
        for module, names, line in _imports(p):
            if module.startswith(prefix) or (module == framework and any(n.startswith("_") for n in names)):
                bad.append(f"{_rel(p)}:{line}: {module} {names}")
        for node in _nodes(p):  # torch._dynamo.x, jax._src.y as attributes
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == framework
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and f"{framework}.{node.attr}".startswith(prefix)
                and f"{framework}.{node.attr}" not in DOCUMENTED
            ):
                bad.append(f"{_rel(p)}:{node.lineno}: {framework}.{node.attr}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", ["backends/jax/ops/placement.py", "backends/torch/ops/placement.py"])
def test_placement_rules_read_the_vocabulary_not_the_pass(path):
    """The backends' placement rules read placement marks from :mod:`converter.placement`;
    only canonicalizing a module (a transformation) goes through the pass."""
    modules = {m for m, _, _ in _imports(ROOT / path)}
    assert "converter.passes.placement" not in modules
    assert "converter.placement" in modules


#: passes a backend may run only through its declared ``PREPARE`` (``converter.passes.prepare``)
_PASS_FUNCTIONS = {
    "ensure_canonical",
    "normalize_placement",
    "strip_placement",
    "without_stop_gradient_markers",
    "narrow_64bit",
    "eliminate_dead_arguments",
}


def test_backends_run_passes_only_through_their_declared_preparation():
    import converter.backends.jax
    import converter.backends.onnx
    import converter.backends.torch

    from converter.passes import Pass

    for backend in (converter.backends.jax, converter.backends.onnx, converter.backends.torch):
        assert backend.PREPARE and all(isinstance(p, Pass) for p in backend.PREPARE), backend.__name__
    calls = []
    for path in _files("backends"):
        for node in _nodes(path):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in _PASS_FUNCTIONS:
                    calls.append(f"{_rel(path)}:{node.lineno} {name}()")
    assert not calls, f"backends call passes outside their PREPARE lists: {calls}"


#: the modules of each frontend that lower a flat function to StableHLO
_FRONTENDS = sorted({"frontends/jax.py", *(_rel(p) for p in _files("frontends") if p.name == "convert.py")})


@pytest.mark.parametrize("path", _FRONTENDS)
def test_frontends_lower_through_the_one_lowering_function(path):
    """``converter.lowering`` is the one "flat function -> StableHLO" path (static or symbolic)."""
    source = (ROOT / path).read_text()
    assert "converter.lowering" in {m for m, _, _ in _imports(ROOT / path)}
    for direct in ("jax.export.export(", ").lower(", "compiler_ir("):
        assert direct not in source, f"{path} lowers by itself ({direct})"
