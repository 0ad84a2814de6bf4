"""The names of PyTorch's OpInfo entries (``op_db``), without importing ``op_db``.

Importing ``torch.testing._internal.common_methods_invocations`` builds every OpInfo (~4 CPU
s). The tests of ``test_opinfo.py`` are parametrized by entry name at collection, which every
pytest-xdist worker does, while only a worker that runs an OpInfo case needs the entries
themselves. The names come from ``opinfo_index.json``, made for one torch version (with
another, :func:`entry_ids` imports ``op_db`` as before); ``test_opinfo.py::
test_index_matches_op_db`` checks it and ``python -m tests.frontends.torch.opinfo_index``
regenerates it.
"""

from __future__ import annotations

import functools
import json
import sys
import types
import unittest
from pathlib import Path

import torch

#: ``{"torch": version, "entries": [entry name, ...]}`` in ``op_db`` order.
INDEX = Path(__file__).with_name("opinfo_index.json")


@functools.cache
def op_db() -> list:
    """``op_db``; torch's test utilities import ``expecttest`` (a test-only package that is
    not a dependency here), so a stand-in module is provided when it is missing."""
    if "expecttest" not in sys.modules:
        try:
            import expecttest  # noqa: F401
        except ImportError:
            shim = types.ModuleType("expecttest")
            shim.TestCase = unittest.TestCase
            shim.ACCEPT = False
            sys.modules["expecttest"] = shim
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def entry_id(op) -> str:
    """``name`` or ``name.variant`` (unique over ``op_db``)."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def indexed_ids() -> list[str] | None:
    """The index's entry names when it was made for the installed torch, else None."""
    if not INDEX.exists():
        return None
    data = json.loads(INDEX.read_text())
    return data["entries"] if data["torch"] == torch.__version__ else None


@functools.cache
def entry_ids() -> tuple[str, ...]:
    """Every entry's name, in ``op_db`` order (from the index when it fits the installed torch)."""
    ids = indexed_ids()
    return tuple(ids) if ids is not None else tuple(entry_id(op) for op in op_db())


@functools.cache
def _by_id() -> dict:
    return {entry_id(op): op for op in op_db()}


def entry(name: str):
    """The OpInfo entry ``name`` (imports ``op_db``)."""
    return _by_id()[name]


def build_index() -> dict:
    return {"torch": torch.__version__, "entries": [entry_id(op) for op in op_db()]}


if __name__ == "__main__":
    INDEX.write_text(json.dumps(build_index(), indent=0) + "\n")
    print(f"wrote {INDEX} ({len(build_index()['entries'])} entries)")
