"""Control flow and structural ops: while, if, case, map, optimization_barrier, composite
(StableHLO spec sections of those names).

``while`` becomes torch's ``while_loop`` and ``if``/``case`` become ``torch.cond`` (nested for
``case``), the higher-order ops ``torch.export`` keeps. Values a region captures from the
enclosing scope are passed explicitly as extra operands, which both HOPs require.
"""

from __future__ import annotations

import torch
from jaxlib.mlir import ir
from torch._higher_order_ops.while_loop import while_loop

from converter import mlir

from ..registry import register


def free_values(region: ir.Region) -> list[ir.Value]:
    """Values used inside ``region`` (at any depth) but defined outside it, in first-use
    order."""
    defined: set = set()
    used: list = []
    seen: set = set()

    def visit(reg: ir.Region):
        for block in reg.blocks:
            for arg in block.arguments:
                defined.add(arg)
            for o in block.operations:
                op = o.operation
                for v in op.operands:
                    if v not in defined and v not in seen:
                        seen.add(v)
                        used.append(v)
                for r in op.regions:
                    visit(r)
                for res in op.results:
                    defined.add(res)

    visit(region)
    return [v for v in used if v not in defined]


def closed_region(interp, region: ir.Region):
    """``(fn, captured)``: ``fn(*block_args, *captured)`` evaluates ``region``; ``captured``
    are the current values of the region's free variables."""
    free = free_values(region)
    env = interp.env
    captured = [env[v] for v in free]
    nargs = len(region.blocks[0].arguments)

    def fn(*args):
        outer = dict(zip(free, args[nargs:]))
        return interp.run_region(region, list(args[:nargs]), outer)

    return fn, captured


def _no_alias(outs, inputs):
    """HOP branches may not return their inputs: clone those."""
    ids = {id(x) for x in inputs}
    return tuple(o.clone() if id(o) in ids else o for o in outs)


@register("stablehlo.while")
def _while(interp, op, *init):
    cond, cond_cap = closed_region(interp, op.regions[0])
    body, body_cap = closed_region(interp, op.regions[1])
    n, nc = len(init), len(cond_cap)
    extra = tuple(cond_cap) + tuple(body_cap)

    def cond_fn(*args):
        return cond(*args[:n], *args[n : n + nc])[0]

    def body_fn(*args):
        out = body(*args[:n], *args[n + nc :])
        return _no_alias(out, args)

    if not init:
        raise NotImplementedError("while with no loop-carried values")
    return list(while_loop(cond_fn, body_fn, tuple(init), extra))


def _cond(pred, branches, operands):
    true_fn, false_fn = branches

    def wrap(fn):
        def run(*ops):
            return _no_alias(fn(*ops), ops)

        return run

    return list(torch.cond(pred, wrap(true_fn), wrap(false_fn), tuple(operands)))


def _branch_fns(interp, regions):
    """One function per region taking the union of every region's captured values."""
    closed = [closed_region(interp, r) for r in regions]
    frees = [free_values(r) for r in regions]
    union: list = []
    for fr in frees:
        for v in fr:
            if v not in union:
                union.append(v)
    values = [interp.env[v] for v in union]
    fns = []
    for (fn, _), fr in zip(closed, frees):
        pick = [union.index(v) for v in fr]
        fns.append(lambda *ops, fn=fn, pick=pick: fn(*[ops[i] for i in pick]))
    return fns, values


@register("stablehlo.if")
def _if(interp, op, pred):
    if not op.results:
        return []
    fns, values = _branch_fns(interp, op.regions)
    return _cond(pred.reshape(()), fns, values)


@register("stablehlo.case")
def _case(interp, op, index):
    if not op.results:
        return []
    fns, values = _branch_fns(interp, op.regions)
    n = len(fns)
    idx = index.reshape(()).to(torch.int64)
    idx = torch.where((idx < 0) | (idx >= n), torch.full_like(idx, n - 1), idx)

    def chain(k):
        if k == n - 1:
            return fns[k]
        rest = chain(k + 1)
        return lambda *ops: tuple(_cond(idx == k, (fns[k], rest), ops))

    if n == 1:
        return list(fns[0](*values))
    return _cond(idx == 0, (fns[0], chain(1)), values)


@register("stablehlo.map")
def _map(interp, op, *xs):
    body = interp.region_fn(op.regions[0])
    return body(*xs)


@register("stablehlo.optimization_barrier")
def _optimization_barrier(interp, op, *xs):
    return list(xs)


@register("stablehlo.composite")
def _composite(interp, op, *xs):
    return interp.call_function(interp.functions[op.attr("decomposition")], xs)


@register("stablehlo.custom_call@Sharding", "stablehlo.custom_call@SPMDFullToShardShape",
          "stablehlo.custom_call@SPMDShardToFullShape")  # fmt: skip
def _sharding(interp, op, x):
    return x


del mlir
