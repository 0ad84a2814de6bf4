"""Discrete Fourier transforms: ``_fft_r2c``, ``_fft_c2c``, ``_fft_c2r``
(``native_functions.yaml``; semantics of ``aten/src/ATen/native/SpectralOps.cpp``).

Every ``torch.fft.*`` function (and ``stft``) reaches these three ops after Core ATen
decomposition: the frontend functions pad or crop the input, pick the direction, and pass a
``normalization`` code that scales the result independently of the direction —
``0`` none, ``1`` by ``1/sqrt(n)``, ``2`` by ``1/n``, where ``n`` is the number of points of
the transformed signal (the product of the transformed dims' sizes; for ``c2r`` those of the
real output). Each rule is one ``jax.numpy.fft`` call over the given dims, whose ``norm``
argument is chosen to give that scaling in that direction; it lowers to ``stablehlo.fft``
(over at most 3 trailing dims per op, with transposes around it).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from ..lowering import NoSymbolicForm
from ..registry import register
from ._util import dims as _dims

aten = __import__("torch").ops.aten

#: ``normalization`` code → ``jax.numpy.fft``'s ``norm`` for a forward / an inverse transform.
#: ``numpy.fft`` scales the forward transform by 1 for "backward", 1/sqrt(n) for "ortho",
#: 1/n for "forward", and the inverse the other way round.
_FORWARD_NORM = {0: "backward", 1: "ortho", 2: "forward"}
_INVERSE_NORM = {0: "forward", 1: "ortho", 2: "backward"}


def _norm(normalization: int, forward: bool) -> str:
    table = _FORWARD_NORM if forward else _INVERSE_NORM
    if normalization not in table:
        raise ValueError(f"fft normalization {normalization} is not 0 (none), 1 (1/sqrt n) or 2 (1/n)")
    return table[normalization]


def _axes(dim: Sequence[int], ndim: int) -> tuple[int, ...]:
    """The transformed dims, non-negative, in the order given (the last one is the halved
    dim of ``r2c``/``c2r``; ``torch.export`` refuses a repeated dim)."""
    out = tuple(d % ndim if ndim else 0 for d in dim)
    _dims(list(dim), ndim)  # range check, as torch's wrap_dim
    return out


def _static_lengths(op: str, sizes: Sequence) -> None:
    """StableHLO ``fft`` takes its ``fft_length`` as an attribute (static); a transformed
    dim that is dynamic cannot convert (JAX's lowering refuses it, on every platform).

    Raises:
        NoSymbolicForm: a length is symbolic; names it (the frontend reports a
            :class:`~converter.errors.DynamicDimensionError` with the op and its line).
    """
    dynamic = [str(s) for s in sizes if jax.export.is_symbolic_dim(s)]
    if dynamic:
        raise NoSymbolicForm(
            f"{op} transforms a dynamic dim ({', '.join(dynamic)}): StableHLO fft needs static "
            "lengths (fft_length is an attribute)"
        )


@register(aten._fft_r2c.default)
def fft_r2c(x: jax.Array, dim: Sequence[int], normalization: int, onesided: bool) -> jax.Array:
    """Forward transform of a real tensor over ``dim``: float32 → complex64 (float64 →
    complex128), same shape except that with ``onesided`` the last dim of ``dim`` keeps its
    ``n // 2 + 1`` non-redundant entries (``torch.export`` refuses an empty ``dim``). Raises
    ``ValueError`` for a bad ``normalization``."""
    axes = _axes(dim, x.ndim)
    _static_lengths("_fft_r2c", [x.shape[a] for a in axes])
    norm = _norm(normalization, forward=True)
    if onesided:
        return jnp.fft.rfftn(x, axes=axes, norm=norm)
    return jnp.fft.fftn(x, axes=axes, norm=norm)


@register(aten._fft_c2c.default)
def fft_c2c(x: jax.Array, dim: Sequence[int], normalization: int, forward: bool) -> jax.Array:
    """Complex → complex transform over ``dim`` (``forward``: exponent sign -1, else +1),
    same shape and dtype. Raises ``ValueError`` for a bad ``normalization``."""
    axes = _axes(dim, x.ndim)
    if not axes:
        return x
    _static_lengths("_fft_c2c", [x.shape[a] for a in axes])
    norm = _norm(normalization, forward)
    fn = jnp.fft.fftn if forward else jnp.fft.ifftn
    return fn(x, axes=axes, norm=norm)


@register(aten._fft_c2r.default)
def fft_c2r(x: jax.Array, dim: Sequence[int], normalization: int, last_dim_size: int) -> jax.Array:
    """Inverse transform of a one-sided Hermitian spectrum over ``dim`` to a real tensor:
    complex64 → float32, the last dim of ``dim`` becoming ``last_dim_size`` long (its first
    ``last_dim_size // 2 + 1`` entries are read; the imaginary parts that a real signal
    cannot have are ignored, as pocketfft/MKL do; ``torch.export`` refuses an empty ``dim``).
    Raises ``ValueError`` for a bad ``normalization``."""
    axes = _axes(dim, x.ndim)
    _static_lengths("_fft_c2r", [*(x.shape[a] for a in axes[:-1]), last_dim_size])
    sizes = [x.shape[a] for a in axes[:-1]] + [int(last_dim_size)]
    return jnp.fft.irfftn(x, s=sizes, axes=axes, norm=_norm(normalization, forward=False))
