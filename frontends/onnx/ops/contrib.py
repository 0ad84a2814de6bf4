"""onnxruntime's ``com.microsoft`` contrib ops that its own tools write into users' files
(https://github.com/microsoft/onnxruntime/blob/main/docs/ContribOperators.md):

- ``quantize_dynamic``: DynamicQuantizeLSTM;
- ``quantize_static(quant_format=QOperator)``: QLinearAdd, QLinearMul, QLinearSoftmax,
  QLinearGlobalAveragePool, QLinearAveragePool, QLinearSigmoid, QLinearLeakyRelu,
  QLinearConcat, QGemm;
- ``onnxruntime.transformers.optimizer.optimize_model``: Attention, EmbedLayerNormalization,
  SkipLayerNormalization, SkipSimplifiedLayerNormalization, BiasGelu, FastGelu, Gelu,
  QuickGelu.

Quantized ops follow the documented semantics: dequantize (``(q - zero_point) * scale``),
compute in float32, quantize (round half to even, saturate to the zero point's type).
onnxruntime's own kernels compute some of them differently (QLinearAdd/QLinearMul with
fixed-point multipliers on AVX2, QLinearSoftmax through an exp lookup table), so results can
differ from onnxruntime's by one step where a value lies on a rounding half. Integer matrix
products (QGemm) accumulate exactly in int32 and requantize with one float32 multiplier
``alpha * a_scale * b_scale / y_scale``, as onnxruntime does.

Inputs and attributes outside what is implemented (Attention with past state, rotary
embeddings or a 3-D/4-D mask; EmbedLayerNormalization's unused outputs...) raise
:class:`converter.errors.OpConversionError` naming the node and what is missing.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ..registry import ONNX_RULES
from .quantize import saturate_cast

MS = "com.microsoft"


def contrib_op(op_type: str, since: int = 1):
    """Decorator: register a rule for ``com.microsoft::op_type`` (ONNX's ``onnx.defs`` has no
    schemas of this domain; onnxruntime's contrib ops are all version 1)."""
    return ONNX_RULES.register((MS, op_type, since))


def _refuse(ctx, what: str):
    """Raise for an input or attribute outside what the rule implements (the frontend wraps
    it in an ``OpConversionError`` naming the node)."""
    raise NotImplementedError(f"{MS}::{ctx.node.op_type} with {what} is not supported")


def _zp(zp, like=None):
    """A zero point as float32 (0 when omitted)."""
    return jnp.zeros((), np.float32) if zp is None else jnp.asarray(zp).astype(np.float32)


def _out_dtype(zp, x):
    return np.dtype(zp.dtype) if zp is not None else np.dtype(x.dtype)


def _dq(x, scale, zp):
    """``(x - zero_point) * scale`` in float32 (per tensor)."""
    return (x.astype(np.float32) - _zp(zp)) * jnp.asarray(scale, np.float32)


def _q(v, scale, zp, dtype):
    """``saturate(round_half_even(v / scale) + zero_point)``."""
    return saturate_cast(jnp.round(v / jnp.asarray(scale, np.float32)) + _zp(zp), dtype)


def _binary(fn):
    def rule(ctx, a, a_scale, a_zp, b, b_scale, b_zp=None, c_scale=None, c_zp=None):
        """``C = quantize(f(dequantize(A), dequantize(B)))`` with C's scale and zero point
        (per tensor; C has A's type when its zero point is omitted)."""
        return _q(fn(_dq(a, a_scale, a_zp), _dq(b, b_scale, b_zp)), c_scale, c_zp, _out_dtype(c_zp, a))

    return rule


contrib_op("QLinearAdd")(_binary(jnp.add))
contrib_op("QLinearMul")(_binary(jnp.multiply))


def _unary(fn):
    def rule(ctx, x, x_scale, x_zp=None, y_scale=None, y_zp=None, **attrs):
        """``Y = quantize(f(dequantize(X)))`` with Y's scale and zero point (per tensor)."""
        return _q(fn(_dq(x, x_scale, x_zp), **attrs), y_scale, y_zp, _out_dtype(y_zp, x))

    return rule


contrib_op("QLinearSigmoid")(_unary(jax.nn.sigmoid))
contrib_op("QLinearLeakyRelu")(_unary(lambda v, alpha=0.01: jnp.where(v >= 0, v, v * alpha)))


@contrib_op("QLinearSoftmax")
def qlinear_softmax(ctx, x, x_scale, x_zp=None, y_scale=None, y_zp=None, *, axis=-1, opset):
    """Softmax of the dequantized input along ``axis`` (flattened to 2-D at ``axis`` when
    the original Softmax's ``opset`` is below 13), quantized to ``y``."""
    from .reductions import coerced, softmax

    v = _dq(x, x_scale, x_zp)
    s = coerced(softmax, v, axis) if opset < 13 else softmax(v, axis=axis)
    return _q(s, y_scale, y_zp, _out_dtype(y_zp, x))


@contrib_op("QLinearGlobalAveragePool")
def qlinear_global_average_pool(ctx, x, x_scale, x_zp, y_scale, y_zp, *, channels_last=0):
    """Mean over the spatial axes (``[N, C, ...]``, or ``[N, ..., C]`` with ``channels_last``)."""
    axes = tuple(range(1, x.ndim - 1)) if channels_last else tuple(range(2, x.ndim))
    return _q(jnp.mean(_dq(x, x_scale, x_zp), axis=axes, keepdims=True), y_scale, y_zp, _out_dtype(y_zp, x))


@contrib_op("QLinearAveragePool")
def qlinear_average_pool(ctx, x, x_scale, x_zp, y_scale, y_zp, *, channels_last=0, **attrs):
    """AveragePool (the ONNX op's attributes) of the dequantized input."""
    from .nn import average_pool

    if channels_last:
        _refuse(ctx, "channels_last=1")
    v = average_pool(ctx, _dq(x, x_scale, x_zp), **attrs)
    return _q(v, y_scale, y_zp, _out_dtype(y_zp, x))


@contrib_op("QLinearConcat")
def qlinear_concat(ctx, y_scale, y_zp, *inputs, axis):
    """Concatenation of the dequantized ``(x, scale, zero_point)`` triples, quantized to ``y``."""
    xs = [_dq(inputs[i], inputs[i + 1], inputs[i + 2]) for i in range(0, len(inputs), 3)]
    return _q(jnp.concatenate(xs, axis=axis), y_scale, y_zp, _out_dtype(y_zp, inputs[0]))


@contrib_op("QGemm")
def qgemm(
    ctx, a, a_scale, a_zp, b, b_scale, b_zp, c=None, y_scale=None, y_zp=None, *, alpha=1.0, transA=0, transB=0
):
    """``alpha * a_scale * b_scale * ((A - a_zp) @ (B - b_zp) + C)`` with the product and the
    int32 bias ``C`` accumulated exactly in int32; float32 when ``y_scale`` is omitted, else
    quantized to ``y`` with one multiplier ``alpha * a_scale * b_scale / y_scale``
    (``b_scale``/``b_zp`` per tensor or per output column)."""
    a_i = a.astype(np.int32) - jnp.asarray(a_zp).astype(np.int32)
    a_i = a_i.T if transA else a_i
    bz = jnp.asarray(b_zp).astype(np.int32)
    b_i = b.astype(np.int32)
    b_i = (b_i.T if transB else b_i) - bz.reshape((1, -1) if bz.ndim else ())
    acc = jnp.matmul(a_i, b_i, preferred_element_type=np.int32)
    if c is not None:
        acc = acc + c.astype(np.int32)
    bs = jnp.asarray(b_scale, np.float32).reshape((1, -1) if np.ndim(b_scale) else ())
    scale = np.float32(alpha) * jnp.asarray(a_scale, np.float32) * bs
    if y_scale is None:
        return acc.astype(np.float32) * scale
    v = jnp.round(acc.astype(np.float32) * (scale / jnp.asarray(y_scale, np.float32))) + _zp(y_zp)
    return saturate_cast(v, _out_dtype(y_zp, a))


# --- transformer fusions (onnxruntime.transformers.optimizer) ---


def _layer_norm(x, gamma, beta, epsilon, simplified=False):
    """Layer norm over the last axis computed in float32 (onnxruntime's CPU kernels do, also
    for float16), returned in ``x``'s dtype; also the float32 mean and 1/std."""
    xf = x.astype(np.float32)
    m = jnp.zeros(xf.shape[:-1] + (1,), np.float32) if simplified else jnp.mean(xf, axis=-1, keepdims=True)
    d = xf - m
    inv = 1 / jnp.sqrt(jnp.mean(d * d, axis=-1, keepdims=True) + epsilon)
    y = d * inv * gamma.astype(np.float32)
    if beta is not None:
        y = y + beta.astype(np.float32)
    return y.astype(x.dtype), m, inv


@contrib_op("SkipLayerNormalization")
def skip_layer_norm(ctx, x, skip, gamma, beta=None, bias=None, *, epsilon=1e-12):
    """``LayerNorm(x + skip + bias) * gamma + beta`` over the last axis; outputs the result,
    the mean, 1/std and the sum ``x + skip + bias`` (``skip`` may broadcast)."""
    s = x + skip
    if bias is not None:
        s = s + bias
    y, m, inv = _layer_norm(s, gamma, beta, epsilon)
    return (y, m, inv, s)[: ctx.num_outputs]


@contrib_op("SkipSimplifiedLayerNormalization")
def skip_simplified_layer_norm(ctx, x, skip, gamma, bias=None, *, epsilon=1e-12):
    """RMS norm of ``x + skip + bias`` times ``gamma``; outputs as SkipLayerNormalization."""
    s = x + skip
    if bias is not None:
        s = s + bias
    y, m, inv = _layer_norm(s, gamma, None, epsilon, simplified=True)
    return (y, m, inv, s)[: ctx.num_outputs]


@contrib_op("BiasGelu")
def bias_gelu(ctx, x, bias):
    """Exact (erf) GELU of ``x + bias``."""
    return jax.nn.gelu(x + bias, approximate=False)


@contrib_op("Gelu")
def gelu(ctx, x):
    """Exact (erf) GELU."""
    return jax.nn.gelu(x, approximate=False)


@contrib_op("FastGelu")
def fast_gelu(ctx, x, bias=None):
    """The tanh approximation of GELU of ``x + bias``:
    ``0.5 y (1 + tanh(sqrt(2/pi) (y + 0.044715 y^3)))``."""
    y = x if bias is None else x + bias
    return jax.nn.gelu(y, approximate=True)


@contrib_op("QuickGelu")
def quick_gelu(ctx, x, *, alpha=1.702):
    """``x * sigmoid(alpha * x)``."""
    return x * jax.nn.sigmoid(alpha * x)


@contrib_op("EmbedLayerNormalization")
def embed_layer_norm(
    ctx,
    input_ids,
    segment_ids=None,
    word_embedding=None,
    position_embedding=None,
    segment_embedding=None,
    gamma=None,
    beta=None,
    mask=None,
    position_ids=None,
    *,
    epsilon=1e-12,
    mask_index_type=1,
):
    """``LayerNorm(word[ids] + position[position_ids or 0..S-1] + segment[segment_ids])``;
    outputs that, ``mask_index`` (per row, the number of ones of ``mask``: the end of the
    valid keys for Attention's 1-D mask index; zeros without a mask) and the embedding sum."""
    s = input_ids.shape[1]
    pos = jnp.arange(s)[None, :] if position_ids is None else position_ids
    e = jnp.take(word_embedding, input_ids, axis=0) + jnp.take(position_embedding, pos, axis=0)
    if segment_embedding is not None and segment_ids is not None:
        e = e + jnp.take(segment_embedding, segment_ids, axis=0)
    y, _, _ = _layer_norm(e, gamma, beta, epsilon)
    if mask is None:
        mask_index = jnp.zeros(input_ids.shape[:1], np.int32)
    else:
        mask_index = jnp.sum(mask.astype(np.int32), axis=1)
    return (y, mask_index, e)[: ctx.num_outputs]


def _attention_mask(ctx, mask_index, b, s, t, filter_value):
    """The additive mask ``[B or 1, 1, S, T]`` of Attention's ``mask_index`` (1-D ends
    ``[B]``, ends and starts ``[2B]``, or a 2-D ``[B, T]`` 0/1 mask): ``filter_value`` where
    a key is masked."""
    if mask_index is None:
        return None
    m = mask_index
    keys = jnp.arange(t)
    if m.ndim == 1:
        ends = m[:b] if m.shape[0] == 2 * b else m
        valid = keys[None, :] < ends[:, None]
        if m.shape[0] == 2 * b:
            valid = valid & (keys[None, :] >= m[b:][:, None])
    elif m.ndim == 2:
        valid = m > 0
    else:
        _refuse(ctx, f"a {m.ndim}-D mask_index")
    return jnp.where(valid, 0.0, filter_value).astype(np.float32)[:, None, None, :]


@contrib_op("Attention")
def attention(
    ctx,
    x,
    weights,
    bias=None,
    mask_index=None,
    past=None,
    attention_bias=None,
    past_sequence_length=None,
    *,
    num_heads,
    unidirectional=0,
    qkv_hidden_sizes=None,
    mask_filter_value=-10000.0,
    scale=0.0,
    do_rotary=0,
    past_present_share_buffer=0,
    rotary_embedding_dim=0,
):
    """Multi-head self-attention of ``x`` ``[B, S, hidden]`` with packed ``weights``
    ``[hidden, q + k + v]`` and ``bias``: softmax(q k^T * scale + mask) v, heads concatenated.
    ``scale`` defaults to ``1/sqrt(head_size)``; masked keys (``mask_index``, and later
    positions with ``unidirectional``) get ``mask_filter_value`` added, as onnxruntime does
    (not -inf); ``attention_bias`` ``[B or 1, N, S, T]`` is added to the scores. Softmax in
    float32 for float16 inputs."""
    if past is not None or ctx.num_outputs > 1:
        _refuse(ctx, "past / present key-value state")
    if do_rotary or past_present_share_buffer:
        _refuse(ctx, "do_rotary / past_present_share_buffer")
    b, s, _ = x.shape
    sizes = list(qkv_hidden_sizes) if qkv_hidden_sizes else [weights.shape[1] // 3] * 3
    qkv = jnp.matmul(x, weights)
    if bias is not None:
        qkv = qkv + bias
    q, k, v = jnp.split(qkv, np.cumsum(sizes)[:2], axis=-1)

    def heads(t):
        return t.reshape(b, s, num_heads, -1).transpose(0, 2, 1, 3)

    q, k, v = heads(q), heads(k), heads(v)
    sc = scale if scale else 1.0 / math.sqrt(sizes[0] // num_heads)
    scores = jnp.matmul(q.astype(np.float32), k.astype(np.float32).transpose(0, 1, 3, 2)) * np.float32(sc)
    mask = _attention_mask(ctx, mask_index, b, s, s, np.float32(mask_filter_value))
    if mask is not None:
        scores = scores + mask
    if unidirectional:
        causal = jnp.arange(s)[None, :] > jnp.arange(s)[:, None]
        scores = scores + jnp.where(causal, np.float32(mask_filter_value), np.float32(0))
    if attention_bias is not None:
        scores = scores + attention_bias.astype(np.float32)
    p = jax.nn.softmax(scores, axis=-1).astype(x.dtype)
    out = jnp.matmul(p, v).transpose(0, 2, 1, 3)
    return out.reshape(b, s, sizes[2])


@contrib_op("DynamicQuantizeLSTM")
def dynamic_quantize_lstm(
    ctx,
    x,
    w,
    r,
    b=None,
    seq_lens=None,
    initial_h=None,
    initial_c=None,
    p=None,
    w_scale=None,
    w_zp=None,
    r_scale=None,
    r_zp=None,
    **attrs,
):
    """``quantize_dynamic``'s LSTM: the ONNX LSTM with int8/uint8 weights ``W`` ``[D, I, 4H]``
    and ``R`` ``[D, H, 4H]`` (transposed from LSTM's layout) and their scales and zero points
    per direction ``[D]`` or per direction and column ``[D, 4H]``; the weights are dequantized
    and the LSTM runs in float. onnxruntime's kernel also quantizes the input and hidden state
    to uint8 for each product, so its results differ by that rounding (about 1e-2 of the
    output scale)."""
    from .rnn import lstm

    def dequantize(q, scale, zp):
        s = jnp.asarray(scale, np.float32)
        z = jnp.asarray(zp).astype(np.float32)
        s, z = (s[:, None, None], z[:, None, None]) if s.ndim == 1 else (s[:, None, :], z[:, None, :])
        return jnp.swapaxes((q.astype(np.float32) - z) * s, 1, 2).astype(x.dtype)

    return lstm(
        ctx,
        x,
        dequantize(w, w_scale, w_zp),
        dequantize(r, r_scale, r_zp),
        b,
        seq_lens,
        initial_h,
        initial_c,
        p,
        **attrs,
    )
