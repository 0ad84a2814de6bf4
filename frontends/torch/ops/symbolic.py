"""Size arithmetic of shape-polymorphic graphs: ``aten.sym_size.int`` and the Python
``operator``/``math``/``torch.sym_*`` calls ``torch.export`` records on ``SymInt``s and
``SymFloat``s (``x.view(x.size(0) * 2, -1)`` becomes ``sym_size.int`` → ``operator.mul`` →
``view``).

Under dynamic shapes (``from_torch(dynamic_shapes=...)``) a tensor's dimension is a
``jax.export`` symbolic dimension; these rules compute on it symbolically, so the target
shapes of ``view``/``expand``/``full`` stay symbolic:

* ``+ - * // % **``, ``neg`` and ``sym_max``/``sym_min`` (``max(n, m)``, a ``jax.export``
  expression) give dimensions;
* a size through a float (``sym_float(n)``, ``n / 3``, ``n * 0.5``) stays an exact
  :class:`~converter.frontends.torch.lowering.SymbolicRatio`, and ``math.floor``/``ceil``/``trunc`` of
  it (``int(...)``, ``torch.sym_int`` of a float record ``math.trunc``) a dimension again
  (``ceil(n / 3)`` is ``-(-n // 3)``); used as an ATen op's scalar it is its run-time value;
* comparisons (``== != < <= > >=``) and their ``&``/``|``/``sym_not`` are Python bools when
  the dimensions' ranges decide them, else run-time booleans computed from the input sizes
  (what a deferred runtime assert of ``torch.export`` tests, ``aten._assert_scalar``).

An operation with no symbolic form (a size divided by a dimension) raises, and the walker
reports it with the op and its source line.

Not registered, because ``torch.export`` never records them: ``aten.sym_numel`` (it records
the product of the ``sym_size`` dimensions), ``torch.sym_int`` (of a ``SymInt`` it is the
value itself; of a ``SymFloat`` it records ``math.trunc``).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import jax
import jax.numpy as jnp
import torch

from ..lowering import SymbolicRatio, dim_max, dim_min
from ..registry import register

aten = torch.ops.aten


def _dim(v: Any) -> bool:
    return jax.export.is_symbolic_dim(v)


def _ratio_args(a: Any, b: Any) -> bool:
    """Whether ``a op b`` must be computed as exact ratios: one is a ratio, or a float meets
    a symbolic dimension."""
    if isinstance(a, SymbolicRatio) or isinstance(b, SymbolicRatio):
        return True
    return (isinstance(a, float) and _dim(b)) or (isinstance(b, float) and _dim(a))


@register(aten.sym_size.int)
def sym_size(x, dim):
    """``x.size(dim)``: an int, or a symbolic dimension (``aten::sym_size.int(Tensor self,
    int dim) -> SymInt``)."""
    return x.shape[dim]


@register(aten.sym_stride.int)
def sym_stride(x, dim):
    """``x.stride(dim)`` of the contiguous layout (every value is contiguous here)."""
    return math.prod(x.shape[dim % len(x.shape) + 1 :])


def _arith(fn):
    def rule(a, b):
        if _ratio_args(a, b):
            return fn(SymbolicRatio.of(a), b)
        return fn(a, b)

    return rule


for _op in (operator.add, operator.sub, operator.mul):
    register(_op)(_arith(_op))
for _op in (operator.floordiv, operator.mod, operator.pow):
    register(_op)(lambda a, b, _fn=_op: _fn(a, b))


@register(operator.truediv)
def truediv(a, b):
    """``a / b``: a float of two concrete numbers, else an exact :class:`SymbolicRatio`."""
    if _dim(a) or _dim(b) or isinstance(a, SymbolicRatio) or isinstance(b, SymbolicRatio):
        return SymbolicRatio.of(a) / b
    return a / b


@register(operator.neg)
def neg(a):
    """``-a``."""
    return -a


@register(torch.sym_float)
def sym_float(a):
    """``float(a)``: exact (a :class:`SymbolicRatio`) for a symbolic dimension."""
    return SymbolicRatio.of(a) if _dim(a) else float(a)


def _rounding(name: str, fn):
    def rule(a):
        if isinstance(a, SymbolicRatio):
            return getattr(a, name)()
        return a if _dim(a) else fn(a)

    rule.__name__ = rule.__qualname__ = name
    rule.__doc__ = f"``math.{name}(a)``: an int, or a symbolic dimension of a size-derived float."
    return rule


register(math.floor)(_rounding("floor", math.floor))
register(math.ceil)(_rounding("ceil", math.ceil))
register(math.trunc)(_rounding("trunc", math.trunc))


def _extremum(fold, py):
    def rule(a, b):
        if isinstance(a, SymbolicRatio) or isinstance(b, SymbolicRatio):
            raise ValueError(f"{py.__name__} of size-derived floats ({a}, {b}) has no symbolic form")
        return fold(a, b) if _dim(a) or _dim(b) else py(a, b)

    return rule


register(torch.sym_max)(_extremum(dim_max, max))
register(torch.sym_min)(_extremum(dim_min, min))


def _decided(compare, a, b) -> bool | None:
    try:
        return bool(compare(a, b))
    except Exception as e:  # noqa: BLE001 - only JAX's InconclusiveDimensionOperation is expected
        if type(e).__name__ != "InconclusiveDimensionOperation":
            raise
        return None


def _value(v: Any) -> Any:
    return v.value() if isinstance(v, SymbolicRatio) else jnp.asarray(v)


def _comparison(op):
    def rule(a, b):
        if not any(_dim(v) or isinstance(v, SymbolicRatio) for v in (a, b)):
            return op(a, b)
        x, y = a, b
        if isinstance(a, SymbolicRatio) or isinstance(b, SymbolicRatio):  # cross-multiplied
            ra, rb = SymbolicRatio.of(a), SymbolicRatio.of(b)
            x, y = ra.num * rb.den, rb.num * ra.den
        if op in (operator.eq, operator.ne):  # jax's == answers False when it cannot decide
            ge, le = _decided(operator.ge, x, y), _decided(operator.le, x, y)
            equal = True if ge and le else False if ge is False or le is False else None
            if equal is not None:
                return equal if op is operator.eq else not equal
        else:
            found = _decided(op, x, y)
            if found is not None:
                return found
        return op(_value(a), _value(b))  # decided at run time, on the input sizes

    rule.__doc__ = f"``a {op.__name__} b`` of sizes: a bool when decided, else a run-time bool."
    return rule


for _op in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge):
    register(_op)(_comparison(_op))


def _logical(op, jnp_op):
    def rule(a, b):
        if isinstance(a, bool) and isinstance(b, bool):
            return op(a, b)
        return jnp_op(jnp.asarray(a), jnp.asarray(b))

    return rule


register(operator.and_)(_logical(operator.and_, jnp.logical_and))
register(operator.or_)(_logical(operator.or_, jnp.logical_or))


@register(torch.sym_not)
def sym_not(a):
    """``not a``: a bool, or a run-time bool (``a == False``: shape refinement folds a
    ``compare``, not a ``not``, and a ``shape_assertion`` needs its condition folded)."""
    return (not a) if isinstance(a, bool) else jnp.equal(a, False)
