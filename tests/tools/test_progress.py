"""The progress display of ``convert``: stages on a terminal, nothing on a pipe or with --quiet."""

from __future__ import annotations

import io
import time

import pytest
from rich.console import Console

from converter import progress
from converter.tools import cli


def _run_stages():
    with progress.stage("torch.export"):
        time.sleep(0.05)
    with progress.stage("writing m.jax") as info:
        info["detail"] = progress.size_text(1_420_000_000)


def test_stages_show_on_a_terminal():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    with progress.reporting(console=console, delay=0):
        time.sleep(0.2)  # the display starts from a timer
        _run_stages()
    text = buf.getvalue()
    assert "✓" in text and "torch.export (0." in text
    assert "writing m.jax (0.0 s, 1.42 GB)" in text


def test_short_conversions_show_nothing():
    buf = io.StringIO()
    with progress.reporting(console=Console(file=buf, force_terminal=True), delay=60):
        _run_stages()
    assert buf.getvalue() == ""


def test_nothing_on_a_pipe_or_when_disabled():
    for console, enabled in (
        (Console(file=io.StringIO()), True),
        (Console(file=io.StringIO(), force_terminal=True), False),
    ):
        with progress.reporting(enabled, console=console, delay=0):
            time.sleep(0.1)
            _run_stages()
        assert console.file.getvalue() == ""


@pytest.mark.parametrize("flag", [[], ["--quiet"]])
def test_convert_turns_reporting_on_unless_quiet(flag, tmp_path, monkeypatch):
    seen = []
    real = progress.reporting

    def spy(enabled=True, **kwargs):
        seen.append(enabled)
        return real(False)

    monkeypatch.setattr(progress, "reporting", spy)
    module_file = tmp_path / "m.mlir"
    module_file.write_text(
        "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  return %x : tensor<2xf32>\n}\n"
    )
    assert cli.main([str(module_file), "-o", str(tmp_path / "m.shlo"), *flag]) == 0
    assert seen == [not flag]


def test_size_text_switches_unit_at_each_power_of_1000():
    assert [progress.size_text(n) for n in (999, 1000, 999_000, 10**6, 999_000_000, 10**9)] == [
        "999 B",
        "1 kB",
        "999 kB",
        "1 MB",
        "999 MB",
        "1 GB",
    ]


def test_the_display_timer_waits_two_seconds_and_never_holds_the_process():
    with progress.reporting(console=Console(file=io.StringIO(), force_terminal=True)):
        timer = progress._reporter.timer
        assert timer.interval == 2.0 and timer.daemon  # an interrupted conversion exits at once
    timer.join(1)  # cancelled on close: it ends without waiting out its delay
    assert progress._reporter is None and not timer.is_alive()
