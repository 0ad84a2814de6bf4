"""Core ATen decompositions of a ``torch.export`` graph, node by node, cached per signature.

``ExportedProgram.run_decompositions()`` re-traces the whole program (AOT autograd,
functionalization, FakeTensor propagation of every node, unlifting and re-lifting the
state): on GPT-2 small it takes about twice as long as ``torch.export.export`` itself. For
a static-shaped, functional graph the result is the same as replacing each node whose op
the default decomposition table (``torch.export.default_decompositions()``) decomposes by
the trace of that decomposition, which :func:`decompose_graph` does: the decomposition of
one op on one argument signature (shapes, strides, dtypes and the non-tensor arguments) is
traced once with ``make_fx`` on FakeTensors and inlined at every node with that signature
(a transformer's identical layers repeat the same few).

Graphs this does not cover go through ``run_decompositions()`` as before
(:func:`decompose_graph` returns None): dynamic or data-dependent sizes, in-place ops,
higher-order ops (``cond``, ``while_loop``, ``with_effects``...), ``get_attr`` nodes, and
decompositions that trace to in-place ops or constants.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.export import ExportedProgram

from converter._torch_internal import OpOverload, has_kernel, pytree

from .registry import ATEN_RULES, key_of

_TABLE: dict | None = None

#: (op, argument signature) -> the traced decomposition (a GraphModule), or None when the
#: op is kept as is; emptied when it reaches _CACHE_LIMIT entries
_CACHE: dict[tuple, Any] = {}
_CACHE_LIMIT = 4096


class _Unsupported(Exception):
    """The graph needs ``run_decompositions()`` (the reason is the message)."""


def _table() -> dict:
    """``torch.export.default_decompositions()`` as a plain dict (built once), less
    ``aten.detach`` (see :func:`decomposition_table`)."""
    global _TABLE
    if _TABLE is None:
        _TABLE = dict(decomposition_table().items())
    return _TABLE


def decomposition_table() -> Any:
    """``torch.export.default_decompositions()`` without ``aten.detach``, which it decomposes
    to ``aten.alias``: the alias carries no trace of the detach, so gradients of the
    converted module flowed through it (autograd stops there). Kept, ``detach`` becomes a
    ``stop_gradient``."""
    table = torch.export.default_decompositions()
    del table[torch.ops.aten.detach.default]
    return table


def decompose_graph(ep: ExportedProgram) -> torch.fx.Graph | None:
    """``ep``'s graph with every op the default Core ATen decomposition table decomposes
    replaced by its decomposition: what ``ep.run_decompositions()`` computes for a static,
    functional graph, the placeholders (names and order) and the output unchanged, so
    ``ep.graph_signature`` still describes the result.

    Returns None for a graph outside that case (see the module docstring); the caller then
    uses ``ep.run_decompositions()``.
    """
    try:
        return _decompose(ep.graph_module.graph)
    except _Unsupported:
        return None


def _decompose(graph: torch.fx.Graph) -> torch.fx.Graph:
    table = _table()
    new = torch.fx.Graph()
    env: dict[torch.fx.Node, Any] = {}
    for node in graph.nodes:
        if node.op == "placeholder":
            _static_val(node)
            env[node] = new.node_copy(node, env.__getitem__)
        elif node.op == "output":
            new.node_copy(node, env.__getitem__)
        elif node.op != "call_function":
            raise _Unsupported(f"{node.op} node {node.name}")
        elif node.target is operator.getitem:
            parent = env[node.args[0]]
            if isinstance(parent, (tuple, list)):  # the parent op was inlined
                env[node] = parent[node.args[1]]
            else:
                env[node] = new.node_copy(node, env.__getitem__)
        else:
            target = node.target
            if not isinstance(target, OpOverload):
                raise _Unsupported(f"call of {key_of(target)}")
            if target._schema.is_mutable:
                raise _Unsupported(f"in-place op {target}")
            _static_val(node)
            if target in table or _implicit(target) or key_of(target) not in ATEN_RULES:
                sub = _traced(node, table)
                if sub is not None:
                    env[node] = _inline(new, sub, node, env)
                    continue
            env[node] = new.node_copy(node, env.__getitem__)
    new.lint()
    return new


def _implicit(op: OpOverload) -> bool:
    """Whether ``op`` has a CompositeImplicitAutograd kernel (``run_decompositions``
    decomposes those too, table or not)."""
    if op not in _IMPLICIT:
        _IMPLICIT[op] = has_kernel(op.name(), "CompositeImplicitAutograd")
    return _IMPLICIT[op]


_IMPLICIT: dict[Any, bool] = {}


def _static_val(node: torch.fx.Node) -> None:
    """Refuse a node whose value has symbolic sizes (dynamic or data-dependent)."""
    for v in _leaves(node.meta.get("val")):
        if isinstance(v, torch.Tensor):
            if any(not isinstance(d, int) for d in (*v.shape, *v.stride())):
                raise _Unsupported(f"{node.name} has symbolic sizes")
        elif isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise _Unsupported(f"{node.name} is a symbolic value")


def _leaves(obj: Any) -> list[Any]:
    """The leaves of nested tuples, lists and dicts, in ``torch.utils._pytree`` order (fx's
    immutable lists and dicts included): cheaper than ``tree_leaves`` for node arguments."""
    if isinstance(obj, (tuple, list)):
        return [leaf for item in obj for leaf in _leaves(item)]
    if isinstance(obj, dict):
        return [leaf for item in obj.values() for leaf in _leaves(item)]
    return [obj]


def _signature(node: torch.fx.Node) -> tuple:
    """The cache key of ``node``: its op, each tensor argument by shape, stride, dtype and
    device, every other argument by its repr, and the argument structure."""
    key: list[Any] = [str(node.target)]
    for leaf in _leaves((node.args, node.kwargs)):
        if isinstance(leaf, torch.fx.Node):
            val = leaf.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise _Unsupported(f"argument {leaf.name} of {node.name} is no tensor")
            key.append(("T", tuple(val.shape), tuple(val.stride()), val.dtype, val.device.type))
        else:
            key.append(repr(leaf))
    key.append(_structure((node.args, node.kwargs)))
    return tuple(key)


def _structure(obj: Any) -> Any:
    """The nesting of ``obj``'s tuples, lists and dicts (hashable), leaves as ``None``."""
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, tuple(_structure(item) for item in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _structure(v)) for k, v in obj.items()))
    return None


def _traced(node: torch.fx.Node, table: dict) -> torch.fx.GraphModule | None:
    """The decomposition of ``node``'s op on its argument signature, traced once (cached);
    None when the trace is the op itself (nothing to decompose)."""
    key = _signature(node)
    if key in _CACHE:
        return _CACHE[key]
    leaves, spec = pytree.tree_flatten((node.args, node.kwargs))
    tensors = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.fx.Node)]
    from converter._torch_internal import FakeTensorMode, make_fx

    target = node.target

    def call(*ts: torch.Tensor) -> Any:
        flat = list(leaves)
        for i, t in zip(tensors, ts, strict=True):
            flat[i] = t
        args, kwargs = pytree.tree_unflatten(flat, spec)
        return target(*args, **kwargs)

    with FakeTensorMode():
        vals = [leaves[i].meta["val"] for i in tensors]
        fakes = [torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device) for v in vals]
        try:
            gm = make_fx(call, decomposition_table=table)(*fakes)
        except Exception as e:  # noqa: BLE001 - the whole-program path reports it properly
            raise _Unsupported(f"tracing {target}: {e}") from e
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    for n in gm.graph.nodes:
        if n.op not in ("placeholder", "call_function", "output"):
            raise _Unsupported(f"the decomposition of {target} has a {n.op} node")
        if isinstance(n.target, OpOverload) and n.target._schema.is_mutable:
            raise _Unsupported(f"the decomposition of {target} is in place ({n.target})")
        if (
            n.op == "call_function"
            and n.target is not operator.getitem
            and key_of(n.target) not in ATEN_RULES
        ):
            # e.g. native_batch_norm, which run_decompositions' functionalization turns
            # into _native_batch_norm_legit_no_training
            raise _Unsupported(f"the decomposition of {target} calls {key_of(n.target)}, which has no rule")
    result = None if len(calls) == 1 and calls[0].target is target else gm
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[key] = result
    return result


def _inline(new: torch.fx.Graph, sub: torch.fx.GraphModule, node: torch.fx.Node, env: dict) -> Any:
    """Copy ``sub``'s nodes into ``new`` in place of ``node``; returns what replaces
    ``node`` (a node, or a tuple or list of them for an op with several results)."""
    args = iter(env[leaf] for leaf in _leaves((node.args, node.kwargs)) if isinstance(leaf, torch.fx.Node))
    local: dict[torch.fx.Node, Any] = {}
    keep = {k: node.meta[k] for k in ("stack_trace", "nn_module_stack", "source_fn_stack") if k in node.meta}
    for n in sub.graph.nodes:
        if n.op == "placeholder":
            local[n] = next(args)
        elif n.op == "output":
            return torch.fx.node.map_arg(n.args[0], local.__getitem__)
        else:
            copy = new.node_copy(n, local.__getitem__)
            copy.meta.update(keep)
            local[n] = copy
    raise ValueError("decomposition graph without output")
