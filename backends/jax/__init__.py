"""StableHLO → JAX: interpret a :class:`converter.Module` op by op into ``jax.lax``.

The implementation lives in :mod:`.function`; this package re-exports its public names."""

from .function import EXPORT_PREPARE, PREPARE, JaxFunction, JaxInterpreter, to_jax

__all__ = ["JaxFunction", "JaxInterpreter", "to_jax", "PREPARE", "EXPORT_PREPARE"]
