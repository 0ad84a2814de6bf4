"""Resampling: ``upsample_nearest{1,2,3}d.vec``, ``_upsample_nearest_exact{1,2,3}d.vec`` and
``upsample_{linear1d,bilinear2d,trilinear3d}.vec`` (``native_functions.yaml``; source indices
and weights follow ``aten/src/ATen/native/UpSample.h``: ``nearest_idx``,
``area_pixel_compute_scale``, ``area_pixel_compute_source_index``).

Source indices and interpolation weights depend only on shapes, so they are computed here in
float32 (torch's ``opmath`` for float inputs) as constants, and the resampling itself is a
gather plus a weighted sum per spatial dim, last dim first as in the CPU kernel.
"""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np

from ..registry import register
from ._util import acc_dtype

aten = __import__("torch").ops.aten
F32 = np.float32


def _sizes(x, nd, output_size, scale_factors):
    """Output sizes and the per-dim scale factors (None when ``output_size`` is given)."""
    ins = x.shape[-nd:]
    if output_size is not None:
        return list(output_size), [None] * nd
    scales = list(scale_factors) * (nd if len(scale_factors) == 1 else 1)
    return [int(np.floor(n * s)) for n, s in zip(ins, scales, strict=True)], scales


def _scale(n_in, n_out, scale, align_corners=False):
    """``area_pixel_compute_scale`` (``compute_scales_value`` when not aligning corners)."""
    if align_corners:
        return F32((n_in - 1) / (n_out - 1)) if n_out > 1 else F32(0)
    return F32(1.0 / scale) if scale is not None and scale > 0 else F32(n_in / n_out)


def _nearest_index(n_in, n_out, scale, exact, shortcuts):
    """``nearest_idx`` / ``nearest_neighbor_exact_compute_source_index``. ``shortcuts``:
    ``nearest_idx``'s same-size and double-size index shortcuts, which torch's CPU kernel
    takes for 2-d inputs only; its 1-d and 3-d kernels compute ``floor(dst * scale)``
    (with a scale factor of 1.1, the output keeps the input's size, and the 1-d and 3-d
    kernels still read ``[0, 0, 1, 2, ...]``)."""
    o = np.arange(n_out, dtype=F32)
    if shortcuts and not exact and n_out == n_in:
        return np.arange(n_out)
    if shortcuts and not exact and n_out == 2 * n_in:
        return np.arange(n_out) >> 1
    s = _scale(n_in, n_out, scale)
    src = np.floor((o + F32(0.5)) * s) if exact else np.floor(o * s)
    return np.minimum(src.astype(np.int64), n_in - 1)


def _nearest(x, nd, output_size, scale_factors, exact):
    outs, scales = _sizes(x, nd, output_size, scale_factors)
    for k in range(nd):
        axis = x.ndim - nd + k
        idx = _nearest_index(x.shape[axis], outs[k], scales[k], exact, shortcuts=nd == 2)
        x = jnp.take(x, jnp.asarray(idx), axis=axis)
    return x


def _linear_weights(n_in, n_out, scale, align_corners):
    """Indices ``i0``, ``i1`` and weights ``l0``, ``l1`` of linear interpolation."""
    s = _scale(n_in, n_out, scale, align_corners)
    o = np.arange(n_out, dtype=F32)
    src = s * o if align_corners else np.maximum(s * (o + F32(0.5)) - F32(0.5), F32(0))
    i0 = np.minimum(src.astype(np.int64), n_in - 1)
    i1 = i0 + (i0 < n_in - 1)
    l1 = (src - i0.astype(F32)).astype(F32)
    return i0, i1, (F32(1) - l1).astype(F32), l1


def _linear(x, nd, output_size, align_corners, scale_factors):
    outs, scales = _sizes(x, nd, output_size, scale_factors)
    dt = x.dtype
    x = x.astype(acc_dtype(dt))
    for k in reversed(range(nd)):
        axis = x.ndim - nd + k
        i0, i1, l0, l1 = _linear_weights(x.shape[axis], outs[k], scales[k], align_corners)
        shape = [1] * x.ndim
        shape[axis] = outs[k]
        a, b = jnp.take(x, jnp.asarray(i0), axis=axis), jnp.take(x, jnp.asarray(i1), axis=axis)
        x = jnp.asarray(l0.reshape(shape), x.dtype) * a + jnp.asarray(l1.reshape(shape), x.dtype) * b
    return x


def _nearest_rule(nd, exact):
    def rule(x, output_size=None, scale_factors=None):
        return _nearest(x, nd, output_size, scale_factors, exact)

    kind = "nearest-exact (half-pixel centres)" if exact else "nearest (``floor(dst * scale)``)"
    rule.__doc__ = (
        f"{nd}-d {kind} upsampling of the trailing {nd} dims to ``output_size`` or by ``scale_factors``."
    )
    return rule


def _linear_rule(nd):
    def rule(x, output_size=None, align_corners=False, scale_factors=None):
        return _linear(x, nd, output_size, align_corners, scale_factors)

    rule.__doc__ = f"{nd}-d linear interpolation of the trailing {nd} dims (``align_corners`` as in torch)."
    return rule


for _nd in (1, 2, 3):
    register(getattr(aten, f"upsample_nearest{_nd}d").vec)(_nearest_rule(_nd, False))
    register(getattr(aten, f"_upsample_nearest_exact{_nd}d").vec)(_nearest_rule(_nd, True))
register(aten.upsample_linear1d.vec)(_linear_rule(1))
register(aten.upsample_bilinear2d.vec)(_linear_rule(2))
register(aten.upsample_trilinear3d.vec)(_linear_rule(3))


def _reflect(coord, twice_low, twice_high):
    """``reflect_coordinates`` of ``GridSampler.h``."""
    if twice_low == twice_high:
        return jnp.zeros_like(coord)
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = jnp.abs(coord - lo)
    extra = jnp.fmod(c, span)
    flips = jnp.floor(c / span)
    return jnp.where(jnp.fmod(flips, 2) == 0, extra + lo, span - extra + lo)


def _source_index(coord, size, padding_mode, align_corners):
    """``grid_sampler_compute_source_index``: unnormalize, then apply the padding mode."""
    if align_corners:
        coord = (coord + 1) / 2 * (size - 1)
    else:
        coord = ((coord + 1) * size - 1) / 2
    if padding_mode == 2:  # reflection
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
    if padding_mode in (1, 2):  # border, and reflection's final clip
        coord = jnp.clip(coord, 0, size - 1)
    return coord


def _gather2d(flat, iy, ix, h, w):
    """``input[n, :, iy, ix]`` for ``iy``/``ix`` of shape ``(N, Ho, Wo)``, zero where out of
    bounds: ``(N, C, Ho, Wo)``."""
    valid = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    idx = jnp.clip(iy, 0, h - 1) * w + jnp.clip(ix, 0, w - 1)
    n, ho, wo = idx.shape
    got = jnp.take_along_axis(flat, idx.reshape(n, 1, ho * wo).astype(np.int64), axis=2)
    got = got.reshape(n, flat.shape[1], ho, wo)
    return jnp.where(valid[:, None], got, jnp.zeros((), flat.dtype))


@register(aten.grid_sampler_2d.default)
def grid_sampler_2d(x, grid, interpolation_mode, padding_mode, align_corners):
    """Sample ``x`` ``(N, C, H, W)`` at ``grid`` ``(N, Ho, Wo, 2)`` (``(x, y)`` in ``[-1, 1]``):
    ``(N, C, Ho, Wo)``. Interpolation 0 = bilinear, 1 = nearest (half to even); padding
    0 = zeros, 1 = border, 2 = reflection (``GridSamplerKernel.cpp``). Bicubic (2) is not
    supported."""
    if interpolation_mode not in (0, 1):
        raise NotImplementedError("grid_sampler_2d: bicubic interpolation")
    dt = x.dtype
    x = x.astype(acc_dtype(dt))
    n, c, h, w = x.shape
    g = grid.astype(x.dtype)
    ix = _source_index(g[..., 0], w, padding_mode, align_corners)
    iy = _source_index(g[..., 1], h, padding_mode, align_corners)
    flat = x.reshape(n, c, h * w)
    if interpolation_mode == 1:
        return _gather2d(flat, jnp.round(iy).astype(np.int64), jnp.round(ix).astype(np.int64), h, w)
    x0, y0 = jnp.floor(ix), jnp.floor(iy)
    x1, y1 = x0 + 1, y0 + 1
    wts = {
        (0, 0): (x1 - ix) * (y1 - iy),
        (0, 1): (ix - x0) * (y1 - iy),
        (1, 0): (x1 - ix) * (iy - y0),
        (1, 1): (ix - x0) * (iy - y0),
    }
    out = jnp.zeros((n, c) + ix.shape[1:], x.dtype)
    for (dy, dx), wt in wts.items():
        yy, xx = (y0 + dy).astype(np.int64), (x0 + dx).astype(np.int64)
        out = out + _gather2d(flat, yy, xx, h, w) * wt[:, None]
    return out


def _gather3d(flat, iz, iy, ix, size):
    """``input[n, :, iz, iy, ix]`` for index arrays of shape ``(N, Do, Ho, Wo)``, zero where out
    of bounds: ``(N, C, Do, Ho, Wo)``."""
    d, h, w = size
    valid = (iz >= 0) & (iz < d) & (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    idx = (jnp.clip(iz, 0, d - 1) * h + jnp.clip(iy, 0, h - 1)) * w + jnp.clip(ix, 0, w - 1)
    n = idx.shape[0]
    got = jnp.take_along_axis(flat, idx.reshape(n, 1, -1).astype(np.int64), axis=2)
    got = got.reshape((n, flat.shape[1]) + idx.shape[1:])
    return jnp.where(valid[:, None], got, jnp.zeros((), flat.dtype))


@register(aten.grid_sampler_3d.default)
def grid_sampler_3d(x, grid, interpolation_mode, padding_mode, align_corners):
    """Sample ``x`` ``(N, C, D, H, W)`` at ``grid`` ``(N, Do, Ho, Wo, 3)`` (``(x, y, z)`` in
    ``[-1, 1]``): ``(N, C, Do, Ho, Wo)``. Interpolation 0 = trilinear (the eight corner
    weights of ``GridSampler.cpp``'s 3-d kernel), 1 = nearest (half to even); padding
    0 = zeros, 1 = border, 2 = reflection.

    Raises:
        NotImplementedError: another interpolation mode (torch has no 3-d bicubic either).
    """
    if interpolation_mode not in (0, 1):
        raise NotImplementedError(f"grid_sampler_3d: interpolation mode {interpolation_mode}")
    dt = x.dtype
    x = x.astype(acc_dtype(dt))
    n, c, d, h, w = x.shape
    g = grid.astype(x.dtype)
    ix = _source_index(g[..., 0], w, padding_mode, align_corners)
    iy = _source_index(g[..., 1], h, padding_mode, align_corners)
    iz = _source_index(g[..., 2], d, padding_mode, align_corners)
    flat = x.reshape(n, c, d * h * w)
    if interpolation_mode == 1:
        near = [jnp.round(v).astype(np.int64) for v in (iz, iy, ix)]
        return _gather3d(flat, *near, (d, h, w))
    lows = [jnp.floor(v) for v in (iz, iy, ix)]
    out = jnp.zeros((n, c) + ix.shape[1:], x.dtype)
    for corner in itertools.product((0, 1), repeat=3):
        wt = jnp.ones_like(ix)
        for v, lo, up in zip((iz, iy, ix), lows, corner, strict=True):
            wt = wt * ((v - lo) if up else (lo + 1 - v))
        at = [(lo + up).astype(np.int64) for lo, up in zip(lows, corner, strict=True)]
        out = out + _gather3d(flat, *at, (d, h, w)) * wt[:, None]
    return out


def _aa_taps(n_in, n_out, align_corners, scale, t):
    """Source indices and weights ``(n_out, K)`` of antialiased linear interpolation
    (``UpSampleKernel.cpp``, ``_compute_indices_min_size_weights_aa`` with the triangle
    filter): a support of ``max(scale, 1)`` around each output centre, weights normalised to
    sum to 1; computed in the input's float type ``t`` with the kernel's float/double mix."""
    if align_corners:
        s = t((n_in - 1) / (n_out - 1)) if n_out > 1 else t(0)
    else:
        s = t(1.0 / scale) if scale is not None and scale > 0 else t(t(n_in) / t(n_out))
    support = s if s >= 1.0 else t(1.0)
    k = int(np.ceil(support)) * 2 + 1
    invscale = t(1.0 / float(s)) if s >= 1.0 else t(1.0)
    idx = np.zeros((n_out, k), np.int64)
    wts = np.zeros((n_out, k), t)
    for i in range(n_out):
        center = t(float(s) * (i + 0.5))
        xmin = max(int(float(center - support) + 0.5), 0)
        xsize = min(max(min(int(float(center + support) + 0.5), n_in) - xmin, 0), k)
        taps = np.arange(xsize)
        offset = (taps + xmin).astype(t) - center  # int64 - scalar_t: scalar_t arithmetic
        arg = ((offset.astype(np.float64) + 0.5) * float(invscale)).astype(t)
        wt = np.where(np.abs(arg) < 1, t(1) - np.abs(arg), t(0)).astype(t)
        total = t(0)
        for v in wt:
            total = t(total + v)
        if total != 0:
            wt = (wt / total).astype(t)
        idx[i, :xsize] = xmin + taps
        wts[i, :xsize] = wt
    return idx, wts


@register(aten._upsample_bilinear2d_aa.default)
def upsample_bilinear2d_aa(x, output_size, align_corners, scales_h=None, scales_w=None):
    """Antialiased bilinear resize of the last two dims of ``(N, C, H, W)`` to
    ``output_size`` (``F.interpolate(..., antialias=True)``; PIL's separable triangle filter
    widened by the downscale factor). Width first, then height; a dim whose size does not
    change is left as is, as in torch's separable kernel.

    Raises:
        NotImplementedError: a non-float32/float64 input (torch's uint8 kernel uses int16
            fixed-point weights; half types have no CPU kernel).
    """
    if x.dtype not in (np.float32, np.float64):
        raise NotImplementedError(f"_upsample_bilinear2d_aa of {x.dtype}")
    t = np.dtype(x.dtype).type
    for axis, scale in ((3, scales_w), (2, scales_h)):
        n_in, n_out = x.shape[axis], output_size[axis - 2]
        if n_in == n_out:
            continue
        idx, wts = _aa_taps(n_in, n_out, align_corners, scale, t)
        taps = jnp.take(x, jnp.asarray(idx.reshape(-1)), axis=axis)
        taps = taps.reshape(x.shape[:axis] + idx.shape + x.shape[axis + 1 :])
        wshape = [1] * taps.ndim
        wshape[axis : axis + 2] = wts.shape
        x = jnp.sum(taps * jnp.asarray(wts.reshape(wshape), x.dtype), axis=axis + 1)
    return x
