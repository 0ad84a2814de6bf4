"""Linear algebra ONNX ops: MatMul, Gemm, Einsum, MatMulInteger, Det
(https://onnx.ai/onnx/operators/)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..registry import onnx_op


@onnx_op("MatMul", 1)
def matmul(ctx, a, b):
    """numpy.matmul semantics (1-D operands are promoted and the added dim removed)."""
    return jnp.matmul(a, b, preferred_element_type=a.dtype)


@onnx_op("Gemm", 7)
def gemm(ctx, a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):  # noqa: N803
    """``alpha * A' @ B' + beta * C`` with C broadcast."""
    a = a.T if transA else a
    b = b.T if transB else b
    y = jnp.matmul(a, b, preferred_element_type=a.dtype)
    if alpha != 1.0:
        y = y * jnp.asarray(alpha, y.dtype)
    if c is not None:
        y = y + (c * jnp.asarray(beta, y.dtype) if beta != 1.0 else c)
    return y


@onnx_op("Einsum", 12)
def einsum(ctx, *xs, equation):
    return jnp.einsum(equation.replace(" ", ""), *xs)


@onnx_op("MatMulInteger", 10)
def matmul_integer(ctx, a, b, a_zero=None, b_zero=None):
    """Integer matmul in int32 after subtracting the zero points (per-row for A, per-column
    for B)."""
    a = a.astype(np.int32)
    b = b.astype(np.int32)
    if a_zero is not None:
        az = jnp.asarray(a_zero).astype(np.int32)
        a = a - (az[:, None] if az.ndim == 1 and az.size > 1 else az)
    if b_zero is not None:
        b = b - jnp.asarray(b_zero).astype(np.int32)
    return jnp.matmul(a, b, preferred_element_type=np.int32)


@onnx_op("Det", 11)
def det(ctx, x):
    return jnp.linalg.det(x)
