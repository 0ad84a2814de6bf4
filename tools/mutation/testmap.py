"""Which test files may kill a mutant of each source file: derived from the tree, not hand-kept.

Every ``*.py`` under ``converter/``, ``frontends/`` and ``backends/`` (found by glob, so files
added or moved are picked up) gets the test files of ``tests/`` (also by glob) linked to it, by
three rules, strongest first:

``name``
    The test file is named after the source file (``test_<stem>.py`` or ``test_<stem>_*.py``)
    and sits in a ``tests/`` directory whose parts are all parts of the source file's directory
    (``frontends/torch/ops/pooling.py`` -> ``tests/frontends/torch/test_pooling.py``;
    ``converter/tools/cli.py`` -> ``tests/tools/test_cli.py``, ``tests/tools/test_cli_errors.py``). A
    ``test_<stem>_<rest>.py`` is not linked when ``<stem>_<rest>.py`` is a source file of its
    own there (``test_linalg_solve.py`` belongs to ``linalg_solve.py``, not ``linalg.py``).
    When no test file of that name sits in such a directory (a test tree reorganized into
    ``tests/core``, ``tests/tools``, ...), any test file of that name is taken, as long as its
    directory does not name another direction (``frontends``/``backends``, ``torch``/``jax``/``onnx``).
    The ``test_survivors.py`` / ``test_rule_gaps.py`` beside a family's test files (tests written
    for earlier surviving mutants of that directory) are linked to every file of it.
``import``
    The test file imports the module itself (``from converter import validate``,
    ``from converter.backends.torch.native import aten_target``,
    ``import converter.backends.torch.distributed``);
    a package's ``__init__`` only when named as such. Of many such files only the
    ``MAX_IMPORTERS`` smallest are kept (a mutant runs them with ``-x``: the first failing test
    ends the run).
``op``
    The test file names ops whose rules the source file registers: a string argument of a
    decorator (``@register("stablehlo.case")``, ``@onnx_op("RNN", 7)``) or an ``aten.<name>``
    one, found as text in the test files of the matching ``tests/`` directory tree (the
    ``MAX_OP`` files naming most of them).
``package``
    None of the above: the ``MAX_PACKAGE`` test files of the most specific ``tests/``
    directory matching the source file's package (``backends/onnx/simplify.py`` ->
    ``tests/backends/onnx/``; a ``converter/`` file: ``tests/`` or a directory naming no
    direction, such as ``tests/core``): one named after a directory of the source file first
    (``tests/frontends/onnx/test_frontend.py``), then those naming its stem most often in their
    text (``symbolic`` in ``tests/frontends/onnx/test_dynamic.py``), then the smallest. A
    file linked only this way has *no test of its own*, and the map says so.

A file with no link at all is *unmapped* (reported; its sampled mutants survive unrun). The ONNX
frontend's op-rule files are also linked to the default-run ONNX node cases using their rules
(found by ``run.py`` when running, not here).

Heavy suites (``HEAVY``: sweeps, real models, docs, large artifacts) are never linked by the
``import`` and ``package`` rules: they are slow, and the default run has faster tests of the same
code.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

SOURCE_DIRS = ("converter", "frontends", "backends")
MAX_IMPORTERS = 3
MAX_PACKAGE = 2
MAX_OP = 2
#: test files never linked by the weak rules (glob patterns on the path under tests/).
HEAVY = (
    "*sweep*",
    "*test_hf_*",
    "*test_models.py",
    "*test_flax_models.py",
    "*test_large_artifacts.py",
    "*test_doc*",
    "*test_lint.py",
    "*test_layering.py",
    "*test_registry_coverage.py",
    "*test_opinfo.py",
    "*test_conformance.py",
    "*test_node_conformance.py",
    "*test_light_models.py",
    "*test_distributed.py",
    "*test_roundtrip.py",
    "*test_fuzz.py",
    "*test_train_*",
    "*test_generate.py",
)
FAMILY_EXTRAS = ("test_survivors.py", "test_rule_gaps.py")
DIRECTION_WORDS = {"frontends", "backends", "torch", "jax", "onnx", "stablehlo"}


@dataclass
class TestMap:
    """``links[src] = [(test file, rule), ...]`` (paths relative to the tree, strongest first)."""

    links: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def tests(self, src: str) -> list[str]:
        return [t for t, _ in self.links.get(src, [])]

    def unmapped(self) -> list[str]:
        return sorted(s for s, links in self.links.items() if not links)

    def package_only(self) -> list[str]:
        return sorted(s for s, ls in self.links.items() if ls and all(r == "package" for _, r in ls))


def source_files(root: Path) -> list[str]:
    out = []
    for d in SOURCE_DIRS:
        out += [str(p.relative_to(root)) for p in (root / d).rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(out)


def test_files(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py") if "__pycache__" not in p.parts
    )


def module_name(rel: str) -> str:
    parts = rel[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _parse(path: Path) -> ast.Module | None:
    """``path``'s syntax tree, or None for a file Python cannot parse."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return None


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``path`` imports by name (anywhere in the file)."""
    tree = _parse(path)
    if tree is None:
        return set()
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in known:
                    out.add(a.name)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if sub in known:
                    out.add(sub)  # from converter import validate: the submodule
                elif node.module in known and "." in node.module:
                    out.add(node.module)  # from converter.tools.validate import x (not a bare package)
    return out


def registered_ops(path: Path) -> set[str]:
    """The op names the decorators of ``path``'s functions name (string arguments, ``aten.x``)."""
    tree = _parse(path)
    if tree is None:
        return set()
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for dec in node.decorator_list:
                if not isinstance(dec, ast.Call):
                    continue
                for arg in ast.walk(dec):
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and len(arg.value) > 1:
                        out.add(arg.value)
                    elif (
                        isinstance(arg, ast.Attribute)
                        and isinstance(arg.value, ast.Name)
                        and arg.value.id == "aten"
                    ):
                        out.add(f"aten.{arg.attr}")
    return out


def _heavy(test: str) -> bool:
    return any(fnmatch.fnmatch(test, pat) for pat in HEAVY)


def _compatible(test_dir: tuple[str, ...], src_dir: tuple[str, ...]) -> bool:
    return set(test_dir) <= set(src_dir)


def _package_named(test: str, src_dir: tuple[str, ...]) -> bool:
    """Whether ``test`` is named after a directory of the source file (``test_frontend.py``
    for ``frontends/onnx/``): the package's own tests."""
    name = Path(test).stem[len("test_") :]
    return any(name in (part, part.rstrip("s")) for part in src_dir)


def package_tests(src_dir: tuple[str, ...], by_dir: dict, size: dict, mentions=lambda t: 0) -> list[str]:
    """The light test files of the most specific ``tests/`` directory for a source directory:
    one whose parts are all the source's (for a frontend or backend, not ``tests/`` itself), else,
    for ``converter/``, any directory naming no direction (``tests/``, ``tests/core``); those
    named after a directory of the source file first (``tests/frontends/onnx/test_frontend.py``),
    then those that ``mentions`` most (the source file's name in their text), then the smallest."""
    direction = src_dir[0] in ("frontends", "backends")
    dirs = sorted(
        (d for d in by_dir if _compatible(d, src_dir) and (d or not direction)), key=lambda d: -len(d)
    )
    if not direction:
        dirs += sorted(d for d in by_dir if not set(d) & DIRECTION_WORDS and d not in dirs)
    for d in dirs:
        light = sorted(
            (t for t in by_dir[d] if not _heavy(t)),
            key=lambda t: (not _package_named(t, src_dir), -mentions(t), size[t], t),
        )
        if light:
            return light
    return []


def build(root: Path) -> TestMap:
    sources = source_files(root)
    tests = test_files(root)
    size = {t: (root / t).stat().st_size for t in tests}
    src_set = set(sources)
    modules = {module_name(s): s for s in sources}
    importers: dict[str, list[str]] = {}
    for t in tests:
        for mod in imported_modules(root / t, set(modules)):
            importers.setdefault(modules[mod], []).append(t)
    by_dir: dict[tuple[str, ...], list[str]] = {}
    for t in tests:
        by_dir.setdefault(tuple(Path(t).parent.parts[1:]), []).append(t)

    texts: dict[str, str] = {}
    tm = TestMap()
    for src in sources:
        p = Path(src)
        src_dir = p.parent.parts
        stem = p.parent.name if p.stem == "__init__" else p.stem
        links: list[tuple[str, str]] = []

        def add(t: str, why: str, links=links) -> None:
            if t not in (x for x, _ in links):
                links.append((t, why))

        def named(t: str, stem=stem, src_dir=src_dir) -> bool:
            name = Path(t).name
            if name == f"test_{stem}.py":
                return True
            if fnmatch.fnmatch(name, f"test_{stem}_*.py"):
                own = name[len("test_") :]
                return str(Path(*src_dir, own)) not in src_set  # linalg_solve.py's, not linalg.py's
            return False

        if p.stem != "__init__":
            near = [t for t in tests if named(t) and _compatible(Path(t).parent.parts[1:], src_dir)]
            if not near:  # a reorganized test tree: the name anywhere, not in another direction's dir
                near = [
                    t
                    for t in tests
                    if named(t) and not (set(Path(t).parent.parts[1:]) & DIRECTION_WORDS - set(src_dir))
                ]
            # the most specific directory first (tests/backends/torch before tests/)
            light = [t for t in near if not _heavy(t)]
            for t in sorted(light or near, key=lambda t: (-len(Path(t).parts), t)):
                add(t, "name")
            if "ops" in src_dir or near:
                home = tuple(x for x in src_dir if x != "ops")
                for extra in FAMILY_EXTRAS:
                    t = str(Path("tests", *home, extra))
                    if t in size and (links or "ops" in src_dir):
                        add(t, "name")
        ops = registered_ops(root / src)
        if ops:
            home = tuple(x for x in src_dir if x != "ops")
            pats = [re.compile(r"(?<![\w.])" + re.escape(o) + r"(?![\w])") for o in ops]
            hits = []
            for t in tests:
                if _heavy(t) or not _compatible(Path(t).parent.parts[1 : len(home) + 1], home):
                    continue
                if tuple(Path(t).parent.parts[1:])[: len(home)] != home:
                    continue
                text = texts.setdefault(t, (root / t).read_text(encoding="utf-8", errors="replace"))
                n = sum(1 for pat in pats if pat.search(text))
                if n:
                    hits.append((-n, size[t], t))
            for _, _, t in sorted(hits)[:MAX_OP]:
                add(t, "op")
        imps = sorted((t for t in importers.get(src, []) if not _heavy(t)), key=lambda t: (size[t], t))
        for t in imps[:MAX_IMPORTERS]:
            add(t, "import")
        if not links:
            word = re.compile(rf"\b{re.escape(stem)}\b")

            def mentions(t: str, word=word) -> int:
                text = texts.setdefault(t, (root / t).read_text(encoding="utf-8", errors="replace"))
                return len(word.findall(text))

            for t in package_tests(src_dir, by_dir, size, mentions)[:MAX_PACKAGE]:
                add(t, "package")
        tm.links[src] = links
    return tm


def main() -> None:
    root = Path(__file__).resolve().parents[2]
    tm = build(root)
    for src, links in tm.links.items():
        print(f"{src}: " + (", ".join(f"{t} ({why})" for t, why in links) or "UNMAPPED"))
    print(
        f"\n{len(tm.links)} source files; package-only: {len(tm.package_only())}; unmapped: {tm.unmapped()}"
    )


if __name__ == "__main__":
    main()
