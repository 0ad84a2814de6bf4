"""The ATen → JAX rule table.

Rules are keyed by the ATen overload name as ``str(OpOverload)`` gives it
(``aten.addmm.default``). A rule receives the node's arguments with every tensor replaced by a
``jax.Array`` and every other argument as is, and returns arrays in the structure of the
ATen schema's returns. The walker casts each returned array to the dtype ``torch.export``
recorded for the node and checks its shape, so rules need not replicate torch's type
promotion, and a rule that gets a shape wrong fails at conversion time, not at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from converter.registry import Registry

ATEN_RULES = Registry("ATen → JAX")


def register(*overloads: Any) -> Callable:
    """Decorator: register a rule for each ATen overload (an ``OpOverload`` or its name)."""
    return ATEN_RULES.register(*(str(o) for o in overloads))
