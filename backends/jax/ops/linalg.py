"""``dot_general``, ``dot``, ``convolution``, ``triangular_solve``, ``cholesky`` and the deprecated
``einsum``/``unary_einsum`` (StableHLO spec sections of those names)."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax
from jaxlib.mlir import ir

from converter import dtypes, mlir

from ..registry import register

_PRECISION = {"DEFAULT": lax.Precision.DEFAULT, "HIGH": lax.Precision.HIGH, "HIGHEST": lax.Precision.HIGHEST}


def _precision(op):
    config = op.attr("precision_config") or []
    if not config:
        return None
    return tuple(_PRECISION[p] for p in config)


def _untransposed(interp, op, index: int, value, contracting: tuple, batch: tuple):
    """Operand ``index`` of a ``dot_general`` as ``(value, contracting, batch)``: when it is a
    ``stablehlo.transpose`` whose permutation keeps the operand's free (non-contracting,
    non-batch) dimensions in order, the transpose's input with the dimension numbers mapped
    through the permutation (the same product: the result lists batch, then lhs free, then
    rhs free dimensions, each in operand order). Otherwise the operand as it is.

    XLA's CPU compiler does not fold such a transpose into a matrix-vector product (a
    ``Linear`` called on one row: ``x @ W.T``); it materializes the transposed weight, a
    full copy of it on every call."""
    owner = op.operands[index].owner
    owner = getattr(owner, "operation", owner)
    if not isinstance(owner, ir.Operation) or owner.name != "stablehlo.transpose":
        return value, contracting, batch
    source = interp.env.get(owner.operands[0])
    if source is None:
        return value, contracting, batch
    perm = tuple(mlir.Op(owner).attr("permutation"))
    free = [perm[i] for i in range(len(perm)) if i not in contracting and i not in batch]
    if free != sorted(free):
        return value, contracting, batch
    return source, tuple(perm[i] for i in contracting), tuple(perm[i] for i in batch)


@register("stablehlo.dot_general")
def _dot_general(interp, op, lhs, rhs):
    """``lax.dot_general``, an operand's ``transpose`` folded into the dimension numbers
    (see :func:`_untransposed`)."""
    d = op.attr("dot_dimension_numbers")
    lhs, lc, lb = _untransposed(
        interp, op, 0, lhs, tuple(d["lhs_contracting_dimensions"]), tuple(d["lhs_batching_dimensions"])
    )
    rhs, rc, rb = _untransposed(
        interp, op, 1, rhs, tuple(d["rhs_contracting_dimensions"]), tuple(d["rhs_batching_dimensions"])
    )
    out = dtypes.to_numpy(op.result_type.dtype)
    return lax.dot_general(
        lhs, rhs, ((lc, rc), (lb, rb)), precision=_precision(op), preferred_element_type=out
    )


@register("stablehlo.dot")
def _dot(interp, op, lhs, rhs):
    out = dtypes.to_numpy(op.result_type.dtype)
    return lax.dot(lhs, rhs, precision=_precision(op), preferred_element_type=out)


@register("stablehlo.convolution")
def _convolution(interp, op, lhs, rhs):
    d = op.attr("dimension_numbers")
    rank = op.operand_type(0).rank
    nspatial = rank - 2
    window_reversal = op.attr("window_reversal")
    if window_reversal and any(window_reversal):
        rhs = lax.rev(
            rhs, tuple(d["kernel_spatial_dimensions"][i] for i, r in enumerate(window_reversal) if r)
        )
    dn = lax.ConvDimensionNumbers(
        lhs_spec=(d["input_batch_dimension"], d["input_feature_dimension"], *d["input_spatial_dimensions"]),
        rhs_spec=(
            d["kernel_output_feature_dimension"],
            d["kernel_input_feature_dimension"],
            *d["kernel_spatial_dimensions"],
        ),
        out_spec=(
            d["output_batch_dimension"],
            d["output_feature_dimension"],
            *d["output_spatial_dimensions"],
        ),
    )
    padding = op.attr("padding")
    padding = [(0, 0)] * nspatial if padding is None else [tuple(int(v) for v in p) for p in padding]
    return lax.conv_general_dilated(
        lhs,
        rhs,
        window_strides=op.attr("window_strides") or [1] * nspatial,
        padding=padding,
        lhs_dilation=op.attr("lhs_dilation") or [1] * nspatial,
        rhs_dilation=op.attr("rhs_dilation") or [1] * nspatial,
        dimension_numbers=dn,
        feature_group_count=op.attr("feature_group_count", 1),
        batch_group_count=op.attr("batch_group_count", 1),
        precision=_precision(op),
        preferred_element_type=dtypes.to_numpy(op.result_type.dtype),
    )


@register("stablehlo.triangular_solve")
def _triangular_solve(interp, op, a, b):
    """StableHLO spec: triangular_solve. Solves ``op(a) x = b`` (``left_side``) or
    ``x op(a) = b`` with ``op`` the identity, transpose or adjoint (``transpose_a``), reading
    only the ``lower``/upper triangle of ``a`` and taking its diagonal as ones when
    ``unit_diagonal``: exactly ``lax.linalg.triangular_solve``'s parameters (JAX emits this op
    for float16/bfloat16; wider types go to LAPACK's ``?trsm``).

    Shapes: ``a`` ``[..., M, M]``; ``b`` ``[..., M, N]`` (left side) or ``[..., N, M]``."""
    transpose = str(op.attr("transpose_a"))
    return lax.linalg.triangular_solve(
        a,
        b,
        left_side=bool(op.attr("left_side")),
        lower=bool(op.attr("lower")),
        transpose_a=transpose != "NO_TRANSPOSE",
        conjugate_a=transpose == "ADJOINT",
        unit_diagonal=bool(op.attr("unit_diagonal")),
    )


@register("stablehlo.cholesky")
def _cholesky(interp, op, a):
    """The Cholesky factor of each matrix of ``a``: lower-triangular ``L`` with ``a = L L^H``
    when ``lower``, else upper ``U`` with ``a = U^H U``; only that triangle of ``a`` is read
    (the spec's semantics; the other triangle of the result is zero)."""
    lower = bool(op.attr("lower", False))
    herm = lambda m: jnp.conj(jnp.swapaxes(m, -1, -2))  # noqa: E731
    sym = jnp.tril(a) + herm(jnp.tril(a, -1)) if lower else jnp.triu(a) + herm(jnp.triu(a, 1))
    factor = lax.linalg.cholesky(sym, symmetrize_input=False)
    return factor if lower else herm(factor)


@register("stablehlo.einsum")
def _einsum(interp, op, lhs, rhs):
    """The deprecated ``einsum``: ``jnp.einsum`` of its ``einsum_config``."""
    return jnp.einsum(op.attr("einsum_config"), lhs, rhs)


@register("stablehlo.unary_einsum")
def _unary_einsum(interp, op, x):
    """The deprecated ``unary_einsum`` (its config is written ``",ab->ba"``)."""
    return jnp.einsum(op.attr("einsum_config").lstrip(","), x)
