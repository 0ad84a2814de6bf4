"""Quantization ONNX ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
QLinearMatMul, QLinearConv, ConvInteger (https://onnx.ai/onnx/operators/).

Scales and zero points are per tensor, per ``axis`` (1-D), or per block of ``block_size``
along ``axis`` (opset 21+); rounding is half to even and results saturate to the output
type's range.
"""

from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from ..graph import np_dtype
from ..registry import onnx_op


def _expand(p, x, axis, block_size):
    """Broadcast a scale/zero point against ``x``."""
    p = jnp.asarray(p)
    if p.ndim == 0 or p.size == 1 and not block_size:
        return p.reshape(())
    axis = axis % x.ndim
    if block_size:
        p = jnp.repeat(p, block_size, axis=axis)
        p = lax.slice_in_dim(p, 0, x.shape[axis], axis=axis)
        return p
    shape = [1] * x.ndim
    shape[axis] = -1
    return p.reshape(shape)


def _is_int(dtype) -> bool:
    """True for every integer dtype, the ml_dtypes int4/int2 too (their NumPy kind is 'V')."""
    return np.dtype(dtype).name.startswith(("int", "uint"))


def saturate_cast(v, dtype):
    dtype = np.dtype(dtype)
    if _is_int(dtype):
        info = ml_dtypes.iinfo(dtype)
        return jnp.clip(jnp.round(v), info.min, info.max).astype(dtype)
    if dtype.name.startswith("float8"):
        info = jnp.finfo(dtype)
        return jnp.where(jnp.isfinite(v), jnp.clip(v, float(info.min), float(info.max)), v).astype(dtype)
    return v.astype(dtype)


@onnx_op("QuantizeLinear", 10)
def quantize_linear(
    ctx, x, scale, zero_point=None, *, axis=1, block_size=0, output_dtype=0, saturate=1, precision=0
):
    """``saturate(round(x / scale) + zero_point)``."""
    if zero_point is not None:
        dtype = np.dtype(zero_point.dtype)
    elif output_dtype:
        dtype = np_dtype(output_dtype)
    else:
        dtype = np.dtype(np.uint8)
    s = _expand(scale, x, axis, block_size)
    calc = np.float32 if x.dtype != np.float64 else np.float64
    v = x.astype(calc) / s.astype(calc)
    if _is_int(dtype):
        v = jnp.round(v)
    if zero_point is not None:
        v = v + _expand(zero_point, x, axis, block_size).astype(calc)
    if _is_int(dtype) or saturate:
        return saturate_cast(v, dtype)
    return v.astype(dtype)


@onnx_op("DequantizeLinear", 10)
def dequantize_linear(ctx, x, scale, zero_point=None, *, axis=1, block_size=0, output_dtype=0):
    """``(x - zero_point) * scale`` in the scale's dtype (or ``output_dtype``)."""
    s = _expand(scale, x, axis, block_size)
    v = x.astype(np.float32)
    if zero_point is not None:
        v = v - _expand(zero_point, x, axis, block_size).astype(np.float32)
    out = np_dtype(output_dtype) if output_dtype else s.dtype
    return (v * s.astype(np.float32)).astype(out)


@onnx_op("DynamicQuantizeLinear", 11)
def dynamic_quantize_linear(ctx, x):
    """uint8 quantization with scale and zero point from the data range (including 0).

    An all-zero ``x`` (range 0) has scale 1 and zero point 0, as onnxruntime gives
    (``GetQuantizationParameter``: ``scale = max == min ? 1 : (max - min) / 255``); the spec's
    formula would divide by zero."""
    lo = jnp.minimum(jnp.min(x), 0)
    hi = jnp.maximum(jnp.max(x), 0)
    scale = jnp.where(hi == lo, jnp.ones_like(hi), (hi - lo) / 255)
    zp = jnp.clip(jnp.round(-lo / scale), 0, 255).astype(np.uint8)
    y = jnp.clip(jnp.round(x / scale) + zp, 0, 255).astype(np.uint8)
    return y, scale.astype(x.dtype), zp


@onnx_op("QLinearMatMul", 10)
def qlinear_matmul(ctx, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp):
    """Dequantize, matmul in float32, requantize to ``y_zero_point``'s type."""
    az = jnp.asarray(a_zp).astype(np.int32)
    bz = jnp.asarray(b_zp).astype(np.int32)
    a_i = a.astype(np.int32) - (az.reshape(-1, 1) if az.ndim == 1 and az.size > 1 else az)
    b_i = b.astype(np.int32) - bz
    acc = jnp.matmul(a_i, b_i, preferred_element_type=np.int32).astype(np.float32)
    a_s = jnp.asarray(a_scale, np.float32)
    a_s = a_s.reshape(-1, 1) if a_s.ndim == 1 and a_s.size > 1 else a_s
    v = acc * a_s * jnp.asarray(b_scale, np.float32) / jnp.asarray(y_scale, np.float32)
    v = jnp.round(v) + jnp.asarray(y_zp).astype(np.float32)
    return saturate_cast(v, y_zp.dtype)


@onnx_op("ConvInteger", 10)
def conv_integer(ctx, x, w, x_zp=None, w_zp=None, **attrs):
    from .nn import conv

    xi = x.astype(np.int32) - (0 if x_zp is None else jnp.asarray(x_zp).astype(np.int32))
    wi = w.astype(np.int32)
    if w_zp is not None:
        wz = jnp.asarray(w_zp).astype(np.int32)
        wi = wi - (wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.ndim == 1 else wz)
    if x_zp is not None and attrs.get("pads") and any(attrs["pads"]):
        # padding contributes the zero point, i.e. zero after the subtraction
        pass
    return conv(ctx, xi, wi, **attrs).astype(np.int32)


@onnx_op("QLinearConv", 10)
def qlinear_conv(ctx, x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, b=None, **attrs):
    from .nn import conv

    xi = x.astype(np.int32) - jnp.asarray(x_zp).astype(np.int32)
    wz = jnp.asarray(w_zp).astype(np.int32)
    wi = w.astype(np.int32) - (wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.ndim == 1 else wz)
    acc = conv(ctx, xi, wi, **attrs)
    if b is not None:
        acc = acc + b.reshape((1, -1) + (1,) * (x.ndim - 2))
    ws = jnp.asarray(w_scale, np.float32)
    ws = ws.reshape((1, -1) + (1,) * (x.ndim - 2)) if ws.ndim == 1 else ws
    v = acc.astype(np.float32) * jnp.asarray(x_scale, np.float32) * ws / jnp.asarray(y_scale, np.float32)
    v = jnp.round(v) + jnp.asarray(y_zp).astype(np.float32)
    return saturate_cast(v, y_zp.dtype)
