"""``aten.convolution`` (``frontends/torch/ops/convolution.py``) against eager torch:
1-d/2-d/3-d, stride, padding, dilation, groups, bias, and transposed convolution with
output padding."""

from __future__ import annotations

import pytest
import torch

torch.manual_seed(0)

CONV = [
    # (dims, in, out, kernel, kwargs)
    (1, 4, 6, 3, {}),
    (1, 4, 6, 5, {"stride": 2, "padding": 2, "dilation": 2, "groups": 2}),
    (2, 3, 8, 3, {"padding": 1}),
    (2, 4, 8, (3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "groups": 4, "bias": False}),
    (2, 4, 4, 3, {"padding": "same", "dilation": 2}),
    (3, 2, 4, 3, {"stride": 2, "padding": 1}),
]
CONV_T = [
    (1, 4, 6, 3, {"stride": 2}),
    (2, 4, 6, 3, {"stride": 2, "padding": 1, "output_padding": 1}),
    (2, 4, 8, (3, 4), {"stride": (2, 3), "padding": (1, 2), "dilation": (2, 1), "groups": 2}),
    (3, 2, 4, 2, {"stride": 2, "bias": False}),
]
_MODULES = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}
_MODULES_T = {1: torch.nn.ConvTranspose1d, 2: torch.nn.ConvTranspose2d, 3: torch.nn.ConvTranspose3d}


def _input(dims, channels):
    return torch.randn(2, channels, *([9, 8, 7][:dims]))


@pytest.mark.parametrize("dims, cin, cout, k, kwargs", CONV)
def test_conv(check, dims, cin, cout, k, kwargs):
    m = _MODULES[dims](cin, cout, k, **kwargs).eval()
    check(m, _input(dims, cin), ops="aten.convolution.default", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dims, cin, cout, k, kwargs", CONV_T)
def test_conv_transpose(check, dims, cin, cout, k, kwargs):
    m = _MODULES_T[dims](cin, cout, k, **kwargs).eval()
    check(m, _input(dims, cin), ops="aten.convolution.default", rtol=1e-5, atol=1e-5)


def test_unbatched_conv(check):
    m = torch.nn.Conv2d(3, 5, 3).eval()
    check(m, torch.randn(3, 8, 8), ops="aten.convolution.default", rtol=1e-5, atol=1e-5)


def test_convolution_of_more_than_3_spatial_dims_raises():
    """torch has no 4-d convolution kernel; the layout helper refuses one."""
    from converter.frontends.torch.ops.convolution import _spec

    assert _spec(2) == ("NCHW", "OIHW", "NCHW")
    with pytest.raises(NotImplementedError, match="4-d convolution"):
        _spec(4)
