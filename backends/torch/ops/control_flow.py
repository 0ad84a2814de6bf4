"""Control flow and structural ops: while, if, case, map, optimization_barrier, composite
(StableHLO spec sections of those names).

``while`` becomes torch's ``while_loop`` and ``if``/``case`` become ``torch.cond`` (nested for
``case``), the higher-order ops ``torch.export`` keeps. Values a region captures from the
enclosing scope are passed explicitly as extra operands, which both HOPs require.
"""

from __future__ import annotations

import warnings

import torch
from jaxlib.mlir import ir

from converter import mlir

from ..registry import register


def _is_dense_constant(op: ir.Operation) -> bool:
    """A ``stablehlo.constant`` that is not a splat (becomes a tensor attribute of the graph,
    so it must be created outside higher-order-op branches)."""
    if op.name != "stablehlo.constant":
        return False
    value = ir.DenseElementsAttr(op.attributes["value"])
    return not value.is_splat


def free_values(region: ir.Region) -> list[ir.Value]:
    """Values used inside ``region`` (at any depth) but defined outside it, in first-use
    order, followed by the results of dense constants inside it (hoisted out, see
    :func:`_is_dense_constant`)."""
    defined: set = set()
    used: list = []
    seen: set = set()
    hoisted: list = []

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
                if _is_dense_constant(op):
                    hoisted.append(op.results[0])

    visit(region)
    return [v for v in used if v not in defined] + hoisted


def _value_of(interp, v: ir.Value):
    env = interp.env
    if v in env:
        return env[v]
    return interp.run_op(mlir.Op(v.owner.operation if hasattr(v.owner, "operation") else v.owner), [], env)[0]


def closed_region(interp, region: ir.Region):
    """``(fn, captured)``: ``fn(*block_args, *captured)`` evaluates ``region``; ``captured``
    are the current values of the region's free variables."""
    free = free_values(region)
    env = interp.env
    captured = [_value_of(interp, v) for v in free]
    interp.env = env
    nargs = len(region.blocks[0].arguments)

    def fn(*args):
        outer = dict(zip(free, args[nargs:], strict=True))
        return interp.run_region(region, list(args[:nargs]), outer)

    return fn, captured


def _no_alias(outs, inputs):
    """HOP branches may not return their inputs (clone those) and must agree on strides
    (make every output contiguous)."""
    ids = {id(x) for x in inputs}
    return tuple(
        o.clone(memory_format=torch.contiguous_format) if id(o) in ids else o.contiguous() for o in outs
    )


MAX_UNROLLED_OPS = 20000


class WhileLoopGradientWarning(UserWarning):
    """A data-dependent ``while`` became torch's ``while_loop``, whose autograd is unreliable."""


_CMP = {
    "LT": lambda a, b: a < b, "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b,
    "GE": lambda a, b: a >= b, "NE": lambda a, b: a != b,
}  # fmt: skip


def _owner(value: ir.Value):
    owner = value.owner
    return owner.operation if hasattr(owner, "operation") and not isinstance(owner, ir.Operation) else owner


def _static_trip_count(interp, op: mlir.Op) -> int | None:
    """The trip count of a counted loop (``fori_loop``: the condition compares one carried
    integer with a constant, the body adds a constant to it, its initial value is a
    constant), or None when it is not static or too large to unroll."""
    cond_block = op.regions[0].blocks[0]
    body_block = op.regions[1].blocks[0]
    ret = list(cond_block.operations)[-1].operation
    cmp = _owner(ret.operands[0])
    if not isinstance(cmp, ir.Operation) or cmp.name != "stablehlo.compare":
        return None
    args = list(cond_block.arguments)
    if cmp.operands[0] not in args:
        return None
    k = args.index(cmp.operands[0])
    cmp_op = mlir.Op(cmp)
    limit = interp.static_operand(cmp_op, 1)
    start = interp.static_operand(op, k)
    direction = str(cmp_op.attr("comparison_direction"))
    body_ret = list(body_block.operations)[-1].operation
    step_op = _owner(body_ret.operands[k])
    if limit is None or start is None or direction not in _CMP:
        return None
    if not isinstance(step_op, ir.Operation) or step_op.name != "stablehlo.add":
        return None
    if step_op.operands[0] != list(body_block.arguments)[k]:
        return None
    step = interp.static_operand(mlir.Op(step_op), 1)
    if step is None:
        return None
    i, limit, step, count = int(start), int(limit), int(step), 0
    body_ops = sum(1 for _ in mlir.walk_ops(op.mlir))
    while _CMP[direction](i, limit):
        i, count = i + step, count + 1
        if count * body_ops > MAX_UNROLLED_OPS:
            return None
    return count


@register("stablehlo.while")
def _while(interp, op, *init):
    """Counted loops (static trip count, small enough) are unrolled: exact autograd and a
    straight-line graph. Other loops become torch's ``while_loop`` HOP (forward and export
    exact; its autograd does not accumulate gradients of loop-invariant values, see
    docs/torch_backend.md)."""
    trips = _static_trip_count(interp, op)
    if trips is not None:
        env = interp.env
        vals = list(init)
        for _ in range(trips):
            vals = interp.run_region(op.regions[1], vals, env)
        interp.env = env
        return vals
    if any(t.is_floating_point() or t.is_complex() for t in init):
        warnings.warn(
            f"stablehlo.while at {op.location or '?'} has no static trip count and becomes torch's "
            "while_loop: forward and torch.export are exact, but torch 2.13's while_loop autograd "
            "drops gradient contributions that flow between loop-carried values (see "
            "docs/torch_backend.md); do not differentiate through it",
            WhileLoopGradientWarning,
            stacklevel=2,
        )
    cond, cond_cap = closed_region(interp, op.regions[0])
    body, body_cap = closed_region(interp, op.regions[1])
    n, nc = len(init), len(cond_cap)
    carried = tuple(init) + tuple(cond_cap) + tuple(body_cap)

    def cond_fn(*args):
        return cond(*args[:n], *args[n : n + nc])[0]

    def body_fn(*args):
        out = body(*args[:n], *args[n + nc :])
        return _no_alias(tuple(out) + tuple(args[n:]), args)

    if not init:
        raise NotImplementedError("while with no loop-carried values")
    return list(torch.ops.higher_order.while_loop(cond_fn, body_fn, carried, ()))[:n]


def _cond(pred, branches, operands):
    true_fn, false_fn = branches

    def wrap(fn):
        def run(*ops):
            return _no_alias(fn(*ops), ops)

        return run

    return list(torch.ops.higher_order.cond(pred, wrap(true_fn), wrap(false_fn), tuple(operands)))


def _branch_fns(interp, regions):
    """One function per region taking the union of every region's captured values."""
    closed = [closed_region(interp, r) for r in regions]
    frees = [free_values(r) for r in regions]
    union: list = []
    for fr in frees:
        for v in fr:
            if v not in union:
                union.append(v)
    env = interp.env
    values = [_value_of(interp, v) for v in union]
    interp.env = env
    fns = []
    for (fn, _), fr in zip(closed, frees, strict=False):
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
    if n == 1:
        return list(fns[0](*values))
    idx = index.reshape(()).to(torch.int64)
    idx = torch.where((idx < 0) | (idx >= n), torch.full_like(idx, n - 1), idx)

    # branches receive the index explicitly: HOP branches may not close over tensors
    def branch(k):
        return lambda i, *ops: fns[k](*ops)

    def chain(k):
        if k == n - 1:
            return branch(k)
        return lambda i, *ops: tuple(_cond(i == k, (branch(k), chain(k + 1)), (i, *ops)))

    return _cond(idx == 0, (branch(0), chain(1)), (idx, *values))


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
