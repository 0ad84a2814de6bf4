"""Elementwise StableHLO/CHLO ops (spec sections: add, compare, convert, select, clamp, ...).

Semantics follow the StableHLO spec, which ``jax.lax`` lowers to one-to-one: integer
``divide``/``remainder`` truncate, ``maximum``/``minimum`` propagate NaN, shifts past the bit
width give 0 (or the sign fill for arithmetic right shifts).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from converter import dtypes
from converter.markers import STOP_GRADIENT_KEY

from ..registry import register

_UNARY = {
    "negate": lax.neg,
    "exponential": lax.exp,
    "exponential_minus_one": lax.expm1,
    "log": lax.log,
    "log_plus_one": lax.log1p,
    "logistic": lax.logistic,
    "sqrt": lax.sqrt,
    "rsqrt": lax.rsqrt,
    "cbrt": lax.cbrt,
    "tanh": lax.tanh,
    "sine": lax.sin,
    "cosine": lax.cos,
    "tan": lax.tan,
    "floor": lax.floor,
    "ceil": lax.ceil,
    "round_nearest_even": lax.round_nearest_even if hasattr(lax, "round_nearest_even") else None,
    "sign": lax.sign,
    "not": lax.bitwise_not,
    "popcnt": lax.population_count,
    "count_leading_zeros": lax.clz,
    "is_finite": lax.is_finite,
}
_UNARY["round_nearest_even"] = lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)

_BINARY = {
    "subtract": lax.sub,
    "divide": lax.div,
    "remainder": lax.rem,
    "maximum": lax.max,
    "minimum": lax.min,
    "atan2": lax.atan2,
    "and": lax.bitwise_and,
    "or": lax.bitwise_or,
    "xor": lax.bitwise_xor,
    "shift_left": lax.shift_left,
    "shift_right_arithmetic": lax.shift_right_arithmetic,
    "shift_right_logical": lax.shift_right_logical,
    "complex": lax.complex,
}

_CHLO_UNARY = {
    "erf": lax.erf,
    "erfc": lax.erfc,
    "erf_inv": lax.erf_inv,
    "lgamma": lax.lgamma,
    "digamma": lax.digamma,
    "asin": lax.asin,
    "acos": lax.acos,
    "atan": lax.atan,
    "sinh": lax.sinh,
    "cosh": lax.cosh,
    "tan": lax.tan,
    "asinh": lax.asinh,
    "acosh": lax.acosh,
    "atanh": lax.atanh,
    "bessel_i1e": lax.bessel_i1e,
    "is_inf": jnp.isinf,
    "is_neg_inf": jnp.isneginf,
    "is_pos_inf": jnp.isposinf,
    "conj": lax.conj,
    "square": lax.square,
}


def _unary_rule(fn):
    return lambda interp, op, x: fn(x)


def _binary_rule(fn):
    return lambda interp, op, x, y: fn(x, y)


for _name, _fn in _UNARY.items():
    register(f"stablehlo.{_name}")(_unary_rule(_fn))
for _name, _fn in _BINARY.items():
    register(f"stablehlo.{_name}")(_binary_rule(_fn))
for _name, _fn in _CHLO_UNARY.items():
    register(f"chlo.{_name}")(_unary_rule(_fn))
register("chlo.next_after")(_binary_rule(lax.nextafter))
register("chlo.polygamma")(_binary_rule(lax.polygamma))
register("chlo.zeta")(_binary_rule(lax.zeta))


@register("stablehlo.abs")
def _abs(interp, op, x):
    """``lax.abs``; int2/int4 (for which JAX has no abs) by ``where(x < 0, -x, x)``."""
    if x.dtype.itemsize == 1 and jnp.issubdtype(x.dtype, jnp.signedinteger) and jnp.iinfo(x.dtype).bits < 8:
        return jnp.where(x < 0, lax.neg(x), x)
    return lax.abs(x)


@register("stablehlo.add")
def _add(interp, op, x, y):
    """Spec: on ``i1`` ``add`` is logical OR."""
    return lax.bitwise_or(x, y) if x.dtype == jnp.bool_ else lax.add(x, y)


@register("stablehlo.multiply")
def _multiply(interp, op, x, y):
    """Spec: on ``i1`` ``multiply`` is logical AND."""
    return lax.bitwise_and(x, y) if x.dtype == jnp.bool_ else lax.mul(x, y)


@register("stablehlo.real")
def _real(interp, op, x):
    """Spec: ``real`` of a floating-point tensor is the tensor itself."""
    return lax.real(x) if jnp.iscomplexobj(x) else x


@register("stablehlo.imag")
def _imag(interp, op, x):
    """Spec: ``imag`` of a floating-point tensor is zeros."""
    return lax.imag(x) if jnp.iscomplexobj(x) else jnp.zeros_like(x)


@register("stablehlo.power")
def _power(interp, op, x, y):
    """Floats and complex: ``lax.pow``. Integers (spec, as its reference interpreter): exponentiation
    by squaring with wrap-around; a negative exponent of a signed type gives 0 unless
    ``|x| == 1`` (``1`` stays ``1``, ``-1`` gives ``±1`` by the exponent's parity); an unsigned
    exponent is never negative."""
    if not jnp.issubdtype(x.dtype, jnp.integer):
        return lax.pow(x, y)
    return integer_power(x, y)


def integer_power(x, y):
    """``x ** y`` for integer tensors of one dtype by the spec's integer semantics (see
    :func:`_power`); the exponent's bits are walked as unsigned, at most its bit width times."""
    dtype = x.dtype
    bits = jnp.iinfo(dtype).bits
    signed = jnp.issubdtype(dtype, jnp.signedinteger)
    one = jnp.ones_like(x)
    neg = (y < 0) if signed else jnp.zeros(y.shape, jnp.bool_)
    e = jnp.where(neg, -y, y)  # |y|; INT_MIN stays INT_MIN, whose bits read unsigned are even
    e = lax.bitcast_convert_type(e, jnp.dtype(f"uint{bits}")) if signed else e
    x, e = jnp.broadcast_arrays(x, e)
    result = jnp.ones_like(x)
    base = x

    def step(_, carry):
        r, b, e = carry
        r = jnp.where((e & 1) == 1, r * b, r)
        return r, b * b, e >> 1

    result, _, _ = lax.fori_loop(0, bits, step, (result, base, e))
    if signed:
        unit = (x == one) | (x == -one)  # no jnp.abs: JAX has none for int2/int4
        result = jnp.where(neg & ~unit, jnp.zeros_like(x), result)
    return result


@register("stablehlo.round_nearest_afz")
def _round_afz(interp, op, x):
    return lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO)


@register("stablehlo.convert")
def _convert(interp, op, x):
    """Spec: a conversion to ``i1`` is a nonzero test (a complex value is nonzero when either
    part is; ``lax.convert_element_type`` reads only the real part)."""
    dst = op.result_type.dtype
    if dst == "bool" and jnp.iscomplexobj(x):
        return (lax.real(x) != 0) | (lax.imag(x) != 0)
    return lax.convert_element_type(x, dtypes.to_numpy(dst))


@register("stablehlo.bitcast_convert")
def _bitcast(interp, op, x):
    return lax.bitcast_convert_type(x, dtypes.to_numpy(op.result_type.dtype))


@register("stablehlo.clamp")
def _clamp(interp, op, lo, x, hi):
    return lax.clamp(lo, x, hi)


@register("stablehlo.select")
def _select(interp, op, pred, on_true, on_false):
    return lax.select_n(pred, on_false, on_true)


_COMPARE = {"EQ": lax.eq, "NE": lax.ne, "LT": lax.lt, "LE": lax.le, "GT": lax.gt, "GE": lax.ge}


@register("stablehlo.compare")
def _compare(interp, op, x, y):
    direction = op.attr("comparison_direction")
    if op.attr("compare_type") == "TOTALORDER":
        x, y = total_order_key(x), total_order_key(y)
    return _COMPARE[direction](x, y)


def total_order_key(x):
    """Map floats to signed integers whose order is IEEE totalOrder (spec: compare)."""
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return x
    bits = {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}[x.dtype.itemsize]
    i = lax.bitcast_convert_type(x, bits)
    return jnp.where(i < 0, i ^ jnp.iinfo(bits).max, i)


@register("stablehlo.reduce_precision")
def _reduce_precision(interp, op, x):
    return lax.reduce_precision(x, op.attr("exponent_bits"), op.attr("mantissa_bits"))


@register(STOP_GRADIENT_KEY)
def _stop_gradient(interp, op, x, *shape):
    """``lax.stop_gradient`` of a JAX source (``from_jax`` marks it: StableHLO has no op)."""
    return lax.stop_gradient(x)
