"""Elementwise ATen ops (``aten.add.Tensor``, ``aten.relu.default``, ...).

Schemas: ``native_functions.yaml``. Results are cast to torch's result dtype by the walker,
so rules compute in JAX's promotion and need not repeat torch's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ..registry import register

aten = __import__("torch").ops.aten


def _alpha(y, alpha):
    return y if alpha == 1 else y * alpha


@register(aten.add.Tensor, aten.add.Scalar)
def add(x, y, alpha=1):
    return jnp.add(x, _alpha(y, alpha))


@register(aten.sub.Tensor, aten.sub.Scalar)
def sub(x, y, alpha=1):
    return jnp.subtract(x, _alpha(y, alpha))


@register(aten.rsub.Scalar, aten.rsub.Tensor)
def rsub(x, y, alpha=1):
    return jnp.subtract(y, _alpha(x, alpha))


@register(aten.mul.Tensor, aten.mul.Scalar)
def mul(x, y):
    return jnp.multiply(x, y)


@register(aten.div.Tensor, aten.div.Scalar)
def div(x, y):
    return jnp.true_divide(x, y)


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(x, y, rounding_mode=None):
    if rounding_mode is None:
        return jnp.true_divide(x, y)
    if rounding_mode == "floor":
        return jnp.floor_divide(x, y)
    q = jnp.true_divide(x, y)
    if jnp.issubdtype(jnp.result_type(x, y), jnp.integer):
        return lax.div(*jnp.broadcast_arrays(jnp.asarray(x), jnp.asarray(y)))
    return jnp.trunc(q)


@register(aten.neg.default)
def neg(x):
    return jnp.negative(x)


@register(aten.relu.default)
def relu(x):
    return jnp.maximum(x, jnp.zeros((), x.dtype))


@register(aten.tanh.default)
def tanh(x):
    return jnp.tanh(x)


@register(aten.sigmoid.default)
def sigmoid(x):
    return jax.nn.sigmoid(x)


@register(aten.exp.default)
def exp(x):
    return jnp.exp(x)


@register(aten.log.default)
def log(x):
    return jnp.log(x)


@register(aten.sqrt.default)
def sqrt(x):
    return jnp.sqrt(x)


@register(aten.rsqrt.default)
def rsqrt(x):
    return lax.rsqrt(x)


@register(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar)
def pow_(x, y):
    return jnp.power(x, y)


@register(aten.where.self)
def where(cond, x, y):
    return jnp.where(cond, x, y)
