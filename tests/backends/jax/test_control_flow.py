"""while, if, case through the JAX backend; captured values from the enclosing region."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .helpers import assert_same

X = np.linspace(-1, 1, 8).astype(np.float32)


def test_while_loop_with_capture():
    def f(x):
        scale = jnp.sum(x)  # captured inside the body
        return lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 0.9 + scale), (0, x))

    assert_same(f, X, rtol=1e-5)


def test_while_loop_without_a_trip_count():
    """A loop whose end depends on the data (no static trip count: ``lax.while_loop``, not
    ``fori_loop``): doubling until the sum reaches 100."""
    x = np.array([0.5, 1.25, -0.25], np.float32)
    assert_same(
        lambda x: lax.while_loop(lambda c: c[1].sum() < 100, lambda c: (c[0] + 1, c[1] * 2), (0, x)), x
    )


def test_fori_loop_and_scan():
    assert_same(
        lambda x: (
            lax.fori_loop(0, 4, lambda i, v: v * 2 + i, x),
            lax.scan(lambda c, v: (c + v, c * v), 0.0, x),
        ),
        X,
        rtol=1e-5,
    )


def test_cond_and_switch():
    assert_same(
        lambda x, p, i: (lax.cond(p, jnp.sin, jnp.cos, x), lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], x)),
        X,
        np.bool_(True),
        np.int32(2),
    )


def test_grad_through_interpreted_loop_matches():
    def f(x):
        return jnp.sum(lax.fori_loop(0, 3, lambda i, v: jnp.sin(v) * v, x))

    assert_same(jax.grad(f), X, rtol=1e-5)
