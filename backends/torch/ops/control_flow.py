"""Control flow and structural ops: while, if, case, map, optimization_barrier, composite
(StableHLO spec sections of those names).

``while`` becomes torch's ``while_loop`` and ``if``/``case`` become ``torch.cond`` (nested for
``case``), the higher-order ops ``torch.export`` keeps. Values a region captures from the
enclosing scope are passed explicitly as extra operands, which both HOPs require.

Gradients of data-dependent loops: torch 2.13's ``while_loop`` autograd treats a carried value
that does not require grad on entry as a constant for the whole loop (``c = 0.5 * c + h`` from
``c = 0`` over 3 trips gives d/dh = 1 instead of 1.75). :func:`exact_control_flow_gradients`
therefore rewrites every ``while_loop`` node of the traced graph into a call of
:func:`while_loop_exact_grad`, which runs the same HOP when no gradient is needed (and whenever
``torch.export`` traces it) and otherwise an autograd function that records the trip count and
differentiates the unrolled body in backward. ``cond`` nodes likewise become
:func:`cond_exact_grad` (torch's ``cond`` autograd has no second derivatives).
"""

from __future__ import annotations

import torch
from jaxlib.mlir import ir

from converter import mlir
from converter._torch_internal import is_fake, proxy_tensor
from converter.errors import ConversionError
from converter.regions import first_non_elementwise, static_trip_count

from .. import recorder
from ..registry import register
from ..symbolic import SymArray, materialize


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
    are the current tensor values of the region's free variables. Shape values
    (:class:`~converter.backends.torch.symbolic.SymArray`: sizes of a module traced on symbolic sizes,
    such as a ``lax.scan``'s symbolic length) are closed over instead, as the higher-order
    ops take only tensors."""
    free = free_values(region)
    env = interp.env
    values = [_value_of(interp, v) for v in free]
    interp.env = env
    nargs = len(region.blocks[0].arguments)
    shapes = {i: v for i, v in enumerate(values) if isinstance(v, SymArray)}
    captured = [v for i, v in enumerate(values) if i not in shapes]

    def fn(*args):
        given = iter(args[nargs:])
        outer = {v: shapes[i] if i in shapes else next(given) for i, v in enumerate(free)}
        outs = interp.run_region(region, list(args[:nargs]), outer)
        return [materialize(interp, o) for o in outs]

    return fn, captured


def _no_alias(outs, inputs):
    """HOP branches may not return their inputs, views (of an input, as a transposed
    parameter) or one tensor twice (clone those) and must agree on strides (make every
    output contiguous). Traced on fake tensors (AOTAutograd under ``torch.compile``), every
    output is cloned: what aliases what is not visible there."""
    seen = {id(x) for x in inputs}
    traced = any(is_fake(x) for x in inputs)  # AOTAutograd: functional views hide their base
    fresh = []
    for o in outs:
        aliased = traced or id(o) in seen or o._is_view()
        fresh.append(o.clone(memory_format=torch.contiguous_format) if aliased else o.contiguous())
        seen.add(id(o))
    return tuple(fresh)


def _distinct(values: tuple) -> tuple:
    """``values`` with repeated tensor objects cloned: a value both carried and captured (or
    captured by both regions) would otherwise enter ``while_loop`` twice, which
    ``torch.compile`` rejects as input aliasing."""
    seen: set[int] = set()
    out = []
    for v in values:
        out.append(v.clone() if id(v) in seen else v)
        seen.add(id(v))
    return tuple(out)


MAX_UNROLLED_OPS = 20000


class WhileLoopGradientError(ConversionError):
    """The backward of a data-dependent ``while`` (its replay under autograd) failed; names
    the loop's StableHLO location."""


def _static_trip_count(interp, op: mlir.Op) -> int | None:
    """The trip count of a counted loop (:func:`converter.regions.static_trip_count`), or
    None when it is not static or too large to unroll (``MAX_UNROLLED_OPS``)."""
    body_ops = max(1, sum(1 for _ in mlir.walk_ops(op.mlir)))
    return static_trip_count(interp, op, MAX_UNROLLED_OPS // body_ops)


@register("stablehlo.while")
def _while(interp, op, *init):
    """Counted loops (static trip count, small enough) are unrolled: exact autograd and a
    straight-line graph. Other loops become torch's ``while_loop`` HOP, tagged with the op's
    location for :func:`exact_control_flow_gradients` (forward and export exact; gradients through
    :func:`while_loop_exact_grad`)."""
    trips = _static_trip_count(interp, op)
    if trips is not None:
        env = interp.env
        vals = list(init)
        for _ in range(trips):
            vals = interp.run_region(op.regions[1], vals, env)
        interp.env = env
        return vals
    if recorder.active():
        raise recorder.NeedsMakeFx("stablehlo.while: a while_loop higher-order op")
    cond, cond_cap = closed_region(interp, op.regions[0])
    body, body_cap = closed_region(interp, op.regions[1])
    n, nc = len(init), len(cond_cap)
    # the body's outputs are contiguous (_no_alias), so the carried values must be too: while_loop
    # refuses a carried input whose strides differ from the body's output (a transposed init)
    carried = _distinct(tuple(v.contiguous() for v in (*init, *cond_cap, *body_cap)))

    def cond_fn(*args):
        return cond(*args[:n], *args[n : n + nc])[0]

    def body_fn(*args):
        out = body(*args[:n], *args[n + nc :])
        return _no_alias(tuple(out) + tuple(args[n:]), args)

    if not init:
        raise NotImplementedError("while with no loop-carried values")
    out = list(torch.ops.higher_order.while_loop(cond_fn, body_fn, carried, ()))
    _tag_node(out[0], op.location or "?")
    return out[:n]


_LOCATION_META = "stablehlo_location"


def _tag_node(result: torch.Tensor, location: str) -> None:
    """Record ``location`` in the meta of the FX node that produced ``result`` (make_fx is
    tracing it), for the error messages of :func:`while_loop_exact_grad`."""
    mode = proxy_tensor.get_proxy_mode()
    if mode is None or not proxy_tensor.has_proxy_slot(result, mode.tracer):
        return
    node = proxy_tensor.get_proxy_slot(result, mode.tracer).proxy.node
    while node.target is not torch.ops.higher_order.while_loop and node.args:
        node = node.args[0]  # the getitem of the loop's result tuple
        if not isinstance(node, torch.fx.Node):
            return
    node.meta[_LOCATION_META] = location


# ------------------------------------------------------------------ exact loop gradients


def _needs_grad(values) -> bool:
    return torch.is_grad_enabled() and any(isinstance(v, torch.Tensor) and v.requires_grad for v in values)


def while_loop_exact_grad(cond_fn, body_fn, carried: tuple, additional: tuple, location: str = "?") -> tuple:
    """``torch.ops.higher_order.while_loop(cond_fn, body_fn, carried, additional)`` with exact
    reverse-mode gradients.

    The HOP itself runs when no input requires grad, when grad mode is off, and while
    ``torch.export`` traces (the exported program keeps the HOP). Otherwise the loop runs as
    :class:`_ExactWhile` (outside ``torch.compile``'s graph: a graph break), whose backward
    replays the recorded number of trips of ``body_fn`` under autograd.

    Args:
        cond_fn, body_fn: the loop's condition (``*carried, *additional -> bool scalar``) and
            body (``*carried, *additional -> carried``), as for ``while_loop``.
        carried, additional: tensors, as for ``while_loop``.
        location: the ``stablehlo.while`` source location, for error messages.

    Returns:
        the final carried values.

    Raises:
        WhileLoopGradientError: at backward time, when replaying the loop fails.
    """
    carried, additional = tuple(carried), tuple(additional)
    if torch.compiler.is_exporting() or not _needs_grad(carried + additional):
        return torch.ops.higher_order.while_loop(cond_fn, body_fn, carried, additional)
    return _run_exact(cond_fn, body_fn, carried, additional, location)


@torch.compiler.disable
def _run_exact(cond_fn, body_fn, carried: tuple, additional: tuple, location: str) -> tuple:
    return _ExactWhile.apply(cond_fn, body_fn, len(carried), location, *carried, *additional)


class _ExactWhile(torch.autograd.Function):
    """Forward: the ``while_loop`` HOP with a trip counter carried along. Backward: the body
    applied that many times to the saved inputs under autograd, differentiated with
    ``torch.autograd.grad`` (the loop is recomputed; nothing per trip is stored in forward)."""

    @staticmethod
    def forward(ctx, cond_fn, body_fn, n_carried, location, *inputs):
        carried, additional = inputs[:n_carried], inputs[n_carried:]
        counter = torch.zeros((), dtype=torch.int64, device=inputs[0].device)
        outs = torch.ops.higher_order.while_loop(
            lambda k, *c: cond_fn(*c),
            lambda k, *c: (k + 1, *body_fn(*c)),
            (counter, *carried),
            additional,
        )
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*inputs)
        ctx.body_fn, ctx.n_carried, ctx.location, ctx.trips = body_fn, n_carried, location, outs[0]
        return tuple(outs[1:])

    @staticmethod
    def backward(ctx, *grads):
        try:
            return _ExactWhile._backward(ctx, *grads)
        except WhileLoopGradientError:
            raise
        except Exception as e:  # noqa: BLE001 - re-raised naming the loop
            raise WhileLoopGradientError(f"stablehlo.while at {ctx.location}: backward failed: {e}") from e

    @staticmethod
    def _backward(ctx, *grads):
        """Gradients of the inputs: the body replayed ``trips`` times under autograd (attached
        to the saved inputs when a differentiable gradient is requested)."""
        inputs = ctx.saved_tensors
        wanted = [ctx.needs_input_grad[4 + i] for i in range(len(inputs))]
        higher = torch.is_grad_enabled()  # create_graph: the replay stays attached to the inputs
        with torch.enable_grad():
            if higher:  # fresh aliases: each input its own autograd source
                leaves = [x.view_as(x) for x in inputs]
            else:
                leaves = [x.detach().requires_grad_(w) for x, w in zip(inputs, wanted, strict=True)]
            carried, additional = tuple(leaves[: ctx.n_carried]), tuple(leaves[ctx.n_carried :])
            for _ in range(int(ctx.trips)):
                carried = tuple(ctx.body_fn(*carried, *additional))
            pairs = [(o, g) for o, g in zip(carried, grads, strict=True) if g is not None and o.requires_grad]
            sources = [x for x, w in zip(leaves, wanted, strict=True) if w]
            if pairs and sources:
                outs, seeds = [o for o, _ in pairs], [g for _, g in pairs]
                got = torch.autograd.grad(outs, sources, seeds, allow_unused=True, create_graph=higher)
            else:
                got = [None] * len(sources)
        it = iter(got)
        return (None, None, None, None, *[next(it) if w else None for w in wanted])


def cond_exact_grad(pred, true_fn, false_fn, operands: tuple) -> tuple:
    """``torch.ops.higher_order.cond(pred, true_fn, false_fn, operands)``, differentiable to
    any order: when a gradient is needed (and not under ``torch.export``) the chosen branch
    runs directly (a graph break under ``torch.compile``), since torch 2.13's ``cond``
    autograd returns first derivatives that are not themselves differentiable."""
    operands = tuple(operands)
    if torch.compiler.is_exporting() or not _needs_grad(operands):
        return torch.ops.higher_order.cond(pred, true_fn, false_fn, operands)
    return _run_branch(pred, true_fn, false_fn, operands)


@torch.compiler.disable
def _run_branch(pred, true_fn, false_fn, operands: tuple) -> tuple:
    return tuple((true_fn if bool(pred) else false_fn)(*operands))


_EXACT = {
    torch.ops.higher_order.while_loop: while_loop_exact_grad,
    torch.ops.higher_order.cond: cond_exact_grad,
}


def exact_control_flow_gradients(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Rewrite every ``while_loop`` and ``cond`` HOP node of ``gm`` and of its sub-GraphModules
    (loop bodies, branches) into a call of :func:`while_loop_exact_grad` (with the loop's
    location) or :func:`cond_exact_grad`; returns ``gm`` (modified in place). The rewritten
    graph computes the same forward values, exports to the same HOPs, and differentiates
    exactly."""
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        changed = False
        for node in module.graph.nodes:
            if node.op == "call_function" and node.target in _EXACT:
                if node.target is torch.ops.higher_order.while_loop:
                    node.kwargs = {**node.kwargs, "location": node.meta.get(_LOCATION_META, "?")}
                node.target = _EXACT[node.target]
                changed = True
        if changed:
            module.recompile()
    return gm


def _cond(pred, branches, operands):
    if recorder.active():
        raise recorder.NeedsMakeFx("stablehlo.if/case: a cond higher-order op")
    true_fn, false_fn = branches

    def wrap(fn):
        def run(*ops):
            return _no_alias(fn(*ops), ops)

        return run

    operands = tuple(operands)
    if any(is_fake(x) for x in operands):  # AOTAutograd refuses operands aliasing each other
        operands = tuple(x.clone() if x._is_view() else x for x in _distinct(operands))
    return list(torch.ops.higher_order.cond(pred, wrap(true_fn), wrap(false_fn), operands))


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
    tensor_at = {}  # union index -> position among the tensor values (closed_region's captures)
    for i, v in enumerate(values):
        if not isinstance(v, SymArray):
            tensor_at[i] = len(tensor_at)
    fns = []
    for (fn, _), fr in zip(closed, frees, strict=False):
        pick = [tensor_at[union.index(v)] for v in fr if union.index(v) in tensor_at]
        fns.append(lambda *ops, fn=fn, pick=pick: fn(*[ops[i] for i in pick]))
    return fns, [v for v in values if not isinstance(v, SymArray)]


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
    """The body applied to the whole operands at once, which equals applying it at every
    index when its ops are elementwise (:func:`converter.regions.first_non_elementwise`);
    a result that does not depend on the operands is broadcast to the result shape. Other
    bodies are refused."""
    other = first_non_elementwise(op.regions[0])
    if other is not None:
        raise NotImplementedError(f"a map body with {other.name}: only elementwise bodies are supported")
    out = interp.region_fn(op.regions[0])(*xs)[0]
    shape = xs[0].shape if xs else op.result_type.shape  # the operands' (common) shape
    return out if out.shape == shape else out.expand(shape).clone()


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
