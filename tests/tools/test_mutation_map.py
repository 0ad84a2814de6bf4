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
