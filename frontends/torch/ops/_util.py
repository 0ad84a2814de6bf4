"""Helpers shared by the ATen rules: torch's type promotion, dims, accumulation dtypes.

Inside a rule every tensor is a ``jax.Array`` whose dtype is the one ``torch.export``
recorded (the walker casts every node's result), and every other argument is a Python value.
So torch's own promotion (``torch.result_type``) can be replayed exactly on meta tensors of
the same rank class (0-dim or not) and dtype.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from jax.export import is_symbolic_dim

from converter import dtypes

_LOW = {np.dtype("float16"), dtypes.to_numpy("bfloat16")}


def is_array(x: Any) -> bool:
    """True for a tensor argument (a JAX or NumPy array), False for Python scalars."""
    return hasattr(x, "dtype") and hasattr(x, "shape")


def np_dtype(dtype: torch.dtype | Any) -> np.dtype:
    """The NumPy dtype of a torch dtype (or of a NumPy/JAX dtype)."""
    return dtypes.to_numpy(dtypes.name_of(dtype))


def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype of a NumPy/JAX dtype."""
    return dtypes.torch_dtype(dtypes.name_of(dtype))


def _meta(x: Any) -> Any:
    if is_symbolic_dim(x):  # a dynamic size used as a number (``t + x.size(1)``): an int
        return 1
    if is_array(x):
        return torch.empty((1,) if x.ndim else (), dtype=torch_dtype(x.dtype), device="meta")
    return x


def _like(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(t.shape, dtype=dtype, device="meta")


def result_type(*args: Any) -> np.dtype:
    """torch's result dtype for an elementwise op on ``args`` (tensors and Python scalars),
    following ``torch.result_type`` (0-dim tensors and scalars do not raise the category
    of dimensioned tensors). ``None`` arguments are ignored."""
    args = [a for a in args if a is not None]
    tensors = [a for a in args if is_array(a)]
    if not tensors:
        return np_dtype(torch.tensor(args[0]).dtype if len(args) == 1 else torch.result_type(*args[:2]))
    metas = [_meta(a) for a in args]
    if len(metas) == 1:
        return np.dtype(tensors[0].dtype)
    # Fold pairwise, keeping the tensor/scalar distinction: promote over a representative.
    dims = [m for m in metas if isinstance(m, torch.Tensor) and m.ndim]
    zero = [m for m in metas if isinstance(m, torch.Tensor) and not m.ndim]
    scalars = [m for m in metas if not isinstance(m, torch.Tensor)]
    acc = None
    for group in (dims, zero):
        if group:
            t = reduce(lambda a, b: _like(a, torch.promote_types(a.dtype, b.dtype)), group)
            acc = t if acc is None else _like(acc, torch.result_type(acc, t))
    for s in scalars:
        acc = _like(acc, torch.result_type(acc, s))
    return np_dtype(acc.dtype)


def is_float(dtype: Any) -> bool:
    """Floating or complex."""
    return jnp.issubdtype(dtype, jnp.inexact)


def float_type(*args: Any) -> np.dtype:
    """torch's result dtype for a floating op (``sqrt``, true ``div``): integer and bool
    inputs promote to the default float dtype."""
    dt = result_type(*args)
    return dt if is_float(dt) else np_dtype(torch.get_default_dtype())


def acc_dtype(dtype: Any) -> np.dtype:
    """The dtype torch computes in on CPU: float32 for float16/bfloat16 (``opmath_type``),
    the dtype itself otherwise."""
    dtype = np.dtype(dtype)
    return np.dtype("float32") if dtype in _LOW else dtype


def exact_div(a: Any, b: Any) -> Any:
    """``a / b`` rounded as one IEEE division in ``a``'s dtype (``b`` an array or a Python
    number). XLA's CPU compiler turns a division by a constant or by a broadcast scalar into a
    multiplication by its rounded reciprocal, which can differ in the last bit from the
    division torch's kernels make; a float32 quotient computed in float64 and rounded once
    is the exact float32 quotient (53 >= 2 * 24 + 2 bits). Other dtypes divide as they are."""
    if a.dtype == np.float32:
        return (a.astype(np.float64) / jnp.asarray(b).astype(np.float64)).astype(np.float32)
    return a / b


def cast(x: Any, dtype: Any) -> Any:
    """``x`` (array or scalar) as an array of ``dtype``."""
    return jnp.asarray(x, dtype=dtype)


def dim(d: int, ndim: int) -> int:
    """A non-negative dim (torch wraps negative dims; a 0-dim tensor accepts 0 and -1)."""
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"dim {d} out of range for a tensor of rank {ndim}")
    return d % n if ndim else 0


def dims(ds: Any, ndim: int) -> tuple[int, ...]:
    """Non-negative dims; ``None`` or ``[]`` mean every dim (as in ``sum.dim_IntList``)."""
    if ds is None or (isinstance(ds, (list, tuple)) and len(ds) == 0):
        return tuple(range(ndim))
    if isinstance(ds, int):
        ds = [ds]
    return tuple(sorted({dim(d, ndim) for d in ds})) if ndim else ()


def arg_extreme(x: Any, axis: int, largest: bool = True) -> Any:
    """Index (int64) of the first maximum (``largest``) or minimum of ``x`` along ``axis``,
    NaN counting as the extreme, as torch's ``argmax``/``max.dim``/max pooling choose.

    Built from single-operand reductions (max/min, then the min index among the hits) rather
    than ``jnp.argmax``'s variadic reduce, which JAX cannot differentiate through once it is
    re-interpreted from StableHLO.
    """
    if x.dtype == np.bool_:
        x = x.astype(np.int8)
    m = jnp.max(x, axis=axis, keepdims=True) if largest else jnp.min(x, axis=axis, keepdims=True)
    hit = x == m
    if is_float(x.dtype):
        hit = hit | jnp.isnan(x)
    iota = lax.broadcasted_iota(np.int64, x.shape, axis)
    return jnp.min(jnp.where(hit, iota, x.shape[axis]), axis=axis)
