"""``stablehlo.fft`` through the JAX backend: every fft_type, 1 to 3 transformed dims."""

import jax.numpy as jnp
import numpy as np
import pytest

from .helpers import assert_same

rng = np.random.default_rng(0)
REAL = rng.normal(size=(2, 5, 6, 4)).astype(np.float32)
CPLX = (rng.normal(size=(2, 5, 6, 4)) + 1j * rng.normal(size=(2, 5, 6, 4))).astype(np.complex64)


@pytest.mark.parametrize("axes", [(-1,), (-2, -1), (-3, -2, -1)])
@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x, axes: jnp.fft.fftn(x, axes=axes), CPLX),
        (lambda x, axes: jnp.fft.ifftn(x, axes=axes), CPLX),
        (lambda x, axes: jnp.fft.rfftn(x, axes=axes), REAL),
        (lambda x, axes: jnp.fft.irfftn(x, s=[REAL.shape[a] for a in axes], axes=axes), CPLX),
        (lambda x, axes: jnp.fft.irfftn(x, s=[7] * len(axes), axes=axes), CPLX),  # odd length
    ],
    ids=["fft", "ifft", "rfft", "irfft", "irfft_odd"],
)
def test_fft_types(fn, x, axes):
    assert_same(lambda v: fn(v, axes), x, rtol=1e-5, atol=1e-5)


def test_fft_float64():
    x = rng.normal(size=(3, 8))
    assert_same(jnp.fft.rfft, x, rtol=1e-12, atol=1e-12)
