"""Which lines of the rule files each test runs: a pytest plugin for the mutation driver.

A mutant changes one line of one rule file; a test that never runs that line behaves exactly as
on the unmutated tree, so it cannot kill the mutant. The driver therefore runs each mutant only
against the tests that ran its line in an unmutated run (recorded here), which is what a full
run of the test files would have told apart, at a fraction of the time. Lines run outside any
test (at import, at collection: module constants, decorators, default values) reach every test,
so a mutant there falls back to the whole test files: the lines of a rule file's module and
class bodies, and of anything they call, whenever they run (a rule module imported lazily by a
test is still imported for every test after it).

The tracer (``sys.settrace``) follows only frames whose code comes from a rule file; its output,
written at the end of the session, is JSON::

    {"tests": {nodeid: {"lines": {rel: [line, ...]}, "cpu": s, "outcome": "passed" | ...}},
     "outside": {rel: [line, ...]}}
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading
import time

import pytest


class Recorder:
    """The plugin: install the tracer at once (before the tree's modules are imported)."""

    def __init__(self, tree: str, rule_files: list[str], out: str) -> None:
        self.out = out
        self.files = {os.path.join(tree, rel): rel for rel in rule_files}
        self.outside: set[tuple[str, int]] = set()
        self.current = self.outside
        self.tests: dict[str, dict] = {}
        files = self.files
        importing = [0]  # module or class bodies of rule files being run (an import)

        def local(frame, event, arg):
            if event == "line":
                where = self.outside if importing[0] else self.current
                where.add((files[frame.f_code.co_filename], frame.f_lineno))
            return local

        def module_local(frame, event, arg):
            if event == "line":
                self.outside.add((files[frame.f_code.co_filename], frame.f_lineno))
            elif event == "return":
                importing[0] -= 1
            return module_local

        def trace(frame, event, arg):
            name = files.get(frame.f_code.co_filename)
            if name is None:
                return None
            if not frame.f_code.co_flags & inspect.CO_NEWLOCALS:  # a module or class body
                importing[0] += 1
                self.outside.add((name, frame.f_lineno))
                return module_local
            (self.outside if importing[0] else self.current).add((name, frame.f_lineno))
            return local

        sys.settrace(trace)
        threading.settrace(trace)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.current = set()
        rec = {"outcome": "passed"}
        self.tests[item.nodeid] = rec
        t = time.process_time()
        yield
        rec["cpu"] = round(time.process_time() - t, 3)
        by_file: dict[str, list[int]] = {}
        for rel, line in sorted(self.current):
            by_file.setdefault(rel, []).append(line)
        rec["lines"] = by_file
        self.current = self.outside

    def pytest_runtest_logreport(self, report):
        rec = self.tests.get(report.nodeid)
        if rec is not None and (report.failed or (report.skipped and report.when != "teardown")):
            if rec["outcome"] == "passed":
                rec["outcome"] = "failed" if report.failed else "skipped"

    def pytest_sessionfinish(self, session, exitstatus):
        sys.settrace(None)
        threading.settrace(None)
        outside: dict[str, list[int]] = {}
        for rel, line in sorted(self.outside):
            outside.setdefault(rel, []).append(line)
        with open(self.out, "w") as f:
            json.dump({"tests": self.tests, "outside": outside, "exitstatus": int(exitstatus)}, f)
