"""Optimizer update ops of the ``ai.onnx.preview.training`` domain: Adagrad, Momentum, Adam
(https://onnx.ai/onnx/operators/ onnx_aionnxpreviewtraining pages). Inputs are the learning
rate R, the step count T, then the tensors X..., gradients G..., and state (V..., H...)."""

from __future__ import annotations

import jax.numpy as jnp

from ..registry import onnx_op

TRAINING = "ai.onnx.preview.training"


def _groups(xs, n_groups):
    n = len(xs) // n_groups
    return [xs[i * n : (i + 1) * n] for i in range(n_groups)]


@onnx_op("Adagrad", 1, domain=TRAINING)
def adagrad(ctx, r, t, *xs, decay_factor=0.0, epsilon=1e-6, norm_coefficient=0.0):
    """Outputs X_new..., H_new...."""
    x, g, h = _groups(xs, 3)
    rate = r / (1 + t * decay_factor)
    new_x, new_h = [], []
    for xi, gi, hi in zip(x, g, h, strict=True):
        greg = norm_coefficient * xi + gi
        hn = hi + greg * greg
        new_x.append(xi - rate * greg / (jnp.sqrt(hn) + epsilon))
        new_h.append(hn)
    return tuple(new_x + new_h)


@onnx_op("Momentum", 1, domain=TRAINING)
def momentum(ctx, r, t, *xs, alpha, beta, mode, norm_coefficient):
    """Outputs X_new..., V_new... (``mode`` standard or nesterov)."""
    x, g, v = _groups(xs, 3)
    beta_t = jnp.where(t > 0, beta, 1.0)
    new_x, new_v = [], []
    for xi, gi, vi in zip(x, g, v, strict=True):
        greg = norm_coefficient * xi + gi
        vn = alpha * vi + beta_t * greg
        step = vn if mode == "standard" else greg + alpha * vn
        new_x.append(xi - r * step)
        new_v.append(vn)
    return tuple(new_x + new_v)


@onnx_op("Adam", 1, domain=TRAINING)
def adam(
    ctx, r, t, *xs, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0, norm_coefficient_post=0.0
):
    """Outputs X_new..., V_new..., H_new...."""
    x, g, v, h = _groups(xs, 4)
    tf = jnp.asarray(t).astype(jnp.float64)
    rate = jnp.where(tf > 0, r * jnp.sqrt(1 - beta**tf) / (1 - alpha**tf), r)
    new_x, new_v, new_h = [], [], []
    for xi, gi, vi, hi in zip(x, g, v, h, strict=True):
        greg = norm_coefficient * xi + gi
        vn = alpha * vi + (1 - alpha) * greg
        hn = beta * hi + (1 - beta) * greg * greg
        xn = xi - (rate * (vn / (jnp.sqrt(hn) + epsilon))).astype(xi.dtype)
        new_x.append((1 - norm_coefficient_post) * xn)
        new_v.append(vn)
        new_h.append(hn)
    return tuple(new_x + new_v + new_h)
