"""The StableHLO → ONNX rule table.

A rule is ``rule(interp, op, *operands) -> name | [names]``: operands are ONNX value names,
and the rule emits nodes through ``interp.graph`` (a :class:`backends.onnx.graph.GraphBuilder`).
"""

from converter.registry import Registry

ONNX_RULES = Registry("StableHLO → ONNX")
register = ONNX_RULES.register
