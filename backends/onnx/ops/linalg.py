"""``dot_general`` → ``Einsum`` and ``convolution`` → ``Conv`` (with transposes to ONNX's
``[N, C, spatial...]`` / ``[O, I, spatial...]`` layouts; ``lhs_dilation``, as transposed
convolutions and input gradients have it, inserts the zeros with an interior pad first)."""

from __future__ import annotations

import itertools
import math
import string

import numpy as np
from jaxlib.mlir import ir

from converter import dtypes, mlir

from ..graph import onnx_dtype
from ..registry import register
from .shape import interior_pad


def _cast_to_result(interp, op, x, i):
    want = op.result_type.dtype
    if op.operand_type(i).dtype != want:
        return interp.graph.op("Cast", [x], to=onnx_dtype(want))
    return x


@register("stablehlo.dot_general", dynamic=True)
def dot_general(interp, op, lhs, rhs):
    """Any dimension numbers as one Einsum: batch dims, then lhs free, then rhs free dims
    (the result order the StableHLO spec defines)."""
    d = op.attr("dot_dimension_numbers")
    lr, rr = op.operand_type(0).rank, op.operand_type(1).rank
    letters = iter(string.ascii_letters)
    lhs_l = [next(letters) for _ in range(lr)]
    rhs_l = [None] * rr
    for a, b in zip(d["lhs_batching_dimensions"], d["rhs_batching_dimensions"], strict=True):
        rhs_l[b] = lhs_l[a]
    for a, b in zip(d["lhs_contracting_dimensions"], d["rhs_contracting_dimensions"], strict=True):
        rhs_l[b] = lhs_l[a]
    rhs_l = [c or next(letters) for c in rhs_l]
    batch = [lhs_l[a] for a in d["lhs_batching_dimensions"]]
    used_l = set(d["lhs_batching_dimensions"]) | set(d["lhs_contracting_dimensions"])
    used_r = set(d["rhs_batching_dimensions"]) | set(d["rhs_contracting_dimensions"])
    out = (
        batch
        + [c for i, c in enumerate(lhs_l) if i not in used_l]
        + [c for i, c in enumerate(rhs_l) if i not in used_r]
    )
    eq = f"{''.join(lhs_l)},{''.join(rhs_l)}->{''.join(out)}"
    lhs, rhs = _cast_to_result(interp, op, lhs, 0), _cast_to_result(interp, op, rhs, 1)
    form = matmul_form(op)
    if form is not None:
        g = interp.graph
        if form == "gemm_t":  # rhs is a transposed [n, k] matrix: Gemm reads it as it is
            return g.op("Gemm", [lhs, interp.env[_owner(op.operands[1]).operands[0]]], transB=1)
        return g.op("MatMul", [lhs, rhs])
    return interp.graph.op_as("Einsum", [lhs, rhs], op.result_type.dtype, data=(0, 1), equation=eq)


#: Result types of the contractions emitted as ``MatMul``/``Gemm`` (onnxruntime's kernels).
_MATMUL_TYPES = ("float32", "float64", "float16")


def matmul_form(op) -> str | None:
    """How a ``dot_general`` maps onto ONNX's matrix products: ``"matmul"`` when the
    operands are ``[batch..., m, k]`` and ``[batch..., k, n]`` (the same leading batch
    dimensions, or none and a ``[k, n]`` right operand, ``MatMul``'s broadcasting) with
    operands of the result type; ``"gemm_t"`` for ``[m, k] x transpose([n, k])`` (``Gemm``
    with ``transB``, no transpose node); else None (an ``Einsum``)."""
    d = op.attr("dot_dimension_numbers")
    lt, rt = op.operand_type(0), op.operand_type(1)
    dtype = op.result_type.dtype
    if dtype not in _MATMUL_TYPES or lt.dtype != dtype or rt.dtype != dtype or lt.rank < 2 or rt.rank < 2:
        return None
    lb, rb = list(d["lhs_batching_dimensions"]), list(d["rhs_batching_dimensions"])
    lc, rc = list(d["lhs_contracting_dimensions"]), list(d["rhs_contracting_dimensions"])
    nb = len(lb)
    if lb != list(range(nb)) or rb != list(range(nb)) or lc != [lt.rank - 1] or len(rc) != 1:
        return None
    if rt.rank == nb + 2 and rc == [nb] and (nb == 0 or lt.rank == nb + 2):
        owner = _owner(op.operands[1])
        raw = mlir.tensor_type(op.operands[1].type).dtype  # not a real-pair or widened view's type
        transposed = owner is not None and owner.name == "stablehlo.transpose" and raw == dtype
        if nb == 0 and lt.rank == 2 and transposed:
            return "gemm_t"
        return "matmul"
    return None


def _owner(value):
    """The ``ir.Operation`` defining ``value`` (None for a block argument)."""
    owner = getattr(value.owner, "operation", value.owner)
    return owner if isinstance(owner, ir.Operation) else None


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


#: Operand types whose convolution ``Conv`` computes (onnxruntime's CPU ``Conv`` has float32
#: and float16 kernels; bfloat16 arrives widened to float32). Others go through im2col.
_CONV_TYPES = ("float32", "float16")


@register("stablehlo.convolution", dynamic=True)
def _convolution(interp, op, lhs, rhs):
    """StableHLO spec: convolution, as ONNX ``Conv`` on ``[N, C, spatial...]`` and
    ``[O, I, spatial...]`` transposes of the operands; ``lhs_dilation`` inserts zeros first
    (:func:`~converter.backends.onnx.ops.shape.interior_pad`), negative padding crops with ``Pad``.
    float64 and integer convolutions, which onnxruntime's ``Conv`` cannot run (ONNX ``Conv``
    takes no integers; onnxruntime has no float64 kernel), go through :func:`_conv_im2col`.

    Raises:
        NotImplementedError: ``batch_group_count > 1``, ``window_reversal``, complex operands,
            float64/integer convolutions with a dynamic channel count or kernel size.
    """
    d = op.attr("dimension_numbers")
    nsp = op.operand_type(0).rank - 2
    dtype = op.operand_type(0).dtype
    if dtypes.is_complex(dtype):
        raise NotImplementedError(f"convolution on {dtype}: ONNX operators take no complex values")
    if op.attr("batch_group_count", 1) != 1:
        raise NotImplementedError("convolution with batch_group_count > 1")
    if any(op.attr("window_reversal") or []):
        raise NotImplementedError("convolution with window_reversal")
    padding = op.attr("padding")
    pads = [[0, 0]] * nsp if padding is None else [[int(a), int(b)] for a, b in padding]
    lhs_dilation = list(op.attr("lhs_dilation") or [1] * nsp)
    g = interp.graph
    in_perm = [d["input_batch_dimension"], d["input_feature_dimension"], *d["input_spatial_dimensions"]]
    k_perm = [
        d["kernel_output_feature_dimension"],
        d["kernel_input_feature_dimension"],
        *d["kernel_spatial_dimensions"],
    ]
    out_perm = [d["output_batch_dimension"], d["output_feature_dimension"], *d["output_spatial_dimensions"]]
    im2col = op.result_type.dtype not in _CONV_TYPES
    dtype = _im2col_type(op.result_type.dtype) if im2col else op.result_type.dtype
    lhs, rhs = (  # operands of another type (preferred_element_type) are cast first
        x if t == dtype else g.cast(x, dtype)
        for x, t in ((lhs, op.operand_type(0).dtype), (rhs, op.operand_type(1).dtype))
    )
    x = g.op("Transpose", [lhs], perm=in_perm)
    w = g.op("Transpose", [rhs], perm=k_perm)
    if any(v != 1 for v in lhs_dilation):  # zeros between input elements, then the padding
        shape = [op.operand_type(0).shape[i] for i in in_perm]
        zero = g.const(0, dtype)
        x = interior_pad(g, x, zero, shape, [0, 0] + [v - 1 for v in lhs_dilation], dtype)
    if im2col or any(v < 0 for p in pads for v in p):  # Conv pads cannot crop: an explicit Pad can
        edges = [0, 0] + [p[0] for p in pads] + [0, 0] + [p[1] for p in pads]
        if any(edges):
            x = g.op_as("Pad", [x, g.ints(edges)], dtype, mode="constant")
        pads = [[0, 0]] * nsp
    strides = list(op.attr("window_strides") or [1] * nsp)
    dilations = list(op.attr("rhs_dilation") or [1] * nsp)
    groups = op.attr("feature_group_count", 1)
    if im2col:
        y = _conv_im2col(
            interp, op, x, w, [op.result_type.shape[i] for i in out_perm], strides, dilations, groups
        )
        y = y if dtype == op.result_type.dtype else g.cast(y, op.result_type.dtype)
    else:
        y = g.op(
            "Conv",
            [x, w],
            strides=strides,
            pads=[p[0] for p in pads] + [p[1] for p in pads],
            dilations=dilations,
            group=groups,
        )
    return g.op("Transpose", [y], perm=_inverse(out_perm))


def _im2col_type(result: str) -> str:
    """The type an im2col convolution multiplies in: float64 as it is; integers as uint64,
    whose products and sums wrap modulo 2**64, so the result cast back to a narrower integer
    type is the wrapped value XLA computes (two's complement: the low bits agree)."""
    return result if dtypes.is_floating(result) else "uint64"


def _conv_im2col(interp, op, x, w, out_shape, strides, dilations, groups):
    """Convolution of padded ``x`` ``[N, C, spatial...]`` with ``w`` ``[O, C/groups,
    window...]`` as one ``MatMul``: each window offset's strided ``Slice`` of ``x`` (im2col)
    stacked to ``[N, groups, C/groups * window, L]`` (``L`` output positions), times the
    kernel as ``[groups, O/groups, C/groups * window]``; the result ``[N, O, out...]`` (the
    ``out_shape`` in that layout). onnxruntime has ``MatMul`` for float64 and uint64.

    A dynamic batch or spatial size (a quantized model's ``ConvInteger``/``QLinearConv`` with
    a symbolic batch) slices each window offset up to a distance from the end (a negative
    ``Slice`` end) and reshapes with run-time sizes.

    Raises:
        NotImplementedError: a dynamic channel count or kernel size.
    """
    g = interp.graph
    x_shape = _layout_shape(op, 0)
    k_shape = _layout_shape(op, 1)
    if None in x_shape[1:2] or None in k_shape:
        raise NotImplementedError(
            f"convolution on {op.result_type.dtype} with a dynamic channel count or kernel size (im2col)"
        )
    dynamic = None in x_shape or None in out_shape
    n, c, out_sp = x_shape[0], x_shape[1], out_shape[2:]
    work = _im2col_type(op.result_type.dtype)
    if c == 0 and not dynamic and work == "uint64":  # an empty sum: onnxruntime's uint64
        return g.const(np.zeros(out_shape, np.uint64))  # MatMul fails on it (float64's works)
    o, window = k_shape[0], k_shape[2:]
    axes = list(range(2, 2 + len(window)))
    cols = []
    piece = None
    for offset in itertools.product(*(range(k) for k in window)):
        starts = [i * dl for i, dl in zip(offset, dilations, strict=True)]
        if dynamic:  # the window's last tap sits (k - 1) * dilation - start before the end
            back = [(k - 1) * dl - s for k, dl, s in zip(window, dilations, starts, strict=True)]
            ends = [-b if b else _INT64_MAX for b in back]
        else:
            ends = [s + (m - 1) * st + 1 for s, m, st in zip(starts, out_sp, strides, strict=True)]
        piece = g.op("Slice", [x, g.ints(starts), g.ints(ends), g.ints(axes), g.ints(strides)])
        cols.append(g.op("Unsqueeze", [piece, g.ints([2])]))
    cols = cols[0] if len(cols) == 1 else g.op("Concat", cols, axis=2)
    taps = math.prod(window)
    kernel = g.op("Reshape", [w, g.ints([groups, o // groups, c // groups * taps])], allowzero=1)
    if dynamic:  # 0 copies the batch size (allowzero=0), -1 is the positions
        cols = g.op("Reshape", [cols, g.ints([0, groups, c // groups * taps, -1])])
        y = g.op("MatMul", [kernel, cols])
        spatial = g.op("Shape", [piece], start=2)
        return g.op("Reshape", [y, g.op("Concat", [g.ints([0, o]), spatial], axis=0)])
    positions = math.prod(out_sp)
    cols = g.op("Reshape", [cols, g.ints([n, groups, c // groups * taps, positions])], allowzero=1)
    y = g.op("MatMul", [kernel, cols])
    return g.op("Reshape", [y, g.ints([n, o, *out_sp])], allowzero=1)


_INT64_MAX = 2**63 - 1


def _layout_shape(op, i):
    """Operand ``i``'s static shape in ONNX's layout (``[N, C, spatial...]`` for the input,
    ``[O, I, spatial...]`` for the kernel), before any padding."""
    d = op.attr("dimension_numbers")
    shape = op.operand_type(i).shape
    if i == 0:
        perm = [d["input_batch_dimension"], d["input_feature_dimension"], *d["input_spatial_dimensions"]]
    else:
        perm = [
            d["kernel_output_feature_dimension"],
            d["kernel_input_feature_dimension"],
            *d["kernel_spatial_dimensions"],
        ]
    return [shape[p] for p in perm]


_DOT_EQUATIONS = {(1, 1): "a,a->", (2, 1): "ab,b->a", (1, 2): "a,ab->b", (2, 2): "ab,bc->ac"}


@register("stablehlo.dot")
def _dot(interp, op, lhs, rhs):
    """The deprecated ``dot`` (vector or matrix operands, contracting the last dimension of
    ``lhs`` with the first of ``rhs``) as one ``Einsum``."""
    eq = _DOT_EQUATIONS[(op.operand_type(0).rank, op.operand_type(1).rank)]
    lhs, rhs = _cast_to_result(interp, op, lhs, 0), _cast_to_result(interp, op, rhs, 1)
    return interp.graph.op_as("Einsum", [lhs, rhs], op.result_type.dtype, data=(0, 1), equation=eq)


@register("stablehlo.einsum")
def _einsum(interp, op, lhs, rhs):
    """The deprecated ``einsum``: ONNX ``Einsum`` with its ``einsum_config``."""
    eq = op.attr("einsum_config")
    return interp.graph.op_as("Einsum", [lhs, rhs], op.result_type.dtype, data=(0, 1), equation=eq)


@register("stablehlo.unary_einsum")
def _unary_einsum(interp, op, x):
    """The deprecated ``unary_einsum`` (its config is written ``",ab->ba"``)."""
    eq = op.attr("einsum_config").lstrip(",")
    return interp.graph.op_as("Einsum", [x], op.result_type.dtype, equation=eq)
