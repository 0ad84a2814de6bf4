"""``batch_norm_inference``, ``batch_norm_training``, ``batch_norm_grad`` (StableHLO spec
sections of those names). JAX never emits them, other producers (TF/XLA exports) do.
Statistics are over every dimension but ``feature_index``; variance is the biased one."""

from __future__ import annotations

import torch

from ..registry import register


def _along(v: torch.Tensor, x: torch.Tensor, feature: int) -> torch.Tensor:
    shape = [1] * x.dim()
    shape[feature] = x.shape[feature]
    return v.reshape(shape)


def _dims(x: torch.Tensor, feature: int) -> list[int]:
    return [d for d in range(x.dim()) if d != feature]


@register("stablehlo.batch_norm_inference")
def _batch_norm_inference(interp, op, x, scale, offset, mean, var):
    f, eps = op.attr("feature_index"), op.attr("epsilon")
    rstd = torch.rsqrt(_along(var, x, f) + eps)
    return (x - _along(mean, x, f)) * rstd * _along(scale, x, f) + _along(offset, x, f)


@register("stablehlo.batch_norm_training")
def _batch_norm_training(interp, op, x, scale, offset):
    f, eps = op.attr("feature_index"), op.attr("epsilon")
    dims = _dims(x, f)
    mean = x.mean(dims)
    var = ((x - _along(mean, x, f)) ** 2).mean(dims)
    out = (x - _along(mean, x, f)) * torch.rsqrt(_along(var, x, f) + eps) * _along(scale, x, f) + _along(
        offset, x, f
    )
    return [out, mean, var]


@register("stablehlo.batch_norm_grad")
def _batch_norm_grad(interp, op, x, scale, mean, var, dy):
    f, eps = op.attr("feature_index"), op.attr("epsilon")
    dims = _dims(x, f)
    n = x.numel() // x.shape[f]
    rstd = torch.rsqrt(var + eps)
    xhat = (x - _along(mean, x, f)) * _along(rstd, x, f)
    grad_offset = dy.sum(dims)
    grad_scale = (dy * xhat).sum(dims)
    coef = _along(scale * rstd / n, x, f)
    grad_x = coef * (n * dy - _along(grad_offset, x, f) - xhat * _along(grad_scale, x, f))
    return [grad_x, grad_scale, grad_offset]
