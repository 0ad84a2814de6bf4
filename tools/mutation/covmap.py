"""Which tests run each line of the source: the coverage map of one whole default test run.

A mutant changes one statement; a test that never runs that statement behaves exactly as on
the unmutated tree, so only the tests that ran it can kill the mutant. ``run.py``'s fresh and
changed runs take each mutant's tests from this map, which is built from coverage.py's data of
the default test run measured with one *context* per test (as mutmut and cosmic-ray users do
with coverage contexts)::

    # the coverage tools are no project dependency: the `mutation` extra of pyproject.toml
    .venv/bin/pip install coverage pytest-cov
    .mvenv/bin/python tools/mutation/run.py covmap measure    # 12-25 min on 2 cores; then builds

which runs, from the work tree, ``pytest -q -n 2 --dist worksteal --cov --cov-config=<rc>
--cov-context=test --cov-report= --durations=0 -p no:cacheprovider -p covctx`` (``<rc>``:
``source`` the tree's ``converter``, ``frontends`` and ``backends``, ``relative_files = True``,
``patch = subprocess``: the lines a test runs in a subprocess count for that test, see
``covctx.py``) and then
``build``: from the ``.coverage`` file and the run's output (the per-test durations of
``--durations=0``, the tests that failed), a gzipped JSON file in the scratch directory::

    {"format": 1, "key": <hash of the measured tree's sources and tests>, "built": ..., "tree": ...,
     "tests": [nodeid, ...], "cost": [[setup s, call + teardown s], ...], "failed": [i, ...],
     "test_files": {path: sha}, "files": {rel: {"sha": ..., "statements": [line, ...],
       "import": numbits, "sets": [numbits, ...], "by_test": [[test i, set i], ...]}}}

``numbits`` are coverage.py's (a bit per line, base64 here). A line run in a test's setup or
teardown counts for that test, and a line run in a test's setup for every test of its file
(a module-scoped fixture's lines: :func:`_credit_shared_setup`); a line run outside every
test (the empty context: imports, collection) is in ``import``. Each file keeps its content
hash, so a file edited since the measured run is noticed (its mutants fall back to the file
map of ``testmap.py``).

Only the standard library is needed to read the map; ``build`` takes the executable
statements from coverage.py's own parser when coverage is installed (else from the AST).
"""

from __future__ import annotations

import argparse
import ast
import base64
import datetime as dt
import gzip
import hashlib
import json
import re
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path

SOURCE_DIRS = ("converter", "frontends", "backends")
#: seconds of a test the durations log leaves out (pytest hides those under 5 ms)
DEFAULT_DURATION = 0.005
#: a test's setup above this many seconds is taken for a fixture shared by its file's tests
#: (module or session scope): charged once per file, not per test
SHARED_SETUP = 1.0


# --------------------------------------------------------------------------- numbits


def nums_to_numbits(nums) -> bytes:
    """coverage.py's numbits: bit ``n % 8`` of byte ``n // 8`` set for each ``n``."""
    nums = list(nums)
    if not nums:
        return b""
    b = bytearray(max(nums) // 8 + 1)
    for n in nums:
        b[n // 8] |= 1 << (n % 8)
    return bytes(b)


def numbits_to_nums(bits: bytes) -> list[int]:
    return [i * 8 + j for i, byte in enumerate(bits) if byte for j in range(8) if byte & (1 << j)]


def numbits_union(a: bytes, b: bytes) -> bytes:
    if len(a) < len(b):
        a, b = b, a
    return bytes(x | y for x, y in zip(a, b.ljust(len(a), b"\0"), strict=True))


def _b64(bits: bytes) -> str:
    return base64.b64encode(bits).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


# --------------------------------------------------------------------------- the run's log


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S.*?)\s*$")
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - .*)?$")


def parse_log(text: str) -> tuple[dict[str, list[float]], set[str]]:
    """``({nodeid: [setup, call, teardown] seconds}, {nodeids that failed or errored})`` of
    pytest's output with ``--durations=0`` and ``-ra`` (the project's ``addopts``)."""
    durations: dict[str, list[float]] = {}
    failed = set()
    for line in text.splitlines():
        m = _DURATION.match(line)
        if m:
            d = durations.setdefault(m.group(3), [0.0, 0.0, 0.0])
            d[("setup", "call", "teardown").index(m.group(2))] += float(m.group(1))
            continue
        m = _FAILED.match(line)
        if m and "::" in m.group(1):
            failed.add(m.group(1))
    return durations, failed


# --------------------------------------------------------------------------- the tree


def normalize(path: str) -> str | None:
    """A measured file's path relative to the tree (``converter/frontends/x`` is ``frontends/x``:
    the work trees' symlinks), or None outside ``converter/``, ``frontends/``, ``backends/``."""
    for alias in ("converter/frontends/", "converter/backends/"):
        if path.startswith(alias):
            path = path[len("converter/") :]
    return path if path.startswith(tuple(d + "/" for d in SOURCE_DIRS)) and path.endswith(".py") else None


def source_files(tree: Path) -> list[str]:
    out = []
    for d in SOURCE_DIRS:  # rglob does not follow the work trees' converter/frontends symlinks
        out += [str(p.relative_to(tree)) for p in (tree / d).rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(out)


def test_file_names(tree: Path) -> list[str]:
    return sorted(
        str(p.relative_to(tree)) for p in (tree / "tests").rglob("*.py") if "__pycache__" not in p.parts
    )


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def tree_key(tree: Path) -> str:
    """One hash of the tree's source and test files (names and contents)."""
    h = hashlib.sha256()
    for rel in source_files(tree) + test_file_names(tree):
        h.update(rel.encode())
        h.update((tree / rel).read_bytes())
    return h.hexdigest()[:16]


def statements(source: str, rel: str) -> tuple[list[int], callable]:
    """``(executable statement lines, lines -> their statements' first lines)``: coverage.py's
    own parser when installed (its default exclusions: ``pragma: no cover``, ``...`` bodies,
    ``if TYPE_CHECKING:``), else the AST's statements."""
    try:
        from coverage.config import DEFAULT_EXCLUDE
        from coverage.misc import join_regex
        from coverage.parser import PythonParser
    except ImportError:
        PythonParser = None  # noqa: N806
    if PythonParser is not None:
        try:
            p = PythonParser(text=source, filename=rel, exclude=join_regex(DEFAULT_EXCLUDE))
            p.parse_source()
            return sorted(p.statements), lambda lines: p.first_lines(lines)
        except Exception:  # noqa: BLE001 - a file coverage cannot parse: the AST's view
            pass
    starts: dict[int, int] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.stmt):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # a docstring
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            end = node.lineno if hasattr(node, "body") else (node.end_lineno or node.lineno)
            for ln in range(first, end + 1):
                starts.setdefault(ln, first)
    return sorted(set(starts.values())), lambda lines: {starts.get(ln, ln) for ln in lines}


# --------------------------------------------------------------------------- build


def _credit_shared_setup(per_file: dict[str, dict], tests: dict[str, int]) -> None:
    """Credit the lines a test's setup ran to every test of its file. A module- or
    session-scoped fixture runs in the setup of the first test that asks for it, and coverage
    records its lines for that test alone, though every later test using the fixture reads
    what those lines computed; which tests use it is not recorded, so all of the file's
    tests count (more tests for such a mutant, never fewer)."""
    by_file: dict[str, list[int]] = {}
    for nodeid, t in tests.items():
        by_file.setdefault(nodeid.split("::")[0], []).append(t)
    for f in per_file.values():
        for test_file, bits in f.pop("setup").items():
            for t in by_file.get(test_file, []):
                f["tests"][t] = numbits_union(f["tests"].get(t, b""), bits)


def build(data: Path, log: Path | None, tree: Path, out: Path) -> dict:
    """The map of the coverage data ``data`` (a ``.coverage`` file of a run with
    ``--cov-context=test``) and the run's output ``log`` (for the durations), measured on
    ``tree``; written gzipped to ``out``. Returns the map."""
    db = sqlite3.connect(f"file:{data}?mode=ro", uri=True)
    contexts = dict(db.execute("select id, context from context"))
    paths = dict(db.execute("select id, path from file"))
    durations, failed = parse_log(log.read_text(errors="replace")) if log else ({}, set())
    tests: dict[str, int] = {}

    def test_index(nodeid: str) -> int:
        return tests.setdefault(nodeid, len(tests))

    ctx_test: dict[int, int | None] = {}
    setup_file: dict[int, str] = {}  # context of a test's setup -> the test's file
    for cid, ctx in contexts.items():
        nodeid, _, phase = ctx.rpartition("|") if ctx else ("", "", "")
        ctx_test[cid] = test_index(nodeid) if nodeid else None
        if nodeid and phase == "setup":
            setup_file[cid] = nodeid.split("::")[0]
    for nodeid in durations:
        test_index(nodeid)
    per_file: dict[str, dict] = {}
    for fid, cid, bits in db.execute("select file_id, context_id, numbits from line_bits"):
        rel = normalize(paths[fid])
        if rel is None:
            continue
        f = per_file.setdefault(rel, {"import": b"", "tests": {}, "setup": {}})
        t = ctx_test[cid]
        if t is None:
            f["import"] = numbits_union(f["import"], bits)
        else:
            f["tests"][t] = numbits_union(f["tests"].get(t, b""), bits)
        if cid in setup_file:
            f["setup"][setup_file[cid]] = numbits_union(f["setup"].get(setup_file[cid], b""), bits)
    db.close()
    _credit_shared_setup(per_file, tests)
    files = {}
    for rel in source_files(tree):
        src = (tree / rel).read_text(encoding="utf-8")
        stmts, first_lines = statements(src, rel)
        f = per_file.get(rel, {"import": b"", "tests": {}})
        sets: dict[bytes, int] = {}
        by_test = [[t, sets.setdefault(bits, len(sets))] for t, bits in sorted(f["tests"].items())]
        ran = set(numbits_to_nums(f["import"]))
        for bits in sets:
            ran.update(numbits_to_nums(bits))
        missing = sorted(set(stmts) - set(first_lines(ran)))
        files[rel] = {"sha": sha(tree / rel), "statements": stmts, "missing": missing,
                      "import": _b64(f["import"]), "sets": [_b64(b) for b in sets],
                      "by_test": by_test}  # fmt: skip
    names = sorted(tests, key=tests.get)
    cost = []
    for nodeid in names:
        s, c, t = durations.get(nodeid, [0.0, DEFAULT_DURATION, 0.0])
        cost.append([round(s, 3), round(c + t, 3)])
    out_map = {
        "format": 1, "key": tree_key(tree), "tree": str(tree), "data": str(data), "log": str(log),
        "built": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "tests": names, "cost": cost, "failed": sorted(tests[n] for n in failed if n in tests),
        "test_files": {t: sha(tree / t) for t in test_file_names(tree)}, "files": files,
    }  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as fh:
        json.dump(out_map, fh, separators=(",", ":"))
    tmp.replace(out)
    return out_map


# --------------------------------------------------------------------------- where a mutant runs


def mutant_scope(source: str, line: int, span: list[int]) -> tuple[str, list[int]]:
    """When the statement of a mutant on ``line`` (the statement's lines: ``span``,
    :func:`run.statement_lines`) runs: ``("call", span)`` in a function body, when the function
    is called: the tests that ran ``span`` can kill it; ``("def", body lines)`` the header of a
    module- or class-level ``def``/``class`` (decorators, default values, bases), run once at
    import: the tests that run its body; ``("module", [])`` any other module- or class-level
    statement (a constant, a table): the tests that run any line of the file."""
    found: list[tuple[ast.stmt, bool]] = []

    def first(node: ast.AST) -> int:
        return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])

    def walk(node: ast.AST, in_func: bool) -> None:
        for name, value in ast.iter_fields(node):
            for child in value if isinstance(value, list) else [value]:
                if not isinstance(child, ast.AST):
                    continue
                if hasattr(child, "lineno") and not first(child) <= line <= (
                    child.end_lineno or child.lineno
                ):
                    continue
                inside = in_func or (
                    isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and name == "body"
                )
                if isinstance(child, ast.stmt):
                    found.append((child, inside))
                walk(child, inside)

    walk(ast.parse(source), False)
    if not found:
        return "call", span
    stmt, in_func = found[-1]
    if in_func:
        return "call", span
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and line < stmt.body[0].lineno:
        return "def", list(range(stmt.body[0].lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return "module", []


@dataclass
class Selection:
    """The tests a mutant runs: ``tests`` (node ids, in order) out of ``covering`` tests that ran
    its statement (``kind``: how they were found), with ``seconds`` of recorded test time."""

    kind: str  # lines | definition | module | import-only | stale-file | not-covered
    tests: list[str] = field(default_factory=list)
    covering: int = 0
    candidates: int = 0
    seconds: float = 0.0

    @property
    def partial(self) -> bool:
        return len(self.tests) < self.candidates


class CovMap:
    """A built map (:func:`build`), read back."""

    def __init__(self, data: dict, path: Path | None = None) -> None:
        self.data = data
        self.path = path
        self.tests: list[str] = data["tests"]
        self.failed = set(data["failed"])
        self._lines: dict[str, tuple[set[int], list[tuple[int, frozenset]]]] = {}
        self.by_file: dict[str, list[int]] = {}
        for i, nodeid in enumerate(self.tests):
            self.by_file.setdefault(nodeid.split("::")[0], []).append(i)
        self.shared: dict[str, float] = {}  # test file -> its largest setup (a shared fixture)
        for f, ids in self.by_file.items():
            big = max((data["cost"][i][0] for i in ids), default=0.0)
            self.shared[f] = big if big > SHARED_SETUP else 0.0

    @classmethod
    def load(cls, path: Path) -> CovMap:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return cls(json.load(fh), path)

    # ---- what the map says of the tree

    def stale(self, tree: Path) -> tuple[list[str], list[str]]:
        """``(source files, test files)`` of ``tree`` that differ from the measured tree's (new,
        edited, gone)."""
        srcs = [
            rel
            for rel in sorted(set(source_files(tree)) | set(self.data["files"]))
            if rel not in self.data["files"]
            or not (tree / rel).exists()
            or sha(tree / rel) != self.data["files"][rel]["sha"]
        ]
        known = self.data["test_files"]
        tests = [
            t
            for t in sorted(set(test_file_names(tree)) | set(known))
            if t not in known or not (tree / t).exists() or sha(tree / t) != known[t]
        ]
        return srcs, tests

    def _file(self, rel: str) -> tuple[set[int], list[tuple[int, frozenset]]]:
        if rel not in self._lines:
            f = self.data["files"].get(rel)
            if f is None:
                self._lines[rel] = (set(), [])
            else:
                sets = [frozenset(numbits_to_nums(_unb64(s))) for s in f["sets"]]
                self._lines[rel] = (
                    set(numbits_to_nums(_unb64(f["import"]))),
                    [(t, sets[s]) for t, s in f["by_test"] if t not in self.failed],
                )
        return self._lines[rel]

    def covering(self, rel: str, lines) -> list[int]:
        """The tests (indices) that ran any of ``lines`` of ``rel``; all lines: ``None``."""
        _, per_test = self._file(rel)
        if lines is None:
            return [t for t, s in per_test if s]
        want = set(lines)
        return [t for t, s in per_test if not want.isdisjoint(s)]

    def ran_at_import(self, rel: str, lines) -> bool:
        return not self._file(rel)[0].isdisjoint(lines)

    def ran(self, rel: str, lines) -> bool:
        imp, per_test = self._file(rel)
        want = set(lines)
        return not want.isdisjoint(imp) or any(not want.isdisjoint(s) for _, s in per_test)

    def tests_of_files(self, files: list[str]) -> list[int]:
        return [i for f in files for i in self.by_file.get(f, []) if i not in self.failed]

    # ---- cost and order

    def own_cost(self, i: int) -> float:
        setup, rest = self.data["cost"][i]
        return rest + (min(setup, SHARED_SETUP) if setup > SHARED_SETUP else setup)

    def order(self, ids: list[int], file_cost: float) -> list[int]:
        """Cheap and diverse first: the test files by their cheapest test (with the file's own
        cost: collection and a shared fixture), then round robin, the cheapest test of each
        file, then the second cheapest of each, and so on."""
        groups: dict[str, list[int]] = {}
        for i in dict.fromkeys(ids):
            groups.setdefault(self.tests[i].split("::")[0], []).append(i)
        for g in groups.values():
            g.sort(key=lambda i: (self.own_cost(i), self.tests[i]))
        files = sorted(
            groups, key=lambda f: (file_cost + self.shared.get(f, 0.0) + self.own_cost(groups[f][0]), f)
        )
        out = []
        for k in range(max((len(g) for g in groups.values()), default=0)):
            out += [groups[f][k] for f in files if k < len(groups[f])]
        return out

    def take(self, tiers: list[list[int]], budget: float, file_cost: float) -> tuple[list[int], float]:
        """The tests of ``tiers`` (each ordered by :meth:`order`, in turn) that fit in ``budget``
        seconds of recorded time (each test file charged ``file_cost`` and its shared fixture
        once); at least one test."""
        taken, seen, files, spent = [], set(), set(), 0.0
        for tier in tiers:
            for i in self.order(tier, file_cost):
                if i in seen:
                    continue
                f = self.tests[i].split("::")[0]
                cost = self.own_cost(i) + (0.0 if f in files else file_cost + self.shared.get(f, 0.0))
                if taken and spent + cost > budget:
                    continue
                taken.append(i)
                seen.add(i)
                files.add(f)
                spent += cost
        return taken, round(spent, 2)

    def select(
        self, rel: str, source: str, line: int, span: list[int], fallback: list[str], budget: float,
        file_cost: float, stale: bool = False,
    ) -> Selection:  # fmt: skip
        """The tests a mutant of ``rel`` (``source``: its unmutated text) on the statement of lines
        ``span`` runs, at most ``budget`` seconds of them, cheap and diverse first:

        - in a function body, the tests that ran ``span`` (setup included), those of the
          ``fallback`` files (``testmap.py``'s: the family's own test files) first (with a budget
          of cheap tests from every file first, the family's tests that kill a mutant were left
          out of hundreds of covering ones); when the statement also runs at import, then the
          tests of the ``fallback`` files;
        - a module-level ``def``/``class`` header (a decorator, a default value), the tests that
          ran its body; any other module- or class-level statement, the tests that ran a line of
          the file, those of the ``fallback`` files first;
        - a statement that ran only outside any test (import, collection): the ``fallback``
          files' tests; one that never ran: none (``not-covered``: it survives, a test gap);
        - a source file edited since the measured run (``stale``): the ``fallback`` files' tests.
        """
        fb = self.tests_of_files(fallback)
        if stale:
            tiers, kind, covering = [fb], "stale-file", []
        else:
            where, lines = mutant_scope(source, line, span)
            if where == "module":
                covering = self.covering(rel, None)
                in_fb = set(fb)
                tiers = [[t for t in covering if t in in_fb], [t for t in covering if t not in in_fb]]
                kind = "module"
            else:
                covering = self.covering(rel, lines)
                in_fb = set(fb)  # the family's own test files first: the tests written for it
                tiers = [[t for t in covering if t in in_fb], [t for t in covering if t not in in_fb]]
                kind = "lines" if where == "call" else "definition"
                if where == "call" and self.ran_at_import(rel, span):
                    tiers.append(fb)
            if not covering:
                if not self.ran(rel, span):
                    return Selection("not-covered")
                tiers, kind = [fb], "import-only"
        candidates = len({t for tier in tiers for t in tier})
        taken, seconds = self.take(tiers, budget, file_cost)
        return Selection(kind, [self.tests[i] for i in taken], len(covering), candidates, seconds)

    # ---- the test gaps

    def uncovered(self) -> list[dict]:
        """Per source file of the measured tree: its executable statements and those no part of
        the run ran (``lines``: their first lines), most first. A statement run only at import or
        collection counts as run (as in coverage.py's report)."""
        rows = []
        for rel, f in self.data["files"].items():
            rows.append({"file": rel, "statements": len(f["statements"]), "uncovered": len(f["missing"]),
                         "lines": f["missing"]})  # fmt: skip
        rows.sort(key=lambda r: (-r["uncovered"], r["file"]))
        return rows


def ranges(lines: list[int]) -> str:
    out, start, prev = [], None, None
    for ln in lines:
        if start is None:
            start = prev = ln
        elif ln == prev + 1:
            prev = ln
        else:
            out.append(f"{start}-{prev}" if prev > start else str(start))
            start = prev = ln
    if start is not None:
        out.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(out)


def uncovered_text(cm: CovMap, with_lines: bool = True) -> str:
    rows = cm.uncovered()
    total = sum(r["statements"] for r in rows)
    missing = sum(r["uncovered"] for r in rows)
    head = (
        f"# statements of converter/, frontends/, backends/ that no part of the default test run ran\n"
        f"# (coverage map {cm.data['key']}, built {cm.data['built']} from {cm.data['data']});\n"
        f"# {missing} of {total} statements uncovered ({100 * (1 - missing / total):.1f}% covered)\n"
        f"# file  uncovered  statement coverage  [lines]\n"
    )
    body = []
    for r in rows:
        if not r["uncovered"]:
            continue
        pct = 100 * (1 - r["uncovered"] / r["statements"]) if r["statements"] else 100.0
        line = f"{r['file']}  {r['uncovered']}  {pct:.1f}%"
        if with_lines:
            line += f"  {ranges(r['lines'])}"
        body.append(line)
    return head + "\n".join(body) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="the map of a .coverage file and its run's output")
    b.add_argument("--data", required=True, type=Path)
    b.add_argument("--log", type=Path)
    b.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[2])
    b.add_argument("--out", required=True, type=Path)
    u = sub.add_parser("uncovered", help="per source file, the statements no part of the run ran")
    u.add_argument("map", type=Path)
    u.add_argument("--no-lines", action="store_true")
    args = p.parse_args(argv)
    if args.cmd == "build":
        m = build(args.data, args.log, args.tree, args.out)
        print(f"{args.out}: {len(m['tests'])} tests, {len(m['files'])} source files, key {m['key']}")
    else:
        sys.stdout.write(uncovered_text(CovMap.load(args.map), not args.no_lines))


if __name__ == "__main__":
    main()
