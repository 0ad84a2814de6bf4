"""``while`` → ``Loop``, ``if`` → ``If``, ``case`` → nested ``If`` (an out-of-range index runs
the last branch, per the StableHLO spec), ``composite`` → its decomposition inlined,
``map`` → its (elementwise) body on whole tensors.

ONNX subgraphs may read values of the enclosing graph by name, which is exactly how
StableHLO regions capture enclosing values, so regions are emitted as they are.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from converter.mlir import TensorType
from converter.regions import first_non_elementwise

from ..graph import live, onnx_dtype
from ..registry import register

I64_SCALAR, BOOL_SCALAR = TensorType((), "int64"), TensorType((), "bool")


def _value_info(name: str, ttype: TensorType):
    return helper.make_tensor_value_info(name, onnx_dtype(ttype.dtype), list(ttype.shape))


def subgraph(interp, name, inputs, emit):
    """A subgraph with ``inputs`` (``[(name, TensorType)]``) whose body is whatever
    ``emit()`` writes into ``interp.graph``; ``emit`` returns ``[(value, TensorType)]``."""
    sub = interp.graph.child()
    outer, interp.graph = interp.graph, sub
    try:
        outs = [(sub.op("Identity", [v]), t) for v, t in emit()]
    finally:
        interp.graph = outer
    nodes, initializers = live(sub.nodes, sub.initializers, [n for n, _ in outs])
    return helper.make_graph(
        nodes,
        sub.fresh(name),
        [_value_info(n, t) for n, t in inputs],
        [_value_info(n, t) for n, t in outs],
        initializers,
    )


@register("stablehlo.while", dynamic=True)
def _while(interp, op, *init):
    g = interp.graph
    cond, body = (interp.region_fn(r) for r in op.regions)
    types = op.result_types
    carried = [(g.fresh("carried"), t) for t in types]

    def emit():
        new = body(*(n for n, _ in carried))
        return [(cond(*new)[0], BOOL_SCALAR)] + list(zip(new, types, strict=True))

    inputs = [(g.fresh("iter"), I64_SCALAR), (g.fresh("cond_in"), BOOL_SCALAR), *carried]
    graph = subgraph(interp, "while_body", inputs, emit)
    out = g.op("Loop", ["", cond(*init)[0], *init], len(init), body=graph)
    return out if isinstance(out, list) else [out]


def _branch(interp, fn, types, name):
    return subgraph(interp, name, [], lambda: list(zip(fn(), types, strict=True)))


def _if_node(interp, pred, then_g, else_g, n):
    out = interp.graph.op("If", [pred], n, then_branch=then_g, else_branch=else_g)
    return out if isinstance(out, list) else [out]


@register("stablehlo.if", dynamic=True)
def _if(interp, op, pred):
    types = op.result_types
    then_fn, else_fn = (interp.region_fn(r) for r in op.regions)
    return _if_node(
        interp,
        pred,
        _branch(interp, then_fn, types, "then"),
        _branch(interp, else_fn, types, "else"),
        len(types),
    )


@register("stablehlo.case", dynamic=True)
def _case(interp, op, index):
    types = op.result_types
    fns = [interp.region_fn(r) for r in op.regions]
    if len(fns) == 1:
        return fns[0]()
    g = interp.graph
    result = None
    for i in range(len(fns) - 2, -1, -1):
        pred = g.op("Equal", [index, g.const(np.int32(i))])
        rest = fns[-1] if result is None else (lambda r=result: r)
        result = _if_node(
            interp,
            pred,
            _branch(interp, fns[i], types, f"case{i}"),
            _branch(interp, rest, types, "rest"),
            len(types),
        )
    return result


@register("stablehlo.composite", dynamic=True)
def _composite(interp, op, *xs):
    return interp.call_function(interp.functions[op.attr("decomposition")], xs)


@register("stablehlo.map")
def _map(interp, op, *xs):
    """The body applied to the whole operands at once, which equals applying it at every
    index when its ops are elementwise (:func:`converter.regions.first_non_elementwise`);
    a result that does not depend on the operands is ``Expand``-ed to the result shape.
    Other bodies are refused (ONNX has no per-element map)."""
    other = first_non_elementwise(op.regions[0])
    if other is not None:
        raise NotImplementedError(f"a map body with {other.name}: only elementwise bodies are supported")
    out = interp.region_fn(op.regions[0])(*xs)[0]
    return interp.graph.op("Expand", [out, interp.graph.ints(list(op.result_type.shape))])
