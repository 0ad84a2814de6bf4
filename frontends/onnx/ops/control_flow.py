"""Control flow: If → ``lax.cond``, Loop → ``lax.while_loop``/``lax.scan``, Scan →
``lax.scan`` (https://onnx.ai/onnx/operators/onnx__If.html, ...Loop.html, ...Scan.html).

A condition or trip count known at conversion time is resolved then (the taken branch is
inlined; a loop with known trip count and scan outputs becomes ``lax.scan``, or is unrolled
when its body changes shapes or carries sequences).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..graph import is_known
from ..registry import onnx_op

MAX_UNROLL = 256


@onnx_op("If", 1)
def if_(ctx, cond, *, then_branch, else_branch):
    """If: a static condition inlines the taken branch; otherwise ``lax.cond``. Branches whose
    outputs differ in shape (the spec allows it) need the condition's value: taken from the
    graph inputs it comes from at call time (``StaticValueRequired``)."""
    then_fn, else_fn = ctx.subgraph(then_branch), ctx.subgraph(else_branch)
    if is_known(cond):
        return tuple((then_fn if bool(np.asarray(cond).reshape(())) else else_fn)())
    # a sequence output stays a list (a pytree node), one array per element: jnp.asarray
    # would stack it into one array
    branches = (lambda: _arrays(then_fn()), lambda: _arrays(else_fn()))
    try:
        return tuple(lax.cond(jnp.asarray(cond).reshape(()), *branches))
    except TypeError:
        then_s, else_s = (jax.tree_util.tree_map(lambda a: a.shape, jax.eval_shape(b)) for b in branches)
        if then_s == else_s:
            raise
        ctx.static(0)  # from graph inputs: specialized on their values at call time
        raise NotImplementedError(
            f"If whose branches give outputs of different shapes (then: {then_s}, else: {else_s}) on a "
            "condition computed from the data: the output shape would depend on it"
        ) from None


def _arrays(outs) -> tuple:
    """A branch's outputs as JAX arrays, a sequence (a list) as a list of arrays."""
    return tuple(jax.tree_util.tree_map(jnp.asarray, list(outs)))


@onnx_op("Loop", 1)
def loop(ctx, trip_count=None, cond=None, *carried, body):
    """Loop(M, cond, v...): body(i, cond, v...) → (cond, v..., scan outputs...)."""
    body_fn = ctx.subgraph(body)
    n_carried = len(carried)
    m = (
        None
        if trip_count is None
        else (int(np.asarray(trip_count).reshape(())) if is_known(trip_count) else None)
    )
    if trip_count is not None and m is None and n_carried == len(body.output) - 1:
        m_dyn = jnp.asarray(trip_count).reshape(())
    else:
        m_dyn = None
    cond0 = np.asarray(True) if cond is None else cond  # a known value (is_known)
    if m is not None and m <= MAX_UNROLL and cond is not None and is_known(cond):  # (else a scan)
        return _unroll(body_fn, m, cond0, carried, len(body.output) - 1 - n_carried)
    if _changes_shapes(body_fn, carried):  # a sequence or a growing value: unrolled, whatever M
        if trip_count is None:
            raise NotImplementedError(
                "Loop without a trip count (M) whose carried values change shape across trips "
                "(a sequence, a concatenation): StableHLO's while keeps shapes"
            )
        m = int(np.asarray(ctx.static(0)).reshape(()))  # a graph input: specialized on its value
        if not is_known(cond0):
            ctx.static(1)
        return _unroll(body_fn, m, cond0, carried, len(body.output) - 1 - n_carried)
    if len(body.output) - 1 > n_carried:
        if m is None:
            ctx.static(0)  # raises StaticValueRequired: scan outputs need a static length
            raise NotImplementedError(
                "Loop without a trip count (M) and with scan outputs: their length is the number "
                "of trips, which depends on the data"
            )
        if not is_known(cond0):
            ctx.static(1)  # the first condition decides between no trip and M trips
        if not bool(np.asarray(cond0).reshape(())):
            return _unroll(body_fn, 0, cond0, carried, len(body.output) - 1 - n_carried)
        return _loop_scan(body_fn, m, cond0, carried)
    limit = m_dyn if m_dyn is not None else (m if m is not None else np.iinfo(np.int64).max)
    return _while(body_fn, 0, limit, cond0, carried)


def _changes_shapes(body_fn, carried) -> bool:
    """Whether a trip of the body changes a carried value's shape or dtype, or carries a
    sequence (TorchScript's ``outs.append(...)`` in a scripted loop: ``SequenceInsert``)."""
    if any(isinstance(v, list) for v in carried):
        return True
    avals = [jax.ShapeDtypeStruct(np.shape(v), jnp.result_type(v)) for v in carried]
    n = len(avals)
    outs = jax.eval_shape(
        lambda *vs: tuple(body_fn(jnp.asarray(0, np.int64), jnp.asarray(True), *vs)[1 : 1 + n]), *avals
    )
    return (
        any(
            not hasattr(o, "shape") or o.shape != a.shape
            for o, a in zip(jax.tree_util.tree_leaves(outs), avals, strict=False)
        )
        or len(jax.tree_util.tree_leaves(outs)) != n
    )


def _while(body_fn, start, limit, cond, carried) -> tuple:
    """Trips ``start`` … ``limit - 1`` of a Loop without scan outputs as ``lax.while_loop``,
    ending early when the body's condition turns false."""

    def step(state):
        i, c, vs = state
        outs = body_fn(jnp.asarray(i, np.int64), jnp.asarray(c, bool).reshape(()), *vs)
        return (
            i + 1,
            jnp.asarray(outs[0], bool).reshape(()),
            tuple(jnp.asarray(o, v.dtype) for o, v in zip(outs[1:], vs, strict=False)),
        )

    init = (
        jnp.asarray(start, np.int64),
        jnp.asarray(cond, bool).reshape(()),
        tuple(jnp.asarray(v) for v in carried),
    )
    _, _, vs = lax.while_loop(lambda s: (s[0] < limit) & s[1], step, init)
    return tuple(vs)


def _unroll(body_fn, m, cond, carried, n_scan):
    """A Loop of known trip count ``m`` and known first condition, unrolled (bodies may change
    shapes or carry sequences)."""
    vs = list(carried)
    scans: list[list] = [[] for _ in range(n_scan)]
    c = cond
    for i in range(m):
        if is_known(c) and not bool(np.asarray(c).reshape(())):
            break
        if not is_known(c):
            if not n_scan:  # the body computed its condition from data: the other trips as a while
                return _while(body_fn, i, m, c, vs)
            raise NotImplementedError(
                "Loop with scan outputs whose body computes its condition from the data: the loop "
                "can end early, so the scan outputs' length depends on the data"
            )
        outs = body_fn(np.array(i, np.int64), np.asarray(c, bool).reshape(()), *vs)
        c = outs[0]
        vs = list(outs[1 : 1 + len(vs)])
        for j, s in enumerate(outs[1 + len(vs) :]):
            scans[j].append(s)
    if n_scan and not scans[0]:  # no trip: empty scan outputs of the body's element shapes
        shapes = jax.eval_shape(
            lambda *v: body_fn(np.array(0, np.int64), np.asarray(True), *v), *map(jnp.asarray, carried)
        )
        return tuple(vs) + tuple(jnp.zeros((0, *a.shape), a.dtype) for a in shapes[1 + len(vs) :])
    return tuple(vs + [jnp.stack([jnp.asarray(s) for s in sc]) for sc in scans])


def _loop_scan(body_fn, m, cond, carried):
    """``m`` trips as ``lax.scan``, for a first condition known to be true; the body's
    condition must stay true: passed through (``Identity``) or a true constant. A condition
    the body computes from data would end the loop early, so the scan outputs' length would
    depend on the data (``NotImplementedError``; the carried values were silently those of
    ``m`` trips before)."""

    def step(state, i):
        c, vs = state
        outs = body_fn(i, c, *vs)
        c_out = outs[0]
        if not (c_out is c or (is_known(c_out) and bool(np.asarray(c_out).reshape(())))):
            raise NotImplementedError(
                "Loop with scan outputs whose body computes its condition from the data: the loop "
                "can end early, so the scan outputs' length depends on the data"
            )
        return (jnp.asarray(outs[0], bool).reshape(()), tuple(outs[1 : 1 + len(vs)])), tuple(
            outs[1 + len(vs) :]
        )

    (c, vs), ys = lax.scan(
        step, (jnp.asarray(cond, bool).reshape(()), tuple(carried)), jnp.arange(m, dtype=np.int64)
    )
    return tuple(vs) + tuple(ys)


@onnx_op("Scan", 9)
def scan(
    ctx,
    *inputs,
    body,
    num_scan_inputs,
    scan_input_axes=None,
    scan_input_directions=None,
    scan_output_axes=None,
    scan_output_directions=None,
):
    """Scan (opset 9+): state variables then scan inputs sliced along their axes."""
    n_state = len(inputs) - num_scan_inputs
    states, xs = list(inputs[:n_state]), list(inputs[n_state:])
    in_axes = scan_input_axes or [0] * num_scan_inputs
    in_dirs = scan_input_directions or [0] * num_scan_inputs
    xs = [jnp.moveaxis(x, a % x.ndim, 0) for x, a in zip(xs, in_axes, strict=False)]
    xs = [jnp.flip(x, 0) if d else x for x, d in zip(xs, in_dirs, strict=False)]
    body_fn = ctx.subgraph(body)

    def step(carry, sl):
        outs = body_fn(*carry, *sl)
        return tuple(jnp.asarray(o) for o in outs[:n_state]), tuple(outs[n_state:])

    carry, ys = lax.scan(step, tuple(jnp.asarray(s) for s in states), tuple(xs))
    n_out = len(ys)
    out_axes = scan_output_axes or [0] * n_out
    out_dirs = scan_output_directions or [0] * n_out
    ys = [jnp.flip(y, 0) if d else y for y, d in zip(ys, out_dirs, strict=False)]
    ys = [jnp.moveaxis(y, 0, a % y.ndim) for y, a in zip(ys, out_axes, strict=False)]
    return tuple(carry) + tuple(ys)
