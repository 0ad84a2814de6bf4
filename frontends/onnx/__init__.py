"""ONNX → StableHLO: ONNX nodes lower to JAX through :data:`ONNX_RULES`, and the whole graph
is lowered by :func:`converter.lowering.lower` (``jax.jit`` lowering, ``jax.export`` when a
graph input keeps a symbolic dimension) to a :class:`converter.Module`.

The implementation lives in :mod:`.convert`; this package re-exports its public names."""

from .convert import (
    MAX_OPSET,
    StaticValueRequired,
    ValueDependentModule,
    check_supported,
    from_onnx,
    supported_ops,
)

__all__ = [
    "from_onnx",
    "check_supported",
    "StaticValueRequired",
    "ValueDependentModule",
    "MAX_OPSET",
    "supported_ops",
]
