"""Elementwise ops through the torch backend, with the semantics that differ between
StableHLO and torch checked exactly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax import lax

import converter

from .helpers import assert_same, numpy_of, run_both, torch_of

I32 = np.array([7, -7, 7, -7, 0, 5, np.iinfo(np.int32).min, np.iinfo(np.int32).min], dtype=np.int32)
D32 = np.array([2, 2, -2, -2, 3, 0, -1, 1], dtype=np.int32)


def test_integer_divide_and_remainder_truncate():
    assert_same(lambda a, b: (lax.div(a, b), lax.rem(a, b)), I32, D32)


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint8, np.uint32])
def test_integer_divide_dtypes(dtype):
    a = np.array([7, 100, 9, 0, 5], dtype=dtype)
    b = np.array([2, 7, 3, 4, 0], dtype=dtype)
    assert_same(lambda a, b: (lax.div(a, b), lax.rem(a, b)), a, b)


def test_uint8_remainder_by_255_is_not_the_signed_minus_one_case():
    """A uint8 divisor of 255 compares equal to -1 in torch; only signed ``x % -1`` is 0."""
    a = np.array([7, 255, 254, 0], dtype=np.uint8)
    b = np.full(4, 255, dtype=np.uint8)
    assert_same(lambda a, b: lax.rem(a, b), a, b)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
def test_unsigned_shift_right_arithmetic_past_bit_width_fills_with_top_bit(dtype):
    """An unsigned value with its top bit set, shifted arithmetically by ``>= bits``, is all
    ones (the sign fill of its bit pattern), as XLA gives."""
    bits = np.iinfo(dtype).bits
    top = 1 << (bits - 1)
    x = np.array([top, top + 5, top, 5], dtype=dtype)
    s = np.array([bits, bits + 3, bits - 1, bits], dtype=dtype)
    assert_same(lambda x, s: lax.shift_right_arithmetic(x, s), x, s)


def test_round_nearest_afz_and_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -1.4, 3.7, np.nan], dtype=np.float32)
    assert_same(lambda x: (lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), jnp.round(x)), x)


def test_max_min_propagate_nan():
    x = np.array([1.0, np.nan, 3.0, -0.0], dtype=np.float32)
    y = np.array([np.nan, 2.0, 1.0, 0.0], dtype=np.float32)
    assert_same(lambda a, b: (lax.max(a, b), lax.min(a, b), jnp.clip(a, 0.5, 2.0)), x, y)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32])
def test_shifts_past_bit_width(dtype):
    bits = np.iinfo(dtype).bits
    x = np.array([1, 5, -8 if np.iinfo(dtype).min < 0 else 200, 3, 7, 1], dtype=dtype)
    s = np.array([0, 1, 2, bits - 1, bits, bits + 3], dtype=dtype)
    assert_same(
        lambda x, s: (lax.shift_left(x, s), lax.shift_right_arithmetic(x, s), lax.shift_right_logical(x, s)),
        x,
        s,
    )


def test_compare_totalorder_and_float_ops():
    x = np.array([-0.0, 0.0, np.nan, -np.inf, 1.0, -1.0], dtype=np.float32)
    y = np.array([0.0, -0.0, 1.0, -np.inf, np.nan, -1.0], dtype=np.float32)
    assert_same(lambda a, b: (a < b, a == b, a >= b, jnp.sort(a), lax.atan2(a, b)), x, y)


def test_convert_saturates_and_maps_nan_to_zero():
    x = np.array([1.9, -1.9, 3e9, -3e9, np.nan, np.inf, -np.inf, 255.5, 300.0], dtype=np.float32)
    assert_same(
        lambda x: (x.astype(jnp.int32), x.astype(jnp.uint8), x.astype(jnp.int8), x.astype(jnp.bool_)), x
    )


def test_convert_to_float8_e4m3fn_overflows_to_nan():
    """float8_e4m3fn has no infinity: XLA gives NaN past 464 (the tie rounds to 448), torch's
    own conversion would saturate to 448."""
    x = np.array([0.1, 448.0, 464.0, 465.0, -500.0, np.inf, np.nan, 1e6], dtype=np.float32)
    f8 = jnp.float8_e4m3fn
    assert_same(
        lambda x: (x.astype(f8).astype(jnp.float32), x.astype(jnp.bfloat16).astype(f8).astype(jnp.float32)), x
    )


def test_integer_conversions_wrap():
    x = np.array([-1, 300, 70000, -129, 2**31 - 1], dtype=np.int64)
    assert_same(
        lambda x: (x.astype(jnp.int8), x.astype(jnp.uint8), x.astype(jnp.uint16), x.astype(jnp.uint32)), x
    )


def test_unsigned_emulation_wraps():
    x = np.array([0, 1, 2**32 - 1, 2**31], dtype=np.uint32)
    y = np.array([1, 2**32 - 1, 5, 2**31], dtype=np.uint32)
    assert_same(lambda a, b: (a + b, a - b, a * b, a > b, jnp.maximum(a, b), a.astype(jnp.float32)), x, y)


def test_uint64_compare_and_convert():
    x = np.array([0, 2**63, 2**64 - 1, 5], dtype=np.uint64)
    y = np.array([1, 5, 2**63, 5], dtype=np.uint64)
    assert_same(lambda a, b: (a < b, a + b, a.astype(jnp.float64), jnp.maximum(a, b)), x, y)


def test_bitcast_convert():
    x = np.array([1.0, -2.5, np.inf], dtype=np.float32)
    assert_same(
        lambda x: (lax.bitcast_convert_type(x, jnp.uint32), lax.bitcast_convert_type(x, jnp.int32)), x
    )
    assert_same(lambda x: lax.bitcast_convert_type(x, jnp.uint8), x)
    # bfloat16 to and from its bits
    b = x.astype(jnp.bfloat16)
    i = np.array([16256, -16352, 32640], dtype=np.int16)  # 1.0, -2.5 and inf
    assert_same(
        lambda b, i: (lax.bitcast_convert_type(b, jnp.int16), lax.bitcast_convert_type(i, jnp.bfloat16)), b, i
    )


def test_popcount_clz():
    x = np.array([2, -2, 1, -1, 3, 0, 2**30], dtype=np.int32)
    assert_same(lambda a: (lax.population_count(a), lax.clz(a)), x)
    assert_same(lambda a: (lax.population_count(a), lax.clz(a)), x.astype(np.uint8))


_POW = """
func.func @main(%a: tensor<6xi32>, %b: tensor<6xi32>) -> tensor<6xi32> {
  %0 = stablehlo.power %a, %b : tensor<6xi32>
  return %0 : tensor<6xi32>
}
"""


def test_integer_power_negative_exponent():
    x = np.array([2, -2, 1, -1, 3, 0], dtype=np.int32)
    y = np.array([3, 3, -2, -3, -1, 2], dtype=np.int32)
    out = converter.from_stablehlo(_POW).to_torch()(torch.tensor(x), torch.tensor(y))
    np.testing.assert_array_equal(out.numpy(), [8, -8, 1, -1, 0, 0])


#: (rtol, atol) per dtype: each at its own precision (a few ulps of torch's and XLA's
#: differently rounded exp/sin), never one tolerance shared across dtypes.
_FLOAT_TOL = {
    np.float16: (2e-3, 1e-3),
    jnp.bfloat16: (1.6e-2, 1e-2),
    np.float64: (1e-12, 1e-12),
    np.complex64: (2e-6, 2e-6),
}


@pytest.mark.parametrize("dtype", list(_FLOAT_TOL))
def test_float_dtypes(dtype):
    x = (np.linspace(-2, 2, 7)).astype(dtype)
    rtol, atol = _FLOAT_TOL[dtype]
    assert_same(lambda x: (jnp.exp(x) * x + 1, jnp.abs(x), jnp.sin(x)), x, rtol=rtol, atol=atol)


def test_reduce_precision():
    x = np.array([1.0, 1.0009765625, 3.14159, 1e10, -65520.0, np.nan], dtype=np.float32)
    assert_same(lambda x: lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10), x)


def test_uint64_divide_and_remainder():
    x = np.array([2**64 - 1, 2**63 + 5, 100, 7, 2**64 - 2, 5, 0], dtype=np.uint64)
    y = np.array([3, 2**63, 7, 0, 2**64 - 1, 2**63 + 1, 9], dtype=np.uint64)
    assert_same(lambda a, b: (lax.div(a, b), lax.rem(a, b)), x, y)


def _normal_floats(dtype, step=3):
    """Every ``step``-th normal, finite, positive value of 16-bit float ``dtype``, both signs
    (XLA's CPU backend flushes subnormal inputs; they are left out), plus the zeros and
    infinities."""
    first, stop = (0x400, 0x7C00) if dtype == np.float16 else (0x80, 0x7F80)
    x = np.arange(first, stop, step, dtype=np.uint16).view(dtype)
    return np.concatenate([x, -x, np.array([0.0, -0.0, np.inf, -np.inf], dtype)]).astype(dtype)


def _assert_bits_equal(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    bits = f"u{got.dtype.itemsize}"
    same = (got.view(bits) == want.view(bits)) | (
        np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
    )
    assert same.all(), (got[~same][:5], want[~same][:5])


@pytest.mark.xla_defaults
@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
def test_cbrt_and_rsqrt_16bit_bit_exact(dtype):
    """cbrt and rsqrt of float16/bfloat16 match XLA's CPU results bit for bit: computed wide
    and rounded once (regression: ``pow(x, 1/3)`` rounded the exponent 1/3 to the 16-bit
    type; torch's short-tensor rsqrt kernel rounded its square root before dividing)."""
    x = _normal_floats(dtype)
    got, want = run_both(lambda x: (jnp.cbrt(x), lax.rsqrt(jnp.abs(x))), x)
    for g, w in zip(got, want, strict=True):
        _assert_bits_equal(g, w)
    module = converter.from_stablehlo(jax.jit(lax.rsqrt).lower(x[:3]).as_text()).to_torch()
    for i in range(0, x.size // 2, 3):  # tensors of 3: torch's scalar kernel
        _assert_bits_equal(numpy_of(module(torch_of(x[i : i + 3]))), jax.jit(lax.rsqrt)(x[i : i + 3]))


@pytest.mark.parametrize(("exponent_bits", "mantissa_bits"), [(8, 23), (5, 10), (8, 7), (4, 3), (11, 40)])
def test_reduce_precision_float64(exponent_bits, mantissa_bits):
    """reduce_precision of float64 (regression: the 64-bit mask overflowed int64)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(64) * 10.0 ** rng.integers(-40, 40, 64)
    x = np.concatenate([x, [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e300, -1e300, 65504.0, 65520.0]])
    (got,), (want,) = run_both(lambda x: lax.reduce_precision(x, exponent_bits, mantissa_bits), x)
    _assert_bits_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
def test_reduce_precision_16bit(dtype):
    """reduce_precision of float16 (10 mantissa bits) and bfloat16 (7) to 4 exponent and 3
    mantissa bits (rounding, overflow to inf and flush to 0 all reached), against XLA bit for
    bit."""
    x = _normal_floats(dtype, step=7)
    (got,), (want,) = run_both(lambda x: lax.reduce_precision(x, exponent_bits=4, mantissa_bits=3), x)
    _assert_bits_equal(got, want)


_BITCAST_I1 = """
func.func @main(%x: tensor<4xi1>) -> tensor<4xi1> {
  %y = stablehlo.bitcast_convert %x : (tensor<4xi1>) -> tensor<4xi1>
  return %y : tensor<4xi1>
}
"""


def test_bitcast_convert_i1_to_i1():
    """StableHLO spec: bitcast_convert between equal types is the identity, i1 included."""
    x = np.array([True, False, False, True])
    out = converter.from_stablehlo(_BITCAST_I1).to_torch()(torch.tensor(x))
    np.testing.assert_array_equal(out.numpy(), x)


def test_sign_keeps_nan_and_or_of_integers_and_bools():
    """stablehlo.sign of NaN is NaN (torch.sign gives 0), of integers exact; stablehlo.or of
    integers and of bools; against XLA."""
    x = np.array([np.nan, -2.5, 0.0, 3.0, -np.inf], dtype=np.float32)
    i = np.array([-3, 0, 5, 7, -8], dtype=np.int32)
    j = np.array([1, 6, 3, 8, -1], dtype=np.int32)
    assert_same(lambda x, i, j: (jnp.sign(x), jnp.sign(i), i | j, (i > 0) | (j > 0)), x, i, j)


def test_convert_negative_numbers_to_floats():
    """stablehlo.convert of negative integers and floats to float types (only uint64's
    negative storage values are shifted by 2**64), and between complex types (the imaginary
    part kept; only a complex to real convert drops it)."""
    i = np.array([-3, 0, 7, -2147483648], dtype=np.int32)
    x = np.array([-1.5, 2.25, -0.0, -3e4], dtype=np.float32)
    z = (x + 1j * x[::-1]).astype(np.complex64)
    assert_same(
        lambda i, x, z: (
            i.astype(jnp.float32),
            i.astype(jnp.float16),
            x.astype(jnp.bfloat16),
            z.astype(jnp.complex128),
            z.astype(jnp.complex128).astype(jnp.complex64),
        ),
        i,
        x,
        z,
    )


def test_bool_minimum_and_maximum():
    """stablehlo.minimum/maximum of bools: and/or."""
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    assert_same(lambda a, b: (jnp.minimum(a, b), jnp.maximum(a, b)), a, b)


def test_wrapping_unsigned_complex_sign_and_saturating_converts():
    """ui8 negate/subtract wrap modulo 256, complex sign is ``z / |z|`` (0 at 0), ui64
    minimum compares unsigned, f32 → i4 and f64 → ui64 truncate and saturate (NaN → 0)."""
    u = np.array([0, 1, 200, 255], np.uint8)
    v = np.array([1, 0, 201, 3], np.uint8)
    z = np.array([1 + 2j, 1 - 1j, 0, -3 + 0.5j], np.complex64)
    p = np.array([0, 2**63, 2**64 - 1, 5], np.uint64)
    q = np.array([1, 5, 2**63, 5], np.uint64)
    f = np.array([7.9, -9.5, np.nan, 3.2], np.float32)
    d = np.array([1e19, 2.0**64, -3.0, 1.5e19], np.float64)
    assert_same(
        lambda u, v, z, p, q, f, d: (
            lax.neg(u),
            u - v,
            lax.sign(z),
            lax.min(p, q),
            lax.convert_element_type(f, jnp.int4).astype(jnp.int8),  # i4 returns in i8 storage
            lax.convert_element_type(d, jnp.uint64),
        ),
        u, v, z, p, q, f, d,
    )  # fmt: skip


_SPEC_ELEMENTWISE = """
func.func public @main(%z: tensor<4xcomplex<f32>>, %w: tensor<4xcomplex<f32>>, %y: tensor<2xcomplex<f64>>)
    -> (tensor<4xcomplex<f32>>, tensor<4xcomplex<f32>>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>,
        tensor<4xi1>, tensor<4xi1>, tensor<4xf32>, tensor<2xf64>) {
  %0 = stablehlo.maximum %z, %w : tensor<4xcomplex<f32>>
  %1 = stablehlo.minimum %z, %w : tensor<4xcomplex<f32>>
  %2 = stablehlo.compare LT, %z, %w : (tensor<4xcomplex<f32>>, tensor<4xcomplex<f32>>) -> tensor<4xi1>
  %3 = stablehlo.compare GT, %z, %w : (tensor<4xcomplex<f32>>, tensor<4xcomplex<f32>>) -> tensor<4xi1>
  %4 = stablehlo.compare LE, %z, %w : (tensor<4xcomplex<f32>>, tensor<4xcomplex<f32>>) -> tensor<4xi1>
  %5 = stablehlo.compare GE, %z, %w : (tensor<4xcomplex<f32>>, tensor<4xcomplex<f32>>) -> tensor<4xi1>
  %6 = stablehlo.compare EQ, %z, %w : (tensor<4xcomplex<f32>>, tensor<4xcomplex<f32>>) -> tensor<4xi1>
  %7 = stablehlo.convert %z : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
  %8 = stablehlo.convert %y : (tensor<2xcomplex<f64>>) -> tensor<2xf64>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<4xcomplex<f32>>, tensor<4xcomplex<f32>>, tensor<4xi1>,
    tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xf32>, tensor<2xf64>
}
"""


def test_complex_order_and_complex_to_real_follow_the_spec():
    """Complex maximum/minimum/compare order (real, imag) lexicographically (as XLA; JAX
    writes its own selects instead), and a complex → real convert keeps the real part."""
    z = np.array([1 + 2j, 1 + 2j, 2 - 9j, -1 + 0j], np.complex64)
    w = np.array([1 + 3j, 1 + 2j, 1 + 9j, -1 - 1j], np.complex64)
    y = np.array([1.5 - 2j, -0.25 + 7j], np.complex128)
    t = converter.from_stablehlo(_SPEC_ELEMENTWISE).to_torch()
    got = [numpy_of(o) for o in t(*(torch_of(a) for a in (z, w, y)))]
    lt = np.array([True, False, False, False])  # z < w, (re, im) lexicographic
    gt = np.array([False, False, True, True])
    want = [np.where(lt, w, z), np.where(gt, w, z), lt, gt, ~gt, ~lt, z == w, z.real, y.real]
    for g, wnt in zip(got, want, strict=True):
        assert g.dtype == wnt.dtype
        np.testing.assert_array_equal(g, wnt)


_I1_BITCAST = """
func.func public @main(%x: tensor<8xi1>) -> tensor<i8> {
  %0 = stablehlo.bitcast_convert %x : (tensor<8xi1>) -> tensor<i8>
  return %0 : tensor<i8>
}
"""

_POLYGAMMA = """
func.func public @main(%n: tensor<2xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  %c = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = chlo.polygamma %N, %x : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""


@pytest.mark.parametrize(
    "text, message",
    [
        (_I1_BITCAST, "bitcast_convert between i1 and another type"),
        (_POLYGAMMA.replace("%N", "%n"), "chlo.polygamma with a non-constant order"),
        (_POLYGAMMA.replace("%N", "%c"), "chlo.polygamma with mixed orders"),
    ],
)
def test_unsupported_forms_raise_naming_the_op(text, message):
    with pytest.raises(converter.ConversionError, match=message):
        converter.from_stablehlo(text).to_torch()


def test_not_of_integers_and_bools():
    """stablehlo.not: bitwise on integers (the dtype kept), logical on bools."""
    i = np.array([0, -1, 5, np.iinfo(np.int32).min], np.int32)
    u = np.array([0, 1, 200, 255], np.uint8)
    b = np.array([True, False, True])
    assert_same(lambda i, u, b: (lax.bitwise_not(i), lax.bitwise_not(u), lax.bitwise_not(b)), i, u, b)


def test_float_remainder_has_the_dividends_sign():
    """stablehlo.remainder of floats is fmod (the dividend's sign; ``x % 0`` is NaN, not x)."""
    x = np.array([5.5, -5.5, 5.5, -5.5, 3.0, 0.0], np.float32)
    y = np.array([2.0, 2.0, -2.0, -2.0, 0.0, 3.0], np.float32)
    assert_same(lambda x, y: lax.rem(x, y), x, y)


def test_popcount_and_clz_of_64_and_16_bit_integers():
    """clz of int64 counts the top bit (a negative value has none leading: 0; zero: 64), as
    XLA; popcnt of int64/int16 counts all of the width's bits."""
    x = np.array([0, -1, 1, 2**62, -(2**63), 2**40 + 3], np.int64)
    h = np.array([0, -1, 1, 2**14, -(2**15), 255], np.int16)
    assert_same(lambda x, h: (lax.clz(x), lax.population_count(x), lax.clz(h), lax.population_count(h)), x, h)


def test_float_to_64_bit_integers_saturates_at_two_to_the_63():
    """f64 → i64 and → ui64 at the boundary 2**63 and just below it (the largest double
    below 2**63), past the range and below it, against XLA."""
    below = np.nextafter(2.0**63, 0)
    x = np.array([2.0**63, below, -(2.0**63), -1e19, 1e19, 2.0**64, -1.5, np.nan], np.float64)
    assert_same(lambda x: (x.astype(jnp.int64), x.astype(jnp.uint64)), x)


_IMAG_AND_TOTALORDER = """
func.func public @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>, tensor<4xi1>) {
  %0 = stablehlo.imag %x : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.compare LT, %x, %y, TOTALORDER : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %2 = stablehlo.compare EQ, %x, %y, TOTALORDER : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xi1>, tensor<4xi1>
}
"""


def test_imag_of_a_real_operand_and_totalorder_compare():
    """Spec: ``imag`` of a float operand is zeros; ``compare`` with ``TOTALORDER`` orders
    -0.0 before +0.0 and -NaN below -inf (ties only bit-identical values): against XLA."""
    from tests.compare import run_xla

    x = np.array([-0.0, -np.nan, np.nan, 2.0], np.float32)
    y = np.array([0.0, -np.inf, np.nan, 2.0], np.float32)
    got = converter.from_stablehlo(_IMAG_AND_TOTALORDER).to_torch()(torch_of(x), torch_of(y))
    want = run_xla(_IMAG_AND_TOTALORDER, x, y)
    for g, w in zip(got, want, strict=True):
        g = numpy_of(g)
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(want[1], [True, True, False, False])  # the spec, by hand


_POW_U64 = """
func.func @main(%a: tensor<4xui64>, %b: tensor<4xui64>) -> tensor<4xui64> {
  %0 = stablehlo.power %a, %b : tensor<4xui64>
  return %0 : tensor<4xui64>
}
"""


def test_uint64_power_reads_the_exponents_top_bit():
    """ui64 power by exponents from 2**63 up (stored negative): every one of the 64 bits of
    the exponent counts (2 ** (2**63 + 1) wraps to 0, 3 ** (2**63) is 1 modulo 2**64). The
    reference is the spec's (exponentiation modulo 2**64, Python's ``pow``): XLA's CPU
    compiler gives 0 for any exponent from 2**63 up."""
    x = np.array([2, 3, 2, 5], np.uint64)
    y = np.array([2**63 + 1, 2**63, 63, 0], np.uint64)
    got = converter.from_stablehlo(_POW_U64).to_torch()(torch_of(x), torch_of(y))
    want = [pow(int(a), int(b), 2**64) for a, b in zip(x, y, strict=True)]
    np.testing.assert_array_equal(numpy_of(got).view(np.uint64), np.array(want, np.uint64))


# --------------------------------------------------------------------------- carried dtypes


_NARROW_FLOATS = (
    "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
)  # fmt: skip


def test_narrow_float_rounding_matches_ml_dtypes():
    """Every value of a narrow float format, the midpoints between neighbours (ties to the
    even code), points just beside them, the midpoint past the largest value and beyond
    (overflow: inf, NaN or saturation), infinities, NaN and both zeros round as ml_dtypes
    converts float64 (the sign of zero and of every result included)."""
    import ml_dtypes
    from converter.backends.torch._util import round_to_format

    for name in _NARROW_FLOATS:
        _check_rounding(name, getattr(ml_dtypes, name), round_to_format)


def _check_rounding(name, ml, round_to_format):
    import ml_dtypes

    bits = ml_dtypes.finfo(ml).bits
    vals = np.arange(1 << bits, dtype=np.uint8).view(ml).astype(np.float64)
    pos = np.unique(vals[np.isfinite(vals) & (vals >= 0)])
    mids = (pos[:-1] + pos[1:]) / 2
    top = pos[-1] + (pos[-1] - pos[-2]) / 2
    x = np.concatenate([pos, mids, mids * (1 + 2**-20), mids * (1 - 2**-20), [top, top * 1.0001, top * 4]])
    x = np.concatenate([x, -x, [np.inf, -np.inf, np.nan, -0.0]])
    got = round_to_format(torch.from_numpy(x), name)
    want = x.astype(ml).astype(np.float32)
    assert got.dtype == torch.float32
    got = got.numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
    keep = ~np.isnan(want)
    np.testing.assert_array_equal(got[keep], want[keep], err_msg=name)
    np.testing.assert_array_equal(np.signbit(got[keep]), np.signbit(want[keep]), err_msg=name)


def test_sub_byte_integers_wrap_modulo_their_width():
    """A carried sub-byte integer is brought back into range as two's complement of its width
    (sign-extended for the signed ones) in its storage dtype, as ml_dtypes wraps."""
    import ml_dtypes
    from converter.backends.torch._util import wrap_carried

    x = np.arange(-20, 21, dtype=np.int64)
    for name in ("int2", "int4", "uint2", "uint4"):
        got = wrap_carried(torch.from_numpy(x), name)
        assert got.dtype == (torch.int8 if name.startswith("int") else torch.uint8)
        # ml_dtypes' own cast wraps as two's complement of the width
        want = x.astype(np.int8).astype(getattr(ml_dtypes, name)).astype(np.int64)
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
        info = ml_dtypes.iinfo(getattr(ml_dtypes, name))
        assert got.numpy().min() == info.min and got.numpy().max() == info.max


def test_widened_unsigned_values_wrap_and_reinterpret():
    """``uint16``/``uint32`` held in wider signed storage wrap modulo ``2**16``/``2**32`` and
    go to and from their raw bits (a same-width signed dtype); other dtypes pass through.
    ``unsigned_wide`` reads integers as unsigned in int64 (64-bit ones keep their bits)."""
    from converter.backends.torch._util import from_bits, to_bits, unsigned_wide, wrap_carried, wrap_unsigned

    x = torch.tensor([-1, 0, 65535, 65536, 1 << 32, (1 << 32) + 5], dtype=torch.int64)
    assert wrap_unsigned(x, "uint16").tolist() == [65535, 0, 65535, 0, 0, 5]
    assert wrap_carried(x, "uint32").tolist() == [(1 << 32) - 1, 0, 65535, 65536, 0, 5]
    assert wrap_unsigned(x, "int64") is x and wrap_carried(x, "uint64") is x
    big = torch.tensor([(1 << 32) - 1, 1 << 31, 7], dtype=torch.int64)  # uint32 values
    bits = to_bits(big, "uint32")
    assert bits.dtype == torch.int32 and bits.tolist() == [-1, -(1 << 31), 7]
    back = from_bits(bits, "uint32")
    assert back.dtype == torch.int64 and back.tolist() == big.tolist()
    assert to_bits(big, "int64") is big and from_bits(big, "int64") is big
    i8 = torch.tensor([-1, -128, 5], dtype=torch.int8)
    assert unsigned_wide(i8, "int8").tolist() == [255, 128, 5]
    i16 = torch.tensor([-1, 7], dtype=torch.int16)
    assert unsigned_wide(i16, "int16").tolist() == [65535, 7]
    u32 = torch.tensor([(1 << 32) - 1], dtype=torch.int64)
    assert unsigned_wide(u32, "uint32").tolist() == [(1 << 32) - 1]
    i64 = torch.tensor([-1, -(1 << 63)], dtype=torch.int64)
    assert unsigned_wide(i64, "int64").tolist() == [-1, -(1 << 63)]
    assert unsigned_wide(i64, "uint64").tolist() == [-1, -(1 << 63)]


def test_splat_scalars_and_numpy_arrays_in_their_storage():
    """A splat element becomes the Python scalar of its dtype (``uint64`` as the int64 of its
    bits); NumPy arrays become tensors of each dtype's storage with the same values."""
    import ml_dtypes
    from converter.backends.torch._util import numpy_to_torch, scalar_of, storage_dtype

    assert scalar_of(np.uint64(2**64 - 1), "uint64") == -1
    assert scalar_of(np.uint64(5), "uint64") == 5
    for value, name, want in [
        (np.int8(-3), "int8", -3), (np.uint32(2**32 - 1), "uint32", 2**32 - 1),
        (np.bool_(True), "bool", True), (np.float16(0.5), "float16", 0.5),
        (np.complex64(1 - 2j), "complex64", 1 - 2j),
    ]:  # fmt: skip
        got = scalar_of(value, name)
        assert got == want and type(got) is type(want), (name, got)
    cases = [
        ("uint16", np.array([0, 65535], np.uint16), torch.int32, [0, 65535]),
        ("uint32", np.array([0, 2**32 - 1], np.uint32), torch.int64, [0, 2**32 - 1]),
        ("uint64", np.array([2**64 - 1, 3], np.uint64), torch.int64, [-1, 3]),
        ("int4", np.array([-8, 7], ml_dtypes.int4), torch.int8, [-8, 7]),
        ("uint2", np.array([0, 3], ml_dtypes.uint2), torch.uint8, [0, 3]),
        ("float8_e4m3fn", np.array([448, -0.5], ml_dtypes.float8_e4m3fn), torch.float32, [448.0, -0.5]),
        ("float4_e2m1fn", np.array([6, -1.5], ml_dtypes.float4_e2m1fn), torch.float32, [6.0, -1.5]),
        ("bfloat16", np.array([1.5, -2], ml_dtypes.bfloat16), torch.bfloat16, [1.5, -2.0]),
        ("int16", np.array([-5, 9], np.int16), torch.int16, [-5, 9]),
    ]
    for name, arr, dtype, want in cases:
        got = numpy_to_torch(arr, name)
        assert got.dtype == dtype == storage_dtype(name) and got.tolist() == want, (name, got)
    e8 = np.array([1.0, 0.25], ml_dtypes.float8_e8m0fnu)
    got = numpy_to_torch(e8, "float8_e8m0fnu")
    assert got.dtype == torch.float8_e8m0fnu and got.float().tolist() == [1.0, 0.25]


def test_aligned_copies_only_misaligned_tensors():
    """``aligned`` returns a 64-byte aligned tensor as it is and copies a misaligned one into
    aligned memory (same values); an empty tensor needs no copy."""
    from converter.backends.torch._util import aligned

    t = torch.arange(40, dtype=torch.float32)
    assert t.data_ptr() % 64 == 0 and aligned(t) is t
    view = t[1:5]
    got = aligned(view)
    assert got is not view and got.data_ptr() % 64 == 0 and got.tolist() == [1.0, 2.0, 3.0, 4.0]
    empty = t[1:1]
    assert aligned(empty) is empty


_STORED_RESULTS = """
func.func public @main(%x: tensor<3xf32>, %u: tensor<3xui32>)
    -> (tensor<3xf8E4M3FN>, tensor<3xi4>, tensor<3xui32>, tensor<3xf32>, tensor<3xf64>) {
  %0 = stablehlo.convert %x : (tensor<3xf32>) -> tensor<3xf8E4M3FN>
  %1 = stablehlo.convert %x : (tensor<3xf32>) -> tensor<3xi4>
  %2 = stablehlo.add %u, %u : tensor<3xui32>
  %c = stablehlo.constant dense<0.3125> : tensor<3xf8E4M3FN>
  %3 = stablehlo.add %0, %c : tensor<3xf8E4M3FN>
  %4 = stablehlo.convert %3 : (tensor<3xf8E4M3FN>) -> tensor<3xf32>
  %5 = stablehlo.convert %2 : (tensor<3xui32>) -> tensor<3xf64>
  return %0, %1, %2, %4, %5 : tensor<3xf8E4M3FN>, tensor<3xi4>, tensor<3xui32>, tensor<3xf32>, tensor<3xf64>
}
"""


def test_results_of_emulated_and_carried_types():
    """Results of a dtype torch has but computes in another storage come back in their own
    dtype (``float8_e4m3fn``, ``uint32``); a type torch lacks (``int4``) in its storage
    (``int8``). A ``uint32`` add wraps modulo ``2**32`` (also as a later op reads it); a
    float8 add rounds to float8 (ties to even)."""
    import ml_dtypes

    tm = converter.from_stablehlo(_STORED_RESULTS).to_torch()
    x = np.array([1.7, -2.0, 6.9], np.float32)
    u = np.array([2**32 - 1, 5, 2**31], np.uint32)
    f8, i4, s, f, s64 = tm(torch.from_numpy(x), torch.from_numpy(u))
    assert (f8.dtype, i4.dtype, s.dtype) == (torch.float8_e4m3fn, torch.int8, torch.uint32)
    want8 = x.astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(f8.float().numpy(), want8.astype(np.float32))
    np.testing.assert_array_equal(i4.numpy(), [1, -2, 6])  # toward zero, in range
    np.testing.assert_array_equal(s.numpy(), u + u)
    np.testing.assert_array_equal(s64.numpy(), (u + u).astype(np.float64))  # wrapped before the convert
    np.testing.assert_array_equal(f.numpy(), (want8 + want8.dtype.type(0.3125)).astype(np.float32))


def test_integer_to_uint64_converts_wrap_modulo_2_64():
    """``convert`` of int8/int32/int64/uint32 to uint64 keeps the value modulo 2**64 (two's
    complement: -1 becomes 2**64 - 1), as jax.lax gives."""

    def fn(a, b, c, d):
        return tuple(lax.convert_element_type(v, jnp.uint64) for v in (a, b, c, d))

    args = (
        np.array([-1, 5, -128], np.int8),
        np.array([-(2**31), 7, 2**31 - 1], np.int32),
        np.array([-1, 2**62, -(2**63)], np.int64),
        np.array([2**32 - 1, 0, 3], np.uint32),
    )
    assert_same(fn, *args)
