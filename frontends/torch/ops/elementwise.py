"""Elementwise ATen ops: arithmetic, comparisons, logic, math functions, activations.

Schemas: ``native_functions.yaml``. Binary rules compute in torch's common dtype
(``torch.result_type`` of the operands, replayed in :func:`._util.result_type`) and, for
float16/bfloat16, in float32 as torch's CPU kernels do (``opmath_type``); the walker then
casts to the dtype torch recorded. Special cases follow the CPU kernels
(``aten/src/ATen/native/cpu/BinaryOpsKernel.cpp``, ``c10/util/generic_math.h``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import register
from ._util import acc_dtype, cast, exact_div, float_type, is_array, is_float, result_type

aten = __import__("torch").ops.aten


def _common(*args, floating=False):
    """The operands cast to the dtype torch computes the op in, and that dtype."""
    dt = float_type(*args) if floating else result_type(*args)
    cdt = acc_dtype(dt)
    return [None if a is None else cast(a, cdt) for a in args], cdt


# ---------------------------------------------------------------- arithmetic


def _scaled(y, alpha):
    return y if alpha == 1 else y * alpha


@register(aten.add.Tensor, aten.add.Scalar)
def add(x, y, alpha=1):
    """``x + alpha * y`` (``add.Tensor``/``add.Scalar``); bool add is logical or."""
    (x, y), dt = _common(x, y)
    if dt == np.bool_:
        return x | (y & bool(alpha))
    return x + _scaled(y, alpha)


@register(aten.sub.Tensor, aten.sub.Scalar)
def sub(x, y, alpha=1):
    """``x - alpha * y``."""
    (x, y), _ = _common(x, y)
    return x - _scaled(y, alpha)


@register(aten.rsub.Scalar, aten.rsub.Tensor)
def rsub(x, y, alpha=1):
    """``y - alpha * x``."""
    (x, y), _ = _common(x, y)
    return y - _scaled(x, alpha)


@register(aten.mul.Tensor, aten.mul.Scalar)
def mul(x, y):
    """``x * y``; bool mul is logical and."""
    (x, y), dt = _common(x, y)
    return x & y if dt == np.bool_ else x * y


@register(aten.div.Tensor, aten.div.Scalar)
def div(x, y):
    """True division; integers divide as the default float dtype."""
    (x, y), _ = _common(x, y, floating=True)
    return x / y


def _div_floor_float(a, b):
    """``c10::div_floor_floating``: Python's floor division, IEEE result for ``b == 0``."""
    mod = lax.rem(a, b)
    q = (a - mod) / b
    q = jnp.where((mod != 0) & ((b < 0) != (mod < 0)), q - 1, q)
    fq = jnp.floor(q)
    fq = jnp.where(q - fq > 0.5, fq + 1, fq)
    fq = jnp.where(q != 0, fq, jnp.copysign(jnp.zeros_like(q), a / b))
    return jnp.where(b == 0, a / b, fq)


def _div_floor_int(a, b):
    """``c10::div_floor_integer``: quotient rounded toward negative infinity."""
    q = lax.div(a, b)
    fix = (lax.rem(a, b) != 0) & ((a < 0) != (b < 0))
    return jnp.where(fix, q - 1, q)


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(x, y, rounding_mode=None):
    """Division with ``rounding_mode`` None (true), ``"trunc"`` or ``"floor"`` (``torch.export``
    refuses any other)."""
    if rounding_mode is None:
        return div(x, y)
    (x, y), dt = _common(x, y)
    x, y = jnp.broadcast_arrays(x, y)
    if rounding_mode == "trunc":
        return jnp.trunc(x / y) if is_float(dt) else lax.div(x, y)
    return _div_floor_float(x, y) if is_float(dt) else _div_floor_int(x, y)


@register(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(x, y):
    """``div(x, y, rounding_mode="floor")``."""
    return div_mode(x, y, "floor")


@register(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)
def remainder(x, y):
    """Python-style modulus: the result has the sign of ``y``."""
    (x, y), _ = _common(x, y)
    x, y = jnp.broadcast_arrays(x, y)
    mod = lax.rem(x, y)
    return jnp.where((mod != 0) & ((y < 0) != (mod < 0)), mod + y, mod)


@register(aten.fmod.Tensor, aten.fmod.Scalar)
def fmod(x, y):
    """C ``fmod``: the result has the sign of ``x``."""
    (x, y), _ = _common(x, y)
    return lax.rem(*jnp.broadcast_arrays(x, y))


def _pow_scalar_exp(x, e):
    """``pow_tensor_scalar_optimized_kernel``: torch's special exponents on CPU."""
    if e == 0:
        return jnp.ones_like(x)
    if e == 1:
        return x
    if is_float(x.dtype) and not jnp.iscomplexobj(x):
        special = {0.5: jnp.sqrt, 2: lambda v: v * v, 3: lambda v: v * v * v, -0.5: lax.rsqrt}
        special.update({-1: lambda v: 1 / v, -2: lambda v: 1 / (v * v)})
        if e in special:
            return special[e](x)
        return lax.pow(x, jnp.asarray(e, x.dtype))
    if isinstance(e, int) or float(e).is_integer():
        if int(e) < 0:
            raise ValueError("integers to negative integer powers are not allowed")
        return lax.integer_pow(x, int(e))
    return lax.pow(x, jnp.asarray(e, x.dtype))


@register(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar)
def pow_(x, y):
    """``x ** y``; a Python-scalar exponent takes torch's special cases (2 → ``x*x``...).
    Integer powers wrap around as ATen's ``powi``; a negative integer exponent gives 0,
    except for bases 1 (1) and -1 (±1 by the exponent's parity)."""
    if is_array(x) and not is_array(y):
        return _pow_scalar_exp(cast(x, acc_dtype(result_type(x, y))), y)
    (x, y), _ = _common(x, y)
    if not jnp.issubdtype(x.dtype, jnp.signedinteger):
        return jnp.power(x, y)
    one = jnp.ones((), x.dtype)
    negative = jnp.where(x == 1, one, jnp.where(x == -1, jnp.where(y % 2 == 0, one, -one), 0))
    return jnp.where(y < 0, negative, jnp.power(x, jnp.maximum(y, 0)))


@register(aten.atan2.default)
def atan2(x, y):
    """``atan2(x, y)`` in the common float dtype."""
    (x, y), _ = _common(x, y, floating=True)
    return jnp.arctan2(x, y)


@register(aten.maximum.default)
def maximum(x, y):
    """Elementwise max, propagating NaN."""
    (x, y), _ = _common(x, y)
    return jnp.maximum(x, y)


@register(aten.minimum.default)
def minimum(x, y):
    """Elementwise min, propagating NaN."""
    (x, y), _ = _common(x, y)
    return jnp.minimum(x, y)


@register(aten.fmax.default)
def fmax(x, y):
    """Elementwise max ignoring NaN."""
    (x, y), _ = _common(x, y)
    return jnp.fmax(x, y)


@register(aten.fmin.default)
def fmin(x, y):
    """Elementwise min ignoring NaN."""
    (x, y), _ = _common(x, y)
    return jnp.fmin(x, y)


@register(aten.copysign.Tensor, aten.copysign.Scalar)
def copysign(x, y):
    """Magnitude of ``x``, sign of ``y``."""
    (x, y), _ = _common(x, y, floating=True)
    return jnp.copysign(x, y)


# ---------------------------------------------------------------- comparisons and logic

_COMPARE = {
    "eq": jnp.equal,
    "ne": jnp.not_equal,
    "lt": jnp.less,
    "le": jnp.less_equal,
    "gt": jnp.greater,
    "ge": jnp.greater_equal,
}


def _compare_rule(fn):
    def rule(x, y):
        (x, y), _ = _common(x, y)
        return fn(x, y)

    rule.__doc__ = f"``{fn.__name__}`` in the operands' common dtype; returns bool."
    return rule


for _name, _fn in _COMPARE.items():
    register(getattr(aten, _name).Tensor, getattr(aten, _name).Scalar)(_compare_rule(_fn))


def _bool(x):
    return x if x.dtype == np.bool_ else x != 0


@register(aten.logical_and.default)
def logical_and(x, y):
    """``(x != 0) & (y != 0)``."""
    return _bool(jnp.asarray(x)) & _bool(jnp.asarray(y))


@register(aten.logical_or.default)
def logical_or(x, y):
    """``(x != 0) | (y != 0)``."""
    return _bool(jnp.asarray(x)) | _bool(jnp.asarray(y))


@register(aten.logical_xor.default)
def logical_xor(x, y):
    """``(x != 0) ^ (y != 0)``."""
    return _bool(jnp.asarray(x)) ^ _bool(jnp.asarray(y))


@register(aten.logical_not.default)
def logical_not(x):
    """``x == 0``."""
    return ~_bool(x)


_BITWISE = {"bitwise_and": jnp.bitwise_and, "bitwise_or": jnp.bitwise_or, "bitwise_xor": jnp.bitwise_xor}


def _bitwise_rule(fn):
    def rule(x, y):
        (x, y), _ = _common(x, y)
        return fn(x, y)

    rule.__doc__ = f"``{fn.__name__}`` on integers or bools in the common dtype."
    return rule


for _name, _fn in _BITWISE.items():
    _packet = getattr(aten, _name)
    register(_packet.Tensor, _packet.Scalar, _packet.Scalar_Tensor)(_bitwise_rule(_fn))


def _gcd(a, b):
    """ATen's ``calc_gcd``: Euclid's algorithm on ``|a|``, ``|b|`` with C's truncating
    remainder (``|b % a| < |a|``, so it ends even for the minimum integer, whose ``abs``
    wraps; ``jnp.gcd``'s floor modulo can cycle there)."""
    a, b = jnp.broadcast_arrays(jnp.abs(a), jnp.abs(b))  # the loop carries one shape

    def step(ab):
        a, b = ab
        live = a != 0
        return jnp.where(live, lax.rem(b, jnp.where(live, a, 1)), 0), jnp.where(live, a, b)

    return lax.while_loop(lambda ab: jnp.any(ab[0] != 0), step, (a, b))[1]


@register(aten.gcd.default)
def gcd(x, y):
    """Greatest common divisor of integers (``gcd(0, 0) = 0``), as ATen's ``calc_gcd``."""
    (x, y), _ = _common(x, y)
    return _gcd(x, y)


@register(aten.lcm.default)
def lcm(x, y):
    """Least common multiple ``|x / gcd * y|`` of integers (0 when the gcd is 0), truncating
    division and wrapping on overflow as ATen's ``calc_lcm``."""
    (x, y), _ = _common(x, y)
    x, y = jnp.broadcast_arrays(x, y)
    g = _gcd(x, y)
    zero = g == 0
    return jnp.where(zero, jnp.zeros((), x.dtype), jnp.abs(lax.div(x, jnp.where(zero, 1, g)) * y))


@register(aten.bitwise_not.default)
def bitwise_not(x):
    """``~x`` (logical not for bool)."""
    return ~x


_lshift, _rshift = aten.bitwise_left_shift, aten.bitwise_right_shift


@register(
    _lshift.Tensor,
    _lshift.Tensor_Scalar,
    _lshift.Scalar_Tensor,
    aten.__lshift__.Scalar,
    aten.__lshift__.Tensor,
)
def bitwise_left_shift(x, y):
    """``x << y``; shifts of at least the bit width give 0."""
    (x, y), _ = _common(x, y)
    return lax.shift_left(*jnp.broadcast_arrays(x, y))


@register(
    _rshift.Tensor,
    _rshift.Tensor_Scalar,
    _rshift.Scalar_Tensor,
    aten.__rshift__.Scalar,
    aten.__rshift__.Tensor,
)
def bitwise_right_shift(x, y):
    """``x >> y``, arithmetic for signed integers."""
    (x, y), dt = _common(x, y)
    x, y = jnp.broadcast_arrays(x, y)
    if jnp.issubdtype(dt, jnp.signedinteger):
        return lax.shift_right_arithmetic(x, y)
    return lax.shift_right_logical(x, y)


@register(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(cond, x, y):
    """``cond ? x : y`` with ``x`` and ``y`` promoted together."""
    (x, y), _ = _common(x, y)
    return jnp.where(cond, x, y)


@register(aten.clamp.default, aten.clamp.Tensor)
def clamp(x, min=None, max=None):  # noqa: A002 - ATen argument names
    """``min(max(x, min), max)``: NaN in ``x`` propagates; ``min > max`` gives ``max``."""
    (x, lo, hi), _ = _common(x, min, max)
    if lo is not None:
        x = jnp.maximum(x, lo)
    if hi is not None:
        x = jnp.minimum(x, hi)
    return x


@register(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(x, min):  # noqa: A002
    """``clamp(x, min=min)``."""
    return clamp(x, min, None)


@register(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(x, max):  # noqa: A002
    """``clamp(x, max=max)``."""
    return clamp(x, None, max)


# ---------------------------------------------------------------- unary math


def _float_unary(fn, doc):
    def rule(x):
        return fn(cast(x, acc_dtype(float_type(x))))

    rule.__doc__ = doc
    return rule


def _digamma(x):
    """``digamma`` with ATen's ``calc_digamma`` value at zero, ``copysign(inf, -x)``
    (``jax.scipy.special.digamma`` gives NaN there); NaN at negative integers as both."""
    return jnp.where(x == 0, jnp.copysign(jnp.asarray(jnp.inf, x.dtype), -x), jax.scipy.special.digamma(x))


_FLOAT_UNARY = {
    "exp": jnp.exp,
    "exp2": jnp.exp2,
    "expm1": jnp.expm1,
    "log": jnp.log,
    "log1p": jnp.log1p,
    "log2": jnp.log2,
    "log10": jnp.log10,
    "sqrt": jnp.sqrt,
    "rsqrt": lax.rsqrt,
    "sin": jnp.sin,
    "cos": jnp.cos,
    "tan": jnp.tan,
    "asin": jnp.arcsin,
    "acos": jnp.arccos,
    "atan": jnp.arctan,
    "sinh": jnp.sinh,
    "cosh": jnp.cosh,
    "tanh": jnp.tanh,
    "asinh": jnp.arcsinh,
    "acosh": jnp.arccosh,
    "atanh": jnp.arctanh,
    "erf": jax.scipy.special.erf,
    "erfc": jax.scipy.special.erfc,
    "erfinv": jax.scipy.special.erfinv,
    "lgamma": jax.scipy.special.gammaln,
    "digamma": lambda v: _digamma(v),
    "sigmoid": lambda v: 1 / (1 + jnp.exp(-v)),
    "reciprocal": lambda v: 1 / v,
}
for _name, _fn in _FLOAT_UNARY.items():
    _doc = f"``{_name}``; integer inputs compute as float."
    register(getattr(aten, _name).default)(_float_unary(_fn, _doc))


def _same_dtype_unary(fn, doc, int_identity=False):
    def rule(x):
        if int_identity and not is_float(x.dtype):
            return x
        return fn(cast(x, acc_dtype(x.dtype)))

    rule.__doc__ = doc
    return rule


register(aten.neg.default)(_same_dtype_unary(jnp.negative, "``-x``."))
register(aten.abs.default)(_same_dtype_unary(jnp.abs, "``|x|``."))
register(aten.floor.default)(_same_dtype_unary(jnp.floor, "``floor``; identity on integers.", True))
register(aten.ceil.default)(_same_dtype_unary(jnp.ceil, "``ceil``; identity on integers.", True))
register(aten.trunc.default)(_same_dtype_unary(jnp.trunc, "``trunc``; identity on integers.", True))


@register(aten.sign.default, aten.sgn.default)
def sign(x):
    """-1, 0 or 1 (``(0 < x) - (x < 0)``, so NaN gives 0 as in torch); bool is identity."""
    if x.dtype == np.bool_:
        return x
    if jnp.iscomplexobj(x):
        return jnp.where(x == 0, 0, x / jnp.abs(x))
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


@register(aten.round.default)
def round_(x):
    """Round half to even (``std::nearbyint``); identity on integers."""
    return x if not is_float(x.dtype) else jnp.round(cast(x, acc_dtype(x.dtype)))


@register(aten.round.decimals)
def round_decimals(x, decimals=0):
    """``round(x * 10**d) / 10**d`` for ``d >= 0``, ``round(x / 10**-d) * 10**-d`` below
    (ATen's ``round.decimals`` kernel), each division one IEEE division (:func:`exact_div`:
    float32 results are torch's to the bit; float64 ones may differ in the last bit where
    XLA multiplies by the reciprocal)."""
    x = cast(x, acc_dtype(x.dtype))
    if decimals >= 0:
        f = 10.0**decimals
        return exact_div(jnp.round(x * f), f)
    f = 10.0 ** (-decimals)
    return jnp.round(exact_div(x, f)) * f


@register(aten.isnan.default)
def isnan(x):
    """NaN test (False for integers)."""
    return jnp.isnan(x)


@register(aten.isinf.default)
def isinf(x):
    """Infinity test (False for integers)."""
    return jnp.isinf(x)


@register(aten.isfinite.default)
def isfinite(x):
    """Finite test (True for integers)."""
    return jnp.isfinite(x)


@register(aten.nan_to_num.default)
def nan_to_num(x, nan=None, posinf=None, neginf=None):
    """NaN → ``nan`` (0), +inf → ``posinf`` (dtype max), -inf → ``neginf`` (dtype lowest)."""
    if not is_float(x.dtype):
        return x
    info = jnp.finfo(x.dtype)
    x = jnp.where(jnp.isnan(x), 0.0 if nan is None else nan, x)
    x = jnp.where(x == jnp.inf, info.max if posinf is None else posinf, x)
    return jnp.where(x == -jnp.inf, info.min if neginf is None else neginf, x)


# ---------------------------------------------------------------- activations


@register(aten.relu.default)
def relu(x):
    """``max(x, 0)`` as ATen's ``clamp_min(x, 0)``: NaN propagates, a zero keeps its sign
    (``relu(-0.0)`` is ``-0.0``), and the gradient at either zero is 0 (``threshold_backward``):
    a zero passes as ``x * 0``, whose derivative is 0."""
    zero = jnp.zeros((), x.dtype)
    return jnp.where(x < 0, zero, jnp.where(x == 0, x * zero, x))


@register(aten.gelu.default)
def gelu(x, approximate="none"):
    """``0.5 x (1 + erf(x / sqrt 2))``, or with ``approximate="tanh"``
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (``GeluKernel.cpp``)."""
    x = cast(x, acc_dtype(x.dtype))
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1 + jnp.tanh(inner))
    return 0.5 * x * (1 + jax.scipy.special.erf(x * (1 / math.sqrt(2))))


@register(aten.silu.default)
def silu(x):
    """``x / (1 + exp(-x))``."""
    x = cast(x, acc_dtype(x.dtype))
    return x / (1 + jnp.exp(-x))


@register(aten.hardtanh.default)
def hardtanh(x, min_val=-1.0, max_val=1.0):
    """``clamp(x, min_val, max_val)``."""
    return clamp(x, min_val, max_val)


@register(aten.leaky_relu.default)
def leaky_relu(x, negative_slope=0.01):
    """``x`` where ``x > 0`` else ``negative_slope * x``."""
    x = cast(x, acc_dtype(x.dtype))
    return jnp.where(x > 0, x, x * negative_slope)


@register(aten.elu.default)
def elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    """``scale * x`` where ``x > 0`` else ``alpha * scale * expm1(input_scale * x)``."""
    x = cast(x, acc_dtype(x.dtype))
    return jnp.where(x > 0, x * scale, jnp.expm1(x * input_scale) * (alpha * scale))


@register(aten.i0.default)
def i0(x):
    """Modified Bessel function of the first kind, order 0."""
    return jax.scipy.special.i0(cast(x, acc_dtype(float_type(x))))


@register(aten.ldexp.Tensor)
def ldexp(x, other):
    """``x * 2**other`` in the common float dtype."""
    (x, other), _ = _common(x, other, floating=True)
    return x * jnp.exp2(other)


@register(aten.frexp.Tensor)
def frexp(x):
    """``(mantissa, exponent)`` with ``x = mantissa * 2**exponent``, ``0.5 <= |mantissa| < 1``;
    the exponent is int32."""
    m, e = jnp.frexp(x)
    return m, e.astype(np.int32)


@register(aten.complex.default)
def complex_(real, imag):
    """``real + 1j * imag``, the two broadcast against each other (any ranks)."""
    (real, imag), _ = _common(real, imag)
    return lax.complex(*jnp.broadcast_arrays(real, imag))


@register(aten.view_as_complex.default)
def view_as_complex(x):
    """``(..., 2)`` real pairs as ``(...)`` complex."""
    return lax.complex(x[..., 0], x[..., 1])


@register(aten.view_as_real.default)
def view_as_real(x):
    """``(...)`` complex as ``(..., 2)`` real pairs."""
    return jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1)


@register(aten.hypot.default)
def hypot(x, y):
    """``sqrt(x^2 + y^2)`` without intermediate overflow."""
    (x, y), _ = _common(x, y, floating=True)
    return jnp.hypot(x, y)


@register(aten.nextafter.default)
def nextafter(x, y):
    """The next representable float after ``x`` towards ``y``."""
    (x, y), _ = _common(x, y)
    return jnp.nextafter(x, y)


@register(aten.igamma.default)
def igamma(a, x):
    """Regularized lower incomplete gamma function ``P(a, x)``."""
    (a, x), _ = _common(a, x, floating=True)
    return jax.scipy.special.gammainc(a, x)


@register(aten.igammac.default)
def igammac(a, x):
    """Regularized upper incomplete gamma function ``Q(a, x)``."""
    (a, x), _ = _common(a, x, floating=True)
    return jax.scipy.special.gammaincc(a, x)


@register(aten.signbit.default)
def signbit(x):
    """Whether the sign bit is set (True for -0.0 and negative NaN)."""
    return jnp.signbit(x) if is_float(x.dtype) else x < 0


@register(aten.angle.default)
def angle(x):
    """The argument of complex ``x``; for real ``x``: ``pi`` where negative, 0 elsewhere,
    NaN kept."""
    if jnp.iscomplexobj(x):
        return jnp.angle(x)
    x = cast(x, acc_dtype(float_type(x)))
    return jnp.where(jnp.isnan(x), x, jnp.where(x < 0, jnp.pi, 0.0).astype(x.dtype))


@register(aten.polar.default)
def polar(r, theta):
    """``r * (cos(theta) + 1j * sin(theta))``."""
    return lax.complex(r * jnp.cos(theta), r * jnp.sin(theta))


def _cot_derivative(n):
    """``d^n/dx^n cot(pi x)``, elementwise."""
    f = lambda t: jnp.cos(jnp.pi * t) / jnp.sin(jnp.pi * t)  # noqa: E731
    for _ in range(n):
        f = jax.grad(f)
    return jnp.vectorize(f)


@register(aten.polygamma.default)
def polygamma(n, x):
    """The ``n``-th derivative of the digamma function. Negative arguments use the
    reflection ``psi_n(x) = (-1)^(n+1) [(-1)^n pi D^n cot(pi x) - psi_n(1 - x)]`` (JAX's
    Hurwitz-zeta form is inaccurate there); ``n = 0`` is ``digamma``; at ±0 the pole's
    sign is ``(-1)^(n+1)`` (JAX gives NaN for even ``n``)."""
    x = cast(x, acc_dtype(float_type(x)))
    if n == 0:
        return _digamma(x)
    special = jax.scipy.special.polygamma
    if n >= 2:  # the reflection cancels; float64 matches torch's zeta-based float32 values
        x = x.astype(np.float64)
    neg = x < 0
    safe = jnp.where(neg, 0.5, x)  # keeps the unused branch finite for gradients
    pos_val = special(n, jnp.where(neg, 1.0, x))
    sign = (-1.0) ** (n + 1)
    reflected = sign * (
        (-1.0) ** n * jnp.pi * _cot_derivative(n)(jnp.where(neg, x, safe)) - special(n, 1 - x)
    )
    # the pole at ±0: (-1)^(n+1) n! zeta(n+1, 0) = (-1)^(n+1) inf, as ATen's zeta form gives
    pole = jnp.asarray(sign * np.inf, x.dtype)
    return jnp.where(x == 0, pole, jnp.where(neg, reflected, pos_val))


@register(aten._conj.default, aten._conj_physical.default, aten.conj_physical.default)
def conj(x):
    """Complex conjugate (identity for real tensors)."""
    return jnp.conj(x) if jnp.iscomplexobj(x) else x
