"""The StableHLO → ONNX rule table.

A rule is ``rule(interp, op, *operands) -> name | [names]``: operands are ONNX value names,
and the rule emits nodes through ``interp.graph`` (a :class:`converter.backends.onnx.graph.GraphBuilder`).

Rules registered with ``dynamic=True`` (:data:`DYNAMIC_SHAPES`) also take operands and
results with dynamic dimensions (``tensor<?x...>``): they read no static size of those
dimensions, or compute it with ONNX ``Shape``. :func:`converter.backends.onnx.to_onnx` refuses a
shape-polymorphic module that uses any other rule on a dynamic shape.
"""

from collections.abc import Callable, Hashable

from converter.registry import Registry

ONNX_RULES = Registry("StableHLO → ONNX")

#: Keys whose rules handle dynamic dimensions (see the module docstring).
DYNAMIC_SHAPES: set[Hashable] = set()


def register(*keys: Hashable, dynamic: bool = False) -> Callable:
    """Decorator: register an ONNX rule under ``keys``; ``dynamic=True`` declares that it
    handles dynamic dimensions (adds the keys to :data:`DYNAMIC_SHAPES`).

    Raises:
        RegistryCollisionError: a key already has a rule.
    """
    deco = ONNX_RULES.register(*keys)
    if dynamic:
        DYNAMIC_SHAPES.update(keys)
    return deco
