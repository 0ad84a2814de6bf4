"""Shape and data-movement ops through the JAX backend."""

import jax.numpy as jnp
import numpy as np
from jax import lax

from .helpers import assert_same

A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_reshape_transpose_broadcast():
    assert_same(lambda a: (a.reshape(6, 4), a.transpose(2, 0, 1), jnp.broadcast_to(a[:, :1], (2, 3, 4))), A)


def test_slices_and_concatenate():
    assert_same(lambda a: (a[:, 1:, ::2], a[::-1], jnp.concatenate([a, a * 2], axis=1)), A)


def test_pad_with_negative_and_interior():
    assert_same(lambda a: lax.pad(a, np.float32(0.5), [(1, -1, 0), (0, 2, 1), (-2, 1, 2)]), A)


def test_iota_and_constants():
    assert_same(lambda a: (jnp.arange(5) + a[0, 0, 1], lax.broadcasted_iota(jnp.int32, (3, 4), 1)), A)


def test_dynamic_slice_and_update_clamp():
    assert_same(
        lambda a, i: (
            lax.dynamic_slice(a, (i, i, i), (1, 2, 3)),
            lax.dynamic_update_slice(a, jnp.ones((1, 2, 2), a.dtype), (i, i, i)),
        ),
        A,
        np.int32(5),
    )
