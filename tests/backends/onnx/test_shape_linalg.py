"""Shape ops, dot_general and convolution through the ONNX backend."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from .helpers import assert_onnx_same

rng = np.random.default_rng(0)
A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_views_slices_concat_pad_reverse():
    assert_onnx_same(
        lambda a: (
            a.reshape(6, 4),
            a.transpose(2, 0, 1),
            a[:, 1:, ::2],
            a[::-1, :, ::-1],
            jnp.concatenate([a, a], 1),
            jnp.broadcast_to(a[:, :1], (2, 3, 4)),
            lax.pad(a, np.float32(0), [(1, -1, 0), (0, 2, 0), (2, 0, 0)]),
            jnp.arange(4, dtype=jnp.float32) * a,
        ),
        A,
    )


def test_dynamic_slice_clamps():
    assert_onnx_same(lambda a, i: lax.dynamic_slice(a, (i, i, i), (1, 2, 3)), A, np.int32(5))


def test_dot_general_any_dimension_numbers():
    a = rng.normal(size=(3, 2, 5, 4)).astype(np.float32)
    b = rng.normal(size=(4, 3, 5, 6)).astype(np.float32)
    assert_onnx_same(
        lambda a, b: lax.dot_general(a, b, (((2, 3), (2, 0)), ((0,), (1,)))), a, b, rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("groups,dil,stride", [(1, 1, 1), (2, 2, 2)])
def test_convolution_layouts(groups, dil, stride):
    x = rng.normal(size=(2, 9, 9, 4)).astype(np.float32)
    w = rng.normal(size=(3, 3, 4 // groups, 8)).astype(np.float32)
    assert_onnx_same(
        lambda x, w: lax.conv_general_dilated(
            x,
            w,
            (stride, stride),
            [(1, 2), (0, 1)],
            rhs_dilation=(dil, dil),
            feature_group_count=groups,
            dimension_numbers=("NHWC", "HWIO", "NCHW"),
        ),
        x,
        w,
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("start", [(-3, 1), (1, 2), (9, 9)])
def test_dynamic_update_slice_clamps_its_start(start):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    upd = -np.ones((2, 3), np.float32)
    assert_onnx_same(lambda a, u, i, j: lax.dynamic_update_slice(a, u, (i, j)), x, upd, *np.int32(start))


def test_pad_interior_and_negative_edges():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert_onnx_same(lambda a: lax.pad(a, np.int32(-7), [(1, -1, 2), (-2, 3, 1)]), x)
    assert_onnx_same(lambda a: lax.pad(a, np.int32(5), [(0, 0, 1), (0, 0, 0)]), x[:1])


def test_convolution_with_lhs_dilation_and_cropping():
    """lhs_dilation (transposed convolution) and negative padding (cropping)."""
    x = rng.normal(size=(1, 2, 5, 6)).astype(np.float32)
    k = rng.normal(size=(3, 2, 3, 2)).astype(np.float32)

    def f(a, w):
        return lax.conv_general_dilated(
            a, w, (1, 2), [(-1, 2), (1, -1)], lhs_dilation=(2, 3), rhs_dilation=(1, 2)
        )

    assert_onnx_same(f, x, k, rtol=1e-5, atol=1e-5)
