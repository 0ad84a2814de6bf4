"""dot_general and convolution through the JAX backend (general dimension numbers)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from .helpers import assert_same

rng = np.random.default_rng(0)


def test_dot_general_batch_and_contracting_anywhere():
    a = rng.normal(size=(3, 2, 5, 4)).astype(np.float32)
    b = rng.normal(size=(4, 3, 5, 6)).astype(np.float32)
    assert_same(lambda a, b: lax.dot_general(a, b, (((2, 3), (2, 0)), ((0,), (1,)))), a, b, rtol=1e-5)


def test_matmul_mixed_precision_result():
    a = rng.normal(size=(4, 8)).astype(jnp.bfloat16)
    assert_same(lambda a: lax.dot(a, a.T, preferred_element_type=jnp.float32), a, rtol=1e-2)


@pytest.mark.parametrize("groups,dil,lhs_dil,stride", [(1, 1, 1, 1), (2, 2, 1, 2), (4, 1, 2, 1)])
def test_convolution_layouts_groups_dilations(groups, dil, lhs_dil, stride):
    x = rng.normal(size=(2, 9, 9, 4)).astype(np.float32)  # NHWC
    w = rng.normal(size=(3, 3, 4 // groups, 8)).astype(np.float32)  # HWIO

    def conv(x, w):
        return lax.conv_general_dilated(
            x,
            w,
            (stride, stride),
            [(1, 2), (0, 1)],
            lhs_dilation=(lhs_dil, 1),
            rhs_dilation=(dil, dil),
            dimension_numbers=("NHWC", "HWIO", "NCHW"),
            feature_group_count=groups,
        )

    assert_same(conv, x, w, rtol=1e-5, atol=1e-5)


def test_convolution_batch_group_count_from_grad():
    x = rng.normal(size=(4, 3, 8)).astype(np.float32)
    w = rng.normal(size=(5, 3, 3)).astype(np.float32)

    def loss(w, x):
        return jnp.sum(lax.conv_general_dilated(x, w, (1,), "SAME") ** 2)

    assert_same(jax.grad(loss), w, x, rtol=1e-4, atol=1e-4)


_TRIANGULAR = [
    dict(left_side=True, lower=True, transpose_a=False, unit_diagonal=False),
    dict(left_side=True, lower=False, transpose_a=True, unit_diagonal=False),
    dict(left_side=False, lower=True, transpose_a=True, unit_diagonal=True),
    dict(left_side=False, lower=False, transpose_a=False, unit_diagonal=False),
]


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
@pytest.mark.parametrize("kw", _TRIANGULAR, ids=lambda kw: "-".join(k for k, v in kw.items() if v) or "plain")
def test_triangular_solve_op_16bit(dtype, kw):
    """stablehlo.triangular_solve, which JAX emits for float16/bfloat16 (regression: the
    JAX backend had no rule for it)."""
    a = (rng.standard_normal((2, 4, 4)) + 4 * np.eye(4)).astype(dtype)
    b = rng.standard_normal((2, 4, 3) if kw["left_side"] else (2, 3, 4)).astype(dtype)
    assert (
        "stablehlo.triangular_solve"
        in jax.jit(lambda a, b: lax.linalg.triangular_solve(a, b, **kw)).lower(a, b).as_text()
    )
    assert_same(lambda a, b: lax.linalg.triangular_solve(a, b, **kw), a, b, rtol=0, atol=0)
