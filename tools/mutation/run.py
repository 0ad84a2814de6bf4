"""Mutation testing of the package, with cosmic-ray's mutation operators.

Each sampled mutant (one cosmic-ray operator applied at one place of one source file) is written
into a scratch copy of the work tree this script is in and tested, one mutant at a time. A
mutant is *killed* when a selected test fails (a test failure, an import or collection error, a
crash, or the CPU budget run out: a timeout, as cosmic-ray and mutmut count it; the report
counts those apart) and *survives* when all pass or no test runs its line. The runs are forks of
``forkserver.py`` (the heavy libraries imported once) at ``nice -n 19`` with ``pytest -x``, a
CPU-time budget and a wall budget.

``run`` (fresh, the default) draws a new seed and samples mutants uniformly from every file under
``converter/``, ``frontends/``, ``backends/``; ``run --changed BASE`` from the files a branch
changed. Each mutant runs the tests that ran its statement in the whole default test run, read
from a coverage map (``covmap.py``: coverage.py with a context per test; ``run.py covmap
measure`` makes it), the cheapest test of each test file in turn, up to ``covmap_budget``
seconds of their recorded time; a statement run only at import takes the tests of the test files
``testmap.py`` maps to the file, and one no part of the run ran survives as *not covered* (no
run). Results go to ``<scratch>/runs/<mode>-<seed>.jsonl``. ``run --file-map`` selects by
``testmap.py``'s file map and ``linecov.py``'s line records instead, as ``run --fixed`` does.

``run --fixed`` is the fixed sample of the rule files: seeded per file and stratified by rule
file (in proportion to each file's mutant count, at least one per file), taken in an interleaved
order, so a run cut short (``--until``, ``--limit``) is still a stratified sample; each mutant
runs the tests of its rule family (FAMILY_TESTS below) that ran the mutated statement in an
unmutated run of those files (recorded once per file by ``linecov.py``; a statement run at import
takes the whole files; a file few mutants need is run whole instead of recorded); results in
``<scratch>/results.jsonl``. A rerun skips the mutants already run with the same mutation
(``--rerun-survivors`` tests the survivors again, e.g. after tests were added).

Usage (the driver needs cosmic-ray, in its own venv; the tests run in the project's, which needs
coverage and pytest-cov for the coverage map: the ``mutation`` extra)::

    python -m venv .mvenv && .mvenv/bin/pip install cosmic-ray coverage
    .venv/bin/pip install coverage pytest-cov
    .mvenv/bin/python tools/mutation/run.py covmap measure      # the coverage map (~25 min, 2 cores)
    .mvenv/bin/python tools/mutation/run.py uncovered --no-lines  # statements no test runs, per file
    .mvenv/bin/python tools/mutation/run.py run --until 21:15   # a fresh sample, until 21:15 UTC
    .mvenv/bin/python tools/mutation/run.py run --seed S --rerun-survivors
    .mvenv/bin/python tools/mutation/run.py report --run <scratch>/runs/fresh-S.jsonl
    .mvenv/bin/python tools/mutation/run.py list                # mutants per rule file (fixed)
    .mvenv/bin/python tools/mutation/run.py show <mutant id>    # its diff
    .mvenv/bin/python tools/mutation/run.py check <mutant id> [tests]  # one mutant, fresh tree

Settings: ``tools/mutation/config.toml``.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime as dt
import difflib
import hashlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import covmap  # noqa: E402 - beside this script
import testmap  # noqa: E402

# --------------------------------------------------------------------------- the family table

NODE = "tests/frontends/onnx/test_node_conformance.py"
FT = "tests/frontends/torch/"
FO = "tests/frontends/onnx/"
BJ = "tests/backends/jax/"
BT = "tests/backends/torch/"
BO = "tests/backends/onnx/"

#: rule file -> the test files of its family. ``NODE`` stands for the default-run cases of ONNX's
#: node tests (test_node_conformance.py) whose nodes use a rule of that file (found by
#: :func:`node_case_ids`); each entry is run as its own pytest command.
FAMILY_TESTS: dict[str, list[str]] = {
    # torch -> StableHLO (ATen rules)
    "frontends/torch/ops/_util.py": [FT + "test_elementwise.py", FT + "test_reductions.py"],
    "frontends/torch/ops/control_flow.py": [FT + "test_control_flow.py"],
    "frontends/torch/ops/convolution.py": [FT + "test_convolution.py"],
    "frontends/torch/ops/creation.py": [FT + "test_creation.py", FT + "test_symbolic.py"],
    "frontends/torch/ops/elementwise.py": [FT + "test_elementwise.py"],
    "frontends/torch/ops/fft.py": [FT + "test_fft.py"],
    "frontends/torch/ops/fused.py": [FT + "test_fused.py"],
    "frontends/torch/ops/indexing.py": [FT + "test_indexing.py"],
    "frontends/torch/ops/linalg.py": [FT + "test_linalg.py"],
    "frontends/torch/ops/linalg_decomp.py": [FT + "test_linalg_decomp.py"],
    "frontends/torch/ops/linalg_expm.py": [FT + "test_linalg_solve.py"],
    "frontends/torch/ops/linalg_ldl.py": [FT + "test_linalg_ldl.py"],
    "frontends/torch/ops/linalg_solve.py": [FT + "test_linalg_solve.py"],
    "frontends/torch/ops/normalization.py": [FT + "test_normalization.py"],
    "frontends/torch/ops/pooling.py": [FT + "test_pooling.py"],
    "frontends/torch/ops/random.py": [FT + "test_random.py"],
    "frontends/torch/ops/reductions.py": [FT + "test_reductions.py"],
    "frontends/torch/ops/sampling.py": [FT + "test_sampling.py"],
    "frontends/torch/ops/shape.py": [FT + "test_shape.py"],
    "frontends/torch/ops/special.py": [FT + "test_special.py"],
    "frontends/torch/ops/symbolic.py": [
        FT + "test_symbolic.py",
        FT + "test_dynamic.py",
        FT + "test_data_dependent.py",
    ],
    # ONNX -> StableHLO (ONNX op rules)
    "frontends/onnx/ops/control_flow.py": [FO + "test_control_flow.py", NODE],
    "frontends/onnx/ops/elementwise.py": [FO + "test_elementwise.py", NODE],
    "frontends/onnx/ops/indexing.py": [FO + "test_indexing.py", NODE],
    "frontends/onnx/ops/linalg.py": [NODE],
    "frontends/onnx/ops/ml.py": [FO + "test_ml.py", NODE],
    "frontends/onnx/ops/nn.py": [FO + "test_nn.py", NODE],
    "frontends/onnx/ops/quantize.py": [FO + "test_quantize.py", NODE],
    "frontends/onnx/ops/reductions.py": [FO + "test_reductions.py", NODE],
    "frontends/onnx/ops/resize.py": [FO + "test_resize.py", NODE],
    "frontends/onnx/ops/rnn.py": [FO + "test_rnn.py", NODE],
    "frontends/onnx/ops/sampling.py": [FO + "test_sampling.py", NODE],
    "frontends/onnx/ops/sequence.py": [FO + "test_sequence.py", NODE],
    "frontends/onnx/ops/shape.py": [FO + "test_shape.py", NODE],
    "frontends/onnx/ops/signal.py": [FO + "test_signal.py", NODE],
    "frontends/onnx/ops/training.py": [FO + "test_training.py", NODE],
    # StableHLO -> JAX
    "backends/jax/ops/control_flow.py": [BJ + "test_control_flow.py", BJ + "test_counted_loops.py"],
    "backends/jax/ops/elementwise.py": [BJ + "test_elementwise.py"],
    "backends/jax/ops/fft.py": [BJ + "test_fft.py"],
    "backends/jax/ops/indexing.py": [BJ + "test_indexing.py"],
    "backends/jax/ops/lapack.py": [BJ + "test_lapack.py"],
    "backends/jax/ops/linalg.py": [BJ + "test_linalg.py"],
    "backends/jax/ops/placement.py": [BJ + "test_placement.py"],
    "backends/jax/ops/random.py": [BJ + "test_random.py"],
    "backends/jax/ops/reductions.py": [BJ + "test_reductions.py"],
    "backends/jax/ops/shape.py": [BJ + "test_shape.py"],
    # StableHLO -> torch
    "backends/torch/ops/chlo.py": [BT + "test_chlo.py"],
    "backends/torch/ops/control_flow.py": [BT + "test_control_flow.py"],
    "backends/torch/ops/elementwise.py": [BT + "test_elementwise.py"],
    "backends/torch/ops/indexing.py": [BT + "test_indexing.py"],
    "backends/torch/ops/lapack.py": [BT + "test_linalg.py"],
    "backends/torch/ops/linalg.py": [BT + "test_linalg.py"],
    "backends/torch/ops/normalization.py": [BT + "test_normalization.py"],
    "backends/torch/ops/placement.py": [BT + "test_placement.py"],
    "backends/torch/ops/random.py": [BT + "test_random.py"],
    "backends/torch/ops/reductions.py": [BT + "test_reductions.py"],
    "backends/torch/ops/shape.py": [BT + "test_shape.py"],
    # StableHLO -> ONNX
    "backends/onnx/ops/chlo.py": [BO + "test_elementwise.py"],
    "backends/onnx/ops/complex.py": [BO + "test_complex.py"],
    "backends/onnx/ops/control_flow.py": [BO + "test_indexing_reductions.py", BO + "test_model.py"],
    "backends/onnx/ops/dynamic.py": [BO + "test_dynamic.py"],
    "backends/onnx/ops/elementwise.py": [BO + "test_elementwise.py"],
    "backends/onnx/ops/indexing.py": [BO + "test_indexing_reductions.py"],
    "backends/onnx/ops/lapack.py": [BO + "test_lapack.py"],
    "backends/onnx/ops/linalg.py": [BO + "test_shape_linalg.py"],
    "backends/onnx/ops/reductions.py": [BO + "test_indexing_reductions.py"],
    "backends/onnx/ops/shape.py": [BO + "test_shape_linalg.py"],
}

#: The whole file of the ONNX node tests (its default-run cases), for the line-selected runs.
NODE_FILE = NODE

#: Per direction, the default-run suites that exercise rules of every file of it (beside the
#: family's own tests): a mutant is also run against those of their tests that reach its line.
DIRECTION_TESTS: dict[str, list[str]] = {
    "torch -> StableHLO": [FT + "test_opinfo.py"],
    "StableHLO -> torch": [BT + "test_conformance.py"],
    "StableHLO -> ONNX": [BO + "test_conformance.py"],
}

DIRECTIONS = {
    "frontends/torch/": "torch -> StableHLO",
    "frontends/onnx/": "ONNX -> StableHLO",
    "backends/jax/": "StableHLO -> JAX",
    "backends/torch/": "StableHLO -> torch",
    "backends/onnx/": "StableHLO -> ONNX",
}


def direction(path: str) -> str:
    """The conversion direction of a source file; ``core`` for the files of no one direction
    (``converter/``, the frontends' and backends' shared modules)."""
    return next((name for prefix, name in DIRECTIONS.items() if path.startswith(prefix)), "core")


# --------------------------------------------------------------------------- mutants


@dataclass(frozen=True)
class Mutant:
    file: str  # relative to the tree
    operator: str  # cosmic-ray operator name
    occurrence: int  # cosmic-ray's occurrence index of that operator in the file
    line: int

    @property
    def id(self) -> str:
        return f"{self.file}:{self.operator}:{self.occurrence}"


def enumerate_mutants(tree: Path, files: list[str], exclude: set[str]) -> dict[str, list[Mutant]]:
    """Every mutant cosmic-ray's argument-free operators make in each file (as `cosmic-ray init`)."""
    import cosmic_ray.plugins
    from cosmic_ray.ast import ast_nodes, get_ast

    operators = []
    for name in cosmic_ray.plugins.operator_names():
        cls = cosmic_ray.plugins.get_operator(name)
        if cls.arguments() or name in exclude:
            continue
        operators.append((name, cls()))
    out: dict[str, list[Mutant]] = {}
    for rel in files:
        source = (tree / rel).read_text(encoding="utf-8")
        nodes = list(ast_nodes(get_ast(source)))
        skip = annotation_spans(source)
        found = []
        for name, op in operators:
            occ = 0  # cosmic-ray's occurrence index: counts the skipped ones too
            for node in nodes:
                for start, _end in op.mutation_positions(node):
                    if not in_spans(start, skip):
                        found.append(Mutant(rel, name, occ, start[0]))
                    occ += 1
        out[rel] = found
    return out


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The ``((line, column), (end line, end column))`` spans (1-based lines, columns in
    characters, as parso's positions) of the annotations of a module with ``from __future__
    import annotations``, where they stay strings nothing runs: a mutant there is no mutant of
    the code (mutmut does not make them either). Empty for other modules, whose annotations
    are evaluated at definition time."""
    tree = ast.parse(source)
    future = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    if not future:
        return []
    lines = source.splitlines()

    def col(line: int, byte: int) -> int:  # ast's columns are UTF-8 byte offsets
        return len(lines[line - 1].encode("utf-8")[:byte].decode("utf-8", errors="replace"))

    spans = []
    for n in ast.walk(tree):
        if isinstance(n, ast.arg):
            ann = [n.annotation]
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            ann = [n.returns]
        elif isinstance(n, ast.AnnAssign):
            ann = [n.annotation]
        else:
            continue
        spans += [
            ((a.lineno, col(a.lineno, a.col_offset)), (a.end_lineno, col(a.end_lineno, a.end_col_offset)))
            for a in ann
            if a is not None
        ]
    return spans


def in_spans(pos: tuple[int, int], spans: list[tuple[tuple[int, int], tuple[int, int]]]) -> bool:
    """Whether position ``(line, column)`` lies in one of ``spans`` (ends exclusive)."""
    return any(lo <= tuple(pos) < hi for lo, hi in spans)


def mutate(source: str, m: Mutant) -> str | None:
    import cosmic_ray.plugins
    from cosmic_ray.mutating import mutate_code

    return mutate_code(source, cosmic_ray.plugins.get_operator(m.operator)(), m.occurrence)


def mutation_diff(tree: Path, m: Mutant) -> list[str]:
    src = (tree / m.file).read_text(encoding="utf-8")
    return diff_lines(src, mutate(src, m) or src)


def competent(mutated: str, rel: str) -> bool:
    """Whether a mutant compiles: cosmic-ray also rewrites the ``*`` of keyword-only parameters
    as an operator, which is a syntax error (an incompetent mutant, left out of the score)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            compile(mutated, rel, "exec")
    except SyntaxError:
        return False
    return True


def diff_lines(original: str, mutated: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(original.split("\n"), mutated.split("\n"), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def sample(mutants: dict[str, list[Mutant]], n: int, seed: int) -> list[Mutant]:
    """``n`` mutants stratified by file (largest-remainder allocation in proportion to each
    file's count, at least one per file), in an interleaved order whose prefixes stay stratified.
    Each file's picks come from its own seeded generator, so an edit of one rule file (a fix,
    a deleted rule) leaves the other files' mutants as they were."""
    files = sorted(f for f in mutants if mutants[f])
    total = sum(len(mutants[f]) for f in files)
    alloc = {f: min(1, len(mutants[f])) for f in files}
    rest = max(0, n - sum(alloc.values()))
    share = {f: rest * len(mutants[f]) / total for f in files}
    for f in files:
        alloc[f] = min(len(mutants[f]), alloc[f] + int(share[f]))
    left = n - sum(alloc.values())
    for f in sorted(files, key=lambda f: share[f] - int(share[f]), reverse=True):
        if left <= 0:
            break
        if alloc[f] < len(mutants[f]):
            alloc[f] += 1
            left -= 1
    keyed = []
    for f in files:
        rng = random.Random(f"{seed}:{f}")  # per file: editing one file changes only its picks
        picked = rng.sample(mutants[f], alloc[f])
        offset = rng.random()
        keyed += [((i + offset) / alloc[f], f, m) for i, m in enumerate(picked)]
    keyed.sort(key=lambda t: (t[0], t[1]))
    return [m for _, _, m in keyed]


# --------------------------------------------------------------------------- the scratch tree


def copy_tree(dest: Path) -> None:
    """The work tree's tracked and untracked-not-ignored files, without byte-code."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    if dest.exists():
        shutil.rmtree(dest)
    for raw in files:
        if not raw:
            continue
        rel = raw.decode()
        src = ROOT / rel
        if not src.is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    link_packages(dest)


def link_packages(tree: Path) -> None:
    """``converter/frontends`` -> ``../frontends`` and ``converter/backends`` -> ``../backends`` in
    ``tree`` (as in a work tree): without them ``converter.frontends`` and ``converter.backends``,
    found nowhere under the tree's ``converter/``, are imported through the project's editable
    install from the tree it was installed from, not from ``tree`` (whose mutated files the tests
    would then never run). ``rglob`` does not follow them, so no file is counted twice."""
    for pkg in ("frontends", "backends"):
        link = tree / "converter" / pkg
        if (tree / pkg).is_dir() and not link.exists() and not link.is_symlink():
            link.symlink_to(Path("..") / pkg)


def tree_hash(tree: Path) -> str:
    h = hashlib.sha256()
    for sub in ("converter", "frontends", "backends", "tests"):
        for p in sorted((tree / sub).rglob("*.py")):
            h.update(str(p.relative_to(tree)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def test_env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no stale .pyc of a mutated (same size, same second) file
    env.pop("REGISTRY_COVERAGE", None)
    return env


_NODE_IDS_SCRIPT = r"""
import json, sys
sys.path.insert(0, "tests/frontends/onnx")
import test_node_conformance as t
out = {}
for param in t._params():
    name, backend = param.values
    for _domain, _op, rule in t.rule_units(name):
        mod = getattr(rule, "__wrapped__", rule).__module__
        out.setdefault(mod, []).append(f"{t.__file__}::test_node[{param.id}]")
print(json.dumps(out))
"""


def node_case_ids(cfg: dict, tree: Path) -> dict[str, list[str]]:
    """For each ONNX frontend rule file, the node ids of the default-run ONNX node cases using it."""
    res = subprocess.run(
        [cfg["test_python"], "-c", _NODE_IDS_SCRIPT],
        cwd=tree,
        env=test_env(tree),
        capture_output=True,
        text=True,
        check=True,
    )
    by_module = json.loads(res.stdout.strip().splitlines()[-1])
    out = {}
    for mod, ids in by_module.items():
        rel = mod.replace(".", "/") + ".py"
        out[rel] = sorted({str(Path(i).relative_to(tree)) if i.startswith("/") else i for i in ids})
    return out


def commands(cfg: dict, rel: str, node_ids: dict[str, list[str]], tree: Path = ROOT) -> list[list[str]]:
    """The pytest commands of the test files mapped to ``rel`` (:func:`candidate_files`)."""
    out = []
    for entry in candidate_files(rel, cfg, tree):
        targets = node_ids.get(rel, []) if entry == NODE_FILE else [entry]
        if targets:
            out.append(
                ["nice", "-n", "19", cfg["test_python"], "-m", "pytest", *cfg["pytest_args"], *targets]
            )
    return out


def _cpu_limit(seconds: float) -> Callable[[], None]:
    """A ``preexec_fn`` capping the child's CPU time at ``seconds`` (SIGXCPU, then SIGKILL)."""

    def limit() -> None:
        import resource

        soft = max(1, int(seconds))
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 5))

    return limit


def run_commands(cmds: list[list[str]], tree: Path, timeout: float) -> tuple[str, float, str]:
    """``(outcome, seconds, tail of output)``: outcome ``passed``, ``failed`` (exit code, a
    negative one for a signal: SIGXCPU past ``timeout`` CPU seconds), ``timeout`` (wall
    seconds), or ``no-tests`` (pytest's exit 5: a broken table entry). Each command runs in
    a session of its own, killed whole when this one is interrupted."""
    start = time.monotonic()
    for cmd in cmds:
        left = timeout - (time.monotonic() - start)
        proc = subprocess.Popen(
            cmd, cwd=tree, env=test_env(tree), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, text=True, preexec_fn=_cpu_limit(timeout),
        )  # fmt: skip
        try:
            out, _ = proc.communicate(timeout=max(left, 1))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return "timeout", time.monotonic() - start, ""
        except BaseException:  # interrupted (Ctrl-C): no test process outlives the check
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        tail = "\n".join(out.strip().splitlines()[-6:])
        if proc.returncode == 5:
            return "no-tests", time.monotonic() - start, tail
        if proc.returncode != 0:
            return f"failed({proc.returncode})", time.monotonic() - start, tail
    return "passed", time.monotonic() - start, ""


# --------------------------------------------------------------------------- commands


def load_config() -> dict:
    with open(HERE / "config.toml", "rb") as f:
        return tomllib.load(f)


def rule_files() -> list[str]:
    return sorted(FAMILY_TESTS)


def read_results(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def runnable(order: list, tree: Path, until, until_text: str | None):
    """``(k, mutant, path, original, mutated)`` of each mutant of ``order`` that applies and
    compiles, in order, until the ``--until`` time (``until``) is past."""
    for k, m in enumerate(order):
        if until and now_utc() > until:
            print(f"stopping: --until {until_text} reached", flush=True)
            return
        path = tree / m.file
        original = path.read_text(encoding="utf-8")
        mutated = mutate(original, m)
        if mutated is not None and competent(mutated, m.file):
            yield k, m, path, original, mutated


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def cmd_list(cfg: dict, args) -> None:
    muts = enumerate_mutants(ROOT, rule_files(), set(cfg["exclude_operators"]))
    total = 0
    for rel, ms in muts.items():
        print(f"{len(ms):6d}  {rel}")
        total += len(ms)
    print(f"{total:6d}  in {len(muts)} rule files")
    picked = sample(muts, args.sample or cfg["sample"], cfg["seed"])
    for m in picked[: args.show]:
        print(m.id, "line", m.line)


def scratch_dir(cfg: dict) -> Path:
    """The scratch directory of this work tree (``{tree}`` in the setting: its directory name)."""
    return Path(cfg["scratch"].format(tree=ROOT.name))


_TEST_MAP: dict[Path, testmap.TestMap] = {}


def test_map(tree: Path = ROOT) -> testmap.TestMap:
    """The source file -> test files map of ``tree`` (:mod:`testmap`), built once per tree."""
    if tree not in _TEST_MAP:
        _TEST_MAP[tree] = testmap.build(tree)
    return _TEST_MAP[tree]


def candidate_files(rel: str, cfg: dict, tree: Path = ROOT) -> list[str]:
    """The test files whose tests may be run against a mutant of ``rel``, most specific first:
    those the derived map links to it (:mod:`testmap`), then the hand table's (``FAMILY_TESTS``,
    the entries whose files still exist), the ONNX node cases for an ONNX frontend op-rule file,
    and (``direction_tests`` in the settings) its direction's conformance suite."""
    out = list(test_map(tree).tests(rel))
    for entry in FAMILY_TESTS.get(rel, []):
        f = NODE_FILE if entry == NODE else entry
        if f not in out and (tree / f).exists():
            out.append(f)
    if rel.startswith("frontends/onnx/ops/") and NODE_FILE not in out and (tree / NODE_FILE).exists():
        out.append(NODE_FILE)
    if not cfg.get("direction_tests", True) or not rel.startswith(tuple(DIRECTIONS)):
        return out
    return out + [f for f in DIRECTION_TESTS.get(direction(rel), []) if f not in out]


def statement_lines(source: str, line: int) -> list[int]:
    """The lines of the innermost statement holding ``line`` (of a compound statement: its
    header), any of which a test must run to run the mutated code."""
    import ast

    best = None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if (
                best is None
                or node.lineno >= best.lineno
                and (node.end_lineno or 0) <= (best.end_lineno or 0)
            ):
                best = node
    if best is None:
        return [line]
    end = best.end_lineno or best.lineno
    body = getattr(best, "body", None)
    if isinstance(body, list) and body and not isinstance(best, ast.Module):
        first = min([body[0].lineno, *(d.lineno for d in getattr(best, "decorator_list", []))])
        end = body[0].lineno - 1 if first > best.lineno else best.lineno
        if line > end:  # a decorator or the like, outside the header span
            return [line]
    return list(range(best.lineno, max(end, best.lineno) + 1))


class ForkServer:
    """``forkserver.py`` run at ``nice -n 19`` by the project's interpreter over the scratch tree."""

    def __init__(self, cfg: dict, tree: Path) -> None:
        self.proc = subprocess.Popen(
            ["nice", "-n", "19", cfg["test_python"], str(HERE / "forkserver.py"), str(tree)],
            cwd=tree, env=test_env(tree), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert json.loads(self.proc.stdout.readline())["ready"]

    def run(self, args: list[str], log: Path, cpu: float, wall: float, **extra) -> dict:
        job = {"args": args, "log": str(log), "cpu": cpu, "wall": wall, **extra}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def coverage_key(tree: Path, test_file: str, source_hash: str) -> str:
    h = hashlib.sha256((tree / test_file).read_bytes())
    h.update(source_hash.encode())
    return h.hexdigest()[:16]


def source_hash(tree: Path) -> str:
    h = hashlib.sha256()
    for sub in ("converter", "frontends", "backends"):
        for p in sorted((tree / sub).rglob("*.py")):
            h.update(str(p.relative_to(tree)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def tail_of(path: Path, n: int = 8) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return ""
    return "\n".join(lines[-n:])


def changed_files(base: str, root: Path = ROOT) -> list[str]:
    """The source files (``converter/``, ``frontends/``, ``backends/``) a change touches: what
    ``git diff`` shows between the work tree (committed or not) and the point where the branch
    left ``base`` (``git merge-base BASE HEAD``, so that a ``main`` that moved on since does not
    count other people's changes), among those that still exist."""
    fork = subprocess.run(
        ["git", "merge-base", base, "HEAD"], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()
    out = subprocess.run(
        ["git", "diff", "--name-only", fork, "--", *testmap.SOURCE_DIRS],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    return sorted(f for f in out if f.endswith(".py") and (root / f).is_file())


def fresh_sample(mutants: dict[str, list[Mutant]], n: int, seed: int) -> list[Mutant]:
    """``n`` mutants drawn uniformly from all of ``mutants`` (every mutant of every file equally
    likely, so files weigh by their number of mutants, i.e. their size), in the draw's order:
    every prefix of the order (a run cut short) is itself a uniform random sample."""
    pool = [m for f in sorted(mutants) for m in mutants[f]]
    return random.Random(seed).sample(pool, min(n, len(pool)))


def plan(cfg: dict, args, tree: Path) -> tuple[str, dict, list[Mutant], Path]:
    """``(mode, run record, the sample in its order, results file)`` of ``run``'s arguments."""
    scratch = scratch_dir(cfg)
    exclude = set(cfg["exclude_operators"])
    n = args.sample or cfg.get("fresh_sample", 300)
    if args.fixed:
        muts = enumerate_mutants(tree, rule_files(), exclude)
        order = sample(muts, args.sample or cfg["sample"], cfg["seed"])
        return "fixed", {"seed": cfg["seed"], "files": rule_files()}, order, scratch / "results.jsonl"
    if args.files:
        files, mode = sorted(set(args.files)), "files"
        known = set(testmap.source_files(tree))
        missing = [f for f in files if f not in known]
        if missing:
            raise SystemExit(f"not source files under {', '.join(testmap.SOURCE_DIRS)}/: {missing}")
    elif args.changed is not None:
        files, mode = changed_files(args.changed), "changed"
        if not files:
            raise SystemExit(
                f"no change since {args.changed} touches a file under {', '.join(testmap.SOURCE_DIRS)}/"
            )
    else:
        files, mode = testmap.source_files(tree), "fresh"
    seed = args.seed if args.seed is not None else secrets.randbits(31)
    muts = enumerate_mutants(tree, files, exclude)
    order = fresh_sample(muts, n, seed)
    rec = {"kind": "run", "mode": mode, "seed": seed, "sample": len(order), "base": args.changed,
           "files": files, "mutants_per_file": {f: len(ms) for f, ms in muts.items()},
           "annotations": "left out", "at": now_utc().isoformat(timespec="seconds")}  # fmt: skip
    return mode, rec, order, scratch / "runs" / f"{mode}-{seed}.jsonl"


def cmd_run(cfg: dict, args) -> None:
    scratch = scratch_dir(cfg)
    tree = scratch / "tree"
    covdir = scratch / "lines"
    logdir = scratch / "logs"
    for d in (scratch, covdir, logdir, scratch / "runs"):
        d.mkdir(parents=True, exist_ok=True)
    copy_tree(tree)
    thash, shash = tree_hash(tree), source_hash(tree)
    mode, run_rec, order, results_path = plan(cfg, args, tree)
    print(f"mode {mode}, seed {run_rec['seed']}, {len(order)} mutants sampled from "
          f"{len(run_rec['files'])} files; results: {results_path}", flush=True)  # fmt: skip
    tm = test_map(tree)
    cm, stale_src = None, []
    if mode != "fixed":
        unmapped = [f for f in run_rec["files"] if not tm.links.get(f)]
        run_rec["unmapped"] = unmapped
        run_rec["package_only"] = [f for f in run_rec["files"] if f in tm.package_only()]
        if not args.file_map:
            cm, stale_src, run_rec["selection"] = load_covmap(cfg, args, tree)
        if not results_path.exists():
            with results_path.open("a") as log:
                log.write(json.dumps(run_rec) + "\n")
        print(f"files with no test mapped: {unmapped or 'none'}", flush=True)
    for m in order:
        for f in candidate_files(m.file, cfg, tree):
            assert (tree / f).exists(), f
    if args.limit:
        order = order[: args.limit]
    if args.shard:  # every n-th mutant of the order, so that n work trees share one sample
        k, n = map(int, args.shard.split("/"))
        order = order[k - 1 :: n]
    results = read_results(results_path)
    done = {r["id"]: r for r in results if r["kind"] == "mutant"}
    if args.ids:  # these again, whatever they did before
        order = [m for m in order if m.id in set(args.ids.split(","))]
    elif args.rerun_survivors:
        order = [m for m in order if m.id in done and done[m.id]["status"] == "survived"]
    else:  # not run yet, or run as another mutation (its file was edited since)
        order = [m for m in order if m.id not in done or done[m.id]["diff"] != mutation_diff(tree, m)]
    if args.adopt:  # earlier results of this sample's mutants, where the mutation is the same
        adopted = 0
        with results_path.open("a") as log:
            for r in read_results(Path(args.adopt)):
                m = next((m for m in order if m.id == r.get("id")), None)
                if m is None or r["kind"] != "mutant" or r["status"] not in ("killed", "survived"):
                    continue
                if mutation_diff(tree, m) == r["diff"]:
                    log.write(json.dumps({**r, "adopted_from": args.adopt, "mode": "family files"}) + "\n")
                    order.remove(m)
                    adopted += 1
        print(f"adopted {adopted} results of {args.adopt}", flush=True)
    until = None
    if args.until:
        h, mi = map(int, args.until.split(":"))
        until = now_utc().replace(hour=h, minute=mi, second=0, microsecond=0)
    print(f"{len(order)} mutants to run; tree {thash}", flush=True)
    server = ForkServer(cfg, tree)
    if cm is not None:
        try:
            run_covmap(cfg, args, cm, stale_src, server, tree, thash, order, results_path, until)
        finally:
            server.close()
        return
    coverage: dict[str, dict] = {}
    rules = rule_files() if mode == "fixed" else testmap.source_files(tree)
    min_collect = cfg["collect_min_mutants"] if mode == "fixed" else cfg.get("fresh_collect_min_mutants", 5)
    if args.collect_min is not None:
        min_collect = args.collect_min
    node_ids: dict[str, list[str]] | None = None

    def lines_path(test_file: str) -> Path:
        return covdir / f"{test_file.replace('/', '__')}.{coverage_key(tree, test_file, shash)}.json"

    def has_lines(test_file: str) -> bool:
        return test_file in coverage or lines_path(test_file).exists()

    def lines_of(test_file: str) -> dict:
        """The unmutated run of one test file with its lines recorded (made once per content)."""
        if test_file in coverage:
            return coverage[test_file]
        path = lines_path(test_file)
        if not path.exists():
            log = logdir / f"lines.{test_file.replace('/', '__')}.log"
            budget = {"cpu": cfg["collect_cpu"], "wall": cfg["collect_wall"]}
            res = server.run(
                [*cfg["collect_pytest_args"], test_file], log, lines=str(path), rule_files=rules, **budget
            )
            print(
                f"lines of {test_file}: rc {res['rc']}, {res['cpu']:.0f} CPU s, {res['seconds']:.0f} s",
                flush=True,
            )
            if not path.exists():
                raise SystemExit(f"no line record from {test_file}:\n{tail_of(log, 30)}")
        coverage[test_file] = json.loads(path.read_text())
        return coverage[test_file]

    with results_path.open("a") as log:

        def write(rec: dict) -> None:
            log.write(json.dumps(rec) + "\n")
            log.flush()

        for k, m, path, original, mutated in runnable(order, tree, until, args.until):
            span = set(statement_lines(original, m.line))
            selected, whole, cpu, failing, unrecorded = [], [], 0.0, [], []
            need = Counter(f for r in order[k:] for f in candidate_files(r.file, cfg, tree))
            for test_file in candidate_files(m.file, cfg, tree):
                if test_file == NODE_FILE and not has_lines(test_file) and need[test_file] < min_collect:
                    # the default-run ONNX node cases using this file's rules, not the whole suite
                    if node_ids is None:
                        node_ids = node_case_ids(cfg, tree)
                    selected += node_ids.get(m.file, [])
                    unrecorded.append(test_file)
                    cpu += cfg["unrecorded_cpu"]
                    continue
                if not has_lines(test_file) and need[test_file] < min_collect:
                    whole.append(test_file)  # cheaper to run whole for the few mutants needing it
                    unrecorded.append(test_file)
                    cpu += cfg["unrecorded_cpu"]
                    continue
                cov = lines_of(test_file)
                if span & set(cov["outside"].get(m.file, [])):
                    whole.append(test_file)  # run at import or collection: reaches every test
                for nodeid, rec in cov["tests"].items():
                    if rec["outcome"] == "failed":
                        failing.append(nodeid)
                    elif test_file in whole or span & set(rec.get("lines", {}).get(m.file, [])):
                        if test_file not in whole:
                            selected.append(nodeid)
                        cpu += rec.get("cpu", 0.0)
            base = {"kind": "mutant", "id": m.id, "file": m.file, "line": m.line, "operator": m.operator,
                    "diff": diff_lines(original, mutated), "tree": thash,
                    "at": now_utc().isoformat(timespec="seconds")}  # fmt: skip
            if not selected and not whole:
                rec = {**base, "status": "survived", "outcome": "no-test-runs-it", "seconds": 0, "cpu": 0,
                       "tests": 0, "mode": "lines"}  # fmt: skip
                write(rec)
                print(f"[{k + 1}/{len(order)}] survived no test runs line {m.line}: {m.id}", flush=True)
                continue
            pargs = [*cfg["pytest_args"], *whole, *selected]
            pargs += [f"--deselect={t}" for t in failing if t.split("::")[0] in whole]
            budget = cfg["min_cpu"] + cfg["cpu_factor"] * cpu
            mlog = logdir / "mutant.log"
            try:
                path.write_text(mutated, encoding="utf-8")
                wall = max(cfg["min_wall"], cfg["wall_factor"] * budget)
                if mode != "fixed":
                    wall = min(wall, args.mutant_wall or cfg.get("fresh_wall", 1200))
                res = server.run(pargs, mlog, cpu=budget, wall=wall)
            finally:
                path.write_text(original, encoding="utf-8")
            rc = res["rc"]
            if rc == "timeout" and mode == "fixed":  # the fixed sample's runs count wall time too
                status, outcome = "killed", rc
            else:
                status, outcome = classify(rc, mlog, m.file)
            if (
                outcome == "collection-error"
                and not collects_unmutated(cfg, server, [*whole, *selected], logdir)[0]
            ):
                status, outcome = "error", "its test module fails to collect unmutated"
            if status == "killed" and unrecorded and isinstance(rc, int):
                # a file run whole without a line record: its failing test must pass unmutated
                failed = failing_tests(mlog.read_text(errors="replace"))
                if failed:
                    check = server.run(
                        [*cfg["pytest_args"], *failed], logdir / "check.log", cpu=600, wall=3600
                    )
                    if check["rc"] != 0:
                        status, outcome = "error", "its failing test fails unmutated"
            rec = {**base, "status": status, "outcome": outcome, "seconds": res["seconds"], "cpu": res["cpu"],
                   "budget_cpu": round(budget, 1), "tests": len(selected), "files": whole,
                   "mode": "files" if whole else "lines", "unrecorded": unrecorded,
                   "tail": tail_of(mlog) if status != "survived" else ""}  # fmt: skip
            write(rec)
            print(
                f"[{k + 1}/{len(order)}] {status:8s} {outcome:11s} {res['cpu']:5.1f} CPU s "
                f"{len(selected)} tests {len(whole)} files {m.id} (line {m.line})",
                flush=True,
            )
    server.close()


def covmap_path(cfg: dict, args=None) -> Path:
    """The coverage map (``covmap.py``): ``--covmap``, else the scratch directory's."""
    given = getattr(args, "covmap", None)
    return Path(given) if given else scratch_dir(cfg) / "covmap.json.gz"


def load_covmap(cfg: dict, args, tree: Path) -> tuple[covmap.CovMap, list[str], dict]:
    """``(the map, the source files edited since its run, the run record's note of it)``."""
    path = covmap_path(cfg, args)
    if not path.exists():
        raise SystemExit(
            f"no coverage map at {path}: make it with `run.py covmap measure` (the default test run "
            "with coverage contexts, ~25 min) or `run.py covmap build --data .coverage --log pytest.log`, "
            "or run with --file-map (the file map of testmap.py, no coverage)"
        )
    cm = covmap.CovMap.load(path)
    stale_src, stale_tests = cm.stale(tree)
    note = {
        "covmap": str(path), "key": cm.data["key"], "built": cm.data["built"], "measured": cm.data["tree"],
        "tests": len(cm.tests), "budget": args.budget or cfg["covmap_budget"],
        "second_budget": cfg.get("covmap_second_budget", 0),
        "stale_sources": stale_src, "stale_tests": stale_tests,
    }  # fmt: skip
    print(
        f"coverage map {path} ({cm.data['key']}, {len(cm.tests)} tests, built {cm.data['built']}); "
        f"edited since: {len(stale_src)} source files {stale_src[:5]}, {len(stale_tests)} test files",
        flush=True,
    )
    return cm, stale_src, note


def run_covmap(cfg: dict, args, cm, stale_src, server, tree, thash, order, results_path, until) -> None:
    """Each mutant of ``order`` against the tests the coverage map says ran its statement
    (:meth:`covmap.CovMap.select`), cheap and diverse first, at most ``covmap_budget`` seconds of
    their recorded time, with ``pytest -x``; a statement no part of the run ran survives as *not
    covered* (no run)."""
    logdir = scratch_dir(cfg) / "logs"
    budget_s = args.budget or cfg["covmap_budget"]
    file_cost = cfg["covmap_file_cost"]
    stale = set(stale_src)
    with results_path.open("a") as log:

        def write(rec: dict) -> None:
            log.write(json.dumps(rec) + "\n")
            log.flush()

        for k, m, path, original, mutated in runnable(order, tree, until, args.until):
            span = statement_lines(original, m.line)
            fallback = candidate_files(m.file, cfg, tree)
            sel = cm.select(m.file, original, m.line, span, fallback, budget_s, file_cost, m.file in stale)
            base = {"kind": "mutant", "id": m.id, "file": m.file, "line": m.line, "operator": m.operator,
                    "diff": diff_lines(original, mutated), "tree": thash, "mode": "covmap",
                    "selection": sel.kind, "tests": len(sel.tests), "covering": sel.covering,
                    "candidates": sel.candidates, "est_seconds": sel.seconds,
                    "at": now_utc().isoformat(timespec="seconds")}  # fmt: skip
            if not sel.tests:
                outcome = "not-covered" if sel.kind == "not-covered" else "no-test-mapped"
                write({**base, "status": "survived", "outcome": outcome, "seconds": 0, "cpu": 0})
                print(f"[{k + 1}/{len(order)}] survived {outcome} (line {m.line}): {m.id}", flush=True)
                continue
            status, outcome, res, verify, budget = run_selected(
                cfg, args, server, logdir, path, mutated, m, sel
            )
            extra = {}
            second_s = cfg.get("covmap_second_budget", 0)
            if status == "survived" and len(sel.tests) < sel.candidates and second_s > budget_s:
                # the budget ran only part of its covering tests: the rest, up to the second budget
                # (a survivor is a mutant its covering tests pass, not the cheapest of them)
                more = cm.select(
                    m.file, original, m.line, span, fallback, second_s, file_cost, m.file in stale
                )
                ran = set(sel.tests)
                rest = dataclasses.replace(more, tests=[t for t in more.tests if t not in ran],
                                           seconds=max(0.0, more.seconds - sel.seconds))  # fmt: skip
                if rest.tests:
                    status, outcome, res2, verify2, budget2 = run_selected(
                        cfg, args, server, logdir, path, mutated, m, rest
                    )
                    extra = {"second_tests": len(rest.tests), "second_seconds": res2["seconds"]}
                    res = {
                        **res2,
                        "seconds": res["seconds"] + res2["seconds"],
                        "cpu": res["cpu"] + res2["cpu"],
                    }
                    verify, budget = verify + verify2, budget + budget2
            rec = {**base, "status": status, "outcome": outcome, "seconds": res["seconds"], "cpu": res["cpu"],
                   "budget_cpu": round(budget, 1), "verify_seconds": verify,
                   "tail": "" if status == "survived" else tail_of(logdir / "mutant.log"),
                   **extra}  # fmt: skip
            write(rec)
            part = f"{len(sel.tests)}/{sel.candidates}" + (
                f" ({sel.covering} covering)" if sel.covering else ""
            )
            print(
                f"[{k + 1}/{len(order)}] {status:8s} {outcome:11s} {res['seconds']:6.1f} s "
                f"{res['cpu']:6.1f} CPU s "
                f"{part} tests, {sel.kind}, est {sel.seconds:.0f} s: {m.id} (line {m.line})",
                flush=True,
            )


def run_selected(cfg: dict, args, server, logdir: Path, path: Path, mutated: str, m, sel):
    """Mutant ``m`` (``mutated``: its file's text, written to ``path`` and restored after) against
    the tests of ``sel`` under a CPU budget from their recorded time; a kill counts only if its
    failing test passes unmutated. ``(status, outcome, result, verify seconds, CPU budget)``."""
    budget = cfg["min_cpu"] + cfg["cpu_factor"] * sel.seconds
    wall = min(max(cfg["min_wall"], cfg["wall_factor"] * budget), args.mutant_wall or cfg["fresh_wall"])
    mlog = logdir / "mutant.log"
    original = path.read_text(encoding="utf-8")
    tests = list(sel.tests)
    try:
        path.write_text(mutated, encoding="utf-8")
        res = server.run([*cfg["pytest_args"], *tests], mlog, cpu=budget, wall=wall)
        out = mlog.read_text(errors="replace") if res["rc"] == 4 else ""
        if "ERROR: not found:" in out and not collection_errors(out):
            # the mutant changed a parametrization (a registry the ids are drawn from): the
            # ids it removed cannot run; the ones its tree still collects decide
            files = sorted({t.split("::")[0] for t in tests})
            clog = logdir / "collect.log"
            server.run([*cfg["collect_pytest_args"], "--collect-only", *files], clog, cpu=600, wall=3600)
            have = set(re.findall(r"^(tests/\S+::\S.*)$", clog.read_text(errors="replace"), re.M))
            tests = [t for t in tests if t in have]
            if tests:
                res = server.run([*cfg["pytest_args"], *tests], mlog, cpu=budget, wall=wall)
    finally:
        path.write_text(original, encoding="utf-8")
    status, outcome = classify(res["rc"], mlog, m.file)
    verify = 0.0
    if outcome == "collection-error":
        collects, verify = collects_unmutated(cfg, server, tests, logdir)
        if not collects:
            status, outcome = "error", "its test module fails to collect unmutated"
    if status == "killed" and res["rc"] == 1 and cfg.get("verify_kills", True):
        # the failing test must pass unmutated (not flaky, not hurt by the selection's order)
        failed = failing_tests(mlog.read_text(errors="replace"))
        if failed:
            check = server.run([*cfg["pytest_args"], *failed], logdir / "check.log", cpu=600, wall=3600)
            verify = check["seconds"]
            if check["rc"] != 0:
                status, outcome = "error", "its failing test fails unmutated"
    return status, outcome, res, verify, budget


def classify(rc, mlog: Path, rel: str) -> tuple[str, str]:
    """``(status, outcome)`` of a mutant from pytest's exit (or the fork server's
    ``timeout``/``cpu-limit``/``signal N``); a ``collection-error`` kill is for the caller to
    verify (:func:`collects_unmutated`), and a fixed run counts a wall timeout as a kill
    where this leaves it undecided."""
    if rc == 0:
        return "survived", "passed"
    if rc == "timeout":
        # out of wall time on a loaded machine is no evidence either way (CPU-time limits,
        # load-independent, still count as kills): left out of the score
        return "undecided", "wall-timeout"
    if rc == "cpu-limit":
        return "killed", rc
    if rc in (2, 3, 4, 5, 99):  # interrupted, internal or usage error, no tests, crash of the run
        # a conftest whose imports fail in the mutated file stops pytest with exit 4 (a usage
        # error) where a test module's would be a collection error (exit 2): both kills
        out = mlog.read_text(errors="replace")
        if rc == 4 and collection_errors(out):
            return "killed", "collection-error"  # verified by the caller
        if rc == 4 and "ERROR: not found:" in out:
            return "error", "a selected test id is gone (rebuild the coverage map)"
        kill = rc in (2, 3) or rc == 4 and import_failed_in(out, rel)
        return ("killed" if kill else "error"), f"failed({rc})"
    return "killed", f"failed({rc})" if isinstance(rc, int) else rc


def import_failed_in(log: str, rel: str) -> bool:
    """Whether pytest's output ``log`` is a conftest that failed to import with the traceback
    passing through the module body of rule file ``rel`` (the mutant broke its import)."""
    if "ImportError while loading conftest" not in log:
        return False
    return re.search(rf"^(converter/)?{re.escape(rel)}:\d+: in <module>$", log, re.M) is not None


def collects_unmutated(cfg: dict, server, tests: list[str], logdir: Path) -> tuple[bool, float]:
    """Whether ``tests`` collect on the unmutated tree (a test module that failed to import
    under a mutant, :func:`collection_errors`, is then the mutant's doing: a kill), and the
    seconds the check took."""
    check = server.run([*cfg["collect_pytest_args"], "--collect-only", *tests], logdir / "check.log",
                       cpu=600, wall=3600)  # fmt: skip
    return check["rc"] == 0, check["seconds"]


def collection_errors(log: str) -> list[str]:
    """The test modules of pytest's ``ERROR <module> - <exception>`` summary lines: modules
    that failed to import (with ``-x`` and node ids, pytest then exits 4, "found no
    collectors")."""
    if "found no collectors for" not in log:
        return []
    return re.findall(r"^ERROR (tests/\S+\.py) - ", log, re.M)


def failing_tests(tail: str) -> list[str]:
    """The node ids of pytest's ``FAILED <id>[ - message]`` summary lines; an id's
    parameters (``[...]``) may hold spaces and `` - `` (``[a-b on a symbolic dimension]``)."""
    return [
        m.group(1) or m.group(2) for m in re.finditer(r"^FAILED (?:(\S*?\[.*?\])|(\S+))(?: - |$)", tail, re.M)
    ]


def cmd_check(cfg: dict, args) -> None:
    """One mutant against the given tests (default: its family's), in a fresh copy of the tree."""
    rel, op, occ = args.id.rsplit(":", 2)
    tree = scratch_dir(cfg) / "check-tree"
    copy_tree(tree)
    m = Mutant(rel, op, int(occ), 0)
    original = (tree / rel).read_text(encoding="utf-8")
    mutated = mutate(original, m)
    if mutated is None:
        raise SystemExit(f"no such mutant: {args.id}")
    print("\n".join(diff_lines(original, mutated)))
    (tree / rel).write_text(mutated, encoding="utf-8")
    if args.tests:
        cmds = [["nice", "-n", "19", cfg["test_python"], "-m", "pytest", *cfg["pytest_args"], *args.tests]]
    else:
        wants_nodes = NODE_FILE in candidate_files(rel, cfg, tree)
        cmds = commands(cfg, rel, node_case_ids(cfg, tree) if wants_nodes else {}, tree)
    outcome, secs, tail = run_commands(cmds, tree, cfg["min_wall"])
    print(f"{'survived' if outcome == 'passed' else 'killed'} ({outcome}, {secs:.0f}s)\n{tail}")


def cmd_show(cfg: dict, args) -> None:
    rel, op, occ = args.id.rsplit(":", 2)
    src = (ROOT / rel).read_text(encoding="utf-8")
    m = Mutant(rel, op, int(occ), 0)
    print("\n".join(diff_lines(src, mutate(src, m) or src)))


def _pct(score: float | None) -> str:
    return "-" if score is None else f"{100 * score:.1f}%"


FRESH_BEGIN, FRESH_END = "<!-- fresh sample: run.py report --run -->", "<!-- end of the fresh sample -->"


def load_classes() -> dict[str, dict]:
    cpath = HERE / "survivors.toml"
    if not cpath.exists():
        return {}
    with open(cpath, "rb") as f:
        return tomllib.load(f).get("survivor", {})


def fresh_report(results: list[dict], classes: dict[str, dict]) -> dict:
    """The score of one fresh or changed run (its ``run`` record and its mutants' last results)."""
    head = next(r for r in results if r["kind"] == "run")
    latest: dict[str, dict] = {}
    first: dict[str, dict] = {}
    for r in results:
        if r["kind"] == "mutant":
            first.setdefault(r["id"], r)
            latest[r["id"]] = r
    equivalent = {i for i, c in classes.items() if c.get("class", "").startswith("equivalent")}

    def score(recs: list[dict]) -> dict:
        decided = [r for r in recs if r["status"] in ("killed", "survived")]
        killed = sum(r["status"] == "killed" for r in decided)
        survived = [r for r in decided if r["status"] == "survived"]
        eq = sum(r["id"] in equivalent for r in survived)
        n = len(decided)
        return {
            "run": len(recs), "decided": n, "killed": killed, "score": round(killed / n, 3) if n else None,
            "survived": len(survived),
            "not_covered": sum(r.get("outcome") == "not-covered" for r in survived),
            "partial": sum(_partial(r) for r in survived),
            "timeouts": sum(r.get("outcome") in ("cpu-limit", "timeout") for r in decided),
            "undecided": sum(r["status"] == "undecided" for r in recs),
            "errors": sum(r["status"] == "error" for r in recs), "equivalent": eq,
            "score_without_equivalent": round(killed / (n - eq), 3) if n - eq else None,
        }  # fmt: skip

    recs = list(latest.values())
    firsts = list(first.values())
    groups = sorted({direction(r["file"]) for r in recs})
    out = {
        "mode": head["mode"], "seed": head["seed"], "base": head.get("base"), "at": head["at"],
        "population_files": len(head["files"]), "population_mutants": sum(head["mutants_per_file"].values()),
        "annotations": head.get("annotations", "mutated"),
        "sample": head["sample"], "unmapped": head.get("unmapped", []),
        "package_only": head.get("package_only", []), "selection": head.get("selection"),
        "before": {"all": score(firsts), **{g: score([r for r in firsts if direction(r["file"]) == g])
                                            for g in groups}},
        "after": {"all": score(recs), **{g: score([r for r in recs if direction(r["file"]) == g])
                                         for g in groups}},
        "files": {}, "not_covered": {}, "survivors": [],
    }  # fmt: skip
    for r in sorted(recs, key=lambda r: (r["file"], r["line"])):
        f = out["files"].setdefault(r["file"], {"run": 0, "killed": 0})
        f["run"] += 1
        f["killed"] += r["status"] == "killed"
        if r["status"] == "survived" and r.get("outcome") == "not-covered":
            out["not_covered"].setdefault(r["file"], []).append(r["line"])
        if first[r["id"]]["status"] in ("survived", "undecided", "error"):
            c = classes.get(r["id"], {})
            out["survivors"].append({
                "id": r["id"], "where": f"{r['file']}:{r['line']}", "diff": r["diff"],
                "first": first[r["id"]]["status"], "now": r["status"], "outcome": r.get("outcome", ""),
                "tests": _tests_run(r), "partial": _partial(r),
                "class": c.get("class", "unclassified"), "note": c.get("note", ""),
            })  # fmt: skip
    return out


def _partial(r: dict) -> bool:
    """Whether a mutant ran only part of the tests that ran its statement (the budget)."""
    return r.get("mode") == "covmap" and _ran(r) < r.get("candidates", 0)


def _ran(r: dict) -> int:
    """How many tests a mutant ran: the budget's, and the second budget's if it survived them."""
    return r.get("tests", 0) + r.get("second_tests", 0)


def _tests_run(r: dict) -> str:
    if r.get("mode") != "covmap":
        return ""
    if r.get("outcome") == "not-covered":
        return "none (not covered)"
    return f"{_ran(r)}/{r.get('candidates', 0)} ({r.get('selection', '')})"


def fresh_markdown(rep: dict) -> list[str]:
    what = {
        "fresh": "every file under converter/, frontends/, backends/",
        "files": "the files " + ", ".join(f"`{f}`" for f in rep.get("files", [])),
    }.get(rep["mode"], f"the files changed since the branch left `{rep['base']}`")
    a, b = rep["after"]["all"], rep["before"]["all"]
    sel = rep.get("selection")
    if sel:
        how = ["prefix of it is a uniform sample too), with `pytest -x`, at `nice -n 19`, against the tests"]
        if "second_budget" in sel:  # runs since the family-first selection and the second budget
            how += [
                "that ran its statement in the default test run, its family's test files first, then the",
                f"cheapest of each test file, up to {sel['budget']:g} s of their recorded time (coverage map",
                f"`{sel['key']}`: {sel['tests']} tests, built {sel['built']}, `tools/mutation/covmap.py`);",
                f"one that passes them runs the rest, up to {sel['second_budget']:g} s.",
            ]
        else:
            how += [
                "that ran its statement in the default test run, the cheapest of each test file first, up",
                f"to {sel['budget']:g} s of their recorded time (coverage map `{sel['key']}`:",
                f"{sel['tests']} tests, built {sel['built']}, `tools/mutation/covmap.py`).",
            ]
        how += [
            "A survivor that ran only part of the tests that ran its statement is marked *partial*; a",
            "statement no part of the run ran survives as *not covered*.",
        ]
        if sel["stale_sources"]:
            how.append("Source files edited since the measured run (their mutants ran the file map's tests): "
                       + ", ".join(f"`{f}`" for f in sel["stale_sources"]) + ".")  # fmt: skip
    else:
        how = [
            "prefix of it is a uniform sample too), against the test files `tools/mutation/testmap.py` maps",
            "to its file, with `pytest -x`, at `nice -n 19`.",
        ]
    lines = [
        FRESH_BEGIN,
        f"## Fresh sample: seed {rep['seed']} ({rep['mode']}, {rep['at']})",
        "",
        f"`run.py run` drew seed **{rep['seed']}** and sampled {rep['sample']} mutants uniformly from all",
        f"{rep['population_mutants']} mutants of {what} ({rep['population_files']} files; each mutant",
        "equally likely, so a file weighs by its number of mutants"
        + (
            "; none inside the annotations of a module with `from __future__ import annotations`, which"
            " nothing runs"
            if rep.get("annotations") == "left out"
            else ""
        )
        + "). Each ran, in the order drawn (every",
        *how,
        "",
        f"**{a['run']} of the {rep['sample']} ran**: {a['killed']} killed ({a['timeouts']} by running out of "
        f"CPU time), {a['survived']} survived ({a['not_covered']} not covered, {a['partial']} partial), "
        f"{a['undecided']} undecided (out of wall time) and {a['errors']} errors (these two left out of the "
        "score).",
        "",
        f"**Killed on the fresh sample (each mutant's first run): {b['killed']} / {b['decided']} = "
        f"{_pct(b['score'])}**, without the {b['equivalent']} equivalent mutants "
        f"{_pct(b['score_without_equivalent'])}. After the tests added for its survivors (run again): "
        f"{a['killed']} / {a['decided']} = {_pct(a['score'])} (w/o equivalent "
        f"{_pct(a['score_without_equivalent'])}); that second figure is no fresh score.",
        "",
        "By direction, after the added tests (`core`: files of no one direction):",
        "",
        "| direction | run | decided | killed | timeouts | survived | not covered | score | equivalent "
        "| score w/o equivalent |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for g, sc in [*((g, sc) for g, sc in rep["after"].items() if g != "all"), ("all", a)]:
        lines.append(f"| {g} | {sc['run']} | {sc['decided']} | {sc['killed']} | {sc['timeouts']} | "
                     f"{sc['survived']} | {sc['not_covered']} | {_pct(sc['score'])} | {sc['equivalent']} | "
                     f"{_pct(sc['score_without_equivalent'])} |")  # fmt: skip
    lines += ["", "Files the mutants that ran came from (killed / run): " + ", ".join(
        f"`{f}` {v['killed']}/{v['run']}" for f, v in rep["files"].items()) + "."]  # fmt: skip
    if rep.get("not_covered"):
        lines += ["", "Not covered (lines no test of the default run runs; `run.py uncovered` lists them "
                  "all): " + ", ".join(f"`{f}` {', '.join(map(str, ls))}"
                                       for f, ls in rep["not_covered"].items()) + "."]  # fmt: skip
    if not sel:
        lines += ["", "Files with no test mapped: " + (", ".join(f"`{f}`" for f in rep["unmapped"]) or "none")
                  + "; mapped only by package (no test file of their own): "
                  + (", ".join(f"`{f}`" for f in rep["package_only"]) or "none") + "."]  # fmt: skip
    lines += [
        "",
        "| where | mutation | first run | tests run | now | class | note |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in rep["survivors"]:
        old = " ".join(x[1:].strip() for x in s["diff"] if x[0] == "-").replace("|", "\\|")
        new = " ".join(x[1:].strip() for x in s["diff"] if x[0] == "+").replace("|", "\\|")
        tests = s.get("tests", "") + (" partial" if s.get("partial") else "")
        lines.append(f"| `{s['where']}` | `{old}` → `{new}` | {s['first']} ({s['outcome']}) | {tests} | "
                     f"{s['now']} | {s['class']} | {s['note']} |")  # fmt: skip
    return [*lines, "", FRESH_END]


def cmd_report_fresh(cfg: dict, args) -> None:
    rep = fresh_report(read_results(Path(args.run)), load_classes())
    if args.print_only:
        print("\n".join(fresh_markdown(rep)))
        return
    (HERE / "report-fresh.json").write_text(json.dumps(rep, indent=1) + "\n")
    out = ROOT / "docs" / "mutation-report.md"
    text = out.read_text() if out.exists() else "# Mutation testing report\n"
    block = "\n".join(fresh_markdown(rep))
    if FRESH_BEGIN in text:
        pre, rest = text.split(FRESH_BEGIN, 1)
        text = pre + block + rest.split(FRESH_END, 1)[1]
    else:
        title, _, rest = text.partition("\n")
        text = f"{title}\n\n{block}\n{rest}"
    out.write_text(text)
    print(block)


def cmd_report(cfg: dict, args) -> None:
    if args.run:
        return cmd_report_fresh(cfg, args)
    results = read_results(Path(args.results or scratch_dir(cfg) / "results.jsonl"))
    # a family that failed unmutated in some tree voids the kills made in that tree
    broken = {(r["file"], r["tree"]) for r in results if r["kind"] == "baseline" and r["outcome"] != "passed"}
    # ... and so does a failing test of a killed mutant that fails unmutated too (run --verify-kills)
    bad_tests = {r["test"] for r in results if r["kind"] == "kill-check" and not r["passed"]}
    latest: dict[str, dict] = {}
    first: dict[str, dict] = {}
    # the current sample, as the mutations are now (a result of an edited file's old mutation,
    # or of a mutant no longer sampled, is left out)
    muts = enumerate_mutants(ROOT, rule_files(), set(cfg["exclude_operators"]))
    wanted = {m.id: m for m in sample(muts, cfg["sample"], cfg["seed"])}
    sources = {rel: (ROOT / rel).read_text(encoding="utf-8") for rel in rule_files()}
    for r in results:
        if r["kind"] == "mutant" and r["status"] in ("killed", "survived"):
            if r["status"] == "killed" and (r["file"], r["tree"]) in broken:
                continue
            if r["status"] == "killed" and set(failing_tests(r.get("tail", ""))) & bad_tests:
                continue
            m = wanted.get(r["id"])
            if m is None:
                continue
            mutated = mutate(sources[m.file], m) or ""
            if not competent(mutated, m.file) or diff_lines(sources[m.file], mutated) != r["diff"]:
                continue
            first.setdefault(r["id"], r)
            latest[r["id"]] = r
    classes = {}
    cpath = HERE / "survivors.toml"
    if cpath.exists():
        with open(cpath, "rb") as f:
            classes = tomllib.load(f).get("survivor", {})

    equivalent = {i for i, c in classes.items() if c.get("class", "").startswith("equivalent")}

    def score(recs: list[dict]) -> dict:
        killed = sum(r["status"] == "killed" for r in recs)
        timeouts = sum(r["status"] == "killed" and r.get("outcome") in ("timeout", "cpu-limit") for r in recs)
        eq = sum(r["status"] == "survived" and r["id"] in equivalent for r in recs)
        n = len(recs)
        return {
            "killed": killed, "total": n, "score": round(killed / n, 3) if n else None,
            "timeouts": timeouts, "equivalent": eq,
            "score_without_equivalent": round(killed / (n - eq), 3) if n - eq else None,
        }  # fmt: skip

    dirs = list(DIRECTIONS.values())
    report = {"sample": len(latest), "seed": cfg["seed"], "before": {}, "after": {}, "survivors": []}
    for label, recs in (("before", first), ("after", latest)):
        report[label]["all"] = score(list(recs.values()))
        for d in dirs:
            report[label][d] = score([r for r in recs.values() if direction(r["file"]) == d])
    for r in sorted(latest.values(), key=lambda r: (r["file"], r["line"])):
        if first[r["id"]]["status"] == "survived":
            c = classes.get(r["id"], {})
            report["survivors"].append({
                "id": r["id"], "where": f"{r['file']}:{r['line']}", "operator": r["operator"],
                "diff": r["diff"], "now": r["status"], "class": c.get("class", "unclassified"),
                "unrun": r.get("outcome") == "no-test-runs-it",
                "note": c.get("note", ""),
            })  # fmt: skip
    (HERE / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [
        "# Mutation testing report",
        "",
        "Written by `tools/mutation/run.py report` (see *Mutation testing* in CONTRIBUTING.md).",
        f"Run: {report['sample']} of the {cfg['sample']}-mutant sample (cosmic-ray operators, seed",
        f"{cfg['seed']}, stratified by rule file), each against the tests of its family that ran its",
        "statement unmutated. *Before*: each mutant's first run; *after*: the survivors run again once",
        "tests were added for them. Timeouts (CPU or wall budget) count as kills, as in cosmic-ray;",
        "*w/o equivalent*: the score with the survivors classed as equivalent mutants left out.",
        "",
        "| direction | mutants | killed before | score before | killed after | score after "
        "| of which timeouts | equivalent | score after w/o equivalent |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for d in [*dirs, "all"]:
        b, a = report["before"][d], report["after"][d]
        row = [d, b["total"], b["killed"], _pct(b["score"]), a["killed"], _pct(a["score"]), a["timeouts"],
               a["equivalent"], _pct(a["score_without_equivalent"])]  # fmt: skip
        lines.append("| " + " | ".join(map(str, row)) + " |")
    lines += ["", "## Surviving mutants", "", "| where | mutation | class | now | note |"]
    lines.append("| --- | --- | --- | --- | --- |")
    for s in report["survivors"]:
        old = " ".join(x[1:].strip() for x in s["diff"] if x[0] == "-").replace("|", "\\|")
        new = " ".join(x[1:].strip() for x in s["diff"] if x[0] == "+").replace("|", "\\|")
        lines.append(f"| `{s['where']}` | `{old}` → `{new}` | {s['class']} | {s['now']} | {s['note']} |")
    out = ROOT / "docs" / "mutation-report.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())


COVERAGE_ARGS = [
    "--cov", "--cov-context=test", "--cov-report=", "--durations=0", "-p", "no:cacheprovider", "-p", "covctx",
    # every test's line, the fastest too: a test that runs no source line itself (it reads what
    # its module's fixture computed) is known to the map only from this list
    "--durations-min=0",
]  # fmt: skip


def coverage_command(cfg: dict, rc: Path, extra: list[str]) -> list[str]:
    """The default test command (CONTRIBUTING.md: ``pytest -q -n 2 --dist worksteal``) measured
    with one coverage context per test and every test's duration printed."""
    return [cfg["test_python"], "-m", "pytest", "-q", "-n", "2", "--dist", "worksteal",
            f"--cov-config={rc}", *COVERAGE_ARGS, *extra]  # fmt: skip


def cmd_covmap(cfg: dict, args) -> None:
    if args.covcmd == "build":
        out = Path(args.out) if args.out else covmap_path(cfg)
        tree = Path(args.tree).resolve() if args.tree else ROOT
        m = covmap.build(Path(args.data), Path(args.log) if args.log else None, tree, out)
        print(f"{out}: {len(m['tests'])} tests, {len(m['files'])} source files, tree {tree} ({m['key']})")
        return
    where = Path(args.dir) if args.dir else scratch_dir(cfg) / "coverage"
    where.mkdir(parents=True, exist_ok=True)
    data = where / ".coverage"
    for old in where.glob(".coverage*"):
        old.unlink()
    rc = where / "coveragerc"
    rc.write_text(
        "[run]\nsource =\n" + "".join(f"    {ROOT / d}\n" for d in testmap.SOURCE_DIRS)
        + f"relative_files = True\ndata_file = {data}\n"
        # subprocesses too, each credited to the test that started it (covctx.py)
        + "patch = subprocess\n"
    )  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(Path(__file__).parent)]))
    where_from = subprocess.run(
        [cfg["test_python"], "-c", "import converter.frontends as f, converter.backends as b; "
         "print(f.__path__[0]); print(b.__path__[0])"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    if any(not Path(p).resolve().is_relative_to(ROOT) for p in where_from):
        link_packages(ROOT)  # a work tree without its links imports another tree's frontends/backends
    cmd = coverage_command(cfg, rc, args.pytest_args)
    log = where / "pytest.log"
    print(f"{' '.join(cmd)}\n  (in {ROOT}, output to {log})", flush=True)
    with log.open("w") as out:
        rc_ = subprocess.run(
            ["nice", "-n", "10", *cmd], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    print(f"pytest exit {rc_.returncode}; {tail_of(log, 1)}", flush=True)
    out = Path(args.out) if args.out else covmap_path(cfg)
    m = covmap.build(data, log, ROOT, out)
    print(f"{out}: {len(m['tests'])} tests, {len(m['files'])} source files ({m['key']})")


def cmd_uncovered(cfg: dict, args) -> None:
    text = covmap.uncovered_text(covmap.CovMap.load(covmap_path(cfg, args)), not args.no_lines)
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list", help="mutants per rule file and the sample's first ones")
    ls.add_argument("--sample", type=int)
    ls.add_argument("--show", type=int, default=20)
    r = sub.add_parser("run", help="run the sampled mutants not run yet")
    r.add_argument("--sample", type=int, help="sample size (default: config.toml's fresh_sample / sample)")
    how = r.add_mutually_exclusive_group()
    how.add_argument(
        "--fresh", action="store_true", help="(the default) a new random sample over every file under "
        "converter/, frontends/, backends/, with a new seed (printed, and recorded with the results)",
    )  # fmt: skip
    how.add_argument(
        "--changed", nargs="?", const="main", metavar="BASE",
        help="a new random sample over only the source files the branch changed since it left BASE "
        "(git diff $(git merge-base BASE HEAD), uncommitted changes included; default BASE: main)",
    )  # fmt: skip
    how.add_argument(
        "--files", nargs="+", metavar="FILE",
        help="a new random sample over only these source files (paths from the repository root), "
        "to harden one file's tests; its score is that file's, not the package's",
    )  # fmt: skip
    how.add_argument("--fixed", action="store_true", help="the fixed sample of the rule files (config seed)")
    r.add_argument("--seed", type=int, help="the seed of a fresh/changed run (default: a new random one)")
    r.add_argument("--mutant-wall", type=float, help="wall seconds a mutant may take (fresh/changed runs)")
    r.add_argument(
        "--collect-min", type=int, help="record a test file's lines only when this many mutants "
        "still to run need it (default: config.toml's collect_min_mutants / fresh_collect_min_mutants)",
    )  # fmt: skip
    r.add_argument(
        "--file-map", action="store_true", help="fresh/changed runs: select each mutant's tests by "
        "testmap.py's file map and line records of test files (no coverage map)",
    )  # fmt: skip
    r.add_argument("--covmap", help="the coverage map to select tests by (default: <scratch>/covmap.json.gz)")
    r.add_argument(
        "--budget", type=float, help="seconds of recorded test time a mutant may run (default: config.toml's "
        "covmap_budget)",
    )  # fmt: skip
    r.add_argument("--limit", type=int, help="run only the first N of the sample's order")
    r.add_argument(
        "--shard",
        help="K/N: run only mutants K, K+N, K+2N... of the order (1-based), e.g. one of N work trees "
        "running the same seed at once; join their results files for `report`",
    )
    r.add_argument("--until", help="HH:MM UTC: start no mutant that would end after it")
    r.add_argument("--rerun-survivors", action="store_true")
    r.add_argument("--ids", help="comma-separated mutant ids to run (again)")
    r.add_argument(
        "--adopt", help="a results.jsonl of an earlier run: take its results of this sample's mutants "
        "whose mutation (diff) is the same, rather than run them again",
    )  # fmt: skip
    s = sub.add_parser("show", help="the diff of one mutant")
    s.add_argument("id")
    c = sub.add_parser("check", help="one mutant against some tests (default: its family's)")
    c.add_argument("id")
    c.add_argument("tests", nargs="*")
    rp = sub.add_parser("report", help="write docs/mutation-report.md and tools/mutation/report.json")
    rp.add_argument("--results", help="results.jsonl to read (default: the scratch directory's)")
    rp.add_argument(
        "--run", help="the results of a fresh or changed run (<scratch>/runs/<mode>-<seed>.jsonl)"
    )
    rp.add_argument("--print-only", action="store_true", help="print the fresh run's section, write nothing")
    cv = sub.add_parser("covmap", help="measure the default test run's coverage per test and build the map")
    cvs = cv.add_subparsers(dest="covcmd", required=True)
    me = cvs.add_parser(
        "measure", help="run the default test command with coverage contexts (~25 min), then build"
    )  # fmt: skip
    me.add_argument("--dir", help="where the coverage data and the log go (default: <scratch>/coverage)")
    me.add_argument("--out", help="the map (default: <scratch>/covmap.json.gz)")
    me.add_argument("pytest_args", nargs="*", help="more pytest arguments (a selection: not the default run)")
    bd = cvs.add_parser("build", help="build the map of a .coverage file and the output of its run")
    bd.add_argument("--data", required=True, help="the .coverage file (--cov-context=test)")
    bd.add_argument("--log", help="the run's output (--durations=0: the tests' durations)")
    bd.add_argument("--tree", help="the tree the run measured (default: this work tree)")
    bd.add_argument("--out", help="the map (default: <scratch>/covmap.json.gz)")
    un = sub.add_parser("uncovered", help="per source file, the statements the default test run never runs")
    un.add_argument("--covmap", help="the coverage map (default: <scratch>/covmap.json.gz)")
    un.add_argument("--out", help="write the listing there (default: stdout)")
    un.add_argument("--no-lines", action="store_true", help="counts only, not the line numbers")
    args = p.parse_args(argv)
    cfg = load_config()
    cmds = {"list": cmd_list, "run": cmd_run, "show": cmd_show, "check": cmd_check, "report": cmd_report,
            "covmap": cmd_covmap, "uncovered": cmd_uncovered}  # fmt: skip
    cmds[args.cmd](cfg, args)


if __name__ == "__main__":
    sys.exit(main())
