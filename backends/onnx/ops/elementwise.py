"""Elementwise StableHLO/CHLO ops → ONNX operators (opset 18).

StableHLO semantics kept exact (StableHLO spec sections: divide, remainder, sign, shift_left,
shift_right_logical, shift_right_arithmetic, popcnt, count_leading_zeros, atan2):

- integer ``divide`` truncates (ONNX ``Div`` on integers does); ``x / 0`` is ``-1`` (all bits
  set for unsigned types) and ``INT_MIN / -1`` is ``INT_MIN``, as XLA computes them;
  ``remainder`` is ``Mod(fmod=1)`` (sign of the dividend), ``x % 0`` is ``x``. The divisor is
  made safe first: onnxruntime raises on a zero divisor and ``INT_MIN / -1`` traps the process;
- ``sign`` keeps NaN and signed zeros (onnxruntime's ``Sign`` maps NaN to 0);
- ``exponential_minus_one`` and ``log_plus_one`` stay accurate near 0 (Kahan's forms:
  ``(e - 1) * x / log(e)`` and ``log(u) * x / (u - 1)``), not ``exp(x) - 1``;
- shifts by a negative amount or at least the bit width give 0 (arithmetic right shift: the
  sign fill); ONNX ``BitShift`` takes unsigned types only, so signed values are shifted as
  their unsigned bit pattern (``Cast`` wraps);
- ``popcnt`` and ``count_leading_zeros`` count the bits of the value's own width, in uint64;
- ``round_nearest_afz`` is built from ``Floor`` on the magnitude, ``round_nearest_even`` is
  ONNX ``Round``.
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from converter import dtypes, mlir
from converter.markers import STOP_GRADIENT_KEY

from ..graph import onnx_dtype
from ..registry import register

_BINARY = {
    "subtract": "Sub",
}
#: ops whose ``i1`` form is a logical op (spec: ``add`` is OR, ``multiply`` AND; ``maximum``
#: OR and ``minimum`` AND, as false < true)
_ARITH_OR_LOGICAL = {
    "add": ("Add", "Or"),
    "multiply": ("Mul", "And"),
    "maximum": ("Max", "Or"),
    "minimum": ("Min", "And"),
}
_UNARY = {
    "abs": "Abs",
    "exponential": "Exp",
    "log": "Log",
    "logistic": "Sigmoid",
    "sqrt": "Sqrt",
    "tanh": "Tanh",
    "sine": "Sin",
    "cosine": "Cos",
    "floor": "Floor",
    "ceil": "Ceil",
    "round_nearest_even": "Round",
}


def _binary(op_type):
    return lambda interp, op, x, y: interp.graph.op_as(op_type, [x, y], op.result_type.dtype, data=(0, 1))


def _unary(op_type):
    return lambda interp, op, x: interp.graph.op(op_type, [x])


for _name, _t in _BINARY.items():
    register(f"stablehlo.{_name}", dynamic=True)(_binary(_t))
for _name, _t in _UNARY.items():
    register(f"stablehlo.{_name}", dynamic=True)(_unary(_t))


def _arith_or_logical(op_type, bool_op_type):
    def rule(interp, op, x, y):
        if op.result_type.dtype == "bool":
            return interp.graph.op(bool_op_type, [x, y])
        return interp.graph.op_as(op_type, [x, y], op.result_type.dtype, data=(0, 1))

    return rule


for _name, (_t, _b) in _ARITH_OR_LOGICAL.items():
    register(f"stablehlo.{_name}", dynamic=True)(_arith_or_logical(_t, _b))


@register("stablehlo.real", dynamic=True)
def _real(interp, op, x):
    """Spec: ``real`` of a floating-point tensor is the tensor (complex ones: :mod:`.complex`)."""
    return interp.graph.op("Identity", [x])


@register("stablehlo.imag", dynamic=True)
def _imag(interp, op, x):
    """Spec: ``imag`` of a floating-point tensor is zeros of its shape (NaN and inf too)."""
    g = interp.graph
    return g.op("Expand", [g.const(0, op.result_type.dtype), g.op("Shape", [x])])


@register("stablehlo.power", dynamic=True)
def _power(interp, op, x, y):
    """Floats: ``Pow``. Integers, as the spec's reference interpreter: exponentiation by
    squaring with wrap-around (in int64 bits, whose low bits every narrower type keeps), the
    exponent's bits read unsigned; a negative exponent of a signed type gives 0 unless
    ``|x| == 1`` (``-1`` then gives ``±1`` by the exponent's parity). ONNX ``Pow`` on
    integers leaves overflow and negative exponents undefined."""
    g = interp.graph
    dtype = op.result_type.dtype
    if not dtypes.is_integer(dtype):
        return g.op("Pow", [x, y])
    bits = np.iinfo(dtypes.to_numpy(dtype)).bits
    signed = not dtypes.is_unsigned(dtype)
    wx, wy = g.cast(x, "int64"), g.cast(y, "int64")
    zero, one = g.const(0, "int64"), g.const(1, "int64")
    if signed:
        neg = g.op("Less", [wy, zero])
        wy = g.op("Where", [neg, g.op("Neg", [wy]), wy])
    base = g.op("Add", [wx, g.op("Mul", [wy, zero])])  # broadcast to the common shape
    result = g.op("Add", [one, g.op("Mul", [base, zero])])
    for k in range(bits):
        mask = g.const(np.array(1 << k, np.uint64).view(np.int64), "int64")
        bit = g.op("Not", [g.op("Equal", [g.op("BitwiseAnd", [wy, mask]), zero])])
        result = g.op("Where", [bit, g.op("Mul", [result, base]), result])
        if k + 1 < bits:
            base = g.op("Mul", [base, base])
    if signed:
        unit = g.op("Equal", [g.op("Abs", [wx]), one])
        result = g.op("Where", [g.op("And", [neg, g.op("Not", [unit])]), zero, result])
    return g.cast(result, dtype)


def _where(g, cond, a, b, dtype):
    return g.op_as("Where", [cond, a, b], dtype, data=(1, 2))


def _isinf(g, x, op):
    return g.op_as("IsInf", [x], op.result_type.dtype, same_out=())


def _scalar(interp, op, value):
    return interp.graph.const(value, op.result_type.dtype)


@register("stablehlo.tan", "chlo.tan", dynamic=True)
def _tan(interp, op, x):
    """``Tan``; float64 as ``sin / cos`` (onnxruntime has no float64 ``Tan`` kernel)."""
    g = interp.graph
    if op.result_type.dtype == "float64":
        return g.op("Div", [g.op("Sin", [x]), g.op("Cos", [x])])
    return g.op("Tan", [x])


@register("stablehlo.atan2", dynamic=True)
def _atan2(interp, op, y, x):
    """On magnitudes: ``t = atan(min / max)`` (0 when both are 0, pi/4 when both are
    infinite), ``pi/2 - t`` when ``|y| > |x|``, ``pi - t`` when ``x`` is negative or -0.0;
    then ``t`` takes the sign of ``y`` by a multiply, so signed zeros come out as the spec
    says (``atan2(-0, +0) = -0``, ``atan2(+0, -0) = pi``)."""
    g = interp.graph
    c = lambda v: _scalar(interp, op, v)  # noqa: E731
    ax, ay = g.op("Abs", [x]), g.op("Abs", [y])
    lo, hi = g.op("Min", [ax, ay]), g.op("Max", [ax, ay])
    ratio = g.op("Div", [lo, hi])
    t = _atan_magnitude64(g, ratio) if op.result_type.dtype == "float64" else g.op("Atan", [ratio])
    t = g.op("Where", [g.op("Equal", [hi, c(0)]), c(0), t])
    t = g.op("Where", [g.op("And", [_isinf(g, ax, op), _isinf(g, ay, op)]), c(np.pi / 4), t])
    t = g.op("Where", [g.op("Greater", [ay, ax]), g.op("Sub", [c(np.pi / 2), t]), t])
    t = g.op("Where", [_negative(g, x, c), g.op("Sub", [c(np.pi), t]), t])
    return g.op("Mul", [g.op("Where", [_negative(g, y, c), c(-1), c(1)]), t])


# float64 arctangent (onnxruntime's CPU provider has no float64 Atan/Asin/Acos kernel): the
# range reduction and rational minimax approximation of Cephes' atan (Moshier), coefficients
# of atan(t) = t + t * z * P(z) / Q(z), z = t*t, on |t| <= 0.66; max error 1 ulp (tested
# against NumPy over 1e-10..1e10 and the edge values).
_ATAN_P = (
    -8.750608600031904122785e-1,
    -1.615753718733365076637e1,
    -7.500855792314704667340e1,
    -1.228866684490136173410e2,
    -6.485021904942025371773e1,
)
_ATAN_Q = (  # monic: the leading 1 is implicit
    2.485846490142306297962e1,
    1.650270098316988542046e2,
    4.328810604912902668951e2,
    4.853903996359136964868e2,
    1.945506571482613964425e2,
)
_TAN_3PI_8 = 2.414213562373095048802
_PI_2_LOW = 6.123233995736765886130e-17  # pi/2 - float64(pi/2)


def _f64(g, v):
    return g.const(np.float64(v), "float64")


def _horner(g, z, coefficients, monic=False):
    acc = g.op("Add", [z, _f64(g, coefficients[0])]) if monic else _f64(g, coefficients[0])
    for k in coefficients[1:]:
        acc = g.op("Add", [g.op("Mul", [acc, z]), _f64(g, k)])
    return acc


def _atan_magnitude64(g, a):
    """``atan(a)`` for float64 ``a >= 0`` (or NaN): ``a > tan(3pi/8)`` as
    ``pi/2 + atan(-1/a)``, ``a > 0.66`` as ``pi/4 + atan((a-1)/(a+1))``, then the rational
    approximation on the reduced argument; the low part of ``pi/2`` (``pi/4``) is added to
    the small term first. ``inf`` gives ``pi/2``; NaN falls through every test to NaN."""
    big = g.op("Greater", [a, _f64(g, _TAN_3PI_8)])
    mid = g.op("And", [g.op("Greater", [a, _f64(g, 0.66)]), g.op("Not", [big])])
    one = _f64(g, 1.0)
    reduced = g.op("Div", [g.op("Sub", [a, one]), g.op("Add", [a, one])])
    t = g.op("Where", [big, g.op("Div", [_f64(g, -1.0), a]), g.op("Where", [mid, reduced, a])])
    base = g.op("Where", [big, _f64(g, np.pi / 2), g.op("Where", [mid, _f64(g, np.pi / 4), _f64(g, 0.0)])])
    low = g.op("Where", [big, _f64(g, _PI_2_LOW), g.op("Where", [mid, _f64(g, _PI_2_LOW / 2), _f64(g, 0.0)])])
    z = g.op("Mul", [t, t])
    ratio = g.op("Div", [g.op("Mul", [z, _horner(g, z, _ATAN_P)]), _horner(g, z, _ATAN_Q, monic=True)])
    small = g.op("Add", [g.op("Mul", [t, ratio]), t])
    return g.op("Add", [base, g.op("Add", [small, low])])


def _with_sign_of(g, magnitude, x):
    """``magnitude`` with the sign of float64 ``x`` (-0.0 counts as negative), by a multiply
    so a zero result keeps its sign (onnxruntime's ``Where`` drops it)."""
    sign = g.op("Where", [_negative(g, x, lambda v: _f64(g, v)), _f64(g, -1.0), _f64(g, 1.0)])
    return g.op("Mul", [sign, magnitude])


def atan64(g, x):
    """float64 ``atan(x)``, odd: ``sign(x) * atan(|x|)`` (:func:`_atan_magnitude64`)."""
    return _with_sign_of(g, _atan_magnitude64(g, g.op("Abs", [x])), x)


def asin64(g, x):
    """float64 ``asin(x) = atan(x / sqrt((1 - x) * (1 + x)))`` (within 2 ulp: ``1 - x`` is
    exact where it matters, near 1); ``x = +-1`` gives ``atan(+-inf) = +-pi/2``, ``|x| > 1``
    NaN from the square root."""
    one = _f64(g, 1.0)
    root = g.op("Sqrt", [g.op("Mul", [g.op("Sub", [one, x]), g.op("Add", [one, x])])])
    return atan64(g, g.op("Div", [x, root]))


def acos64(g, x):
    """float64 ``acos(x) = 2 * atan(sqrt((1 - x) / (1 + x)))`` (within 2 ulp); ``x = -1``
    gives ``2 * atan(inf) = pi``, ``|x| > 1`` NaN from the square root."""
    one = _f64(g, 1.0)
    root = g.op("Sqrt", [g.op("Div", [g.op("Sub", [one, x]), g.op("Add", [one, x])])])
    return g.op("Mul", [_f64(g, 2.0), _atan_magnitude64(g, root)])


def _inverse_trig(op_type, float64_rule):
    def rule(interp, op, x):
        if op.result_type.dtype == "float64":
            return float64_rule(interp.graph, x)
        return interp.graph.op(op_type, [x])

    rule.__doc__ = f"CHLO {op_type.lower()}: ONNX ``{op_type}``; float64 by :func:`{float64_rule.__name__}`."
    return rule


register("chlo.atan", dynamic=True)(_inverse_trig("Atan", atan64))
register("chlo.asin", dynamic=True)(_inverse_trig("Asin", asin64))
register("chlo.acos", dynamic=True)(_inverse_trig("Acos", acos64))


def _negative(g, v, c):
    """``v < 0``, -0.0 included (``1 / -0.0`` is ``-inf``)."""
    zero_below = g.op("And", [g.op("Equal", [v, c(0)]), g.op("Less", [g.op("Div", [c(1), v]), c(0)])])
    return g.op("Or", [g.op("Less", [v, c(0)]), zero_below])


@register("chlo.square", dynamic=True)
def _square(interp, op, x):
    return interp.graph.op("Mul", [x, x])


@register("chlo.is_inf", dynamic=True)
def _is_inf(interp, op, x):
    return interp.graph.op_as("IsInf", [x], op.operand_type(0).dtype, same_out=())


def _safe_divisor(interp, op, x, y):
    """(divisor with 0 and -1 replaced by 1, ``y == 0``): onnxruntime raises on a zero
    integer divisor, and ``INT_MIN / -1`` (or ``% -1``) traps the process."""
    g = interp.graph
    dtype = op.operand_type(1).dtype
    one = g.const(1, dtype)
    zero = g.op("Equal", [y, g.const(0, dtype)])
    bad = zero if dtypes.is_unsigned(dtype) else g.op("Or", [zero, g.op("Equal", [y, g.const(-1, dtype)])])
    return _where(g, bad, one, y, dtype), zero


@register("stablehlo.divide", dynamic=True)
def _divide(interp, op, x, y):
    """Floats: ``Div``. Integers: truncating ``Div`` on a safe divisor; ``x / 0`` is all bits
    set, ``x / -1`` is ``0 - x`` (so ``INT_MIN / -1`` wraps to ``INT_MIN``)."""
    g = interp.graph
    dtype = op.result_type.dtype
    if not dtypes.is_integer(dtype):
        return g.op("Div", [x, y])
    safe, zero = _safe_divisor(interp, op, x, y)
    q = g.op("Div", [x, safe])
    if not dtypes.is_unsigned(dtype):
        minus_one = g.op("Equal", [y, g.const(-1, dtype)])
        q = _where(g, minus_one, g.op("Sub", [g.const(0, dtype), x]), q, dtype)
    ones = np.array(-1).astype(dtypes.to_numpy(dtype))  # all bits set
    return _where(g, zero, g.const(ones, dtype), q, dtype)


@register("stablehlo.remainder", dynamic=True)
def _remainder(interp, op, x, y):
    """``Mod(fmod=1)``; integers on a safe divisor: ``x % 0`` is ``x``, ``x % -1`` is 0."""
    g = interp.graph
    dtype = op.result_type.dtype
    if not dtypes.is_integer(dtype):
        return g.op("Mod", [x, y], fmod=1)
    safe, zero = _safe_divisor(interp, op, x, y)
    return _where(g, zero, x, g.op("Mod", [x, safe], fmod=1), dtype)


@register("stablehlo.negate", dynamic=True)
def _negate(interp, op, x):
    """``Neg``; unsigned integers (which ``Neg`` does not take) as ``0 - x``, wrapping."""
    dtype = op.result_type.dtype
    if dtypes.is_unsigned(dtype):
        return interp.graph.op("Sub", [interp.graph.const(0, dtype), x])
    return interp.graph.op("Neg", [x])


@register("stablehlo.sign", dynamic=True)
def _sign(interp, op, x):
    """``Sign``; floats keep NaN and signed zeros (``sign(x)`` is ``x`` there), computed as
    ``c / |c|`` (``c / 1`` at zero) with ``c = clamp(x, -1, 1)``: onnxruntime's ``Sign``
    maps NaN to 0 and its ``Where`` turns -0.0 into +0.0."""
    g = interp.graph
    dtype = op.result_type.dtype
    if not dtypes.is_floating(dtype):
        return g.op("Sign", [x])
    clipped = g.op("Min", [g.op("Max", [x, _scalar(interp, op, -1)]), _scalar(interp, op, 1)])
    magnitude = g.op("Abs", [clipped])
    zero = g.op("Equal", [clipped, _scalar(interp, op, 0)])
    return g.op("Div", [clipped, g.op("Where", [zero, _scalar(interp, op, 1), magnitude])])


@register("stablehlo.rsqrt", dynamic=True)
def _rsqrt(interp, op, x):
    return interp.graph.op("Reciprocal", [interp.graph.op("Sqrt", [x])])


@register("stablehlo.exponential_minus_one", dynamic=True)
def _expm1(interp, op, x):
    """Kahan: with ``e = exp(x)``, ``x`` where ``e == 1``, ``-1`` where ``e - 1 == -1``,
    else ``(e - 1) * x / log(e)`` (the rounding of ``e`` cancels); infinities pass through."""
    g = interp.graph
    one = _scalar(interp, op, 1)
    e = g.op("Exp", [x])
    em1 = g.op("Sub", [e, one])
    ratio = g.op("Div", [g.op("Mul", [em1, x]), g.op("Log", [e])])
    out = g.op("Where", [_isinf(g, e, op), em1, ratio])
    out = g.op("Where", [g.op("Equal", [em1, _scalar(interp, op, -1)]), em1, out])
    return g.op("Where", [g.op("Equal", [e, one]), x, out])


@register("stablehlo.log_plus_one", dynamic=True)
def _log1p(interp, op, x):
    """Kahan: with ``u = 1 + x``, ``x`` where ``u == 1``, else ``log(u) * x / (u - 1)``
    (the rounding of ``u`` cancels); ``u`` infinite: ``log(u)``."""
    g = interp.graph
    one = _scalar(interp, op, 1)
    u = g.op("Add", [x, one])
    log_u = g.op("Log", [u])
    ratio = g.op("Div", [g.op("Mul", [log_u, x]), g.op("Sub", [u, one])])
    out = g.op("Where", [_isinf(g, u, op), log_u, ratio])
    return g.op("Where", [g.op("Equal", [u, one]), x, out])


@register("stablehlo.cbrt", dynamic=True)
def _cbrt(interp, op, x):
    """``sign(x) * |x| ** (1/3)`` computed in float64 and rounded once to the operand type
    (a float16 exponent would round 1/3 itself; float16 and bfloat16 results are then the
    correctly rounded ones XLA's CPU backend gives); -0.0 keeps its sign."""
    g = interp.graph
    dtype = op.result_type.dtype
    v = x if dtype == "float64" else _cast(g, x, "float64")
    out = _with_sign_of(g, g.op("Pow", [g.op("Abs", [v]), _f64(g, 1 / 3)]), v)
    return out if dtype == "float64" else _cast(g, out, dtype)


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
    inf = g.op_as("IsInf", [x], op.operand_type(0).dtype, same_out=())
    return g.op("Not", [g.op("Or", [inf, g.op("IsNaN", [x])])])


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
    """``Cast``; float → integer by :func:`_float_to_int`."""
    src, dst = op.operand_type(0).dtype, op.result_type.dtype
    if dtypes.is_floating(src) and dst != "bool" and np.dtype(dtypes.to_numpy(dst)).kind in "iu":
        return _float_to_int(interp.graph, x, src, dst)
    return interp.graph.op("Cast", [x], to=onnx_dtype(dst))


def _float_to_int(g, x, src: str, dst: str) -> str:
    """Float → integer as XLA converts (what ``jax.jit`` and the torch backend give): truncate
    toward zero, saturate at ``dst``'s range, NaN → 0. ONNX leaves an out-of-range ``Cast``
    undefined and onnxruntime on x86 wraps (200.0 → int8 -56, NaN and 1e10 → int32 -2**31),
    so the value is clipped and NaN replaced by 0 in float first: float32 for 8- and 16-bit
    results, float64 (exact for 32-bit ranges) for wider ones; a 64-bit result also selects its
    maximum above the largest float64 below it (onnxruntime's ``Where`` takes no narrow
    integers)."""
    info = np.iinfo(dtypes.to_numpy(dst))
    calc = "float64" if src == "float64" or info.bits >= 32 else "float32"
    if src != calc:
        x = g.cast(x, calc)
    ftype = np.dtype(dtypes.to_numpy(calc)).type
    lo, hi = ftype(info.min), ftype(info.max)  # the minimum (0 or -2**k) is exact
    if int(hi) > info.max:
        hi = np.nextafter(hi, ftype(0))
    v = g.op("Clip", [x, g.const(lo, calc), g.const(hi, calc)])
    v = g.op("Where", [g.op("IsNaN", [x]), g.const(0, calc), v])
    y = g.cast(v, dst)
    if int(hi) < info.max:  # 64-bit: select the maximum (uint64's as int64 -1, then wrapped back)
        over = g.op("Greater", [x, g.const(hi, calc)])
        if dst == "int64":
            return g.op("Where", [over, g.const(info.max, dst), y])
        y = g.op("Where", [over, g.const(-1, "int64"), g.cast(y, "int64")])
        return g.cast(y, dst)
    return y


_COMPARE = {"EQ": "Equal", "LT": "Less", "LE": "LessOrEqual", "GT": "Greater", "GE": "GreaterOrEqual"}


@register("stablehlo.compare", dynamic=True)
def _compare(interp, op, x, y):
    """``Equal``/``Less``/...; a float ``TOTALORDER`` compare by :func:`_total_order`."""
    direction = op.attr("comparison_direction")
    if op.attr("compare_type") == "TOTALORDER" and dtypes.is_floating(op.operand_type(0).dtype):
        return _total_order(interp, op, x, y, direction)
    if direction == "NE":
        return interp.graph.op("Not", [interp.graph.op("Equal", [x, y])])
    return interp.graph.op_as(_COMPARE[direction], [x, y], op.operand_type(0).dtype, data=(0, 1), same_out=())


def _total_order(interp, op, x, y, direction):
    """IEEE totalOrder on floats whose operands JAX canonicalized (as ``jnp.sort``,
    ``searchsorted`` do: ``select(x != x, NaN, select(x == 0, 0, x))``): no -0.0 and only
    positive NaNs are left, so NaN is the largest value and equal to itself.

    Raises:
        NotImplementedError: an operand is not canonicalized (ONNX cannot read the sign of
            a NaN or tell -0.0 from +0.0 in a comparison).
    """
    if not all(is_canonical(interp, v) for v in op.operands):
        raise NotImplementedError("compare TOTALORDER on floats that may hold -0.0 or negative NaNs")
    g = interp.graph
    nx, ny = g.op("IsNaN", [x]), g.op("IsNaN", [y])
    lt = g.op("Or", [g.op("Less", [x, y]), g.op("And", [g.op("Not", [nx]), ny])])
    gt = g.op("Or", [g.op("Greater", [x, y]), g.op("And", [nx, g.op("Not", [ny])])])
    eq = g.op("Or", [g.op("Equal", [x, y]), g.op("And", [nx, ny])])
    table = {"LT": lt, "GT": gt, "EQ": eq, "LE": g.op("Not", [gt]), "GE": g.op("Not", [lt])}
    return table[direction] if direction in table else g.op("Not", [eq])


def is_canonical(interp, value, of=None) -> bool:
    """``value`` is JAX's canonicalization of one float ``x`` (``of`` when given), as
    ``jnp.sort``'s and ``searchsorted``'s comparators write it:
    ``select(x != x, +NaN, select(x == 0, +0.0, x))``, both compares ``FLOAT`` (not
    ``TOTALORDER``, under which ``x != x`` never holds and ``-0.0 == 0`` does not), the zero
    of the test on either side, constants possibly broadcast. Such a value holds no -0.0 and
    no negative NaN. Every part is matched: a NaN test or a zero test of another value, a
    test against another constant or the false branch another value could let -0.0 or a
    negative NaN through."""
    nan_sel = _defining(value, "stablehlo.select")
    if nan_sel is None:
        return False
    x = _self_compare(nan_sel.operands[0], "NE")
    if x is None or (of is not None and x != of):
        return False
    nan = interp.static_operand(nan_sel, 1)
    if nan is None or not np.all(np.isnan(nan) & ~np.signbit(nan)):
        return False
    zero_sel = _defining(nan_sel.operands[2], "stablehlo.select")
    if zero_sel is None or zero_sel.operands[2] != x:
        return False
    test = _defining(zero_sel.operands[0], "stablehlo.compare")
    if test is None or test.attr("comparison_direction") != "EQ" or test.attr("compare_type") == "TOTALORDER":
        return False
    sides = list(test.operands)
    if x not in sides:
        return False
    other = interp.static_operand(test, 1 - sides.index(x))
    zero = interp.static_operand(zero_sel, 1)
    return (
        other is not None
        and np.all(other == 0)
        and zero is not None
        and np.all((zero == 0) & ~np.signbit(zero))
    )


def _defining(value, name):
    owner = value.owner
    owner = getattr(owner, "operation", owner)
    return mlir.Op(owner) if isinstance(owner, ir.Operation) and owner.name == name else None


def _self_compare(value, direction):
    """``x`` when ``value`` is ``compare <direction>, x, x`` of a type other than
    ``TOTALORDER`` (``x != x``: a NaN test), else None."""
    test = _defining(value, "stablehlo.compare")
    if (
        test is None
        or test.attr("comparison_direction") != direction
        or test.attr("compare_type") == "TOTALORDER"
    ):
        return None
    x, y = test.operands
    return x if x == y else None


@register("stablehlo.select", dynamic=True)
def _select(interp, op, pred, on_true, on_false):
    return interp.graph.op_as("Where", [pred, on_true, on_false], op.result_type.dtype, data=(1, 2))


@register("stablehlo.clamp", dynamic=True)
def _clamp(interp, op, lo, x, hi):
    g = interp.graph
    dtype = op.result_type.dtype
    return g.op_as("Min", [g.op_as("Max", [x, lo], dtype, data=(0, 1)), hi], dtype, data=(0, 1))


# --------------------------------------------------------------------------- bits

_BITS = {
    "int8": 8,
    "int16": 16,
    "int32": 32,
    "int64": 64,
    "uint8": 8,
    "uint16": 16,
    "uint32": 32,
    "uint64": 64,
}
# the unsigned type a shift works in (onnxruntime's BitShift has no 16-bit kernel)
_SHIFT_TYPE = {8: "uint8", 16: "uint32", 32: "uint32", 64: "uint64"}


def _cast(g, x, dtype):
    return g.op("Cast", [x], to=onnx_dtype(dtype))


def _bits_as(g, x, dtype, wide):
    """The bit pattern of integer ``x`` (of ``dtype``) zero-extended into unsigned ``wide``."""
    same = "u" + dtype if not dtypes.is_unsigned(dtype) else dtype
    if same != dtype:
        x = _cast(g, x, same)  # Cast between integer types wraps
    return x if same == wide else _cast(g, x, wide)


def _from_bits(g, x, dtype):
    """Unsigned ``x`` truncated to ``dtype``'s width and read as ``dtype``."""
    same = "u" + dtype if not dtypes.is_unsigned(dtype) else dtype
    return _cast(g, _cast(g, x, same), dtype) if same != dtype else _cast(g, x, dtype)


def _shift_amount(interp, op, s, dtype, wide):
    """(amount as ``wide``, ``amount >= width`` as unsigned, so negatives count too)."""
    g = interp.graph
    amount = _bits_as(g, s, dtype, wide)
    too_far = g.op("GreaterOrEqual", [amount, g.const(_BITS[dtype], wide)])
    return _where(g, too_far, g.const(0, wide), amount, wide), too_far


def _logical_shift(direction):
    def rule(interp, op, x, s):
        g = interp.graph
        dtype = op.result_type.dtype
        wide = _SHIFT_TYPE[_BITS[dtype]]
        amount, too_far = _shift_amount(interp, op, s, dtype, wide)
        shifted = g.op("BitShift", [_bits_as(g, x, dtype, wide), amount], direction=direction)
        return _where(g, too_far, g.const(0, dtype), _from_bits(g, shifted, dtype), dtype)

    return rule


register("stablehlo.shift_left", dynamic=True)(_logical_shift("LEFT"))
register("stablehlo.shift_right_logical", dynamic=True)(_logical_shift("RIGHT"))


@register("stablehlo.shift_right_arithmetic", dynamic=True)
def _shift_right_arithmetic(interp, op, x, s):
    """The value read as signed; negative values as ``~((~x) >> s)``; amounts of at least
    the width shift by ``width - 1`` (the sign fill)."""
    g = interp.graph
    dtype = op.result_type.dtype
    signed = dtype[1:] if dtypes.is_unsigned(dtype) else dtype
    wide = _SHIFT_TYPE[_BITS[dtype]]
    v = _cast(g, x, signed) if signed != dtype else x
    negative = g.op("Less", [v, g.const(0, signed)])
    magnitude = _where(g, negative, g.op("BitwiseNot", [v]), v, signed)
    amount = g.op_as("Min", [_bits_as(g, s, dtype, wide), g.const(_BITS[dtype] - 1, wide)], wide, data=(0, 1))
    shifted = _from_bits(
        g, g.op("BitShift", [_bits_as(g, magnitude, signed, wide), amount], direction="RIGHT"), signed
    )
    out = _where(g, negative, g.op("BitwiseNot", [shifted]), shifted, signed)
    return _cast(g, out, dtype) if signed != dtype else out


def _popcount64(g, u):
    """Set bits of each uint64 in ``u`` (SWAR: pairs, nibbles, bytes, then a multiply)."""
    c = lambda v: g.const(np.uint64(v), "uint64")  # noqa: E731
    shr = lambda v, n: g.op("BitShift", [v, c(n)], direction="RIGHT")  # noqa: E731
    u = g.op("Sub", [u, g.op("BitwiseAnd", [shr(u, 1), c(0x5555555555555555)])])
    m2 = c(0x3333333333333333)
    u = g.op("Add", [g.op("BitwiseAnd", [u, m2]), g.op("BitwiseAnd", [shr(u, 2), m2])])
    u = g.op("BitwiseAnd", [g.op("Add", [u, shr(u, 4)]), c(0x0F0F0F0F0F0F0F0F)])
    return shr(g.op("Mul", [u, c(0x0101010101010101)]), 56)


@register("stablehlo.popcnt", dynamic=True)
def _popcnt(interp, op, x):
    g = interp.graph
    dtype = op.result_type.dtype
    return _cast(g, _popcount64(g, _bits_as(g, x, dtype, "uint64")), dtype)


@register("stablehlo.count_leading_zeros", dynamic=True)
def _clz(interp, op, x):
    """``width - popcount(smeared)``, where smearing ORs every bit into those below it."""
    g = interp.graph
    dtype = op.result_type.dtype
    u = _bits_as(g, x, dtype, "uint64")
    for n in (1, 2, 4, 8, 16, 32):
        u = g.op("BitwiseOr", [u, g.op("BitShift", [u, g.const(np.uint64(n), "uint64")], direction="RIGHT")])
    count = g.op("Sub", [g.const(np.uint64(_BITS[dtype]), "uint64"), _popcount64(g, u)])
    return _cast(g, count, dtype)


# (exponent bits, mantissa bits) of the float types a bit pattern can be read as
_FLOAT_LAYOUT = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}
_WIDTH = {**_BITS, **{t: 1 + e + m for t, (e, m) in _FLOAT_LAYOUT.items()}}
BITCAST_OPSET = 26  # ONNX BitCast


@register("stablehlo.bitcast_convert", dynamic=True)
def _bitcast_convert(interp, op, x):
    """StableHLO spec: bitcast_convert. From opset 26, ONNX ``BitCast`` (bit-exact, NaN
    payloads kept) for every pair of integer and float types, also of different widths
    (:func:`_bitcast_widths`). Below opset 26 only integers → a float of the same width,
    from the bit fields (:func:`_bits_to_float`; a NaN payload is not kept).

    Shapes: the operand's, with a trailing dimension of ``wider / narrower`` added (to a
    narrower type) or removed (to a wider one). The op is in :data:`converter.backends.onnx.widen.DIRECT`:
    bfloat16 operands and results are bits here, never float32 casts.

    Raises:
        NotImplementedError: below opset 26, any other pair (floats → integers: arithmetic
            cannot read a NaN's sign bit; width changes), naming the opset needed; bool or
            complex types at any opset.
    """
    g = interp.graph
    src, dst = op.operand_type(0).dtype, op.result_type.dtype
    if src == dst:
        return g.op("Identity", [x])
    if src not in _WIDTH or dst not in _WIDTH:
        raise NotImplementedError(f"bitcast_convert {src} -> {dst}: only integer and float types")
    if interp.opset >= BITCAST_OPSET:
        return _bitcast_widths(g, x, src, dst)
    if dtypes.is_integer(src) and dst in _FLOAT_LAYOUT and _WIDTH[src] == _WIDTH[dst]:
        return _bits_to_float(g, x, src, dst)
    raise NotImplementedError(
        f"bitcast_convert {src} -> {dst} needs ONNX BitCast, which opset {BITCAST_OPSET} introduced: "
        f"convert with to_onnx(opset={BITCAST_OPSET}) (this model targets opset {interp.opset})"
    )


def _bitcast(g, x, src, dst):
    """ONNX ``BitCast`` of ``x`` (``src``) to ``dst`` of the same width; no node when equal."""
    return x if src == dst else g.op("BitCast", [x], to=onnx_dtype(dst))


def _bitcast_widths(g, x, src, dst):
    """``BitCast`` through unsigned integers when the widths differ: to a narrower type,
    part ``i`` of the trailing dimension is bits ``[i*w, (i+1)*w)`` of the element (the
    least significant part first, as XLA orders them: the bytes of a little-endian element);
    to a wider one, the parts are shifted into place and ORed. Shifts run in uint32 for
    16-bit elements (onnxruntime's ``BitShift`` has no 16-bit kernel)."""
    wide_w, narrow_w = max(_WIDTH[src], _WIDTH[dst]), min(_WIDTH[src], _WIDTH[dst])
    if wide_w == narrow_w:
        return _bitcast(g, x, src, dst)
    wide_u, narrow_u, work = f"uint{wide_w}", f"uint{narrow_w}", _SHIFT_TYPE[wide_w]
    shift = lambda v, n, d: v if n == 0 else g.op("BitShift", [v, g.const(n, work)], direction=d)  # noqa: E731
    last = g.ints([-1])
    if _WIDTH[src] == wide_w:
        u = _cast(g, _bitcast(g, x, src, wide_u), work) if work != wide_u else _bitcast(g, x, src, wide_u)
        mask = g.const((1 << narrow_w) - 1, work)
        low = [g.op("BitwiseAnd", [shift(u, i * narrow_w, "RIGHT"), mask]) for i in range(wide_w // narrow_w)]
        parts = [g.op("Unsqueeze", [_cast(g, p, narrow_u), last]) for p in low]
        return _bitcast(g, g.op("Concat", parts, axis=-1), narrow_u, dst)
    u = _bitcast(g, x, src, narrow_u)
    acc = None
    for i in range(wide_w // narrow_w):
        part = shift(_cast(g, g.op("Gather", [u, g.const(i, "int64")], axis=-1), work), i * narrow_w, "LEFT")
        acc = part if acc is None else g.op("BitwiseOr", [acc, part])
    return _bitcast(g, _cast(g, acc, wide_u) if work != wide_u else acc, wide_u, dst)


def _bits_to_float(g, x, src, dst):
    """Integer bits → a float of the same width, computed from the fields:
    ``(2**M + m) * 2**(e - bias - M)`` for normal numbers, ``m * 2**(1 - bias - M)`` for
    subnormals, infinity, NaN (any payload), and the sign applied by a multiply so -0.0
    stays. Everything is exact in float64, then cast to ``dst``."""
    exp_bits, man_bits = _FLOAT_LAYOUT[dst]
    bias = 2 ** (exp_bits - 1) - 1
    u = _bits_as(g, x, src, "uint64")
    c64 = lambda v: g.const(np.uint64(v), "uint64")  # noqa: E731
    f64 = lambda v: g.const(np.float64(v), "float64")  # noqa: E731
    shr = lambda v, n: g.op("BitShift", [v, c64(n)], direction="RIGHT")  # noqa: E731
    sign = _cast(g, shr(u, exp_bits + man_bits), "float64")
    e = _cast(g, g.op("BitwiseAnd", [shr(u, man_bits), c64(2**exp_bits - 1)]), "float64")
    m = _cast(g, g.op("BitwiseAnd", [u, c64(2**man_bits - 1)]), "float64")
    scale = g.op("Pow", [f64(2.0), g.op("Sub", [e, f64(bias + man_bits)])])
    normal = g.op("Mul", [g.op("Add", [m, f64(2.0**man_bits)]), scale])
    subnormal = g.op("Mul", [m, f64(2.0 ** (1 - bias - man_bits))])
    special = g.op("Where", [g.op("Equal", [m, f64(0)]), f64(np.inf), f64(np.nan)])
    value = g.op("Where", [g.op("Equal", [e, f64(0)]), subnormal, normal])
    value = g.op("Where", [g.op("Equal", [e, f64(2**exp_bits - 1)]), special, value])
    signed = g.op("Mul", [value, g.op("Sub", [f64(1), g.op("Mul", [f64(2), sign])])])
    return _cast(g, signed, dst)  # exact: the value is representable


@register("stablehlo.reduce_precision", dynamic=True)
def _reduce_precision(interp, op, x):
    """StableHLO spec: reduce_precision, computed exactly in float64 (every float16/float32
    value and operation here is exact there): the magnitude ``a`` is rounded to
    ``mantissa_bits`` with ties to even as ``Round(a / ulp) * ulp``, ``ulp =
    2**(max(e, emin) - mantissa_bits)`` with ``e`` the binade of ``a`` (``emin`` the operand
    type's least normal exponent: its subnormals round on the same grid, as XLA rounds the
    bits); then, for fewer ``exponent_bits`` than the type has, results from
    ``2**(bias + 1)`` up overflow to infinity and those below ``2**(1 - bias)`` flush to zero
    (``bias = 2**(exponent_bits - 1) - 1``: the format has no subnormals, as in XLA). The sign
    is applied by a multiply (-0.0 stays); NaN and infinities pass through unchanged.
    bfloat16 arrives as float32 (:mod:`converter.backends.onnx.widen`), where rounding it is exact.

    Raises:
        NotImplementedError: a non-float operand.
    """
    g = interp.graph
    dtype = op.result_type.dtype
    if dtype not in _FLOAT_LAYOUT:
        raise NotImplementedError(f"reduce_precision on {dtype}")
    src_e, src_m = _FLOAT_LAYOUT[dtype]
    exp_bits, man_bits = op.attr("exponent_bits"), op.attr("mantissa_bits")
    v = x if dtype == "float64" else _cast(g, x, "float64")
    r = g.op("Abs", [v])
    if man_bits < src_m:
        r = _round_mantissa(g, r, man_bits, 2 - 2 ** (src_e - 1))
    if exp_bits < src_e:
        bias = 2 ** (exp_bits - 1) - 1
        r = g.op("Where", [g.op("GreaterOrEqual", [r, _f64(g, 2.0 ** (bias + 1))]), _f64(g, np.inf), r])
        r = g.op("Where", [g.op("Less", [r, _f64(g, 2.0 ** (1 - bias))]), _f64(g, 0.0), r])
    out = _with_sign_of(g, r, v)
    out = out if dtype == "float64" else _cast(g, out, dtype)
    finite = g.op("Not", [g.op("Or", [g.op("IsNaN", [x]), _isinf(g, x, op)])])
    return g.op("Where", [g.op("Not", [finite]), x, out])  # out in the false slot: keeps -0.0


def _round_mantissa(g, a, man_bits, emin):
    """float64 ``a >= 0`` rounded to ``man_bits`` fraction bits, ties to even (``Round``),
    on the grid of its binade (at least ``emin``). The binade comes from ``Log``, corrected
    by one either way against exact powers of two. With no fraction bits the tie between
    ``2**e`` and ``2**(e+1)`` goes to the even biased exponent, as XLA's rounding of the bits
    does."""
    two = _f64(g, 2.0)
    e = g.op("Floor", [g.op("Div", [g.op("Log", [a]), _f64(g, np.log(2.0))])])
    p = g.op("Pow", [two, e])
    one = _f64(g, 1.0)
    e = g.op("Sub", [e, g.op("Where", [g.op("Greater", [p, a]), one, _f64(g, 0.0)])])
    e = g.op("Add", [e, g.op("Where", [g.op("LessOrEqual", [g.op("Mul", [p, two]), a]), one, _f64(g, 0.0)])])
    e = g.op("Max", [e, _f64(g, emin)])
    ulp = g.op("Pow", [two, g.op("Sub", [e, _f64(g, man_bits)])])
    q = g.op("Div", [a, ulp])
    rounded = g.op("Round", [q])
    if man_bits == 0:  # the last kept bit is the exponent's: a tie goes to the even exponent
        biased = g.op("Add", [e, _f64(g, 1 - emin)])
        even = g.op("Equal", [g.op("Mod", [biased, two], fmod=1), _f64(g, 0.0)])
        tie_down = g.op("And", [g.op("Equal", [q, _f64(g, 1.5)]), even])
        rounded = g.op("Where", [tie_down, one, rounded])
    return g.op("Mul", [rounded, ulp])


@register(STOP_GRADIENT_KEY, dynamic=True)
def _stop_gradient(interp, op, x, *shape):
    """``lax.stop_gradient`` of a JAX source (``from_jax`` marks it): ONNX has no gradients."""
    return interp.graph.op("Identity", [x])
