"""Higher-order control-flow ops of ``torch.export`` → ``jax.lax`` control flow.

``torch.export`` keeps ``torch.cond``, ``while_loop``, ``scan``, ``map`` and
``associative_scan`` as higher-order ops (``torch.ops.higher_order.*``) whose function
arguments are submodules of the exported graph (``get_attr`` nodes: ``true_graph_0``,
``while_loop_body_graph_0``, ``scan_combine_graph_0``...). The walker passes those
submodules to the rules below as ``torch.fx.GraphModule`` objects; each rule evaluates a
subgraph with the same walker (:func:`..lowering.interpret`, every subgraph node cast to the
dtype and checked against the shape ``torch.export`` recorded) inside the matching ``jax.lax``
construct, so the StableHLO module gets ``case`` (``cond``) and ``while`` (the loops) regions.

Semantics follow ``torch/_higher_order_ops/{cond,while_loop,scan,map,associative_scan}.py``:

* ``cond(pred, true_fn, false_fn, operands)``: ``pred`` a boolean (or numeric) scalar tensor;
  both branches take ``operands`` and return tensors of equal shapes and dtypes.
* ``while_loop(cond_fn, body_fn, carried_inputs, additional_inputs)``: ``cond_fn`` and
  ``body_fn`` take ``(*carried, *additional)``; the body returns the new carried values.
* ``scan(combine_fn, init, xs, additional_inputs)``: along dim 0 of every ``xs`` leaf
  (``torch.export`` moves ``dim`` to 0 and applies ``reverse`` with ``flip`` outside the op);
  ``combine_fn(*carry, *x_t, *additional) -> (*next_carry, *y_t)``; returns
  ``(*final_carry, *stacked_ys)``.
* ``map_impl(body_fn, xs, pos_args)`` (``torch._higher_order_ops.map``): ``body_fn(*x_t,
  *pos_args)`` for every slice ``t`` of dim 0, outputs stacked.
* ``associative_scan(combine_fn, xs, additional_inputs)``: the inclusive scan along dim 0 with
  an associative, pointwise ``combine_fn`` traced on single slices (torch only emits this op
  for ``combine_mode="pointwise"`` on CUDA/XPU; the CPU ``generic`` mode is decomposed into
  ATen slices and adds before it reaches the converter).

Random ops inside a loop body are refused: the body is traced once, so each trip would draw
the same numbers, where torch draws fresh ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import torch
from jax import lax

from ..lowering import graphs, interpret, op_name
from ..registry import register
from ._util import is_array
from .random import RANDOM_OPS


def subgraph_fn(gm: torch.fx.GraphModule) -> Callable[..., list[Any]]:
    """``fn(*args) -> list`` evaluating the subgraph ``gm`` (one argument per placeholder)
    with the ATen rules; returns its flat outputs."""
    return lambda *args: interpret(gm.graph, list(args))


def _no_random(gm: torch.fx.GraphModule, what: str) -> None:
    for g in graphs(gm.graph):
        for n in g.nodes:
            if n.op == "call_function" and op_name(n) in RANDOM_OPS:
                raise NotImplementedError(
                    f"{op_name(n)} inside the body of {what}: a converted loop body is traced once, so "
                    "every trip would draw the same random numbers (torch draws new ones each trip); "
                    "draw them before the loop and pass them in as xs"
                )


def _like(outs: Sequence[Any], carried: Sequence[jax.Array]) -> tuple:
    """Loop outputs in the carried values' dtypes (the walker already checked the shapes)."""
    return tuple(jnp.asarray(o).astype(c.dtype) for o, c in zip(outs, carried, strict=True))


@register("higher_order.cond")
def cond(
    pred, true_fn: torch.fx.GraphModule, false_fn: torch.fx.GraphModule, operands: Sequence[Any]
) -> tuple:
    """``torch.cond(pred, true_fn, false_fn, operands)`` as ``lax.cond`` (StableHLO ``case``
    with two branches). ``pred``: a scalar tensor (nonzero means true), or a Python bool,
    which picks the branch at conversion time.
    Both branches are traced; only the chosen one runs. Differentiable (``jax.grad`` flows
    through the taken branch, as torch's autograd)."""
    operands = tuple(jnp.asarray(o) for o in operands)
    if not is_array(pred):  # a Python bool (or a symbolic-size comparison the walker decided)
        return tuple((subgraph_fn(true_fn) if bool(pred) else subgraph_fn(false_fn))(*operands))
    pred = jnp.asarray(pred).reshape(()) != 0
    t, f = subgraph_fn(true_fn), subgraph_fn(false_fn)
    return tuple(lax.cond(pred, lambda ops: tuple(t(*ops)), lambda ops: tuple(f(*ops)), operands))


@register("higher_order.while_loop")
def while_loop(
    cond_fn: torch.fx.GraphModule,
    body_fn: torch.fx.GraphModule,
    carried_inputs: Sequence[Any],
    additional_inputs: Sequence[Any],
) -> tuple:
    """``torch._higher_order_ops.while_loop`` as ``lax.while_loop`` (StableHLO ``while``).

    Carried values keep their shapes and dtypes across trips; ``additional_inputs`` are
    loop-invariant (captured by the regions). Like torch's, the converted loop has a
    data-dependent trip count, so reverse-mode ``jax.grad`` through it is not available in JAX
    (forward mode is); the torch backend differentiates it exactly.
    """
    _no_random(body_fn, "while_loop")
    extra = tuple(additional_inputs)
    c, b = subgraph_fn(cond_fn), subgraph_fn(body_fn)
    init = tuple(jnp.asarray(x) for x in carried_inputs)

    def cond_(carry):
        return jnp.asarray(c(*carry, *extra)[0]).reshape(()) != 0

    def body_(carry):
        return _like(b(*carry, *extra), carry)

    return tuple(lax.while_loop(cond_, body_, init))


@register("higher_order.scan")
def scan(
    combine_fn: torch.fx.GraphModule, init: Sequence[Any], xs: Sequence[Any], additional_inputs: Sequence[Any]
) -> tuple:
    """``torch._higher_order_ops.scan`` as ``lax.scan`` along dim 0 (a StableHLO ``while``
    with a static trip count). Returns ``(*final_carry, *stacked_ys)``; differentiable."""
    _no_random(combine_fn, "scan")
    extra = tuple(additional_inputs)
    f = subgraph_fn(combine_fn)
    carry0 = tuple(jnp.asarray(c) for c in init)
    n = len(carry0)

    def step(carry, x):
        out = f(*carry, *x, *extra)
        return _like(out[:n], carry), tuple(out[n:])

    carry, ys = lax.scan(step, carry0, tuple(jnp.asarray(x) for x in xs))
    return (*carry, *ys)


@register("higher_order.map_impl")
def map_impl(body_fn: torch.fx.GraphModule, xs: Sequence[Any], pos_args: Sequence[Any]) -> tuple:
    """``torch._higher_order_ops.map`` (``map_impl(body, xs, pos_args)``) as ``lax.map``:
    the body applied to each slice of dim 0 of ``xs``, outputs stacked along dim 0."""
    _no_random(body_fn, "map")
    extra = tuple(pos_args)
    f = subgraph_fn(body_fn)
    return tuple(lax.map(lambda x: tuple(f(*x, *extra)), tuple(jnp.asarray(x) for x in xs)))


@register("higher_order.associative_scan")
def associative_scan(
    combine_fn: torch.fx.GraphModule, xs: Sequence[Any], additional_inputs: Sequence[Any]
) -> tuple:
    """``torch._higher_order_ops.associative_scan`` (pointwise mode) as
    ``lax.associative_scan`` along dim 0. ``combine_fn(*a, *b, *additional)`` was traced on
    single slices (dim 0 removed), so it is vectorized over the slices ``lax.associative_scan``
    combines with ``jax.vmap``. The grouping of the combines differs from torch's, so results
    agree to rounding for a floating-point ``combine_fn``."""
    _no_random(combine_fn, "associative_scan")
    extra = tuple(additional_inputs)
    f = subgraph_fn(combine_fn)
    n = len(xs)

    def combine(a, b):
        return tuple(jax.vmap(lambda *ab: tuple(f(*ab, *extra)))(*a, *b))[:n]

    return tuple(lax.associative_scan(combine, tuple(jnp.asarray(x) for x in xs), axis=0))
