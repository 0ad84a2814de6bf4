"""Uniform quantized types (the ``quant`` dialect's ``!quant.uniform``) → integer and float
arithmetic, so that every backend runs quantized modules.

StableHLO's own ``stablehlo-legalize-quant-to-math`` pass rewrites ``uniform_quantize``,
``uniform_dequantize`` and the ops on quantized tensors (``add``, ``dot_general``,
``convolution``, ...) per the spec's quantization semantics (``quantize``: ``x / scale +
zero_point`` rounded to nearest even and clamped to the storage type's range;
``dequantize``: ``(q - zero_point) * scale``; other ops: ``dequantize_op_quantize``, in
integer arithmetic where that is exact), per tensor or per axis. Quantized values become
their storage type (``i8`` for ``!quant.uniform<i8:f32, ...>``), also in ``@main``'s
signature. ``chlo-legalize-to-stablehlo`` then expands the CHLO broadcasting ops it emits.
"""

from __future__ import annotations

import re

from jaxlib.mlir import ir, passmanager
from jaxlib.mlir.dialects import stablehlo

from converter import mlir
from converter.errors import MissingOp, UnsupportedOpError

_PIPELINE = (
    "builtin.module(func.func(stablehlo-legalize-quant-to-math),func.func(chlo-legalize-to-stablehlo))"
)
_DIRECTION = "uniform quantized lowering (stablehlo-legalize-quant-to-math)"


def _quantized(op: ir.Operation) -> bool:
    types = [v.type for v in op.operands] + [r.type for r in op.results]
    if op.name == "func.func":
        types.append(ir.TypeAttr(op.attributes["function_type"]).value)
    return any("!quant." in str(t) for t in types)


_POSITION = re.compile(r'loc\("-":(\d+):(\d+)\)')


def _where(op: ir.Operation, filename: str) -> str:
    """The op's location; a position in the parsed text as ``filename:line:column``."""
    pos = _POSITION.search(str(op.location))
    return f"{filename}:{pos.group(1)}:{pos.group(2)}" if pos else mlir.format_location(op.location)


def quantized_ops(module: ir.Module, filename: str = "<input>") -> list[MissingOp]:
    """Every op kind of ``module`` with a uniform quantized operand or result (or function
    type), with its count and first location (``filename`` names the parsed text)."""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for fn in mlir.functions(module).values():
        for op in [fn, *mlir.walk_ops(fn)]:
            if _quantized(op):
                counts[op.name] = counts.get(op.name, 0) + 1
                first.setdefault(op.name, _where(op, filename))
    return [MissingOp(name, n, first[name]) for name, n in counts.items()]


def lower_quantized(module: ir.Module, filename: str = "<input>") -> ir.Module:
    """``module`` with its uniform quantized types lowered (see the module docstring); the
    module itself when it has none. The input is not mutated.

    Raises:
        UnsupportedOpError: the pass cannot lower some quantized op; names every op kind
            that still has a quantized type, with its count and first location.
    """
    if not quantized_ops(module):
        return module
    m = mlir.clone_module(module)
    with m.context, ir.Location.unknown():
        stablehlo.register_stablehlo_passes()
        try:
            passmanager.PassManager.parse(_PIPELINE).run(m.operation)
        except ir.MLIRError:
            raise UnsupportedOpError(quantized_ops(module, filename), _DIRECTION) from None
    left = quantized_ops(m, filename)
    if left:
        raise UnsupportedOpError(left, _DIRECTION)
    return m
