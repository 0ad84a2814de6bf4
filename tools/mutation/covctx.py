"""pytest plugin of the coverage-map run (``run.py covmap measure`` loads it with ``-p covctx``):
the lines a test runs in a subprocess count for that test.

The map's run measures subprocesses with coverage.py's ``[run] patch = subprocess``, which hands
its configuration to every child process in the environment variable
``COVERAGE_PROCESS_CONFIG`` (the configuration serialized: base64 of JSON). pytest-cov switches
the *dynamic* context of the test process to ``<nodeid>|<phase>`` for each phase of a test, but a
child process starts its own coverage with the static ``[run] context`` of that configuration
(empty), so its lines would land in the empty context, credited to no test. Around each phase of
each test this plugin sets that static context to the same ``<nodeid>|<phase>`` name pytest-cov
uses, so the map (``covmap.build``) credits the child's lines to the test that started it (and a
module-scoped fixture's subprocess, run in a setup phase, to every test of its file, as it does
for the fixture's own lines).
"""

from __future__ import annotations

import base64
import json
import os

import pytest

VAR = "COVERAGE_PROCESS_CONFIG"


def _phase(item: pytest.Item, phase: str):
    old = os.environ.get(VAR)
    if old is not None:
        config = json.loads(base64.b64decode(old))
        config["context"] = f"{item.nodeid}|{phase}"
        os.environ[VAR] = base64.b64encode(json.dumps(config).encode()).decode()
    try:
        yield
    finally:
        if old is not None:
            os.environ[VAR] = old


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _phase(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _phase(item, "run")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _phase(item, "teardown")
