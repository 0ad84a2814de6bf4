"""The shape computations of the StableHLO spec on the JAX backend: ``get_dimension_size``,
``dynamic_iota``, ``dynamic_reshape``, ``dynamic_broadcast_in_dim``, ``dynamic_pad``,
``dynamic_gather`` (spec sections of those names) and ``real_dynamic_slice``.

The JAX backend interprets a module with static shapes: a shape-polymorphic module is
specialized to each call's shapes first (:func:`converter.passes.shapes.refine`), which turns
these ops' results static. Here the result type's shape is therefore used; a shape operand
that is a constant must agree with it (the spec's constraint), and a result dimension that is
still dynamic takes its size from a constant shape operand or is refused (a shape that only
a traced value knows cannot become a JAX array's shape).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from converter import dtypes, mlir

from ..registry import register


def _result_shape(interp, op, index: int) -> tuple[int, ...]:
    """The result shape of a ``dynamic_*`` op whose operand ``index`` is the shape tensor."""
    static = interp.static_operand(op, index)
    shape = op.result_type.shape
    if static is not None:
        values = tuple(int(v) for v in np.asarray(static).reshape(-1))
        known = [(d, v) for d, v in zip(shape, values, strict=True) if d is not None]
        if any(d != v for d, v in known):
            raise ValueError(f"shape operand {list(values)} disagrees with the result type {op.result_type}")
        return values
    if any(d is None for d in shape):
        raise ValueError(
            f"result type {op.result_type} has a dynamic dimension whose size only a traced value "
            "knows; the JAX backend needs static shapes (convert with concrete input shapes)"
        )
    return tuple(shape)


def _static_ints(interp, op, index: int, what: str) -> list[int]:
    """Operand ``index`` as Python ints, when it is a constant (through reshapes and
    broadcasts); a traced value cannot set a JAX array's shape."""
    static = interp.static_operand(op, index)
    if static is None:
        raise ValueError(f"{what} is computed at run time; the JAX backend needs it constant")
    return [int(v) for v in np.asarray(static).reshape(-1)]


@register("stablehlo.get_dimension_size")
def _get_dimension_size(interp, op, x):
    """The size of dimension ``dimension`` of ``x`` as a 0-d ``i32`` (symbolic under
    ``jax.export`` shape polymorphism)."""
    return jnp.asarray(x.shape[op.attr("dimension")], dtype=dtypes.to_numpy(op.result_type.dtype))


@register("stablehlo.dynamic_iota")
def _dynamic_iota(interp, op, output_shape):
    """``iota`` of shape ``output_shape`` counting along ``iota_dimension``."""
    shape = _result_shape(interp, op, 0)
    return lax.broadcasted_iota(dtypes.to_numpy(op.result_type.dtype), shape, op.attr("iota_dimension"))


@register("stablehlo.dynamic_reshape")
def _dynamic_reshape(interp, op, x, output_shape):
    """``reshape`` of ``x`` to ``output_shape`` (row-major order, as ``reshape``)."""
    return lax.reshape(x, _result_shape(interp, op, 1))


@register("stablehlo.dynamic_broadcast_in_dim")
def _dynamic_broadcast_in_dim(interp, op, x, output_dimensions):
    """``broadcast_in_dim`` to ``output_dimensions`` (a size-1 operand dimension broadcasts)."""
    shape = _result_shape(interp, op, 1)
    return lax.broadcast_in_dim(x, shape, tuple(op.attr("broadcast_dimensions")))


@register("stablehlo.dynamic_pad")
def _dynamic_pad(interp, op, x, value, low, high, interior):
    """``pad`` with the amounts from constant operands (negative edge amounts crop)."""
    lo = _static_ints(interp, op, 2, "edge_padding_low")
    hi = _static_ints(interp, op, 3, "edge_padding_high")
    inner = _static_ints(interp, op, 4, "interior_padding")
    return lax.pad(x, value, list(zip(lo, hi, inner, strict=True)))


@register("stablehlo.real_dynamic_slice")
def _real_dynamic_slice(interp, op, x, start, limit, strides):
    """``slice`` with the bounds from constant operands."""
    return lax.slice(
        x,
        _static_ints(interp, op, 1, "start_indices"),
        _static_ints(interp, op, 2, "limit_indices"),
        _static_ints(interp, op, 3, "strides"),
    )


@register("stablehlo.dynamic_gather")
def _dynamic_gather(interp, op, operand, start_indices, slice_sizes):
    """``gather`` with ``slice_sizes`` from a constant operand (the spec: functionally
    identical to ``gather`` otherwise)."""
    from .indexing import gather

    sizes = _static_ints(interp, op, 2, "slice_sizes")
    return gather(interp, mlir.OpWithAttrs(op, {"slice_sizes": sizes}), operand, start_indices)
