"""Every exit branch of ``convert`` (``converter.tools.cli.main`` and its subcommands), with
failures injected where the real ones happen: memory running out while loading or writing,
the disk filling up or the rename failing while writing, a bug, an interrupt, the user's
code exiting (issue 27).

Exit statuses: 0 success (and ``--help``/``--version``), 2 the user's inputs, outputs or
environment (argparse usage errors too), 1 a bug, 130 an interrupt. Every failure is one
paragraph on stderr without a traceback (``--verbose``: with it), and leaves neither the
output nor a temporary file behind.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import torch

import converter
from converter import fileio, weights
from converter.errors import InternalError
from converter.tools import cli


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli_exits") / "good.shlo"
    converter.from_torch(torch.nn.Linear(3, 2), (torch.randn(2, 3),)).save(path)
    return path


@pytest.fixture
def out(tmp_path) -> Path:
    return tmp_path / "o.mlir"


def _no_leftovers(out: Path) -> None:
    assert not out.exists()
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]


def _one_paragraph(err: str, start: str) -> None:
    assert err.startswith(start), err
    assert "Traceback" not in err and "\n\n" not in err.strip(), err


def test_success_is_0(good, out, capsys):
    assert cli.main([str(good), "-o", str(out)]) == 0
    assert out.is_file() and "convert: wrote" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["inspect", "--help"], ["validate", "--help"]])
def test_help_and_version_are_0(argv, capsys):
    assert cli.main(argv) == 0
    assert capsys.readouterr().out


@pytest.mark.parametrize(
    "argv", [["--no-such-option"], [], ["inspect"], ["inspect", "--no-such-option", "x"]]
)
def test_usage_errors_are_2(argv, capsys):
    assert cli.main(argv) == 2
    assert "usage: convert" in capsys.readouterr().err


def test_conversion_error_is_2(tmp_path, out, capsys):
    assert cli.main([str(tmp_path / "missing.shlo"), "-o", str(out)]) == 2
    _one_paragraph(capsys.readouterr().err, "convert: error: ")
    _no_leftovers(out)


def _loader_raising(monkeypatch, exc: BaseException) -> None:
    def load(source, options):
        raise exc

    monkeypatch.setitem(cli.LOADERS, "module", cli.Loader(load, "x", (".shlo",)))


@pytest.mark.parametrize(
    ("exc", "status", "start", "words"),
    [
        (MemoryError(), 2, "convert: error: ", "out of memory"),
        (
            OSError(errno.EIO, "Input/output error", "good.shlo"),
            2,
            "convert: error: ",
            "Input/output error (good.shlo)",
        ),
        (InternalError("an invariant broke"), 1, "convert: internal error: ", "an invariant broke"),
        (KeyError("a converter bug"), 1, "convert: internal error", "KeyError"),
        (SystemExit(3), 2, "convert: error: ", "sys.exit(3)"),
        (KeyboardInterrupt(), 130, "convert: interrupted", "interrupted"),
    ],
    ids=["memory", "io", "internal", "bug", "exit", "interrupt"],
)
def test_failures_while_loading(good, out, capsys, monkeypatch, exc, status, start, words):
    _loader_raising(monkeypatch, exc)
    assert cli.main([str(good), "-o", str(out)]) == status
    err = capsys.readouterr().err
    _one_paragraph(err, start)
    assert words in err
    _no_leftovers(out)


def test_verbose_prints_the_traceback(good, out, capsys, monkeypatch):
    _loader_raising(monkeypatch, KeyError("a converter bug"))
    assert cli.main([str(good), "-o", str(out), "--verbose"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "KeyError" in err and "--verbose for the traceback" not in err


def test_disk_full_while_writing_is_2(good, tmp_path, capsys, monkeypatch):
    """The parameters' write fails half way (ENOSPC): exit 2, no output, no temporary."""
    out = tmp_path / "o.shlo"
    real = weights.write_safetensors

    def full(f, params, **kw):
        f.write(b"x" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(weights, "write_safetensors", full)
    assert cli.main([str(good), "-o", str(out), "--to", "module"]) == 2
    err = capsys.readouterr().err
    _one_paragraph(err, "convert: error: ")
    assert "No space left on device" in err
    _no_leftovers(out)
    monkeypatch.setattr(weights, "write_safetensors", real)
    assert cli.main([str(good), "-o", str(out), "--to", "module"]) == 0  # the same command, disk freed


def test_memory_error_while_writing_is_2(good, out, capsys, monkeypatch):
    def no_memory(*a, **kw):
        raise MemoryError

    monkeypatch.setattr(converter.Module, "text", no_memory)
    assert cli.main([str(good), "-o", str(out)]) == 2
    _one_paragraph(capsys.readouterr().err, "convert: error: out of memory")
    _no_leftovers(out)


def test_rename_failing_is_2_and_names_the_output(good, out, capsys, monkeypatch):
    def refuse(src, dst):
        raise OSError(errno.EXDEV, "Invalid cross-device link", src, dst)

    monkeypatch.setattr(fileio.os, "replace", refuse)
    assert cli.main([str(good), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    _one_paragraph(err, "convert: error: ")
    assert f"cannot write {out}" in err and "cross-device" in err
    monkeypatch.undo()
    _no_leftovers(out)


@pytest.mark.parametrize(
    ("exc", "status", "start"),
    [
        (MemoryError(), 2, "convert: error: out of memory"),
        (OSError(errno.EACCES, "Permission denied", "x"), 2, "convert: error: Permission denied"),
        (RuntimeError("a bug"), 1, "convert: internal error"),
    ],
    ids=["memory", "io", "bug"],
)
def test_subcommand_failures(good, capsys, monkeypatch, exc, status, start):
    import converter.tools.inspection as inspection

    def run(args):
        raise exc

    monkeypatch.setattr(inspection, "run", run)
    assert cli.main(["inspect", str(good)]) == status
    _one_paragraph(capsys.readouterr().err, start)


def test_subcommand_success_is_0(good, capsys):
    assert cli.main(["inspect", str(good)]) == 0
    assert capsys.readouterr().out


def test_unwritable_output_is_2_before_converting(good, tmp_path, capsys):
    """A file standing where the output's directory should be: refused, named."""
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "o.mlir"
    assert cli.main([str(good), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    _one_paragraph(err, "convert: error: ")
    assert "is a file, not a directory" in err
    assert os.path.isfile(tmp_path / "file")


def test_api_save_on_a_full_disk_is_an_output_error(good, tmp_path, monkeypatch):
    """Without the CLI: ``Module.save`` failing half way is an ``OutputError`` naming the
    file (it was an ``InternalError``, "a bug in the converter"), and leaves nothing."""
    from converter.errors import OutputError

    module = converter.load(good)

    def full(f, params, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(weights, "write_safetensors", full)
    out = tmp_path / "m.shlo"
    with pytest.raises(OutputError, match=f"cannot write {out}: No space left on device"):
        module.save(out)
    _no_leftovers(out)


def test_api_memory_error_is_not_called_a_bug(good, monkeypatch):
    module = converter.load(good)

    def no_memory(*a, **kw):
        raise MemoryError

    monkeypatch.setattr(weights, "write_safetensors", no_memory)
    with pytest.raises(MemoryError):
        module.save(Path(good).with_name("never-written.shlo"))
    assert not Path(good).with_name("never-written.shlo").exists()


def test_conversion_error_caused_by_memory_is_out_of_memory(good, out, capsys, monkeypatch):
    from converter.errors import ConversionError

    wrapped = ConversionError("reading the weights failed")
    wrapped.__cause__ = MemoryError()
    _loader_raising(monkeypatch, wrapped)
    assert cli.main([str(good), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    _one_paragraph(err, "convert: error: out of memory: the model or its inputs do not fit")
    _no_leftovers(out)


def test_verbose_success_says_what_it_loaded(good, out, capsys):
    assert cli.main([str(good), "-o", str(out), "--verbose"]) == 0
    assert "convert: loaded <converter.Module from torch: 2 params, 1 inputs, 1 outputs> in " in (
        capsys.readouterr().err
    )


def test_output_that_cannot_be_compared_with_the_input_is_written(good, tmp_path, capsys, monkeypatch):
    """``os.path.samefile`` failing (a file another user owns): not the input, so written."""
    out = tmp_path / "o.shlo"
    out.write_bytes(b"old")

    def denied(a, b):
        raise PermissionError(errno.EACCES, "Permission denied", str(a))

    monkeypatch.setattr(cli.os.path, "samefile", denied)
    assert cli.main([str(good), "-o", str(out)]) == 0, capsys.readouterr().err
    assert converter.load(out).signature == converter.load(good).signature


def test_version_leaves_out_missing_distributions(monkeypatch):
    from importlib import metadata

    real = metadata.version

    def version(dist):
        if dist == "onnxruntime":
            raise metadata.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(metadata, "version", version)
    text = cli.version_string()
    assert f"torch {torch.__version__}" in text and "onnx " in text and "onnxruntime" not in text


@pytest.mark.filterwarnings("ignore:'converter.tools.cli' found in sys.modules:RuntimeWarning")
def test_python_m_converter_tools_cli(monkeypatch, capsys):
    import runpy
    import sys

    monkeypatch.setattr(sys, "argv", ["cli", "--version"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("converter.tools.cli", run_name="__main__")
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("convert ")


def test_an_out_of_memory_error_of_the_converter_keeps_its_message(good, out, capsys, monkeypatch):
    """An ``OutOfMemoryError`` (the converter's own, a ``MemoryError`` too) already says what did
    not fit: it is reported as it is, not replaced by the generic out-of-memory line."""
    from converter.errors import OutOfMemoryError

    _loader_raising(monkeypatch, OutOfMemoryError("the 3 GiB buffer of layer 7 does not fit"))
    assert cli.main([str(good), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    _one_paragraph(err, "convert: error: the 3 GiB buffer of layer 7 does not fit")
    assert "the model or its inputs do not fit" not in err
    _no_leftovers(out)


@pytest.mark.parametrize(
    ("exc", "status", "text"),
    [
        (InternalError(), 1, "convert: internal error: InternalError\n"),
        (
            KeyError(),
            1,
            "convert: internal error (a bug in the converter; please report it): KeyError: KeyError\n",
        ),
        (OSError("no strerror"), 2, "convert: error: no strerror\n"),
    ],
    ids=["conversion", "bug", "oserror"],
)
def test_an_error_without_a_message_is_named_by_its_type(good, out, capsys, monkeypatch, exc, status, text):
    """The paragraph is exactly ``convert: KIND: MESSAGE`` and the hint; an empty message is
    replaced by the error's type, an error not of the converter is prefixed with its type, an
    ``OSError`` without a file name names none."""
    _loader_raising(monkeypatch, exc)
    assert cli.main([str(good), "-o", str(out)]) == status
    assert capsys.readouterr().err == text + "(run with --verbose for the traceback)\n"


def test_the_summary_names_the_weights_file_and_counts_its_bytes(good, tmp_path, capsys):
    """``convert: wrote OUT and OUT.safetensors (N bytes) in S s``: N is both files' bytes."""
    import re

    out = tmp_path / "o.jax"
    assert cli.main([str(good), "-o", str(out), "--external-weights", "--quiet"]) == 0
    weights_file = tmp_path / "o.jax.safetensors"
    size = out.stat().st_size + weights_file.stat().st_size
    line = capsys.readouterr().out
    assert re.fullmatch(
        rf"convert: wrote {re.escape(str(out))} and o\.jax\.safetensors \({size:,} bytes\) in \d+\.\d s\n",
        line,
    ), line
    assert cli.written_files(out) == [out, weights_file]
