"""FFT ATen rules (``frontends/torch/ops/fft.py``) against eager torch, through ``to_jax``
(the ``check`` fixture) and ``to_torch`` (the torch → StableHLO → torch round trip)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import converter
from converter.validate import as_numpy
from frontends.torch import export

from .conftest import Fn

torch.manual_seed(0)
REAL = torch.randn(3, 6, 5)
CPLX = torch.randn(3, 6, 5, dtype=torch.complex64)
REAL5 = torch.randn(2, 3, 2, 4, 5)  # more than the 3 dims one stablehlo.fft takes


def check_both(check, fn, *args, ops=(), rtol=1e-5, atol=1e-5):
    """``check`` (to_jax) and the same comparison through ``to_torch``."""
    check(fn, *args, ops=ops, rtol=rtol, atol=atol)
    module = Fn(fn)
    with torch.no_grad():
        want = module(*args)
        got = converter.from_torch(export(module, args)).to_torch()(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(as_numpy(got), as_numpy(want), rtol=rtol, atol=atol)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x, norm: torch.fft.rfft(x, norm=norm),
        lambda x, norm: torch.fft.rfft(x, n=8, dim=1, norm=norm),  # zero-padded
        lambda x, norm: torch.fft.rfft2(x, s=(4, 3), norm=norm),  # cropped
        lambda x, norm: torch.fft.rfftn(x, dim=(2, 0), norm=norm),  # unsorted dims: 0 is halved
        lambda x, norm: torch.fft.ihfft(x, norm=norm).resolve_conj(),  # eager sets the conj bit
    ],
    ids=["rfft", "rfft_n", "rfft2_s", "rfftn_dims", "ihfft"],
)
def test_r2c(check, fn, norm):
    check_both(check, lambda x: fn(x, norm), REAL, ops="aten._fft_r2c.default")


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x, norm: torch.fft.fft(x, norm=norm),
        lambda x, norm: torch.fft.ifft(x, dim=0, norm=norm),
        lambda x, norm: torch.fft.fft2(x, s=(7, 4), norm=norm),
        lambda x, norm: torch.fft.ifftn(x, norm=norm),
    ],
    ids=["fft", "ifft", "fft2_s", "ifftn"],
)
def test_c2c(check, fn, norm):
    check_both(check, lambda x: fn(x, norm), CPLX, ops="aten._fft_c2c.default")


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x, norm: torch.fft.irfft(x, norm=norm),  # 2 * (5 - 1) = 8 points
        lambda x, norm: torch.fft.irfft(x, n=9, dim=1, norm=norm),  # odd length, zero-padded input
        lambda x, norm: torch.fft.irfftn(x, s=(4, 7), norm=norm),
        lambda x, norm: torch.fft.hfft(x, n=5, norm=norm),  # cropped input
        lambda x, norm: torch.fft.hfft2(x, norm=norm),
    ],
    ids=["irfft", "irfft_odd", "irfftn_s", "hfft", "hfft2"],
)
def test_c2r(check, fn, norm):
    """The imaginary parts of the DC (and even-length Nyquist) bins are random here: the
    transform must ignore them as torch does."""
    check_both(check, lambda x: fn(x, norm), CPLX, ops="aten._fft_c2r.default")


def test_real_input_full_spectrum(check):
    """``fft`` of a real tensor is ``_fft_r2c(onesided=False)``: both halves."""
    check_both(check, lambda x: torch.fft.fft(x, dim=1), REAL, ops="aten._fft_r2c.default")


def test_more_than_three_dims(check):
    ops = ("aten._fft_r2c.default", "aten._fft_c2r.default")
    check_both(check, lambda x: torch.fft.irfftn(torch.fft.rfftn(x), s=x.shape), REAL5, ops=ops)


def test_float64(check):
    x = torch.randn(4, 6, dtype=torch.float64)
    check_both(check, torch.fft.rfft2, x, ops="aten._fft_r2c.default", rtol=1e-12, atol=1e-12)


def test_stft(check):
    x = torch.randn(2, 64)
    window = torch.hann_window(16)
    check_both(
        check,
        lambda x, w: torch.view_as_real(torch.stft(x, 16, hop_length=4, window=w, return_complex=True)),
        x,
        window,
        ops="aten._fft_r2c.default",
    )
