"""Embedding one framework in the other: :func:`call_jax` (JAX inside torch autograd) and
:func:`call_torch` (torch inside ``jax.jit`` / ``jax.grad`` / ``jax.vmap``).

Both convert once per call signature and cache the result:

- ``call_jax`` traces the JAX function once per signature (``jax.make_jaxpr``), drops the
  inputs it ignores (dead-argument elimination on the jaxpr: they are never converted or
  handed to XLA), and jits the forward pass and ``jax.vjp`` of that jaxpr, so gradients are
  exactly ``jax.grad``'s, ``custom_vjp`` rules included. (Differentiating the lowered
  StableHLO instead would silently ignore them.) Tensors cross by DLPack without copies.
- ``call_torch`` converts the torch code natively with :func:`converter.from_torch` (no
  host callbacks) and evaluates the module with the JAX backend, so every JAX transform
  applies.
"""

from __future__ import annotations

import inspect
import json
import weakref
from collections.abc import Callable
from typing import Any

import jax
import jax.extend.core
import numpy as np
import torch

from . import dtypes
from ._contract import quiet, verbose
from .errors import InputTypeError, SignatureMismatchError
from .signature import TreeSpec, input_path, unflatten

_STATIC = (bool, int, float, str)


# --------------------------------------------------------------------------- DLPack


def to_jax_array(t: torch.Tensor) -> jax.Array:
    """A jax Array sharing ``t``'s memory (DLPack; CPU tensors are not copied unless they
    are non-contiguous). ``t`` is detached first: DLPack cannot carry autograd state."""
    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    return jax.dlpack.from_dlpack(t)


def to_torch_tensor(a: jax.Array) -> torch.Tensor:
    """A torch tensor sharing ``a``'s memory (DLPack, no copy)."""
    return torch.from_dlpack(a)


# --------------------------------------------------------------------------- trees


def torch_tree(obj: Any, path: str = "") -> TreeSpec:
    """The JSON tree spec of a pytree of torch tensors (JAX leaf order: dict keys sorted,
    matching how the JAX function will flatten them).

    Raises:
        TypeError: a leaf that is not a tensor, None, bool, int, float or str, naming its
            path (``args[1]['mask']``).
    """
    if isinstance(obj, torch.Tensor):
        return {"kind": "leaf"}
    if obj is None:
        return {"kind": "none"}
    if isinstance(obj, _STATIC):
        return {"kind": "static", "value": obj}
    if type(obj) in (tuple, list):
        kind = "tuple" if type(obj) is tuple else "list"
        return {"kind": kind, "children": [torch_tree(c, f"{path}[{i}]") for i, c in enumerate(obj)]}
    if type(obj) is dict:
        keys = sorted(obj)
        return {
            "kind": "dict",
            "keys": keys,
            "children": [torch_tree(obj[k], f"{path}[{k!r}]") for k in keys],
        }
    raise InputTypeError(
        f"{input_path(path) or 'argument'}: unsupported type {type(obj).__name__} "
        "(expected a torch.Tensor, None, bool, int, float, str, list, tuple or dict)"
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


def _tensor_leaves(obj: Any, spec: TreeSpec) -> list[torch.Tensor]:
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


class _JaxEntry:
    """One signature of a JAX function: its jaxpr (the only trace of ``fn``), the kept
    inputs, and jitted forward, forward-with-VJP and backward functions.

    The backward pass is ``jax.vjp`` of the source function itself (its jaxpr keeps
    ``custom_vjp``/``custom_jvp`` rules), so gradients are exactly ``jax.grad``'s.
    """

    def __init__(self, fn: Callable, spec: TreeSpec, tensors: list[torch.Tensor]):
        wide = {"int64", "uint64", "float64", "complex128"}
        if any(dtypes.name_of(t.dtype) in wide for t in tensors):  # see backends.jax.ensure_x64
            jax.config.update("jax_enable_x64", True)
        out_def: list[Any] = []

        def flat_fn(*arrays):
            args, kwargs = unflatten(spec, list(arrays))
            leaves, treedef = jax.tree_util.tree_flatten(fn(*args, **kwargs))
            out_def.append(treedef)
            return leaves

        avals = [
            jax.ShapeDtypeStruct(tuple(t.shape), dtypes.to_numpy(dtypes.name_of(t.dtype))) for t in tensors
        ]
        closed = jax.make_jaxpr(flat_fn)(*avals)
        self.out_def = out_def[0]
        self.kept = _live_inputs(closed.jaxpr)
        self.out_float = [jax.numpy.issubdtype(v.aval.dtype, jax.numpy.inexact) for v in closed.jaxpr.outvars]
        run_jaxpr = jax.extend.core.jaxpr_as_fun(closed)
        n, kept = len(avals), self.kept

        def run(*kept_arrays):
            full: list[Any] = [None] * n  # dropped inputs are never read
            for i, a in zip(kept, kept_arrays, strict=True):
                full[i] = a
            return list(run_jaxpr(*full))

        self.forward = jax.jit(lambda xs: run(*xs))
        self.forward_vjp = jax.jit(lambda xs: jax.vjp(run, *xs))
        self.backward = jax.jit(lambda vjp_fn, cts: vjp_fn(cts))


def _conj(x: jax.Array) -> jax.Array:
    return jax.numpy.conj(x) if jax.numpy.iscomplexobj(x) else x


class _CallJax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, entry: _JaxEntry, needs_grad: bool, *tensors: torch.Tensor):
        kept = [to_jax_array(tensors[i]) for i in entry.kept]
        if needs_grad:
            outs, ctx.vjp_fn = entry.forward_vjp(kept)
        else:
            outs = entry.forward(kept)
        ctx.entry = entry
        ctx.input_float = [t.dtype.is_floating_point or t.dtype.is_complex for t in tensors]
        results = tuple(to_torch_tensor(o) for o in outs)
        ctx.mark_non_differentiable(*(r for r, f in zip(results, entry.out_float, strict=True) if not f))
        return results

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        entry: _JaxEntry = ctx.entry
        # torch's complex gradients are the conjugates of JAX's cotangents
        cts = [
            _conj(to_jax_array(g)) if f else np.zeros(g.shape, jax.dtypes.float0)
            for g, f in zip(grads, entry.out_float, strict=True)
        ]
        in_grads = [_conj(g) for g in entry.backward(ctx.vjp_fn, cts)]
        out: list[torch.Tensor | None] = [None] * len(ctx.input_float)
        for i, g in zip(entry.kept, in_grads, strict=True):
            if ctx.input_float[i] and g.dtype != jax.dtypes.float0:
                out[i] = to_torch_tensor(g)
        return (None, None, *out)


_JAX_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_JAX_CACHE_STRONG: dict = {}


def _cache_for(fn: Any, store: weakref.WeakKeyDictionary, strong: dict) -> dict:
    try:
        return store.setdefault(fn, {})
    except TypeError:  # not weak-referenceable (some builtins): keep it alive
        return strong.setdefault(id(fn), (fn, {}))[1]


def _signature_key(spec: TreeSpec, leaves: list) -> str:
    shapes = [(tuple(x.shape), str(x.dtype), str(getattr(x, "device", ""))) for x in leaves]
    return json.dumps([spec, shapes], default=repr)


def call_jax(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """Run the JAX function ``fn`` on torch tensors, inside torch autograd.

    Args:
        fn: a JAX-traceable function of ``(*args, **kwargs)``.
        args, kwargs: pytrees (tuple, list, dict) of ``torch.Tensor`` and static leaves
            (None, bool, int, float, str). Static leaves are baked in and are part of the
            cache key; tensors keep their dtype and shape (f16/bf16/f32/f64, integers, bool).

    Returns:
        ``fn``'s outputs with its pytree structure, as torch tensors that share memory with
        the JAX results. Gradients flow back to every floating-point input through
        ``jax.vjp``; inputs ``fn`` ignores get ``None`` gradients and are never transferred.

    Each distinct signature (tree structure, static values, shapes, dtypes, devices) is
    traced and compiled once, then served from a cache tied to ``fn``'s lifetime.

    Raises:
        TypeError: an unsupported leaf type, naming its path (``args[1]['mask']``).
        SignatureMismatchError: ``(*args, **kwargs)`` does not bind to ``fn``'s parameters
            (an unknown keyword, an extra positional argument).
    """
    spec = torch_tree((args, kwargs))
    tensors = _tensor_leaves((args, kwargs), spec)
    cache = _cache_for(fn, _JAX_CACHE, _JAX_CACHE_STRONG)
    key = _signature_key(spec, tensors)
    entry = cache.get(key)
    if entry is None:
        check_call(fn, args, kwargs, getattr(fn, "__name__", "fn"))
        entry = cache[key] = _JaxEntry(fn, spec, tensors)
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    outs = _CallJax.apply(entry, needs_grad, *tensors)
    return jax.tree_util.tree_unflatten(entry.out_def, list(outs))


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
    from frontends.jax import tree_spec

    return tree_spec(obj, leaf=lambda x: isinstance(x, (jax.Array, np.ndarray, jax.core.Tracer)), path=path)


def _torch_example(x: Any) -> torch.Tensor:
    return torch.zeros(tuple(x.shape), dtype=dtypes.torch_dtype(dtypes.name_of(np.dtype(x.dtype))))


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
            mode), by name, as :meth:`backends.jax.JaxFunction.apply` does. Without it, a
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
    leaves = [x for x in jax.tree_util.tree_leaves((args, kwargs)) if not isinstance(x, _STATIC)]
    cache = _cache_for(module_or_fn, _TORCH_CACHE, _TORCH_CACHE_STRONG)
    key = _signature_key(spec, [jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in leaves])
    function = cache.get(key)
    if function is None:
        from frontends.torch import from_torch

        model = module_or_fn if isinstance(module_or_fn, torch.nn.Module) else _FnModule(module_or_fn)
        target = module_or_fn.forward if isinstance(module_or_fn, torch.nn.Module) else module_or_fn
        check_call(target, args, kwargs, type(module_or_fn).__name__)
        is_arr = lambda x: isinstance(x, (jax.Array, np.ndarray, jax.core.Tracer))  # noqa: E731
        ex_args, ex_kwargs = jax.tree_util.tree_map(
            lambda x: _torch_example(x) if is_arr(x) else x, (args, kwargs), is_leaf=is_arr
        )
        if isinstance(module_or_fn, torch.nn.Module):
            check_dtypes_like_eager(module_or_fn, tuple(ex_args), ex_kwargs)
        from backends.jax import JaxFunction

        with quiet(not verbose()):  # torch.export's and fake_tensor's chatter on failure
            module = from_torch(model, tuple(ex_args), ex_kwargs)
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
    from backends.jax import _WIDE, needs_x64

    from .errors import ConversionError

    if jax.config.jax_enable_x64 or not needs_x64(module):
        return
    sig = module.signature
    wide = [f"{s.name} ({s.dtype})" for s in sig.all_args + sig.outputs if s.dtype in _WIDE]
    raise ConversionError(
        f"the torch code computes with 64-bit types ({', '.join(wide[:4]) or 'inside the graph'}), "
        "which JAX narrows to 32 bits unless jax_enable_x64 is on; call_torch does not change "
        "that setting for you: run jax.config.update('jax_enable_x64', True) (or set "
        "JAX_ENABLE_X64=1) before converting"
    )


def check_dtypes_like_eager(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
    """Refuse what eager torch refuses: ``torch.export`` traces with meta kernels, which do
    not check dtypes, so a float64 input into a float32 ``Linear`` would convert (and compute
    in float64) where eager torch raises. When a floating input has a dtype none of the
    module's floating parameters and buffers has, the module runs once eagerly on the
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
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype not in own
    ]
    if not own or not odd:
        return
    state = {k: v.detach().clone() for k, v in module.state_dict(keep_vars=True).items()}
    try:
        with torch.no_grad(), torch.random.fork_rng():
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
    from .signature import flatten

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
