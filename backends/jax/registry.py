"""The StableHLO → ``jax.lax`` rule table.

A rule is ``rule(interp, op, *operands) -> value | [values]`` where ``op`` is a
:class:`converter.mlir.Op`. Keys are StableHLO/CHLO op names (``stablehlo.dot_general``) or
``stablehlo.custom_call@<target>``.
"""

from converter.registry import Registry

JAX_RULES = Registry("StableHLO → JAX")
register = JAX_RULES.register
