"""The ``convert`` command: every source/target pair it offers, and bad input (exit status 2,
one paragraph on stderr, no output file)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import jax
import numpy as np
import pytest
import torch

import converter
from converter.tools import cli

TINY = textwrap.dedent(
    """
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 4)

        def forward(self, x, idx):
            return torch.tanh(self.lin(x)) * idx

    def factory():
        torch.manual_seed(0)
        return Tiny().eval(), (torch.randn(3, 8), torch.arange(12, dtype=torch.int64).reshape(3, 4))

    def with_kwargs():
        model, (x, idx) = factory()
        return model, (x,), {"idx": idx}

    def not_a_pair():
        return factory()[0]

    def not_a_model():
        return "model", (torch.ones(1),)

    def bare_tensor_args():
        return factory()[0], torch.ones(3, 8)

    def raises():
        raise RuntimeError("weights not found")

    class NotTraceable(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow: torch.export refuses
                return x
            return -x

    def untraceable():
        return NotTraceable(), (torch.ones(2),)

    class Mystery(torch.nn.Module):
        def forward(self, x):
            y = torch.ops.convert_cli_test.mystery(x)
            return torch.ops.convert_cli_test.mystery(y) + 1

    def unsupported():
        return Mystery(), (torch.ones(2),)
    """
)


@torch.library.custom_op("convert_cli_test::mystery", mutates_args=())
def _mystery(x: torch.Tensor) -> torch.Tensor:
    """An op no registry will ever have a rule for."""
    return x * 2


@_mystery.register_fake
def _(x):
    return torch.empty_like(x)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.py"
    path.write_text(TINY)
    return path


def _expected(tiny: Path):
    model, args = cli.load_factory(tiny, "factory")[:2]
    with torch.no_grad():
        return [a.numpy() for a in args], model(*args).numpy()


def _run(*argv: str) -> int:
    return cli.main([str(a) for a in argv])


def _assert_bad_input(rc: int, capsys, out: Path, *needles: str) -> str:
    """Status 2, one paragraph naming ``needles`` on stderr, no traceback, no file left."""
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    assert "\n\n" not in err.strip()
    assert err.startswith("convert: error: ")
    for needle in needles:
        assert needle in err
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")] == []
    return err


# --------------------------------------------------------------------------- conversions


def test_help_lists_every_source_and_target(capsys):
    assert _run("--help") == 0
    out = capsys.readouterr().out
    for name in (*cli.LOADERS, *cli.WRITERS):
        assert f"  {name} " in out
    assert "convert --from torch --to jax examples/gpt2.py:factory -o gpt2.jax" in out
    assert "JAX_ENABLE_X64=1" in out


def test_torch_factory_to_jax_reproduces_the_model(tiny, tmp_path, capsys):
    out = tmp_path / "tiny.jax"
    assert _run("--from", "torch", "--to", "jax", f"{tiny}:factory", "-o", out) == 0
    assert "wrote" in capsys.readouterr().out
    inputs, expected = _expected(tiny)
    exported = jax.export.deserialize(bytearray(out.read_bytes()))
    np.testing.assert_allclose(np.asarray(exported.call(*inputs)), expected, rtol=1e-5, atol=1e-5)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("example", ["mlp", "cnn", "gpt2"])
def test_bundled_examples_reproduced_by_the_jax_artifact(example, tmp_path):
    out = tmp_path / f"{example}.jax"
    assert _run("--from", "torch", "--to", "jax", f"{EXAMPLES / example}.py:factory", "-o", out) == 0
    model, args, _ = cli.load_factory(EXAMPLES / f"{example}.py", "factory")
    with torch.no_grad():
        ref = model(*args)
    ref = ref.logits if hasattr(ref, "logits") else ref  # GPT-2: a CausalLMOutput
    got = jax.export.deserialize(bytearray(out.read_bytes())).call(*(a.numpy() for a in args))
    got = got["logits"] if isinstance(got, dict) else got  # model outputs come back as dicts
    np.testing.assert_allclose(np.asarray(got), ref.numpy(), rtol=1e-5, atol=1e-5)


def test_factory_with_kwargs(tiny, tmp_path):
    out = tmp_path / "kw.jax"
    assert _run("--to", "jax", f"{tiny}:with_kwargs", "-o", out) == 0
    (x, idx), expected = _expected(tiny)
    exported = jax.export.deserialize(bytearray(out.read_bytes()))
    np.testing.assert_allclose(np.asarray(exported.call(x, idx=idx)), expected, rtol=1e-5, atol=1e-5)


def test_jax_artifact_for_several_platforms(tiny, tmp_path, capsys):
    out = tmp_path / "multi.jax"
    assert _run("--to", "jax", "--platforms", "cpu,cuda", f"{tiny}:factory", "-o", out) == 0
    exported = jax.export.deserialize(bytearray(out.read_bytes()))
    assert exported.platforms == ("cpu", "cuda")
    inputs, expected = _expected(tiny)
    np.testing.assert_allclose(np.asarray(exported.call(*inputs)), expected, rtol=1e-5, atol=1e-5)
    bad = tmp_path / "bad.jax"
    rc = _run("--to", "jax", "--platforms", "cpu,gpu", f"{tiny}:factory", "-o", bad)
    _assert_bad_input(rc, capsys, bad, "unknown platform(s) ['gpu']", "cuda")
    rc = _run("--to", "module", "--platforms", "cpu", f"{tiny}:factory", "-o", bad)
    _assert_bad_input(rc, capsys, bad, "--platforms applies to --to jax only")


def test_dynamic_dimensions_become_jax_export_symbols(tmp_path):
    src, out = tmp_path / "dyn.mlir", tmp_path / "dyn.jax"
    src.write_text(
        "func.func public @main(%x: tensor<?x3xf32>) -> tensor<?x3xf32> {\n"
        "  %0 = stablehlo.sine %x : tensor<?x3xf32>\n"
        "  return %0 : tensor<?x3xf32>\n}\n"
    )
    assert _run(src, "-o", out) == 0
    exported = jax.export.deserialize(bytearray(out.read_bytes()))
    for n in (1, 4):
        x = np.linspace(0, 1, 3 * n, dtype=np.float32).reshape(n, 3)
        np.testing.assert_allclose(np.asarray(exported.call(x)), np.sin(x), rtol=1e-6)


def test_pt2_to_stablehlo_text_and_bytecode(tiny, tmp_path):
    model, args, _ = cli.load_factory(tiny, "factory")
    pt2 = tmp_path / "tiny.pt2"
    torch.export.save(torch.export.export(model, args), pt2)
    text, bc = tmp_path / "tiny.mlir", tmp_path / "tiny.mlirbc"
    assert _run("--from", "torch", "--to", "stablehlo", pt2, "-o", text) == 0
    assert _run(pt2, "-o", bc) == 0  # --from and --to from the suffixes
    assert "stablehlo.dot_general" in text.read_text() or "stablehlo.dot" in text.read_text()
    assert not bc.read_bytes().startswith(b"module")
    # Both parse back; the parameters are @main arguments, so feed them first.
    m = converter.from_torch(model, args)
    flat = [m.params[p.name] for p in m.signature.params] + [a.numpy() for a in args]
    _, expected = _expected(tiny)
    for path in (text, bc):
        data = path.read_bytes()
        back = converter.from_stablehlo(data.decode() if path.suffix == ".mlir" else data)
        np.testing.assert_allclose(np.asarray(back.to_jax()(*flat)), expected, rtol=1e-5, atol=1e-5)


def test_module_file_round_trip(tiny, tmp_path):
    shlo, out = tmp_path / "tiny.shlo", tmp_path / "tiny.jax"
    assert _run(f"{tiny}:factory", "-o", shlo) == 0
    assert (shlo.stat().st_mode & 0o777) == 0o666 & ~_umask()
    assert _run("--from", "module", "--to", "jax", shlo, "-o", out) == 0
    inputs, expected = _expected(tiny)
    loaded = converter.load(shlo).to_jax()
    np.testing.assert_allclose(np.asarray(loaded(*inputs)), expected, rtol=1e-5, atol=1e-5)
    exported = jax.export.deserialize(bytearray(out.read_bytes()))
    np.testing.assert_allclose(np.asarray(exported.call(*inputs)), expected, rtol=1e-5, atol=1e-5)


def test_onnx_and_torch_targets_and_sources(tiny, tmp_path):
    onnx_file, pt2, back = tmp_path / "tiny.onnx", tmp_path / "tiny.pt2", tmp_path / "back.jax"
    assert _run(f"{tiny}:factory", "-o", onnx_file) == 0  # torch → onnx
    assert _run(onnx_file, "-o", pt2) == 0  # onnx → torch (.pt2 of the converted nn.Module)
    assert _run(pt2, "-o", back) == 0  # torch → jax
    inputs, expected = _expected(tiny)
    import onnxruntime as ort

    session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    feed = dict(zip((i.name for i in session.get_inputs()), inputs, strict=True))
    np.testing.assert_allclose(session.run(None, feed)[0], expected, rtol=1e-5, atol=1e-5)
    reloaded = torch.export.load(pt2).module()
    got = reloaded(*(torch.from_numpy(a) for a in inputs))
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-5, atol=1e-5)
    exported = jax.export.deserialize(bytearray(back.read_bytes()))
    out = exported.call(*inputs)
    out = out[0] if isinstance(out, (tuple, list)) else out
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)


def _batched_onnx(path: Path) -> Path:
    """``y = tanh(x @ w)`` with ``x`` of shape ``("N", 3)``: a graph input with a dim_param."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["y"])],
        "batched",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        initializer=[w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def test_onnx_dim_sizes_symbolic_dimensions(tmp_path, capsys):
    """Without ``--dim`` the .pt2 keeps the dim_param ``N`` dynamic (any batch); ``--dim
    N=2`` specializes it. Both match onnxruntime."""
    import onnxruntime as ort

    model = _batched_onnx(tmp_path / "b.onnx")
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    pt2 = tmp_path / "b.pt2"
    for dims, batches in (((), (1, 2, 7)), (("--dim", "N=2"), (2,))):
        assert _run(model, "-o", pt2, *dims) == 0
        run = torch.export.load(pt2).module()
        for n in batches:
            x = np.linspace(-2, 2, 3 * n, dtype=np.float32).reshape(n, 3)
            (want,) = session.run(None, {"x": x})
            got = run(torch.from_numpy(x))
            got = got[0] if isinstance(got, (tuple, list)) else got
            np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(Exception, match="2"):  # specialized: another batch is refused
        run(torch.zeros(3, 3))
    shlo = tmp_path / "b.shlo"
    assert _run(model, "-o", shlo, "--dim", "N=5") == 0
    assert converter.load(shlo).signature.inputs[0].shape == (5, 3)


def test_onnx_to_onnx_keeps_symbolic_dimensions(tmp_path):
    """Without ``--dim`` the ONNX target stays dynamic (dim_param ``N``, any batch); with it,
    every target converts the specialized model."""
    import onnx
    import onnxruntime as ort

    model = _batched_onnx(tmp_path / "b.onnx")
    want = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    out = tmp_path / "out.onnx"
    assert _run(model, "-o", out) == 0
    (dims,) = [
        [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in onnx.load(out).graph.input
    ]
    assert dims == ["N", 3]
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for n in (1, 4):
        x = np.linspace(-2, 2, 3 * n, dtype=np.float32).reshape(n, 3)
        np.testing.assert_allclose(got.run(None, {"x": x})[0], want.run(None, {"x": x})[0], rtol=1e-6)
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    (expected,) = want.run(None, {"x": x})
    for suffix in (".jax", ".onnx", ".mlir", ".shlo", ".pt2"):
        target = tmp_path / f"static{suffix}"
        assert _run(model, "-o", target, "--dim", "N=2") == 0, suffix
    exported = jax.export.deserialize(bytearray((tmp_path / "static.jax").read_bytes()))
    np.testing.assert_allclose(np.asarray(exported.call(x)[0]), expected, rtol=1e-6)
    static = ort.InferenceSession(str(tmp_path / "static.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(static.run(None, {"x": x})[0], expected, rtol=1e-6)


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--dim", "M=2"], ["unknown symbolic dimension(s) ['M']", "are ['N']"]),
        (["--dim", "N"], ["--dim 'N': expected NAME=SIZE"]),
        (["--dim", "N=-1"], ["--dim 'N=-1': expected NAME=SIZE"]),
        (["--dim", "N=2", "--dim", "N=3"], ["dimension 'N' given two sizes (2 and 3)"]),
    ],
    ids=["unknown-name", "no-size", "negative", "two-sizes"],
)
def test_onnx_dim_errors(tmp_path, capsys, argv, needles):
    model, out = _batched_onnx(tmp_path / "b.onnx"), tmp_path / "b.shlo"
    _assert_bad_input(_run(model, "-o", out, *argv), capsys, out, *needles)


def test_onnx_opset(tiny, tmp_path, capsys):
    import onnx

    out = tmp_path / "t26.onnx"
    assert _run(f"{tiny}:factory", "-o", out, "--opset", "26") == 0
    assert [o.version for o in onnx.load(str(out)).opset_import if o.domain in ("", "ai.onnx")] == [26]
    bad = tmp_path / "t30.onnx"
    rc = _run(f"{tiny}:factory", "-o", bad, "--opset", "30")
    _assert_bad_input(rc, capsys, bad, "--opset 30", "18 to 26")
    jax_out = tmp_path / "t.jax"
    rc = _run(f"{tiny}:factory", "-o", jax_out, "--opset", "26")
    _assert_bad_input(rc, capsys, jax_out, "--opset applies to --to onnx only")


def test_dim_only_with_onnx_sources(tiny, tmp_path, capsys):
    out = tmp_path / "t.shlo"
    rc = _run(f"{tiny}:factory", "-o", out, "--dim", "N=2")
    _assert_bad_input(rc, capsys, out, "--dim applies to --from onnx only, not --from torch")


def test_validate_onnx_with_dim(tmp_path, capsys):
    model = _batched_onnx(tmp_path / "b.onnx")
    report = tmp_path / "r.json"
    rc = _run("validate", model, "--from", "onnx", "--to", "torch", "--dim", "N=4", "--json", report)
    assert rc == 0, capsys.readouterr()
    import json

    data = json.loads(report.read_text())
    assert data["inputs"][0]["shape"] == [4, 3]
    assert [t["status"] for t in data["targets"]] == ["passed"]
    assert _run("validate", model, "--from", "onnx", "--dim", "B=4", "--quiet") == 2
    assert "unknown symbolic dimension(s) ['B']" in capsys.readouterr().err


def test_jax_factory_source(tmp_path, capsys):
    src = tmp_path / "jf.py"
    src.write_text(
        "import jax.numpy as jnp, numpy as np\n"
        "def factory():\n"
        "    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)\n"
        "    return (lambda x, w: jnp.tanh(x) @ w), (x, np.ones((3, 4), np.float32))\n"
        "def wrong():\n"
        "    return 3, ()\n"
    )
    out = tmp_path / "jf.mlir"
    assert _run("--from", "jax", f"{src}:factory", "-o", out) == 0
    assert "stablehlo.tanh" in out.read_text()
    bad = tmp_path / "bad.mlir"
    rc = _run("--from", "jax", f"{src}:wrong", "-o", bad)
    _assert_bad_input(rc, capsys, bad, "model a JAX-traceable function", "builtins.int")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "name, needles",
    [
        ("nosuch", ["has no function 'nosuch'", "factory"]),
        ("not_a_pair", ["must return (model, example_args)", "Tiny"]),
        ("not_a_model", ["its model is a builtins.str"]),
        ("bare_tensor_args", ["its example_args is a torch.Tensor"]),
        ("raises", ["raises() failed: RuntimeError: weights not found"]),
        ("untraceable", ["torch.export could not export NotTraceable"]),
    ],
)
def test_bad_factory(tiny, tmp_path, capsys, name, needles):
    out = tmp_path / "out.jax"
    rc = _run("--from", "torch", "--to", "jax", f"{tiny}:{name}", "-o", out)
    _assert_bad_input(rc, capsys, out, str(tiny), *needles)


def test_factory_file_that_does_not_import(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef factory(:\n")
    out = tmp_path / "out.jax"
    _assert_bad_input(_run(f"{bad}:factory", "-o", out), capsys, out, "bad.py", "SyntaxError")


@pytest.mark.parametrize(
    "name", ["missing.pt2", "missing.py:factory", "missing.mlir", "missing.shlo", "missing.onnx"]
)
def test_missing_input(tmp_path, capsys, name):
    out = tmp_path / "out.jax"
    _assert_bad_input(_run(tmp_path / name, "-o", out, "--to", "jax"), capsys, out, "missing", "no such file")


@pytest.mark.parametrize(
    "name, data, needle",
    [
        ("bad.pt2", b"\x00not a zip archive" * 10, "not a readable torch.export archive"),
        ("bad.mlir", b"func.func @main(%x: tensor<2xf32>) { garbage }", "bad.mlir"),
        ("bad.mlirbc", b"ML\xefR\x00\x01garbage", "bad.mlirbc"),
        ("bad.shlo", b"PK\x03\x04 truncated", "corrupt"),
        ("bad.onnx", b"\x08\x07garbage" * 5, "not a readable ONNX model"),
    ],
)
def test_corrupt_input(tmp_path, capsys, name, data, needle):
    src, out = tmp_path / name, tmp_path / "out.jax"
    src.write_bytes(data)
    _assert_bad_input(_run(src, "-o", out, "--to", "jax"), capsys, out, needle)


def test_unsupported_op_is_named_and_nothing_is_written(tiny, tmp_path, capsys):
    out = tmp_path / "out.jax"
    out.write_bytes(b"previous")  # an existing output survives a failed run untouched
    rc = _run("--to", "jax", f"{tiny}:unsupported", "-o", out)
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "convert_cli_test.mystery.default (x2, first at" in err
    assert f"{tiny}:" in err  # the source line of the first occurrence
    assert out.read_bytes() == b"previous"


def test_unsupported_stablehlo_op_in_the_jax_backend(tmp_path, capsys):
    src, out = tmp_path / "f.mlir", tmp_path / "out.jax"
    src.write_text(
        "func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
        "  %0 = stablehlo.custom_call @no_such_target(%x) : (tensor<2xf32>) -> tensor<2xf32>\n"
        "  return %0 : tensor<2xf32>\n}\n"
    )
    _assert_bad_input(_run(src, "-o", out, "--to", "jax"), capsys, out, "no_such_target")


@pytest.mark.parametrize(
    "argv, needles",
    [
        (["--from", "caffe", "--to", "jax"], ["unknown --from 'caffe'", ", ".join(cli.LOADERS)]),
        (["--from", "torch", "--to", "tflite"], ["unknown --to 'tflite'", ", ".join(cli.WRITERS)]),
        (["--from", "torch"], ["cannot tell the output format", "--to"]),
    ],
)
def test_unsupported_directions_list_the_supported_ones(tiny, tmp_path, capsys, argv, needles):
    out = tmp_path / "out.bin"
    _assert_bad_input(_run(*argv, f"{tiny}:factory", "-o", out), capsys, out, *needles)


def test_usage_error_exits_2(capsys):
    assert _run("model.pt2") == 2  # no -o
    assert "required" in capsys.readouterr().err


def test_verbose_prints_the_traceback(tmp_path, capsys):
    out = tmp_path / "out.jax"
    assert _run(tmp_path / "missing.pt2", "-o", out, "--to", "jax", "--verbose") == 2
    assert "Traceback" in capsys.readouterr().err


def test_internal_error_exits_1(tiny, tmp_path, capsys, monkeypatch):
    def broken(source, options):
        raise ZeroDivisionError("oops")

    monkeypatch.setitem(cli.LOADERS, "torch", cli.Loader(broken, "torch"))
    out = tmp_path / "out.jax"
    assert _run("--from", "torch", "--to", "jax", tiny, "-o", out) == 1
    err = capsys.readouterr().err
    assert "internal error" in err and "ZeroDivisionError: oops" in err and "Traceback" not in err
    assert not out.exists()


# --------------------------------------------------------------------------- real processes


def _clean_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}


def test_console_script_and_a_process_without_the_project(tiny, tmp_path):
    """The installed ``convert`` script writes the artifact; a Python process that cannot
    import this project (``-I -S``, only site-packages on ``sys.path``, no ``.pth`` editable
    hook) runs it with JAX alone."""
    out = tmp_path / "tiny.jax"
    script = Path(sys.executable).with_name("convert")
    run = subprocess.run(
        [script, "--from", "torch", "--to", "jax", f"{tiny}:factory", "-o", out],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    inputs, expected = _expected(tiny)
    for i, a in enumerate(inputs):
        np.save(tmp_path / f"in{i}.npy", a)
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.append({sysconfig.get_paths()["purelib"]!r})
        import importlib.util
        assert importlib.util.find_spec("converter") is None, "the project is importable"
        import jax, numpy as np
        f = jax.export.deserialize(bytearray(open("tiny.jax", "rb").read()))
        out = f.call(*[np.load(f"in{{i}}.npy") for i in range({len(inputs)})])
        np.save("out.npy", np.asarray(out))
        """
    )
    run = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**_clean_env(), "JAX_ENABLE_X64": "1"},
    )
    assert run.returncode == 0, run.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, rtol=1e-5, atol=1e-5)


def test_console_script_bad_input_exit_status(tmp_path):
    out = tmp_path / "out.jax"
    run = subprocess.run(
        [sys.executable, "-m", "converter.tools.cli", tmp_path / "nothing.pt2", "-o", out],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 2
    assert "convert: error:" in run.stderr and "nothing.pt2: no such file" in run.stderr
    assert "Traceback" not in run.stderr
    assert not out.exists()


def test_weights_go_external_from_256_mib(monkeypatch):
    """``--to jax``/``--to onnx`` keep the parameters beside the model from 256 MiB of them
    (docs/cli.md), or from ``$CONVERTER_EXTERNAL_THRESHOLD`` bytes, or always with
    ``--external-weights`` (the parameters here are broadcast views: no memory is taken)."""
    import argparse
    from types import SimpleNamespace

    monkeypatch.delenv("CONVERTER_EXTERNAL_THRESHOLD", raising=False)
    options = argparse.Namespace(external_weights=False)
    mib = 2**20 // 4  # float32 elements in a MiB

    def module(elements: int):
        return SimpleNamespace(params={"w": np.broadcast_to(np.float32(0), (elements,))})

    assert cli._external(module(256 * mib), options)
    assert not cli._external(module(256 * mib - 1), options)
    assert cli._external(module(1), argparse.Namespace(external_weights=True))
    monkeypatch.setenv("CONVERTER_EXTERNAL_THRESHOLD", "4")
    assert cli._external(module(1), options) and not cli._external(SimpleNamespace(params={}), options)


# --------------------------------------------------------------------------- the .jax artifact


class _Scaled(torch.nn.Module):
    def forward(self, x, n: int):
        return x * n


class _Noisy(torch.nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)


def test_jax_artifact_takes_none_for_a_static_input_and_rng_for_a_random_module():
    static = converter.from_torch(_Scaled(), (torch.ones(2), 3))
    exported = cli.export_jax(static)
    assert str(exported.in_tree) == "PyTreeDef(((*, None), {}))"  # the specialized int: None
    np.testing.assert_array_equal(exported.call(np.array([1.0, 2.0], np.float32), None), [3.0, 6.0])
    exported = cli.export_jax(converter.from_torch(_Noisy(), (torch.ones(2, 3),)))
    assert str(exported.in_tree) == "PyTreeDef(((*,), {'rng': *}))"
    assert exported.in_avals[-1].shape == (2,) and exported.in_avals[-1].dtype == np.uint32


def test_jax_export_failure_with_dynamic_dimensions_names_them():
    from converter.errors import ConversionError
    from converter.signature import LEAF, LeafSpec, Signature, args_tree

    sig = Signature(
        params=(),
        inputs=(LeafSpec("args[0]", ("B", 3), "float32"),),
        outputs=(),
        in_tree=args_tree(
            {"kind": "tuple", "children": [LEAF]}, {"kind": "dict", "keys": [], "children": []}
        ),
        out_tree=LEAF,
    )

    def failing(exc):
        def exporter(*a, **k):
            raise exc

        return exporter

    with pytest.raises(
        ConversionError,
        match=r"jax.export with dynamic dimensions \{'args\[0\]': \['B', 3\]\} "
        r"failed: ValueError: shape mismatch$",
    ):
        cli._export(failing(ValueError("shape mismatch\nmore")), sig, [], {})
    with pytest.raises(ConversionError, match=r"failed: ValueError: $"):
        cli._export(failing(ValueError()), sig, [], {})
    with pytest.raises(ConversionError, match="^ours$"):  # the converter's own errors pass through
        cli._export(failing(ConversionError("ours")), sig, [], {})


def test_artifact_weights_as_real_pairs_and_unstorable_dtypes():
    import types

    import ml_dtypes

    from converter.errors import ConversionError
    from converter.signature import LeafSpec

    z = np.array([1 + 2j, 3 - 4j], np.complex128)
    module = types.SimpleNamespace(
        signature=types.SimpleNamespace(params=(LeafSpec("w", (2,), "complex128", kind="param"),)),
        params={"w": z},
    )
    (w,) = cli.artifact_weights(module).values()
    assert w.dtype == np.float64
    np.testing.assert_array_equal(w, [[1.0, 2.0], [3.0, -4.0]])
    module.signature.params = (LeafSpec("w", (2,), "complex64", kind="param"),)
    module.params = {"w": z.astype(np.complex64)}
    assert cli.artifact_weights(module)["w"].dtype == np.float32
    module.signature.params = (LeafSpec("q", (2,), "int4", kind="param"),)
    module.params = {"q": np.array([1, -2], ml_dtypes.int4)}
    with pytest.raises(ConversionError, match="parameter 'q' has dtype int4, which safetensors cannot store"):
        cli.artifact_weights(module)


def test_torch_export_failure_of_the_converted_module(tmp_path, monkeypatch):
    import argparse

    from converter.errors import ConversionError

    module = converter.from_torch(torch.nn.Linear(3, 2), (torch.ones(1, 3),))

    def refuse(*a, **k):
        raise RuntimeError("cannot trace\nsecond line")

    monkeypatch.setattr(torch.export, "export", refuse)
    out = tmp_path / "m.pt2"
    with pytest.raises(
        ConversionError,
        match="torch.export of the converted torch module failed: RuntimeError: cannot trace$",
    ):
        cli.write_torch(module, out, argparse.Namespace())
    assert not out.exists()

    def ours(*a, **k):
        raise ConversionError("the converter's own refusal")

    monkeypatch.setattr(torch.export, "export", ours)
    with pytest.raises(ConversionError, match="^the converter's own refusal$"):  # not wrapped again
        cli.write_torch(module, out, argparse.Namespace())


def test_opset_bounds_are_the_ones_the_help_names():
    """``--opset``: 18 (the default) to 26, both included; only with ``--to onnx``."""
    cli._check_opset(None, "jax")
    for opset in (18, 26):
        cli._check_opset(opset, "onnx")
    for opset in (17, 27):
        with pytest.raises(cli.CliError, match=f"--opset {opset}: the ONNX backend emits opsets 18 to 26"):
            cli._check_opset(opset, "onnx")
    with pytest.raises(cli.CliError, match="--opset applies to --to onnx only, not --to stablehlo"):
        cli._check_opset(18, "stablehlo")


def test_an_output_replacing_the_factory_file_is_refused_before_loading(tmp_path, capsys):
    """``convert model.py:factory -o model.py`` would replace the Python file it converts:
    refused before the factory runs, the file untouched."""
    src = tmp_path / "model.py"
    text = "def factory():\n    raise AssertionError('never called')\n"
    src.write_text(text)
    assert _run(f"{src}:factory", "-o", src, "--to", "module") == 2
    err = capsys.readouterr().err
    assert f"{src} is the input file {src}" in err and "never called" not in err
    assert src.read_text() == text


def test_a_model_whose_shapes_come_from_input_values_has_no_single_stablehlo_form(tmp_path, capsys):
    """An ONNX Reshape to the values of an input ``s``: ``from_onnx`` specializes on ``s`` at
    call time, so there is no one program to write as a .jax, .mlir, .shlo or .pt2 file."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        "reshape_to_values",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])],
    )
    model = tmp_path / "r.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(model))
    out = tmp_path / "r.jax"
    _assert_bad_input(
        _run(model, "-o", out),
        capsys,
        out,
        "r.onnx: the model computes shapes from the values of inputs ['s'], so it has no single jax form",
    )
