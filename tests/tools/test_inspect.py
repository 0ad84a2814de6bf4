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


def test_byte_sizes_below_one_kib():
    """Nothing is "0 B"; one byte is "1.0 B" (no logarithm of zero)."""
    from converter.tools import inspection

    assert inspection._fmt_bytes(0) == "0 B"
    assert inspection._fmt_bytes(1) == "1.0 B"


def test_largest_parameters_come_first_and_top_bounds_them(saved):
    """``largest`` lists parameters by size, biggest first, at most ``top`` of them, each
    with its bytes (float32: 4 an element) and whether the program still uses it."""
    from converter.tools import inspection

    module = converter.load(saved)
    rep = inspection.report(module)
    largest = rep["parameters"]["largest"]
    assert [(p["name"], p["bytes"], p["kept"]) for p in largest] == [
        ("fc.weight", 48, True),
        ("unused", 28, False),
        ("fc.bias", 12, True),
    ]
    assert rep["parameters"]["elements"] == 12 + 3 + 7
    assert [p["name"] for p in inspection.report(module, top=2)["parameters"]["largest"]] == [
        "fc.weight",
        "unused",
    ]


_CONSTANTS = """
func.func public @main(%x: tensor<3xf32>, %y: tensor<2xi32>)
    -> (tensor<3xf32>, tensor<4xf32>, tensor<2xi32>) {
  %c = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %s = stablehlo.constant dense<5.0> : tensor<4xf32>
  %k = stablehlo.constant dense<7> : tensor<i32>
  %a = stablehlo.add %x, %c : tensor<3xf32>
  %b = stablehlo.broadcast_in_dim %k, dims = [] : (tensor<i32>) -> tensor<2xi32>
  %d = stablehlo.multiply %y, %b : tensor<2xi32>
  return %a, %s, %d : tensor<3xf32>, tensor<4xf32>, tensor<2xi32>
}
"""


def test_constants_count_tensors_and_a_splat_stores_one_element():
    """Of the three constants, the scalar is not counted; the splat of 4 elements stores one:
    2 tensors, 3 + 4 elements, (3 + 1) * 4 bytes. A StableHLO file's inputs are all kept."""
    from converter.tools import inspection

    rep = inspection.report(converter.from_stablehlo(_CONSTANTS))
    assert rep["constants"] == {"count": 2, "elements": 7, "bytes": 16}
    assert [(r["name"], r["kept"]) for r in rep["inputs"]] == [("args[0]", True), ("args[1]", True)]
    assert rep["dropped_inputs"] == [] and rep["parameters"]["count"] == 0
    assert rep["ops"]["stablehlo.constant"] == 3


def test_render_shows_mesh_placements_partition_specs_and_dropped_leaves():
    """The text of every part of a report: meta, the mesh and its device count, partition
    specs (a tuple for several mesh axes), host placements, dropped inputs and parameters
    (never outputs), sizes, host functions and the op total."""
    from converter.tools import inspection

    rep = {
        "source": "torch",
        "meta": {"model": "Net"},
        "mesh": {"data": 2, "model": 4},
        "inputs": [
            {
                "name": "args[0]",
                "shape": [8, 4],
                "dtype": "float32",
                "sharding": ["data", None],
                "kept": True,
            },
            {"name": "args[1]", "shape": [3], "dtype": "int64", "memory_kind": "pinned_host", "kept": False},
        ],
        "outputs": [
            {"name": "outputs[0]", "shape": [8, 2], "dtype": "float32", "sharding": [["data", "model"], None]}
        ],
        "parameters": {
            "count": 2,
            "elements": 1536,
            "bytes": 6144,
            "largest": [
                {"name": "w", "shape": [512, 2], "dtype": "float32", "sharding": [None, "model"]}
                | {"kept": True, "kind": "parameter", "bytes": 4096},
                {
                    "name": "b",
                    "shape": [512],
                    "dtype": "float32",
                    "kept": False,
                    "kind": "buffer",
                    "bytes": 2048,
                },
            ],
        },
        "constants": {"count": 1, "elements": 1234567, "bytes": 0},
        "host_functions": ["host_fn", "other"],
        "ops": {"stablehlo.add": 3, "stablehlo.dot_general": 2},
    }
    assert inspection.render(rep) == (
        "source: torch  ({'model': 'Net'})\n"
        "mesh: data=2, model=4 (8 devices)\n"
        "inputs:\n"
        "  args[0]: float32[8, 4] P('data', None)\n"
        "  args[1]: int64[3]  @pinned_host  [dropped: unused]\n"
        "outputs:\n"
        "  outputs[0]: float32[8, 2] P(('data', 'model'), None)\n"
        "parameters: 2 tensors, 1,536 elements, 6.0 KiB\n"
        "  w: float32[512, 2] P(None, 'model') 4.0 KiB (parameter)\n"
        "  b: float32[512] 2.0 KiB (buffer)  [dropped: unused]\n"
        "constants (baked into the program): 1 tensors, 1,234,567 elements, 0 B\n"
        "host-placed functions: host_fn, other\n"
        "ops (5 total):\n"
        "       3  stablehlo.add\n"
        "       2  stablehlo.dot_general"
    )
    plain = {**rep, "meta": {}, "mesh": None, "host_functions": []}
    text = inspection.render(plain)
    assert text.startswith("source: torch\ninputs:\n") and "host-placed functions: none\n" in text


def test_report_rows_carry_host_placements_only_where_given():
    """An argument or result in host memory (``mhlo.memory_kind``) carries it; others have no
    ``memory_kind`` entry and outputs no ``kept`` one."""
    from converter.tools import inspection

    module = converter.from_stablehlo(
        'func.func public @main(%x: tensor<2xf32> {mhlo.memory_kind = "pinned_host"}, %y: tensor<2xf32>)'
        ' -> (tensor<2xf32> {mhlo.memory_kind = "pinned_host"}) {\n'
        "  %a = stablehlo.add %x, %y : tensor<2xf32>\n  return %a : tensor<2xf32>\n}\n"
    )
    rep = inspection.report(module)
    assert rep["inputs"] == [
        {"name": "args[0]", "shape": [2], "dtype": "float32", "memory_kind": "pinned_host", "kept": True},
        {"name": "args[1]", "shape": [2], "dtype": "float32", "kept": True},
    ]
    assert rep["outputs"] == [
        {"name": "outputs[0]", "shape": [2], "dtype": "float32", "memory_kind": "pinned_host"}
    ]
