"""Shared test set-up: one OpenMP thread, XLA's fast-compile settings (:mod:`tests.xla_fast`),
64-bit JAX (torch models take int64 inputs), seeded RNGs, and the registry coverage check
(:mod:`tests.registry_coverage`)."""

import gc
import os

# One OpenMP thread per test process (and the subprocesses it starts): the suite runs 3
# workers on 2 cores, and each torch's two spinning OpenMP threads took CPU the other workers
# needed (about 5% of the wall time of torch-heavy files). Read when torch loads libgomp.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tests import registry_coverage, xla_fast  # noqa: E402

jax.config.update("jax_enable_x64", True)
registry_coverage.install()
xla_fast.install()
xla_fast.export_to_subprocesses()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """XLA's fast-compile settings for the test, its fixtures included, unless it is marked
    ``xla_defaults`` (:mod:`tests.xla_fast`)."""
    xla_fast.use(fast=item.get_closest_marker("xla_defaults") is None)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def pytest_collection_finish(session):
    """After collection, the objects of torch, JAX, the rules and the collected tests (~300k
    that live to the end) go to the cyclic GC's permanent generation (``gc.freeze``), and a
    full collection waits for 100 collections of the middle generation instead of 10: every
    full collection walked them all again (about a tenth of a torch test file's CPU time
    went to full collections). Garbage is still collected; only less often in full."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*gc.get_threshold()[:2], 100)


# --------------------------------------------------------------------------- registry coverage


def _coverage_wanted(session) -> bool:
    """The default run: ``pytest`` over ``testpaths`` with no selection, run to the end
    (``REGISTRY_COVERAGE=1``/``0`` forces it on/off)."""
    flag = os.environ.get("REGISTRY_COVERAGE")
    if flag is not None:
        return flag == "1"
    opt = session.config.option
    return (
        session.config.args_source == pytest.Config.ArgsSource.TESTPATHS
        and not opt.keyword
        and not opt.markexpr
        and not getattr(opt, "deselect", None)
        and not getattr(opt, "lf", False)
        and not session.shouldstop
        and not session.shouldfail
    )


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if os.environ.get("TEST_CPU_REPORT"):
        _cpu_report(config)
    if hasattr(config, "workerinput"):  # an xdist worker: hand its keys to the controller
        config.workeroutput["registry_hits"] = [
            [name, list(key) if isinstance(key, tuple) else key] for name, key in registry_coverage.HITS
        ]
        return
    if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) or not _coverage_wanted(session):
        return
    hits = set(registry_coverage.HITS) | getattr(config, "_registry_hits", set())
    if os.environ.get("REGISTRY_HITS_FILE"):  # for merging partial runs by hand
        registry_coverage.dump(hits, os.environ["REGISTRY_HITS_FILE"])
    gaps = registry_coverage.problems(registry_coverage.missing(hits))
    config._registry_gaps = gaps
    strict = registry_coverage.STRICT or os.environ.get("REGISTRY_COVERAGE") == "1"
    if gaps and strict:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_testnodedown(node, error):
    node.config.__dict__.setdefault("_worker_cpu", []).append(node.workeroutput)
    hits = node.config.__dict__.setdefault("_registry_hits", set())
    for name, key in node.workeroutput.get("registry_hits", []):
        hits.add((name, registry_coverage._hashable(key)))


def pytest_terminal_summary(terminalreporter):
    """Print the round-trip suite's table (rows come from ``record_property``, which also
    crosses pytest-xdist workers) and the rules no case of the run reached."""
    gaps = getattr(terminalreporter.config, "_registry_gaps", None)
    if gaps:
        strict = registry_coverage.STRICT or os.environ.get("REGISTRY_COVERAGE") == "1"
        title = "registry coverage (tests/registry_coverage.py)" + ("" if strict else ": report only")
        terminalreporter.section(title, red=strict, yellow=not strict)
        for name, lines in gaps.items():
            terminalreporter.line(f"{name}: {len(lines)} problem(s):")
            for line in lines:
                terminalreporter.line(f"  {line}")
    rows = []
    for reports in terminalreporter.stats.values():
        for rep in reports:
            for key, value in getattr(rep, "user_properties", ()):
                if key == "roundtrip" and getattr(rep, "when", "call") == "call":
                    rows.append((*value, rep.outcome))
    if not rows:
        return
    terminalreporter.section("round trips")
    terminalreporter.line(f"{'model':<22} {'path':<13} {'max abs err':>12} {'tol':>6}  result")
    for model, path, err, tol, outcome in sorted(rows):
        terminalreporter.line(f"{model:<22} {path:<13} {err:>12.2e} {tol:>6}  {outcome}")


# --------------------------------------------------------------------------- CPU time per file

_CPU: dict[str, float] = {}
_DONE: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``TEST_CPU_REPORT=out.json``: the process CPU seconds (every thread: XLA compiles
    on its own) of each test file's tests, setup and teardown included, summed over the
    xdist workers into ``out.json`` — where the suite's time goes, whatever else loads the
    machine (``--durations`` measures wall time)."""
    if not os.environ.get("TEST_CPU_REPORT"):
        yield
        return
    import json
    import time

    t, w = time.process_time(), time.perf_counter()
    yield
    cpu = time.process_time() - t
    path = item.nodeid.split("::")[0]
    _CPU[path] = _CPU.get(path, 0.0) + cpu
    if os.environ.get("TEST_CPU_LOG"):  # one line per test as it ends (a run cut short keeps them)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{os.environ['TEST_CPU_LOG']}.{worker}.jsonl", "a") as f:
            rec = {"id": item.nodeid, "cpu": round(cpu, 3), "wall": round(time.perf_counter() - w, 3)}
            f.write(json.dumps(rec) + "\n")
        _DONE.append(item.nodeid)
        if len(_DONE) % 50 == 0 or nextitem is None or nextitem.nodeid.split("::")[0] != path:
            registry_coverage.dump(registry_coverage.HITS, f"{os.environ['TEST_CPU_LOG']}.{worker}.hits.json")


def _cpu_report(config) -> None:
    import json
    import resource

    if hasattr(config, "workerinput"):
        config.workeroutput["cpu_per_file"] = dict(_CPU)
        config.workeroutput["cpu_total"] = resource.getrusage(resource.RUSAGE_SELF).ru_utime
        return
    per_file = dict(_CPU)
    totals = [resource.getrusage(resource.RUSAGE_SELF).ru_utime]
    for out in getattr(config, "_worker_cpu", []):
        totals.append(out.get("cpu_total", 0.0))
        for k, v in out.get("cpu_per_file", {}).items():
            per_file[k] = per_file.get(k, 0.0) + v
    with open(os.environ["TEST_CPU_REPORT"], "w") as f:
        json.dump(
            {
                "process_user_seconds": totals,
                "per_file": dict(sorted(per_file.items(), key=lambda kv: -kv[1])),
            },
            f,
            indent=1,
        )
