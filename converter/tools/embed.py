"""Embedding one framework in the other: :func:`call_jax` (JAX inside torch autograd) and
:func:`call_torch` (torch inside ``jax.jit`` / ``jax.grad`` / ``jax.vmap``).

Both convert once per call signature and cache the result:

- ``call_jax`` traces the JAX function once per signature (``jax.make_jaxpr``), drops the
  inputs it ignores (dead-argument elimination on the jaxpr: they are never converted or
  handed to XLA), and jits the forward pass and ``jax.vjp`` of that jaxpr, so gradients are
  exactly ``jax.grad``'s, ``custom_vjp`` rules included. (Differentiating the lowered
  StableHLO instead would silently ignore them.) Tensors cross without copies: by DLPack,
  or, for an input tensor new to the call, as a NumPy view jit takes in place.
- ``call_torch`` converts the torch code natively with :func:`converter.from_torch` (no
  host callbacks) and evaluates the module with the JAX backend, so every JAX transform
  applies.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import operator
import sys
import types
import uuid
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jax
import jax.extend.core
import numpy as np
import torch

from .. import _contract, _jax_internal, _torch_internal, dtypes
from .._contract import api, quiet, verbose
from ..errors import ConversionError, InputTypeError, SignatureMismatchError
from ..signature import STATIC_TYPES, TreeSpec, input_path, tree_spec, unflatten

# --------------------------------------------------------------------------- DLPack

_WIDE_TORCH = {torch.int64, torch.float64, torch.complex128}
_CPU: list = []  # the JAX CPU device, looked up once


def _cpu_device() -> Any:
    if not _CPU:
        _CPU.append(jax.devices("cpu")[0])
    return _CPU[0]


def _crossable(t: torch.Tensor) -> torch.Tensor:
    """``t`` as DLPack and NumPy take it: detached (neither carries autograd state), its lazy
    conjugate and negative bits applied (DLPack would drop them and give the values without
    them), contiguous. ``t`` itself when it is all that already."""
    if t.requires_grad:
        t = t.detach()
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    if not t.is_contiguous():
        t = t.contiguous()
    return t


def to_jax_array(t: torch.Tensor) -> jax.Array:
    """A jax Array sharing ``t``'s memory (one DLPack exchange; CPU tensors are not copied
    unless they are non-contiguous or not aligned as XLA needs). ``t`` is detached first:
    DLPack cannot carry autograd state. A 64-bit tensor keeps its dtype only when
    ``jax_enable_x64`` is on (else JAX narrows it, as ``jax.dlpack.from_dlpack`` does)."""
    t = _crossable(t)
    if _jax_internal.FAST_DLPACK and t.is_cpu and (t.dtype not in _WIDE_TORCH or jax.config.jax_enable_x64):
        return _jax_internal.cpu_array_from_dlpack(torch.utils.dlpack.to_dlpack(t), _cpu_device())
    return jax.dlpack.from_dlpack(t)


def to_torch_tensor(a: jax.Array) -> torch.Tensor:
    """A torch tensor sharing ``a``'s memory (one DLPack exchange, no copy)."""
    if _jax_internal.FAST_DLPACK and a.device is _cpu_device():
        return _torch_internal.tensor_from_dlpack(_jax_internal.cpu_array_to_dlpack(a))
    return torch.from_dlpack(a)


# --------------------------------------------------------------------------- trees


def torch_tree(obj: Any) -> TreeSpec:
    """The tree spec of ``call_jax``'s ``(args, kwargs)``: torch tensors and jax Arrays are
    leaves (:func:`converter.signature.tree_spec`, JAX's leaf order, no custom nodes).

    Raises:
        InputTypeError: a leaf of another type, naming its path (``args[1]['mask']``).
    """
    # torch.Tensor and jax.Array checked apart: Dynamo (torch 2.14) refuses isinstance of a
    # tensor against a tuple holding jax.Array, whose metaclass has its own __instancecheck__
    return tree_spec(
        obj,
        leaf=lambda x: isinstance(x, torch.Tensor) or isinstance(x, jax.Array),
        pytree_nodes=False,  # noqa: SIM101
    )


def check_call(fn: Callable, args: tuple, kwargs: dict, name: str) -> None:
    """``fn(*args, **kwargs)`` binds to ``fn``'s Python signature (when it has one).

    Raises:
        SignatureMismatchError: unknown or misspelled keyword arguments, extra or missing
            positional arguments; names ``name`` and Python's reason.
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins and C functions: nothing to check against
        return
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        raise SignatureMismatchError(f"{name}{sig}: {e}") from None


def _tensor_leaves(obj: Any, spec: TreeSpec) -> list[Any]:
    kind = spec["kind"]
    if kind == "leaf":
        return [obj]
    if kind in ("none", "static"):
        return []
    if kind == "dict":
        return [
            t for k, c in zip(spec["keys"], spec["children"], strict=True) for t in _tensor_leaves(obj[k], c)
        ]
    return [t for o, c in zip(obj, spec["children"], strict=True) for t in _tensor_leaves(o, c)]


# --------------------------------------------------------------------------- call_jax


def _live_inputs(jaxpr: Any) -> list[int]:
    """Indices of the jaxpr's inputs still used after dead-code removal (a backward sweep
    from the outputs; equations with effects are always live)."""
    live = {v for v in jaxpr.outvars if not isinstance(v, jax.extend.core.Literal)}
    for eqn in reversed(jaxpr.eqns):
        if eqn.effects or any(v in live for v in eqn.outvars):
            live.update(v for v in eqn.invars if not isinstance(v, jax.extend.core.Literal))
    return [i for i, v in enumerate(jaxpr.invars) if v in live]


_WIDE_NAMES = {"int64", "uint64", "float64", "complex128"}
# dtypes a torch tensor has a NumPy view of (``Tensor.numpy()``; not bfloat16, float8...)
_NUMPY_VIEWS = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
}  # fmt: skip


_functorch_active = _torch_internal.functorch_active  # a torch.func transform is running
# torch.compile / torch.export is tracing (bound once: the per-call path saves two attribute
# lookups; Dynamo recognizes the function object itself, whatever name it is called by)
_is_compiling = torch.compiler.is_compiling
_Tensor = torch.Tensor


def _leaf_sig(leaves: list[Any]) -> tuple:
    """Per array leaf: ``(shape, numpy dtype, is_torch)``."""
    out = []
    for x in leaves:
        if isinstance(x, torch.Tensor):
            out.append((tuple(x.shape), dtypes.to_numpy(dtypes.name_of(x.dtype)), True))
        else:
            out.append((tuple(x.shape), np.dtype(x.dtype), False))
    return tuple(out)


class _JaxEntry:
    """One signature of a flat JAX function ``flat_fn(*arrays) -> list of arrays``: its
    jaxpr (the only trace of the source function), the inputs it reads, jitted forward,
    forward-with-VJP and backward functions, and (built on first use) the entries of its VJP
    and of its batched forms, which are JAX functions of the same kind: so the gradient of
    the gradient, ``torch.func.vmap`` and their compositions all run in JAX.

    The backward pass is ``jax.vjp`` of the source function itself (its jaxpr keeps
    ``custom_vjp``/``custom_jvp`` rules), so gradients are exactly ``jax.grad``'s.

    ``sig`` has one ``(shape, numpy dtype, is_torch)`` per input leaf; torch floating and
    complex inputs are differentiable, jax Arrays and integer tensors are not. A signature
    with 64-bit types is traced and run under ``jax.enable_x64(True)`` (scoped: the
    process's ``jax_enable_x64`` is left as it is).
    """

    def __init__(self, flat_fn: Callable, sig: tuple, name: str):
        self.sig = sig
        self.name = name
        self.x64 = any(np.dtype(d).name in _WIDE_NAMES for _, d, _ in sig)
        self.diff = [t and jax.numpy.issubdtype(d, jax.numpy.inexact) for _, d, t in sig]
        avals = [jax.ShapeDtypeStruct(s, d) for s, d, _ in sig]
        with self.scope():
            closed = jax.make_jaxpr(flat_fn)(*avals)
        self.out_avals = [(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in closed.jaxpr.outvars]
        self.out_float = [jax.numpy.issubdtype(d, jax.numpy.inexact) for _, d in self.out_avals]
        self.kept = _live_inputs(closed.jaxpr)
        self.grad_inputs = [i for i in self.kept if self.diff[i]]
        self.out_def: Any = None  # set by call_jax for the user's function
        self.unflatten: Callable[[list], Any] = list  # its outputs' tree from the leaves (idem)
        self._vjp: _JaxEntry | None = None
        self._vmaps: dict = {}
        self.cpu_dlpack: bool | None = None  # decided on the first call
        # per input, the last tensor: (weakref, version) when seen once (passed as a view),
        # (weakref, version, data_ptr, strides, array or None) once imported
        self._memo: list[Any] = [None] * len(sig)
        self._numpy = [np.dtype(d).name in _NUMPY_VIEWS for _, d, _ in sig]  # torch's .numpy() has it
        # per kept input: (index, None for a jax Array, else whether a NumPy view of it exists)
        self._slots = [(i, self._numpy[i] if sig[i][2] else None) for i in self.kept]
        run_jaxpr = jax.extend.core.jaxpr_as_fun(closed)
        kept = self.kept

        def run_kept(*kept_arrays):
            # dropped inputs feed only dead equations (the jaxpr is not pruned, XLA prunes
            # them): zeros of their type, never transferred
            full: list[Any] = [jax.numpy.zeros(a.shape, a.dtype) for a in avals]
            for i, a in zip(kept, kept_arrays, strict=True):
                full[i] = a
            return list(run_jaxpr(*full))

        self.run_kept = run_kept
        self.forward = jax.jit(run_kept)  # the arrays as arguments: jit's C++ path, no tree
        res_def: list[Any] = []  # the VJP function's tree: residual arrays cross jit, not it

        def forward_vjp(xs):
            outs, vjp_fn = jax.vjp(run_kept, *xs)
            residuals, res_def[:] = (
                jax.tree_util.tree_flatten(vjp_fn)[0],
                [jax.tree_util.tree_structure(vjp_fn)],
            )
            return outs, residuals

        self.forward_vjp = jax.jit(forward_vjp)
        self.backward = jax.jit(lambda residuals, cts: res_def[0].unflatten(residuals)(cts))
        # per input slot, the weakref callback that forgets its memo (made once, not per import)
        self._forget = [self._forgetter(i) for i in range(len(sig))]
        if not self.x64:  # nothing to scope: callers reach _run directly
            self.run = self._run  # type: ignore[method-assign]

    def scope(self) -> Any:
        """``jax.enable_x64(True)`` for a 64-bit signature, else nothing."""
        return jax.enable_x64(True) if self.x64 else contextlib.nullcontext()

    def run(self, leaves: Sequence[Any], with_vjp: bool = False) -> tuple[list[torch.Tensor], Any]:
        """The outputs as torch tensors (one DLPack exchange per kept input and per output)
        and, when ``with_vjp``, the VJP function holding the residuals in JAX. (A 32-bit
        signature's instances call :meth:`_run` directly.)"""
        with jax.enable_x64(True):
            return self._run(leaves, with_vjp)

    def _run(self, leaves: Sequence[Any], with_vjp: bool = False) -> tuple[list[torch.Tensor], Any]:
        if self.cpu_dlpack:  # the per-call path: CPU tensors by DLPack, no device lookups
            arrays = self._cpu_arrays(leaves)
        else:
            arrays = [
                to_jax_array(x) if isinstance(x, torch.Tensor) else x for x in (leaves[i] for i in self.kept)
            ]
        if with_vjp:
            outs, vjp_fn = self.forward_vjp(arrays)
        else:
            outs, vjp_fn = self.forward(*arrays), None
        if self.cpu_dlpack:
            return _cpu_tensors(outs), vjp_fn
        if self.cpu_dlpack is None:  # first call: are all inputs and outputs on the CPU?
            cpu = _cpu_device()
            self.cpu_dlpack = (
                _jax_internal.FAST_DLPACK
                and all(x.is_cpu for x in leaves if isinstance(x, torch.Tensor))
                and all(a.device is cpu for a in arrays)
                and all(o.device is cpu for o in outs)
            )
            if self.cpu_dlpack:
                for i in self.kept:  # seen once: the next call with the same tensor keeps it
                    if isinstance(leaves[i], torch.Tensor):
                        self._memo[i] = (weakref.ref(leaves[i]), leaves[i]._version)
                if not self.x64:
                    self.call = self._call_cpu  # type: ignore[method-assign]
        return [to_torch_tensor(o) for o in outs], vjp_fn

    def call(self, leaves: Sequence[Any]) -> Any:
        """The outputs of :meth:`run` without the VJP, in the function's output tree
        (:attr:`unflatten`): the per-call path of ``call_jax`` outside autograd. A CPU
        signature's instances call :meth:`_call_cpu` directly once its first call has seen
        where the tensors are."""
        return self.unflatten(self.run(leaves)[0])

    def _call_cpu(self, leaves: Sequence[Any]) -> Any:
        outs = self.forward(*self._cpu_arrays(leaves))
        if self.unflatten is _first:  # one array: no list, no tree
            return _torch_internal.tensor_from_dlpack(_jax_internal.cpu_array_to_dlpack(outs[0]))
        return self.unflatten(_cpu_tensors(outs))

    def _cpu_arrays(self, leaves: Sequence[Any]) -> list[Any]:
        """The kept inputs for the jitted functions, none copied: a CPU tensor seen for the
        first time as a NumPy view of its memory (jit takes it without a copy, for ~2 µs
        less than a DLPack import; JAX has no NumPy type for bfloat16 and a few others,
        which cross by DLPack), the same tensor seen again by DLPack, once: that array is
        kept and reused while the tensor is unchanged (weights passed call after call, see
        :meth:`_import`); jax Arrays as they are.

        A first sight records only a weak reference to the tensor (no callback: a dead
        reference holds nothing) and its version, so a new tensor each call (activations)
        pays for no more than that; its storage and strides are read when it is imported.
        A tensor written to between two calls (a weight the optimizer steps) is seen anew."""
        memo, arrays = self._memo, []
        for i, numpy_view in self._slots:
            x = leaves[i]
            if numpy_view is not None:  # a torch tensor
                m = memo[i]
                if m is None or m[0]() is not x or m[1] != x._version:  # first sight: a view
                    memo[i] = (weakref.ref(x), x._version)
                    if numpy_view and not x.requires_grad:  # the common case, inline: see _view
                        try:
                            x = x.numpy()
                        except RuntimeError:  # a conjugate or negative view
                            x = _crossable(x).numpy()
                    else:
                        x = self._view(i, x)
                elif len(m) == 2:  # seen unchanged again: import it, once
                    x = self._import(i, x)
                elif m[2] == x.data_ptr() and m[3] == x.stride():
                    x = m[4] if m[4] is not None else self._import(i, x)  # None: crosses as a copy
                else:  # given other storage or strides since its import: seen anew
                    memo[i] = (weakref.ref(x), x._version)
                    x = self._view(i, x)
            arrays.append(x)
        return arrays

    def _view(self, i: int, t: torch.Tensor) -> Any:
        """Input ``i``, the CPU tensor ``t``, as jit takes it without a DLPack import: a NumPy
        view of its memory (strided when ``t`` is: jit copies such an array), or a DLPack
        import for a dtype NumPy lacks. ``Tensor.numpy()`` refuses a tensor with a lazy
        conjugate or negative bit (it would drop them): those are resolved first."""
        if not self._numpy[i]:
            return self._dlpack(_crossable(t))
        if t.requires_grad:
            t = t.detach()
        try:
            return t.numpy()
        except RuntimeError:  # a conjugate or negative view
            return _crossable(t).numpy()

    @staticmethod
    def _dlpack(t: torch.Tensor) -> jax.Array:
        """A CPU tensor made :func:`_crossable` as a jax Array sharing its memory."""
        return _jax_internal.cpu_array_from_dlpack(torch.utils.dlpack.to_dlpack(t), _CPU[0])

    def _import(self, i: int, t: torch.Tensor) -> jax.Array:
        """Input ``i`` by DLPack, remembered while ``t`` lives and is not written to (its
        version counter), given other storage or other strides: weights passed call after
        call cross once. A tensor that crosses as a copy (non-contiguous, a conjugate or
        negative view) is copied again on every call: its memory may change without its
        version counter (``.data``, a NumPy view of it).
        The array shares ``t``'s memory, so remembering it copies nothing and keeps nothing
        alive beyond ``t`` (the weakref's callback forgets it)."""
        crossed = _crossable(t)
        array = self._dlpack(crossed)
        # only an array sharing t's memory is kept: a copy (t non-contiguous, a conjugate or
        # negative view) would go stale when t's memory changes without its version counter
        # (through .data, a NumPy view, DLPack), and the next call would compute with old values
        self._remember(i, t, array if crossed.data_ptr() == t.data_ptr() else None)
        return array

    def _remember(self, i: int, t: torch.Tensor, array: jax.Array | None) -> None:
        """Input ``i`` was ``t`` (as it is now: version, storage, strides), imported as
        ``array`` (None: it crossed as a copy, not kept)."""
        self._memo[i] = (weakref.ref(t, self._forget[i]), t._version, t.data_ptr(), t.stride(), array)

    def _forgetter(self, i: int) -> Callable[[Any], None]:
        """The weakref callback of input slot ``i``: drops its memo when the tensor dies (if
        the memo is still that tensor's). Holds the memo list, not the entry."""
        memo = self._memo

        def forget(ref: Any) -> None:
            if memo[i] is not None and memo[i][0] is ref:
                memo[i] = None

        return forget

    def backward_with(self, vjp_fn: Any, grads: tuple) -> list[torch.Tensor | None]:
        """Gradients per input (``None`` for those not differentiated) from the residuals
        kept by :meth:`run` (first-order backward, no graph recorded)."""
        with self.scope():
            # torch's complex gradients are the conjugates of JAX's cotangents
            cts = [
                _conj(to_jax_array(g)) if f else np.zeros(g.shape, jax.dtypes.float0)
                for g, f in zip(grads, self.out_float, strict=True)
            ]
            in_grads = self.backward(vjp_fn, cts)
            out: list[torch.Tensor | None] = [None] * len(self.sig)
            for i, g in zip(self.kept, in_grads, strict=True):
                if self.diff[i]:
                    out[i] = to_torch_tensor(_conj(g))
        return out

    def vjp_entry(self) -> _JaxEntry:
        """The entry of ``(*inputs, *cotangents of the floating outputs) -> gradients of
        :attr:`grad_inputs``` (``jax.vjp`` of this function, conjugated as torch expects):
        differentiable and batchable in turn."""
        if self._vjp is None:
            n, float_outs = len(self.sig), [j for j, f in enumerate(self.out_float) if f]
            out_avals, kept, grad_inputs = self.out_avals, self.kept, self.grad_inputs

            def flat(*xs):
                primals, cts = xs[:n], xs[n:]
                _, vjp_fn = jax.vjp(self.run_kept, *[primals[i] for i in kept])
                full: list[Any] = [_conj(c) for c in cts]  # the floating outputs'
                for j, (s, _) in enumerate(out_avals):  # the others: float0 zeros
                    if j not in float_outs:
                        full.insert(j, np.zeros(s, jax.dtypes.float0))
                by_input = dict(zip(kept, vjp_fn(full), strict=True))
                return [_conj(by_input[i]) for i in grad_inputs]

            ct_sig = tuple((out_avals[j][0], out_avals[j][1], True) for j in float_outs)
            self._vjp = _JaxEntry(flat, self.sig + ct_sig, f"vjp of {self.name}")
        return self._vjp

    def vmap_entry(self, dims: tuple, leaves: list[Any]) -> _JaxEntry:
        """The entry of ``jax.vmap`` of this function over axes ``dims`` (``None``:
        unbatched) of ``leaves``; every output batched on axis 0."""
        sig = _leaf_sig(leaves)
        entry = self._vmaps.get((dims, sig))
        if entry is None:
            kept = self.kept

            def flat(*xs):
                return jax.vmap(lambda *ys: self.run_kept(*[ys[i] for i in kept]), in_axes=dims)(*xs)

            entry = self._vmaps[(dims, sig)] = _JaxEntry(flat, sig, f"vmap of {self.name}")
        return entry


def _cpu_tensors(outs: Sequence[jax.Array]) -> list[torch.Tensor]:
    """Single-device CPU jax Arrays as torch tensors sharing their memory (one DLPack capsule
    each, through the C entry points of both sides: see :func:`to_torch_tensor`)."""
    export, load = _jax_internal.cpu_array_to_dlpack, _torch_internal.tensor_from_dlpack
    return [load(export(o)) for o in outs]


def _conj(x: jax.Array) -> jax.Array:
    return jax.numpy.conj(x) if jax.numpy.iscomplexobj(x) else x


class _Residuals:
    """Carries the residuals from ``_CallJax.forward`` to ``setup_context``."""

    vjp_fn: Any = None


def _backward(ctx: Any, grads: tuple) -> list[Any]:
    """Gradients per input leaf. First order (no graph recorded, no ``torch.func``): from
    the residuals of the forward pass. Otherwise :meth:`_JaxEntry.vjp_entry` applied as
    another autograd op, so the backward is differentiable (and batchable) in turn."""
    entry: _JaxEntry = ctx.entry
    if ctx.vjp_fn is not None and not torch.is_grad_enabled() and not _functorch_active():
        return entry.backward_with(ctx.vjp_fn, grads)
    saved = iter(ctx.saved_tensors)
    leaves = [next(saved) if x is None else x for x in ctx.jax_leaves]
    cts = [g for g, f in zip(grads, entry.out_float, strict=True) if f]
    out: list[Any] = [None] * len(leaves)
    for i, g in zip(entry.grad_inputs, _apply(entry.vjp_entry(), [*leaves, *cts]), strict=True):
        out[i] = g
    return out


def _save(ctx: Any, entry: _JaxEntry, vjp_fn: Any, leaves: tuple, output: tuple) -> None:
    ctx.entry = entry
    ctx.vjp_fn = vjp_fn
    ctx.save_for_backward(*(x for x in leaves if isinstance(x, torch.Tensor)))
    ctx.jax_leaves = [None if isinstance(x, torch.Tensor) else x for x in leaves]
    ctx.mark_non_differentiable(*(r for r, f in zip(output, entry.out_float, strict=True) if not f))


class _CallJaxEager(torch.autograd.Function):
    """``entry`` as a torch autograd op, for plain autograd (no ``torch.func`` transform):
    the ``forward(ctx, ...)`` form, which skips the ``inspect.signature`` binding that
    ``autograd.Function.apply`` does for classes with ``setup_context`` (~14 µs a call)."""

    @staticmethod
    def forward(ctx: Any, entry: _JaxEntry, *leaves: Any) -> tuple:
        outs, vjp_fn = entry.run(list(leaves), True)
        outs = tuple(outs)
        _save(ctx, entry, vjp_fn, leaves, outs)
        return outs

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple:
        return (None, *_backward(ctx, grads))


class _CallJax(torch.autograd.Function):
    """``entry`` as a torch autograd op over its input leaves (torch tensors, or jax Arrays
    passed through as constants), in the form ``torch.func`` needs (``setup_context``, and
    a ``vmap`` rule: ``jax.vmap`` of the function). Double backward and ``torch.func.grad``
    of ``torch.func.grad`` go through :func:`_backward`."""

    @staticmethod
    def forward(entry: _JaxEntry, residuals: _Residuals | None, *leaves: Any) -> tuple:
        outs, vjp_fn = entry.run(list(leaves), residuals is not None)
        if residuals is not None:
            residuals.vjp_fn = vjp_fn
        return tuple(outs)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
        entry, residuals, *leaves = inputs
        _save(ctx, entry, residuals.vjp_fn if residuals is not None else None, tuple(leaves), output)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple:
        return (None, None, *_backward(ctx, grads))

    @staticmethod
    def vmap(info: Any, in_dims: tuple, entry: _JaxEntry, residuals: Any, *leaves: Any) -> tuple:
        dims = tuple(in_dims[2:])
        if all(d is None for d in dims):
            outs = _apply(entry, list(leaves))
            return tuple(outs), (None,) * len(outs)
        outs = _apply(entry.vmap_entry(dims, list(leaves)), list(leaves))
        return tuple(outs), (0,) * len(outs)


def _apply(entry: _JaxEntry, leaves: list[Any]) -> list[torch.Tensor]:
    """Run ``entry`` on ``leaves``: directly when nothing is differentiated or transformed
    (the cheap path), else as a :class:`_CallJax` autograd op."""
    transformed = _functorch_active()
    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in leaves):
        if transformed:
            return list(_CallJax.apply(entry, _Residuals(), *leaves))
        return list(_CallJaxEager.apply(entry, *leaves))
    if transformed:
        return list(_CallJax.apply(entry, None, *leaves))
    return entry.run(leaves)[0]


# call_jax's entries per function, by the key of its owner (see _owner): (a reference to the
# owner, {call key: entry}). A dict keyed by id is the cheapest lookup per call (a
# WeakKeyDictionary makes a weakref per lookup); the weakref's callback drops the item when the
# owner dies, and the identity check guards against an id reused before that. Owners that take
# no weakrefs are kept alive here.
_JAX_BY_ID: dict[Hashable, tuple[Callable[[], Any], dict]] = {}


def _owner(fn: Any) -> tuple[Any, Hashable]:
    """What ``call_jax``'s cache of ``fn`` lives as long as, and its key in
    :data:`_JAX_BY_ID`: for a bound method, its object and ``(id(object), function)``
    (``self.f`` makes a new method object at each access, which dies after the call: its
    cache would die with it and every call trace again); else ``fn`` and ``id(fn)``."""
    if type(fn) is types.MethodType:
        return fn.__self__, (id(fn.__self__), fn.__func__)
    return fn, id(fn)


def _jax_cache(owner: Any, ident: Hashable) -> tuple[Callable[[], Any], dict]:
    """``owner``'s ``(reference, {call key: entry})`` in :data:`_JAX_BY_ID` under ``ident``,
    made on first use."""

    def drop(ref: Any, table: dict = _JAX_BY_ID) -> None:  # the table bound: safe at exit
        if ident in table and table[ident][0] is ref:
            del table[ident]

    try:
        ref: Callable[[], Any] = weakref.ref(owner, drop)
    except TypeError:  # not weak-referenceable (some builtins): kept alive
        ref = lambda: owner  # noqa: E731
    cache = _JAX_BY_ID[ident] = (ref, {})
    return cache


def _entries_of(fn: Any) -> tuple[Callable[[], Any], dict]:
    """``fn``'s ``(owner reference, {key: entry})`` in :data:`_JAX_BY_ID`, made on first use
    (or when the id is reused by another owner)."""
    owner, ident = _owner(fn)
    cache = _JAX_BY_ID.get(ident)
    if cache is None or cache[0]() is not owner:
        cache = _jax_cache(owner, ident)
    return cache


def _cache_for(fn: Any, store: weakref.WeakKeyDictionary, strong: dict) -> dict:
    try:
        return store.setdefault(fn, {})
    except TypeError:  # not weak-referenceable (some builtins): keep it alive
        return strong.setdefault(id(fn), (fn, {}))[1]


def _signature_key(spec: TreeSpec, leaves: list) -> str:
    shapes = [(tuple(x.shape), str(x.dtype), str(getattr(x, "device", ""))) for x in leaves]
    return json.dumps([spec, shapes], default=repr)


def _fast_key(leaves: list[Any], treedef: Any) -> tuple[tuple | None, list[Any]]:
    """The cache key of one call (tree structure, static values, and per array its shape,
    dtype and device) and its array leaves, from one ``jax.tree_util.tree_flatten``; key
    ``None`` when a leaf has an unsupported type (the slow path names it)."""
    key: list[Any] = [treedef]
    arrays = []
    for x in leaves:
        if isinstance(x, torch.Tensor):
            key.append((x.shape, x.dtype, x.device))
            arrays.append(x)
        elif isinstance(x, STATIC_TYPES):
            key.append((type(x), repr(x) if isinstance(x, float) else x))  # repr: nan == nan
        elif isinstance(x, jax.Array):
            key.append((x.shape, x.dtype, x.sharding))
            arrays.append(x)
        else:
            return None, arrays
    return tuple(key), arrays


_first = operator.itemgetter(0)  # the output tree of a function returning one array


def _user_entry(fn: Callable, args: tuple, kwargs: dict) -> _JaxEntry:
    """Trace ``fn`` for this call's signature (checked: leaf types, binding)."""
    spec = torch_tree((args, kwargs))
    leaves = _tensor_leaves((args, kwargs), spec)
    check_call(fn, args, kwargs, getattr(fn, "__name__", "fn"))
    entry, out_def = _traced_entry(fn, spec, _leaf_sig(leaves))
    entry.out_def = out_def
    if out_def.num_nodes == 1 and out_def.num_leaves == 1:  # one array: no tree to rebuild
        entry.unflatten = _first
    else:
        entry.unflatten = out_def.unflatten
    return entry


def _traced_entry(fn: Callable, spec: TreeSpec, sig: tuple) -> tuple[_JaxEntry, Any]:
    """The entry of ``fn`` called with the tree ``spec`` of leaves of signature ``sig``, and
    the treedef of its outputs (recorded by the entry's one trace)."""
    out_def: list[Any] = []

    def flat_fn(*arrays):
        a, k = unflatten(spec, list(arrays))
        outs, treedef = jax.tree_util.tree_flatten(fn(*a, **k))
        out_def.append(treedef)
        return outs

    entry = _JaxEntry(flat_fn, sig, getattr(fn, "__name__", "fn"))
    return entry, out_def[0]


def call_jax(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """Run the JAX function ``fn`` on torch tensors, inside torch autograd.

    Args:
        fn: a JAX-traceable function of ``(*args, **kwargs)``.
        args, kwargs: pytrees (tuple, list, dict) of ``torch.Tensor``, ``jax.Array`` and
            static leaves (None, bool, int, float, str). Static leaves are baked in and are
            part of the cache key; tensors keep their dtype and shape (f16/bf16/f32/f64,
            complex, integers, bool). jax Arrays are passed to ``fn`` as they are (no
            transfer, no copy) and are constants for torch autograd.

    Returns:
        ``fn``'s outputs with its pytree structure, as torch tensors that share memory with
        the JAX results. Gradients flow back to every floating-point tensor input through
        ``jax.vjp``; inputs ``fn`` ignores get ``None`` gradients and are never transferred.

    Each distinct signature (tree structure, static values, shapes, dtypes, devices) is
    traced once, then served from a cache tied to ``fn``'s lifetime (a bound method's: its
    object's). Positional tensor arguments are keyed without flattening a pytree; a tensor
    new to the call crosses as a zero-copy NumPy view, an unchanged one passed again by
    DLPack once, then reused. The result is a torch
    op in every sense: double backward (``create_graph=True``), ``torch.func.grad``/``vjp``/
    ``vmap`` (``jax.vmap`` of ``fn``), and ``torch.compile`` (one opaque
    ``converter::call_jax`` custom op; static or symbolic sizes). A signature with 64-bit tensors runs
    under ``jax.enable_x64(True)``; the process's ``jax_enable_x64`` is never changed.

    Raises:
        TypeError: an unsupported leaf type, naming its path (``args[1]['mask']``).
        SignatureMismatchError: ``(*args, **kwargs)`` does not bind to ``fn``'s parameters
            (an unknown keyword, an extra positional argument).
    """
    if not kwargs and not _is_compiling():  # the per-call path: cached entries
        owner, ident = (fn, id(fn)) if type(fn) is not types.MethodType else _owner(fn)
        cache = _JAX_BY_ID.get(ident)
        positional = _positional_key(args) if cache is not None and cache[0]() is owner else None
        entry = cache[1].get(positional[0]) if positional is not None else None
        if entry is not None:
            try:
                if (positional[1] and torch.is_grad_enabled()) or _functorch_active():
                    return entry.unflatten(_apply(entry, list(args)))
                return entry.call(args)
            except ConversionError:
                raise
            except Exception as e:  # the error contract, as api's wrapper would apply it
                if _contract.nested():
                    raise
                raise _contract.classify(e, "converter.call_jax") from e
    return _call_jax(fn, args, kwargs)


def _positional_key(args: tuple) -> tuple[tuple, bool] | None:
    """For positional torch tensors: the cache key of the call (per tensor its shape, dtype
    and device, the device as ``True`` for the CPU: a ``torch.device`` costs more to make and
    to hash; no tree flattened) and whether one requires grad. None when an argument is not
    a tensor."""
    key = []
    needs_grad = False
    for x in args:
        if type(x) is not _Tensor and not isinstance(x, _Tensor):
            return None
        key.append((x.shape, x.dtype, x.is_cpu or x.device))
        if x.requires_grad:
            needs_grad = True
    return tuple(key), needs_grad


@api(hush=False, name="call_jax")
def _call_jax(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """:func:`call_jax` when its per-call path does not apply: under ``torch.compile``, for
    keyword or non-tensor arguments, and on a cache miss (the trace)."""
    if torch.compiler.is_compiling():
        return _call_jax_compiled(fn, args, kwargs)
    cache = _entries_of(fn)
    positional = _positional_key(args) if not kwargs else None
    if positional is not None:
        key: Any = positional[0]
        arrays = list(args)
    else:
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        key, arrays = _fast_key(leaves, treedef)
    entry = cache[1].get(key) if key is not None else None
    if entry is None:
        entry = _user_entry(fn, args, kwargs)
        if key is not None:
            cache[1][key] = entry
    return entry.unflatten(_apply(entry, arrays))


# --------------------------------------------------------------------------- torch.compile

# Entries reachable from the custom op, by handle: "<process nonce>:<n>", and "<handle>/vjp"
# for the VJP of an entry (built on first use). The nonce keeps torch.compile's on-disk
# caches (FX graph, AOTAutograd) from serving a graph compiled in another process, whose
# handles would name other entries here: such a graph is a cache miss, never a wrong entry.
_NONCE = uuid.uuid4().hex[:12]
_HANDLES: dict[str, _PolyEntry] = {}


class _PolyEntry:
    """``call_jax`` of one function, input tree and input dtypes, at every input shape: what
    a ``converter::call_jax`` op's handle names under ``torch.compile``, whose sizes may be
    symbolic (automatic dynamic shapes after a size changes, ``dynamic=True``,
    ``mark_dynamic``). Each concrete signature runs its own :class:`_JaxEntry`; for symbolic
    sizes, the entry traced with ``jax.export`` symbolic dimensions named after torch's size
    symbols gives the output shapes (the fake implementation) as expressions of the input
    sizes. ``make(sig)`` builds the entry of a signature (shapes of ints or JAX dimension
    expressions); ``n_in`` is the number of input leaves (the VJP's primal inputs; None: all
    of them, as for a VJP, whose inputs are the primals and the cotangents)."""

    def __init__(self, make: Callable[[tuple], _JaxEntry], n_in: int | None):
        self.make = make
        self.n_in = n_in
        self.entries: dict[tuple, _JaxEntry] = {}
        self._by_shape: dict[tuple, _JaxEntry] = {}
        self.out_spec: TreeSpec | None = None  # the outputs' tree (the user's function)
        self._vjp: _PolyEntry | None = None

    def entry_for(self, sig: tuple) -> _JaxEntry:
        key = tuple((tuple(str(d) for d in shape), np.dtype(dt).name) for shape, dt, _ in sig)
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = self.make(sig)
        return entry

    def run(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        key = tuple((t.shape, t.dtype) for t in tensors)  # the per-call lookup, cheaper than a sig
        entry = self._by_shape.get(key)
        if entry is None:
            entry = self._by_shape[key] = self.entry_for(_leaf_sig(tensors))
        return entry.run(tensors)[0]

    def avals(self, tensors: list[torch.Tensor]) -> tuple[_JaxEntry, list[tuple[tuple, np.dtype]]]:
        """The entry for ``tensors`` (fake ones while torch traces) and its outputs' torch
        sizes (``torch.SymInt`` expressions of the inputs' sizes where those are symbolic)
        and dtypes. A function JAX cannot trace with symbolic sizes (Python control flow on
        a size) specializes them: torch guards on the sizes and compiles again for others."""
        if all(type(d) is int for t in tensors for d in t.shape):
            entry = self.entry_for(_leaf_sig(tensors))
            return entry, entry.out_avals
        sig, env = _symbolic_sig(tensors)
        try:
            entry = self.entry_for(sig)
        except Exception:  # noqa: BLE001 - not shape-polymorphic: specialize the sizes
            concrete = tuple(
                (tuple(int(d) for d in t.shape), dt, True) for t, (_, dt, _) in zip(tensors, sig, strict=True)
            )
            entry = self.entry_for(concrete)
            return entry, entry.out_avals
        return entry, [(tuple(_torch_size(d, env) for d in shape), dt) for shape, dt in entry.out_avals]

    def vjp_entry(self) -> _PolyEntry:
        """The VJP of this function (:meth:`_JaxEntry.vjp_entry` at each signature)."""
        if self._vjp is None:

            def make(sig: tuple) -> _JaxEntry:
                return self.entry_for(sig[: self.n_in]).vjp_entry()

            self._vjp = _PolyEntry(make, None)
        return self._vjp


def _symbol_name(expr: Any) -> str:
    """A JAX dimension variable for a torch size expression: its symbol's own name
    (``s0``), or one named after the expression's text (the same text, the same name)."""
    text = str(expr)
    return text if text.isidentifier() else "_e" + uuid.uuid5(uuid.NAMESPACE_OID, text).hex[:12]


def _symbolic_sig(tensors: list[torch.Tensor]) -> tuple[tuple, dict[str, Any]]:
    """The ``(shape, dtype, True)`` signature of ``tensors`` with each symbolic size a
    ``jax.export`` dimension variable (one scope), and the torch size of each variable."""
    env: dict[str, Any] = {}
    texts = []
    for t in tensors:
        dims: list[Any] = []
        for d in t.shape:
            expr = d.node.expr if isinstance(d, torch.SymInt) else None
            if expr is None or expr.is_number:
                dims.append(int(d))
            else:
                name = _symbol_name(expr)
                env.setdefault(name, d)
                dims.append(name)
        texts.append(dims)
    names = sorted(env)
    syms = dict(zip(names, jax.export.symbolic_shape(", ".join(names)), strict=True))
    sig = tuple(
        (
            tuple(syms[d] if isinstance(d, str) else d for d in dims),
            dtypes.to_numpy(dtypes.name_of(t.dtype)),
            True,
        )
        for dims, t in zip(texts, tensors, strict=True)
    )
    return sig, env


def _torch_size(d: Any, env: dict[str, Any]) -> Any:
    """A JAX output dimension (an int or a dimension expression of the variables ``env``
    names) as a torch size (``torch.SymInt`` arithmetic on the inputs' sizes)."""
    if isinstance(d, int):
        return d
    from converter.dims import eval_dim, parse_dim

    return eval_dim(parse_dim(str(d)), env, calls={"max": torch.sym_max, "min": torch.sym_min})


def _handle(entry: _PolyEntry) -> str:
    handle = f"{_NONCE}:{len(_HANDLES)}"
    _HANDLES[handle] = entry
    return handle


def _entry_of(handle: str) -> _PolyEntry:
    """The entry of ``handle``, deriving ``.../vjp`` entries on first use.

    Raises:
        ConversionError: the handle is not this process's (a compiled graph kept from
            another process).
    """
    entry = _HANDLES.get(handle)
    if entry is None and handle.endswith("/vjp"):
        entry = _HANDLES[handle] = _entry_of(handle.removesuffix("/vjp")).vjp_entry()
    if entry is None:
        from ..errors import ConversionError

        raise ConversionError(
            f"converter::call_jax op with handle {handle!r}: not a call_jax signature traced by this "
            "process (a compiled graph kept from another one?); clear torch.compile's caches"
        )
    return entry


@torch.library.custom_op("converter::call_jax", mutates_args=())
def _call_jax_op(tensors: list[torch.Tensor], handle: str) -> list[torch.Tensor]:
    """The entry ``handle`` as one opaque op (what ``torch.compile`` keeps in its graph).
    Outputs never alias the inputs or each other (a custom op must not return views)."""
    return unaliased(tensors, _entry_of(handle).run(list(tensors)))


def unaliased(inputs: Sequence[torch.Tensor], outs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """``outs`` with each output that shares memory with an input or an earlier output
    cloned: what a ``torch.library`` custom op must return (never a view)."""
    seen = {t.data_ptr() for t in inputs if t.numel()}
    result = []
    for o in outs:
        if o.numel() and o.data_ptr() in seen:
            o = o.clone()
        seen.add(o.data_ptr())
        result.append(o)
    return result


@_call_jax_op.register_fake
def _call_jax_fake(tensors: list[torch.Tensor], handle: str) -> list[torch.Tensor]:
    device = tensors[0].device if tensors else torch.device("cpu")
    _, avals = _entry_of(handle).avals(list(tensors))
    return [torch.empty(s, dtype=dtypes.torch_dtype(dtypes.name_of(d)), device=device) for s, d in avals]


def _op_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    tensors, handle = inputs
    ctx.handle = handle
    ctx.save_for_backward(*tensors)


def _op_backward(ctx: Any, grads: list[torch.Tensor | None]) -> tuple:
    tensors = list(ctx.saved_tensors)
    entry, avals = _entry_of(ctx.handle).avals(tensors)
    cts = [
        g if g is not None else torch.zeros(s, dtype=dtypes.torch_dtype(dtypes.name_of(d)))
        for g, (s, d), f in zip(grads, avals, entry.out_float, strict=True)
        if f
    ]
    out: list[torch.Tensor | None] = [None] * len(tensors)
    in_grads = _call_jax_op(tensors + cts, ctx.handle + "/vjp")
    for i, g in zip(entry.grad_inputs, in_grads, strict=True):
        out[i] = g
    return out, None


_call_jax_op.register_autograd(_op_backward, setup_context=_op_setup_context)


def _assume_constant_result(fn: Callable) -> Callable:
    """``torch.compiler.assume_constant_result(fn)`` (Dynamo runs ``fn`` while tracing and
    keeps its result as a constant) without importing ``torch._dynamo`` when this module is
    imported (~5 s on a busy 2-core machine, for users who never compile): the marker it
    sets (torch 2.13's ``torch._dynamo.decorators``), or the decorator itself once Dynamo is
    loaded. ``test_call_jax_under_torch_compile`` (``fullgraph=True``) fails if the marker
    stops being honoured."""
    if "torch._dynamo" in sys.modules:
        return torch.compiler.assume_constant_result(fn)
    fn._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return fn


@_assume_constant_result
def _compiled_handle(fn: Callable, spec: TreeSpec, in_dtypes: tuple) -> str:
    """The handle of ``fn``'s :class:`_PolyEntry` for the input tree ``spec`` of tensors of
    ``in_dtypes``, made while Dynamo traces (it runs this as a constant: the entry is Python
    state, not graph), kept in ``fn``'s entry cache (as long as ``fn`` lives). Checks that
    the arguments bind to ``fn`` first."""
    cache = _entries_of(fn)[1]
    key = ("torch.compile", json.dumps(spec, default=repr), in_dtypes)
    if key in cache:
        return cache[key]
    leaf = object()
    args, kwargs = unflatten(spec, [leaf] * len(in_dtypes))
    check_call(fn, args, kwargs, getattr(fn, "__name__", "fn"))

    def make(sig: tuple) -> _JaxEntry:
        entry, out_def = _traced_entry(fn, spec, sig)
        if poly.out_spec is None:
            poly.out_spec = tree_spec(
                out_def.unflatten([leaf] * out_def.num_leaves), leaf=lambda x: x is leaf
            )
        return entry

    poly = _PolyEntry(make, len(in_dtypes))
    handle = cache[key] = _handle(poly)
    return handle


@_assume_constant_result
def _compiled_out_spec(handle: str) -> TreeSpec:
    """The outputs' tree of the entry ``handle`` names (recorded when torch ran the op's
    fake implementation, just before, while tracing)."""
    spec = _entry_of(handle).out_spec
    assert spec is not None, "the converter::call_jax op's fake implementation has not run"
    return spec


def _call_jax_compiled(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """``call_jax`` as Dynamo sees it: the tree walk and one ``converter::call_jax`` op,
    for any input sizes (static or symbolic: see :class:`_PolyEntry`)."""
    spec = torch_tree((args, kwargs))
    tensors = _tensor_leaves((args, kwargs), spec)
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        raise InputTypeError("call_jax under torch.compile takes torch tensors only (no jax.Array arguments)")
    handle = _compiled_handle(fn, spec, tuple(t.dtype for t in tensors))
    outs = _call_jax_op(list(tensors), handle)
    return unflatten(_compiled_out_spec(handle), list(outs))


# --------------------------------------------------------------------------- call_torch


class _FnModule(torch.nn.Module):
    def __init__(self, fn: Callable):
        super().__init__()
        self.fn = fn

    def forward(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


_TORCH_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_TORCH_CACHE_STRONG: dict = {}


def _jax_tree(obj: Any, path: str = "") -> TreeSpec:
    return tree_spec(obj, leaf=lambda x: isinstance(x, (jax.Array, np.ndarray, jax.core.Tracer)), path=path)


def _torch_example(x: Any, sizes: dict[str, int]) -> torch.Tensor:
    """Zeros of ``x``'s dtype and shape, a symbolic dimension of size ``sizes[name]``."""
    shape = tuple(d if _static_dim(d) else sizes[str(d)] for d in x.shape)
    return torch.zeros(shape, dtype=dtypes.torch_dtype(dtypes.name_of(np.dtype(x.dtype))))


def _static_dim(d: Any) -> bool:
    return isinstance(d, (int, np.integer))


def _symbolic_dims(leaves: list[Any]) -> dict[str, tuple[int, int | None]]:
    """The ``jax.export`` symbolic dimensions of ``leaves``' shapes by name, in order, with
    the ``(lower, upper or None)`` bounds their constraints give.

    Raises:
        InputValueError: a dimension that is an expression (``2*b``), not one variable.
    """
    from ..errors import InputValueError

    dims: dict[str, tuple[int, int | None]] = {}
    for x in leaves:
        for d in np.shape(x) if not hasattr(x, "shape") else x.shape:
            if not _static_dim(d) and str(d) not in dims:
                if not str(d).isidentifier():
                    raise InputValueError(
                        f"call_torch: the symbolic dimension {d} is an expression; torch.export "
                        "takes each dynamic dimension as its own variable (pass it as a new variable)"
                    )
                dims[str(d)] = _jax_internal.dim_bounds(d)
    return dims


def _example_sizes(dims: dict[str, tuple[int, int | None]]) -> dict[str, int]:
    """A size per symbolic dimension (:func:`_symbolic_dims`) for the example tensors
    ``torch.export`` traces with: distinct (no relation between two dimensions is assumed
    from their sizes), at least 2 (torch specializes 0 and 1), within the dimension's bounds."""
    sizes = {}
    for k, (name, (lo, hi)) in enumerate(dims.items()):
        size = max(lo, 2) + 1 + k
        sizes[name] = size if hi is None else min(size, hi)
    return sizes


def _torch_dynamic_shapes(
    target: Callable, args: tuple, kwargs: dict, is_arr: Callable, dims: dict[str, tuple[int, int | None]]
) -> Any:
    """``torch.export``'s ``dynamic_shapes`` for the call ``target(*args, **kwargs)`` whose
    array arguments have the ``jax.export`` symbolic dimensions ``dims``
    (:func:`_symbolic_dims`): one ``torch.export.Dim`` per dimension variable (its name and
    bounds), by parameter name."""
    from torch.export import Dim

    made = {
        name: Dim(name, min=lo, **({"max": hi} if hi is not None else {})) for name, (lo, hi) in dims.items()
    }

    def spec(x: Any) -> Any:
        if not is_arr(x):
            return None
        return {a: made[str(d)] for a, d in enumerate(x.shape) if not _static_dim(d)} or None

    bound = inspect.signature(target).bind(*args, **kwargs).arguments
    return {k: jax.tree_util.tree_map(spec, v, is_leaf=is_arr) for k, v in bound.items()}


def call_torch(
    module_or_fn: torch.nn.Module | Callable,
    *args: Any,
    rng: Any = None,
    mutable: bool = False,
    **kwargs: Any,
) -> Any:
    """Run torch code on JAX arrays, inside ``jax.jit``, ``jax.grad`` and ``jax.vmap``.

    The torch module (or function) is converted natively with
    :func:`converter.from_torch` (``torch.export`` + ATen → StableHLO; no host callback)
    once per signature and evaluated by the JAX backend, so every JAX transform applies.
    A module's current parameters and buffers are read on every call (by DLPack), so
    training the torch model in between is seen.

    Args:
        module_or_fn: a ``torch.nn.Module`` or a function of torch tensors.
        args, kwargs: pytrees of jax Arrays / NumPy arrays / tracers and static leaves.
        rng: a ``jax.random`` key (or int seed), required when the torch code draws random
            numbers (dropout in training mode, ``torch.rand``): JAX functions take keys
            explicitly, so the numbers differ from torch's own stream.

        mutable: return ``(outputs, updates)``: the new values of the buffers (and inputs)
            the torch code updates in place (BatchNorm's running statistics in training
            mode), by name, as :meth:`converter.backends.jax.JaxFunction.apply` does. Without it, a
            call outside JAX transforms writes them into the module's buffers as torch
            would; under a transform it raises (the new values are tracers).

    Each distinct signature (tree structure, non-array values, shapes, dtypes) is converted
    once; a non-array argument with another value is another signature, converted anew.

    Returns:
        The torch code's outputs as jax arrays, with its pytree structure.

    Raises:
        UnsupportedOpError: the torch code uses ATen ops without a rule.
        TypeError: an unsupported leaf type, naming its path.
        ConversionError: the torch code computes with 64-bit types and ``jax_enable_x64``
            is off (call_torch never changes it; enable it first).
        SignatureMismatchError: the torch code draws random numbers and ``rng`` is missing;
            ``(*args, **kwargs)`` does not bind to its parameters; it updates state under a
            JAX transform without ``mutable=True``, or updates an input that is not a
            writable NumPy array.
    """
    spec = _jax_tree((args, kwargs))
    leaves = [x for x in jax.tree_util.tree_leaves((args, kwargs)) if not isinstance(x, STATIC_TYPES)]
    cache = _cache_for(module_or_fn, _TORCH_CACHE, _TORCH_CACHE_STRONG)
    key = _signature_key(spec, [jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in leaves])
    function = cache.get(key)
    if function is None:
        from converter.frontends.torch import from_torch

        model = module_or_fn if isinstance(module_or_fn, torch.nn.Module) else _FnModule(module_or_fn)
        target = module_or_fn.forward if isinstance(module_or_fn, torch.nn.Module) else module_or_fn
        check_call(target, args, kwargs, type(module_or_fn).__name__)
        is_arr = lambda x: isinstance(x, (jax.Array, np.ndarray, jax.core.Tracer))  # noqa: E731
        dims = _symbolic_dims(leaves)
        sizes = _example_sizes(dims)
        ex_args, ex_kwargs = jax.tree_util.tree_map(
            lambda x: _torch_example(x, sizes) if is_arr(x) else x, (args, kwargs), is_leaf=is_arr
        )
        if isinstance(module_or_fn, torch.nn.Module):
            check_dtypes_like_eager(module_or_fn, tuple(ex_args), ex_kwargs)
        from converter.backends.jax import JaxFunction

        dynamic = _torch_dynamic_shapes(model.forward, args, kwargs, is_arr, dims) if dims else None
        with quiet(not verbose()):  # torch.export's and fake_tensor's chatter on failure
            module = from_torch(model, tuple(ex_args), ex_kwargs, dynamic_shapes=dynamic)
        _check_x64(module)
        function = cache[key] = JaxFunction(module, enable_x64=False)
    params = dict(function.params)
    if isinstance(module_or_fn, torch.nn.Module):
        state = module_or_fn.state_dict(keep_vars=True)
        for name in params:
            if name in state:
                params[name] = to_jax_array(state[name])
    sig = function.signature
    if not sig.mutations:
        outputs = function.apply(params, *args, rng=rng, **kwargs)
        return (outputs, {}) if mutable else outputs
    outputs, updates = function.apply(params, *args, rng=rng, mutable=True, **kwargs)
    if mutable:
        return outputs, updates
    _write_back(module_or_fn, sig, args, kwargs, updates)
    return outputs


def _check_x64(module: Any) -> None:
    """``call_torch`` never changes the process's ``jax_enable_x64``: a conversion that
    needs 64-bit types (float64/int64 inputs, buffers such as BatchNorm's
    ``num_batches_tracked``, int64 index arithmetic) raises when it is off, where JAX would
    otherwise narrow them to 32 bits.

    Raises:
        ConversionError: naming the 64-bit arguments and how to enable x64.
    """
    from converter.backends.jax.function import WIDE_DTYPES, needs_x64

    from ..errors import ConversionError

    if jax.config.jax_enable_x64 or not needs_x64(module):
        return
    sig = module.signature
    wide = [f"{s.name} ({s.dtype})" for s in sig.all_args + sig.outputs if s.dtype in WIDE_DTYPES]
    raise ConversionError(
        f"the torch code computes with 64-bit types ({', '.join(wide[:4]) or 'inside the graph'}), "
        "which JAX narrows to 32 bits unless jax_enable_x64 is on; call_torch does not change "
        "that setting for you: run jax.config.update('jax_enable_x64', True) (or set "
        "JAX_ENABLE_X64=1) before converting"
    )


class _NoRandomDraws(_torch_internal.TorchDispatchMode):
    """While active (in this thread only: dispatch modes are thread-local), ATen's random
    ops (tagged ``nondeterministic_seeded``: dropout, ``rand``, ``bernoulli_``...) draw
    nothing: they return zeros of the shape and dtype their meta kernel gives (an in-place
    one fills its tensor with zeros). :func:`check_dtypes_like_eager` runs the module for its
    dtype checks only; torch's global generator, which other threads draw from, is neither
    advanced nor saved and restored (``torch.random.fork_rng`` would roll back their draws)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.Tag.nondeterministic_seeded not in func.tags:
            return func(*args, **kwargs)
        if func._schema.is_mutable:  # bernoulli_, uniform_...: its tensor becomes zeros
            return args[0].zero_()

        def meta(x: Any) -> Any:
            return x.to("meta") if isinstance(x, torch.Tensor) else x

        tree = jax.tree_util
        tensors = [x for x in tree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        device = tensors[0].device if tensors else torch.device(kwargs.get("device") or "cpu")
        meta_kwargs = {**tree.tree_map(meta, kwargs), **({"device": "meta"} if "device" in kwargs else {})}
        out = func(*tree.tree_map(meta, args), **meta_kwargs)

        def zeros(t: Any) -> Any:
            return torch.zeros(t.shape, dtype=t.dtype, device=device) if isinstance(t, torch.Tensor) else t

        return tree.tree_map(zeros, out)


def check_dtypes_like_eager(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
    """Refuse what eager torch refuses: ``torch.export`` traces with meta kernels, which do
    not check dtypes, so a float64 input into a float32 ``Linear`` would convert (and compute
    in float64), an int32 one would compute in integers, where eager torch raises. When an
    input has a dtype none of the module's floating parameters and buffers has (another
    floating type, or an integer, bool or complex one: token ids of an ``Embedding`` pass
    this run), the module runs once eagerly on the
    example (zero) tensors, with copies of its state and torch's RNG state restored, and an
    error there is raised as the conversion's.

    Raises:
        SignatureMismatchError: eager torch rejects the inputs' dtypes; names the argument
            paths and dtypes and quotes torch's message.
    """
    own = {t.dtype for t in (*module.parameters(), *module.buffers()) if t.is_floating_point()}
    leaves = jax.tree_util.tree_flatten_with_path((args, kwargs))[0]
    odd = [
        (input_path(jax.tree_util.keystr(p)), t.dtype)
        for p, t in leaves
        if isinstance(t, torch.Tensor) and not (t.is_floating_point() and t.dtype in own)
    ]
    if not own or not odd:
        return
    state = {k: v.detach().clone() for k, v in module.state_dict(keep_vars=True).items()}
    try:
        with torch.no_grad(), _NoRandomDraws():
            torch.func.functional_call(module, state, args, kwargs)
    except RuntimeError as e:
        names = ", ".join(f"{p} ({str(d).removeprefix('torch.')})" for p, d in odd)
        kinds = ", ".join(sorted(str(d).removeprefix("torch.") for d in own))
        raise SignatureMismatchError(
            f"{names}: the module's parameters are {kinds} and eager torch refuses these inputs "
            f"({str(e).strip().splitlines()[0]}); cast them, or convert the module's dtype first"
        ) from None


def _write_back(module: Any, sig: Any, args: tuple, kwargs: dict, updates: dict) -> None:
    """Write the new state of a ``call_torch`` outside JAX transforms into the torch
    module's buffers and the (NumPy) inputs it updates, as eager torch would."""
    from ..signature import flatten

    targets = ", ".join(m.target for m in sig.mutations)
    if any(isinstance(v, jax.core.Tracer) for v in updates.values()):
        raise SignatureMismatchError(
            f"the torch code updates state in place ({targets}): under jit/grad/vmap call "
            "call_torch(..., mutable=True), which returns (outputs, updates)"
        )
    inputs = {input_path(p): v for p, v in flatten((args, kwargs), sig.in_tree)}
    for m in sig.mutations:
        if m.kind == "input" and not (
            isinstance(inputs[m.target], np.ndarray) and inputs[m.target].flags.writeable
        ):
            raise SignatureMismatchError(
                f"{m.target}: the torch code updates this input in place, but a "
                f"{type(inputs[m.target]).__name__} cannot be written to: pass a writable NumPy array "
                "or call call_torch(..., mutable=True), which returns its new value"
            )
    state = module.state_dict(keep_vars=True) if isinstance(module, torch.nn.Module) else {}
    for m in sig.mutations:
        new = np.asarray(updates[m.target])
        if m.kind == "input":
            np.copyto(inputs[m.target], new)
        else:
            with torch.no_grad():
                state[m.target].copy_(torch.from_numpy(new.copy()))


__all__ = ["call_jax", "call_torch", "to_jax_array", "to_torch_tensor", "torch_tree"]
