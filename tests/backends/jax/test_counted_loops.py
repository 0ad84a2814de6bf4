"""Counted ``while`` loops (``fori_loop``, ``scan``, ``map``): the shared trip-count analysis
(``converter.regions.static_trip_count``) and reverse-mode ``jax.grad`` through the JAX
backend, which runs them as static ``fori_loop``s."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import converter
from converter.regions import _trips

_CMP = {"LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal, "NE": np.not_equal}


@pytest.mark.parametrize("direction", sorted(_CMP))
def test_trip_count_arithmetic_matches_running_the_loop(direction):
    for start, limit, step in itertools.product(range(-4, 5), range(-4, 5), (-3, -2, -1, 0, 1, 2, 3)):
        i, count = start, 0
        while _CMP[direction](i, limit) and count <= 20:
            i, count = i + step, count + 1
        want = None if count > 20 else count  # a loop that does not stop
        assert _trips(direction, start, limit, step) == want, (direction, start, limit, step)


def test_jax_grad_through_converted_scan_and_fori_loop():
    def f(x, w):
        c, ys = lax.scan(lambda c, v: (jnp.tanh(c * w + v), c * v), jnp.zeros(3, x.dtype), x)
        return jnp.sum(ys) + jnp.sum(lax.fori_loop(1, 4, lambda i, c: c * w + i, c))

    x, w = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    g = converter.from_jax(f, x, w[0]).to_jax()
    want = jax.grad(f, argnums=(0, 1))(x, w[0])
    got = jax.grad(lambda x, w: g(x, w), argnums=(0, 1))(x, w[0])
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_only_a_loop_adding_a_constant_to_its_compared_value_is_counted():
    """``i *= 2`` while ``i < 20`` from 1 runs 5 times (a step read off the ``multiply`` would
    say 10); ``i = j + 1, j += 2`` while ``i < 5`` runs 3 times (a step read off the ``add`` of
    the other value would say 5). Neither is a counted loop: both run as ``while_loop`` and
    give the source's numbers. An ``EQ`` condition is not counted either."""
    text = """
func.func @main(%x: tensor<i64>) -> (tensor<i64>, tensor<i64>, tensor<i64>) {
  %one = stablehlo.constant dense<1> : tensor<i64>
  %zero = stablehlo.constant dense<0> : tensor<i64>
  %m = stablehlo.while(%i = %one) : tensor<i64>
  cond {
    %lim = stablehlo.constant dense<20> : tensor<i64>
    %p = stablehlo.compare LT, %i, %lim, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %two = stablehlo.constant dense<2> : tensor<i64>
    %n = stablehlo.multiply %i, %two : tensor<i64>
    stablehlo.return %n : tensor<i64>
  }
  %r:2 = stablehlo.while(%i = %zero, %j = %zero) : tensor<i64>, tensor<i64>
  cond {
    %lim = stablehlo.constant dense<5> : tensor<i64>
    %p = stablehlo.compare LT, %i, %lim, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %c1 = stablehlo.constant dense<1> : tensor<i64>
    %c2 = stablehlo.constant dense<2> : tensor<i64>
    %ni = stablehlo.add %j, %c1 : tensor<i64>
    %nj = stablehlo.add %j, %c2 : tensor<i64>
    stablehlo.return %ni, %nj : tensor<i64>, tensor<i64>
  }
  return %m, %r#0, %r#1 : tensor<i64>, tensor<i64>, tensor<i64>
}"""
    got = converter.from_stablehlo(text).to_jax(x64=True)(np.int64(0))
    assert [int(v) for v in got] == [32, 5, 6]
    assert _trips("EQ", 3, 3, 1) is None
