"""Shape values with symbolic dimensions: what ``Shape`` of a tensor with a symbolic
dimension computes, carried through the integer ops exporters build shapes with.

A graph input's ``dim_param`` becomes a ``jax.export`` symbolic dimension. ``Shape`` of a
tensor with such a dimension is a *symbolic shape value*: a NumPy ``object`` array of ints
and symbolic dimensions, known at conversion time like any other shape. The ops exporters
use to compute target shapes (``x.view(x.size(0), -1)`` becomes ``Shape`` → ``Gather`` →
``Unsqueeze`` → ``Concat`` → ``Reshape``) evaluate on it here, following their ONNX
definitions (https://onnx.ai/onnx/operators/), so that ``Reshape``/``Expand`` receive
symbolic target shapes (:data:`CONSUMERS`). Any other op receives the value as a computed
``int64`` tensor (:func:`materialize`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from converter import _jax_internal


def is_symbolic(value: Any) -> bool:
    """True for a symbolic shape value (an ``object`` array holding symbolic dimensions)."""
    return isinstance(value, np.ndarray) and value.dtype == object


def shape_value(dims: list) -> np.ndarray:
    """``dims`` (ints and symbolic dimensions) as a shape value: an ``int64`` array when all
    are ints, else an ``object`` array."""
    if all(isinstance(d, (int, np.integer)) for d in dims):
        return np.array([int(d) for d in dims], np.int64)
    return np.array(list(dims), dtype=object)


def materialize(value: Any) -> Any:
    """A symbolic shape value as a computed ``int64`` tensor (other values unchanged)."""
    if not is_symbolic(value):
        return value
    return jnp.array(value.tolist(), np.int64).reshape(value.shape)


def _normalize(value: Any) -> np.ndarray:
    if not isinstance(value, np.ndarray):  # a 0-d result comes back as the element itself
        element, value = value, np.empty((), dtype=object)
        value[()] = element
    flat = value.reshape(-1).tolist()
    if all(isinstance(d, (int, np.integer)) for d in flat):
        return np.array(flat, np.int64).reshape(value.shape)
    return value


def _axes(ctx_version: int, values: list, attrs: dict, index: int, since: int) -> list[int] | None:
    if ctx_version >= since:
        return None if len(values) <= index or values[index] is None else np.asarray(values[index]).tolist()
    return attrs.get("axes")


def _obj(v: Any) -> np.ndarray:
    return np.asarray(v, dtype=object)


def _gather(version, values, attrs):
    data, indices = values
    return np.take(_obj(data), np.asarray(indices, np.int64), axis=attrs.get("axis", 0))


def _unsqueeze(version, values, attrs):
    out = _obj(values[0])
    axes = _axes(version, values, attrs, 1, 13)
    rank = out.ndim + len(axes)
    for a in sorted(int(a) % rank for a in axes):
        out = np.expand_dims(out, a)
    return out


def _squeeze(version, values, attrs):
    axes = _axes(version, values, attrs, 1, 13)
    data = _obj(values[0])
    return np.squeeze(data, axis=None if axes is None else tuple(int(a) % data.ndim for a in axes))


def _concat(version, values, attrs):
    return np.concatenate([_obj(v) for v in values if v is not None and np.size(v)], axis=attrs["axis"])


def _slice(version, values, attrs):
    data = _obj(values[0])
    if version < 10:
        starts, ends, axes, steps = attrs["starts"], attrs["ends"], attrs.get("axes"), None
    else:
        starts, ends = (np.asarray(v).tolist() for v in values[1:3])
        axes = np.asarray(values[3]).tolist() if len(values) > 3 and values[3] is not None else None
        steps = np.asarray(values[4]).tolist() if len(values) > 4 and values[4] is not None else None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * data.ndim
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        index[int(a) % data.ndim] = slice(int(s), int(e), int(st))
    return data[tuple(index)]


def _binary(op: Callable) -> Callable:
    def rule(version, values, attrs):
        a, b = (_obj(v) for v in values)
        return np.vectorize(op, otypes=[object])(a, b)

    return rule


def _reduce_prod(version, values, attrs):
    data = _obj(values[0])
    axes = _axes(version, values, attrs, 1, 18)
    keep = attrs.get("keepdims", 1)
    if axes is None or not axes:
        if attrs.get("noop_with_empty_axes", 0):  # (from version 18) no axes: the input as it is
            return data
        out = np.array(math.prod(data.reshape(-1).tolist()), dtype=object)
        return out.reshape((1,) * data.ndim) if keep else out
    return np.prod(data, axis=tuple(int(a) for a in axes), keepdims=bool(keep))


class _Undecided(Exception):
    """A comparison of symbolic dimensions that the sizes do not decide."""


def _equal(a: Any, b: Any) -> bool:
    """``a == b`` for ints and symbolic dimensions, decided for every size (JAX's own ``==``
    answers False when undecided), else :class:`_Undecided`."""
    d = a - b
    if isinstance(d, (int, np.integer)):
        return int(d) == 0
    try:
        if d >= 1 or d <= -1:
            return False
    except jax.errors.InconclusiveDimensionOperation:
        pass
    raise _Undecided(f"{a} == {b}")


def _equal_rule(version, values, attrs):
    a, b = (_obj(v) for v in values)
    return np.vectorize(_equal, otypes=[bool])(a, b).astype(bool)


def _where(version, values, attrs):
    cond, a, b = values
    if is_symbolic(cond) or not isinstance(cond, np.ndarray):
        return None  # a traced condition: not a shape computation
    return np.where(cond.astype(bool), _obj(a), _obj(b))


def _reshape(version, values, attrs):
    data, shape = _obj(values[0]), values[1]
    if is_symbolic(shape) or not isinstance(shape, np.ndarray):
        return None
    target = [int(v) for v in shape.reshape(-1)]
    if not attrs.get("allowzero", 0):
        target = [data.shape[i] if v == 0 else v for i, v in enumerate(target)]
    return data.reshape(target)


def _extremum(pick: Callable) -> Callable:
    def rule(version, values, attrs):
        out = _obj(values[0])
        for v in values[1:]:
            out = np.vectorize(pick, otypes=[object])(out, _obj(v))
        return out

    return rule


#: ONNX op type -> ``rule(schema_version, input values, attributes)`` on shape values.
RULES: dict[str, Callable] = {
    "Gather": _gather,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Slice": _slice,
    "Identity": lambda version, values, attrs: _obj(values[0]),
    "Cast": lambda version, values, attrs: _obj(values[0]),
    "Add": _binary(lambda a, b: a + b),
    "Sub": _binary(lambda a, b: a - b),
    "Mul": _binary(lambda a, b: a * b),
    "Div": _binary(lambda a, b: a // b),
    "ReduceProd": _reduce_prod,
    "Reshape": _reshape,
    "Equal": _equal_rule,
    "Where": _where,
    "Max": _extremum(lambda a, b: _jax_internal.max_dim(a, b)),
    "Min": _extremum(lambda a, b: _jax_internal.min_dim(a, b)),
}


#: Ops whose shape input may be a symbolic shape value (their rules read it with
#: ``ctx.static`` and keep symbolic dimensions).
CONSUMERS = frozenset({"Reshape", "Expand", "ConstantOfShape", "Slice", "Range", "Resize"})


def evaluate(op_type: str, version: int, values: list, attrs: dict) -> np.ndarray | None:
    """Evaluate ``op_type`` on shape values (some symbolic), or None when it is not a
    shape op handled here (or casts to a non-integer type)."""
    rule = RULES.get(op_type)
    if rule is None or (op_type == "Cast" and attrs.get("to") not in (6, 7)):  # INT32, INT64
        return None
    if not all(v is None or isinstance(v, (np.ndarray, np.generic)) for v in values):
        return None  # a traced input: a computation on tensors, not on shapes
    if op_type == "Slice" and any(is_symbolic(v) for v in values[1:]):
        return None  # symbolic bounds: a slice of a tensor (the Slice rule), not of a shape
    try:
        out = rule(version, values, attrs)
    except _Undecided:
        return None  # computed at run time instead
    if out is None:
        return None
    if isinstance(out, np.ndarray) and out.dtype == bool:
        return out
    return _normalize(out)
