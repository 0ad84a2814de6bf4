"""The only module that touches private torch internals (``torch.export``'s, the
copy-on-write clone).

A torch upgrade that moves these internals breaks this file and nothing else: every
function here falls back to the public behaviour when what it patches is missing.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

import torch

# Where ``ExportedProgram.run_decompositions`` looks the collector up (torch 2.13): the
# table's ``materialize()`` and the CIA/Python split each call it once per decomposition.
_USERS = ("torch.export.exported_program", "torch.export.decomp_utils")
_LOCK = threading.RLock()
_CACHE: dict[tuple, frozenset] = {}


def _registration_key() -> tuple:
    """What the set of CompositeImplicitAutograd ops depends on: the ops registered to the
    dispatch key in C++ and the op namespaces known to Python (a new custom op or library
    changes one or the other)."""
    regs = torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")
    return (tuple(regs), tuple(torch.ops._dir))


@contextlib.contextmanager
def cached_cia_ops() -> Iterator[None]:
    """Within the block, ``run_decompositions`` reuses the set of preservable
    CompositeImplicitAutograd ops computed for the same op registrations instead of
    re-enumerating every op namespace (about 35 ms per call, twice per decomposition: most
    of a small model's conversion). The set is recomputed whenever an op registration
    changes, so custom ops defined later are seen."""
    import importlib

    from torch._export import utils

    original = getattr(utils, "_collect_all_valid_cia_ops", None)
    modules = [importlib.import_module(name) for name in _USERS]
    if original is None or any(
        getattr(m, "_collect_all_valid_cia_ops", None) is not original for m in modules
    ):
        yield  # another torch: leave it alone
        return

    def collect() -> set:
        key = _registration_key()
        if key not in _CACHE:
            _CACHE.clear()
            _CACHE[key] = frozenset(original())
        return set(_CACHE[key])

    with _LOCK:
        for m in modules:
            m._collect_all_valid_cia_ops = collect
        try:
            yield
        finally:
            for m in modules:
                m._collect_all_valid_cia_ops = original


def hold_export_prints() -> None:
    """Route ``torch.export``'s own ``print`` (the partial graph it prints on ``sys.stderr``
    when an export fails, ``torch.export._trace``) through
    :func:`converter._contract.hold_print`: held back (an error's ``diagnostics``) in a thread
    inside :func:`converter._contract.quiet`, printed as before in every other thread.
    ``sys.stderr`` itself is never replaced. Idempotent; a torch without that module is left
    alone."""
    from converter._contract import hold_print

    trace = sys.modules.get("torch.export._trace")
    if trace is not None and getattr(trace, "print", None) is not hold_print:
        trace.print = hold_print  # a module global shadows the builtin for that module only


@contextlib.contextmanager
def exporting() -> Iterator[None]:
    """The context of every ``torch.export.export``/``torch.export.load`` the project runs:
    one thread at a time (:data:`converter._threads.TORCH_TRACE`, re-entrant), with the
    partial graph of a failed export held back in a quiet thread (:func:`hold_export_prints`)."""
    from converter import _threads

    with _threads.TORCH_TRACE:
        hold_export_prints()
        yield


def lazy_clone(t: torch.Tensor) -> torch.Tensor | None:
    """A copy-on-write clone of ``t`` (``torch._lazy_clone``, torch >= 2.3): both tensors
    share ``t``'s memory until one of them is written in place (or its mutable data pointer
    is taken: ``data_ptr()``, ``.numpy()``, DLPack), when that one copies its storage first.
    ``t``'s storage becomes copy-on-write itself, so later in-place updates of ``t`` leave the
    clone's bytes alone; reading either (``const_data_ptr()``, torch's kernels) copies nothing.

    Returns None where torch cannot clone lazily: a storage it did not allocate itself
    (``torch.from_numpy``, a memory-mapped or DLPack-imported tensor), a torch without the
    function, a tensor subclass; and where other tensors than ``t`` and the one it was
    detached from share the storage (views, a NumPy array from ``.numpy()``, a DLPack
    export: each holds a tensor). Copy-on-write moves the storage of whoever writes first,
    so such a view would stop seeing the model's updates, and once the clone is freed it
    would point to freed memory."""
    clone = getattr(torch, "_lazy_clone", None)
    use_count = getattr(torch._C, "_storage_Use_Count", None)
    if clone is None or use_count is None or type(t) is not torch.Tensor:
        return None
    storage = t.untyped_storage()
    if use_count(storage._cdata) - 1 > 2:  # minus ``storage`` itself
        return None
    del storage
    try:
        out = clone(t)
    except RuntimeError:  # "Expected storage != nullptr": a storage with its own deleter
        return None
    is_cow = getattr(torch._C, "_is_cow_tensor", None)
    if is_cow is not None and not is_cow(out):  # pragma: no cover - a torch that copied instead
        return None
    return out
