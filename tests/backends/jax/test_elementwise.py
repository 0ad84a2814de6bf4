"""StableHLO elementwise ops through the JAX backend, including the semantics that differ
between frameworks (StableHLO spec: divide, remainder, shift_*, round_nearest_afz, maximum)."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import converter
from converter.tools.validate import xla_runner

from .helpers import assert_same

X = np.array([-2.5, -1.5, -0.5, 0.0, 0.5, 1.5, 2.5, np.nan, np.inf], np.float32)
INTS = np.array([-7, -3, -1, 0, 1, 3, 7, 100, -100], np.int32)
J = np.array([2, -2, 3, 5, -3, 2, -5, 7, 9], np.int32)

UNARY = [
    jnp.abs,
    jnp.negative,
    jnp.exp,
    jnp.expm1,
    jnp.log1p,
    jnp.tanh,
    jnp.sin,
    jnp.cos,
    jnp.tan,
    jnp.floor,
    jnp.ceil,
    jnp.sign,
    jnp.sqrt,
    lax.rsqrt,
    jnp.cbrt,
    jnp.isfinite,
    lax.logistic,
    jnp.arcsin,
    jnp.arccos,
    jnp.arctan,
    jnp.sinh,
    jnp.cosh,
    jnp.arcsinh,
    lax.erf,
    lax.erf_inv,
    lax.lgamma,
    lax.digamma,
    jnp.round,
    lax.round,
]


@pytest.mark.parametrize("fn", UNARY, ids=lambda f: getattr(f, "__name__", str(f)))
def test_unary_float(fn):
    assert_same(fn, X)


@pytest.mark.parametrize(
    "fn",
    [
        jnp.add,
        jnp.subtract,
        jnp.multiply,
        jnp.divide,
        jnp.maximum,
        jnp.minimum,
        jnp.power,
        jnp.arctan2,
        lax.rem,
        jnp.nextafter,
    ],
)
def test_binary_float(fn):
    assert_same(fn, X, X[::-1].copy())


def test_integer_divide_and_remainder_truncate():
    assert_same(lax.div, INTS, J)
    assert_same(lax.rem, INTS, J)


def test_shifts_past_bit_width():
    amounts = np.array([0, 1, 31, 32, 33, 40, 2, 5, 64], np.int32)
    assert_same(lax.shift_left, INTS, amounts)
    assert_same(lax.shift_right_arithmetic, INTS, amounts)
    assert_same(lax.shift_right_logical, INTS, amounts)


def test_round_half_away_from_zero():
    assert_same(lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), X)
    assert_same(lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), X)


def test_max_min_propagate_nan():
    a = np.array([np.nan, 1.0, -np.inf], np.float32)
    b = np.array([0.0, np.nan, 2.0], np.float32)
    assert_same(lax.max, a, b)
    assert_same(lax.min, a, b)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int64, np.uint8, np.uint32, np.bool_])
def test_bitwise_and_compare(dtype):
    a = np.array([0, 1, 3, 5, 7, 1], dtype)
    b = np.array([1, 1, 2, 4, 0, 0], dtype)
    assert_same(lambda a, b: (a & b, a | b, a ^ b, ~a, a < b, a == b, a >= b), a, b)


def test_population_count_and_clz():
    assert_same(lambda x: (lax.population_count(x), lax.clz(x)), INTS)


def test_convert_and_bitcast():
    finite = X[np.isfinite(X)]  # float -> int of NaN/inf is implementation-defined (spec: convert)
    assert_same(
        lambda x: (
            x.astype(jnp.int32),
            x.astype(jnp.uint8),
            x.astype(jnp.bfloat16),
            x.astype(jnp.float16),
            lax.bitcast_convert_type(x, jnp.int32),
        ),
        finite,
    )


def test_clamp_select_complex():
    assert_same(lambda x: (jnp.clip(x, -1, 1), jnp.where(x > 0, x, -x), lax.complex(x, x * 2)), X)


def test_complex_arithmetic_and_constants():
    z = np.array([1 + 2j, -0.5 + 0.25j], np.complex64)
    assert_same(lambda z: (z * (3 - 1j), jnp.real(z), jnp.imag(z), jnp.conj(z), jnp.abs(z)), z)


def test_total_order_compare():
    a = np.array([-0.0, 0.0, np.nan, -np.nan, 1.0], np.float32)
    b = np.array([0.0, -0.0, 1.0, np.nan, -np.nan], np.float32)
    assert_same(lambda a, b: lax.sort((a, b), num_keys=1), a, b)


def test_chlo_and_rare_ops_in_one_module():
    """The CHLO ops and rare StableHLO ops of :mod:`tests.backends.chlo_batch` the JAX backend
    has rules for, in one module, interpreted as XLA compiles the same text."""
    from tests.backends import chlo_batch as cb
    from tests.compare import assert_outputs_close

    text = cb.module_text(cb.JAX_BACKEND)
    got = [np.asarray(g) for g in converter.from_stablehlo(text).to_jax()(*cb.args())]
    assert_outputs_close(got, cb.xla_outputs(text), 1e-5, 1e-6)


TOTAL_ORDER = """
func.func public @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xi1>, tensor<8xi1>) {
  %0 = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>
  %1 = stablehlo.compare GT, %a, %b, TOTALORDER : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>
  return %0, %1 : tensor<8xi1>, tensor<8xi1>
}
"""


def test_total_order_compare_among_negative_floats():
    """IEEE totalOrder between negatives (-inf < -2 < -1 < -0.0 < 0.0, negative NaN first):
    the key flips a negative float's magnitude bits."""
    a = np.array([-2.0, -1.0, -np.inf, -0.0, -3.5, -1.0, -np.nan, 0.0], np.float32)
    b = np.array([-1.0, -2.0, -1e30, 0.0, -3.25, -1.0, -1.0, -0.0], np.float32)
    want = xla_runner(converter.from_stablehlo(TOTAL_ORDER, normalize=False), TOTAL_ORDER)((a, b), {})
    got = converter.from_stablehlo(TOTAL_ORDER).to_jax()(a, b)
    assert len(got) == len(want) == 2
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w)


_POWER_UI8 = """
func.func public @main(%a: tensor<6xui8>, %b: tensor<6xui8>) -> tensor<6xui8> {
  %0 = stablehlo.power %a, %b : tensor<6xui8>
  return %0 : tensor<6xui8>
}
"""


def test_unsigned_power_with_the_exponents_top_bit_set():
    """Integer ``power`` walks every bit of an unsigned exponent, the top one included (spec:
    exponentiation with wrap-around): ``2 ** 128`` and ``2 ** 200`` wrap to 0 in ``ui8``,
    ``3 ** 129 == 3 * 3 ** 128``, with ``3 ** 128 == 1 (mod 256)``."""
    a = np.array([2, 2, 3, 3, 1, 255], np.uint8)
    b = np.array([128, 200, 128, 129, 255, 130], np.uint8)
    got = np.asarray(converter.from_stablehlo(_POWER_UI8).to_jax()(a, b))
    want = np.array([pow(int(x), int(y), 256) for x, y in zip(a, b, strict=True)], np.uint8)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)
