"""Multi-op StableHLO patterns emitted as one native torch call.

:func:`rewrite` is asked, for each op the torch interpreter is about to evaluate whose name is
in :data:`ROOTS`, whether the op is the last one of a known pattern; if so it returns the
pattern's value computed by one torch function from values the interpreter already holds,
and the rule is not run. The ops inside the pattern were evaluated already (the interpreter
walks in order) but nothing reads them any more, so the FX dead-code pass of
:func:`converter.backends.torch.native.simplify` removes them (those read elsewhere stay).

Patterns (each matched op by op: op names, operand order up to commutativity, reduction
dimensions and bodies, broadcast dimensions, constants compared in the value's dtype):

- **softmax** (``jax.nn.softmax``): ``exp(x - bcast(max(x)))`` over one dimension divided by
  ``bcast(sum(...))``, the max optionally as ``maximum(-inf, max)`` → ``F.softmax(x, dim)``
  (the same max-subtracted algorithm, so also identical for rows of ``-inf``/NaN).
- **gelu, tanh form** (``jax.nn.gelu(approximate=True)``, Flax's ``nn.gelu``):
  ``x * (0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x*x*x))))`` → ``F.gelu(x,
  approximate="tanh")``, torch's kernel of the same formula.
- **layer norm** (Flax ``nn.LayerNorm``, ``use_fast_variance=True``): mean and
  ``max(0, mean(x*x) - mean^2)`` over the trailing dimensions, ``(x - mean) * (rsqrt(var +
  eps) * scale) + bias`` → ``F.layer_norm(x, shape, scale, bias, eps)``. torch computes the
  variance in two passes (Welford), Flax as ``E[x^2] - E[x]^2``: the same quantity, torch's
  the more accurate when ``|mean|`` is many standard deviations (in float32, 1e3 and more),
  where the two round differently.
- **attention**: ``softmax(q . k)`` (optionally ``where(mask, q . k, c)`` with ``c <= -1e30``)
  contracted with ``v`` → ``F.scaled_dot_product_attention`` with the mask as an additive
  bias (``s + c == c``: a fully masked row stays uniform). Once constants are folded,
  :mod:`converter.backends.torch.native` turns a causal mask into ``is_causal`` and a constant
  scaling of the queries into SDPA's ``scale``.

Only floating dtypes; a mismatch anywhere means no rewrite (the ops run one by one).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from jaxlib.mlir import ir

from converter import dtypes, mlir
from converter.interpreter import static_value
from converter.markers import STOP_GRADIENT_TARGET
from converter.regions import classify_combiner

_FLOATS = {"float16", "bfloat16", "float32", "float64"}


# --------------------------------------------------------------------------- value helpers


def _def(value: ir.Value, name: str) -> mlir.Op | None:
    """The op named ``name`` that defines ``value``, else None (block arguments too)."""
    owner = value.owner
    if not isinstance(owner, ir.Operation) and hasattr(owner, "operation"):
        owner = owner.operation
    if isinstance(owner, ir.Operation) and owner.name == name:
        return mlir.Op(owner)
    return None


def _splat(value: ir.Value) -> float | None:
    """The value of a constant (seen through broadcasts/reshapes/converts) with all
    elements equal, else None."""
    arr = static_value(value)
    if arr is None or arr.size == 0:
        return None
    flat = np.asarray(arr).reshape(-1)
    return float(flat[0]) if bool((flat == flat[0]).all()) else None


def _is_const(value: ir.Value, want: float, dtype: str) -> bool:
    """``value`` is a splat constant equal to ``want`` rounded to ``dtype``."""
    got = _splat(value)
    if got is None:
        return False
    np_dtype = dtypes.to_numpy(dtype)
    return bool(np.array(got, np_dtype) == np.array(want, np_dtype))


def _operands2(op: mlir.Op | None) -> tuple[ir.Value, ir.Value] | None:
    if op is None or len(op.operands) != 2:
        return None
    return op.operands[0], op.operands[1]


def _unbroadcast(value: ir.Value) -> tuple[ir.Value, list[int]]:
    """Walk back through ``broadcast_in_dim`` ops: the first non-broadcast value and where
    each of its dims lands in ``value``."""
    mapping = None
    while (op := _def(value, "stablehlo.broadcast_in_dim")) is not None:
        dims = list(op.attr("broadcast_dimensions"))
        mapping = dims if mapping is None else [mapping[d] for d in dims]
        value = op.operands[0]
    rank = mlir.tensor_type(value.type).rank
    return value, list(range(rank)) if mapping is None else mapping


def _reduce(value: ir.Value, kind: str, init: float) -> tuple[ir.Value, list[int]] | None:
    """(operand, dims) when ``value`` is a one-operand ``reduce`` with a ``kind`` body and the
    constant ``init``."""
    op = _def(value, "stablehlo.reduce")
    if op is None or len(op.operands) != 2 or classify_combiner(op.regions[0]) != kind:
        return None
    dtype = mlir.tensor_type(op.operands[0].type).dtype
    if not _is_const(op.operands[1], init, dtype):
        return None
    return op.operands[0], sorted(op.attr("dimensions"))


def _broadcast_back(value: ir.Value, source: ir.Value, reduced: list[int], rank: int) -> bool:
    """``value`` is ``source`` (a reduction over ``reduced`` of a rank-``rank`` tensor)
    broadcast back along ``reduced`` (its dims landing in the kept dims, in order)."""
    base, mapping = _unbroadcast(value)
    keep = [d for d in range(rank) if d not in reduced]
    return base == source and mapping == keep


def _commuted(op: mlir.Op | None, match) -> Any:
    """``match(a, b)`` for the operands ``(a, b)`` of a commutative binary op, either order."""
    pair = _operands2(op)
    if pair is None:
        return None
    a, b = pair
    out = match(a, b)
    return out if out is not None else match(b, a)


def _dtype(value: ir.Value) -> str:
    return mlir.tensor_type(value.type).dtype


# --------------------------------------------------------------------------- softmax


def _softmax(interp, op: mlir.Op, env: dict) -> torch.Tensor | None:
    found = _match_softmax(op)
    return None if found is None else F.softmax(env[found[0]], dim=found[1])


def _match_softmax(op: mlir.Op) -> tuple[ir.Value, int] | None:
    """(x, dim) when the ``divide`` ``op`` ends a max-subtracted softmax of ``x`` over
    ``dim``, else None."""
    exp_val, denom = op.operands
    exp_op = _def(exp_val, "stablehlo.exponential")
    sub_op = _def(exp_op.operands[0], "stablehlo.subtract") if exp_op is not None else None
    if sub_op is None:
        return None
    x, shifted = sub_op.operands
    rank = mlir.tensor_type(x.type).rank
    total = _reduce(_unbroadcast(denom)[0], "add", 0.0)
    if total is None or total[0] != exp_val or len(total[1]) != 1:
        return None
    dims = total[1]
    if not _broadcast_back(denom, _unbroadcast(denom)[0], dims, rank):
        return None
    peak, mapping = _unbroadcast(shifted)
    marked = _def(peak, "stablehlo.custom_call")
    if marked is not None and marked.attr("call_target_name") == STOP_GRADIENT_TARGET:
        # jax.nn.softmax's stop_gradient(max): softmax does not depend on the shift, so
        # F.softmax's gradient is the same
        peak, inner = _unbroadcast(marked.operands[0])
        mapping = [mapping[d] for d in inner]
    if mapping != [d for d in range(rank) if d not in dims]:
        return None
    clamp = _def(peak, "stablehlo.maximum")  # maximum(-inf, max(x)) is max(x)
    if clamp is not None:
        dtype = _dtype(x)
        peak = _commuted(clamp, lambda a, b: b if _is_const(a, -math.inf, dtype) else None)
        if peak is None:
            return None
    top = _reduce(peak, "max", -math.inf)
    if top is None or top[0] != x or top[1] != dims:
        return None
    return x, dims[0]


# --------------------------------------------------------------------------- attention


def _single_dot(op: mlir.Op | None):
    """(lhs, rhs, lhs batch, rhs batch, lhs contracting, rhs contracting) of a
    ``dot_general`` with one contracting dim and at most one free dim per side, else None."""
    if op is None or op.name != "stablehlo.dot_general":
        return None
    d = op.attr("dot_dimension_numbers")
    lb, rb = list(d["lhs_batching_dimensions"]), list(d["rhs_batching_dimensions"])
    lc, rc = list(d["lhs_contracting_dimensions"]), list(d["rhs_contracting_dimensions"])
    lhs, rhs = op.operands
    if len(lc) != 1 or len(rc) != 1:
        return None
    if mlir.tensor_type(lhs.type).rank != len(lb) + 2 or mlir.tensor_type(rhs.type).rank != len(rb) + 2:
        return None
    return lhs, rhs, lb, rb, lc[0], rc[0]


def _free(rank: int, batch: list[int], contract: int) -> int:
    return next(i for i in range(rank) if i not in batch and i != contract)


def _block_arg(value: ir.Value) -> int | None:
    return ir.BlockArgument(value).arg_number if isinstance(value.owner, ir.Block) else None


def _where(interp, value: ir.Value, env: dict) -> tuple[torch.Tensor, ir.Value, float | None] | None:
    """(condition tensor, selected value, fill constant) when ``value`` is ``select(cond, s,
    c)`` with a splat ``c``, directly or as the result of a called function (``jnp.where``
    lowers to a private ``@_where``); the condition of a called one is evaluated from the
    call's operands."""
    select = _def(value, "stablehlo.select")
    if select is not None:
        cond, chosen, fill = select.operands
        return env[cond], chosen, _splat(fill)
    call = _def(value, "func.call")
    if call is None or len(call.results) != 1:
        return None
    callee = interp.functions.get(call.attr("callee"))
    if callee is None:
        return None
    body = callee.regions[0]
    ret = list(body.blocks[0].operations)[-1]
    select = _def(ret.operands[0], "stablehlo.select") if len(ret.operands) == 1 else None
    if select is None:
        return None
    cond, chosen, fill = select.operands
    outer = call.operands
    i = _block_arg(chosen)
    if i is None:
        return None
    j = _block_arg(_unbroadcast(fill)[0])  # a broadcast of an argument: the caller's value
    c = _splat(outer[j]) if j is not None else _splat(fill)
    (cond_t,) = interp.region_values(body, [env[v] for v in outer], [cond])
    return cond_t, outer[i], c


def _propagate_nan(out: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``out`` (SDPA of ``q`` ``(..., L, D)`` and ``k`` ``(..., S, D)``) with NaN in each row
    whose scores are all NaN or ``-inf``: torch's fused kernel returns 0 there (it treats the
    row as fully masked) where the program's ``exp(s - max(s))`` is NaN. Without overflow, such
    a row is one whose query has a non-finite entry (every score of the row is then ``±inf``
    or NaN, and a row holding ``+inf`` or NaN is NaN in both) or one where every key has one.
    Other non-finite cases (NaN or ``±inf`` in a score, in ``v``) already agree. Cost:
    O(L*D + S*D + L*Dv) elementwise, no product. Not applied with a mask: there torch's
    additive mask lets a non-finite score at a masked position reach its row (NaN), where the
    program's ``select`` drops it."""
    # max |x| < inf: x finite (NaN compares false); cheaper than isfinite's several kernels
    keys = (k.abs().amax(-1) < math.inf).any(-1)[..., None, None]
    return torch.where((q.abs().amax(-1, keepdim=True) < math.inf) & keys, out, math.nan)


def _attention(interp, op: mlir.Op, env: dict) -> torch.Tensor | None:
    dot = _single_dot(op)
    if dot is None or _dtype(op.results[0]) not in ("float32", "float64"):
        return None
    lhs, rhs, lb, rb, lc, rc = dot
    nb = len(lb)
    for probs, value, pb, vb, pc, vc, probs_first in (
        (lhs, rhs, lb, rb, lc, rc, True),
        (rhs, lhs, rb, lb, rc, lc, False),
    ):
        div = _def(probs, "stablehlo.divide")
        soft = _match_softmax(div) if div is not None else None
        if soft is None or pb != list(range(nb)) or pc != nb + 1 or soft[1] != nb + 1:
            continue
        scores, mask = soft[0], None
        where = _where(interp, scores, env)
        if where is not None:  # where(mask, s, c) with c absorbing any score: s + c == c
            cond, scores, c = where
            if c is None or not -math.inf < c <= -1e30:
                continue
            mask = (cond, c)
        qk = _single_dot(_def(scores, "stablehlo.dot_general"))
        if qk is None:
            continue
        q, k, qb, kb, qc, kc = qk
        if len(qb) != nb:
            continue
        q_rank = nb + 2
        q_t = env[q].permute([*qb, _free(q_rank, qb, qc), qc])
        k_t = env[k].permute([*kb, _free(q_rank, kb, kc), kc])
        v_t = env[value].permute([*vb, vc, _free(nb + 2, vb, vc)])
        bias = None
        if mask is not None:
            bias = torch.where(mask[0], 0.0, mask[1]).to(q_t.dtype)
        out = F.scaled_dot_product_attention(q_t, k_t, v_t, attn_mask=bias, scale=1.0)
        if bias is None:
            out = _propagate_nan(out, q_t, k_t)
        return out if probs_first else out.transpose(-1, -2)
    return None


# --------------------------------------------------------------------------- gelu (tanh)


def _gelu_tanh(interp, op: mlir.Op, env: dict) -> torch.Tensor | None:
    dtype = _dtype(op.results[0])

    def const(v, want):
        return _is_const(v, want, dtype)

    def cube_of(v, x):  # (x*x)*x or x*(x*x)
        mul = _def(v, "stablehlo.multiply")
        sq = _commuted(mul, lambda a, b: a if b == x else None)
        sq_op = _def(sq, "stablehlo.multiply") if sq is not None else None
        return sq_op is not None and list(sq_op.operands) == [x, x]

    def cdf_of(v, x):  # 0.5 * (1 + tanh(c * (x + 0.044715 * x^3)))
        half = _commuted(_def(v, "stablehlo.multiply"), lambda a, b: b if const(a, 0.5) else None)
        if half is None:
            return False
        th = _commuted(_def(half, "stablehlo.add"), lambda a, b: b if const(a, 1.0) else None)
        tanh = _def(th, "stablehlo.tanh") if th is not None else None
        if tanh is None:
            return False
        c = math.sqrt(2 / math.pi)
        inner = _commuted(
            _def(tanh.operands[0], "stablehlo.multiply"), lambda a, b: b if const(a, c) else None
        )
        if inner is None:
            return False
        cubic = _commuted(_def(inner, "stablehlo.add"), lambda a, b: b if a == x else None)
        if cubic is None:
            return False
        cube = _commuted(_def(cubic, "stablehlo.multiply"), lambda a, b: b if const(a, 0.044715) else None)
        return cube is not None and cube_of(cube, x)

    x = _commuted(op, lambda a, b: a if cdf_of(b, a) else None)
    if x is None:
        return None
    return F.gelu(env[x], approximate="tanh")


# --------------------------------------------------------------------------- layer norm


def _mean(value: ir.Value) -> tuple[ir.Value, list[int]] | None:
    """(x, dims) when ``value`` is ``sum(x over dims) / n`` with ``n`` their element count."""
    div = _def(value, "stablehlo.divide")
    if div is None:
        return None
    total = _reduce(div.operands[0], "add", 0.0)
    if total is None:
        return None
    shape = mlir.tensor_type(total[0].type).shape
    count = math.prod(shape[d] for d in total[1])
    return total if _is_const(div.operands[1], count, _dtype(value)) else None


def _trailing_param(value: ir.Value, norm: list[int], rank: int, env: dict) -> torch.Tensor | None:
    """The ``norm``-shaped tensor ``value`` broadcasts over the leading dims of a rank-``rank``
    tensor (a ``broadcast_in_dim`` of a value shaped ``[1, ..., *norm]``), else None."""
    base, mapping = _unbroadcast(value)
    shape = list(mlir.tensor_type(base.type).shape)
    k = len(shape) - len(norm)
    if k < 0 or shape[k:] != norm or any(s != 1 for s in shape[:k]):
        return None
    if mapping != list(range(rank - len(shape), rank)):
        return None
    return env[base].reshape(norm)


def _layer_norm(interp, op: mlir.Op, env: dict) -> torch.Tensor | None:
    dtype = _dtype(op.results[0])

    def match(scaled, bias_val):
        mul = _def(scaled, "stablehlo.multiply")
        pair = _operands2(mul)
        if pair is None:
            return None
        centered, factor = pair
        sub = _def(centered, "stablehlo.subtract")
        if sub is None:
            return None
        x, mean_b = sub.operands
        rank = mlir.tensor_type(x.type).rank
        mean_v, _ = _unbroadcast(mean_b)
        m = _mean(mean_v)
        if m is None or m[0] != x:
            return None
        dims = m[1]
        if dims != list(range(rank - len(dims), rank)) or not _broadcast_back(mean_b, mean_v, dims, rank):
            return None
        norm = list(mlir.tensor_type(x.type).shape[rank - len(dims) :])
        # factor = rsqrt(var + eps) * scale (broadcast), or rsqrt(...) alone
        scale = None
        rs_b = factor
        fmul = _def(factor, "stablehlo.multiply")
        if fmul is not None:
            for a, b in (fmul.operands, list(reversed(fmul.operands))):
                w = _trailing_param(b, norm, rank, env)
                if w is not None and _def(_unbroadcast(a)[0], "stablehlo.rsqrt") is not None:
                    scale, rs_b = w, a
                    break
            else:
                return None
        rs = _def(_unbroadcast(rs_b)[0], "stablehlo.rsqrt")
        if rs is None:
            return None

        def var_plus_eps(a, b):
            return (a, _splat(b)) if _splat(b) is not None else None

        found = _commuted(_def(rs.operands[0], "stablehlo.add"), var_plus_eps)
        if found is None:
            return None
        var_b, eps = found
        var_v, mapping = _unbroadcast(var_b)
        if mapping != [d for d in range(rank) if d not in dims]:
            return None
        if not _fast_variance(var_v, x, mean_v, dims, dtype):
            return None
        bias = _trailing_param(bias_val, norm, rank, env) if bias_val is not None else None
        if bias_val is not None and bias is None:
            return None
        return F.layer_norm(env[x], norm, scale, bias, eps)

    return _commuted(op, match)


def _fast_variance(var: ir.Value, x: ir.Value, mean: ir.Value, dims: list[int], dtype: str) -> bool:
    """``var`` is ``max(0, mean(x*x) - mean*mean)`` over ``dims`` (Flax's fast variance)."""
    clamp = _def(var, "stablehlo.maximum")
    diff = _commuted(clamp, lambda a, b: b if _is_const(a, 0.0, dtype) else None)
    sub = _def(diff, "stablehlo.subtract") if diff is not None else None
    if sub is None:
        return False
    msq, mean_sq = sub.operands
    sq_op = _def(mean_sq, "stablehlo.multiply")
    if sq_op is None or list(sq_op.operands) != [mean, mean]:
        return False
    m2 = _mean(msq)
    if m2 is None or m2[1] != dims:
        return False
    xx = _def(m2[0], "stablehlo.multiply")
    return xx is not None and list(xx.operands) == [x, x]


# --------------------------------------------------------------------------- entry point

_BY_ROOT = {
    "stablehlo.dot_general": (_attention,),
    "stablehlo.divide": (_softmax,),
    "stablehlo.multiply": (_gelu_tanh,),
    "stablehlo.add": (_layer_norm,),
}
ROOTS = frozenset(_BY_ROOT)


def rewrite(interp, op: mlir.Op, env: dict) -> torch.Tensor | None:
    """The value of ``op`` computed as one native torch call when ``op`` ends a pattern of
    the module doc (operands read from ``env``), else None."""
    if _dtype(op.results[0]) not in _FLOATS:
        return None
    for match in _BY_ROOT.get(op.name, ()):
        out = match(interp, op, env)
        if out is not None:
            return out
    return None
