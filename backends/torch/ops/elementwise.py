"""Elementwise StableHLO/CHLO ops as native torch ops (StableHLO spec sections: add, divide,
remainder, maximum, compare, convert, shift_left, round_nearest_afz, ...).

Where torch and StableHLO disagree the rules follow StableHLO exactly:

- integer ``divide`` truncates; ``x / 0`` is ``-1`` (all bits set for unsigned) and
  ``INT_MIN / -1`` is ``INT_MIN``; integer ``remainder`` has the dividend's sign (``fmod``),
  ``x % 0`` is ``x``;
- ``maximum``/``minimum`` propagate NaN (``torch.maximum``, not ``torch.max``);
- shifts by a negative amount or at least the bit width give 0 (arithmetic right shift: the
  sign fill); ``shift_right_logical`` shifts in zeros for signed types too;
- ``round_nearest_afz`` rounds halves away from zero; ``round_nearest_even`` to even;
- ``convert`` float → integer truncates, saturates at the integer range and maps NaN to 0; to
  ``float8_e4m3fn`` what rounds past its largest value becomes NaN (torch would saturate);
- ``compare`` with ``TOTALORDER`` orders floats by IEEE totalOrder (-NaN < -inf < ... < -0 < 0).
"""

from __future__ import annotations

import ml_dtypes
import torch

from converter import dtypes
from converter.markers import STOP_GRADIENT_KEY

from .._util import (
    BITS,
    NARROW_INTS,
    from_bits,
    is_float,
    is_unsigned,
    operand_name,
    result_name,
    storage_dtype,
    to_bits,
    unsigned_wide,
    wrap_unsigned,
)
from ..registry import register


def _cbrt(x):
    """``cbrt`` computed in float64 and rounded once to ``x``'s type (float16/bfloat16: the
    correctly rounded result, which XLA's CPU float32 evaluation gives; a float16 or
    bfloat16 ``pow`` exponent would round 1/3 itself). The sign is copied, so -0.0 stays."""
    wide = x if x.dtype == torch.float64 else x.to(torch.float64)
    return torch.copysign(wide.abs().pow(1.0 / 3.0), wide).to(x.dtype)


def _rsqrt(x):
    """``rsqrt`` of float16/bfloat16 computed in float32 and rounded once, as XLA's CPU
    backend does (torch's scalar kernel for short tensors rounds the square root first)."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return torch.rsqrt(x.to(torch.float32)).to(x.dtype)
    return torch.rsqrt(x)


def _logistic(x):
    return torch.sigmoid(x)


_UNARY = {
    "stablehlo.abs": torch.abs,
    "stablehlo.exponential": torch.exp,
    "stablehlo.exponential_minus_one": torch.expm1,
    "stablehlo.log": torch.log,
    "stablehlo.log_plus_one": torch.log1p,
    "stablehlo.logistic": _logistic,
    "stablehlo.sqrt": torch.sqrt,
    "stablehlo.rsqrt": _rsqrt,
    "stablehlo.cbrt": _cbrt,
    "stablehlo.tanh": torch.tanh,
    "stablehlo.sine": torch.sin,
    "stablehlo.cosine": torch.cos,
    "stablehlo.tan": torch.tan,
    "stablehlo.floor": torch.floor,
    "stablehlo.ceil": torch.ceil,
    "stablehlo.round_nearest_even": torch.round,
    "stablehlo.is_finite": torch.isfinite,
    "stablehlo.real": torch.real,
    "chlo.erf": torch.erf,
    "chlo.erfc": torch.erfc,
    "chlo.erf_inv": torch.erfinv,
    "chlo.lgamma": torch.lgamma,
    "chlo.digamma": torch.digamma,
    "chlo.asin": torch.asin,
    "chlo.acos": torch.acos,
    "chlo.atan": torch.atan,
    "chlo.sinh": torch.sinh,
    "chlo.cosh": torch.cosh,
    "chlo.tan": torch.tan,
    "chlo.asinh": torch.asinh,
    "chlo.acosh": torch.acosh,
    "chlo.atanh": torch.atanh,
    "chlo.bessel_i1e": torch.special.i1e,
    "chlo.is_inf": torch.isinf,
    "chlo.is_neg_inf": torch.isneginf,
    "chlo.is_pos_inf": torch.isposinf,
    "chlo.conj": torch.conj_physical,
    "chlo.square": torch.square,
}


def _unary_rule(fn):
    def rule(interp, op, x):
        return fn(x)

    rule.__qualname__ = f"unary[{getattr(fn, '__name__', fn)}]"
    return rule


for _name, _fn in _UNARY.items():
    register(_name)(_unary_rule(_fn))


@register("stablehlo.imag")
def _imag(interp, op, x):
    return torch.imag(x) if x.is_complex() else torch.zeros_like(x)


@register("stablehlo.negate")
def _negate(interp, op, x):
    # i1 is not an operand type of negate (spec: integer, float or complex; i1 is boolean)
    if x.dtype == torch.uint8:
        return (-(x.to(torch.int16))).to(torch.uint8)
    return -x


@register("stablehlo.sign")
def _sign(interp, op, x):
    # spec: signed integer, float or complex operands only (no unsigned, no i1)
    if x.is_complex():
        return torch.sgn(x)
    if x.is_floating_point():
        return torch.where(torch.isnan(x), x, torch.sign(x))
    return torch.sign(x)


@register("stablehlo.not")
def _not(interp, op, x):
    if x.dtype == torch.bool:
        return torch.logical_not(x)
    return torch.bitwise_not(x)


@register("stablehlo.round_nearest_afz")
def _round_afz(interp, op, x):
    t = torch.trunc(x)
    frac = torch.abs(x - t)
    return torch.where(frac >= 0.5, t + torch.sign(x), t)


@register("stablehlo.popcnt")
def _popcnt(interp, op, x):
    name = result_name(op)
    u = unsigned_wide(x, name)
    total = torch.zeros_like(u)
    for k in range(BITS[name]):
        total = total + ((u >> k) & 1)
    return total.to(x.dtype)


@register("stablehlo.count_leading_zeros")
def _clz(interp, op, x):
    name = result_name(op)
    bits = BITS[name]
    u = unsigned_wide(x, name)
    length = torch.zeros_like(u)
    for k in range(min(bits, 63)):
        length = length + (u >= (1 << k)).to(u.dtype)
    if bits == 64:
        length = torch.where(u < 0, torch.full_like(u, 64), length)
    return (bits - length).to(x.dtype)


# --------------------------------------------------------------------------- binary


def _binary_rule(fn):
    def rule(interp, op, x, y):
        return fn(x, y)

    rule.__qualname__ = f"binary[{getattr(fn, '__name__', fn)}]"
    return rule


_BINARY = {
    "stablehlo.add": torch.add,
    "stablehlo.atan2": torch.atan2,
    "stablehlo.complex": torch.complex,
    "chlo.next_after": torch.nextafter,
    "chlo.zeta": torch.special.zeta,
}
for _name, _fn in _BINARY.items():
    register(_name)(_binary_rule(_fn))


@register("stablehlo.subtract")
def _subtract(interp, op, x, y):
    # i1 is not an operand type of subtract (spec: integer, float or complex)
    if x.dtype == torch.uint8:
        return (x.to(torch.int16) - y.to(torch.int16)).to(torch.uint8)
    return x - y


@register("stablehlo.multiply")
def _multiply(interp, op, x, y):
    if x.dtype == torch.bool:
        return x & y
    return x * y


@register("stablehlo.and")
def _and(interp, op, x, y):
    return x & y


@register("stablehlo.or")
def _or(interp, op, x, y):
    return x | y


@register("stablehlo.xor")
def _xor(interp, op, x, y):
    return x ^ y


def _ordered(x):
    """A signed tensor ordered like the unsigned 64-bit values stored in ``x`` (``uint64``
    held as int64: the sign bit flipped)."""
    return x ^ torch.iinfo(torch.int64).min


@register("stablehlo.maximum")
def _maximum(interp, op, x, y):
    name = result_name(op)
    if x.dtype == torch.bool:
        return x | y
    if x.is_complex():
        return torch.where(_complex_lt(x, y), y, x)
    if name == "uint64":
        return torch.where(_ordered(x) >= _ordered(y), x, y)
    return torch.maximum(x, y)


@register("stablehlo.minimum")
def _minimum(interp, op, x, y):
    name = result_name(op)
    if x.dtype == torch.bool:
        return x & y
    if x.is_complex():
        return torch.where(_complex_lt(y, x), y, x)
    if name == "uint64":
        return torch.where(_ordered(x) <= _ordered(y), x, y)
    return torch.minimum(x, y)


def _complex_lt(x, y):
    """Lexicographic (real, imag) order, as XLA orders complex max/min."""
    return (x.real < y.real) | ((x.real == y.real) & (x.imag < y.imag))


@register("stablehlo.divide")
def _divide(interp, op, x, y):
    name = result_name(op)
    if not dtypes.is_integer(name):
        return x / y if x.dtype != torch.bool else x
    if name == "uint64":
        q, _ = _udivmod64(x, y)
        return q
    zero = y == 0
    if is_unsigned(name):
        safe = torch.where(zero, torch.ones_like(y), y)
        q = torch.div(x, safe, rounding_mode="trunc")
        all_ones = torch.full_like(x, (1 << BITS[name]) - 1)
        return torch.where(zero, all_ones, q)
    imin = torch.iinfo(x.dtype).min
    overflow = (x == imin) & (y == -1)
    safe = torch.where(zero | overflow, torch.ones_like(y), y)
    q = torch.div(x, safe, rounding_mode="trunc")
    return torch.where(zero, torch.full_like(x, -1), q)


@register("stablehlo.remainder")
def _remainder(interp, op, x, y):
    name = result_name(op)
    if not dtypes.is_integer(name):
        return torch.fmod(x, y)
    if name == "uint64":
        _, r = _udivmod64(x, y)
        return r
    zero = y == 0
    bad = zero
    if not is_unsigned(name):
        bad = zero | (y == -1)
    safe = torch.where(bad, torch.ones_like(y), y)
    r = torch.fmod(x, safe)
    if not is_unsigned(name):
        r = torch.where(y == -1, torch.zeros_like(x), r)
    return torch.where(zero, x, r)


def _udivmod64(x, y):
    """Unsigned 64-bit quotient and remainder of bit patterns held in int64 (XLA: ``x / 0`` is
    all ones, ``x % 0`` is ``x``). Halving the dividend makes the signed division exact; one
    correction step fixes the quotient. A divisor >= 2**63 divides at most once."""
    sign = torch.iinfo(torch.int64).min
    ult = lambda a, b: (a ^ sign) < (b ^ sign)  # noqa: E731
    big = y < 0
    zero = y == 0
    safe = torch.where(zero | big, torch.ones_like(y), y)
    half = (x >> 1) & torch.iinfo(torch.int64).max  # logical shift: x / 2 as non-negative
    q = torch.div(half, safe, rounding_mode="trunc") << 1
    r = x - q * safe
    fix = ~ult(r, safe)
    q = torch.where(fix, q + 1, q)
    r = torch.where(fix, r - safe, r)
    ge = ~ult(x, y)
    q = torch.where(big, ge.to(x.dtype), q)
    r = torch.where(big, torch.where(ge, x - y, x), r)
    q = torch.where(zero, torch.full_like(x, -1), q)
    r = torch.where(zero, x, r)
    return q, r


@register("stablehlo.power")
def _power(interp, op, x, y):
    name = result_name(op)
    if not dtypes.is_integer(name):
        return torch.pow(x, y)
    if name == "uint64":  # exponents from 2**63 up are stored negative: walk the 64 bits
        result, base = torch.ones_like(x), x.clone()
        for k in range(64):
            bit = (y >> k) & 1
            result = torch.where(bit == 1, result * base, result)
            base = base * base
        return result
    neg = y < 0
    p = torch.pow(x, torch.where(neg, torch.zeros_like(y), y))
    if is_unsigned(name):
        return p
    # x ** negative: 1 for x == 1, +-1 for x == -1, 0 otherwise (XLA integer pow)
    odd = (y & 1) == 1
    neg_val = torch.where(
        x == 1,
        torch.ones_like(x),
        torch.where(x == -1, torch.where(odd, -torch.ones_like(x), torch.ones_like(x)), torch.zeros_like(x)),
    )
    return torch.where(neg, neg_val, p)


def _shift_amount_ok(y, name):
    bits = BITS[name]
    if name == "uint64":
        return (y >= 0) & (y < bits)
    return (y >= 0) & (y < bits)


@register("stablehlo.shift_left")
def _shift_left(interp, op, x, y):
    name = result_name(op)
    bits = BITS[name]
    ok = _shift_amount_ok(y, name)
    s = torch.where(ok, y, torch.zeros_like(y))
    if bits < 32 and not is_unsigned(name):
        out = (x.to(torch.int64) << s.to(torch.int64)).to(x.dtype)
    else:
        out = wrap_unsigned(x << s, name)
    return torch.where(ok, out, torch.zeros_like(out))


@register("stablehlo.shift_right_arithmetic")
def _shift_right_arithmetic(interp, op, x, y):
    name = result_name(op)
    bits = BITS[name]
    if is_unsigned(name):
        # an unsigned value's sign bit is its top bit
        signed = to_bits(x, name) if name != "uint8" else x.view(torch.int8)
        s = torch.where((y >= 0) & (y < bits), y, torch.full_like(y, bits - 1)).to(signed.dtype)
        out = signed >> s
        return from_bits(out, name) if name != "uint8" else out.view(torch.uint8)
    s = torch.where((y >= 0) & (y < bits), y, torch.full_like(y, bits - 1))
    return x >> s


@register("stablehlo.shift_right_logical")
def _shift_right_logical(interp, op, x, y):
    name = result_name(op)
    bits = BITS[name]
    ok = (y >= 0) & (y < bits)
    s = torch.where(ok, y, torch.zeros_like(y)).to(torch.int64)
    if bits == 64:
        mask = torch.where(s == 0, torch.full_like(s, -1), (torch.ones_like(s) << (64 - s)) - 1)
        out = (x >> s) & mask
    elif name in ("uint8", "uint16", "uint32"):
        out = x >> s.to(x.dtype)
    else:
        out = (unsigned_wide(x, name) >> s).to(x.dtype)
    return torch.where(ok, out, torch.zeros_like(out))


@register("stablehlo.clamp")
def _clamp(interp, op, lo, x, hi):
    return _minimum(interp, op, _maximum(interp, op, x, lo), hi)


@register("stablehlo.select")
def _select(interp, op, pred, on_true, on_false):
    return torch.where(pred, on_true, on_false)


# --------------------------------------------------------------------------- compare

_COMPARE = {"EQ": torch.eq, "NE": torch.ne, "LT": torch.lt, "LE": torch.le, "GT": torch.gt, "GE": torch.ge}
_BITS_DTYPE = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
}


def total_order_key(x: torch.Tensor) -> torch.Tensor:
    """Signed integers ordered like IEEE totalOrder of the floats ``x`` (spec: compare)."""
    bits = _BITS_DTYPE[x.dtype]
    i = x.view(bits)
    return torch.where(i < 0, i ^ torch.iinfo(bits).max, i)


@register("stablehlo.compare")
def _compare(interp, op, x, y):
    # chlo.broadcast_compare's attributes decode as text: "#chlo<comparison_direction GT>"
    direction = str(op.attr("comparison_direction")).rstrip(">").split()[-1]
    name = operand_name(op, 0)
    if "TOTALORDER" in str(op.attr("compare_type")) and is_float(name):
        x, y = total_order_key(x), total_order_key(y)
    elif name == "uint64":
        x, y = _ordered(x), _ordered(y)
    elif x.is_complex() and direction not in ("EQ", "NE"):
        lt = _complex_lt(x, y)
        gt = _complex_lt(y, x)
        return {"LT": lt, "GT": gt, "LE": ~gt, "GE": ~lt}[direction]
    return _COMPARE[direction](x, y)


# --------------------------------------------------------------------------- conversions


@register("stablehlo.convert")
def _convert(interp, op, x):
    src, dst = operand_name(op), result_name(op)
    return convert(x, src, dst)


def convert(x: torch.Tensor, src: str, dst: str) -> torch.Tensor:
    """StableHLO ``convert`` from canonical dtype ``src`` to ``dst`` on storage tensors."""
    target = storage_dtype(dst)
    if src == dst:
        return x
    if dst == "bool":
        return x != 0
    if dtypes.is_complex(src) and not dtypes.is_complex(dst):
        x = torch.real(x)
        src = "float64" if src == "complex128" else "float32"
    if src == "uint64" and not dtypes.is_integer(dst):
        as_float = x.to(torch.float64)
        return torch.where(x < 0, as_float + 2.0**64, as_float).to(target)
    if (is_float(src) or dtypes.is_complex(src)) and dtypes.is_integer(dst):
        return _float_to_int(x, dst)
    if dtypes.is_integer(dst) and src != "bool":
        return _int_to_int(x, src, dst)
    if dst == "float8_e4m3fn" and is_float(src) and src != dst:
        # float8_e4m3fn has no infinity: XLA gives NaN for what rounds past 448 (|x| > 464,
        # infinities), torch's conversion saturates to 448
        x = torch.where(x.abs() > 464, torch.full_like(x, float("nan")), x)
    return x.to(target)


def _float_to_int(x, dst):
    """Truncate toward zero, saturate at the range of ``dst``, NaN → 0 (XLA's convert).

    Sub-byte integers (int2/int4...) saturate at their own range (ml_dtypes' limits: torch
    declares those dtypes but cannot compute with them) and are carried in int8/uint8.
    """
    if dst in NARROW_INTS:  # carried in int8/uint8; torch.iinfo has no sub-byte integers
        info = ml_dtypes.iinfo(dtypes.to_numpy(dst))
    else:
        info = torch.iinfo(dtypes.torch_dtype(dst))
    lo, hi = int(info.min), int(info.max)
    wide = x.to(torch.float64)
    t = torch.trunc(wide)
    target = storage_dtype(dst)
    if dst == "uint64":
        big = t >= 2.0**63
        small = torch.where(big, t - 2.0**64, t)
        out = torch.where(big, small.clamp(-(2.0**63), 2.0**63 - 1024), t.clamp(0, 2.0**63 - 1024)).to(target)
        out = torch.where(t >= 2.0**64, torch.full_like(out, -1), out)
    elif dst == "int64":
        out = t.clamp(-(2.0**63), 2.0**63 - 1024).to(target)
        out = torch.where(t >= 2.0**63, torch.full_like(out, hi), out)
    else:
        out = t.clamp(lo, hi).to(target)
    return torch.where(torch.isnan(wide), torch.zeros_like(out), out)


def _int_to_int(x, src, dst):
    """Integer conversions wrap modulo 2**bits (two's complement), like C casts."""
    bits_dst = BITS[dst]
    wide = unsigned_wide(x, src) if is_unsigned(src) else x.to(torch.int64)
    if is_unsigned(dst):
        if bits_dst == 64:
            return wide
        return wide & ((1 << bits_dst) - 1) if dst != "uint8" else (wide & 0xFF).to(torch.uint8)
    return wide.to(storage_dtype(dst))


@register("stablehlo.bitcast_convert")
def _bitcast_convert(interp, op, x):
    src, dst = operand_name(op), result_name(op)
    raw = to_bits(x, src)
    out_shape = tuple(op.result_type.shape)
    target = _bits_dtype(dst)
    if dst == "bool" and src == "bool":
        return x  # spec: i1 -> i1 is the identity
    if dst == "bool" or src == "bool":
        raise NotImplementedError("bitcast_convert between i1 and another type")
    if BITS[src] == BITS[dst]:
        out = raw.view(target)
    else:
        out = raw.contiguous().view(target).reshape(out_shape)
    return from_bits(out, dst)


def _bits_dtype(name: str) -> torch.dtype:
    return {"uint16": torch.int16, "uint32": torch.int32, "uint64": torch.int64}.get(name) or storage_dtype(
        name
    )


@register("stablehlo.reduce_precision")
def _reduce_precision(interp, op, x):
    """Round ``x`` to a float format with ``exponent_bits``/``mantissa_bits`` (round to
    nearest even, overflow to inf, NaN kept), following XLA's ReducePrecision expansion.

    The bits are split into sign and magnitude first, so the arithmetic stays in int64 for
    every width (float64's magnitude and the rounding carry fit below 2**63)."""
    ebits, mbits = op.attr("exponent_bits"), op.attr("mantissa_bits")
    nbits = torch.finfo(x.dtype).bits
    src_m = {16: 10, 32: 23, 64: 52}[nbits] if x.dtype != torch.bfloat16 else 7
    src_e = nbits - 1 - src_m
    bits = x.view(_BITS_DTYPE[x.dtype]).to(torch.int64)
    negative = bits < 0
    mag = bits & ((1 << (nbits - 1)) - 1)
    if mbits < src_m:
        shift = src_m - mbits
        last = (mag >> shift) & 1
        bias = (1 << (shift - 1)) - 1 + last
        mag = (mag + bias) & ~((1 << shift) - 1)
    if ebits < src_e:
        src_bias = (1 << (src_e - 1)) - 1
        dst_bias = (1 << (ebits - 1)) - 1
        exp = mag >> src_m
        inf_bits = ((1 << src_e) - 1) << src_m
        mag = torch.where(exp > src_bias + dst_bias, torch.full_like(mag, inf_bits), mag)
        mag = torch.where(exp <= src_bias - dst_bias, torch.zeros_like(mag), mag)
    # the sign bit as a signed value of the type's width: -2**(nbits - 1)
    out = torch.where(negative, mag + (-(1 << (nbits - 1))), mag).to(_BITS_DTYPE[x.dtype]).view(x.dtype)
    return torch.where(torch.isnan(x), x, out)


@register("chlo.polygamma")
def _polygamma(interp, op, n, x):
    value = interp.static_operand(op, 0)
    if value is None:
        raise NotImplementedError("chlo.polygamma with a non-constant order")
    orders = {int(v) for v in value.reshape(-1)}
    if len(orders) != 1:
        raise NotImplementedError("chlo.polygamma with mixed orders")
    return torch.special.polygamma(orders.pop(), x)


@register(STOP_GRADIENT_KEY)
def _stop_gradient(interp, op, x, *shape):
    """``lax.stop_gradient`` of a JAX source (``from_jax`` marks it): ``detach``."""
    return x.detach()
