"""The only module that touches ``jax._src``.

A JAX upgrade that moves these internals breaks this file and nothing else.
"""

from __future__ import annotations

from jax._src.interpreters import mlir as _mlir


def make_ir_context():
    """A new ``jaxlib.mlir.ir.Context`` with every dialect JAX emits (func, stablehlo, chlo,
    sdy, mhlo) registered and loaded."""
    return _mlir.make_ir_context()
