"""Control flow and structural ops: while, if, case, map, optimization_barrier, composite, and the
custom_call targets with a direct JAX meaning (StableHLO spec sections of those names)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from converter.regions import static_trip_count

from ..registry import register


@register("stablehlo.while")
def _while(interp, op, *init):
    """A counted loop (static trip count: what ``fori_loop``, ``scan`` and ``map`` emit)
    becomes ``lax.fori_loop`` with static bounds, which JAX lowers to a ``scan``, so
    reverse-mode ``jax.grad`` works through it; any other loop is ``lax.while_loop``."""
    cond = interp.region_fn(op.regions[0])
    body = interp.region_fn(op.regions[1])
    trips = static_trip_count(interp, op)
    if trips is not None:
        return list(lax.fori_loop(0, trips, lambda i, c: tuple(body(*c)), tuple(init)))
    out = lax.while_loop(lambda c: cond(*c)[0], lambda c: tuple(body(*c)), tuple(init))
    return list(out)


@register("stablehlo.if")
def _if(interp, op, pred):
    then_fn = interp.region_fn(op.regions[0])
    else_fn = interp.region_fn(op.regions[1])
    return list(lax.cond(pred, lambda: tuple(then_fn()), lambda: tuple(else_fn())))


@register("stablehlo.case")
def _case(interp, op, index):
    """Spec: an index outside ``[0, len(branches))`` (negative too) runs the last branch
    (``lax.switch`` would clamp a negative index to branch 0)."""
    branches = [interp.region_fn(r) for r in op.regions]
    n = len(branches)
    index = jnp.where((index < 0) | (index >= n), n - 1, index)
    return list(lax.switch(index, [lambda b=b: tuple(b()) for b in branches]))


@register("stablehlo.map")
def _map(interp, op, *xs):
    """The body (a computation on 0-d tensors) applied at every index of the operands: the
    body vectorized with ``jax.vmap`` once per dimension, so any body, not only an
    elementwise one, gets each element's scalars (``dimensions`` is ``0..rank-1`` by the
    spec's constraints)."""
    body = interp.region_fn(op.regions[0])

    def scalar(*elements):
        return body(*elements)[0]

    f = scalar
    for _ in range(op.result_type.rank):
        f = jax.vmap(f)
    return f(*xs)


@register("stablehlo.optimization_barrier")
def _optimization_barrier(interp, op, *xs):
    return list(lax.optimization_barrier(tuple(xs)))


@register("stablehlo.composite")
def _composite(interp, op, *xs):
    return interp.call_function(interp.functions[op.attr("decomposition")], xs)
