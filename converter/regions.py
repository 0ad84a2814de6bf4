"""Recognizing the common bodies of StableHLO region ops.

``reduce``, ``reduce_window``, ``scatter`` and ``select_and_scatter`` carry their combiner as a
region. Backends map the common ones (a single ``add``, ``maximum``, ``minimum``,
``multiply``, ``and``, ``or``, ``xor``, or "return the update" for scatter) to a direct op, and
fall back to evaluating the region for anything else. ``sort`` comparators are recognized as
lexicographic orders over one or several operands, each ascending or descending.
"""

from __future__ import annotations

from typing import NamedTuple

from jaxlib.mlir import ir

_BINARY = {
    "stablehlo.add": "add",
    "stablehlo.maximum": "max",
    "stablehlo.minimum": "min",
    "stablehlo.multiply": "mul",
    "stablehlo.and": "and",
    "stablehlo.or": "or",
    "stablehlo.xor": "xor",
}


def _body_ops(region: ir.Region) -> tuple[list[ir.Operation], list[ir.Value]]:
    block = region.blocks[0]
    ops = [op.operation for op in block.operations]
    return ops, list(block.arguments)


def classify_combiner(region: ir.Region) -> str | None:
    """The kind of a one-operand combiner body ``(a, b) -> op(a, b)``.

    Returns ``add``/``max``/``min``/``mul``/``and``/``or``/``xor``; ``replace`` for a body
    that returns its second argument (scatter's overwrite); ``None`` for anything else. On
    ``i1``, an arithmetic body is returned as the logical op it is there (the StableHLO
    spec: ``add`` and ``maximum`` are OR, ``multiply`` and ``minimum`` AND).
    """
    ops, args = _body_ops(region)  # a body of several operands returns several values: None below
    if len(ops) == 1 and ops[0].name == "stablehlo.return":
        ret = list(ops[0].operands)
        return "replace" if len(ret) == 1 and ret[0] == args[1] else None
    constrained = (  # JAX puts an sdy.sharding_constraint on a collective's combiner result
        len(ops) == 3
        and ops[1].name == "sdy.sharding_constraint"
        and list(ops[1].operands) == [ops[0].results[0]]
        and list(ops[2].operands) == [ops[1].results[0]]
    )
    if constrained:
        ops = [ops[0], ops[2]]
    if len(ops) != 2 or ops[1].name != "stablehlo.return":
        return None
    op, ret = ops
    kind = _BINARY.get(op.name)
    operands = list(op.operands)
    if kind is None or not (constrained or list(ret.operands) == [op.results[0]]):
        return None
    if set(operands) != set(args) or len(operands) != 2:
        return None
    if str(args[0].type) == "tensor<i1>":  # on i1, maximum and add are OR, minimum and multiply AND
        return _ON_BOOL.get(kind, kind)
    return kind


#: The StableHLO spec's meaning of each arithmetic body on booleans (``add``: logical OR)
_ON_BOOL = {"add": "or", "max": "or", "min": "and", "mul": "and"}

_CANONICALIZING = {"stablehlo.constant", "stablehlo.compare", "stablehlo.select"}


def _arg_deps(value: ir.Value, args: list[ir.Value], defs: dict) -> set[int] | None:
    """Indices of the block arguments ``value`` depends on, or None if it passes through
    an op other than compare/select/constant (which could reorder values)."""
    if value in args:
        return {args.index(value)}
    op = defs.get(value)
    if op is None:  # defined outside the body: only a captured constant keeps the order
        owner = value.owner
        name = owner.name if isinstance(owner, ir.Operation | ir.OpView) else None
        return set() if name == "stablehlo.constant" else None
    if op.name not in _CANONICALIZING:
        return None
    deps: set[int] = set()
    for operand in op.operands:
        sub = _arg_deps(operand, args, defs)
        if sub is None:
            return None
        deps |= sub
    return deps


class SortKey(NamedTuple):
    """One key of a recognized sort comparator (:func:`classify_sort_keys`)."""

    #: which sort operand the key is computed from
    operand: int
    #: ``"ascending"`` or ``"descending"``
    direction: str
    #: the value the comparator compares, computed (through compare/select/constant only) from
    #: the block argument of the operand's left element: evaluate it with that argument bound
    #: to the whole operand to get the sort key (JAX's comparators canonicalize -0.0 and NaN
    #: this way)
    value: ir.Value
    #: the ``compare`` op's comparison type (``TOTALORDER``, ``FLOAT``, ``SIGNED``,
    #: ``UNSIGNED``), or None when absent
    compare_type: str | None


def classify_sort_keys(region: ir.Region) -> list[SortKey] | None:
    """The keys of a sort comparator that orders lexicographically (``jnp.sort``,
    ``jnp.lexsort``, sorts with ``num_keys > 1``), most significant first, for a body returning
    ``or(lt_0, and(eq_0, or(lt_1, and(eq_1, ... lt_n))))`` where ``lt_k`` is ``compare LT|GT
    (f(a_k), f(b_k))`` and ``eq_k`` is ``compare EQ`` of the same pair, ``f`` built only from
    compare/select/constant (JAX's NaN/-0.0 canonicalization for totalOrder sorts); the
    operands of ``or``/``and`` may come in either order, and a one-key comparator is just
    ``lt_0``. Each key comes with its compared value and comparison type (so a backend orders
    ``TOTALORDER`` floats as the spec says: -NaN < -inf < ... < -0.0 < +0.0 < ... < inf < NaN,
    and evaluates any canonicalization the comparator applies first). ``None`` for any other
    comparator."""
    ops, args = _body_ops(region)  # the verifier: 2 arguments per operand, one i1 returned
    defs = {r: op for op in ops for r in op.results}
    return _lexicographic(list(ops[-1].operands)[0], args, defs)


def _compare_type(op: ir.Operation) -> str | None:
    if "compare_type" not in op.attributes:
        return None
    text = str(op.attributes["compare_type"])
    return next((t for t in ("TOTALORDER", "FLOAT", "SIGNED", "UNSIGNED") if t in text), None)


def _compared_key(value: ir.Value, args: list[ir.Value], defs: dict, directions: tuple[str, ...]):
    """(operand index, direction text, flipped, compare op) of ``compare`` ``value`` whose
    sides depend on the two block arguments of one operand, else None."""
    op = defs.get(value)
    if op is None or op.name != "stablehlo.compare":
        return None
    direction = str(op.attributes["comparison_direction"])
    found = next((d for d in directions if d in direction), None)
    lhs, rhs = (_arg_deps(v, args, defs) for v in op.operands)
    if found is None or lhs is None or rhs is None or len(lhs) != 1 or len(rhs) != 1:
        return None
    (a,), (b,) = lhs, rhs
    if a // 2 != b // 2 or a == b:
        return None
    return a // 2, found, a > b, op


def _strict_key(value, args, defs) -> SortKey | None:
    key = _compared_key(value, args, defs, ("LT", "GT"))
    if key is None:
        return None
    index, direction, flipped, op = key
    side = list(op.operands)[1 if flipped else 0]  # the side computed from the left element
    order = "ascending" if (direction == "LT") != flipped else "descending"
    return SortKey(index, order, side, _compare_type(op))


def _lexicographic(value, args, defs) -> list[SortKey] | None:
    key = _strict_key(value, args, defs)
    if key is not None:
        return [key]
    op = defs.get(value)
    if op is None or op.name != "stablehlo.or" or len(list(op.operands)) != 2:
        return None
    a, b = op.operands
    for first, rest in ((a, b), (b, a)):
        key = _strict_key(first, args, defs)
        tie = defs.get(rest)
        if key is None or tie is None or tie.name != "stablehlo.and" or len(list(tie.operands)) != 2:
            continue
        c, d = tie.operands
        for eq, tail in ((c, d), (d, c)):
            equal = _compared_key(eq, args, defs, ("EQ",))
            if equal is not None and equal[0] == key.operand:
                more = _lexicographic(tail, args, defs)
                if more is not None and key.operand not in {k.operand for k in more}:
                    return [key, *more]
    return None


def classify_select(region: ir.Region) -> str | None:
    """The direction (``GE``, ``GT``, ``LE``, ``LT``) of a ``select_and_scatter`` select body
    that is a single ``compare(arg0, arg1)``, else ``None``."""
    ops, args = _body_ops(region)
    if len(ops) != 2 or ops[0].name != "stablehlo.compare" or list(ops[0].operands) != args:
        return None
    if list(ops[1].operands) != [ops[0].results[0]]:
        return None
    text = str(ops[0].attributes["comparison_direction"])
    return next((d for d in ("GE", "GT", "LE", "LT") if d in text), None)


def _owner(value: ir.Value):
    owner = value.owner
    return owner.operation if hasattr(owner, "operation") and not isinstance(owner, ir.Operation) else owner


def _trips(direction: str, start: int, limit: int, step: int) -> int | None:
    """How many times ``i = start; while i <direction> limit: i += step`` runs; None when it
    would not stop."""
    if direction in ("GT", "GE"):  # mirror onto LT/LE
        direction, start, limit, step = {"GT": "LT", "GE": "LE"}[direction], -start, -limit, -step
    if direction == "LT":
        return 0 if start >= limit else None if step <= 0 else -(-(limit - start) // step)
    if direction == "LE":
        return 0 if start > limit else None if step <= 0 else (limit - start) // step + 1
    if direction == "NE":
        if start == limit:
            return 0
        if step == 0 or (limit - start) % step or (limit - start) // step < 0:
            return None
        return (limit - start) // step
    return None


def static_trip_count(interp, op, max_trips: int | None = None) -> int | None:
    """The trip count of a counted ``stablehlo.while`` (what ``fori_loop``, ``scan`` and
    ``map`` emit: the condition compares one integer carried value with a constant, the body
    adds a constant to it, its initial value is a constant), or None when it is not static,
    the loop would not stop, or it exceeds ``max_trips``. ``interp`` supplies
    ``static_operand`` (:class:`converter.interpreter.Interpreter`); ``op`` is the
    ``mlir.Op`` of the loop."""
    import numpy as np

    from converter import mlir

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
    if limit is None or start is None or not np.issubdtype(np.asarray(start).dtype, np.integer):
        return None
    if not isinstance(step_op, ir.Operation) or step_op.name != "stablehlo.add":
        return None
    if step_op.operands[0] != list(body_block.arguments)[k]:
        return None
    step = interp.static_operand(mlir.Op(step_op), 1)
    if step is None:
        return None
    count = _trips(direction, int(start), int(limit), int(step))
    if count is None or (max_trips is not None and count > max_trips):
        return None
    return count


#: Ops that compute each result element from the operands' elements at the same index
#: (the spec's elementwise ops, ``constant``, and CHLO's elementwise functions): a body made
#: of these alone gives the same numbers applied to whole tensors as to 0-d ones.
ELEMENTWISE = frozenset(
    "stablehlo." + name
    for name in (
        "abs add and atan2 bitcast_convert cbrt ceil clamp compare complex constant convert cosine "
        "count_leading_zeros divide exponential exponential_minus_one floor imag is_finite log "
        "log_plus_one logistic maximum minimum multiply negate not or popcnt power real "
        "reduce_precision remainder round_nearest_afz round_nearest_even rsqrt select shift_left "
        "shift_right_arithmetic shift_right_logical sign sine sqrt subtract tan tanh xor return"
    ).split()
) | frozenset(
    "chlo." + name
    for name in (
        "acos acosh asin asinh atan atanh bessel_i1e conj cosh digamma erf erf_inv erfc is_inf "
        "is_neg_inf is_pos_inf lgamma next_after polygamma sinh square tan zeta"
    ).split()
)


def first_non_elementwise(region: ir.Region) -> ir.Operation | None:
    """The first op of ``region``'s body that is not in :data:`ELEMENTWISE` (``map`` bodies
    applied to whole tensors need elementwise ops), or None."""
    ops, _ = _body_ops(region)
    return next((op for op in ops if op.name not in ELEMENTWISE), None)
