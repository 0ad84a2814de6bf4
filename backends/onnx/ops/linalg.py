"""``dot_general`` → ``Einsum`` and ``convolution`` → ``Conv`` (with transposes to ONNX's
``[N, C, spatial...]`` / ``[O, I, spatial...]`` layouts; ``lhs_dilation``, as transposed
convolutions and input gradients have it, inserts the zeros with an interior pad first)."""

from __future__ import annotations

import string

from converter import dtypes

from ..graph import onnx_dtype
from ..registry import register
from .shape import interior_pad


def _cast_to_result(interp, op, x, i):
    want = op.result_type.dtype
    if op.operand_type(i).dtype != want:
        return interp.graph.op("Cast", [x], to=onnx_dtype(want))
    return x


@register("stablehlo.dot_general", dynamic=True)
def _dot_general(interp, op, lhs, rhs):
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
    return interp.graph.op_as("Einsum", [lhs, rhs], op.result_type.dtype, data=(0, 1), equation=eq)


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


@register("stablehlo.convolution", dynamic=True)
def _convolution(interp, op, lhs, rhs):
    d = op.attr("dimension_numbers")
    nsp = op.operand_type(0).rank - 2
    if not dtypes.is_floating(op.operand_type(0).dtype):
        raise NotImplementedError(f"convolution on {op.operand_type(0).dtype}: ONNX Conv takes floats only")
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
    x = g.op("Transpose", [lhs], perm=in_perm)
    w = g.op("Transpose", [rhs], perm=k_perm)
    dtype = op.operand_type(0).dtype
    if any(v != 1 for v in lhs_dilation):  # zeros between input elements, then the padding
        shape = [op.operand_type(0).shape[i] for i in in_perm]
        zero = g.const(0, dtype)
        x = interior_pad(g, x, zero, shape, [0, 0] + [v - 1 for v in lhs_dilation], dtype)
    if any(v < 0 for p in pads for v in p):  # Conv pads cannot crop: an explicit Pad can
        edges = [0, 0] + [p[0] for p in pads] + [0, 0] + [p[1] for p in pads]
        x = g.op_as("Pad", [x, g.ints(edges)], dtype, mode="constant")
        pads = [[0, 0]] * nsp
    y = g.op(
        "Conv",
        [x, w],
        strides=list(op.attr("window_strides") or [1] * nsp),
        pads=[p[0] for p in pads] + [p[1] for p in pads],
        dilations=list(op.attr("rhs_dilation") or [1] * nsp),
        group=op.attr("feature_group_count", 1),
    )
    return g.op("Transpose", [y], perm=_inverse(out_perm))
