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
    "abs": lax.abs,
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
    "real": lax.real,
    "imag": lax.imag,
}
_UNARY["round_nearest_even"] = lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)

_BINARY = {
    "add": lax.add,
    "subtract": lax.sub,
    "multiply": lax.mul,
    "divide": lax.div,
    "remainder": lax.rem,
    "maximum": lax.max,
    "minimum": lax.min,
    "power": lax.pow,
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


@register("stablehlo.round_nearest_afz")
def _round_afz(interp, op, x):
    return lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO)


@register("stablehlo.convert")
def _convert(interp, op, x):
    return lax.convert_element_type(x, dtypes.to_numpy(op.result_type.dtype))


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
