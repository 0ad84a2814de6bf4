"""Sampling ONNX ops: GridSample, AffineGrid is function-defined
(https://onnx.ai/onnx/operators/onnx__GridSample.html).

GridSample follows the operator page: grid coordinates in [-1, 1] (last grid axis ordered
x, y, (z)) are un-normalized per ``align_corners``; out-of-range coordinates are clamped
(``border``) or reflected (``reflection``) before interpolation, and every tap fetched
outside the input reads 0 (``zeros``), the clamped pixel, or the reflected pixel. Nearest
rounds half to even; cubic uses Keys' kernel with a = -0.75.
"""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np

from ..registry import onnx_op


def _reflect(x, lo, hi):
    rng = hi - lo
    below = x < lo
    dx = jnp.where(below, lo - x, x - hi)
    n = jnp.trunc(dx / rng)
    r = dx - n * rng
    even = jnp.mod(n, 2) == 0
    low_side = jnp.where(even, lo + r, hi - r)
    high_side = jnp.where(even, hi - r, lo + r)
    return jnp.where(below, low_side, jnp.where(x > hi, high_side, x))


def _cubic(t):
    a = -0.75
    t = jnp.abs(t)
    return [
        ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
        ((a + 2) * t - (a + 3)) * t * t + 1,
        ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
        ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a,
    ]


@onnx_op("GridSample", 16)
def grid_sample(ctx, x, grid, *, align_corners=0, mode=None, padding_mode="zeros"):
    """GridSample over N-D inputs ``(N, C, D1..Dn)`` with a grid ``(N, O1..On, n)``."""
    mode = mode or ("bilinear" if ctx.version < 20 else "linear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    n_sp = x.ndim - 2
    dims = x.shape[2:]
    batch, chans = x.shape[:2]
    out_sp = grid.shape[1:-1]
    g = grid.reshape(batch, -1, n_sp).astype(np.float64 if x.dtype == np.float64 else np.float32)
    coords, lo, hi = [], [], []
    for i in range(n_sp):
        d = dims[i]
        v = g[..., n_sp - 1 - i]
        v = (v + 1) / 2 * (d - 1) if align_corners else ((v + 1) * d - 1) / 2
        if mode == "nearest":
            v = jnp.round(v)
        b_lo, b_hi = (0.0, d - 1.0) if align_corners else (-0.5, d - 0.5)
        if padding_mode == "border":
            v = jnp.where((v < b_lo) | (v > b_hi), jnp.clip(v, 0, d - 1), v)
        elif padding_mode == "reflection":
            v = _reflect(v, b_lo, b_hi)
        coords.append(v)
        lo.append(b_lo)
        hi.append(b_hi)
    flat = x.reshape(batch, chans, -1)
    strides = [int(np.prod(dims[i + 1 :])) for i in range(n_sp)]

    def fetch(idx):
        lin = 0
        valid = True
        for i, ix in enumerate(idx):
            d = dims[i]
            if padding_mode == "zeros":
                valid = valid & (ix >= 0) & (ix < d)
                ix = jnp.clip(ix, 0, d - 1)
            elif padding_mode == "border":
                ix = jnp.clip(ix, 0, d - 1)
            else:
                ix = jnp.clip(_reflect(ix.astype(g.dtype), lo[i], hi[i]).astype(np.int64), 0, d - 1)
            lin = lin + ix * strides[i]
        vals = jnp.take_along_axis(
            flat, jnp.broadcast_to(lin[:, None, :], (batch, chans, lin.shape[1])), axis=2
        )
        return jnp.where(valid[:, None, :], vals, 0) if padding_mode == "zeros" else vals

    if mode == "nearest":
        out = fetch([c.astype(np.int64) for c in coords])
    else:
        taps = []
        for c in coords:
            c0 = jnp.floor(c)
            t = c - c0
            if mode == "linear":
                taps.append([(c0.astype(np.int64), 1 - t), (c0.astype(np.int64) + 1, t)])
            else:
                w = _cubic(t)
                taps.append([(c0.astype(np.int64) + k - 1, w[k]) for k in range(4)])
        out = 0
        for combo in itertools.product(*taps):
            weight = 1
            for _, w in combo:
                weight = weight * w
            out = out + fetch([ix for ix, _ in combo]) * weight[:, None, :].astype(x.dtype)
    return out.reshape((batch, chans) + tuple(out_sp)).astype(x.dtype)


def _roi_bilinear(y, x, h, w):
    """The four (index, weight) taps of one sample point, as ONNX/onnxruntime RoiAlign
    computes them (points beyond one pixel outside the map read 0)."""
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return [(0, 0.0)] * 4
    y, x = max(y, 0.0), max(x, 0.0)
    y_lo, x_lo = int(y), int(x)
    if y_lo >= h - 1:
        y_lo = y_hi = h - 1
        y = float(y_lo)
    else:
        y_hi = y_lo + 1
    if x_lo >= w - 1:
        x_lo = x_hi = w - 1
        x = float(x_lo)
    else:
        x_hi = x_lo + 1
    ly, lx = y - y_lo, x - x_lo
    hy, hx = 1 - ly, 1 - lx
    return [
        (y_lo * w + x_lo, hy * hx),
        (y_lo * w + x_hi, hy * lx),
        (y_hi * w + x_lo, ly * hx),
        (y_hi * w + x_hi, ly * lx),
    ]


@onnx_op("RoiAlign", 10)
def roi_align(
    ctx,
    x,
    rois,
    batch_indices,
    *,
    coordinate_transformation_mode=None,
    mode="avg",
    output_height=1,
    output_width=1,
    sampling_ratio=0,
    spatial_scale=1.0,
):
    """RoiAlign with ROIs known at conversion time (the sampling grid depends on their
    sizes). ``max`` mode takes the maximum of the weighted taps, as the reference does."""
    ctm = coordinate_transformation_mode or ("half_pixel" if ctx.version >= 16 else "output_half_pixel")
    if ctm not in ("half_pixel", "output_half_pixel") or mode not in ("avg", "max"):
        raise ValueError(  # the spec's values only (onnxruntime refuses the others too)
            f"RoiAlign: coordinate_transformation_mode {ctm!r} / mode {mode!r}: expected "
            "'half_pixel' or 'output_half_pixel' / 'avg' or 'max'"
        )
    boxes = np.asarray(ctx.static(1), np.float64)
    n_rois = boxes.shape[0]
    h, w = x.shape[2], x.shape[3]
    offset = 0.5 if ctm == "half_pixel" else 0.0
    all_idx, counts = [], []
    for r in range(n_rois):
        x1, y1, x2, y2 = boxes[r] * spatial_scale - offset
        rw, rh = x2 - x1, y2 - y1
        if ctm != "half_pixel":
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / output_height, rw / output_width
        gh = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rh / output_height))
        gw = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rw / output_width))
        taps = []
        for ph in range(output_height):
            for pw in range(output_width):
                pts = []
                for iy in range(gh):
                    yy = y1 + ph * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        xx = x1 + pw * bw + (ix + 0.5) * bw / gw
                        pts.append(_roi_bilinear(yy, xx, h, w))
                taps.append(pts)
        all_idx.append(taps)
        counts.append(max(gh * gw, 1))
    s_max = max(len(t[0]) for t in all_idx)
    idx = np.zeros((n_rois, output_height * output_width, s_max, 4), np.int64)
    wts = np.zeros(idx.shape, np.float64)
    valid = np.zeros(idx.shape[:3], bool)
    for r, taps in enumerate(all_idx):
        for b, pts in enumerate(taps):
            for s, corners in enumerate(pts):
                valid[r, b, s] = True
                for c, (i, wt) in enumerate(corners):
                    idx[r, b, s, c], wts[r, b, s, c] = i, wt
    flat = x.reshape(x.shape[0], x.shape[1], -1)
    per_roi = flat[jnp.asarray(batch_indices).astype(np.int64)]  # (R, C, H*W)
    k = idx[0].size
    gather = jnp.broadcast_to(jnp.asarray(idx.reshape(n_rois, 1, k)), (n_rois, x.shape[1], k))
    vals = jnp.take_along_axis(per_roi, gather, axis=2)
    vals = vals.reshape((n_rois, x.shape[1]) + idx.shape[1:]) * jnp.asarray(wts, x.dtype)[:, None]
    if mode == "max":
        neg = jnp.asarray(-np.inf, x.dtype)
        out = jnp.max(jnp.where(jnp.asarray(valid)[:, None, :, :, None], vals, neg), axis=(3, 4))
    else:
        out = vals.sum(axis=(3, 4)) / jnp.asarray(np.asarray(counts, np.float64), x.dtype)[:, None, None]
    return out.reshape(n_rois, x.shape[1], output_height, output_width)
