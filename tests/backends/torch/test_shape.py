"""Shape and data-movement ops through the torch backend."""

import jax.numpy as jnp
import numpy as np
from jax import lax

from .helpers import assert_same

A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_reshape_transpose_broadcast():
    assert_same(lambda a: (a.reshape(6, 4), a.transpose(2, 0, 1), jnp.broadcast_to(a[:, :1], (2, 3, 4))), A)


def test_broadcast_in_dim_unsorted_dims():
    assert_same(lambda a: lax.broadcast_in_dim(a[0], (4, 5, 3), (2, 0)), A)


def test_slices_concatenate_reverse():
    assert_same(lambda a: (a[:, 1:, ::2], a[::-1, :, ::-1], jnp.concatenate([a, a * 2], axis=1)), A)


def test_pad_negative_and_interior():
    assert_same(lambda a: lax.pad(a, jnp.float32(-1), [(1, -1, 0), (-1, 2, 1), (0, 0, 2)]), A)


def test_iota_and_constants():
    assert_same(
        lambda a: (
            a + jnp.arange(4.0),
            lax.broadcasted_iota(jnp.int32, (3, 4), 0),
            a * np.arange(24).reshape(A.shape),
        ),
        A,
    )


def test_pad_by_one_on_the_high_side():
    """High padding of exactly one element (and a low one of one) on each dim."""
    assert_same(lambda a: lax.pad(a, jnp.float32(-2), [(0, 1, 0), (1, 1, 0), (1, 0, 0)]), A)


def test_interior_padding_of_dims_of_two_and_one_elements():
    """Interior padding goes between elements: one gap in a dim of two, none in a dim of
    one (with edge padding around)."""
    x = A[:, :1, :2]  # 2x1x2
    assert_same(lambda a: lax.pad(a, jnp.float32(-3), [(0, 0, 2), (1, 0, 3), (1, 1, 1)]), x)
