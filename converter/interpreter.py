"""The base walker every backend derives from.

Like ``torch.fx.Interpreter``: :meth:`Interpreter.run` calls ``@main``; each function body is
a region whose ops go through :meth:`Interpreter.run_op`, which looks the op name up in the
backend's registry. Backends override only the dispatch (the registry, and how values are
made), never the walk. ``func.call`` and the region terminators are handled here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxlib.mlir import ir

from . import dtypes, mlir
from .errors import ConversionError, MissingOp, OpConversionError, UnsupportedOpError
from .registry import Registry

_TERMINATORS = {"func.return", "stablehlo.return", "sdy.return"}
# ops the walker itself handles: calls and the structural tuple ops, the same in every backend
_BUILTIN_OPS = _TERMINATORS | {"func.call", "stablehlo.tuple", "stablehlo.get_tuple_element"}


class Interpreter:
    """Walks a StableHLO module, evaluating each op with a rule from :attr:`registry`.

    A rule is called as ``rule(interp, op, *operands)`` with an :class:`converter.mlir.Op` view
    and the already-evaluated operand values, and returns one value or a sequence with one
    value per result.

    Args:
        module: the ``ir.Module`` to run.
    """

    registry: Registry
    direction: str = "backend"

    def __init__(self, module: ir.Module):
        self.module = module
        self.functions = mlir.functions(module)
        self.main = mlir.main_function(module)

    # ------------------------------------------------------------------ checks

    def check_supported(self) -> None:
        """Raise :class:`UnsupportedOpError` naming every op kind (with counts and first
        location) that neither the walker nor the registry handles."""
        counts: Counter[str] = Counter()
        first: dict[str, str] = {}
        for fn in self.functions.values():
            for op in mlir.walk_ops(fn):
                key = self.dispatch_key(mlir.Op(op))
                if key in _BUILTIN_OPS or key in self.registry:
                    continue
                counts[key] += 1
                first.setdefault(key, mlir.format_location(op.location))
        if counts:
            raise UnsupportedOpError([MissingOp(k, n, first[k]) for k, n in counts.items()], self.direction)

    def dispatch_key(self, op: mlir.Op) -> str:
        """The registry key for ``op``: its name, or ``custom_call@target`` for custom calls."""
        if op.name == "stablehlo.custom_call":
            return f"stablehlo.custom_call@{op.attr('call_target_name')}"
        return op.name

    # ------------------------------------------------------------------ static values

    def static_operand(self, op: mlir.Op, index: int) -> np.ndarray | None:
        """Operand ``index`` of ``op`` as a NumPy array when it is computable at conversion
        time (a ``constant`` seen through ``broadcast_in_dim``, ``reshape``, ``convert``),
        else ``None``. Backends use it where the target needs a static value (an init value
        a target op must recognize, a shape)."""
        return fold_constant(op.operands[index])

    # ------------------------------------------------------------------ walk

    def run(self, *args: Any) -> list[Any]:
        """Evaluate ``@main`` on ``args`` (one value per argument); returns its results."""
        return self.call_function(self.main, list(args))

    def call_function(self, fn: ir.Operation, args: Sequence[Any]) -> list[Any]:
        """Evaluate a ``func.func`` body on ``args``."""
        return self.run_region(fn.regions[0], args, {})

    def run_region(self, region: ir.Region, args: Sequence[Any], outer: dict) -> list[Any]:
        """Evaluate a single-block region; values defined outside it are read from ``outer``
        (StableHLO region ops may capture enclosing values). Returns the terminator's
        operands."""
        block = region.blocks[0]
        env = dict(outer)
        if len(block.arguments) != len(args):
            raise ConversionError(f"region expects {len(block.arguments)} values, got {len(args)}")
        for barg, val in zip(block.arguments, args, strict=True):
            env[barg] = val
        saved = getattr(self, "env", {})
        try:
            for operation in block.operations:
                op = mlir.Op(operation.operation)
                operands = [env[v] for v in op.operands]
                if op.name in _TERMINATORS:
                    return operands
                results = self.run_op(op, operands, env)
                for res, val in zip(op.results, results, strict=True):
                    env[res] = val
        finally:
            self.env = saved  # the enclosing op's rule may evaluate further regions
        raise ConversionError("region has no terminator")

    def region_values(self, region: ir.Region, args: Sequence[Any], values: Sequence[ir.Value]) -> list[Any]:
        """Evaluate a single-block region on ``args`` (in the values visible at the op being
        run, as :meth:`region_fn`) and return the given values defined in it, rather than
        its results: only the ops those values depend on are evaluated. Backends use it to
        compute part of a body on whole tensors (a sort comparator's key)."""
        block = region.blocks[0]
        if len(block.arguments) != len(args):
            raise ConversionError(f"region expects {len(block.arguments)} values, got {len(args)}")
        env = dict(getattr(self, "env", {}))
        env.update(zip(block.arguments, args, strict=True))
        defs = {r: op.operation for op in block.operations for r in op.operation.results}
        needed: set = set()  # the values to compute: ``values`` and what they depend on
        stack = list(values)
        while stack:
            value = stack.pop()
            if value in needed or value in env:
                continue
            needed.add(value)
            owner = defs.get(value)
            if owner is not None:
                stack.extend(owner.operands)
        saved = getattr(self, "env", {})
        try:
            for operation in block.operations:
                if not any(r in needed for r in operation.operation.results):
                    continue
                op = mlir.Op(operation.operation)
                results = self.run_op(op, [env[v] for v in op.operands], env)
                for res, val in zip(op.results, results, strict=True):
                    env[res] = val
        finally:
            self.env = saved
        return [env[v] for v in values]

    def region_fn(self, region: ir.Region) -> Callable[..., list[Any]]:
        """A Python callable evaluating ``region`` on its block arguments (for loop bodies,
        comparators and reducers). It captures the values visible at the op being run."""
        env = self.env
        return lambda *args: self.run_region(region, args, env)

    def run_op(self, op: mlir.Op, operands: list[Any], env: dict) -> list[Any]:
        """Evaluate one op; errors are wrapped with the op name and its location."""
        self.env = env
        try:
            if op.name == "func.call":
                return self.call_function(self.functions[op.attr("callee")], operands)
            if op.name == "stablehlo.tuple":
                return [tuple(operands)]
            if op.name == "stablehlo.get_tuple_element":
                return [operands[0][op.attr("index")]]
            key = self.dispatch_key(op)
            rule = self.registry.get(key)
            if rule is None:
                raise UnsupportedOpError([MissingOp(key, 1, op.location)], self.direction)
            out = rule(self, op, *operands)
        except (OpConversionError, UnsupportedOpError):
            raise
        except Exception as e:  # noqa: BLE001 - re-raised with the op's name and location
            raise OpConversionError(op.name, op.location, e) from e
        if len(op.results) == 1 and not isinstance(out, (list, tuple)):
            return [out]
        return list(out)


def static_value(value: ir.Value) -> np.ndarray | None:
    """``value`` as a NumPy array when it is a ``constant`` seen through ``broadcast_in_dim``,
    ``reshape`` and ``convert``, else None (see :meth:`Interpreter.static_operand`)."""
    return fold_constant(value)


_FOLDABLE = {"stablehlo.constant", "stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert"}


def fold_constant(value: ir.Value) -> np.ndarray | None:
    owner = value.owner
    if not isinstance(owner, ir.Operation) and hasattr(owner, "operation"):
        owner = owner.operation
    if not isinstance(owner, ir.Operation) or owner.name not in _FOLDABLE:
        return None  # a block argument or a computed value
    op = mlir.Op(owner)
    if op.name == "stablehlo.constant":
        return op.attr("value")
    inner = fold_constant(owner.operands[0])
    if inner is None:
        return None
    t = op.result_type
    if op.name == "stablehlo.convert":
        return inner.astype(dtypes.to_numpy(t.dtype))
    if op.name == "stablehlo.reshape":
        return inner.reshape(t.shape)
    dims = op.attr("broadcast_dimensions")
    shape = [1] * t.rank
    for src, dst in enumerate(dims):
        shape[dst] = inner.shape[src]
    return np.broadcast_to(inner.reshape(shape), t.shape)
