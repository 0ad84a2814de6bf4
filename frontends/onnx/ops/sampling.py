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
