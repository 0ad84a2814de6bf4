"""IR helpers shared by the passes (jaxlib MLIR bindings only, no text editing)."""

from __future__ import annotations

from jaxlib.mlir import ir

from converter import mlir

# Ops with effects beyond their results: never removed as dead code.
EFFECTFUL = {
    "stablehlo.infeed",
    "stablehlo.outfeed",
    "stablehlo.send",
    "stablehlo.recv",
    "stablehlo.after_all",
    "stablehlo.create_token",
    "stablehlo.all_reduce",
    "stablehlo.all_gather",
    "stablehlo.all_to_all",
    "stablehlo.reduce_scatter",
    "stablehlo.collective_permute",
    "stablehlo.collective_broadcast",
}
TERMINATORS = {"func.return", "stablehlo.return", "sdy.return"}


def function_type(fn: ir.Operation) -> ir.FunctionType:
    """The ``function_type`` of a ``func.func``."""
    return ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)


def set_function_type(fn: ir.Operation, inputs: list[ir.Type], results: list[ir.Type]) -> None:
    """Rewrite a ``func.func``'s ``function_type``."""
    fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def arg_attrs(fn: ir.Operation, key: str = "arg_attrs") -> list[ir.Attribute] | None:
    """The per-argument (or ``res_attrs``) dictionaries, or None when absent."""
    if key not in fn.attributes:
        return None
    return list(ir.ArrayAttr(fn.attributes[key]))


def is_pure(op: ir.Operation, functions: dict[str, ir.Operation], _seen: frozenset = frozenset()) -> bool:
    """True when removing ``op`` (if its results are unused) changes nothing observable:
    no side-effecting custom call, collective or token op, in it or in a function it calls."""
    name = op.name
    if name in EFFECTFUL:
        return False
    if name == "stablehlo.custom_call":
        return not mlir.Op(op).attr("has_side_effect", False)
    if name == "func.call":
        callee = mlir.Op(op).attr("callee")
        if callee in _seen or callee not in functions:
            return False
        return all(is_pure(o, functions, _seen | {callee}) for o in mlir.walk_ops(functions[callee]))
    return all(is_pure(o, functions, _seen) for o in mlir.walk_ops(op))


def _used(value: ir.Value) -> bool:
    return next(iter(value.uses), None) is not None


def remove_dead_code(block: ir.Block, functions: dict[str, ir.Operation]) -> int:
    """Erase pure ops of ``block`` whose results are unused, to a fixed point; returns how
    many were erased."""
    erased, changed = 0, True
    while changed:
        changed = False
        for op in reversed(list(block.operations)):
            op = op.operation
            if op.name in TERMINATORS or any(_used(r) for r in op.results):
                continue  # (asked first: most ops are read, and is_pure walks nested ops and callees)
            if is_pure(op, functions):
                op.erase()
                erased += 1
                changed = True
    return erased
