"""Elementwise StableHLO/CHLO ops → ONNX operators (opset 18).

StableHLO semantics kept exact: integer ``divide`` truncates (ONNX ``Div`` on integers does),
``remainder`` is ``Mod(fmod=1)`` (sign of the dividend), ``round_nearest_afz`` is built from
``Floor`` on the magnitude, ``round_nearest_even`` is ONNX ``Round``.
"""

from __future__ import annotations

from converter import dtypes

from ..graph import onnx_dtype
from ..registry import register

_BINARY = {
    "add": "Add",
    "subtract": "Sub",
    "multiply": "Mul",
    "divide": "Div",
    "maximum": "Max",
    "minimum": "Min",
    "power": "Pow",
}
_UNARY = {
    "abs": "Abs",
    "negate": "Neg",
    "exponential": "Exp",
    "log": "Log",
    "logistic": "Sigmoid",
    "sqrt": "Sqrt",
    "tanh": "Tanh",
    "sine": "Sin",
    "cosine": "Cos",
    "tan": "Tan",
    "floor": "Floor",
    "ceil": "Ceil",
    "sign": "Sign",
    "round_nearest_even": "Round",
}
_CHLO_UNARY = {
    "erf": "Erf",
    "asin": "Asin",
    "acos": "Acos",
    "atan": "Atan",
    "sinh": "Sinh",
    "cosh": "Cosh",
    "tan": "Tan",
    "asinh": "Asinh",
    "acosh": "Acosh",
    "atanh": "Atanh",
}


def _binary(op_type):
    return lambda interp, op, x, y: interp.graph.op(op_type, [x, y])


def _unary(op_type):
    return lambda interp, op, x: interp.graph.op(op_type, [x])


for _name, _t in _BINARY.items():
    register(f"stablehlo.{_name}", dynamic=True)(_binary(_t))
for _name, _t in _UNARY.items():
    register(f"stablehlo.{_name}", dynamic=True)(_unary(_t))
for _name, _t in _CHLO_UNARY.items():
    register(f"chlo.{_name}", dynamic=True)(_unary(_t))


def _scalar(interp, op, value):
    return interp.graph.const(value, op.result_type.dtype)


@register("chlo.square", dynamic=True)
def _square(interp, op, x):
    return interp.graph.op("Mul", [x, x])


@register("chlo.erfc", dynamic=True)
def _erfc(interp, op, x):
    return interp.graph.op("Sub", [_scalar(interp, op, 1), interp.graph.op("Erf", [x])])


@register("chlo.is_inf", dynamic=True)
def _is_inf(interp, op, x):
    return interp.graph.op("IsInf", [x])


@register("stablehlo.remainder", dynamic=True)
def _remainder(interp, op, x, y):
    return interp.graph.op("Mod", [x, y], fmod=1)


@register("stablehlo.rsqrt", dynamic=True)
def _rsqrt(interp, op, x):
    return interp.graph.op("Reciprocal", [interp.graph.op("Sqrt", [x])])


@register("stablehlo.exponential_minus_one", dynamic=True)
def _expm1(interp, op, x):
    return interp.graph.op("Sub", [interp.graph.op("Exp", [x]), _scalar(interp, op, 1)])


@register("stablehlo.log_plus_one", dynamic=True)
def _log1p(interp, op, x):
    return interp.graph.op("Log", [interp.graph.op("Add", [x, _scalar(interp, op, 1)])])


@register("stablehlo.cbrt", dynamic=True)
def _cbrt(interp, op, x):
    g = interp.graph
    mag = g.op("Pow", [g.op("Abs", [x]), _scalar(interp, op, 1 / 3)])
    return g.op("Mul", [g.op("Sign", [x]), mag])


@register("stablehlo.round_nearest_afz", dynamic=True)
def _round_afz(interp, op, x):
    g = interp.graph
    mag = g.op("Abs", [x])
    whole = g.op("Floor", [mag])
    frac = g.op("Sub", [mag, whole])  # exact (Sterbenz)
    up = g.op(
        "Cast",
        [g.op("GreaterOrEqual", [frac, _scalar(interp, op, 0.5)])],
        to=onnx_dtype(op.result_type.dtype),
    )
    return g.op("Mul", [g.op("Sign", [x]), g.op("Add", [whole, up])])


@register("stablehlo.is_finite", dynamic=True)
def _is_finite(interp, op, x):
    g = interp.graph
    return g.op("Not", [g.op("Or", [g.op("IsInf", [x]), g.op("IsNaN", [x])])])


def _logical(bool_op, bitwise_op):
    def rule(interp, op, *xs):
        t = bool_op if op.result_type.dtype == "bool" else bitwise_op
        return interp.graph.op(t, list(xs))

    return rule


register("stablehlo.and", dynamic=True)(_logical("And", "BitwiseAnd"))
register("stablehlo.or", dynamic=True)(_logical("Or", "BitwiseOr"))
register("stablehlo.xor", dynamic=True)(_logical("Xor", "BitwiseXor"))
register("stablehlo.not", dynamic=True)(_logical("Not", "BitwiseNot"))


@register("stablehlo.convert", dynamic=True)
def _convert(interp, op, x):
    return interp.graph.op("Cast", [x], to=onnx_dtype(op.result_type.dtype))


_COMPARE = {"EQ": "Equal", "LT": "Less", "LE": "LessOrEqual", "GT": "Greater", "GE": "GreaterOrEqual"}


@register("stablehlo.compare", dynamic=True)
def _compare(interp, op, x, y):
    if op.attr("compare_type") == "TOTALORDER" and dtypes.is_floating(op.operand_type(0).dtype):
        raise NotImplementedError("compare with TOTALORDER on floats has no ONNX equivalent")
    direction = op.attr("comparison_direction")
    if direction == "NE":
        return interp.graph.op("Not", [interp.graph.op("Equal", [x, y])])
    return interp.graph.op(_COMPARE[direction], [x, y])


@register("stablehlo.select", dynamic=True)
def _select(interp, op, pred, on_true, on_false):
    return interp.graph.op("Where", [pred, on_true, on_false])


@register("stablehlo.clamp", dynamic=True)
def _clamp(interp, op, lo, x, hi):
    g = interp.graph
    return g.op("Min", [g.op("Max", [x, lo]), hi])
