"""``convert inspect``: signature, dropped inputs, parameters and op histogram of any file."""

import argparse
import json

import jax.numpy as jnp
import numpy as np
import pytest
import torch

import converter
from converter.tools import cli


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.unused = torch.nn.Parameter(torch.ones(7))

    def forward(self, x, ignored):
        return self.fc(x).relu()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("inspect") / "net.shlo"
    converter.from_torch(Net().eval(), (torch.randn(2, 4), torch.randn(5))).save(path)
    return path


def test_text_report(saved, capsys):
    assert cli.main(["inspect", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "source: torch" in out
    assert "args[0]: float32[2, 4]" in out
    assert "args[1]: float32[5]  [dropped: unused]" in out
    assert "unused: float32[7]" in out and "[dropped: unused]" in out
    assert "stablehlo.dot_general" in out


def test_json_report(saved, capsys):
    assert cli.main(["inspect", "--json", str(saved)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["dropped_inputs"] == ["unused", "args[1]"]
    assert rep["parameters"]["count"] == 3 and rep["parameters"]["bytes"] == (12 + 3 + 7) * 4
    assert rep["ops"]["stablehlo.dot_general"] == 1


def test_reads_what_convert_writes(tmp_path, capsys):
    src = tmp_path / "f.mlir"
    out = tmp_path / "f.jax"
    from jax import jit

    src.write_text(jit(lambda x: jnp.sin(x) * 2).lower(np.ones(3, np.float32)).as_text())
    assert cli.main([str(src), "-o", str(out)]) == 0
    assert cli.main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "source: jax" in text and "stablehlo.sine" in text


def test_missing_file_exits_2(tmp_path, capsys):
    assert cli.main(["inspect", str(tmp_path / "nope.shlo")]) == 2
    assert "nope.shlo" in capsys.readouterr().err


def test_from_jax_reads_a_serialized_exported(tmp_path):
    out = tmp_path / "g.jax"
    src = tmp_path / "g.mlir"
    from jax import jit

    src.write_text(jit(lambda x: x * 3).lower(np.ones(2, np.float32)).as_text())
    assert cli.main([str(src), "-o", str(out)]) == 0
    module = cli.load_input(str(out), None, None)
    np.testing.assert_allclose(module.to_jax()(np.ones(2, np.float32)), [3.0, 3.0])


def test_a_jax_artifact_reports_its_baked_in_weights(saved, tmp_path, capsys):
    """A .jax artifact holds its weights as constants, not parameters: inspect counts them."""
    out = tmp_path / "net.jax"
    assert cli.main([str(saved), "-o", str(out)]) == 0
    capsys.readouterr()
    assert cli.main(["inspect", "--json", str(out)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["parameters"]["count"] == 0
    weights = (12 + 3) * 4  # fc.weight and fc.bias; `unused` was dropped
    assert rep["constants"]["bytes"] >= weights and rep["constants"]["elements"] >= 15
    assert cli.main(["inspect", str(out)]) == 0
    assert "constants (baked into the program): " in capsys.readouterr().out


def test_render_counts_the_op_kinds_past_top(saved):
    from converter.tools import inspection

    rep = inspection.report(converter.load(saved))
    kinds = len(rep["ops"])
    assert kinds >= 3
    text = inspection.render(rep, top=2)
    assert text.endswith(f"  ... {kinds - 2} more op kinds")
    listed = text.split("\nops (")[1].splitlines()[1:]  # after the "ops (N total):" line
    assert [line.split()[1] for line in listed[:2]] == list(rep["ops"])[:2] and len(listed) == 3
    assert "more op kinds" not in inspection.render(rep, top=kinds)


def test_render_lists_twenty_op_kinds_by_default_as_the_cli(saved):
    """``render`` without ``top`` lists 20 op kinds, the ``--top`` default of ``convert inspect``."""
    from converter.tools import inspection

    rep = inspection.report(converter.load(saved))
    rep["ops"] = {f"stablehlo.op{i}": 21 - i for i in range(21)}
    text = inspection.render(rep)
    assert text.endswith("  ... 1 more op kinds")
    assert "stablehlo.op19" in text and "stablehlo.op20" not in text
    parser = argparse.ArgumentParser()
    inspection.add_arguments(parser)
    assert parser.parse_args([str(saved)]).top == 20


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (1023, "1023.0 B"),
        (1024, "1.0 KiB"),
        (3 * 1024**4, "3.0 TiB"),
        (1024**5, "1024.0 TiB"),
        (2048**5, "32768.0 TiB"),
    ],
)
def test_byte_sizes_past_the_largest_unit_stay_in_tib(n, text):
    from converter.tools import inspection

    assert inspection._fmt_bytes(n) == text
