"""The converter's own marker ops in a module, and their removal for other consumers.

``from_jax`` keeps each ``lax.stop_gradient`` (which StableHLO has no op for) as
``stablehlo.custom_call @converter.stop_gradient(x)``; the converter's backends read it, but
XLA and other StableHLO consumers know no such call.
"""

from __future__ import annotations

from converter import mlir
from converter.markers import STOP_GRADIENT_TARGET
from converter.module import Module


def without_stop_gradient_markers(module: Module) -> Module:
    """``module`` with each ``@converter.stop_gradient`` marker bypassed (its operand used in
    place of its result): the same values, for consumers without the converter's rules
    (``convert --to stablehlo``, ``jax.export`` of the module). ``module`` itself when it has
    none; never mutated."""
    if not _markers(module.mlir):
        return module
    ir_module = mlir.clone_module(module.mlir)
    with ir_module.context:
        for op in _markers(ir_module):
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
    return Module(ir_module, module.signature, module.params, source=module.source, meta=module.meta)


def _markers(ir_module) -> list:
    return [
        op
        for fn in mlir.functions(ir_module).values()
        for op in mlir.walk_ops(fn)
        if op.name == "stablehlo.custom_call" and mlir.Op(op).attr("call_target_name") == STOP_GRADIENT_TARGET
    ]


__all__ = ["STOP_GRADIENT_TARGET", "without_stop_gradient_markers"]
