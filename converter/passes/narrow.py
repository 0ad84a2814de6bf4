"""64-bit → 32-bit integer narrowing, checked: JAX's default mode (``jax_enable_x64`` off).

With x64 off JAX has no 64-bit types: a torch model's int64 token ids, its ``iota``s and
index arithmetic must be computed in int32. This pass rewrites every ``i64``/``ui64`` value
of a module to ``i32``/``ui32`` **only where that computes the same numbers**, which an
interval analysis over the module proves:

- every integer value gets a range ``[lo, hi]``: a constant or a parameter its exact
  minimum and maximum; an ``iota`` ``[0, n - 1]``; an input the whole 32-bit range (the
  backend refuses at call time an input value outside it, :class:`InputRangeError`); a
  dimension size (``get_dimension_size``, a dynamic ``iota``) ``[0, max]`` with ``max`` the
  largest declared maximum of ``signature.dim_ranges``, ``2**31 - 1`` when one is
  open; an op with a rule (``add``, ``multiply``, ``select``, ``convert``, ``reduce`` with an
  ``add`` body, ``reduce_window`` (cumsum), ``func.call``...) the range its operands allow;
- a 64-bit value whose range leaves the 32-bit one makes the module refuse
  (:class:`converter.errors.NarrowingError` names the op, its source line and the range),
  as does a 64-bit value made or read by an op without a rule (``custom_call``,
  ``bitcast_convert``, ``popcnt``, a ``while`` loop-carried value, a ``convert`` from a
  float);
- ``float64``/``complex128`` values are not narrowed: float32 is not within float64's
  tolerance, so a module computing in float64 is refused too.

When the analysis finds nothing, each 64-bit integer type becomes its 32-bit counterpart
(results, block arguments, constants, function types, the signature's leaves and the
parameter values), and ``signature.narrowed`` maps each narrowed leaf name to its
source dtype (``{"args[0]": "int64"}``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from jaxlib.mlir import ir

from converter import mlir
from converter.errors import NarrowingError
from converter.module import Module
from converter.signature import LeafSpec

from ._ir import set_function_type

I32 = (-(2**31), 2**31 - 1)
U32 = (0, 2**32 - 1)
_WIDE_INT = {"i64": "i32", "ui64": "ui32"}
_WIDE_FLOAT = {"f64", "complex<f64>"}
_NARROW_DTYPE = {"int64": "int32", "uint64": "uint32"}

Range = tuple[int, int] | None  # None: unknown (anything its type holds)

# ops whose result is (a rearrangement of) operand 0's values
_PASS_THROUGH = {
    "stablehlo.broadcast_in_dim",
    "stablehlo.reshape",
    "stablehlo.transpose",
    "stablehlo.slice",
    "stablehlo.reverse",
    "stablehlo.dynamic_slice",
    "stablehlo.gather",
    "stablehlo.dynamic_gather",
    "stablehlo.dynamic_reshape",
    "stablehlo.dynamic_broadcast_in_dim",
    "stablehlo.real_dynamic_slice",
    "stablehlo.copy",
}
# ops whose result takes values of some of its operands: (index of the first one, or all)
_UNION = {
    "stablehlo.concatenate": slice(None),
    "stablehlo.pad": slice(0, 2),
    "stablehlo.select": slice(1, 3),
    "stablehlo.dynamic_update_slice": slice(0, 2),
    "stablehlo.dynamic_pad": slice(0, 2),
}
# ops whose value does not depend on the width of their integer operands (beyond those
# above and those with a rule): they may read narrowed values
_READERS = {
    "stablehlo.compare",
    "func.return",
    "stablehlo.return",
    "stablehlo.get_dimension_size",
    "stablehlo.dynamic_iota",
    "stablehlo.dynamic_conv",
    "stablehlo.set_dimension_size",
    "stablehlo.custom_call@shape_assertion",
}


def _bits(t: ir.Type) -> str | None:
    """The element type of a tensor type as text (``i64``), else None."""
    if isinstance(t, ir.RankedTensorType) or isinstance(t, ir.ShapedType):
        return str(ir.ShapedType(t).element_type)
    return None


def _type_range(t: ir.Type) -> Range:
    """What an integer type holds; None for a non-integer type."""
    el = _bits(t)
    if el is None or el in _WIDE_INT:
        return None  # a 64-bit value without a proven range
    if el == "i1":
        return (0, 1)
    if el.startswith("ui") and el[2:].isdigit():
        return (0, 2 ** int(el[2:]) - 1)
    if el.startswith("i") and el[1:].isdigit():
        n = int(el[1:])
        return (-(2 ** (n - 1)), 2 ** (n - 1) - 1)
    return None


def _fits(r: Range, el: str) -> bool:
    lo, hi = U32 if el == "ui64" else I32
    return r is not None and lo <= r[0] and r[1] <= hi


def _union(rs: list[Range]) -> Range:
    if not rs or any(r is None for r in rs):
        return None
    return (min(r[0] for r in rs), max(r[1] for r in rs))


def _corners(f: Callable[[int, int], int], a: Range, b: Range) -> Range:
    if a is None or b is None:
        return None
    vals = [f(x, y) for x in a for y in b]
    return (min(vals), max(vals))


def _div(a: Range, b: Range) -> Range:
    """Integer division rounding toward zero; a divisor range holding 0 is unknown (the
    spec leaves x / 0 implementation-defined)."""
    if a is None or b is None or b[0] <= 0 <= b[1]:
        return None

    def tdiv(x: int, y: int) -> int:
        q = abs(x) // abs(y)
        return q if (x >= 0) == (y > 0) else -q

    return _corners(tdiv, a, b)


def _rem(a: Range, b: Range) -> Range:
    if a is None or b is None or b[0] <= 0 <= b[1]:
        return None
    m = max(abs(b[0]), abs(b[1])) - 1
    lo = 0 if a[0] >= 0 else max(a[0], -m)
    hi = 0 if a[1] <= 0 else min(a[1], m)
    return (lo, hi)


def _nonneg(r: Range) -> bool:
    return r is not None and r[0] >= 0


def _bitwise(name: str, a: Range, b: Range) -> Range:
    if not (_nonneg(a) and _nonneg(b)):
        return None
    if name == "stablehlo.and":
        return (0, min(a[1], b[1]))
    return (0, 2 ** max(a[1], b[1]).bit_length() - 1)  # or, xor


def _elementwise(name: str, rs: list[Range]) -> Range | bool:
    """The result range of an integer elementwise op; False when there is no rule."""
    a = rs[0] if rs else None
    b = rs[1] if len(rs) > 1 else None
    if name == "stablehlo.add":
        return _corners(lambda x, y: x + y, a, b)
    if name == "stablehlo.subtract":
        return _corners(lambda x, y: x - y, a, b)
    if name == "stablehlo.multiply":
        return _corners(lambda x, y: x * y, a, b)
    if name == "stablehlo.maximum":
        return _corners(max, a, b)
    if name == "stablehlo.minimum":
        return _corners(min, a, b)
    if name == "stablehlo.divide":
        return _div(a, b)
    if name == "stablehlo.remainder":
        return _rem(a, b)
    if name == "stablehlo.negate":
        return None if a is None else (-a[1], -a[0])
    if name == "stablehlo.abs":
        return (
            None if a is None else (0 if a[0] <= 0 <= a[1] else min(abs(a[0]), abs(a[1])), max(map(abs, a)))
        )
    if name == "stablehlo.sign":
        return (
            None
            if a is None
            else (-1 if a[0] < 0 else 0 if a[0] == 0 else 1, 1 if a[1] > 0 else 0 if a[1] == 0 else -1)
        )
    if name == "stablehlo.clamp":  # clamp(min, x, max) = min(max(x, min), max)
        return _corners(min, _corners(max, rs[1], rs[0]), rs[2])
    if name == "stablehlo.not":
        return None if a is None else (-a[1] - 1, -a[0] - 1)
    if name in ("stablehlo.and", "stablehlo.or", "stablehlo.xor"):
        return _bitwise(name, a, b)
    if name == "stablehlo.shift_left":
        if _nonneg(a) and b is not None and 0 <= b[0] and b[1] <= 30:
            return (a[0] << b[0], a[1] << b[1])
        return None
    if name == "stablehlo.shift_right_arithmetic":
        return None if a is None or b is None or b[0] < 0 else (min(a[0], 0), max(a[1], 0))
    if name == "stablehlo.shift_right_logical":
        return (0, a[1]) if _nonneg(a) and b is not None and b[0] >= 0 else None
    return False


def _body_kind(region: ir.Region) -> str | None:
    """``"add"`` for a reduction body that adds its two arguments, ``"select"`` for one
    that only picks among them (max, min, compare/select), else None."""
    ops = [op.operation for op in region.blocks[0].operations]
    names = {op.name for op in ops[:-1]}
    if names == {"stablehlo.add"} and len(ops) == 2:
        return "add"
    if names and names <= {
        "stablehlo.maximum",
        "stablehlo.minimum",
        "stablehlo.compare",
        "stablehlo.select",
        "stablehlo.and",
        "stablehlo.or",
    }:
        return "select"
    return None


class _Analysis:
    """Ranges of the integer values of a module; the ops that cannot be narrowed."""

    def __init__(self, module: Module):
        self.module = module
        self.functions = mlir.functions(module.mlir)
        self.ranges: dict[Any, Range] = {}
        self.problems: list[str] = []
        self.dim_max = _dim_max(module, self.problems)
        self._called: dict[tuple, list[Range]] = {}
        self.bad: dict[Any, tuple[ir.Operation, Range]] = {}  # 64-bit values out of range
        self.reported: set = set()  # results of ops already reported (no rule)
        self.select_ok: dict[tuple, bool] = {}  # (operand, select result): fits where picked

    def range(self, v: ir.Value) -> Range:
        if v in self.ranges:
            return self.ranges[v]
        return _type_range(v.type)

    def problem(self, op: ir.Operation, why: str) -> None:
        where = mlir.format_location(op.location)
        self.problems.append(f"{op.name}{f' at {where}' if where else ''}: {why}")

    # ------------------------------------------------------------------ walking

    def function(self, fn: ir.Operation, args: list[Range]) -> list[Range]:
        block = fn.regions[0].blocks[0]
        for a, r in zip(block.arguments, args, strict=True):
            self.ranges[a] = r
        return self.block(block)

    def call(self, callee: str, args: list[Range]) -> list[Range]:
        key = (callee, tuple(args))
        if key not in self._called:
            self._called[key] = []  # a recursive call: unknown results
            self._called[key] = self.function(self.functions[callee], args)
        return self._called[key]

    def block(self, block: ir.Block) -> list[Range]:
        """Analyse each op of ``block``; the ranges of its terminator's operands."""
        out: list[Range] = []
        for op in block.operations:
            op = op.operation
            if op.name in ("func.return", "stablehlo.return", "sdy.return"):
                out = [self.range(v) for v in op.operands]
                continue
            self.op(op)
        return out

    def op(self, op: ir.Operation) -> None:
        name = op.name
        results = list(op.results)
        rs = [self.range(v) for v in op.operands]
        wide_in = any(_bits(v.type) in _WIDE_INT for v in op.operands)
        wide_out = [_bits(r.type) in _WIDE_INT for r in results]
        floats = [_bits(r.type) in _WIDE_FLOAT for r in results]
        if any(floats) and not any(_bits(v.type) in _WIDE_FLOAT for v in op.operands):
            self.problem(op, "computes in float64 (float32 is not within its tolerance)")
        out = self.rule(op, rs)
        if out is False:  # no rule: only width-independent readers may touch 64-bit values
            key = (
                name if name != "stablehlo.custom_call" else f"{name}@{mlir.Op(op).attr('call_target_name')}"
            )
            if (wide_in or any(wide_out)) and key not in _READERS:
                self.problem(op, "has no 32-bit narrowing rule for its 64-bit integer values")
                self.reported.update(results)  # bad (unbounded), and said once
            out = [None] * len(results)
            for region in op.regions:  # e.g. a custom region op: analyse what it nests
                for b in region.blocks:
                    self.block(b)
        for r, rng, wide in zip(results, out, wide_out, strict=True):
            self.ranges[r] = rng if wide or rng is not None else _type_range(r.type)
            if not wide:
                tr = _type_range(r.type)
                if rng is not None and tr is not None and not (tr[0] <= rng[0] and rng[1] <= tr[1]):
                    self.ranges[r] = tr  # a narrower type wraps: its own range
                continue
            if not _fits(rng, _bits(r.type)):  # judged once the uses are known (finish)
                self.bad[r] = (op, rng)
                self.ranges[r] = None

    # ------------------------------------------------------------------ guards

    def condition(self, pred: ir.Value) -> dict[Any, tuple[Range | str, Range | str]]:
        """For ``pred = compare(dir, a, b)``: what ``a`` and ``b`` are known to lie in where
        ``pred`` is true and where it is false (``"empty"``: never)."""
        owner = pred.owner
        if not isinstance(owner, ir.OpView) and not isinstance(owner, ir.Operation):
            return {}
        owner = owner.operation
        if owner.name != "stablehlo.compare":
            return {}
        direction = mlir.Op(owner).attr("comparison_direction")
        a, b = owner.operands
        flip = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "EQ": "EQ", "NE": "NE"}
        negate = {"LT": "GE", "GE": "LT", "LE": "GT", "GT": "LE", "EQ": "NE", "NE": "EQ"}
        out = {}
        for x, y, d in ((a, b, direction), (b, a, flip.get(direction))):
            rx, ry = self.range(x), self.range(y)
            if ry is None or d is None or _type_range(x.type) is None and _bits(x.type) not in _WIDE_INT:
                continue
            out[x] = (_refine(rx, d, ry), _refine(rx, negate[d], ry))
        return out

    def under(self, v: ir.Value, subst: dict, depth: int = 6) -> Range:
        """``v``'s range where the values of ``subst`` lie in their given ranges, following
        lane-wise (elementwise) ops only, so that a lane of ``v`` depends on the same lane of
        the substituted values."""
        if v in subst:
            return subst[v]
        owner = v.owner
        if depth == 0 or not isinstance(owner, (ir.OpView, ir.Operation)):
            return self.range(v)
        op = owner.operation
        shape = getattr(v.type, "shape", None)
        if op.name == "stablehlo.convert" or _elementwise(op.name, [None, None, None]) is not False:
            rs = []
            for x in op.operands:
                if getattr(x.type, "shape", None) != shape:
                    rs.append(self.range(x))
                    continue
                rs.append(self.under(x, subst, depth - 1))  # never "empty": select() filters those
            if op.name == "stablehlo.convert":
                return (
                    rs[0]
                    if _bits(op.operands[0].type) in _WIDE_INT or _type_range(op.operands[0].type)
                    else None
                )
            r = _elementwise(op.name, rs + [None] * (3 - len(rs)) if op.name == "stablehlo.clamp" else rs)
            return None if r is False else r
        return self.range(v)

    def select(self, op: ir.Operation, rs: list[Range]) -> list[Range]:
        """``select(pred, t, f)``: ``t`` matters only where ``pred`` holds, ``f`` where it
        does not; with ``pred`` a comparison of ``x``, each branch's range is recomputed
        with ``x`` restricted accordingly (JAX's negative-index wrap ``select(i < 0, i + n,
        i)`` has ``i + n`` out of range only where it is not selected)."""
        cond = self.condition(op.operands[0])
        result = op.results[0]
        out = []
        for k, v in ((0, op.operands[1]), (1, op.operands[2])):
            r = rs[k + 1]
            if cond:
                subst = {x: ranges[k] for x, ranges in cond.items()}
                if all(sub != "empty" for sub in subst.values()):
                    r2 = self.under(v, {x: sub for x, sub in subst.items() if sub is not None})
                else:
                    r2 = "empty"
                if r2 == "empty":
                    self.select_ok[(v, result)] = self.select_ok.get((v, result), True)
                    continue  # this branch is never taken
                if r2 is not None:
                    r = r2 if r is None else (max(r[0], r2[0]), min(r[1], r2[1]))
            if _bits(v.type) in _WIDE_INT:
                self.select_ok[(v, result)] = self.select_ok.get((v, result), True) and _fits(
                    r, _bits(v.type)
                )
            out.append(r)
        return [_union(out)] if out else [(0, 0)]

    def finish(self) -> None:
        """Report each out-of-range 64-bit value that some use can observe (a value used
        only by the branch of a ``select`` that never picks it out of range is fine), at the
        op where the range is first lost."""
        seen: dict[Any, bool] = {}

        def ok(v: ir.Value) -> bool:
            if v not in seen:
                seen[v] = False  # a cycle: not proven
                seen[v] = all(use_ok(v, use.owner) for use in v.uses)
            return seen[v]

        def use_ok(v: ir.Value, user: Any) -> bool:
            user = user.operation
            if user.name == "stablehlo.select" and list(user.operands)[0] != v:
                return self.select_ok.get((v, user.results[0]), False)
            lanewise = user.name == "stablehlo.convert" or _elementwise(user.name, [None] * 3) is not False
            return lanewise and all(r in self.bad and ok(r) for r in user.results)

        for v, (op, rng) in self.bad.items():
            if v in self.reported or ok(v) or any(x in self.bad for x in op.operands):
                continue
            what = "an unbounded value" if rng is None else f"values in [{rng[0]}, {rng[1]}]"
            self.problem(op, f"may compute {what}, outside the 32-bit range")

    def rule(self, op: ir.Operation, rs: list[Range]) -> list[Range] | bool:
        """The result ranges of ``op``, or False without a rule."""
        name = op.name
        n = len(op.results)
        if name == "stablehlo.constant":
            el = _bits(op.results[0].type)
            if el is None or _type_range(op.results[0].type) is None and el not in _WIDE_INT:
                return [None]
            value = mlir.dense_to_numpy(ir.DenseElementsAttr(op.attributes["value"]))
            if value.size == 0:
                return [(0, 0)]
            return [(int(value.min()), int(value.max()))]
        if name == "stablehlo.iota":
            t = ir.RankedTensorType(op.results[0].type)
            d = mlir.Op(op).attr("iota_dimension")
            size = self.dim_max if t.is_dynamic_dim(d) else t.shape[d]
            return [(0, max(size - 1, 0))]
        if name == "stablehlo.dynamic_iota":
            return [(0, max(self.dim_max - 1, 0))]
        if name == "stablehlo.get_dimension_size":
            return [(0, self.dim_max)]
        if name == "stablehlo.convert":
            src = _bits(op.operands[0].type)
            if src in _WIDE_FLOAT or (src is not None and src.startswith(("f", "bf", "complex"))):
                return [None]  # from a float: unbounded (out-of-range converts are implementation-defined)
            r = rs[0]
            tr = _type_range(op.results[0].type)
            if r is not None and _bits(op.results[0].type) == "ui64" and r[0] < 0:
                return [None]
            return [r if tr is None or (r is not None and tr[0] <= r[0] and r[1] <= tr[1]) else tr]
        if name in _PASS_THROUGH:
            return [rs[0]] * n
        if name == "stablehlo.select":
            return self.select(op, rs)
        if name in _UNION:
            return [_union(rs[_UNION[name]])]
        if name == "stablehlo.optimization_barrier":
            return list(rs)
        if name == "stablehlo.compare":
            return [(0, 1)]
        if name == "func.call":
            out = self.call(mlir.Op(op).attr("callee"), rs)
            return out if len(out) == n else [None] * n  # [] while a recursive call is analysed
        if name == "stablehlo.dot_general":
            return [self.dot(op, rs)]
        if name in ("stablehlo.reduce", "stablehlo.reduce_window"):
            return self.reduce(op, rs)
        if name == "stablehlo.sort":
            self.block_args(op.regions[0], [r for r in rs for _ in (0, 1)])
            self.block(op.regions[0].blocks[0])
            return list(rs)
        if name == "stablehlo.scatter":
            return self.scatter(op, rs)
        if name in ("stablehlo.case", "stablehlo.if"):
            outs = [self.block(region.blocks[0]) for region in op.regions]
            return [_union([o[i] for o in outs]) for i in range(n)]
        if name == "stablehlo.while":
            return self.while_(op, rs)
        r = _elementwise(name, rs)
        if r is False:
            return False
        return [r]

    def dot(self, op: ir.Operation, rs: list[Range]) -> Range:
        """An integer ``dot_general``: a sum of ``k`` products, ``k`` the contracted size
        (a dynamic dimension counts at its largest)."""
        if (
            rs[0] is None
            or rs[1] is None
            or _type_range(op.results[0].type) is None
            and (_bits(op.results[0].type) not in _WIDE_INT)
        ):
            return None
        lhs = ir.RankedTensorType(op.operands[0].type)
        contracting = mlir.Op(op).attr("dot_dimension_numbers")["lhs_contracting_dimensions"]  # [] if none
        k = math.prod(self.dim_max if lhs.is_dynamic_dim(d) else lhs.shape[d] for d in contracting)
        lo, hi = _corners(lambda x, y: x * y, rs[0], rs[1])
        return (k * min(lo, 0), k * max(hi, 0))

    def block_args(self, region: ir.Region, rs: list[Range]) -> None:
        for a, r in zip(region.blocks[0].arguments, rs, strict=False):
            self.ranges[a] = r

    def reduce(self, op: ir.Operation, rs: list[Range]) -> list[Range]:
        half = len(rs) // 2
        inputs, inits = rs[:half], rs[half:]
        body = op.regions[0]
        kind = _body_kind(body)
        self.block_args(body, [_union([a, b]) for a, b in zip(inputs, inits, strict=True)] * 2)
        self.block(body.blocks[0])
        if kind == "select":
            return [_union([a, b]) for a, b in zip(inputs, inits, strict=True)]
        if kind == "add" and half == 1 and inputs[0] is not None and inits[0] is not None:
            if op.name == "stablehlo.reduce":
                shape = ir.RankedTensorType(op.operands[0].type).shape
                count = math.prod(shape[d] for d in mlir.Op(op).attr("dimensions"))
            else:
                count = math.prod(mlir.Op(op).attr("window_dimensions"))
            lo, hi = inputs[0]
            return [(inits[0][0] + min(0, count * lo), inits[0][1] + max(0, count * hi))]
        return [None] * len(op.results)

    def scatter(self, op: ir.Operation, rs: list[Range]) -> list[Range]:
        half = (len(rs) - 1) // 2
        operands, updates = rs[:half], rs[half + 1 :]
        body = op.regions[0]
        kind = _body_kind(body)
        self.block_args(body, [_union([a, b]) for a, b in zip(operands, updates, strict=True)] * 2)
        body_out = self.block(body.blocks[0])
        if len(list(body.blocks[0].operations)) == 1:  # returns the update: a plain store
            return [_union([a, b]) for a, b in zip(operands, updates, strict=True)]
        if kind == "select":
            return [_union([a, b]) for a, b in zip(operands, updates, strict=True)]
        if kind == "add" and half == 1 and operands[0] is not None and updates[0] is not None:
            count = math.prod(ir.RankedTensorType(op.operands[-1].type).shape)
            lo, hi = updates[0]
            return [(operands[0][0] + min(0, count * lo), operands[0][1] + max(0, count * hi))]
        del body_out
        return [None] * len(op.results)

    def while_(self, op: ir.Operation, rs: list[Range]) -> list[Range]:
        """A loop-carried value keeps its range only when the body returns it unchanged."""
        cond, body = op.regions
        body_block = body.blocks[0]
        ret = list(body_block.operations)[-1].operation
        invariant = [ret.operands[i] == body_block.arguments[i] for i in range(len(rs))]
        carried = [r if inv else None for r, inv in zip(rs, invariant, strict=True)]
        self.block_args(cond, carried)
        self.block_args(body, carried)
        self.block(cond.blocks[0])
        self.block(body_block)
        for i, (a, inv) in enumerate(zip(body_block.arguments, invariant, strict=True)):
            if not inv and _bits(a.type) in _WIDE_INT:
                self.problem(op, f"carries a 64-bit integer (value {i}) not bounded across iterations")
                for v in (a, cond.blocks[0].arguments[i], op.results[i]):  # said once
                    self.bad[v] = (op, None)
                    self.reported.add(v)
        return carried


def _refine(r: Range, direction: str, bound: Range) -> Range | str:
    """``r`` restricted to the values ``x`` with ``x <direction> y`` for some ``y`` in
    ``bound``; ``"empty"`` when none."""
    lo, hi = r if r is not None else (-(2**64), 2**64)
    if direction == "LT":
        hi = min(hi, bound[1] - 1)
    elif direction == "LE":
        hi = min(hi, bound[1])
    elif direction == "GT":
        lo = max(lo, bound[0] + 1)
    elif direction == "GE":
        lo = max(lo, bound[0])
    elif direction == "EQ":
        lo, hi = max(lo, bound[0]), min(hi, bound[1])
    if lo > hi:
        return "empty"
    return None if (lo, hi) == (-(2**64), 2**64) or lo < -(2**63) or hi >= 2**64 else (lo, hi)


def _dim_max(module: Module, problems: list[str]) -> int:
    """The largest size a dynamic dimension may take: the largest declared maximum of
    ``signature.dim_ranges``, ``2**31 - 1`` when a range is open; a declared
    maximum above that is a problem."""
    ranges = module.signature.dim_ranges
    for name, (_, hi) in ranges.items():
        if hi is not None and hi > I32[1]:
            problems.append(f"dimension {name!r}: its declared maximum {hi} does not fit in 32 bits")
    his = [hi for _, hi in ranges.values()]
    if not his or any(hi is None for hi in his):
        return I32[1]
    return max(his)


def _leaf_range(spec: LeafSpec, params: dict[str, np.ndarray]) -> Range:
    """An argument's range: a parameter's exact values, an input the whole 32-bit range
    (the backend checks it at call time), a non-64-bit leaf its type's."""
    if spec.dtype not in _NARROW_DTYPE:
        return None
    if spec.kind != "input" and spec.name in params:
        v = np.asarray(params[spec.name])
        return (int(v.min()), int(v.max())) if v.size else (0, 0)
    return U32 if spec.dtype == "uint64" else I32


def check_narrowable(module: Module) -> None:
    """Raise unless :func:`narrow_64bit` can narrow ``module`` exactly.

    Raises:
        NarrowingError: listing every problem (op, source location, range).
    """
    _analyse(module)


def _analyse(module: Module) -> _Analysis:
    sig = module.signature
    analysis = _Analysis(module)
    for leaf in sig.all_args + sig.outputs:
        if leaf.dtype in ("float64", "complex128"):
            analysis.problems.append(f"{leaf.name}: {leaf.dtype} (float32 is not within its tolerance)")
    kept = range(len(sig.all_args)) if sig.kept_var_idx is None else sig.kept_var_idx
    args = []
    for i in kept:
        spec = sig.all_args[i]
        r = _leaf_range(spec, module.params)
        if r is not None and not _fits(r, "ui64" if spec.dtype == "uint64" else "i64"):
            analysis.problems.append(f"{spec.name}: its values [{r[0]}, {r[1]}] do not fit in 32 bits")
        args.append(r)
    main = mlir.main_function(module.mlir)
    block = main.regions[0].blocks[0]
    args = [r if r is not None else _type_range(a.type) for r, a in zip(args, block.arguments, strict=True)]
    analysis.function(main, args)
    analysis.finish()
    open_dims = [k for k, (_, hi) in (sig.dim_ranges).items() if hi is None]
    if analysis.problems and open_dims:
        analysis.problems.append(
            f"dimension(s) {', '.join(map(repr, open_dims))} have no declared maximum, so their sizes "
            "are taken up to 2**31 - 1; a declared one (torch Dim(max=...), a jax.export constraint "
            "such as 'b <= 4096') may bound the size arithmetic"
        )
    if analysis.problems:
        raise NarrowingError(dict.fromkeys(analysis.problems))
    return analysis


def _narrow_type(t: ir.Type) -> ir.Type:
    el = _bits(t)
    if el not in _WIDE_INT or not isinstance(t, ir.RankedTensorType):
        return t
    rt = ir.RankedTensorType(t)
    new = ir.IntegerType.get_unsigned(32) if el == "ui64" else ir.IntegerType.get_signless(32)
    return ir.RankedTensorType.get(list(rt.shape), new, rt.encoding)


def _rewrite(ir_module: ir.Module) -> None:
    """Every ``i64``/``ui64`` value of ``ir_module`` becomes 32-bit, in place."""

    def values(op: ir.Operation):
        yield from op.results
        for region in op.regions:
            for b in region.blocks:
                yield from b.arguments

    for fn in mlir.functions(ir_module).values():
        for b in fn.regions[0].blocks:
            for a in b.arguments:
                a.set_type(_narrow_type(a.type))
        for op in mlir.walk_ops(fn):
            for v in values(op):
                v.set_type(_narrow_type(v.type))
            if op.name == "stablehlo.constant" and _bits(op.results[0].type) in ("i32", "ui32"):
                attr = ir.DenseElementsAttr(op.attributes["value"])
                if _bits(attr.type) in _WIDE_INT:
                    value = mlir.dense_to_numpy(attr)
                    dtype = np.uint32 if _bits(attr.type) == "ui64" else np.int32
                    op.attributes["value"] = ir.DenseElementsAttr.get(
                        np.ascontiguousarray(value.astype(dtype)), type=op.results[0].type
                    )
        ret = list(fn.regions[0].blocks[0].operations)[-1].operation
        set_function_type(
            fn, [a.type for a in fn.regions[0].blocks[0].arguments], [v.type for v in ret.operands]
        )


def narrow_64bit(module: Module) -> Module:
    """``module`` with its 64-bit integer types computed in 32 bits, where that gives the
    same numbers (see the module docstring); a module without 64-bit types is returned as is.

    Returns:
        A new Module (the input is not mutated): ``int64``/``uint64`` leaves of the
        signature and parameter values become ``int32``/``uint32``;
        ``signature.narrowed`` maps each narrowed leaf's name to its source dtype.

    Raises:
        NarrowingError: a constant, parameter or declared dimension range outside the 32-bit
            range, an op that may compute a value outside it, an op without a narrowing
            rule reading or making 64-bit integers, or float64/complex128 values; every
            problem is listed.
    """
    _analyse(module)
    sig = module.signature
    wide = [leaf for leaf in sig.all_args + sig.outputs if leaf.dtype in _NARROW_DTYPE]
    ir_module = mlir.clone_module(module.mlir)
    with ir_module.context, ir.Location.unknown():
        _rewrite(ir_module)

    def narrow(leaf: LeafSpec) -> LeafSpec:
        dt = _NARROW_DTYPE.get(leaf.dtype)
        return leaf if dt is None else LeafSpec(**{**leaf.__dict__, "dtype": dt})

    narrowed = dict(sig.narrowed)
    narrowed.update({leaf.name: leaf.dtype for leaf in wide})
    new_sig = sig.replace(
        params=tuple(narrow(p) for p in sig.params),
        inputs=tuple(narrow(p) for p in sig.inputs),
        outputs=tuple(narrow(p) for p in sig.outputs),
        narrowed=narrowed,
    )
    params = {
        k: (
            np.asarray(v).astype(np.uint32 if np.asarray(v).dtype == np.uint64 else np.int32)
            if np.asarray(v).dtype in (np.int64, np.uint64)
            else v
        )
        for k, v in module.params.items()
    }
    return Module(ir_module, new_sig, params, source=module.source, meta=module.meta)


__all__ = ["check_narrowable", "narrow_64bit"]
