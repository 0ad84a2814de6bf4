"""Shape and data-movement ops through the JAX backend."""

import jax.numpy as jnp
import numpy as np
from jax import lax

import converter

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


_BROADCAST_TO_AN_INPUT_SHAPE = """
func.func public @main(%x: tensor<3xf32>, %s: tensor<2xi64>) -> tensor<2x3xf32> {
  %0 = stablehlo.dynamic_broadcast_in_dim %x, %s, dims = [1]
      : (tensor<3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}"""


def test_dynamic_broadcast_to_a_run_time_shape_takes_the_static_result_type():
    """A ``dynamic_broadcast_in_dim`` whose shape operand is an input (no constant): its
    static result type gives the shape (the spec requires the operand to agree with it)."""
    x = np.array([1.0, -2.0, 0.5], np.float32)
    got = converter.from_stablehlo(_BROADCAST_TO_AN_INPUT_SHAPE).to_jax()(x, np.array([2, 3], np.int64))
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(x, (2, 3)))
