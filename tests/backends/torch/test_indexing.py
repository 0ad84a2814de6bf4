"""gather / scatter / dynamic slices through the torch backend (clamping and dropping)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .helpers import assert_same, numpy_of, to_torch_module, torch_of

A = np.arange(24, dtype=np.float32).reshape(4, 6)
IDX = np.array([0, 3, -1, 7, 2], dtype=np.int32)


def test_take_and_fancy_indexing():
    assert_same(lambda a, i: (a[i % 4], a[:, i % 6], jnp.take(a, i, axis=1, mode="clip")), A, IDX)


def test_take_along_axis_and_batched_gather():
    idx = np.array([[0, 5], [1, 1], [2, 0], [5, 3]], dtype=np.int32)
    assert_same(lambda a, i: jnp.take_along_axis(a, i, axis=1), A, idx)
    assert_same(lambda a, i: jax.vmap(lambda r, j: r[j])(a, i), A, idx)


def test_scatter_kinds_and_out_of_bounds_drop():
    upd = np.arange(5, dtype=np.float32) + 1

    def f(a, i, u):
        return (
            a.at[0, i].set(u, mode="drop"),
            a.at[1, i].add(u, mode="drop"),
            a.at[2, i].max(u * 10, mode="drop"),
            a.at[3, i].min(-u, mode="drop"),
            a.at[0, i].multiply(u, mode="drop"),
        )

    assert_same(f, A, np.array([0, 3, 1, 7, 2], dtype=np.int32), upd)


def test_scatter_drops_elements_just_past_the_end():
    """A scatter update element is dropped when it lands outside the operand (StableHLO
    spec ``scatter``): a start index equal to the dim's size (one element); a two-element
    window starting at 5 of 6 keeps its first element (XLA would drop the window whole)."""
    dn = lax.ScatterDimensionNumbers(
        update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,)
    )

    def f(a, i, w, u):
        one = a[0].at[i].add(1.0, mode="drop")
        window = lax.scatter_add(a[1], w, u, dn, mode=lax.GatherScatterMode.FILL_OR_DROP)
        return one, window

    i = np.array([6, 5, 0], dtype=np.int32)
    w = np.array([[4], [5], [0]], dtype=np.int32)
    u = np.arange(6, dtype=np.float32).reshape(3, 2) + 1
    got = to_torch_module(f, A, i, w, u)(*[torch_of(x) for x in (A, i, w, u)])
    one = A[0].copy()
    one[[5, 0]] += 1.0
    window = A[1].copy()
    window[4:6] += u[0]
    window[5] += u[1][0]  # the window at 5: its element at 6 is outside, the one at 5 lands
    window[0:2] += u[2]
    np.testing.assert_array_equal(numpy_of(got[0]), one)
    np.testing.assert_array_equal(numpy_of(got[1]), window)


def test_dynamic_slice_clamps():
    def f(a, i):
        return lax.dynamic_slice(a, (i, i + 1), (2, 3)), lax.dynamic_update_slice(
            a, jnp.ones((2, 2), jnp.float32), (i, i)
        )

    for i in (0, 3, -5, 10):
        assert_same(f, A, np.int32(i))
