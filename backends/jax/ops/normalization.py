"""``batch_norm_inference``, ``batch_norm_training``, ``batch_norm_grad`` (StableHLO spec
sections of those names) as ``jax.numpy`` arithmetic. JAX never emits them, other producers
(TF/XLA exports) do. Statistics are over every dimension but ``feature_index``; the
variance is the biased one (the spec's ``variance``: mean of squared deviations)."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from ..registry import register


def _along(v, x, feature: int):
    """A per-feature vector ``v`` shaped to broadcast against ``x`` along ``feature``."""
    shape = [1] * x.ndim
    shape[feature] = x.shape[feature]
    return v.reshape(shape)


def _dims(x, feature: int) -> tuple[int, ...]:
    return tuple(d for d in range(x.ndim) if d != feature)


def _eps(op, x):
    return jnp.asarray(op.attr("epsilon"), x.dtype)


@register("stablehlo.batch_norm_inference")
def _batch_norm_inference(interp, op, x, scale, offset, mean, variance):
    """``(x - mean) / sqrt(variance + epsilon) * scale + offset`` per feature."""
    f = op.attr("feature_index")
    rstd = lax.rsqrt(_along(variance, x, f) + _eps(op, x))
    return (x - _along(mean, x, f)) * rstd * _along(scale, x, f) + _along(offset, x, f)


@register("stablehlo.batch_norm_training")
def _batch_norm_training(interp, op, x, scale, offset):
    """The normalized operand, the batch mean and the (biased) batch variance."""
    f = op.attr("feature_index")
    dims = _dims(x, f)
    mean = jnp.mean(x, axis=dims)
    centered = x - _along(mean, x, f)
    var = jnp.mean(centered * centered, axis=dims)
    out = centered * lax.rsqrt(_along(var, x, f) + _eps(op, x)) * _along(scale, x, f) + _along(offset, x, f)
    return [out, mean, var]


@register("stablehlo.batch_norm_grad")
def _batch_norm_grad(interp, op, x, scale, mean, variance, grad_output):
    """The gradients of ``batch_norm_training``'s output with respect to the operand, the
    scale and the offset (the spec's formula, with ``n`` elements per feature)."""
    f = op.attr("feature_index")
    dims = _dims(x, f)
    n = x.size // x.shape[f]
    rstd = lax.rsqrt(variance + _eps(op, x))
    xhat = (x - _along(mean, x, f)) * _along(rstd, x, f)
    grad_offset = jnp.sum(grad_output, axis=dims)
    grad_scale = jnp.sum(grad_output * xhat, axis=dims)
    coef = _along(scale * rstd / n, x, f)
    grad_x = coef * (n * grad_output - _along(grad_offset, x, f) - xhat * _along(grad_scale, x, f))
    return [grad_x, grad_scale, grad_offset]
