"""Locate the first StableHLO op where a conversion diverges from its source.

Two references, depending on the source:

- torch sources: the FX graph that was lowered (the decomposed ``ExportedProgram``) runs
  under a recording ``torch.fx.Interpreter``; each ATen node is matched to the run of
  StableHLO ops whose ``loc`` carries its named scope ``aten.op[file.py:line]`` (the torch
  frontend emits every node under that scope, in node order), and the node's torch value is
  compared with the value that run of ops produces.
- other sources: two backends' interpreters evaluate the same module op by op (the JAX
  backend, i.e. XLA's semantics, as the reference; the torch backend for the JAX target) and
  their values are compared op by op.

Either way the backend under test runs eagerly (:class:`converter.interpreter.Interpreter`,
recording every top-level op of ``@main``), and the first op whose value is off by more than
the caller's ``close`` allows is reported (:mod:`converter.tools.validate` passes
:func:`converter.tools.validate.close_scaled`: the dtype's tolerance, the absolute part scaled by the
reference's magnitude). This module does not import :mod:`converter.tools.validate`, which depends
on it.
"""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import mlir
from ..arrays import to_torch_tree
from ..signature import flatten

#: ``close(reference, value) -> (within tolerance, comparison)``; the comparison has
#: ``max_abs``, ``max_rel``, ``rtol``, ``atol`` and ``note``.
Close = Callable[[Any, Any], tuple[bool, Any]]

_SCOPE = re.compile(r"(?:^|/)(aten\.[^/\[\s]+(?:\[[^\]]*\])?)")


@dataclass
class Recorded:
    """One top-level op of ``@main`` and the values it produced."""

    index: int
    op: mlir.Op
    values: list[Any]

    @property
    def scope(self) -> str | None:
        """The torch frontend's ``aten.op[file.py:line]`` scope of the op, if any."""
        m = _SCOPE.search(self.op.location)
        return m.group(1) if m else None


def record(interp_cls: type, module, flat_args: list[Any]) -> list[Recorded]:
    """Run ``module``'s ``@main`` with ``interp_cls`` (an Interpreter subclass) on ``flat_args``
    (the ``@main`` arguments), recording every top-level op's results."""
    log: list[Recorded] = []

    class Recording(interp_cls):
        def run_op(self, op, operands, env):
            out = super().run_op(op, operands, env)
            if op.mlir.parent == self.main:
                log.append(Recorded(len(log), op, list(out)))
            return out

    Recording(module.mlir).run(*flat_args)
    return log


def main_args(module, args: tuple, kwargs: dict) -> list[np.ndarray]:
    """The ``@main`` arguments (parameters, then the flat user inputs; only the kept ones)."""
    sig = module.signature
    flat = [np.asarray(module.params[p.name]) for p in sig.params]
    flat += [v for _, v in flatten((args, kwargs), sig.in_tree)]
    if sig.kept_var_idx is not None:
        flat = [flat[i] for i in sig.kept_var_idx]
    return flat


def run_backend(target: str, module, args: tuple, kwargs: dict) -> list[Recorded]:
    """Evaluate ``module`` op by op with ``target``'s interpreter (``jax`` or ``torch``)."""
    flat = main_args(module, args, kwargs)
    if target == "jax":
        import jax.numpy as jnp

        from converter.backends.jax import JaxInterpreter
        from converter.backends.jax.function import x64_scope

        with x64_scope(module):  # 64-bit values keep their type; the process flag is left alone
            return record(JaxInterpreter, module, [jnp.asarray(x) for x in flat])
    if target == "torch":
        import torch

        from converter.backends.torch import TorchInterpreter

        with torch.no_grad():
            return record(TorchInterpreter, module, list(to_torch_tree(tuple(flat))))
    if target == "onnx":
        return run_onnx(module, args, kwargs)
    raise NotImplementedError(f"op-by-op evaluation is not available for the {target} target")


def run_onnx(module, args: tuple, kwargs: dict) -> list[Recorded]:
    """Evaluate ``module`` converted to ONNX in onnxruntime, recording every top-level op's
    values: the ONNX backend names the value of each op's results, and those names are made
    graph outputs. Results no node computes (graph inputs, initializers: constants, identities)
    are not recorded."""
    import onnxruntime as ort
    from onnx import helper

    from converter.backends.onnx import OnnxInterpreter, realpairs, to_onnx
    from converter.backends.onnx.graph import onnx_dtype
    from converter.backends.onnx.ops.complex import COMPONENT

    # plain data only: to_onnx emits from a copy of the module (placement stripped) that is
    # freed when it returns; ops are mapped back to ``module``'s by their position in @main
    emitted: list[tuple[str, list[tuple[str, list[int]]], list[str]]] = []

    class Recording(OnnxInterpreter):
        def run_op(self, op, operands, env):
            out = super().run_op(op, operands, env)
            if op.mlir.parent == self.main:
                types = [(t.dtype, list(t.shape)) for t in op.result_types]
                emitted.append((op.name, types, list(out)))
            return out

    model = to_onnx(module, interpreter=Recording, check=False, optimize=False)  # one node group per op
    graph = model.graph
    produced = {o for node in graph.node for o in node.output} - {o.name for o in graph.output}
    wanted: dict[str, Any] = {}
    paired: set[str] = set()  # complex values, carried as real pairs (converter.backends.onnx.realpairs)
    for _, types, names in emitted:
        for name, (dtype, shape) in zip(names, types, strict=False):
            if isinstance(name, str) and name in produced and name not in wanted:
                if dtype in COMPONENT:
                    paired.add(name)
                    dtype, shape = COMPONENT[dtype], [*shape, 2]
                wanted[name] = helper.make_tensor_value_info(name, onnx_dtype(dtype), shape)
    graph.output.extend(wanted.values())
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    sig = module.signature
    feed = [v for _, v in flatten((args, kwargs), sig.in_tree)]
    if sig.rng is not None:
        feed.append(np.zeros(2, np.uint32))
    inputs = realpairs.session_feeds(session, [np.asarray(v) for v in feed])
    names = [o.name for o in session.get_outputs()]
    values = dict(zip(names, session.run(None, inputs), strict=True))
    values = {n: realpairs.from_pairs(v) if n in paired else v for n, v in values.items()}
    body = list(mlir.main_function(module.mlir).regions[0].blocks[0].operations)
    return [
        Recorded(i, mlir.Op(body[i].operation), [values[n] for n in out])
        for i, (name, _, out) in enumerate(emitted)
        if body[i].operation.name == name and all(isinstance(n, str) and n in values for n in out)
    ]


def _finding(rec: Recorded, c, **extra) -> dict:
    return {
        "found": True,
        "index": rec.index,
        "op": rec.op.name,
        "location": rec.op.location,
        "max_abs": c.max_abs,
        "max_rel": c.max_rel,
        "rtol": c.rtol,
        "atol": c.atol,
        "note": c.note,
        **extra,
    }


# --------------------------------------------------------------------------- torch sources


def torch_node_values(ep, args: tuple, kwargs: dict) -> dict[Any, Any]:
    """Every node's value when the ``ExportedProgram``'s graph runs on ``(args, kwargs)``."""
    import torch
    from torch.export.graph_signature import InputKind

    from .._torch_internal import pytree

    state = {**ep.state_dict, **ep.constants}
    user = iter(pytree.tree_leaves(to_torch_tree((tuple(args), dict(kwargs)))))
    feed = [
        state[s.target] if s.kind != InputKind.USER_INPUT else next(user)
        for s in ep.graph_signature.input_specs
    ]
    values: dict[Any, Any] = {}

    class Recording(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            values[n] = out
            return out

    with torch.no_grad():
        Recording(ep.graph_module).run(*feed)
    return values


def node_scope(node) -> str:
    """The scope name the torch frontend gives ``node`` (``aten.addmm.default[model.py:12]``;
    see ``converter.frontends.torch.lowering.interpret``)."""
    from converter.frontends.torch.lowering import node_location, op_name

    loc = node_location(node)
    return f"{op_name(node)}[{os.path.basename(loc)}]" if loc else op_name(node)


def _groups(recs: list[Recorded]) -> list[tuple[str, list[Recorded]]]:
    """Maximal runs of ops with the same ATen scope (unscoped ops, such as hoisted constants,
    neither join nor break a run)."""
    groups: list[tuple[str, list[Recorded]]] = []
    for rec in recs:
        scope = rec.scope
        if scope is None:
            continue
        if groups and groups[-1][0] == scope:
            groups[-1][1].append(rec)
        else:
            groups.append((scope, [rec]))
    return groups


def _uses(module, recs: list[Recorded]) -> dict[Any, set[int]]:
    """For each value: the indices of the top-level ops using it (nested regions count for
    their enclosing op); ``-1`` for ``@main``'s return."""
    uses: dict[Any, set[int]] = {}
    for rec in recs:
        nested = [rec.op.mlir, *mlir.walk_ops(rec.op.mlir)]
        for o in nested:
            for v in o.operands:
                uses.setdefault(v, set()).add(rec.index)
    ret = list(mlir.main_function(module.mlir).regions[0].blocks[0].operations)[-1]
    for v in ret.operands:
        uses.setdefault(v, set()).add(-1)
    return uses


def _group_outputs(group: list[Recorded], uses) -> list[tuple[Recorded, Any]]:
    """``(op, value)`` for each result of the group used outside it, in program order."""
    inside = {r.index for r in group}
    out = []
    for rec in group:
        for res, val in zip(rec.op.results, rec.values, strict=True):
            if uses.get(res, set()) - inside:
                out.append((rec, val))
    return out


def bisect_torch(src, target: str, args: tuple, kwargs: dict, close: Close) -> dict:
    """First diverging op of a torch source (see the module docstring)."""
    ep = src.native
    ref = torch_node_values(ep, args, kwargs)
    recs = run_backend(target, src.module, args, kwargs)
    uses = _uses(src.module, recs)
    groups = _groups(recs)
    nodes = [n for n in ep.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    gi, checked = 0, 0
    for node in nodes:
        scope = node_scope(node)
        j = next((k for k in range(gi, len(groups)) if groups[k][0] == scope), None)
        if j is None:
            continue
        outs = _group_outputs(groups[j][1], uses)
        leaves = [v for v in _tensor_leaves(ref.get(node))]
        pairs = _match(leaves, outs)
        if pairs is None:
            continue
        gi = j + 1
        for want, (rec, got) in pairs:
            checked += 1
            ok, c = close(want, got)
            if not ok:
                from converter.frontends.torch.lowering import node_location

                return _finding(
                    rec,
                    c,
                    source_op=str(node.target),
                    source_location=node_location(node),
                    group=[r.op.name for r in groups[j][1]],
                    nodes_checked=checked,
                )
    return {
        "found": False,
        "message": f"no ATen node's value diverges ({checked} values checked, {len(recs)} ops); "
        "the mismatch appears only in ops that carry no ATen scope, or at the outputs",
    }


def _tensor_leaves(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for x in value for v in _tensor_leaves(x)]
    return []


def _match(leaves: list, outs: list[tuple[Recorded, Any]]):
    """Pair each torch leaf with the last group output of its shape; None if one has none."""
    pairs = []
    for leaf in leaves:
        shape = tuple(leaf.shape)
        cands = [o for o in outs if tuple(np.shape(o[1])) == shape]
        if not cands:
            return None
        pairs.append((leaf, cands[-1] if len(leaves) == 1 else cands[min(len(pairs), len(cands) - 1)]))
    return pairs or None


# --------------------------------------------------------------------------- other sources


def bisect_backends(module, target: str, reference: str, args: tuple, kwargs: dict, close: Close) -> dict:
    """First op where ``target``'s and ``reference``'s interpreters disagree."""
    got = run_backend(target, module, args, kwargs)
    want = {w.index: w for w in run_backend(reference, module, args, kwargs)}
    for g in got:  # by position in @main: the ONNX target records only the ops it computes
        w = want.get(g.index)
        if w is None:
            continue
        for gv, wv in zip(g.values, w.values, strict=True):
            if not hasattr(gv, "shape"):
                continue
            ok, c = close(wv, gv)
            if not ok:
                return _finding(g, c, reference=f"{reference} backend", source_op=None)
    return {"found": False, "message": f"the {target} and {reference} backends agree on every op"}


def bisect(src, target: str, inputs: tuple[tuple, dict], close: Close) -> dict:
    """Locate the first diverging StableHLO op of ``target`` against the source ``src`` (a
    :class:`converter.tools.validate.Source`) on ``inputs`` (NumPy ``(args, kwargs)``), ``close``
    deciding whether a value matches its reference (:data:`Close`).

    Returns:
        ``{"found": True, "index", "op", "location", "max_abs", "max_rel", "rtol", "atol",
        "source_op", ...}`` naming the op (its position in ``@main``, StableHLO name and
        ``loc``, which for torch sources carries ``aten.op[file.py:line]``), or
        ``{"found": False, "message"}``.

    Raises:
        NotImplementedError: ``target`` cannot be evaluated op by op.
    """
    args, kwargs = inputs
    if src.framework == "torch" and src.native is not None:
        out = bisect_torch(src, target, args, kwargs, close)
    else:
        reference = "torch" if target == "jax" else "jax"
        out = bisect_backends(src.module, target, reference, args, kwargs, close)
    if target == "onnx" and not out["found"]:
        out["message"] += (
            "; the ONNX graph was bisected op by op (to_onnx(optimize=False)), so a mismatch of "
            "the default optimized graph alone comes from one of its fused patterns"
        )
    return out
