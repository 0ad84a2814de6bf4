"""Resize and Upsample (https://onnx.ai/onnx/operators/onnx__Resize.html).

Resizing is separable: for each resized axis a static ``(out, in)`` weight matrix is built
from the coordinate transformation mode and the interpolation kernel (nearest, linear,
cubic with coefficient ``a``), following the operator page's reference algorithm: the
``n`` input samples nearest the source coordinate (edge-replicated), weighted by the
kernel at the fractional offset. Nearest mode gathers instead of multiplying, so it is
exact for every dtype.
"""

from __future__ import annotations

import math
from fractions import Fraction

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import onnx_op


def _coord(i, L, O, scale, ctm, roi):  # noqa: E741
    if ctm == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if ctm == "half_pixel_symmetric":
        adjustment = O / (scale * L)
        center = L / 2
        return center * (1 - adjustment) + (i + 0.5) / scale - 0.5
    if ctm == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if O > 1 else 0.0
    if ctm == "align_corners":  # the page uses the unrounded output length scale * L
        out_len = scale * L
        return i * (L - 1) / (out_len - 1) if out_len != 1 else 0.0
    if ctm == "asymmetric":
        return i / scale
    if ctm == "tf_crop_and_resize":
        start, end = roi
        if O > 1:
            return start * (L - 1) + i * (end - start) * (L - 1) / (O - 1)
        return 0.5 * (start + end) * (L - 1)
    raise NotImplementedError(f"coordinate_transformation_mode={ctm}")


def _keys_cubic(x, a):
    """Keys' cubic convolution kernel with coefficient ``a`` (ONNX Resize ``cubic_coeff_a``)."""
    x = abs(x)
    if x <= 1:
        return (a + 2) * x**3 - (a + 3) * x**2 + 1
    if x < 2:
        return a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a
    return 0.0


def _cubic(ratio, a):
    return [_keys_cubic(d, a) for d in (ratio + 1, ratio, 1 - ratio, 2 - ratio)]


def _linear_antialias(ratio, scale):
    """Triangle kernel stretched by 1/scale when downsampling (normalized)."""
    scale = min(scale, 1.0)
    start = math.floor(-1 / scale) + 1
    args = (np.arange(start, start + 2 - 2 * start) - ratio) * scale
    c = np.clip(1 - np.abs(args), 0, 1)
    return list(c / c.sum())


def _cubic_antialias(ratio, scale, a):
    """Keys' cubic kernel stretched by 1/scale when downsampling (normalized)."""
    scale = min(scale, 1.0)
    start = math.floor(-2 / scale) + 1

    c = np.array([_keys_cubic(scale * (i - ratio), a) for i in range(start, 2 - start)])
    return list(c / c.sum())


def _nearest_index(x, mode):
    if mode == "round_prefer_floor":
        return math.ceil(x - 0.5)
    if mode == "round_prefer_ceil":
        return math.floor(x + 0.5)
    if mode == "floor":
        return math.floor(x)
    if mode == "ceil":
        return math.ceil(x)
    raise NotImplementedError(f"nearest_mode={mode}")


def _weights(L, O, scale, mode, ctm, nearest_mode, a, exclude_outside, roi, antialias=0):  # noqa: E741
    """``(W, index, outside)``: the (O, L) weights (or gather indices for nearest) and the
    output positions outside the crop box (``tf_crop_and_resize``)."""
    w = np.zeros((O, L), np.float64)
    index = np.zeros(O, np.int64)
    outside = np.zeros(O, bool)
    for i in range(O):
        x = _coord(i, L, O, scale, ctm, roi)
        if ctm == "tf_crop_and_resize" and (x < 0 or x > L - 1):
            outside[i] = True
            continue
        if mode == "nearest":
            index[i] = min(max(_nearest_index(x, nearest_mode), 0), L - 1)
            continue
        ratio = x - math.floor(x)
        if ratio == 0:
            ratio = 1.0
        if antialias:
            coeffs = (
                _linear_antialias(ratio, scale) if mode == "linear" else _cubic_antialias(ratio, scale, a)
            )
        else:
            coeffs = [1 - ratio, ratio] if mode == "linear" else _cubic(ratio, a)
        n = len(coeffs)
        pad = math.ceil(n / 2)
        xp = x + pad
        cand = sorted(range(L + 2 * pad), key=lambda j: (abs(xp - j), j))[:n]
        idx = [j - pad for j in sorted(cand)]
        coeffs = np.asarray(coeffs, np.float64)
        if exclude_outside:
            coeffs = np.where([0 <= j < L for j in idx], coeffs, 0.0)
            total = coeffs.sum()
            coeffs = coeffs / (total if total != 0 else 1.0)
        for j, c in zip(idx, coeffs, strict=True):
            w[i, min(max(j, 0), L - 1)] += c
    return w, index, outside


def _out_size(L, scale: float):  # noqa: E741
    """``floor(L * scale)``; for a symbolic ``L`` exact when ``scale`` is a ratio of small
    integers (2, 0.5, 1.5...: what exporters write for ``scale_factor``)."""
    if isinstance(L, int):
        return int(math.floor(L * scale))
    ratio = Fraction(scale).limit_denominator(64)
    if float(ratio) != scale:
        raise NotImplementedError(
            f"Resize of a symbolic dimension {L} by the scale {scale}, not a ratio of small integers; "
            "give the dimensions sizes with from_onnx(..., dims=...)"
        )
    return L * ratio.numerator // ratio.denominator


def _nearest_indices(x, mode):
    if mode == "round_prefer_floor":
        return jnp.ceil(x - 0.5)
    if mode == "round_prefer_ceil":
        return jnp.floor(x + 0.5)
    if mode == "floor":
        return jnp.floor(x)
    if mode == "ceil":
        return jnp.ceil(x)
    raise NotImplementedError(f"nearest_mode={mode}")


def _resize_axis_symbolic(x, ax, O, scale, mode, ctm, nearest_mode, a, exclude_outside):  # noqa: E741
    """One axis of :func:`_resize` where the input or output size is a symbolic dimension:
    the same reference algorithm computed on ``iota(O)`` at run time (float64 coordinates),
    taps gathered with edge replication and weighted by the kernel at the fractional offset
    (``scale`` a float, or None for ``O / L``)."""
    L = x.shape[ax]  # noqa: E741
    f64 = np.float64
    Lf, Of = jnp.asarray(L).astype(f64), jnp.asarray(O).astype(f64)
    sc = Of / Lf if scale is None else f64(scale)
    i = lax.iota(f64, O)
    if ctm == "half_pixel":
        c = (i + 0.5) / sc - 0.5
    elif ctm == "half_pixel_symmetric":
        c = Lf / 2 * (1 - Of / (sc * Lf)) + (i + 0.5) / sc - 0.5
    elif ctm == "pytorch_half_pixel":
        c = jnp.where(Of > 1, (i + 0.5) / sc - 0.5, 0.0)
    elif ctm == "align_corners":
        out_len = sc * Lf
        c = jnp.where(out_len != 1, i * (Lf - 1) / jnp.where(out_len != 1, out_len - 1, 1.0), 0.0)
    elif ctm == "asymmetric":
        c = i / sc
    else:
        raise NotImplementedError(
            f"Resize with coordinate_transformation_mode={ctm} on a symbolic dimension; "
            "give the dimensions sizes with from_onnx(..., dims=...)"
        )
    last = jnp.asarray(L).astype(np.int64) - 1
    shape = [1] * x.ndim
    shape[ax] = -1
    if mode == "nearest":
        index = jnp.clip(_nearest_indices(c, nearest_mode).astype(np.int64), 0, last)
        return jnp.take(x, index, axis=ax)
    base = jnp.floor(c)
    r = c - base
    if mode == "linear":
        offsets, weights = (0, 1), [1 - r, r]
    else:
        offsets = (-1, 0, 1, 2)
        weights = [_keys_cubic_array(d, a) for d in (r + 1, r, 1 - r, 2 - r)]
    taps = [base.astype(np.int64) + o for o in offsets]
    if exclude_outside:
        weights = [jnp.where((t >= 0) & (t <= last), w, 0.0) for t, w in zip(taps, weights, strict=True)]
        total = sum(weights)
        weights = [w / jnp.where(total != 0, total, 1.0) for w in weights]
    out = None
    for t, w in zip(taps, weights, strict=True):
        term = jnp.take(x, jnp.clip(t, 0, last), axis=ax) * w.astype(x.dtype).reshape(shape)
        out = term if out is None else out + term
    return out


def _keys_cubic_array(x, a):
    """:func:`_keys_cubic` on an array."""
    x = jnp.abs(x)
    near = (a + 2) * x**3 - (a + 3) * x**2 + 1
    far = a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a
    return jnp.where(x <= 1, near, jnp.where(x < 2, far, 0.0))


def _resize(
    x, out_sizes, scales, axes, roi, mode, ctm, nearest_mode, a, exclude_outside, extrapolation, antialias=0
):
    """Resize ``x`` along ``axes``. Integer inputs in linear and cubic modes are interpolated
    in float (float32; float64 for 64-bit integers) over every axis and truncated toward zero
    once at the end, saturating to the type's range, as onnxruntime does (its kernels compute
    in float and ``static_cast`` back); weights cast to the integer type would be 0 or 1."""
    dtype = np.dtype(x.dtype)
    if mode != "nearest" and dtype.kind in "iu":
        calc = np.float64 if dtype.itemsize == 8 else np.float32
        y = _resize(
            x.astype(calc), out_sizes, scales, axes, roi, mode, ctm, nearest_mode, a, exclude_outside,
            extrapolation, antialias,
        )  # fmt: skip
        info = np.iinfo(dtype)
        return jnp.clip(jnp.trunc(y), info.min, info.max).astype(dtype)
    for k, ax in enumerate(axes):
        L, O = x.shape[ax], out_sizes[k]  # noqa: E741
        if not (isinstance(L, int) and isinstance(O, int)):
            if scales[k] == 1.0 and ctm != "tf_crop_and_resize":
                continue
            if antialias and mode != "nearest" and (scales[k] is None or scales[k] < 1):
                raise NotImplementedError(
                    "Resize with antialias when downsampling a symbolic dimension; "
                    "give the dimensions sizes with from_onnx(..., dims=...)"
                )
            x = _resize_axis_symbolic(x, ax, O, scales[k], mode, ctm, nearest_mode, a, exclude_outside)
            continue
        if L == O and ctm != "tf_crop_and_resize" and scales[k] == 1.0:
            continue
        r = (roi[k], roi[k + len(axes)]) if roi is not None else (0.0, 1.0)
        w, index, outside = _weights(
            L, O, scales[k], mode, ctm, nearest_mode, a, exclude_outside, r, antialias and mode != "nearest"
        )
        if mode == "nearest":
            y = jnp.take(x, index, axis=ax)
        else:
            y = jnp.moveaxis(jnp.tensordot(x, jnp.asarray(w, x.dtype), axes=[[ax], [1]]), -1, ax)
        if outside.any():
            shape = [1] * x.ndim
            shape[ax] = O
            y = jnp.where(outside.reshape(shape), jnp.asarray(extrapolation, x.dtype), y)
        x = y
    return x


@onnx_op("Resize", 11)
def resize(
    ctx,
    x,
    roi=None,
    scales=None,
    sizes=None,
    *,
    antialias=0,
    axes=None,
    coordinate_transformation_mode="half_pixel",
    cubic_coeff_a=-0.75,
    exclude_outside=0,
    extrapolation_value=0.0,
    keep_aspect_ratio_policy="stretch",
    mode="nearest",
    nearest_mode="round_prefer_floor",
):
    """Resize (opsets 11-19) from ``scales`` or ``sizes`` (static)."""
    axes = [a % x.ndim for a in axes] if axes is not None else list(range(x.ndim))
    roi = ctx.static(1)
    roi = None if roi is None or np.size(roi) == 0 else [float(v) for v in np.asarray(roi).reshape(-1)]
    if roi is not None and len(roi) == 2 * x.ndim and len(axes) != x.ndim:
        roi = [roi[a] for a in axes] + [roi[a + x.ndim] for a in axes]
    sc = ctx.static(2)
    sz = ctx.static(3)
    if sz is not None and np.size(sz):
        sz = [int(v) if isinstance(v, (int, np.integer)) else v for v in np.asarray(sz).reshape(-1)]
        in_sizes = [x.shape[a] for a in axes]
        if not all(isinstance(d, int) for d in (*sz, *in_sizes)):  # symbolic: scale O / L at run time
            if keep_aspect_ratio_policy != "stretch":
                raise NotImplementedError(
                    f"Resize with keep_aspect_ratio_policy={keep_aspect_ratio_policy} on symbolic sizes; "
                    "give the dimensions sizes with from_onnx(..., dims=...)"
                )
            scales_ = [None if not (isinstance(o, int) and isinstance(i, int)) else o / i
                       for o, i in zip(sz, in_sizes, strict=True)]  # fmt: skip
        elif keep_aspect_ratio_policy != "stretch":
            ratios = [o / i for o, i in zip(sz, in_sizes, strict=True)]
            s = min(ratios) if keep_aspect_ratio_policy == "not_larger" else max(ratios)
            scales_ = [s] * len(axes)
            sz = [int(s * i + 0.5) for i in in_sizes]
        else:
            scales_ = [o / i for o, i in zip(sz, in_sizes, strict=True)]
    else:
        scales_ = [float(v) for v in np.asarray(sc).reshape(-1)]
        if len(scales_) == x.ndim and len(axes) != x.ndim:
            scales_ = [scales_[a] for a in axes]
        sz = [_out_size(x.shape[a], s) for a, s in zip(axes, scales_, strict=True)]
    return _resize(
        x,
        sz,
        scales_,
        axes,
        roi,
        mode,
        coordinate_transformation_mode,
        nearest_mode,
        cubic_coeff_a,
        exclude_outside,
        extrapolation_value,
        antialias,
    )


@onnx_op("Resize", 10, until=10)
def resize_10(ctx, x, scales, *, mode="nearest"):
    sc = [float(v) for v in np.asarray(ctx.static(1)).reshape(-1)]
    sz = [_out_size(d, s) for d, s in zip(x.shape, sc, strict=True)]
    return _resize(x, sz, sc, list(range(x.ndim)), None, mode, "asymmetric", "floor", -0.75, 0, 0.0)


@onnx_op("Upsample", 9)
def upsample(ctx, x, scales, *, mode="nearest"):
    return resize_10(ctx, x, scales, mode=mode)


@onnx_op("Upsample", 7, until=7)
def upsample_7(ctx, x, *, scales, mode="nearest"):
    sz = [_out_size(d, s) for d, s in zip(x.shape, scales, strict=True)]
    return _resize(x, sz, list(scales), list(range(x.ndim)), None, mode, "asymmetric", "floor", -0.75, 0, 0.0)
