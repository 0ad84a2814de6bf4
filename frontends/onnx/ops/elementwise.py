"""Elementwise ONNX ops: arithmetic, comparison, logic, bitwise, math functions, activations,
Cast/CastLike, Clip, Where (https://onnx.ai/onnx/operators/, one page per op).

ONNX broadcasts numpy-style (``jnp`` does the same); integer Div truncates toward zero like
C; the output dtype is the one ONNX shape inference records (the walker casts to it).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..graph import np_dtype
from ..registry import onnx_op

_UNARY = {
    "Abs": (jnp.abs, 6),
    "Neg": (jnp.negative, 6),
    "Exp": (jnp.exp, 6),
    "Log": (jnp.log, 6),
    "Sqrt": (jnp.sqrt, 6),
    "Reciprocal": (lambda x: 1 / x, 6),
    "Floor": (jnp.floor, 6),
    "Ceil": (jnp.ceil, 6),
    "Tanh": (jnp.tanh, 6),
    "Sigmoid": (jax.nn.sigmoid, 6),
    "Relu": (lambda x: jnp.maximum(x, jnp.zeros((), x.dtype)), 6),
    "Sin": (jnp.sin, 7),
    "Cos": (jnp.cos, 7),
    "Tan": (jnp.tan, 7),
    "Asin": (jnp.arcsin, 7),
    "Acos": (jnp.arccos, 7),
    "Atan": (jnp.arctan, 7),
    "Sinh": (jnp.sinh, 9),
    "Cosh": (jnp.cosh, 9),
    "Asinh": (jnp.arcsinh, 9),
    "Acosh": (jnp.arccosh, 9),
    "Atanh": (jnp.arctanh, 9),
    "Erf": (lax.erf, 9),
    "Sign": (jnp.sign, 9),
    "IsNaN": (jnp.isnan, 9),
    "Round": (jnp.round, 11),
    "Not": (jnp.logical_not, 1),
    "BitwiseNot": (jnp.bitwise_not, 18),
    "Softsign": (lambda x: x / (1 + jnp.abs(x)), 1),
    "Softplus": (lambda x: jnp.logaddexp(x, jnp.zeros((), x.dtype)), 1),
    "Mish": (lambda x: x * jnp.tanh(jnp.logaddexp(x, jnp.zeros((), x.dtype))), 18),
}


def _unary(fn):
    def rule(ctx, x):
        return fn(x)

    return rule


for _name, (_fn, _since) in _UNARY.items():
    onnx_op(_name, _since)(_unary(_fn))


def _int_div(a, b):
    if jnp.issubdtype(jnp.result_type(a, b), jnp.integer):
        return lax.div(*jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b)))
    return a / b


_BINARY = {
    "Add": (jnp.add, 7),
    "Sub": (jnp.subtract, 7),
    "Mul": (jnp.multiply, 7),
    "Div": (_int_div, 7),
    "Equal": (jnp.equal, 7),
    "Less": (jnp.less, 7),
    "Greater": (jnp.greater, 7),
    "LessOrEqual": (jnp.less_equal, 12),
    "GreaterOrEqual": (jnp.greater_equal, 12),
    "And": (jnp.logical_and, 7),
    "Or": (jnp.logical_or, 7),
    "Xor": (jnp.logical_xor, 7),
    "BitwiseAnd": (jnp.bitwise_and, 18),
    "BitwiseOr": (jnp.bitwise_or, 18),
    "BitwiseXor": (jnp.bitwise_xor, 18),
}


def _binary(fn):
    def rule(ctx, a, b):
        return fn(a, b)

    return rule


for _name, (_fn, _since) in _BINARY.items():
    onnx_op(_name, _since)(_binary(_fn))


@onnx_op("Pow", 7)
def pow_(ctx, x, y):
    """Pow: the result has the base's dtype (``Pow`` page, opset 12+ allows mixed types)."""
    if jnp.issubdtype(x.dtype, jnp.integer):
        if jnp.issubdtype(y.dtype, jnp.integer):
            return jnp.power(x, y.astype(x.dtype))
        return jnp.power(x.astype(np.float64), y).astype(x.dtype)
    return jnp.power(x, y.astype(x.dtype))


@onnx_op("Mod", 10)
def mod(ctx, a, b, *, fmod=0):
    """Mod: ``fmod=1`` is C fmod (sign of the dividend), ``fmod=0`` Python's % (sign of the
    divisor)."""
    if fmod:
        return jnp.fmod(a, b)
    return jnp.mod(a, b)


@onnx_op("BitShift", 11)
def bit_shift(ctx, x, y, *, direction):
    """BitShift; shifting by the bit width or more (or a negative amount) gives 0, or the
    sign fill when right-shifting a signed integer (opset 28 allows signed types)."""
    bits = np.dtype(x.dtype).itemsize * 8
    y = jnp.asarray(y)
    over = (y < 0) | (y >= bits) if jnp.issubdtype(y.dtype, jnp.signedinteger) else y >= bits
    y = jnp.where(over, 0, y).astype(x.dtype)
    x, y, over = jnp.broadcast_arrays(x, y, over)
    if direction == "LEFT":
        return jnp.where(over, jnp.zeros((), x.dtype), lax.shift_left(x, y))
    if jnp.issubdtype(x.dtype, jnp.signedinteger):
        return jnp.where(over, jnp.where(x < 0, -1, 0).astype(x.dtype), lax.shift_right_arithmetic(x, y))
    return jnp.where(over, jnp.zeros((), x.dtype), lax.shift_right_logical(x, y))


def _variadic(fn):
    def rule(ctx, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out

    return rule


onnx_op("Max", 6)(_variadic(jnp.maximum))
onnx_op("Min", 6)(_variadic(jnp.minimum))
onnx_op("Sum", 6)(_variadic(jnp.add))


@onnx_op("Mean", 6)
def mean(ctx, *xs):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out / len(xs)


@onnx_op("IsInf", 10)
def is_inf(ctx, x, *, detect_negative=1, detect_positive=1):
    pos = jnp.isposinf(x) if detect_positive else jnp.zeros(x.shape, bool)
    neg = jnp.isneginf(x) if detect_negative else jnp.zeros(x.shape, bool)
    return pos | neg


@onnx_op("Where", 9)
def where(ctx, cond, x, y):
    return jnp.where(cond, x, y)


@onnx_op("Clip", 6, until=6)
def clip_6(ctx, x, *, min=-3.4028234663852886e38, max=3.4028234663852886e38):  # noqa: A002
    return jnp.clip(x, jnp.asarray(min, x.dtype), jnp.asarray(max, x.dtype))


@onnx_op("Clip", 11)
def clip(ctx, x, lo=None, hi=None):
    """Clip with optional ``min``/``max`` inputs (opset 11+)."""
    if lo is not None:
        x = jnp.maximum(x, jnp.asarray(lo, x.dtype))
    if hi is not None:
        x = jnp.minimum(x, jnp.asarray(hi, x.dtype))
    return x


_NARROW_INT_BITS = {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2}


def _cast(x, dtype: np.dtype, saturate: int = 1):
    """Cast as ONNX defines it (Cast-21 to Cast-25 say the same): floats to float8 saturate
    (``saturate=1``); integers to 4-/2-bit integers keep the low bits ("discard higher bits
    and reinterpret", two's complement); floats to 4-/2-bit integers truncate toward zero,
    and where the spec leaves an out-of-range value undefined they saturate to the type's
    range (NaN to 0), as onnxruntime and XLA's float-to-integer conversions do."""
    x = jnp.asarray(x)
    bits = _NARROW_INT_BITS.get(dtype.name)
    if bits and x.dtype != dtype:
        lo = -(1 << (bits - 1)) if dtype.name.startswith("int") else 0
        if jnp.issubdtype(x.dtype, jnp.floating):
            v = jnp.clip(jnp.trunc(x), lo, lo + (1 << bits) - 1)
            return jnp.where(jnp.isnan(v), 0, v).astype(np.int8).astype(dtype)
        v = x.astype(np.int64)
        return (jnp.mod(v - lo, 1 << bits) + lo).astype(dtype)
    if dtype.name.startswith("float8") and saturate and jnp.issubdtype(x.dtype, jnp.floating):
        info = jnp.finfo(dtype)
        x = jnp.clip(x, float(info.min), float(info.max))  # ±inf saturate too; NaN stays
    return x.astype(dtype)


@onnx_op("Cast", 6)
def cast(ctx, x, *, to, saturate=1, round_mode="up"):
    """Cast to ``to`` (a TensorProto data type); float → int truncates toward zero."""
    return _cast(x, np_dtype(to), saturate)


@onnx_op("CastLike", 15)
def cast_like(ctx, x, like, *, saturate=1, round_mode="up"):
    return _cast(x, np.dtype(like.dtype), saturate)


@onnx_op("Identity", 1)
def identity(ctx, x):
    return x


@onnx_op("LeakyRelu", 6)
def leaky_relu(ctx, x, *, alpha=0.01):
    return jnp.where(x >= 0, x, alpha * x)


@onnx_op("PRelu", 7)
def prelu(ctx, x, slope):
    return jnp.where(x >= 0, x, slope * x)


@onnx_op("Elu", 6)
def elu(ctx, x, *, alpha=1.0):
    return jnp.where(x >= 0, x, alpha * jnp.expm1(x))


@onnx_op("Celu", 12)
def celu(ctx, x, *, alpha=1.0):
    return jnp.maximum(0, x) + jnp.minimum(0, alpha * jnp.expm1(x / alpha))


@onnx_op("Selu", 6)
def selu(ctx, x, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return gamma * jnp.where(x > 0, x, alpha * jnp.expm1(x))


@onnx_op("ThresholdedRelu", 10)
def thresholded_relu(ctx, x, *, alpha=1.0):
    return jnp.where(x > alpha, x, jnp.zeros((), x.dtype))


@onnx_op("HardSigmoid", 6)
def hard_sigmoid(ctx, x, *, alpha=0.2, beta=0.5):
    return jnp.clip(alpha * x + beta, 0, 1)


@onnx_op("HardSwish", 14)
def hard_swish(ctx, x):
    return x * jnp.clip(x / 6 + 0.5, 0, 1)


@onnx_op("Swish", 24)
def swish(ctx, x, *, alpha=1.0):
    return x * jax.nn.sigmoid(alpha * x)


@onnx_op("Gelu", 20)
def gelu(ctx, x, *, approximate="none"):
    return jax.nn.gelu(x, approximate=approximate == "tanh")


@onnx_op("Shrink", 9)
def shrink(ctx, x, *, bias=0.0, lambd=0.5):
    return jnp.where(x < -lambd, x + bias, jnp.where(x > lambd, x - bias, 0)).astype(x.dtype)


@onnx_op("BitCast", 26)
def bitcast(ctx, x, *, to):
    dtype = np_dtype(to)
    if x.dtype == jnp.bool_ or dtype == np.bool_:
        return x.astype(dtype)
    return lax.bitcast_convert_type(x, dtype)
