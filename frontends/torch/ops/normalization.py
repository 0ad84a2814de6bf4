"""Normalization: ``native_layer_norm``, ``native_group_norm``, and batch norm in its
functional forms ``_native_batch_norm_legit_no_training``, ``_native_batch_norm_legit.no_stats``
and ``_native_batch_norm_legit_functional`` (``_native_batch_norm_legit.default`` updates its
running stats in place: ``run_decompositions`` functionalizes it into the ``_functional`` form
before any rule runs, so it has no rule)
(``native_functions.yaml``; formulas of ``layer_norm_kernel.cpp`` / ``batch_norm_kernel.cpp``).

Statistics are computed in float32 for half inputs; variances are biased (divide by the
count) for normalizing, and running variances are updated with the unbiased variance.
The saved ``rstd``/``invstd`` outputs are ``1 / sqrt(var + eps)``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import register
from ._util import acc_dtype

aten = __import__("torch").ops.aten


def _moments(x, axes):
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    return mean, var


@register(aten.native_layer_norm.default)
def native_layer_norm(x, normalized_shape, weight, bias, eps):
    """``(out, mean, rstd)``: ``(x - mean) * rstd * weight + bias`` over the trailing
    ``len(normalized_shape)`` dims; ``mean``/``rstd`` have shape ``x.shape[:axis] + (1,)*k``."""
    k = len(normalized_shape)
    xa = x.astype(acc_dtype(x.dtype))
    axes = tuple(range(x.ndim - k, x.ndim))
    mean, var = _moments(xa, axes)
    rstd = lax.rsqrt(var + eps)
    out = (xa - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


@register(aten.native_group_norm.default)
def native_group_norm(x, weight, bias, N, C, HxW, group, eps):  # noqa: N803 - ATen names
    """``(out, mean, rstd)`` of group norm over ``(N, C, *)``: statistics per sample and group
    of ``C / group`` channels (``mean``/``rstd`` shaped ``(N, group)``); per-channel
    ``weight``/``bias``."""
    xa = x.astype(acc_dtype(x.dtype))
    g = xa.reshape(N, group, -1)
    mean, var = _moments(g, (2,))
    rstd = lax.rsqrt(var + eps)
    out = ((g - mean) * rstd).reshape(x.shape)
    shape = (1, C) + (1,) * (x.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out, mean[..., 0], rstd[..., 0]


def _channel(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _bn_apply(x, mean, invstd, weight, bias):
    """``x * alpha + beta`` with ``alpha = weight * invstd``, ``beta = bias - mean * alpha``
    (``batch_norm_cpu_transform_input``)."""
    alpha = invstd if weight is None else weight * invstd
    beta = -mean * alpha if bias is None else bias - mean * alpha
    return x * _channel(alpha, x.ndim) + _channel(beta, x.ndim)


def _bn_batch_stats(x, eps):
    axes = (0, *range(2, x.ndim))
    mean, var = _moments(x, axes)
    return mean.reshape(-1), var.reshape(-1), 1 / jnp.sqrt(var.reshape(-1) + eps)


@register(aten._native_batch_norm_legit_no_training.default)
def batch_norm_no_training(x, weight, bias, running_mean, running_var, momentum, eps):
    """``(out, empty, empty)``: normalization with the running statistics (eval mode)."""
    xa = x.astype(acc_dtype(x.dtype))
    invstd = 1 / jnp.sqrt(running_var + eps)
    empty = jnp.zeros((0,), xa.dtype)
    return _bn_apply(xa, running_mean, invstd, weight, bias), empty, empty


@register(aten._native_batch_norm_legit.no_stats)
def batch_norm_no_stats(x, weight, bias, training, momentum, eps):
    """``(out, save_mean, save_invstd)`` normalizing with the batch statistics."""
    xa = x.astype(acc_dtype(x.dtype))
    mean, _, invstd = _bn_batch_stats(xa, eps)
    return _bn_apply(xa, mean, invstd, weight, bias), mean, invstd


@register(aten._native_batch_norm_legit_functional.default)
def batch_norm_functional(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """``(out, save_mean, save_invstd, new_running_mean, new_running_var)``; in training the
    running statistics move by ``momentum`` towards the batch mean and the unbiased
    batch variance."""
    if not training:
        out, a, b = batch_norm_no_training(x, weight, bias, running_mean, running_var, momentum, eps)
        return out, a, b, running_mean, running_var
    xa = x.astype(acc_dtype(x.dtype))
    mean, var, invstd = _bn_batch_stats(xa, eps)
    n = int(np.prod([xa.shape[i] for i in (0, *range(2, xa.ndim))]))
    unbiased = var * (n / max(n - 1, 1))
    new_mean = running_mean * (1 - momentum) + mean * momentum
    new_var = running_var * (1 - momentum) + unbiased * momentum
    return _bn_apply(xa, mean, invstd, weight, bias), mean, invstd, new_mean, new_var


@register(aten._batch_norm_with_update_functional.default)
def batch_norm_with_update(x, weight, bias, running_mean, running_var, momentum, eps):
    """``(out, save_mean, save_invstd, reserve, new_running_mean, new_running_var)``: training
    batch norm (see :func:`batch_norm_functional`); ``reserve`` is empty on CPU."""
    out, mean, invstd, new_mean, new_var = batch_norm_functional(
        x, weight, bias, running_mean, running_var, True, momentum, eps
    )
    return out, mean, invstd, jnp.zeros((0,), np.uint8), new_mean, new_var
