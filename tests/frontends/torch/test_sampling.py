"""Resampling ATen rules (``frontends/torch/ops/sampling.py``) against eager torch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.frontends.torch.both_targets import check_targets

torch.manual_seed(0)
X2 = torch.randn(2, 3, 5, 6)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"scale_factor": 2},
        {"scale_factor": 1.7},
        {"size": (7, 4)},
        {"size": (5, 6)},
        {"size": (13, 9), "mode": "nearest-exact"},
    ],
)
def test_nearest_2d(check, kwargs):
    # torch.export decomposes nearest-exact into indexing
    op = "aten.index.Tensor" if kwargs.get("mode") else "aten.upsample_nearest2d.vec"
    check(lambda v: F.interpolate(v, **kwargs), X2, ops=op)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("kwargs", [{"size": (9, 11)}, {"size": (3, 4)}, {"scale_factor": 2.5}])
def test_bilinear_2d(check, align_corners, kwargs):
    f = lambda v: F.interpolate(v, mode="bilinear", align_corners=align_corners, **kwargs)  # noqa: E731
    check(f, X2, ops="aten.upsample_bilinear2d.vec", rtol=1e-5, atol=1e-6)


def test_nearest_1d_3d(check):
    x1, x3 = torch.randn(2, 3, 7), torch.randn(1, 2, 3, 4, 5)
    f = lambda a, b: (F.interpolate(a, size=10), F.interpolate(b, scale_factor=(2, 1.5, 0.6)))  # noqa: E731
    check(f, x1, x3)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(check, mode, padding_mode, align_corners):
    grid = torch.rand(2, 4, 3, 2) * 2.6 - 1.3  # some samples outside [-1, 1]
    grid[0, 0, 0] = torch.tensor([0.25, -0.5])  # exact half-pixel positions
    f = lambda v, g: F.grid_sample(v, g, mode, padding_mode, align_corners)  # noqa: E731
    check(f, X2, grid, ops="aten.grid_sampler_2d.default", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_3d(mode, padding_mode, align_corners):
    x = torch.randn(2, 3, 4, 5, 6)
    grid = torch.rand(2, 3, 4, 2, 3) * 2.6 - 1.3  # some samples outside [-1, 1]
    grid[0, 0, 0, 0] = torch.tensor([0.25, -0.5, 0.0])  # half-pixel positions (nearest ties)
    f = lambda v, g: F.grid_sample(v, g, mode, padding_mode, align_corners)  # noqa: E731
    check_targets(f, x, grid, ops="aten.grid_sampler_3d.default", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": (3, 4)},  # downscale: the filter widens
        {"size": (13, 7)},  # up in H, down in W
        {"size": (5, 6)},  # unchanged dims are left alone
        {"size": (1, 1)},
        {"scale_factor": (1.7, 0.45)},  # explicit scales set the filter width
        {"size": (9, 4), "align_corners": True},
    ],
)
def test_bilinear_antialias(kwargs):
    f = lambda v: F.interpolate(v, mode="bilinear", antialias=True, **kwargs)  # noqa: E731
    check_targets(f, X2 * 10, ops="aten._upsample_bilinear2d_aa.default", rtol=1e-5, atol=1e-5)


def test_bilinear_antialias_float64_weights():
    f = lambda v: F.interpolate(v, size=(4, 9), mode="bilinear", antialias=True)  # noqa: E731
    check_targets(f, X2.double() * 10, ops="aten._upsample_bilinear2d_aa.default", rtol=1e-12, atol=1e-12)
