"""The ATen → JAX rule table.

Rules are keyed by the ATen overload name as ``str(OpOverload)`` gives it
(``aten.addmm.default``). A rule receives the node's arguments with every tensor replaced by a
``jax.Array`` and every other argument as is, and returns arrays in the structure of the
ATen schema's returns. The walker casts each returned array to the dtype ``torch.export``
recorded for the node and checks its shape, so rules need not replicate torch's type
promotion, and a rule that gets a shape wrong fails at conversion time, not at run time.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from converter.registry import Registry

ATEN_RULES = Registry("ATen → JAX")


def key_of(target: Any) -> str:
    """The registry key of an FX call target: ``str(OpOverload)`` (``aten.addmm.default``);
    for a Python function on sizes (``operator.mul``, ``torch.sym_max``) its qualified name
    (``operator.mul``, ``torch.sym_max``), stable across processes."""
    if not isinstance(target, (types.FunctionType, types.BuiltinFunctionType)):
        return str(target)  # OpOverload, higher-order ops, names
    module = {"_operator": "operator"}.get(target.__module__, target.__module__)
    return f"{module}.{target.__name__}"


def register(*overloads: Any) -> Callable:
    """Decorator: register a rule for each ATen overload (an ``OpOverload`` or its name) or
    Python size function (:func:`key_of`)."""
    return ATEN_RULES.register(*(key_of(o) for o in overloads))
