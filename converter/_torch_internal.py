"""The only module that touches private torch internals: ``torch._ops``, ``torch._C``,
``torch._subclasses``, ``torch.fx.experimental``, ``torch.utils._pytree``/``_sympy``/
``_python_dispatch``, ``torch.export``'s internals, the copy-on-write clone. Every other
module imports them from here.

Supported: torch 2.13, 2.14 and 2.15 (``pyproject.toml``: ``torch>=2.13,<2.16``). A torch
upgrade that moves an internal breaks this file and nothing else; where an API moved or
went away between those versions there is a branch on :data:`TORCH_VERSION` (or a probe of
what the installed torch has), and the functions that patch torch fall back to the public
behaviour when what they patch is missing. What changed in the supported range:

* 2.14 removed the deprecated ``aten.cholesky`` operator (``torch.cholesky`` now traces to
  ``aten.linalg_cholesky_ex``): :func:`aten_op` is None for it there.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Iterator

import torch
import torch.utils._pytree as pytree  # noqa: F401 - re-exported
from torch._ops import HigherOrderOperator, OperatorBase, OpOverload  # noqa: F401 - re-exported
from torch._subclasses.fake_impls import fast_detach  # noqa: F401 - re-exported
from torch._subclasses.fake_tensor import (  # noqa: F401 - re-exported
    FakeTensor,
    FakeTensorConfig,
    FakeTensorMode,
    in_kernel_invocation_manager,
    is_fake,
    unset_fake_temporarily,
)
from torch.fx.experimental import proxy_tensor  # noqa: F401 - re-exported
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: F401 - re-exported
from torch.fx.experimental.symbolic_shapes import (  # noqa: F401 - re-exported
    GuardOnDataDependentSymNode,
    ShapeEnv,
    free_unbacked_symbols,
    statically_known_true,
)
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: F401 - re-exported
from torch.utils._python_dispatch import _get_current_dispatch_mode as current_dispatch_mode  # noqa: F401


def _version(text: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", text).groups()
    return int(major), int(minor)


#: ``(major, minor)`` of the installed torch.
TORCH_VERSION: tuple[int, int] = _version(torch.__version__)

#: ``F.gelu``'s and friends' C entry points (``torch._C._nn``), by ATen name.
nn_functions = torch._C._nn


def aten_op(packet: str, overload: str = "default") -> OpOverload | None:
    """``torch.ops.aten.<packet>.<overload>``, or None where the installed torch has no such
    operator (``cholesky`` from torch 2.14 on): a rule for it is then not registered."""
    try:
        return getattr(getattr(torch.ops.aten, packet), overload)
    except AttributeError:
        return None


def has_kernel(op_name: str, dispatch_key: str | torch._C.DispatchKey) -> bool:
    """Whether the operator ``op_name`` (``aten::add.Tensor``) has a kernel registered to
    ``dispatch_key`` itself (``"CompositeImplicitAutograd"``)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(op_name, dispatch_key)


def backend_dispatch_key(device: str) -> torch._C.DispatchKey:
    """The backend dispatch key of a device type (``"cpu"`` → ``DispatchKey.CPU``)."""
    return torch._C._parse_dispatch_key(torch._C._dispatch_key_for_device(device))


#: ``DispatchKey.CompositeImplicitAutograd``.
COMPOSITE_IMPLICIT = torch._C.DispatchKey.CompositeImplicitAutograd


def fake_or_proxy_mode_active() -> bool:
    """A ``FakeTensorMode`` or a ``make_fx`` proxy mode is on the dispatch mode stack."""
    fake = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)
    proxy = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.PROXY)
    return fake is not None or proxy is not None


def meta_empty_strided(shape: tuple, stride: tuple, dtype: torch.dtype) -> torch.Tensor:
    """``torch.empty_strided`` on the meta device with every dispatch mode set aside (what
    ``in_kernel_invocation_manager`` gives a factory call, at a fifth of its cost)."""
    with torch._C._DisableTorchDispatch():
        return torch.empty_strided(shape, stride, dtype=dtype, device="meta")


_CPU = torch.device("cpu")
#: whether :func:`new_fake_tensor` builds tensors equal to ``FakeTensor``'s constructor's
#: (checked on first use), and the attributes that constructor sets to None
_LEAN_FAKE: list = [None, {}]


def _lean_fake_tensor(mode: FakeTensorMode, elem: torch.Tensor) -> FakeTensor:
    t = torch.Tensor._make_subclass(
        FakeTensor, elem, elem.requires_grad, dispatch_device=True, device_for_backend_keys=_CPU
    )
    if not mode._allow_unsafe_data_ptr_access:
        torch._C._set_throw_on_mutable_data_ptr(t)
    else:
        torch._C._set_warn_deprecated_on_mutable_data_ptr(t)
    state = t.__dict__
    state.update(_LEAN_FAKE[1])
    state["_fake_device"] = _CPU
    state["fake_mode"] = mode
    return t


def _lean_fake_matches(mode: FakeTensorMode) -> bool:
    """A tensor :func:`_lean_fake_tensor` builds has the type, dispatch keys, metadata and
    attributes of the one ``FakeTensor(mode, elem, cpu)`` builds (its constructor's other
    attributes all None, recorded in ``_LEAN_FAKE[1]``)."""
    try:
        want = FakeTensor(mode, meta_empty_strided((2, 3), (3, 1), torch.float32), _CPU)
        blank = {k: v for k, v in want.__dict__.items() if k not in ("_fake_device", "fake_mode")}
        if any(v is not None for v in blank.values()) or want.__dict__.get("_fake_device") != _CPU:
            return False
        _LEAN_FAKE[1] = blank
        got = _lean_fake_tensor(mode, meta_empty_strided((2, 3), (3, 1), torch.float32))
        return (
            type(got) is type(want)
            and got.__dict__ == {**want.__dict__}
            and torch._C._dispatch_keys(got) == torch._C._dispatch_keys(want)
            and (got.shape, got.stride(), got.dtype, got.device, got.requires_grad)
            == (want.shape, want.stride(), want.dtype, want.device, want.requires_grad)
        )
    except Exception:  # noqa: BLE001 - another torch: its constructor as it is
        return False


def new_fake_tensor(mode: FakeTensorMode, elem: torch.Tensor, device: torch.device) -> FakeTensor:
    """``FakeTensor(mode, elem, device)`` of a fresh meta tensor ``elem``. On CPU, outside
    ``torch.export`` and fake-tensor debugging, built without the constructor's argument
    checks and normalization (a third of its cost), once a first one was checked equal to
    the constructor's (type, dispatch keys, metadata, every attribute)."""
    if device != _CPU or torch.compiler.is_exporting() or FakeTensorConfig.debug:
        return FakeTensor(mode, elem, device)
    if _LEAN_FAKE[0] is None:
        _LEAN_FAKE[0] = _lean_fake_matches(mode)
    if not _LEAN_FAKE[0]:
        return FakeTensor(mode, elem, device)
    return _lean_fake_tensor(mode, elem)


def fake_from_meta(mode: FakeTensorMode, t: torch.Tensor, device: torch.device) -> FakeTensor:
    """``mode.fake_tensor_converter.from_meta_and_device(mode, t, device)`` for a meta tensor
    ``t`` just computed (a view rebuilt from remembered metadata: never memoized yet), its
    fake tensor built as :func:`new_fake_tensor` builds one and memoized as that does."""
    converter = mode.fake_tensor_converter
    if device != _CPU or torch.compiler.is_exporting() or FakeTensorConfig.debug or not _LEAN_FAKE[0]:
        return converter.from_meta_and_device(mode, t, device)
    out = _lean_fake_tensor(mode, t)
    converter.set_tensor_memo(t, out)
    return out


def dce_impure_random() -> bool:
    """Whether ``torch.fx.Graph.eliminate_dead_code`` keeps unread random nodes here: the
    ``impure_random`` it passes to ``Node.is_impure`` (True, or inductor's ``fallback_random``
    inside a tracing context)."""
    if torch._guards.TracingContext.try_get():
        return torch._inductor.config.fallback_random
    return True


#: ``tensor_from_dlpack(capsule) -> torch.Tensor``: a tensor sharing the memory of a DLPack
#: capsule; torch's C function under ``torch.utils.dlpack.from_dlpack``, whose Python wrapper
#: (``__dlpack__`` probing, device and copy arguments) adds ~1,600 instructions (callgrind) to
#: the ~4,000 of the call (``call_jax`` makes one per output per call).
tensor_from_dlpack = torch._C._from_dlpack


def _functorch_unknown() -> bool:
    """This torch has no probe for ``torch.func`` transforms: assume one is running (the path
    that is safe under transforms)."""
    return True


#: ``functorch_active() -> bool``: whether a ``torch.func`` transform (grad, vjp, vmap,
#: jacrev...) is running. torch's own C probe where it has one (no Python frame: ``call_jax``
#: asks on every call), else a function that answers True (callers then take the path that
#: is safe under transforms).
functorch_active = getattr(torch._C, "_are_functorch_transforms_active", None) or _functorch_unknown


def sympy_functions():
    """``torch.utils._sympy.functions``: the sympy functions of torch's size expressions
    (``FloorDiv``, ``Mod``...)."""
    from torch.utils._sympy import functions

    return functions


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
