"""``batch_norm_inference``, ``batch_norm_training``, ``batch_norm_grad`` (StableHLO spec
sections of those names) as ONNX arithmetic (``BatchNormalization`` fixes the feature axis
at 1; these ops take any ``feature_index``). Statistics are over every dimension but
``feature_index``; the variance is the biased one. Static shapes."""

from __future__ import annotations

import numpy as np

from ..registry import register


def _along(g, v: str, shape: tuple, feature: int) -> str:
    """A per-feature vector reshaped to broadcast against a tensor of ``shape``."""
    view = [1] * len(shape)
    view[feature] = shape[feature]
    return g.op("Reshape", [v, g.ints(view)])


def _setup(interp, op):
    g, t = interp.graph, op.operand_type(0)
    f = op.attr("feature_index")
    eps = g.const(np.asarray(op.attr("epsilon")), t.dtype)
    axes = g.ints([d for d in range(t.rank) if d != f])
    return g, t.shape, f, eps, axes


def _rstd(g, variance: str, eps: str) -> str:
    return g.op("Reciprocal", [g.op("Sqrt", [g.op("Add", [variance, eps])])])


@register("stablehlo.batch_norm_inference")
def _batch_norm_inference(interp, op, x, scale, offset, mean, variance):
    """``(x - mean) / sqrt(variance + epsilon) * scale + offset`` per feature."""
    g, shape, f, eps, _ = _setup(interp, op)
    normed = g.op(
        "Mul", [g.op("Sub", [x, _along(g, mean, shape, f)]), _along(g, _rstd(g, variance, eps), shape, f)]
    )
    return g.op("Add", [g.op("Mul", [normed, _along(g, scale, shape, f)]), _along(g, offset, shape, f)])


@register("stablehlo.batch_norm_training")
def _batch_norm_training(interp, op, x, scale, offset):
    """The normalized operand, the batch mean and the (biased) batch variance."""
    g, shape, f, eps, axes = _setup(interp, op)
    mean = g.op("ReduceMean", [x, axes], keepdims=0)
    centered = g.op("Sub", [x, _along(g, mean, shape, f)])
    var = g.op("ReduceMean", [g.op("Mul", [centered, centered]), axes], keepdims=0)
    normed = g.op("Mul", [centered, _along(g, _rstd(g, var, eps), shape, f)])
    out = g.op("Add", [g.op("Mul", [normed, _along(g, scale, shape, f)]), _along(g, offset, shape, f)])
    return [out, mean, var]


@register("stablehlo.batch_norm_grad")
def _batch_norm_grad(interp, op, x, scale, mean, variance, grad_output):
    """The gradients of ``batch_norm_training``'s output with respect to the operand, the
    scale and the offset (the spec's formula, with ``n`` elements per feature)."""
    g, shape, f, eps, axes = _setup(interp, op)
    n = g.const(np.asarray(int(np.prod(shape)) // shape[f]), op.operand_type(0).dtype)
    rstd = _rstd(g, variance, eps)
    xhat = g.op("Mul", [g.op("Sub", [x, _along(g, mean, shape, f)]), _along(g, rstd, shape, f)])
    grad_offset = g.op("ReduceSum", [grad_output, axes], keepdims=0)
    grad_scale = g.op("ReduceSum", [g.op("Mul", [grad_output, xhat]), axes], keepdims=0)
    coef = _along(g, g.op("Div", [g.op("Mul", [scale, rstd]), n]), shape, f)
    inner = g.op("Sub", [g.op("Mul", [n, grad_output]), _along(g, grad_offset, shape, f)])
    inner = g.op("Sub", [inner, g.op("Mul", [xhat, _along(g, grad_scale, shape, f)])])
    return [g.op("Mul", [coef, inner]), grad_scale, grad_offset]
