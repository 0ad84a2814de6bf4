"""Shape computations of a shape-polymorphic module on torch symbolic sizes.

A module with symbolic dimensions (``tensor<?x...>``: ``from_torch(dynamic_shapes=...)``, an
ONNX ``dim_param``) reads its dimensions with ``get_dimension_size`` and computes the shapes
of its ``dynamic_*`` ops with integer ops on small tensors. Run as torch tensors those values
would be data: ``torch.export`` would see sizes read back from a tensor (unbacked symbols)
and lose their relation to the input sizes. When :class:`converter.backends.torch.TorchInterpreter`
runs such a module on inputs whose sizes are ``torch.SymInt`` (``torch.export`` or
``torch.compile`` tracing :class:`converter.backends.torch.TorchModule`), the shape computations run in
Python instead, on :class:`SymArray` values holding ints and ``SymInt``s, so every size of
the traced graph is an expression of the input sizes (``s0 * 2``), and the module's
dimension constraints (``custom_call @shape_assertion``) become ``torch._check`` calls.

A shape value used as data (``x / n`` for a mean over a dynamic axis) is turned into a
tensor where it is used (:func:`materialize`).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import torch

from converter import dtypes, mlir
from converter._torch_internal import GuardOnDataDependentSymNode

#: integer / bool ops computed on :class:`SymArray` operands (StableHLO spec sections of the
#: same names); ``convert`` to a floating type, and any other op, materializes instead.
SHAPE_ARITHMETIC = frozenset(
    {
        "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide",
        "stablehlo.remainder", "stablehlo.maximum", "stablehlo.minimum", "stablehlo.negate",
        "stablehlo.abs", "stablehlo.sign", "stablehlo.compare", "stablehlo.select",
        "stablehlo.clamp", "stablehlo.and", "stablehlo.or", "stablehlo.not", "stablehlo.convert",
        "stablehlo.reshape", "stablehlo.concatenate", "stablehlo.broadcast_in_dim",
        "stablehlo.slice",
    }
)  # fmt: skip

_MAX_CONSTANT = 16  # integer constants up to this many elements may be shape values


class SymbolicSizeError(ValueError):
    """A shape computation has no expression in the symbolic sizes (the interpreter raises
    it as :class:`converter.errors.DynamicDimensionError` naming the op and dimensions).

    Attributes:
        values: the sizes involved (ints and ``SymInt``s).
    """

    def __init__(self, message: str, values: tuple = ()):
        super().__init__(message)
        self.values = values


class SymArray:
    """A small integer or bool array whose elements are ints or ``torch.SymInt``/``SymBool``:
    a shape value of a shape-polymorphic module (see the module docstring).

    Attributes:
        values: the elements (a NumPy object array, shaped as the StableHLO value).
        dtype: the StableHLO element type's canonical name (``int32``, ``bool``...).
        op: the ``stablehlo.constant`` it came from, when it is one (materialized by the
            constant rule, as without symbolic sizes).
    """

    def __init__(self, values: Any, dtype: str, op: mlir.Op | None = None):
        self.values = np.asarray(values, dtype=object)
        self.dtype = dtype
        self.op = op

    def reshaped(self, shape: Any) -> SymArray:
        """The same elements in ``shape``."""
        return SymArray(self.values.reshape(tuple(shape)), self.dtype, self.op)

    def tolist(self) -> list:
        """The elements, flattened (a shape operand: ints and ``SymInt``s)."""
        return list(self.values.reshape(-1))

    def __repr__(self) -> str:
        return f"SymArray({self.values.tolist()}, {self.dtype})"


def is_concrete(v: Any) -> bool:
    """True for a plain Python/NumPy number (not a ``SymInt``/``SymBool``)."""
    return isinstance(v, (int, bool, np.integer, np.bool_))


def materialize(interp: Any, value: Any) -> Any:
    """``value`` as a torch tensor when it is a :class:`SymArray` (else unchanged): a
    constant through the constant rule, other values from their elements (``SymInt``s as
    ``aten.scalar_tensor`` of the size expression)."""
    if not isinstance(value, SymArray):
        return value
    from ._util import numpy_to_torch, storage_dtype
    from .registry import TORCH_RULES

    if value.op is not None:
        return TORCH_RULES.get("stablehlo.constant")(interp, value.op)
    flat = value.tolist()
    if all(is_concrete(v) for v in flat):
        arr = np.array([int(v) for v in flat], dtype=dtypes.to_numpy(value.dtype))
        return numpy_to_torch(arr.reshape(value.values.shape), value.dtype)
    dtype = storage_dtype(value.dtype)
    parts = [torch.scalar_tensor(v, dtype=dtype) for v in flat]
    out = torch.stack(parts) if parts else torch.zeros((0,), dtype=dtype)
    return out.reshape(value.values.shape)


def shape_list(value: Any) -> list:
    """A shape operand (1-D integer) as a list of ints and ``SymInt``s: a :class:`SymArray`'s
    elements, or a concrete tensor's values (a module run eagerly on real tensors)."""
    if isinstance(value, SymArray):
        return [v if not isinstance(v, (np.integer, np.bool_)) else int(v) for v in value.tolist()]
    try:
        return [int(v) for v in value.reshape(-1).tolist()]
    except GuardOnDataDependentSymNode as e:
        raise SymbolicSizeError(
            "a shape operand computed from tensor values (such as the slice position of a "
            "lax.scan or fori_loop over a symbolic length, from its loop counter) has no "
            "symbolic form while torch.export/torch.compile traces the module; trace it at fixed "
            "sizes (to_torch(input_shapes=...)) or run it eagerly (any size)"
        ) from e


def _from_constant(op: mlir.Op) -> SymArray | None:
    t = op.result_type
    if not (t.dtype == "bool" or t.dtype.startswith(("int", "uint"))):
        return None
    if t.rank > 1 or any(d is None for d in t.shape) or int(np.prod(t.shape)) > _MAX_CONSTANT:
        return None
    value = np.asarray(op.attr("value")).reshape(t.shape)
    flat = [bool(v) if t.dtype == "bool" else int(v) for v in value.reshape(-1)]
    return SymArray(flat, t.dtype, op).reshaped(t.shape)


def _tdiv(a: Any, b: Any) -> Any:
    """StableHLO integer ``divide`` (rounds toward zero)."""
    if is_concrete(a) and is_concrete(b):
        q = abs(int(a)) // abs(int(b))
        return q if (a >= 0) == (b >= 0) else -q
    if _known_true(b > 0) and _known_true(a >= 0):  # floor and truncation agree
        return a // b
    raise SymbolicSizeError(f"integer division of the size {a} by {b} of unknown sign", (a, b))


def _trem(a: Any, b: Any) -> Any:
    """StableHLO integer ``remainder`` (the sign of the dividend)."""
    if is_concrete(a) and is_concrete(b):
        return int(a) - _tdiv(a, b) * int(b)
    if _known_true(b > 0) and _known_true(a >= 0):
        return a % b
    raise SymbolicSizeError(f"remainder of the size {a} by {b} of unknown sign", (a, b))


def _known_true(cond: Any) -> bool:
    if isinstance(cond, (bool, np.bool_)):
        return bool(cond)
    from converter._torch_internal import statically_known_true

    return statically_known_true(cond)


def _ite(c: Any, a: Any, b: Any) -> Any:
    if isinstance(c, (bool, np.bool_)):
        return a if c else b
    if _known_true(c):  # decided by the sizes' ranges: no ITE, which torch's range analysis
        return a  # (bound_sympy, asked by every view of such a size) has no rule for
    if _known_true(torch.sym_not(c)):
        return b
    if is_concrete(a) and is_concrete(b) and a == b:
        return a
    if type(a) is type(b):
        return torch.sym_ite(c, a, b)
    if isinstance(a, (bool, np.bool_, torch.SymBool)):  # booleans: no arithmetic
        return _or(_and(c, a), _and(torch.sym_not(c), b))
    pick = torch.sym_ite(c, 1, 0)  # sym_ite needs one type: an int and a SymInt mix here
    return b + pick * (a - b)


def _not(a: Any, dtype: str) -> Any:
    if dtype == "bool":
        return (not a) if isinstance(a, (bool, np.bool_)) else torch.sym_not(a)
    return ~a


_COMPARE = {
    "EQ": operator.eq, "NE": operator.ne, "LT": operator.lt,
    "LE": operator.le, "GT": operator.gt, "GE": operator.ge,
}  # fmt: skip


def _sign(a: Any) -> Any:
    if is_concrete(a):
        return (a > 0) - (a < 0)
    return _ite(a > 0, 1, _ite(a < 0, -1, 0))


def _elementwise(fn, *xs: SymArray) -> np.ndarray:
    shape = xs[0].values.shape
    out = np.empty(shape, dtype=object)
    for idx in np.ndindex(*shape):
        out[idx] = fn(*(x.values[idx] for x in xs))
    return out


def eval_shape_op(op: mlir.Op, operands: list[Any]) -> SymArray | None:
    """Evaluate ``op`` on :class:`SymArray` operands, or None when it is not a shape
    computation (then the operands are materialized and the op's rule runs).

    Raises:
        DynamicDimensionError: an op whose result cannot be expressed in the symbolic sizes.
    """
    name = op.name
    if name not in SHAPE_ARITHMETIC or not all(isinstance(v, SymArray) for v in operands):
        return None
    t = op.result_type
    if any(d is None for d in t.shape) or not (t.dtype == "bool" or t.dtype.startswith(("int", "uint"))):
        return None
    if name == "stablehlo.convert":
        x = operands[0]
        if t.dtype == "bool":
            return SymArray(_elementwise(lambda a: a != 0, x), t.dtype)
        if x.dtype == "bool":
            return SymArray(_elementwise(lambda a: _ite(a, 1, 0), x), t.dtype)
        return SymArray(x.values, t.dtype)
    if name == "stablehlo.reshape":
        return SymArray(operands[0].values.reshape(t.shape), t.dtype)
    if name == "stablehlo.concatenate":
        return SymArray(np.concatenate([v.values for v in operands], axis=op.attr("dimension")), t.dtype)
    if name == "stablehlo.broadcast_in_dim":
        x = operands[0].values
        dims = list(op.attr("broadcast_dimensions"))
        shape = [1] * t.rank
        for src, dst in enumerate(dims):
            shape[dst] = x.shape[src]
        order = sorted(range(len(dims)), key=lambda i: dims[i])
        x = np.transpose(x, order) if x.ndim else x
        return SymArray(np.broadcast_to(x.reshape(shape), t.shape).copy(), t.dtype)
    if name == "stablehlo.slice":
        starts, limits = op.attr("start_indices"), op.attr("limit_indices")
        strides = op.attr("strides") or [1] * len(starts)
        index = tuple(slice(s, e, k) for s, e, k in zip(starts, limits, strides, strict=False))
        return SymArray(operands[0].values[index], t.dtype)
    if name == "stablehlo.compare":
        fn = _COMPARE[op.attr("comparison_direction")]
        return SymArray(_elementwise(fn, *operands), t.dtype)
    if name == "stablehlo.select":
        c, a, b = operands
        if c.values.shape != a.values.shape:  # a scalar predicate
            c = SymArray(np.broadcast_to(c.values, a.values.shape), c.dtype)
        return SymArray(_elementwise(_ite, c, a, b), t.dtype)
    if name == "stablehlo.clamp":
        lo, x, hi = (np.broadcast_to(v.values, t.shape) for v in operands)
        out = np.empty(t.shape, dtype=object)
        for idx in np.ndindex(*t.shape):
            out[idx] = _min(_max(x[idx], lo[idx]), hi[idx])
        return SymArray(out, t.dtype)
    unary = {
        "stablehlo.negate": operator.neg,
        "stablehlo.abs": lambda a: _ite(a >= 0, a, -a) if not is_concrete(a) else abs(a),
        "stablehlo.sign": _sign,
        "stablehlo.not": lambda a: _not(a, t.dtype),
    }
    if name in unary:
        return SymArray(_elementwise(unary[name], operands[0]), t.dtype)
    binary = {
        "stablehlo.add": operator.add,
        "stablehlo.subtract": operator.sub,
        "stablehlo.multiply": operator.mul,
        "stablehlo.divide": _tdiv,
        "stablehlo.remainder": _trem,
        "stablehlo.maximum": lambda a, b: _max(a, b),
        "stablehlo.minimum": lambda a, b: _min(a, b),
        "stablehlo.and": (lambda a, b: a & b) if t.dtype != "bool" else _and,
        "stablehlo.or": (lambda a, b: a | b) if t.dtype != "bool" else _or,
    }
    return SymArray(_elementwise(binary[name], *operands), t.dtype)


def _max(a: Any, b: Any) -> Any:
    return max(a, b) if is_concrete(a) and is_concrete(b) else torch.sym_max(a, b)


def _min(a: Any, b: Any) -> Any:
    return min(a, b) if is_concrete(a) and is_concrete(b) else torch.sym_min(a, b)


def _and(a: Any, b: Any) -> Any:
    if isinstance(a, (bool, np.bool_)):
        return b if a else False
    if isinstance(b, (bool, np.bool_)):
        return a if b else False
    return a & b


def _or(a: Any, b: Any) -> Any:
    if isinstance(a, (bool, np.bool_)):
        return True if a else b
    if isinstance(b, (bool, np.bool_)):
        return True if b else a
    return a | b


def constant(op: mlir.Op) -> SymArray | None:
    """A small integer ``stablehlo.constant`` as a :class:`SymArray` (a possible shape
    value), else None."""
    return _from_constant(op)


__all__ = [
    "SHAPE_ARITHMETIC",
    "SymArray",
    "SymbolicSizeError",
    "constant",
    "eval_shape_op",
    "materialize",
    "shape_list",
]
