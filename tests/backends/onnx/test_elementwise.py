"""Elementwise ops through the ONNX backend, with StableHLO's integer and rounding semantics."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from .helpers import assert_onnx_same

X = np.array([-2.5, -1.5, -0.7, 0.0, 0.5, 1.5, 2.5, 3.25], np.float32)
INTS = np.array([-7, -3, -1, 0, 1, 3, 7, 100], np.int32)
DIVS = np.array([2, -2, 3, 5, -3, 2, -5, 7], np.int32)

UNARY = [
    jnp.abs,
    jnp.negative,
    jnp.exp,
    jnp.expm1,
    jnp.tanh,
    jnp.sin,
    jnp.cos,
    jnp.floor,
    jnp.ceil,
    jnp.sign,
    lax.logistic,
    jnp.cbrt,
    jnp.isfinite,
    jnp.round,
    jnp.arctan,
    jnp.sinh,
    lax.erf,
]


@pytest.mark.parametrize("fn", UNARY, ids=lambda f: getattr(f, "__name__", str(f)))
def test_unary(fn):
    assert_onnx_same(fn, X)


def test_positive_domain():
    pos = np.abs(X) + 0.25
    assert_onnx_same(lambda x: (jnp.log(x), jnp.sqrt(x), lax.rsqrt(x), jnp.log1p(x)), pos)


def test_binary_and_compare():
    y = X[::-1].copy()
    assert_onnx_same(
        lambda a, b: (
            a + b,
            a - b,
            a * b,
            a / b,
            jnp.maximum(a, b),
            jnp.minimum(a, b),
            a < b,
            a >= b,
            a == b,
            a != b,
            jnp.where(a > b, a, b),
            jnp.clip(a, -1, 1),
        ),
        X,
        y,
    )


def test_integer_division_remainder_truncate():
    assert_onnx_same(lambda a, b: (lax.div(a, b), lax.rem(a, b)), INTS, DIVS)


def test_round_half_away_from_zero():
    assert_onnx_same(lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), X)


def test_casts_and_logic():
    assert_onnx_same(
        lambda x, i: (
            x.astype(jnp.int32),
            i.astype(jnp.float32),
            (x > 0) & (i > 0),
            ~(x > 0),
            i & 6,
            i | 1,
            i ^ 3,
        ),
        X,
        INTS,
    )
