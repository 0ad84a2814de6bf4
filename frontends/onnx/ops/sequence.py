"""Sequence and optional ONNX ops over Python lists (a sequence's length is static in
StableHLO): SequenceConstruct/Empty/At/Insert/Erase/Length, ConcatFromSequence,
SplitToSequence, Optional/OptionalHasElement/OptionalGetElement
(https://onnx.ai/onnx/operators/)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..registry import onnx_op


def _pos(ctx, i, n, default):
    p = ctx.static(i)
    if p is None:
        return default
    p = int(np.asarray(p).reshape(()))
    return p + n if p < 0 else p


@onnx_op("SequenceConstruct", 11)
def sequence_construct(ctx, *xs):
    return list(xs)


@onnx_op("SequenceEmpty", 11)
def sequence_empty(ctx, *, dtype=None):
    return []


@onnx_op("SequenceAt", 11)
def sequence_at(ctx, seq, position):
    return seq[_pos(ctx, 1, len(seq), 0)]


@onnx_op("SequenceInsert", 11)
def sequence_insert(ctx, seq, x, position=None):
    seq = list(seq)
    seq.insert(_pos(ctx, 2, len(seq), len(seq)), x)
    return seq


@onnx_op("SequenceErase", 11)
def sequence_erase(ctx, seq, position=None):
    seq = list(seq)
    del seq[_pos(ctx, 1, len(seq), len(seq) - 1)]
    return seq


@onnx_op("SequenceLength", 11)
def sequence_length(ctx, seq):
    return np.array(len(seq), np.int64)


@onnx_op("ConcatFromSequence", 11)
def concat_from_sequence(ctx, seq, *, axis, new_axis=0):
    if new_axis:
        return jnp.stack(seq, axis=axis)
    return jnp.concatenate(seq, axis=axis)


@onnx_op("SplitToSequence", 11)
def split_to_sequence(ctx, x, split=None, *, axis=0, keepdims=1):
    axis = axis % x.ndim
    s = ctx.static(1)
    if s is None:
        parts = [
            jnp.take(x, i, axis=axis) if not keepdims else jnp.take(x, jnp.array([i]), axis=axis)
            for i in range(x.shape[axis])
        ]
        return parts
    s = np.asarray(s)
    if s.ndim == 0:
        n = int(s)
        sizes = [n] * (x.shape[axis] // n) + ([x.shape[axis] % n] if x.shape[axis] % n else [])
    else:
        sizes = [int(v) for v in s]
    return list(jnp.split(x, np.cumsum(sizes)[:-1], axis=axis))


@onnx_op("Optional", 15)
def optional(ctx, x=None, *, type=None):  # noqa: A002
    return x


@onnx_op("OptionalHasElement", 15)
def optional_has_element(ctx, x=None):
    return np.array(x is not None)


@onnx_op("OptionalGetElement", 15)
def optional_get_element(ctx, x):
    return x
