"""A shape-polymorphic :class:`~backends.torch.TorchModule` under ``torch.compile``.

Such a module builds one graph per input shape from its StableHLO (``refine``, then
:func:`~backends.torch.build_graph`), Python that Dynamo cannot trace (MLIR objects). Under
Dynamo it is one opaque ``converter::run_module`` custom op instead, as ``call_jax`` is: the
real implementation runs the per-shape graph, the fake implementation interprets the module
on the fake inputs with their symbolic sizes (:meth:`TorchModule._run_symbolic`), so the
output sizes are ``SymInt`` expressions of the input sizes and one compiled graph serves
every size (``dynamic=True`` or torch's automatic dynamic shapes). Its autograd formula is
a second op, ``converter::run_module_vjp``, which recomputes the forward with autograd and
returns the gradients (first order only). The module is named by a handle string (a
process nonce and a counter) held in a weak registry.
"""

from __future__ import annotations

import uuid
import weakref
from typing import Any

import torch

from converter.errors import ConversionError

_NONCE = uuid.uuid4().hex[:12]
_MODULES: dict[str, weakref.ref] = {}


def register(module: Any) -> str:
    """A handle naming ``module`` for the ops (kept while the module lives)."""
    handle = f"{_NONCE}:{len(_MODULES)}"

    def drop(_: Any, table: dict = _MODULES) -> None:
        table.pop(handle, None)

    _MODULES[handle] = weakref.ref(module, drop)
    return handle


def _module(handle: str) -> Any:
    ref = _MODULES.get(handle)
    module = ref() if ref is not None else None
    if module is None:
        raise ConversionError(
            f"converter::run_module op with handle {handle!r}: no converted module of this process "
            "(a compiled graph kept from another process, or its module was deleted); clear "
            "torch.compile's caches"
        )
    return module


def _differentiable(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


@torch.library.custom_op("converter::run_module", mutates_args=())
def run_module(tensors: list[torch.Tensor], handle: str) -> list[torch.Tensor]:
    """The module ``handle`` names on ``tensors`` (its ``@main`` arguments, parameters first):
    its outputs, contiguous (the layout the fake implementation states: a transposed result
    failed ``torch.compile``'s stride check) and never aliasing the inputs or each other."""
    from converter.embed import unaliased

    outs = [o.contiguous() for o in _module(handle)._graph(tensors)(*tensors)]
    return unaliased(tensors, outs)


@run_module.register_fake
def _run_module_fake(tensors: list[torch.Tensor], handle: str) -> list[torch.Tensor]:
    outs = _module(handle)._run_symbolic(list(tensors))
    return [o.new_empty(o.shape) for o in outs]


def _setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    tensors, handle = inputs
    ctx.handle = handle
    ctx.n = len(tensors)
    ctx.save_for_backward(*tensors, *output)


def _backward(ctx: Any, grads: list[torch.Tensor | None]) -> tuple:
    saved = list(ctx.saved_tensors)
    tensors, outs = saved[: ctx.n], saved[ctx.n :]
    cts = [g if g is not None else torch.zeros_like(o) for g, o in zip(grads, outs, strict=True)]
    in_grads = run_module_vjp(tensors + cts, ctx.handle, ctx.n)
    return [g if _differentiable(t) else None for g, t in zip(in_grads, tensors, strict=True)], None


run_module.register_autograd(_backward, setup_context=_setup_context)


@torch.library.custom_op("converter::run_module_vjp", mutates_args=())
def run_module_vjp(tensors: list[torch.Tensor], handle: str, n: int) -> list[torch.Tensor]:
    """Gradients of the module's ``n`` inputs (zeros for integer ones and those without a
    path to an output) for the output cotangents ``tensors[n:]``: ``torch.func.vjp`` of the
    per-shape graph (a custom op's body runs below autograd, where ``torch.autograd``
    records nothing)."""
    inputs, cts = list(tensors[:n]), list(tensors[n:])
    wanted = [i for i, x in enumerate(inputs) if _differentiable(x)]
    graph = _module(handle)._graph(inputs)

    def fn(*diff: torch.Tensor) -> list[torch.Tensor]:
        args = list(inputs)
        for i, x in zip(wanted, diff, strict=True):
            args[i] = x
        return [o for o in graph(*args) if _differentiable(o)]

    _, vjp_fn = torch.func.vjp(fn, *(inputs[i] for i in wanted))
    floating = [c for c in cts if _differentiable(c)]  # a cotangent has its output's dtype
    grads = dict(zip(wanted, vjp_fn(floating), strict=True)) if wanted else {}
    return [grads[i] if i in grads else torch.zeros_like(x) for i, x in enumerate(inputs)]


@run_module_vjp.register_fake
def _run_module_vjp_fake(tensors: list[torch.Tensor], handle: str, n: int) -> list[torch.Tensor]:
    return [t.new_empty(t.shape) for t in tensors[:n]]


__all__ = ["register", "run_module", "run_module_vjp"]
