"""Factory ATen ops: ``full``, ``zeros``/``ones``/``empty`` (and ``*_like``),
``scalar_tensor``, ``arange``, ``fill``, ``eye``, and the graph's no-op assertions
(``native_functions.yaml``).

``empty`` tensors are zeros: their contents are undefined in torch, and a value that is
never read costs nothing after XLA's dead-code elimination. Layout, device and
``pin_memory`` arguments are accepted and ignored.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from converter import _jax_internal

from ..registry import register
from ._util import np_dtype

aten = torch.ops.aten


def _dtype_of_fill(value, dtype):
    """torch's dtype for a factory: ``dtype``, else bool/int64/default float by the
    Python type of ``value``."""
    if dtype is not None:
        return np_dtype(dtype)
    return np_dtype(torch.tensor(value).dtype) if not hasattr(value, "dtype") else np.dtype(value.dtype)


@register(aten.full.default)
def full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A tensor of ``size`` filled with ``fill_value``."""
    return jnp.full(tuple(size), fill_value, _dtype_of_fill(fill_value, dtype))


@register(aten.full_like.default)
def full_like(x, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """``full(x.shape, fill_value)`` in ``dtype`` or ``x``'s dtype."""
    return jnp.full(x.shape, fill_value, np_dtype(dtype) if dtype is not None else x.dtype)


def _const_factory(value, doc):
    def rule(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        dt = np_dtype(dtype) if dtype is not None else np_dtype(torch.get_default_dtype())
        return jnp.full(tuple(size), value, dt)

    rule.__doc__ = doc
    return rule


register(aten.zeros.default)(_const_factory(0, "Zeros of ``size``."))
register(aten.ones.default)(_const_factory(1, "Ones of ``size``."))
register(aten.empty.memory_format)(_const_factory(0, "An uninitialized tensor (zeros here)."))


@register(aten.empty_permuted.default)
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, pin_memory=None):
    """An uninitialized tensor of ``size`` (zeros here; the physical layout does not apply)."""
    return _const_factory(0, "")(size, dtype=dtype)


@register(aten.empty_strided.default)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    """An uninitialized tensor of ``size`` (zeros here; strides do not apply to values)."""
    return _const_factory(0, "")(size, dtype=dtype)


def _like_factory(value, doc):
    def rule(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        return jnp.full(x.shape, value, np_dtype(dtype) if dtype is not None else x.dtype)

    rule.__doc__ = doc
    return rule


register(aten.zeros_like.default)(_like_factory(0, "Zeros shaped like ``x``."))
register(aten.ones_like.default)(_like_factory(1, "Ones shaped like ``x``."))
register(aten.empty_like.default)(_like_factory(0, "An uninitialized tensor like ``x`` (zeros)."))


def _new_factory(value, doc):
    def rule(x, size, *, dtype=None, layout=None, device=None, pin_memory=None):
        return jnp.full(tuple(size), value, np_dtype(dtype) if dtype is not None else x.dtype)

    rule.__doc__ = doc
    return rule


register(aten.new_zeros.default)(_new_factory(0, "Zeros of ``size`` in ``x``'s dtype."))
register(aten.new_ones.default)(_new_factory(1, "Ones of ``size`` in ``x``'s dtype."))
register(aten.new_empty.default)(_new_factory(0, "Uninitialized (zeros) of ``size`` in ``x``'s dtype."))


@register(aten.new_empty_strided.default)
def new_empty_strided(x, size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    """Uninitialized (zeros) of ``size`` in ``dtype`` or ``x``'s dtype; strides do not apply."""
    return jnp.zeros(tuple(size), np_dtype(dtype) if dtype is not None else x.dtype)


@register(aten.new_full.default)
def new_full(x, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    """``full(size, fill_value)`` in ``dtype`` or ``x``'s dtype."""
    return jnp.full(tuple(size), fill_value, np_dtype(dtype) if dtype is not None else x.dtype)


@register(aten.scalar_tensor.default)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A 0-dim tensor holding ``s`` (default float dtype unless ``dtype``)."""
    return jnp.asarray(s, np_dtype(dtype) if dtype is not None else np_dtype(torch.get_default_dtype()))


@register(aten.fill.Scalar, aten.fill.Tensor)
def fill(x, value):
    """A tensor like ``x`` filled with ``value`` (a scalar or 0-dim tensor)."""
    return jnp.broadcast_to(jnp.asarray(value).astype(x.dtype), x.shape)


def _arange_length(start, end, step):
    """``ceil((end - start) / step)`` computed in double as torch does; for integer bounds
    with a symbolic dimension (dynamic shapes), the same in integer arithmetic as torch's
    reference writes it, ``(end - start + step - sign(step)) // step``: the same expression,
    so that it matches the size torch.export gives the result (``floordiv(-n, -2)`` is not
    provably ``floordiv(n, 2)``)."""
    if _symbolic(start, end, step) and all(isinstance(v, int) for v in (step,)) and step:
        return (end - start + step - (1 if step > 0 else -1)) // step
    n = int(np.ceil((float(end) - float(start)) / float(step)))
    return max(n, 0)


def _symbolic(*values) -> bool:
    """Whether any of ``values`` is a ``jax.export`` symbolic dimension."""
    import jax

    return any(jax.export.is_symbolic_dim(v) for v in values)


@register(aten.arange.start_step, aten.arange.start, aten.arange.default)
def arange(start, end=None, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    """``start + i * step`` for ``i < ceil((end - start) / step)``; the dtype is ``dtype``,
    else int64 when every bound is an integer, else the default float dtype. Float
    values are computed in float64 (torch's accumulation type) and rounded once."""
    if end is None:
        start, end = 0, start
    n = _arange_length(start, end, step)
    if dtype is not None:
        out = np_dtype(dtype)
    elif all(
        (isinstance(v, (int, np.integer)) and not isinstance(v, bool)) or _symbolic(v)
        for v in (start, end, step)
    ):
        out = np.dtype(np.int64)
    else:
        out = np_dtype(torch.get_default_dtype())
    if jnp.issubdtype(out, jnp.integer):
        if _symbolic(n):
            return lax.iota(np.int64, n) * step + start
        return lax.iota(np.int64, n) * int(step) + int(start) if n else jnp.zeros((0,), out)
    i = lax.iota(np.float64, n)
    return (i * float(step) + float(start)).astype(out)


@register(aten.eye.default, aten.eye.m)
def eye(n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None):
    """The ``n x m`` identity (``m`` defaults to ``n``)."""
    dt = np_dtype(dtype) if dtype is not None else np_dtype(torch.get_default_dtype())
    return jnp.eye(n, n if m is None else m, dtype=dt)


@register(aten._assert_tensor_metadata.default)
def assert_noop(*args, **kwargs):
    """Export-time assertions (dtype/shape metadata); checked when the graph was exported,
    so a no-op here."""
    return None


@register(aten._assert_scalar.default)
def assert_scalar(cond, assert_msg=None):
    """``torch.export``'s runtime assert on sizes (``aten::_assert_scalar(Scalar self, str
    assert_msg)``; in the graph with ``prefer_deferred_runtime_asserts_over_guards=True``).
    A condition the dimensions' ranges decide was checked when exporting (one that is false
    for every size raises here). One that only the input sizes decide (a run-time bool from
    the comparison rules of ``ops/symbolic.py``) becomes a ``custom_call @shape_assertion``,
    as ``jax.export`` writes its dimension constraints: the backends refuse sizes torch would
    refuse when the call's shapes are known (the JAX function at shape refinement, the torch
    module as a ``torch._check``).

    (``aten.sym_constrain_range_for_size`` has no rule: it comes only with data-dependent
    sizes, which conversion refuses, or is dropped with the padded ``nonzero``.)

    Raises:
        ValueError: ``cond`` is False whatever the sizes.
    """
    if isinstance(cond, (bool, np.bool_)):
        if not cond:
            raise ValueError(f"the program's size assertion fails for every input size: {assert_msg}")
        return None
    _jax_internal.shape_assertion(cond, f"torch.export's size assertion failed: {assert_msg}")
    return None


@register(aten._assert_async.default, aten._assert_async.msg)
def assert_async(cond, assert_msg=None):
    """``torch._assert_async(cond, msg)``: a check on tensor values (``one_hot``'s class
    range, ...). StableHLO has no runtime assertion on values, so the check is not kept: for
    inputs eager torch rejects, the converted function returns the decomposition's values, as
    an XLA-compiled torch function does."""
    return None


def _tri_indices(row, col, offset, upper):
    rows, cols = np.indices((row, col))
    keep = (cols - rows >= offset) if upper else (cols - rows <= offset)
    return np.stack([rows[keep], cols[keep]])


@register(aten.triu_indices.default)
def triu_indices(row, col, offset=0, *, dtype=None, layout=None, device=None, pin_memory=None):
    """``(2, K)`` row/column indices of the upper triangle (``col - row >= offset``), row-major."""
    return jnp.asarray(
        _tri_indices(row, col, offset, True), np_dtype(dtype) if dtype is not None else np.int64
    )


@register(aten.tril_indices.default)
def tril_indices(row, col, offset=0, *, dtype=None, layout=None, device=None, pin_memory=None):
    """``(2, K)`` row/column indices of the lower triangle (``col - row <= offset``), row-major."""
    return jnp.asarray(
        _tri_indices(row, col, offset, False), np_dtype(dtype) if dtype is not None else np.int64
    )
