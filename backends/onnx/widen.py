"""bfloat16 arithmetic in float32.

onnxruntime's CPU kernels take bfloat16 for almost no operator (and the ONNX schemas of
``Sin``, ``Cos``, ``Round``... not at all), so an op on bfloat16 values is emitted on float32
``Cast``s of them and its bfloat16 results are cast back (round to nearest even). XLA's CPU
backend evaluates bfloat16 elementwise ops the same way: in float32, rounded per op.

Ops that only move or select data, and ops holding regions evaluated as subgraphs (whose
values keep their declared types), are emitted on bfloat16 directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxlib.mlir import ir

from converter import mlir

from .graph import RetypedOp

WIDE = "float32"
NARROW = "bfloat16"

#: Ops emitted on bfloat16 as they are.
DIRECT = {
    "stablehlo.constant",
    "stablehlo.reshape",
    "stablehlo.transpose",
    "stablehlo.slice",
    "stablehlo.concatenate",
    "stablehlo.reverse",
    "stablehlo.bitcast_convert",
    "stablehlo.optimization_barrier",
    "stablehlo.while",
    "stablehlo.if",
    "stablehlo.case",
    "stablehlo.composite",
    "func.call",
    "stablehlo.tuple",
    "stablehlo.get_tuple_element",
}


def _dtype(value: ir.Value) -> str | None:
    return mlir.tensor_type(value.type).dtype if isinstance(value.type, ir.RankedTensorType) else None


class WidenedOp(RetypedOp):
    """A view of an :class:`converter.mlir.Op` whose bfloat16 operand and result types read
    as float32 (what its rule is given); everything else is the op's own."""

    def retype(self, t: mlir.TensorType) -> mlir.TensorType:
        return mlir.TensorType(t.shape, WIDE) if t.dtype == NARROW else t

    def narrow_operand(self, i: int) -> bool:
        """Whether operand ``i`` is bfloat16 in the op (float32 as the rule sees it)."""
        return self._op.operand_type(i).dtype == NARROW

    def __repr__(self) -> str:
        return f"Widened({self._op!r})"


def has_dtype(op: mlir.Op, test: Callable[[str], bool]) -> bool:
    """True when a tensor operand or result of ``op`` has a dtype ``test`` accepts."""
    return any((d := _dtype(v)) is not None and test(d) for v in (*op.operands, *op.results))


def needs_widening(op: mlir.Op) -> bool:
    """True when ``op`` has a bfloat16 operand or result and is not in :data:`DIRECT`."""
    return op.name not in DIRECT and has_dtype(op, lambda d: d == NARROW)


def run_widened(interp, op: mlir.Op, operands: list[Any], run: Callable) -> list[Any]:
    """Evaluate ``op`` with ``run(view, operands)`` on float32 casts of its bfloat16 operands
    (``view`` a :class:`WidenedOp`); bfloat16 results are cast back."""
    g = interp.graph
    wide = [g.cast(x, WIDE) if _dtype(v) == NARROW else x for v, x in zip(op.operands, operands, strict=True)]
    results = run(WidenedOp(op), wide)
    g = interp.graph  # the same builder: rules restore it after emitting subgraphs
    return [g.cast(r, NARROW) if _dtype(v) == NARROW else r for v, r in zip(op.results, results, strict=True)]
