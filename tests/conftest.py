"""Shared test set-up: 64-bit JAX (torch models take int64 inputs) and seeded RNGs."""

import jax
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def pytest_terminal_summary(terminalreporter):
    """Print the round-trip suite's table (rows come from ``record_property``, which also
    crosses pytest-xdist workers)."""
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
