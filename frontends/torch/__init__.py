"""PyTorch → StableHLO: ``torch.export``, Core ATen decompositions, ATen → JAX rules, and
:func:`converter.lowering.lower` to StableHLO.

The implementation lives in :mod:`.convert`; this package re-exports its public names."""

from .convert import dynamic_dims, export, from_torch

__all__ = ["from_torch", "export", "dynamic_dims"]
