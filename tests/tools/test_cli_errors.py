"""Every bad-input class ``convert`` meets: the exit status and the one-paragraph message
now given. :data:`CASES` is the table ``docs/errors.md`` shows (a test checks both list the
same cases). In-process (``cli.main``) except where the real process's behaviour (XLA's log
lines, its exit status) is the point."""

from __future__ import annotations

import json
import linecache
import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

import converter
from converter.tools import cli

ROOT = Path(__file__).resolve().parents[2]

FACTORIES = textwrap.dedent(
    """
    import sys
    import torch

    def factory():
        torch.manual_seed(0)
        return torch.nn.Linear(3, 2).eval(), (torch.randn(2, 3),)

    def bf16():
        torch.manual_seed(0)
        return torch.nn.Linear(3, 2).to(torch.bfloat16).eval(), (torch.randn(2, 3, dtype=torch.bfloat16),)

    def raises():
        raise RuntimeError("weights not found")

    def exits():
        sys.exit(3)

    def wrong():
        return "model"

    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return torch.zeros(int(x.sum().item()))

    def data_dependent():
        return DataDependent(), (torch.ones(3),)
    """
)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A directory with the factories, a good .pt2, .shlo and .jax of them, and bad files."""
    d = tmp_path_factory.mktemp("cli_errors")
    (d / "models.py").write_text(FACTORIES)
    (d / "import_fails.py").write_text("import no_such_module_anywhere\n")
    (d / "import_exits.py").write_text("import sys\nsys.exit(4)\n")
    model, args, _ = cli.load_factory(d / "models.py", "factory")
    torch.export.save(torch.export.export(model, args), d / "good.pt2")
    converter.from_torch(model, args).save(d / "good.shlo")
    assert cli.main([str(d / "good.shlo"), "-o", str(d / "good.jax")]) == 0
    (d / "empty.pt2").write_bytes(b"")
    (d / "truncated.pt2").write_bytes((d / "good.pt2").read_bytes()[:1500])
    (d / "bad.shlo").write_bytes(b"PK\x03\x04 truncated")
    (d / "bad.onnx").write_bytes(b"\x08\x07garbage" * 5)
    (d / "bad.mlir").write_text("func.func @main(%x: tensor<2xf32>) { garbage }")
    (d / "bad.jax").write_bytes(b"not flatbuffers")
    (d / "model.txt").write_text("?")
    (d / "a_file").write_text("")
    _onnx_reading_outside(d / "outside.onnx")
    np.savez(d / "objects.npz", np.array([{"a": 1}], dtype=object))
    np.savez(d / "wrong_shape.npz", np.ones((5, 3), np.float32))
    np.savez(d / "wrong_dtype.npz", np.ones((2, 3), np.int32))
    _shlo_with_manifest(d / "good.shlo", d / "manifest_list.shlo", b"[]")
    manifest = json.loads(zipfile.ZipFile(d / "good.shlo").read("manifest.json"))
    _shlo_with_manifest(d / "good.shlo", d / "string_version.shlo", json.dumps({**manifest, "version": "9"}))
    _shlo_with_manifest(d / "good.shlo", d / "bad_deflate.shlo", json.dumps(manifest), corrupt=True)
    data = zipfile.ZipFile(d / "good.shlo").read("module.mlirbc")
    (d / "truncated.mlirbc").write_bytes(data[: len(data) // 2])
    _onnx_with_huge_dim(d / "huge_dim.onnx")
    (d / "link.pt2").symlink_to(d / "good.pt2")
    os.link(d / "good.pt2", d / "hard.pt2")
    return d


def _shlo_with_manifest(src: Path, dst: Path, manifest, corrupt: bool = False) -> None:
    """A copy of the archive ``src`` with its manifest replaced; ``corrupt``: deflated, with
    bytes of the deflate stream flipped."""
    from tests.zipcraft import Member, build, deflated

    with zipfile.ZipFile(src) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    manifest = manifest.encode() if isinstance(manifest, str) else manifest
    out = []
    for name, data in members.items():
        if name != "manifest.json":
            out.append(Member(name, data))
        elif corrupt:
            raw, crc, size = deflated(manifest)
            out.append(Member(name, raw[:4] + bytes(b ^ 0x5A for b in raw[4:24]) + raw[24:], 8, crc, size))
        else:
            out.append(Member(name, manifest))
    dst.write_bytes(build(out))


def _onnx_with_huge_dim(path: Path) -> None:
    """An ONNX model whose input has a dimension of INT64_MAX."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**63 - 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2**63 - 1])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


def _onnx_reading_outside(path: Path) -> None:
    """An ONNX model whose external data points outside its directory."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    entry = w.external_data.add()
    entry.key, entry.value = "location", "../../../../etc/hostname"
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [], [y], [w])
    onnx.save(helper.make_model(graph), path)


@dataclass(frozen=True)
class Case:
    """One bad-input class: ``argv`` (``{d}`` is the work directory), the exit status and a
    phrase of the message."""

    id: str
    what: str
    argv: tuple[str, ...]
    status: int
    needle: str


CASES = [
    Case("missing-input", "input file missing", ("{d}/missing.pt2", "-o", "{d}/o.shlo"), 2, "no such file"),
    Case("empty-pt2", "empty .pt2", ("{d}/empty.pt2", "-o", "{d}/o.shlo"), 2, "empty file"),
    Case(
        "truncated-pt2",
        "truncated .pt2",
        ("{d}/truncated.pt2", "-o", "{d}/o.shlo"),
        2,
        "not a readable torch.export archive (.pt2)",
    ),
    Case(
        "corrupt-shlo",
        "corrupt .shlo",
        ("{d}/bad.shlo", "-o", "{d}/o.mlir"),
        2,
        "corrupt converter.Module file",
    ),
    Case(
        "corrupt-onnx", "corrupt .onnx", ("{d}/bad.onnx", "-o", "{d}/o.shlo"), 2, "not a readable ONNX model"
    ),
    Case(
        "onnx-data-outside",
        ".onnx whose external data lies outside its directory",
        ("{d}/outside.onnx", "-o", "{d}/o.shlo"),
        2,
        "points outside the directory",
    ),
    Case("corrupt-mlir", "malformed StableHLO text", ("{d}/bad.mlir", "-o", "{d}/o.shlo"), 2, "bad.mlir"),
    Case(
        "corrupt-jax",
        "corrupt .jax",
        ("{d}/bad.jax", "-o", "{d}/o.shlo"),
        2,
        "not a serialized jax.export.Exported",
    ),
    Case(
        "unknown-input-suffix",
        "input suffix says nothing",
        ("{d}/model.txt", "-o", "{d}/o.shlo"),
        2,
        "cannot tell the input format",
    ),
    Case(
        "unknown-output-suffix",
        "output suffix says nothing",
        ("{d}/good.shlo", "-o", "{d}/o.bin"),
        2,
        "cannot tell the output format",
    ),
    Case(
        "unknown-from",
        "unknown --from",
        ("--from", "tf", "{d}/good.shlo", "-o", "{d}/o.mlir"),
        2,
        "unknown --from",
    ),
    Case("no-output", "no -o", ("{d}/good.shlo",), 2, "the following arguments are required: -o"),
    Case(
        "factory-missing",
        "factory not defined",
        ("{d}/models.py:nope", "-o", "{d}/o.shlo"),
        2,
        "has no function 'nope'",
    ),
    Case(
        "factory-import-fails",
        "factory file fails to import",
        ("{d}/import_fails.py:factory", "-o", "{d}/o.shlo"),
        2,
        "importing it failed: ModuleNotFoundError",
    ),
    Case(
        "factory-import-exits",
        "factory file calls sys.exit on import",
        ("{d}/import_exits.py:factory", "-o", "{d}/o.shlo"),
        2,
        "importing it called sys.exit(4)",
    ),
    Case(
        "factory-raises",
        "factory raises",
        ("{d}/models.py:raises", "-o", "{d}/o.shlo"),
        2,
        "raises() failed: RuntimeError: weights not found",
    ),
    Case(
        "factory-exits",
        "factory calls sys.exit(3)",
        ("{d}/models.py:exits", "-o", "{d}/o.shlo"),
        2,
        "exits() called sys.exit(3)",
    ),
    Case(
        "factory-wrong",
        "factory returns no model",
        ("{d}/models.py:wrong", "-o", "{d}/o.shlo"),
        2,
        "must return",
    ),
    Case(
        "export-fails",
        "torch.export refuses the model",
        ("{d}/models.py:data_dependent", "-o", "{d}/o.shlo"),
        2,
        "torch.export could not export DataDependent",
    ),
    Case(
        "output-parent-is-file",
        "a file where the output's directory should be",
        ("{d}/good.shlo", "-o", "{d}/a_file/o.mlir"),
        2,
        "a_file is a file, not a directory",
    ),
    Case(
        "output-virtual-fs",
        "output on a virtual file system",
        ("{d}/good.shlo", "-o", "/proc/o.mlir"),
        2,
        "cannot write /proc/o.mlir",
    ),
    Case(
        "output-is-dir",
        "output is a directory",
        ("{d}/good.shlo", "-o", "{d}", "--to", "stablehlo"),
        2,
        "is a directory",
    ),
    Case(
        "dim-not-onnx",
        "--dim with a non-ONNX source",
        ("{d}/good.shlo", "-o", "{d}/o.mlir", "--dim", "N"),
        2,
        "--dim applies",
    ),
    Case(
        "bad-opset",
        "--opset out of range",
        ("{d}/good.shlo", "-o", "{d}/o.onnx", "--opset", "9"),
        2,
        "--opset 9",
    ),
    Case(
        "validate-inputs-objects",
        "validate --inputs with an object array",
        ("validate", "{d}/good.shlo", "--to", "jax", "--inputs", "{d}/objects.npz"),
        2,
        "not an .npz of numeric arrays",
    ),
    Case(
        "validate-inputs-shape",
        "validate --inputs with a wrong shape",
        ("validate", "{d}/good.shlo", "--to", "jax", "--inputs", "{d}/wrong_shape.npz"),
        2,
        "input args[0] is float32[5, 3], the model takes float32[2, 3]",
    ),
    Case(
        "validate-inputs-dtype",
        "validate --inputs with a wrong dtype",
        ("validate", "{d}/good.shlo", "--to", "jax", "--inputs", "{d}/wrong_dtype.npz"),
        2,
        "input args[0] is int32[2, 3]",
    ),
    Case(
        "validate-inputs-missing",
        "validate --inputs file missing",
        ("validate", "{d}/good.shlo", "--to", "jax", "--inputs", "{d}/none.npz"),
        2,
        "no such file",
    ),
    Case(
        "validate-unknown-suffix",
        "validate input suffix says nothing",
        ("validate", "{d}/model.txt"),
        2,
        "cannot tell the source format",
    ),
    Case("inspect-missing", "inspect a missing file", ("inspect", "{d}/missing.shlo"), 2, "no such file"),
    Case(
        "shlo-manifest-list",
        ".shlo whose manifest is a JSON list",
        ("{d}/manifest_list.shlo", "-o", "{d}/o.mlir"),
        2,
        "manifest_list.shlo: corrupt converter.Module manifest (a JSON list, not an object)",
    ),
    Case(
        "shlo-string-version",
        ".shlo whose manifest version is a string",
        ("{d}/string_version.shlo", "-o", "{d}/o.mlir"),
        2,
        "string_version.shlo: corrupt converter.Module manifest (version '9')",
    ),
    Case(
        "shlo-bad-deflate",
        ".shlo with a corrupted deflate member",
        ("{d}/bad_deflate.shlo", "-o", "{d}/o.mlir"),
        2,
        "bad_deflate.shlo: member manifest.json is corrupt",
    ),
    Case(
        "truncated-mlirbc",
        "truncated .mlirbc",
        ("{d}/truncated.mlirbc", "-o", "{d}/o.shlo"),
        2,
        "truncated.mlirbc: not StableHLO bytecode",
    ),
    Case(
        "validate-huge-dim",
        "validate an ONNX model whose input dimension is INT64_MAX",
        ("validate", "{d}/huge_dim.onnx", "--quiet"),
        2,
        "huge_dim.onnx: random input x (float32[9223372036854775807]) claims",
    ),
    Case(
        "output-is-input",
        "OUT is the input file",
        ("{d}/good.pt2", "-o", "{d}/good.pt2"),
        2,
        "good.pt2 is the input file",
    ),
    Case(
        "output-is-input-link",
        "OUT is a symbolic link to the input",
        ("{d}/good.pt2", "-o", "{d}/link.pt2"),
        2,
        "link.pt2 is the input file",
    ),
    Case(
        "output-is-input-hard-link",
        "OUT is a hard link to the input",
        ("{d}/hard.pt2", "-o", "{d}/good.pt2"),
        2,
        "good.pt2 is the input file",
    ),
]


def _argv(case: Case, d: Path) -> list[str]:
    return [a.format(d=d) for a in case.argv]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input(case: Case, work: Path, capsys):
    rc = cli.main(_argv(case, work))
    err = capsys.readouterr().err
    assert rc == case.status, err
    assert case.needle in err, err
    assert "Traceback" not in err and "\n\n" not in err.strip()
    assert err.startswith(("convert: error: ", "usage: convert"))
    assert not any(p.name.startswith(("o.", ".o.")) for p in work.iterdir())


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_output_directory(work: Path, capsys):
    ro = work / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert cli.main([str(work / "good.shlo"), "-o", str(ro / "o.mlir")]) == 2
        assert "Permission denied" in capsys.readouterr().err
    finally:
        ro.chmod(0o755)


def test_a_bug_is_exit_1(work: Path, capsys, monkeypatch):
    def broken(module, out, options):
        raise KeyError("a converter bug")

    monkeypatch.setitem(cli.WRITERS, "stablehlo", cli.Writer(broken, "x", (".mlir",)))
    assert cli.main([str(work / "good.shlo"), "-o", str(work / "o.mlir")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("convert: internal error") and "KeyError" in err and "Traceback" not in err


def test_missing_output_directories_are_created(work: Path, capsys):
    out = work / "new" / "sub" / "x.mlir"
    assert cli.main([str(work / "good.shlo"), "-o", str(out)]) == 0
    assert out.is_file()


def test_errors_page_lists_every_case():
    page = (ROOT / "docs" / "errors.md").read_text()
    for case in CASES:
        assert f"`{case.id}`" in page, f"docs/errors.md has no row for {case.id}"


# --------------------------------------------------------------------------- validate


@pytest.mark.parametrize("name", ["good.pt2", "good.jax", "good.shlo"])
def test_validate_takes_what_convert_takes(name, work: Path, capsys):
    """--from inferred from the suffix; .pt2 with its saved example inputs."""
    assert cli.main(["validate", str(work / name), "--to", "jax", "--quiet"]) == 0, capsys.readouterr().err


def test_validate_compares_bfloat16_onnx_through_a_float32_view(work: Path):
    """onnxruntime's NumPy bridge has no bfloat16: the ONNX row is run with float32 at the
    graph's boundary (exact) and compared, never a false "failed"."""
    from converter.tools import validate as V

    report = V.validate(f"{work}/models.py:bf16", targets=("jax", "onnx"), progress=False)
    rows = {t.target: t for t in report.targets}
    assert rows["onnx"].status == "passed", rows["onnx"].reason
    assert [r.dtype for r in rows["onnx"].rows] == ["bfloat16"]
    assert report.passed


def test_api_errors_are_conversion_errors(capfd):
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return torch.zeros(int(x.sum().item()))

    with pytest.raises(converter.ExportError, match="GuardOnDataDependentSymNode") as info:
        converter.from_torch(DataDependent(), (torch.ones(3),))
    assert info.value.__cause__ is not None and "def forward" in info.value.diagnostics
    with pytest.raises(converter.ExportError) as info:
        converter.call_torch(torch.nn.Linear(4, 2), np.ones((3, 5), np.float32))
    assert isinstance(info.value.__cause__, RuntimeError)
    out, err = capfd.readouterr()
    assert "def forward" not in out + err and "fake_tensor" not in err, err  # torch's chatter held back


def _traced_failure(frames: list[str], message: str, last: str = "raise RuntimeError(message)") -> Exception:
    """The exception whose traceback runs through ``frames`` (file names, outermost first;
    the last one runs ``last``, which fails with ``message``), built from code compiled
    under those names (their lines in ``linecache``, as a traceback shows them)."""
    names = [f"f{i}" for i in range(len(frames))]
    scope: dict = {"message": message}
    for i, (name, filename) in enumerate(zip(names, frames, strict=True)):
        body = f"    {names[i + 1]}()\n" if i + 1 < len(frames) else f"    {last}\n"
        if i == 0:  # the outermost frame catches, so the traceback starts there
            body = f"    try:\n    {body}    except Exception as e:\n        return e\n"
        source = f"def {name}():\n{body}"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), scope)
    return scope[names[0]]()


def test_classify_decides_by_the_frames_after_the_converters_last():
    """A failure in the converter's own code (no user frame) is the model's only when a
    tracing framework's frame comes after the converter's last frame: torch.export failing
    inside a call the converter made; a torch.export frame that called back into the
    converter, which then failed, is a converter bug."""
    from converter import _contract

    ours, ours2 = (str(_contract._REPO / "converter" / f"_fake_{i}.py") for i in (1, 2))
    export = sysconfig.get_paths()["purelib"] + "/torch/export/_fake_trace.py"
    message = (
        "boom\nsecond line\nThe following call raised this error:\n"
        '  File "/m/model.py", line 12, in forward\n    if x.sum() > 0:\n'
    )
    export_last = _contract.classify(_traced_failure([ours, ours2, export], message), "converter.from_torch")
    assert isinstance(export_last, converter.ExportError)
    assert "RuntimeError: boom (at /m/model.py:12: if x.sum() > 0:)" in str(export_last)
    assert "second line" not in str(export_last)
    ours_last = _contract.classify(_traced_failure([ours, export, ours2], "boom"), "converter.from_torch")
    assert isinstance(ours_last, converter.InternalError) and "RuntimeError: boom" in str(ours_last)
    same_file = _contract.classify(_traced_failure([ours, export, ours], "boom"), "converter.from_torch")
    assert isinstance(same_file, converter.InternalError)  # the last frame of that file, not its first
    # no model runs in load: even a failure inside torch.export is the converter's
    loaded = _contract.classify(_traced_failure([ours, ours2, export], "boom"), "converter.load")
    assert isinstance(loaded, converter.InternalError)


def test_classify_takes_the_converters_own_raise_of_a_bad_argument_as_the_callers():
    """A ``TypeError``/``ValueError`` the converter's own code raises with a ``raise``
    statement refuses an argument (InputTypeError/InputValueError, the message as is); one
    raised inside some other statement, or by a library, is a bug (InternalError)."""
    from converter import _contract

    ours, ours2 = (str(_contract._REPO / "converter" / f"_fake_{i}.py") for i in (3, 4))
    library = sysconfig.get_paths()["purelib"] + "/numpy/_fake_lib.py"
    what = "converter.to_onnx"
    value = _contract.classify(_traced_failure([ours, ours2], "opset 99", "raise ValueError(message)"), what)
    assert type(value) is converter.InputValueError and str(value) == "opset 99"
    typed = _contract.classify(_traced_failure([ours, ours2], "a set", "raise TypeError(message)"), what)
    assert type(typed) is converter.InputTypeError and str(typed) == "a set"
    for frames, last in (([ours, ours2], "x = int(message)"), ([ours, library], "raise ValueError(message)")):
        bug = _contract.classify(_traced_failure(frames, "z", last), what)
        assert type(bug) is converter.InternalError and "ValueError: " in str(bug), (frames, last)


def test_a_call_the_function_cannot_take_is_the_callers_type_error():
    """A ``TypeError`` raised before the API function ran (a missing argument), or refusing
    a keyword the caller gave, is an InputTypeError naming the function; the same refusal of
    a keyword the caller did not give comes from inside: a bug."""
    from converter import _contract

    def sink(*, known=None):
        return known

    def take(**options):  # sink refuses others: "got an unexpected keyword argument 'x'"
        return sink(**options) if options else sink(hidden=1)

    api = _contract.api(take, name="load_fake")
    with pytest.raises(converter.InputTypeError, match=r"^converter\.load_fake: .*positional argument"):
        api(1)
    with pytest.raises(converter.InputTypeError, match=r"^converter\.load_fake: .*keyword argument 'wrong'"):
        api(wrong=1)
    with pytest.raises(
        converter.InternalError, match=r"converter\.load_fake: unexpected TypeError: .*'hidden'"
    ):
        api()


def test_classify_takes_a_jax_failure_converting_torch_or_onnx_as_the_converters():
    """JAX traces the user's function in ``from_jax``/``call_jax``: a failure inside JAX after
    the converter's last frame is the model's (ExportError). Converting a torch or ONNX model
    (``from_torch``, ``from_onnx``, ``load_pt2``), JAX is the converter's own tool: the same
    failure is a converter bug (InternalError), never an ExportError."""
    from converter import _contract

    ours, ours2 = (str(_contract._REPO / "converter" / f"_fake_{i}.py") for i in (5, 6))
    in_jax = sysconfig.get_paths()["purelib"] + "/jax/_src/_fake_trace.py"
    for what in ("converter.from_jax", "converter.call_jax"):
        err = _contract.classify(_traced_failure([ours, ours2, in_jax], "boom"), what)
        assert type(err) is converter.ExportError and "RuntimeError: boom" in str(err), what
        assert not str(err).endswith(")"), str(err)  # no "(at ...)": the message names no call
    for what in ("converter.from_torch", "converter.from_onnx", "converter.load_pt2"):
        err = _contract.classify(_traced_failure([ours, ours2, in_jax], "boom"), what)
        assert type(err) is converter.InternalError, what


def test_verbose_by_environment_or_mode(monkeypatch):
    """``CONVERTER_VERBOSE`` set to anything but ``""`` or ``0`` lets chatter through, as
    does ``verbose_mode(True)`` for its block (a nested ``verbose_mode(False)`` keeps it)."""
    from converter import _contract

    for value, want in (("", False), ("0", False), ("1", True), ("yes", True)):
        monkeypatch.setenv("CONVERTER_VERBOSE", value)
        assert _contract.verbose() is want, value
    monkeypatch.delenv("CONVERTER_VERBOSE")
    assert not _contract.verbose()
    with _contract.verbose_mode(True):
        with _contract.verbose_mode(False):
            assert _contract.verbose()
    with _contract.verbose_mode(False):
        assert not _contract.verbose()
    assert not _contract.verbose()


def test_quiet_holds_back_framework_chatter_until_success(capsys):
    """Inside ``quiet``: stderr prints through ``hold_print`` and framework log records up
    to ERROR are held (the diagnostics); the prints are written out after a success (by the
    outermost scope), kept back after a failure; stdout, CRITICAL records and a scope
    without ``capture_stderr`` pass through."""
    import logging

    from converter import _contract

    log = logging.getLogger("jax._h6_fake")
    log.propagate = False
    with _contract.quiet() as held:
        _contract.hold_print("a", 1, file=sys.stderr)
        _contract.hold_print("b", "c", sep=None, end=None, file=sys.stderr)
        _contract.hold_print("out", file=sys.stdout)
        log.error("an error")
        log.critical("a crash")
        assert capsys.readouterr() == ("out\n", "a crash\n")  # logging.lastResort: not held
    assert held.getvalue() == "a 1\nb c\nERROR:jax._h6_fake:an error\n"
    assert capsys.readouterr().err == "a 1\nb c\n"
    with pytest.raises(KeyError), _contract.quiet():
        _contract.hold_print("lost", file=sys.stderr)
        raise KeyError
    with _contract.quiet() as outer:
        with _contract.quiet():
            _contract.hold_print("inner", file=sys.stderr)
        assert capsys.readouterr().err == "" and outer.getvalue() == "inner\n"
    assert capsys.readouterr().err == "inner\n"
    with _contract.quiet(capture_stderr=False):
        _contract.hold_print("through", file=sys.stderr)
    with _contract.quiet(False):
        _contract.hold_print("off", file=sys.stderr)
    assert capsys.readouterr().err == "through\noff\n"


# --------------------------------------------------------------------------- the real process


def _process(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "CONVERTER_VERBOSE")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "converter.tools.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_process_prints_one_paragraph_and_no_library_logs(work: Path):
    ok = _process(str(work / "good.shlo"), "-o", str(work / "p.mlir"), cwd=work)
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr  # no XLA INFO lines, no warnings
    bad = _process(str(work / "truncated.pt2"), "-o", str(work / "p.shlo"), cwd=work)
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert lines[0].startswith("convert: error: ") and len(lines) == 2, bad.stderr
    exits = _process(f"{work}/models.py:exits", "-o", str(work / "p.shlo"), cwd=work)
    assert exits.returncode == 2 and "sys.exit(3)" in exits.stderr


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith(f"convert {converter.__version__} (torch ")
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "PyTorch, JAX, ONNX and StableHLO" in out
    for name in ("torch", "jax", "onnx", "stablehlo", "module", ".onnx", ".jax", ".shlo", ".pt2"):
        assert name in out


# --------------------------------------------------------------------------- reproducible outputs


def test_outputs_are_byte_identical_across_runs(work: Path):
    runs = []
    for i in range(2):
        out = work / f"run{i}"
        for suffix in ("shlo", "onnx", "jax"):
            assert cli.main([f"{work}/models.py:factory", "-o", str(out / f"m.{suffix}")]) == 0
        runs.append({p.name: p.read_bytes() for p in out.iterdir()})
    assert runs[0].keys() == {"m.shlo", "m.onnx", "m.jax"}
    for name in runs[0]:
        assert runs[0][name] == runs[1][name], f"{name} differs between two identical runs"
    with zipfile.ZipFile(work / "run0" / "m.shlo") as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}


# --------------------------------------------------------------------------- contract leaks


@pytest.mark.parametrize(
    "target, argv, api",
    [
        ("converter.weights.parse_safetensors", ("{d}/good.shlo", "-o", "{d}/o.mlir"), "load"),
        ("converter.tools.pt2._loads_restricted", ("{d}/good.pt2", "-o", "{d}/o.shlo"), "load_pt2"),
        ("converter.mlir.parse_module", ("inspect", "{d}/good.shlo"), "load"),
    ],
)
def test_memory_error_anywhere_is_exit_2(target, argv, api, work: Path, capsys, monkeypatch):
    """A ``MemoryError`` raised deep in the load path: exit status 2, "out of memory"; the
    API raises ``OutOfMemoryError`` (a ``ConversionError`` and a ``MemoryError``)."""

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(target, exhausted)
    assert cli.main([a.format(d=work) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("convert: error: ") and "out of memory" in err and "Traceback" not in err, err
    with pytest.raises(converter.OutOfMemoryError, match="out of memory"):
        getattr(converter, api)(work / ("good.shlo" if api == "load" else "good.pt2"))


def test_mlir_diagnostics_are_held_back(work: Path, capfd):
    """MLIR's C++ diagnostics for a truncated portable artifact go into the error, not
    onto stderr."""
    with pytest.raises(converter.ParseError, match="attempting to parse"):
        converter.from_stablehlo((work / "truncated.mlirbc").read_bytes(), filename="t.mlirbc")
    out, err = capfd.readouterr()
    assert "attempting to parse" not in out + err and "failed to deserialize" not in err, err


def test_apply_names_missing_parameters():
    f = converter.from_torch(torch.nn.Linear(3, 2), (torch.ones(1, 3),)).to_jax()
    with pytest.raises(
        converter.SignatureMismatchError, match=r"lacks 1 of the module's 2 parameters: 'bias'"
    ):
        f.apply({"weight": f.params["weight"]}, np.ones((1, 3), np.float32))
    with pytest.raises(converter.SignatureMismatchError, match="mapping"):
        f.apply([f.params["weight"]], np.ones((1, 3), np.float32))


def test_call_torch_refuses_dtypes_eager_torch_refuses():
    linear = torch.nn.Linear(3, 2)
    with pytest.raises(RuntimeError, match="same dtype"):
        linear(torch.ones(1, 3, dtype=torch.int32))  # eager torch
    with pytest.raises(converter.SignatureMismatchError, match=r"args\[0\] \(int32\).*same dtype"):
        converter.call_torch(linear, np.ones((1, 3), np.int32))
    emb = torch.nn.Embedding(5, 2)  # integer token ids: eager torch takes them, and so does call_torch
    got = converter.call_torch(emb, np.array([[1, 4]], np.int32))
    np.testing.assert_allclose(np.asarray(got), emb(torch.tensor([[1, 4]])).detach().numpy(), rtol=1e-6)


# --------------------------------------------------------------------------- interrupted writes


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize(
    "out, stale",
    [
        ("o.shlo", [".o.shlo.{pid}.abcd1234.tmp", ".o.shlo.k2j3h4g5.tmp"]),
        ("o.jax", [".o.jax.{pid}.abcd1234.tmp", ".o.jax.safetensors.{pid}.abcd1234.tmp"]),
        ("o.onnx", [".o.onnx.{pid}.abcd1234tmpdir/", ".o.onnx.k2j3h4g5/"]),
    ],
)
def test_stale_temps_of_out_are_removed(out, stale, work: Path, tmp_path, capsys):
    """Temporaries left by writers of OUT that were killed (their process is gone; older
    versions' names too) are removed by the next write of OUT; a live process's, another
    file's and the user's own files stay."""
    pid = _dead_pid()
    planted = []
    for name in stale:
        path = tmp_path / name.format(pid=pid).rstrip("/")
        if name.endswith("/"):
            path.mkdir()
            (path / out).write_text("partial")
        else:
            path.write_text("partial")
        planted.append(path)
    kept = [
        tmp_path / f".{out}.1.abcd1234.tmp",
        tmp_path / f".other.{pid}.abcd1234.tmp",
        tmp_path / f".{out}.notes",
    ]
    for path in kept:
        path.write_text("keep")
    options = ["--external-weights"] if out == "o.jax" else []
    assert cli.main([str(work / "good.shlo"), "-o", str(tmp_path / out), *options]) == 0, (
        capsys.readouterr().err
    )
    assert not [p for p in planted if p.exists()] and all(p.exists() for p in kept)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert all(not n.startswith(f".{out}.") or tmp_path / n in kept for n in left), left


def test_a_killed_writer_leaves_a_temp_the_next_write_removes(tmp_path):
    """SIGKILL in the middle of a write: OUT is not there, the temporary is; the next write
    of OUT removes it."""
    out = tmp_path / "o.shlo"
    fileio = ROOT / "converter" / "fileio.py"
    script = textwrap.dedent(
        f"""
        import importlib.util, os, signal
        spec = importlib.util.spec_from_file_location("fileio", {str(fileio)!r})
        fileio = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(fileio)
        with fileio.atomic_path({str(out)!r}) as tmp:
            tmp.write_bytes(b"half")
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], timeout=60)
    assert proc.returncode == -9
    temps = [p for p in tmp_path.iterdir() if p.name.startswith(".o.shlo.")]
    assert len(temps) == 1 and not out.exists()
    converter.from_torch(torch.nn.Linear(2, 2), (torch.ones(1, 2),)).save(out)
    assert [p.name for p in tmp_path.iterdir()] == ["o.shlo"]


def test_loaders_refusals_and_pass_through(tmp_path):
    from converter.errors import ParseError
    from converter.tools import loaders

    with pytest.raises(ParseError, match=r": not a file$"):
        loaders._check_file(tmp_path)
    text = tmp_path / "model.txt"
    text.write_text("def factory(): pass\n")
    with pytest.raises(ParseError, match=r"model\.txt: cannot be imported as a Python file$"):
        loaders.load_factory(text, "factory")
    assert loaders._describe((1, 2)) == "a tuple of 2" and loaders._describe([]) == "a list of 0"
    assert loaders._describe(3) == "a builtins.int"
    ep = torch.export.export(torch.nn.ReLU(), (torch.ones(2),))
    assert loaders.torch_export(ep, (), {}, "here") is ep  # an ExportedProgram is not exported again


_TUPLES = """
import torch

def jax3():
    return (lambda x, y=1: x * y), [1.0], {"y": 2}

def jax4():
    return (lambda x: x), (1.0,), {}, None

def jax_kwargs_list():
    return (lambda x: x), (1.0,), ["y", 2]

def torch2():
    return torch.nn.ReLU(), [torch.ones(2)]

def torch3():
    return torch.nn.ReLU(), (torch.ones(2),), {"inplace": False}

def torch4():
    return torch.nn.ReLU(), (torch.ones(2),), {}, ({0: None},)

def torch5():
    return torch.nn.ReLU(), (torch.ones(2),), {}, None, None
"""


def test_factory_results_of_each_length(tmp_path):
    """``(model, args)``, ``(model, args, kwargs)``; a dynamic (torch) load also takes
    ``(model, args, kwargs, dynamic_shapes)``; any other length is refused, naming it."""
    from converter.errors import ParseError
    from converter.tools import loaders

    path = tmp_path / "tuples.py"
    path.write_text(_TUPLES)
    fn, args, kwargs = loaders.load_factory(path, "jax3", framework="jax")
    assert (fn(*args, **kwargs), args, kwargs) == (2.0, (1.0,), {"y": 2})
    with pytest.raises(ParseError, match=r"jax4\(\) must return .* it returned a tuple of 4$"):
        loaders.load_factory(path, "jax4", framework="jax")
    with pytest.raises(ParseError, match=r"jax_kwargs_list\(\) must return \(model, example_args\)"):
        loaders.load_factory(path, "jax_kwargs_list", framework="jax")  # example_kwargs not a dict
    model, args, kwargs, dynamic = loaders.load_factory(path, "torch2", dynamic=True)
    assert isinstance(model, torch.nn.ReLU) and len(args) == 1 and (kwargs, dynamic) == ({}, None)
    assert loaders.load_factory(path, "torch4", dynamic=True)[2:] == ({}, ({0: None},))
    with pytest.raises(ParseError, match=r"torch4\(\) must return .* it returned a tuple of 4$"):
        loaders.load_factory(path, "torch4")
    with pytest.raises(ParseError, match=r"torch5\(\) must return .* it returned a tuple of 5$"):
        loaders.load_factory(path, "torch5", dynamic=True)


def test_a_dynamic_load_of_a_three_item_factory_has_no_dynamic_shapes(tmp_path):
    """``(model, args, kwargs)`` loaded with ``dynamic``: the kwargs are the factory's and
    the dynamic shapes None (not an empty dict standing in for missing kwargs)."""
    from converter.tools import loaders

    path = tmp_path / "tuples.py"
    path.write_text(_TUPLES)
    model, args, kwargs, dynamic = loaders.load_factory(path, "torch3", dynamic=True)
    assert isinstance(model, torch.nn.ReLU) and len(args) == 1
    assert kwargs == {"inplace": False} and dynamic is None


def test_the_factory_directory_comes_first_on_sys_path(tmp_path, monkeypatch):
    """A module beside the factory's file shadows one of the same name elsewhere on
    ``sys.path`` while it imports; ``sys.path`` is as it was afterwards."""
    from converter.tools import loaders

    other, beside = tmp_path / "other", tmp_path / "model"
    other.mkdir()
    beside.mkdir()
    (other / "h1_shadowed_helper.py").write_text("VALUE = 'elsewhere'\n")
    (beside / "h1_shadowed_helper.py").write_text("VALUE = 'beside'\n")
    (beside / "m.py").write_text(
        "import h1_shadowed_helper\n\ndef factory():\n    return (lambda x: x), (h1_shadowed_helper.VALUE,)\n"
    )
    monkeypatch.syspath_prepend(str(other))
    monkeypatch.setitem(sys.modules, "h1_shadowed_helper", None)
    del sys.modules["h1_shadowed_helper"]  # restored (removed) by monkeypatch afterwards
    before = list(sys.path)
    assert loaders.load_factory(beside / "m.py", "factory", framework="jax")[1] == ("beside",)
    assert sys.path == before


def test_split_factory_takes_python_files_only():
    from converter.tools.loaders import split_factory

    assert split_factory("dir/model.py:build") == (Path("dir/model.py"), "build")
    assert split_factory("dir/model.py") == (Path("dir/model.py"), "factory")
    assert split_factory("dir/model.onnx") is None
    assert split_factory("dir:model.onnx") is None
    assert split_factory("model.pt2:factory") is None


def test_dim_values_and_source_picking():
    """``--dim NAME=SIZE``: spaces around either side are dropped, 0 is a size, the same size
    twice is fine; anything else is refused naming the value. ``--from`` is taken from the
    suffix (of the file in ``file.py:factory``), or refused naming the choices."""
    from converter.tools import loaders
    from converter.tools.loaders import CliError

    assert loaders.parse_dims(None) == {} and loaders.parse_dims([]) == {}
    assert loaders.parse_dims([" N = 0 ", "seq=7", "N=0"]) == {"N": 0, "seq": 7}
    for bad in ("N", "=3", "N=", "N=-1", "N=1.5", "N=x"):
        with pytest.raises(CliError, match=rf"^--dim {bad!r}: expected NAME=SIZE"):
            loaders.parse_dims([bad])
    with pytest.raises(CliError, match=r"^--dim: dimension 'N' given two sizes \(0 and 1\)$"):
        loaders.parse_dims(["N=0", "N=1"])
    pick = loaders.pick
    assert pick(None, loaders.LOADERS, "dir/m.py:build", "input", "--from") == "torch"
    assert pick(None, loaders.LOADERS, "m.mlirbc", "input", "--from") == "stablehlo"
    assert pick(None, loaders.LOADERS, "a.b/m.jaxexport", "input", "--from") == "jax"
    assert pick("onnx", loaders.LOADERS, "m.shlo", "input", "--from") == "onnx"
    with pytest.raises(
        CliError, match=r"^unknown --from 'tf'; supported: torch, stablehlo, module, jax, onnx$"
    ):
        pick("tf", loaders.LOADERS, "m.pb", "input", "--from")
    with pytest.raises(CliError, match=r"^cannot tell the input format of 'm.onnx:f' from its suffix"):
        pick(None, loaders.LOADERS, "m.onnx:f", "input", "--from")
    assert loaders.weights_path(Path("d/m.jax")) == Path("d/m.jax.safetensors")


def test_error_messages_list_every_op_once_sorted_with_locations():
    """``UnsupportedOpError`` sorts the ops by name and gives a location only where known;
    ``DataDependentShapeError`` names each op kind once in its first line, every occurrence
    below; ``DynamicDimensionError`` names its dimensions, or says "a dynamic dimension"."""
    from converter.errors import DataDependentOp, DataDependentShapeError, DynamicDimensionError, MissingOp

    missing = converter.UnsupportedOpError(
        [MissingOp("b.op", 2, "m.py:3"), MissingOp("a.op", 1)], "jax backend"
    )
    assert [m.name for m in missing.missing] == ["a.op", "b.op"]
    assert (
        str(missing)
        == "2 op(s) have no lowering in the jax backend:\n  a.op (x1)\n  b.op (x2, first at m.py:3)"
    )

    ops = [
        DataDependentOp("aten.nonzero.default", "m.py:4", "u0", "r0", "f0"),
        DataDependentOp("aten.nonzero.default", "", "u1", "r1", "f1"),
        DataDependentOp("aten.unique.default", "", "u2", "r2", "f2"),
    ]
    assert str(DataDependentShapeError(ops)) == (
        "3 op(s) have an output size that depends on the input values (aten.nonzero.default, "
        "aten.unique.default); a converted module needs static shapes:\n"
        "  aten.nonzero.default at m.py:4: size u0: r0.\n    Fix: f0.\n"
        "  aten.nonzero.default: size u1: r1.\n    Fix: f1.\n"
        "  aten.unique.default: size u2: r2.\n    Fix: f2."
    )

    tail = " cannot stay symbolic here: the op needs a concrete size"
    unnamed = DynamicDimensionError("stablehlo.x", "", ValueError("boom"))
    assert unnamed.dims == () and str(unnamed).startswith(
        f"While converting stablehlo.x: ValueError: boom\na dynamic dimension{tail}"
    )
    named = DynamicDimensionError("stablehlo.x", "f.py:1", ValueError("boom"), ["batch", "seq"])
    assert named.dims == ("batch", "seq") and named.op_name == "stablehlo.x" and named.location == "f.py:1"
    assert str(named).startswith(
        f"While converting stablehlo.x at f.py:1: ValueError: boom\n'batch', 'seq'{tail}"
    )
