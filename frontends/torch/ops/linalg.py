"""Matrix products: ``aten.mm``, ``aten.addmm``, ``aten.bmm`` (``native_functions.yaml``).

Products use ``Precision.HIGHEST`` so float32 results match eager torch on CPU.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from ..registry import register

aten = __import__("torch").ops.aten
HIGHEST = lax.Precision.HIGHEST


@register(aten.mm.default)
def mm(x, y):
    return jnp.matmul(x, y, precision=HIGHEST)


@register(aten.bmm.default)
def bmm(x, y):
    return jnp.matmul(x, y, precision=HIGHEST)


@register(aten.addmm.default)
def addmm(bias, x, y, beta=1, alpha=1):
    out = jnp.matmul(x, y, precision=HIGHEST)
    if alpha != 1:
        out = out * alpha
    if beta == 0:
        return out
    return out + (bias if beta == 1 else bias * beta)
