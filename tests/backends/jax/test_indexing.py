"""gather, scatter and dynamic slicing through the JAX backend."""

import jax.numpy as jnp
import numpy as np
import pytest

from .helpers import assert_same

A = np.arange(30, dtype=np.float32).reshape(5, 6)
IDX = np.array([4, 0, 2, 2, 9, -1], np.int32)


def test_take_and_fancy_indexing():
    assert_same(lambda a, i: (a[i % 5], a[:, i % 6], jnp.take(a, i, axis=0, mode="clip")), A, IDX)


@pytest.mark.parametrize("mode", ["add", "mul", "min", "max", "set"])
def test_scatter_bodies(mode):
    def f(a, i):
        ref = a.at[i % 5, 1:3]
        upd = jnp.full((6, 2), 2.0, a.dtype)
        return getattr(ref, mode)(upd)

    assert_same(f, A, IDX)


def test_scatter_drops_out_of_bounds():
    assert_same(lambda a, i: a.at[i].add(1.0, mode="drop"), A[0], IDX)


def test_batched_gather_from_take_along_axis():
    order = np.argsort(A, axis=1)[:, ::-1].copy()
    assert_same(lambda a, o: jnp.take_along_axis(a, o, axis=1), A, order)
