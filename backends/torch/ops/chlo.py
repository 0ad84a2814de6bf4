"""CHLO's implicitly broadcasting binary ops (``chlo.broadcast_add``, ...), ``chlo.constant``,
``chlo.constant_like`` and ``chlo.mulhi`` (CHLO spec, in the StableHLO repository).

A ``chlo.broadcast_<op>`` is the StableHLO ``<op>`` after NumPy-style broadcasting, or, when
``broadcast_dimensions`` is given, after mapping the lower-rank operand's dimensions onto
those result dimensions. The rules reuse the StableHLO rules of this backend.
"""

from __future__ import annotations

import torch

from ..registry import TORCH_RULES, register
from .shape import broadcast_in_dim

_BROADCAST = {
    "add": "add", "and": "and", "atan2": "atan2", "compare": "compare", "complex": "complex",
    "divide": "divide", "maximum": "maximum", "minimum": "minimum", "multiply": "multiply",
    "next_after": "chlo.next_after", "or": "or", "polygamma": "chlo.polygamma", "power": "power",
    "remainder": "remainder", "shift_left": "shift_left",
    "shift_right_arithmetic": "shift_right_arithmetic", "shift_right_logical": "shift_right_logical",
    "subtract": "subtract", "xor": "xor", "zeta": "chlo.zeta",
}  # fmt: skip


def _align(op, x: torch.Tensor, y: torch.Tensor):
    dims = op.attr("broadcast_dimensions")
    if not dims or x.dim() == y.dim():
        return x, y
    shape = op.result_type.shape
    if x.dim() < y.dim():
        return broadcast_in_dim(x, shape, dims), y
    return x, broadcast_in_dim(y, shape, dims)


def _broadcast_rule(target: str):
    key = target if target.startswith("chlo.") else f"stablehlo.{target}"

    def rule(interp, op, x, y):
        x, y = _align(op, x, y)
        return TORCH_RULES.get(key)(interp, op, x, y)

    rule.__qualname__ = f"broadcast[{key}]"
    return rule


for _name, _target in _BROADCAST.items():
    register(f"chlo.broadcast_{_name}")(_broadcast_rule(_target))


@register("chlo.broadcast_select")
def _broadcast_select(interp, op, pred, on_true, on_false):
    return torch.where(pred, on_true, on_false)


@register("chlo.constant")
def _chlo_constant(interp, op):
    return TORCH_RULES.get("stablehlo.constant")(interp, op)


@register("chlo.constant_like")
def _constant_like(interp, op, x):
    value = op.attr("value")
    return torch.full_like(x, value.item() if hasattr(value, "item") else value)


@register("chlo.mulhi")
def _mulhi(interp, op, x, y):
    """The high half of the double-width product (32-bit and narrower integers)."""
    bits = torch.iinfo(x.dtype).bits
    if bits > 32:
        raise NotImplementedError("chlo.mulhi on 64-bit integers")
    return ((x.to(torch.int64) * y.to(torch.int64)) >> bits).to(x.dtype)
