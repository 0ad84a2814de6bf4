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
