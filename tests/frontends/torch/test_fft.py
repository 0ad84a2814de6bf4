"""FFT ATen rules (``frontends/torch/ops/fft.py``) against eager torch, through ``to_jax``
(the ``check`` fixture's comparison) and ``to_torch`` (the torch → StableHLO → torch round
trip)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from converter.tools.validate import as_numpy

from .conftest import assert_jax_matches, convert_batch

torch.manual_seed(0)
REAL = torch.randn(3, 6, 5)
CPLX = torch.randn(3, 6, 5, dtype=torch.complex64)
REAL5 = torch.randn(2, 3, 2, 4, 5)  # more than the 3 dims one stablehlo.fft takes
NORMS = (None, "ortho", "forward")  # each parametrized test checks the three in one program


def check_both(fn, *args, ops=(), rtol=1e-5, atol=1e-5):
    """``fn(*args)`` through ``to_jax`` and ``to_torch`` (:func:`check_norms` of one norm)."""
    check_norms(lambda *a, norm: fn(*a), args, ops=ops, rtol=rtol, atol=atol, norms=(None,))


def check_norms(fn, args, *, ops, rtol=1e-5, atol=1e-5, norms=NORMS):
    """``fn(*args, norm=n)`` for each ``n`` of ``norms``, in one program
    (:func:`convert_batch`), against eager torch through ``to_jax`` (``check``'s comparison)
    and ``to_torch`` (the torch → StableHLO → torch round trip); failures named by norm."""
    cases = {f"norm={n}": (functools.partial(fn, norm=n), args) for n in norms}
    failures = []
    for name, r in convert_batch(cases, ops, targets=("jax", "torch")).items():
        try:
            assert_jax_matches(r["jax"], r["eager"], rtol, atol)
        except AssertionError as e:
            failures.append(f"{name} to_jax: {e}")
        (want,), (got,) = r["eager"], r["torch"]
        try:
            assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.dtype)
            np.testing.assert_allclose(as_numpy(got), as_numpy(want), rtol=rtol, atol=atol)
        except AssertionError as e:
            failures.append(f"{name} to_torch: {e}")
    assert not failures, "\n".join(failures)


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
def test_r2c(fn):
    check_norms(fn, (REAL,), ops="aten._fft_r2c.default")


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
def test_c2c(fn):
    check_norms(fn, (CPLX,), ops="aten._fft_c2c.default")


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
def test_c2r(fn):
    """The imaginary parts of the DC (and even-length Nyquist) bins are random here: the
    transform must ignore them as torch does."""
    check_norms(fn, (CPLX,), ops="aten._fft_c2r.default")


def test_real_input_full_spectrum():
    """``fft`` of a real tensor is ``_fft_r2c(onesided=False)``: both halves."""
    check_both(lambda x: torch.fft.fft(x, dim=1), REAL, ops="aten._fft_r2c.default")


def test_more_than_three_dims():
    ops = ("aten._fft_r2c.default", "aten._fft_c2r.default")
    check_both(lambda x: torch.fft.irfftn(torch.fft.rfftn(x), s=x.shape), REAL5, ops=ops)


def test_float64():
    x = torch.randn(4, 6, dtype=torch.float64)
    check_both(torch.fft.rfft2, x, ops="aten._fft_r2c.default", rtol=1e-12, atol=1e-12)


def test_stft():
    x = torch.randn(2, 64)
    window = torch.hann_window(16)
    check_both(
        lambda x, w: torch.view_as_real(torch.stft(x, 16, hop_length=4, window=w, return_complex=True)),
        x,
        window,
        ops="aten._fft_r2c.default",
    )


def test_c2c_of_no_dim_and_an_unknown_normalization():
    """``fftn(x, dim=())`` reaches ``_fft_c2c`` with no dim: ``x`` itself; a normalization
    code other than 0, 1, 2 (torch's kernel takes it and computes something) raises."""
    from converter.frontends.torch.ops.fft import fft_c2c, fft_r2c

    x = CPLX.numpy()
    assert fft_c2c(x, [], 0, True) is x
    with pytest.raises(ValueError, match="fft normalization 3 is not 0"):
        fft_r2c(REAL.numpy(), [0], 3, False)


def test_c2r_over_a_dynamic_dim_is_refused_by_name():
    """StableHLO ``fft`` takes static lengths (``fft_length`` is an attribute): the rule of an
    inverse real transform over a dynamic dim other than the last of ``dim`` (whose length is
    the static ``last_dim_size``) raises NoSymbolicForm naming the op and the dim (which the
    frontend reports as a DynamicDimensionError at the op's line)."""
    import jax
    from converter.frontends.torch.lowering import NoSymbolicForm
    from converter.frontends.torch.ops.fft import fft_c2r

    x = jax.ShapeDtypeStruct(jax.export.symbolic_shape("3, n, 5"), np.complex64)
    with pytest.raises(NoSymbolicForm, match=r"_fft_c2r transforms a dynamic dim \(n\)"):
        jax.eval_shape(lambda x: fft_c2r(x, [1, 2], 0, 8), x)
