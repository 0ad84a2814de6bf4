"""The mutation driver's test runner: one process that imports the heavy libraries once and
forks a fresh child for each pytest run (run by the project's interpreter, not the driver's).

Usage: ``python forkserver.py <tree>``, then one JSON job a line on stdin::

    {"args": [pytest args...], "log": "<file>", "cpu": <CPU seconds>, "wall": <seconds>,
     "lines": "<file>" | null, "rule_files": [<rel path>, ...]}

and one JSON answer a line on stdout: ``{"rc": <exit code> | "timeout" | "cpu-limit" |
"signal N", "seconds": <wall>, "cpu": <child CPU seconds>}``.

The parent imports only third-party libraries (pytest, NumPy, torch, JAX, ONNX, onnxruntime):
never the project (``converter``, ``frontends``, ``backends``, ``tests``), so each child
imports the tree as it is on disk at that moment -- the mutated rule file included -- exactly as
a new interpreter would. Each child runs in its own process group with ``RLIMIT_CPU`` set to
the job's CPU budget (an endless loop is stopped whatever the machine's load) and is killed
after the job's wall-clock budget (a deadlock). With ``lines``, the child records which lines
of the rule files each test runs (:mod:`linecov`).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
import traceback

TREE = os.path.abspath(sys.argv[1])
os.chdir(TREE)
sys.path.insert(0, TREE)
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402,F401 - the shared imports: each fork reuses them
import numpy  # noqa: E402,F401
import onnx  # noqa: E402,F401
import onnxruntime  # noqa: E402,F401
import pytest  # noqa: E402
import torch  # noqa: E402,F401

assert not any(m.split(".")[0] in ("converter", "frontends", "backends", "tests") for m in sys.modules)


def child(job: dict) -> int:
    fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    cpu = int(job["cpu"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    plugins = []
    if job.get("lines"):
        import linecov

        plugins.append(linecov.Recorder(TREE, job["rule_files"], job["lines"]))
    try:
        return int(pytest.main(job["args"], plugins=plugins))
    except BaseException:  # noqa: BLE001 - reported as a crash of the run
        traceback.print_exc()
        return 99
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def serve() -> None:
    driver = os.getppid()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)
            rc = 99
            try:
                rc = child(job)
            finally:
                os._exit(rc)
        deadline = start + job["wall"]
        while True:
            wpid, status, usage = os.wait4(pid, os.WNOHANG)
            if wpid:
                break
            if time.monotonic() > deadline or os.getppid() != driver:  # or the driver is gone
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status, usage = os.wait4(pid, 0)
                status = None
                break
            time.sleep(0.05)
        try:  # the child's own subprocesses, if any outlived it
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if os.getppid() != driver:
            return
        if status is None:
            rc = "timeout"
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            rc = (
                "cpu-limit"
                if sig in (signal.SIGXCPU, signal.SIGKILL) and usage.ru_utime >= job["cpu"]
                else f"signal {sig}"
            )
        else:
            rc = os.WEXITSTATUS(status)
        cpu = usage.ru_utime + usage.ru_stime
        print(
            json.dumps({"rc": rc, "seconds": round(time.monotonic() - start, 2), "cpu": round(cpu, 2)}),
            flush=True,
        )


if __name__ == "__main__":
    serve()
