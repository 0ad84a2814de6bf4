"""Shape and data-movement ops: constant, iota, broadcast_in_dim, reshape, transpose, slice,
concatenate, pad, reverse (StableHLO spec, the sections of the same names)."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from converter import dtypes

from ..registry import register


@register("stablehlo.constant")
def _constant(interp, op):
    return jnp.asarray(op.attr("value"))


@register("stablehlo.iota")
def _iota(interp, op):
    t = op.result_type
    return lax.broadcasted_iota(dtypes.to_numpy(t.dtype), t.shape, op.attr("iota_dimension"))


@register("stablehlo.broadcast_in_dim")
def _broadcast_in_dim(interp, op, x):
    return lax.broadcast_in_dim(x, op.result_type.shape, tuple(op.attr("broadcast_dimensions")))


@register("stablehlo.reshape")
def _reshape(interp, op, x):
    return lax.reshape(x, op.result_type.shape)


@register("stablehlo.transpose")
def _transpose(interp, op, x):
    return lax.transpose(x, tuple(op.attr("permutation")))


@register("stablehlo.slice")
def _slice(interp, op, x):
    return lax.slice(x, op.attr("start_indices"), op.attr("limit_indices"), op.attr("strides"))


@register("stablehlo.concatenate")
def _concatenate(interp, op, *xs):
    return lax.concatenate(xs, op.attr("dimension"))


@register("stablehlo.pad")
def _pad(interp, op, x, value):
    config = zip(
        op.attr("edge_padding_low"), op.attr("edge_padding_high"), op.attr("interior_padding"), strict=True
    )
    return lax.pad(x, value, list(config))


@register("stablehlo.reverse")
def _reverse(interp, op, x):
    return lax.rev(x, tuple(op.attr("dimensions")))
