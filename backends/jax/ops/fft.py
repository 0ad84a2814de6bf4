"""``stablehlo.fft`` (StableHLO spec section "fft").

The op transforms the trailing ``len(fft_length)`` dimensions (at most 3); ``fft_type`` is
``FFT``/``IFFT`` (complex → complex), ``RFFT`` (real → the non-redundant half of the last
dimension, ``n // 2 + 1``) or ``IRFFT`` (that half → real of length ``fft_length[-1]``). The
inverse types scale by ``1 / prod(fft_length)``. ``jax.lax.fft`` has exactly these
semantics, so the rule is a direct call.
"""

from __future__ import annotations

from jax import lax

from ..registry import register

_TYPES = {
    "FFT": lax.FftType.FFT,
    "IFFT": lax.FftType.IFFT,
    "RFFT": lax.FftType.RFFT,
    "IRFFT": lax.FftType.IRFFT,
}


@register("stablehlo.fft")
def _fft(interp, op, x):
    kind = str(op.attr("fft_type"))
    if kind not in _TYPES:
        raise NotImplementedError(f"stablehlo.fft with fft_type {kind}")
    return lax.fft(x, _TYPES[kind], tuple(int(n) for n in op.attr("fft_length")))
