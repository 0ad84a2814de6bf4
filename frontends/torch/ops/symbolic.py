"""Size arithmetic of shape-polymorphic graphs: ``aten.sym_size.int``, ``aten.sym_numel``
and the Python ``operator``/``torch.sym_*`` calls ``torch.export`` records on ``SymInt``s
(``x.view(x.size(0) * 2, -1)`` becomes ``sym_size.int`` → ``operator.mul`` → ``view``).

Under dynamic shapes (``from_torch(dynamic_shapes=...)``) a tensor's dimension is a
``jax.export`` symbolic dimension; these rules compute on it symbolically, so the target
shapes of ``view``/``expand``/``full`` stay symbolic. A comparison the symbolic dimensions
cannot decide (``batch >= 8`` for a batch in ``[2, 64]``) raises JAX's
``InconclusiveDimensionOperation``, which the walker reports with the op and its source line.
"""

from __future__ import annotations

import math
import operator

import torch

from ..registry import register

aten = torch.ops.aten


@register(aten.sym_size.int)
def sym_size(x, dim):
    """``x.size(dim)``: an int, or a symbolic dimension (``aten::sym_size.int(Tensor self,
    int dim) -> SymInt``)."""
    return x.shape[dim]


@register(aten.sym_numel.default)
def sym_numel(x):
    """``x.numel()``: the product of the dimensions (``aten::sym_numel(Tensor self) -> SymInt``)."""
    return math.prod(x.shape)


@register(aten.sym_stride.int)
def sym_stride(x, dim):
    """``x.stride(dim)`` of the contiguous layout (every value is contiguous here)."""
    return math.prod(x.shape[dim % len(x.shape) + 1 :])


_BINARY = {
    operator.add: operator.add,
    operator.sub: operator.sub,
    operator.mul: operator.mul,
    operator.floordiv: operator.floordiv,
    operator.mod: operator.mod,
    operator.pow: operator.pow,
    operator.eq: operator.eq,
    operator.ne: operator.ne,
    operator.lt: operator.lt,
    operator.le: operator.le,
    operator.gt: operator.gt,
    operator.ge: operator.ge,
    operator.and_: operator.and_,
    operator.or_: operator.or_,
    torch.sym_max: max,
    torch.sym_min: min,
}

for _op, _fn in _BINARY.items():
    register(_op)(lambda a, b, _fn=_fn: _fn(a, b))

register(operator.neg)(operator.neg)
register(operator.truediv)(operator.truediv)
register(torch.sym_not)(operator.not_)
register(torch.sym_float)(float)
register(torch.sym_int)(int)
register(math.ceil)(math.ceil)
register(math.floor)(math.floor)
