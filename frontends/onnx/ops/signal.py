"""Signal-processing ONNX ops: DFT, STFT (https://onnx.ai/onnx/operators/onnx__DFT.html,
...STFT.html). Windows (Hann/Hamming/Blackman) are function-defined by ONNX.

Transforms multiply by a static DFT matrix (real and imaginary parts), so they need no FFT
op in StableHLO and keep the input's float dtype. The last input axis holds 1 (real) or 2
(real, imaginary) components, as the pages define.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..registry import onnx_op


def _dft_matrix(n_in: int, n_out: int, inverse: bool):
    k = np.arange(n_out)[:, None]
    j = np.arange(n_in)[None, :]
    ang = 2 * np.pi * k * j / n_in * (1 if inverse else -1)
    scale = 1.0 / n_in if inverse else 1.0
    return np.cos(ang) * scale, np.sin(ang) * scale


def _dft(x, axis: int, length: int, inverse: bool, onesided: bool):
    """``x``: (..., 1|2) with the signal along ``axis``; returns (..., 2)."""
    re = x[..., 0]
    im = x[..., 1] if x.shape[-1] == 2 else None
    n = re.shape[axis]
    if length != n:
        pad = [(0, 0)] * re.ndim
        if length > n:
            pad[axis] = (0, length - n)
            re = jnp.pad(re, pad)
            im = None if im is None else jnp.pad(im, pad)
        else:
            re = jnp.take(re, jnp.arange(length), axis=axis)
            im = None if im is None else jnp.take(im, jnp.arange(length), axis=axis)
    n_out = length // 2 + 1 if onesided else length
    c, s = (jnp.asarray(m, re.dtype) for m in _dft_matrix(length, n_out, inverse))

    def apply(m, v):
        return jnp.moveaxis(jnp.tensordot(v, m, axes=[[axis], [1]]), -1, axis)

    out_re = apply(c, re)
    out_im = apply(s, re)
    if im is not None:
        out_re = out_re - apply(s, im)
        out_im = out_im + apply(c, im)
    return jnp.stack([out_re, out_im], axis=-1)


@onnx_op("DFT", 17, until=17)
def dft_17(ctx, x, dft_length=None, *, axis=1, inverse=0, onesided=0):
    length = ctx.static(1)
    axis = axis % x.ndim
    n = int(np.asarray(length).reshape(())) if length is not None else x.shape[axis]
    return _dft(x, axis, n, bool(inverse), bool(onesided))


@onnx_op("DFT", 20)
def dft(ctx, x, dft_length=None, axis=None, *, inverse=0, onesided=0):
    """DFT-20: ``axis`` is an input (default -2, counted in the full rank)."""
    ax = ctx.static(2)
    ax = -2 if ax is None else int(np.asarray(ax).reshape(()))
    ax = ax % x.ndim
    length = ctx.static(1)
    n = int(np.asarray(length).reshape(())) if length is not None else x.shape[ax]
    return _dft(x, ax, n, bool(inverse), bool(onesided))


@onnx_op("STFT", 17)
def stft(ctx, signal, frame_step, window=None, frame_length=None, *, onesided=1):
    """STFT: frames of ``frame_length`` every ``frame_step`` samples, times ``window``,
    each transformed; output (batch, frames, bins, 2)."""
    step = int(np.asarray(ctx.static(1)).reshape(()))
    fl = ctx.static(3)
    if fl is not None:
        length = int(np.asarray(fl).reshape(()))
    elif window is not None:
        length = window.shape[0]
    else:
        raise ValueError("STFT needs a window or frame_length")
    n_frames = (signal.shape[1] - length) // step + 1
    idx = np.arange(n_frames)[:, None] * step + np.arange(length)[None, :]
    frames = signal[:, idx]  # (batch, frames, length, comps)
    if window is not None:
        frames = frames * window.reshape(1, 1, -1, 1).astype(signal.dtype)
    return _dft(frames, 2, length, False, bool(onesided))


@onnx_op("MelWeightMatrix", 17)
def mel_weight_matrix(ctx, num_mel_bins, dft_length, sample_rate, lower_hz, upper_hz, *, output_datatype=1):
    """MelWeightMatrix (all inputs static): triangular filters between mel-spaced edges,
    ``(dft_length // 2 + 1, num_mel_bins)``; edge bins are
    ``floor((dft_length + 1) * hz / sample_rate)`` as the operator page defines."""
    from ..graph import np_dtype

    bins, length, rate = (int(np.asarray(ctx.static(i)).reshape(())) for i in range(3))
    lo, hi = (float(np.asarray(ctx.static(i)).reshape(())) for i in (3, 4))
    mel = lambda hz: 2595 * np.log1p(hz / 700) / np.log(10)  # noqa: E731
    edges_mel = np.arange(bins + 2) * (mel(hi) - mel(lo)) / (bins + 2) + mel(lo)
    edges_hz = 700 * np.expm1(edges_mel / 2595 * np.log(10))
    edges = (((length + 1) * edges_hz) // rate).astype(int)
    out = np.zeros((length // 2 + 1, bins))
    for i in range(bins):
        left, center, right = edges[i], edges[i + 1], edges[i + 2]
        if center == left:
            out[center, i] = 1
        else:
            j = np.arange(left, center + 1)
            out[j, i] = (j - left) / (center - left)
        if right > center:
            j = np.arange(center, right)
            out[j, i] = (right - j) / (right - center)
    return out.astype(np_dtype(output_datatype))
