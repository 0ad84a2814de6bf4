"""The mutation driver's sampling and its source file -> test files map (tools/mutation/)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "mutation"


def _load(name: str):
    sys.path.insert(0, str(TOOLS))
    try:
        spec = importlib.util.spec_from_file_location(f"_mutation_{name}", TOOLS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses look their module up
        spec.loader.exec_module(mod)
        return mod
    finally:  # run.py puts its directory first too: leave sys.path as it was
        while str(TOOLS) in sys.path:
            sys.path.remove(str(TOOLS))


testmap = _load("testmap")
run = _load("run")


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    _write(
        root,
        {
            "converter/__init__.py": "",
            "converter/cli.py": "def main(): pass\n",
            "converter/lonely.py": "X = 1\n",
            "converter/passes/shapes.py": "",
            "frontends/torch/ops/pooling.py": "@register(aten.max_pool2d.default)\ndef f(): pass\n",
            "frontends/torch/ops/linalg.py": "",
            "frontends/torch/ops/linalg_solve.py": "",
            "frontends/torch/helper.py": "",
            "backends/onnx/ops/control_flow.py": '@register("stablehlo.case")\ndef f(): pass\n',
            "backends/jax/ops/pooling.py": "",
            "tests/test_cli.py": "",
            "tests/tools/test_cli_errors.py": "from converter import cli\n",
            "tests/passes/test_shapes.py": "",
            "tests/frontends/torch/test_pooling.py": "",
            "tests/frontends/torch/test_linalg.py": "",
            "tests/frontends/torch/test_linalg_solve.py": "",
            "tests/frontends/torch/test_survivors.py": "",
            "tests/frontends/torch/test_frontend.py": "# the package's own tests\n" * 50,
            "tests/backends/onnx/test_model.py": "x = 'stablehlo.case'\n",
            "tests/backends/onnx/test_elementwise.py": "",
            "tests/core/test_other_sweep.py": "",
        },
    )
    return root


@pytest.fixture(scope="module")
def tmap(tree):
    return testmap.build(tree)


def test_every_source_file_is_in_the_map(tree, tmap):
    assert set(tmap.links) == set(testmap.source_files(tree))
    assert len(tmap.links) == 10


def test_a_rule_file_maps_to_its_family_test_file_not_another_directions(tmap):
    links = dict(tmap.links["frontends/torch/ops/pooling.py"])
    assert links["tests/frontends/torch/test_pooling.py"] == "name"
    assert links["tests/frontends/torch/test_survivors.py"] == "name"
    assert tmap.tests("backends/jax/ops/pooling.py") == []  # not tests/frontends/torch/test_pooling.py


def test_a_longer_source_name_owns_its_test_file(tmap):
    assert tmap.tests("frontends/torch/ops/linalg.py")[0] == "tests/frontends/torch/test_linalg.py"
    assert "tests/frontends/torch/test_linalg_solve.py" not in tmap.tests("frontends/torch/ops/linalg.py")
    own = tmap.tests("frontends/torch/ops/linalg_solve.py")
    assert own[0] == "tests/frontends/torch/test_linalg_solve.py"


def test_name_prefix_import_and_moved_test_files(tmap):
    # test_cli_errors.py moved to tests/tools/ still belongs to converter/cli.py (by name and import)
    assert tmap.tests("converter/cli.py") == ["tests/test_cli.py", "tests/tools/test_cli_errors.py"]
    assert tmap.tests("converter/passes/shapes.py") == ["tests/passes/test_shapes.py"]


def test_an_op_rule_maps_to_the_tests_naming_its_op(tmap):
    assert ("tests/backends/onnx/test_model.py", "op") in tmap.links["backends/onnx/ops/control_flow.py"]


def test_files_without_tests_of_their_own_are_reported(tmap):
    # no test of its own: the light test files of its package's tests/ directory, never a heavy
    # suite (tests/core/test_other_sweep.py) nor another direction's; none there: unmapped
    assert tmap.links["converter/lonely.py"] == [("tests/test_cli.py", "package")]
    # the package's own test file first (named after a directory of it), however large
    assert tmap.links["frontends/torch/helper.py"][0] == ("tests/frontends/torch/test_frontend.py", "package")
    assert {"converter/lonely.py", "frontends/torch/helper.py"} <= set(tmap.package_only())
    assert tmap.unmapped() == ["backends/jax/ops/pooling.py"]
    assert "frontends/torch/ops/pooling.py" not in tmap.unmapped() + tmap.package_only()


def test_fresh_sample_is_uniform_over_mutants_and_seeded():
    mutants = {f: [run.Mutant(f, "op", i, i) for i in range(n)] for f, n in (("a.py", 900), ("b.py", 100))}
    one = run.fresh_sample(mutants, 300, seed=5)
    assert one == run.fresh_sample(mutants, 300, seed=5)
    assert one != run.fresh_sample(mutants, 300, seed=6)
    assert len(set(one)) == 300
    by_file = Counter(m.file for m in one)
    assert 240 <= by_file["a.py"] <= 300 and by_file["b.py"] >= 10  # ~270 / ~30: weighed by size
    assert len(run.fresh_sample(mutants, 5000, seed=1)) == 1000


def test_changed_mode_samples_the_files_the_branch_changed(tree):
    def git(*args):
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=tree, check=True,
                       capture_output=True)  # fmt: skip

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "base")
    # a base branch that moved on since (another change) does not count
    git("checkout", "-qb", "other")
    (tree / "converter/lonely.py").write_text("X = 2\n")
    git("commit", "-qam", "elsewhere")
    git("checkout", "-q", "-")
    (tree / "converter/cli.py").write_text("def main(): return 1\n")
    (tree / "tests/test_cli.py").write_text("# a test edit is no source file\n")
    (tree / "frontends/torch/new.py").write_text("")
    git("add", "frontends/torch/new.py")
    assert run.changed_files("HEAD", tree) == ["converter/cli.py", "frontends/torch/new.py"]
    assert run.changed_files("other", tree) == ["converter/cli.py", "frontends/torch/new.py"]


def test_survivor_classes_file_is_valid():
    """``survivors.toml`` parses (one entry per mutant id: a fresh sample may draw a mutant
    classified before) and every entry has a class and a note."""
    import tomllib

    with open(TOOLS / "survivors.toml", "rb") as f:
        entries = tomllib.load(f)["survivor"]
    assert entries
    for mutant, entry in entries.items():
        assert mutant.count(":") >= 2 and entry.get("class") and entry.get("note"), mutant


# --------------------------------------------------------------------------- the coverage map

covmap = run.covmap

CALC = '''"""A module."""
SCALE = 2


def double(x, k=SCALE):
    y = x * k
    return y


def unused(x):
    return -x


def _table():
    return {"a": 1}


TABLE = _table()
'''

LOG = """bringing up nodes...
============================== slowest durations ===============================
3.00s setup    tests/test_calc.py::test_slow
1.50s call     tests/test_calc.py::test_slow
0.20s call     tests/other/test_use.py::test_far[a b]
0.01s call     tests/test_calc.py::test_fast
0.01s teardown tests/test_calc.py::test_fast
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_broken - assert 0
1 failed, 3 passed in 9.00s
"""


def _coverage_db(path: Path, contexts: dict[str, dict[str, list[int]]]) -> None:
    """A ``.coverage`` file as coverage.py writes it with ``--cov-context=test`` (the tables the
    map reads): ``contexts[context][measured path] = lines``."""
    import sqlite3

    db = sqlite3.connect(path)
    db.executescript(
        "create table file (id integer primary key, path text, unique (path));"
        "create table context (id integer primary key, context text, unique (context));"
        "create table line_bits (file_id integer, context_id integer, numbits blob,"
        " unique (file_id, context_id));"
    )
    files: dict[str, int] = {}
    for cid, (ctx, by_file) in enumerate(contexts.items(), 1):
        db.execute("insert into context values (?, ?)", (cid, ctx))
        for f, lines in by_file.items():
            fid = files.setdefault(f, len(files) + 1)
            db.execute("insert or ignore into file values (?, ?)", (fid, f))
            db.execute("insert into line_bits values (?, ?, ?)", (fid, cid, covmap.nums_to_numbits(lines)))
    db.commit()
    db.close()


@pytest.fixture
def cov(tmp_path):
    """A tree, its coverage data (import lines, a test whose line runs in its setup, a failed test,
    a frontend measured through the work tree's ``converter/frontends`` link) and its map."""
    _write(tmp_path, {"converter/calc.py": CALC, "frontends/b.py": "X = 1\n", "tests/test_calc.py": "",
                      "tests/other/test_use.py": ""})  # fmt: skip
    _coverage_db(
        tmp_path / ".coverage",
        {
            "": {"converter/calc.py": [1, 2, 5, 10, 14, 15, 18], "converter/frontends/b.py": [1]},
            "tests/test_calc.py::test_fast|run": {"converter/calc.py": [6, 7]},
            "tests/test_calc.py::test_slow|setup": {"converter/calc.py": [6]},
            "tests/test_calc.py::test_slow|run": {"converter/calc.py": [7]},
            "tests/other/test_use.py::test_far[a b]|run": {"converter/calc.py": [6, 7]},
            "tests/test_calc.py::test_broken|run": {"converter/calc.py": [6, 7]},
        },
    )
    (tmp_path / "pytest.log").write_text(LOG)
    out = tmp_path / "scratch" / "covmap.json.gz"
    covmap.build(tmp_path / ".coverage", tmp_path / "pytest.log", tmp_path, out)
    return tmp_path, covmap.CovMap.load(out)


def _select(cm, line: int, budget: float = 100.0) -> covmap.Selection:
    span = run.statement_lines(CALC, line)
    return cm.select("converter/calc.py", CALC, line, span, ["tests/test_calc.py"], budget, 1.0)


def test_coverage_map_selects_the_tests_that_ran_the_line_cheap_and_diverse_first(cov):
    _, cm = cov
    assert set(cm.data["files"]) == {"converter/calc.py", "frontends/b.py"}
    # line 6 ran in test_slow's setup (it counts), test_fast, test_far and test_broken (failed: left out)
    sel = _select(cm, 6)
    assert sel.kind == "lines" and sel.covering == 3 and not sel.partial
    # the family's test file (the file map's, test_calc.py) first, its cheapest test first (its 3 s
    # setup is a shared fixture, charged once), then the other files by their cheapest test
    assert sel.tests == ["tests/test_calc.py::test_fast", "tests/test_calc.py::test_slow",
                         "tests/other/test_use.py::test_far[a b]"]  # fmt: skip
    assert sel.seconds == pytest.approx((1 + 0.2) + (1 + 3 + 0.02) + (1.5 + 1.0))
    # a budget takes what fits in that order (at least one test): the run is marked partial
    small = _select(cm, 6, budget=5.0)
    assert small.tests == ["tests/test_calc.py::test_fast"] and small.partial


def test_coverage_map_credits_a_setup_line_to_every_test_of_the_file(tmp_path):
    """A module-scoped fixture runs in its first user's setup; the file's other tests read what
    it computed, so its lines count for each of them (not for another file's tests)."""
    _write(tmp_path, {"converter/calc.py": CALC, "tests/test_calc.py": "", "tests/test_use.py": ""})
    _coverage_db(
        tmp_path / ".coverage",
        {
            "tests/test_calc.py::test_first|setup": {"converter/calc.py": [6]},
            "tests/test_calc.py::test_first|run": {"converter/calc.py": [7]},
            "tests/test_calc.py::test_second|run": {"converter/calc.py": [7]},
            "tests/test_use.py::test_other|run": {"converter/calc.py": [7]},
        },
    )
    out = tmp_path / "covmap.json.gz"
    covmap.build(tmp_path / ".coverage", None, tmp_path, out)
    sel = _select(covmap.CovMap.load(out), 6)
    assert sel.covering == 2
    assert sorted(sel.tests) == ["tests/test_calc.py::test_first", "tests/test_calc.py::test_second"]
    # a test that runs no source line itself (it only reads the fixture's result) has no coverage
    # context: it is known from the durations log, which the map's run prints for every test
    (tmp_path / "pytest.log").write_text("0.00s call     tests/test_calc.py::test_reads_the_fixture\n")
    covmap.build(tmp_path / ".coverage", tmp_path / "pytest.log", tmp_path, out)
    assert "tests/test_calc.py::test_reads_the_fixture" in _select(covmap.CovMap.load(out), 6).tests
    assert "--durations-min=0" in run.COVERAGE_ARGS


def test_coverage_map_import_time_and_uncovered_statements(cov):
    _, cm = cov
    assert _select(cm, 11).kind == "not-covered" and _select(cm, 11).tests == []  # never ran: a gap
    # a function body run only at import: the file map's tests (not the failed one)
    imp = _select(cm, 15)
    assert imp.kind == "import-only" and imp.covering == 0
    assert sorted(imp.tests) == ["tests/test_calc.py::test_fast", "tests/test_calc.py::test_slow"]
    # a module constant: the tests that run the file, the file map's first; a def header (its
    # default value): the tests that run its body
    const = _select(cm, 2)
    assert const.kind == "module" and const.tests[-1] == "tests/other/test_use.py::test_far[a b]"
    assert _select(cm, 5).kind == "definition" and _select(cm, 5).covering == 3
    rows = {r["file"]: r for r in cm.uncovered()}
    assert rows["converter/calc.py"]["lines"] == [11] and rows["frontends/b.py"]["uncovered"] == 0
    text = covmap.uncovered_text(cm)
    assert "converter/calc.py  1  " in text and "frontends/b.py" not in text.split("\n", 4)[-1]


def test_coverage_map_notices_an_edited_tree(cov):
    tree, cm = cov
    assert cm.stale(tree) == ([], [])
    (tree / "converter/calc.py").write_text(CALC + "\nY = 3\n")
    (tree / "tests/test_new.py").write_text("")
    assert cm.stale(tree) == (["converter/calc.py"], ["tests/test_new.py"])
    # an edited source file's mutants take the file map's tests
    sel = run.covmap.CovMap.select(
        cm, "converter/calc.py", CALC, 6, [6], ["tests/test_calc.py"], 100, 1, True
    )
    assert sel.kind == "stale-file" and len(sel.tests) == 2


def test_scratch_tree_imports_its_own_frontends_and_backends(tree):
    # without the links, converter.frontends would come from the tree the package was installed from
    run.link_packages(tree)
    assert (tree / "converter/frontends").resolve() == (tree / "frontends").resolve()
    assert not any(f.startswith("converter/frontends") for f in testmap.source_files(tree))
    assert not any(f.startswith("converter/frontends") for f in covmap.source_files(tree))


def test_fresh_report_counts_not_covered_timeouts_and_partial_runs():
    head = {"kind": "run", "mode": "fresh", "seed": 7, "sample": 5, "files": ["a.py", "b.py"],
            "mutants_per_file": {"a.py": 10, "b.py": 5}, "at": "t",
            "selection": {"key": "k", "tests": 9, "built": "b", "budget": 120,
                          "stale_sources": []}}  # fmt: skip

    def mutant(i, status, outcome, **kw):
        return {"kind": "mutant", "id": f"a.py:op:{i}", "file": "a.py", "line": i, "diff": ["-x", "+y"],
                "status": status, "outcome": outcome, "mode": "covmap", **kw}  # fmt: skip

    recs = [head, mutant(1, "killed", "failed(1)"), mutant(2, "killed", "cpu-limit"),
            mutant(3, "survived", "not-covered", tests=0, candidates=0),
            mutant(4, "survived", "passed", tests=3, candidates=40, selection="lines"),
            mutant(5, "undecided", "wall-timeout")]  # fmt: skip
    rep = run.fresh_report(recs, {"a.py:op:4": {"class": "equivalent", "note": "n"}})
    a = rep["after"]["all"]
    assert (a["killed"], a["timeouts"], a["survived"], a["not_covered"], a["partial"], a["undecided"]) == (
        2, 1, 2, 1, 1, 1)  # fmt: skip
    assert a["score"] == 0.5 and a["score_without_equivalent"] == pytest.approx(2 / 3, abs=1e-3)
    assert rep["not_covered"] == {"a.py": [3]}
    text = "\n".join(run.fresh_markdown(rep))
    assert "seed **7**" in text and "3/40 (lines) partial" in text and "`a.py` 3" in text
    # a survivor of the budget's tests that then ran the rest of them (the second budget)
    whole = mutant(6, "survived", "passed", tests=3, second_tests=37, candidates=40, selection="lines")
    assert not run._partial(whole) and run._tests_run(whole) == "40/40 (lines)"


def test_failing_test_ids_keep_parameters_with_spaces_and_dashes():
    """A kill is verified by running its failing test again unmutated: the id must come out
    whole, parameters with spaces (``[... on a symbolic dimension]``) and `` - `` included."""
    tail = (
        "FAILED tests/a.py::t[attrs0-None-mode=tf on a symbolic dimension]\n"
        "FAILED tests/b.py::u - AssertionError: x\n"
        "FAILED tests/c.py::v[p-q] - E: [1]\n"
        "FAILED tests/d.py::w\n"
    )
    assert run.failing_tests(tail) == [
        "tests/a.py::t[attrs0-None-mode=tf on a symbolic dimension]",
        "tests/b.py::u",
        "tests/c.py::v[p-q]",
        "tests/d.py::w",
    ]


def test_a_test_module_the_mutant_breaks_at_import_is_a_kill_and_a_gone_id_is_not(tmp_path):
    """pytest given node ids exits 4 both when a test module fails to import (the mutant raised
    at import: a kill, verified by collecting unmutated) and when an id is not collected (a
    parametrization the mutant changed: no verdict from that id)."""
    broken = tmp_path / "broken.log"
    broken.write_text(
        "E   ValueError: ai.onnx::LeakyRelu has no schema version 5 (has (1, 6, 16))\n"
        "ERROR tests/frontends/onnx/test_node_conformance.py - ValueError: ai.onnx::Le...\n"
        "1 error in 0.75s\n"
        "ERROR: found no collectors for /tmp/t/tests/frontends/onnx/test_node_conformance.py::test_node\n"
    )
    assert run.classify(4, broken, "frontends/onnx/ops/elementwise.py") == ("killed", "collection-error")
    assert run.collection_errors(broken.read_text()) == ["tests/frontends/onnx/test_node_conformance.py"]
    gone = tmp_path / "gone.log"
    gone.write_text(
        "no tests ran in 1.12s\n"
        "ERROR: not found: /tmp/t/tree/tests/frontends/onnx/test_node_conformance.py::test_node\n"
        "(no match in any of [<Module test_node_conformance.py>])\n"
    )
    assert run.classify(4, gone, "frontends/onnx/ops/shape.py")[0] == "error"
    assert run.collection_errors(gone.read_text()) == []


def test_a_check_stops_a_looping_test_by_its_cpu_time():
    """``run.py check``'s commands run under a CPU-time limit as well as the wall-time one: a
    mutant that loops forever is stopped by SIGXCPU once it has used the budget, even where
    nothing waits on the wall clock."""
    import signal

    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=run._cpu_limit(1))
    try:
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGXCPU


def test_annotations_of_a_future_annotations_module_are_not_mutants():
    """Under ``from __future__ import annotations`` an annotation stays a string nothing runs:
    the sample leaves out mutants inside one (parameter, return, variable annotations), never
    the code beside them (a default value, an assigned value), and keeps every annotation of a
    module without the import (evaluated at definition time)."""
    body = (
        "def f(x: int | None = 1 | 2, *, y: 'é' | None = None) -> int | None:\n"
        "    z: int | None = x | 4\n"
        "    return z\n"
    )
    spans = run.annotation_spans("from __future__ import annotations\n" + body)
    inside = [(2, 13), (2, 39), (2, 61), (3, 11)]  # the `|` of each annotation (columns in characters)
    outside = [(2, 24), (3, 22)]  # `1 | 2` (a default), `x | 4` (the value)
    assert all(run.in_spans(p, spans) for p in inside)
    assert not any(run.in_spans(p, spans) for p in outside)
    assert run.annotation_spans(body) == []


def test_a_subprocess_of_a_test_records_under_that_tests_context(monkeypatch):
    """covctx.py: during each phase of a test, the configuration coverage.py hands to child
    processes names that phase's context, and the parent's configuration comes back after it."""
    import base64
    import json
    import os

    covctx = _load("covctx")
    start = base64.b64encode(json.dumps({"context": None, "data_file": "/x/.coverage"}).encode()).decode()
    monkeypatch.setenv(covctx.VAR, start)

    class Item:
        nodeid = "tests/a.py::test_b[1]"

    seen = []
    for hook in (covctx.pytest_runtest_setup, covctx.pytest_runtest_call, covctx.pytest_runtest_teardown):
        gen = hook(Item())
        next(gen)
        config = json.loads(base64.b64decode(os.environ[covctx.VAR]))
        seen.append((config["context"], config["data_file"]))
        with pytest.raises(StopIteration):
            next(gen)
        assert os.environ[covctx.VAR] == start
    assert seen == [(f"tests/a.py::test_b[1]|{p}", "/x/.coverage") for p in ("setup", "run", "teardown")]
    monkeypatch.delenv(covctx.VAR)
    gen = covctx.pytest_runtest_call(Item())
    next(gen)  # no coverage of subprocesses: nothing set
    assert covctx.VAR not in os.environ
