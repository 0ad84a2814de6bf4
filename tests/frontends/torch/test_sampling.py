"""Resampling ATen rules (``frontends/torch/ops/sampling.py``) against eager torch."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

from tests.frontends.torch.both_targets import check_targets, check_targets_batch
from tests.frontends.torch.conftest import run_check_batch

torch.manual_seed(0)
X2 = torch.randn(2, 3, 5, 6)


def _cases(fn, configs, *args) -> dict:
    """``{str(kwargs): (fn(*args, **kwargs), args)}``: one case of a batch per configuration."""
    return {str(kw): (functools.partial(fn, **kw), args) for kw in configs}


def test_nearest_2d():
    configs = [
        {"scale_factor": 2},
        {"scale_factor": 1.7},
        {"size": (7, 4)},
        {"size": (5, 6)},
        {"size": (13, 9), "mode": "nearest-exact"},
    ]
    # torch.export decomposes nearest-exact into indexing
    ops = ["aten.index.Tensor", "aten.upsample_nearest2d.vec"]
    run_check_batch(_cases(F.interpolate, configs, X2), ops=ops)


def test_bilinear_2d():
    configs = [
        {"mode": "bilinear", "align_corners": a, **kw}
        for a in (False, True)
        for kw in ({"size": (9, 11)}, {"size": (3, 4)}, {"scale_factor": 2.5})
    ]
    run_check_batch(
        _cases(F.interpolate, configs, X2), ops="aten.upsample_bilinear2d.vec", rtol=1e-5, atol=1e-6
    )


def test_nearest_1d_3d(check):
    x1, x3 = torch.randn(2, 3, 7), torch.randn(1, 2, 3, 4, 5)
    f = lambda a, b: (F.interpolate(a, size=10), F.interpolate(b, scale_factor=(2, 1.5, 0.6)))  # noqa: E731
    check(f, x1, x3)


#: grid_sample's padding modes x align_corners, the cases of one program per mode
GRID_CONFIGS = [
    {"padding_mode": p, "align_corners": a} for p in ("zeros", "border", "reflection") for a in (False, True)
]


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample(mode):
    grid = torch.rand(2, 4, 3, 2) * 2.6 - 1.3  # some samples outside [-1, 1]
    grid[0, 0, 0] = torch.tensor([0.25, -0.5])  # exact half-pixel positions
    cases = _cases(functools.partial(F.grid_sample, mode=mode), GRID_CONFIGS, X2, grid)
    one_row = functools.partial(F.grid_sample, mode=mode, padding_mode="reflection", align_corners=True)
    nan_y = grid.clone()
    nan_y[1, 0, 0, 1] = float("nan")  # torch reflects even NaN to row 0 there
    cases["reflection of a single row"] = (one_row, (X2[:, :, :1], nan_y))  # reflects to row 0
    run_check_batch(cases, ops="aten.grid_sampler_2d.default", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d(mode):
    x = torch.randn(2, 3, 4, 5, 6)
    grid = torch.rand(2, 3, 4, 2, 3) * 2.6 - 1.3  # some samples outside [-1, 1]
    grid[0, 0, 0, 0] = torch.tensor([0.25, -0.5, 0.0])  # half-pixel positions (nearest ties)
    cases = _cases(functools.partial(F.grid_sample, mode=mode), GRID_CONFIGS, x, grid)
    check_targets_batch(cases, ops="aten.grid_sampler_3d.default", rtol=1e-5, atol=1e-6)


def test_bilinear_antialias():
    configs = [
        {"size": (3, 4)},  # downscale: the filter widens
        {"size": (13, 7)},  # up in H, down in W
        {"size": (5, 6)},  # unchanged dims are left alone
        {"size": (1, 1)},
        {"scale_factor": (1.7, 0.45)},  # explicit scales set the filter width
        {"size": (9, 4), "align_corners": True},
    ]
    f = functools.partial(F.interpolate, mode="bilinear", antialias=True)
    cases = _cases(f, configs, X2 * 10)
    check_targets_batch(cases, ops="aten._upsample_bilinear2d_aa.default", rtol=1e-5, atol=1e-5)


def test_bilinear_antialias_float64_weights():
    f = lambda v: F.interpolate(v, size=(4, 9), mode="bilinear", antialias=True)  # noqa: E731
    check_targets(f, X2.double() * 10, ops="aten._upsample_bilinear2d_aa.default", rtol=1e-12, atol=1e-12)


def test_unsupported_modes_and_dtypes_raise():
    """Bicubic grid sampling, a 3-d interpolation mode torch lacks too, and an antialiased
    bilinear resize of uint8 (torch's fixed-point kernel) raise naming them."""
    import jax.numpy as jnp
    from converter.frontends.torch.ops import sampling as s

    x4, x5 = jnp.zeros((1, 1, 2, 2)), jnp.zeros((1, 1, 2, 2, 2))
    with pytest.raises(NotImplementedError, match="grid_sampler_2d: bicubic"):
        s.grid_sampler_2d(x4, jnp.zeros((1, 1, 1, 2)), 2, 0, False)
    with pytest.raises(NotImplementedError, match="grid_sampler_3d: interpolation mode 2"):
        s.grid_sampler_3d(x5, jnp.zeros((1, 1, 1, 1, 3)), 2, 0, False)
    with pytest.raises(NotImplementedError, match="_upsample_bilinear2d_aa of uint8"):
        s.upsample_bilinear2d_aa(x4.astype(jnp.uint8), [3, 3], False, None, None)


# ------------------------------------------------ rules called directly (no export)


def test_nearest_index_shortcuts_of_aten():
    """ATen's ``nearest_idx`` (torch's 2-d CPU kernel) takes the source index as is when the
    output size equals the input size and as ``dst >> 1`` when it is twice it, whatever the
    scale factor: 5 * 1.1 and 5 * 2.1 round down to those sizes, where ``floor(dst / scale)``
    would differ. The 1-d and 3-d kernels take no shortcut: ``floor(dst / scale)`` there."""
    from converter.frontends.torch.ops import sampling as s

    from tests.frontends.torch.conftest import check_rule

    aten = torch.ops.aten
    x = torch.arange(50.0).reshape(1, 2, 5, 5)
    check_rule(s._nearest_rule(2, False), aten.upsample_nearest2d.vec, x, None, [1.1, 2.1], atol=0)
    check_rule(s._nearest_rule(1, False), aten.upsample_nearest1d.vec, x[0], None, [1.1], atol=0)
    check_rule(s._nearest_rule(1, False), aten.upsample_nearest1d.vec, x[0], None, [2.1], atol=0)
    x3 = torch.arange(250.0).reshape(1, 2, 5, 5, 5)
    check_rule(s._nearest_rule(3, False), aten.upsample_nearest3d.vec, x3, None, [1.1, 2.1, 1.0], atol=0)


def test_linear_downscale_factor_and_single_aligned_output():
    """A scale factor below 1 sets the source step (``1 / scale``, not ``n_in / n_out``: 7 * 0.45
    gives 3 outputs at a step of 2.22); ``align_corners`` with a single output takes the first
    element (scale 0, no division by ``n_out - 1``)."""
    from converter.frontends.torch.ops import sampling as s

    from tests.frontends.torch.conftest import check_rule

    aten = torch.ops.aten
    x = torch.randn(1, 2, 7, 7, generator=torch.Generator().manual_seed(0))
    check_rule(s._linear_rule(2), aten.upsample_bilinear2d.vec, x, None, False, [0.45, 0.7], rtol=1e-6)
    check_rule(s._linear_rule(1), aten.upsample_linear1d.vec, x[0], [1], True, None)
    check_rule(s._linear_rule(2), aten.upsample_bilinear2d.vec, x, [1, 2], True, None)


def test_antialias_rule_edge_sizes():
    """The antialiased resize: a single aligned output (scale 0: the first row and column), an
    upscale whose middle output spans three source taps (3 -> 37), and an explicit downscale
    factor (``1 / scale`` sets the filter width, not ``n_in / n_out``)."""
    from converter.frontends.torch.ops import sampling as s

    from tests.frontends.torch.conftest import check_rule

    op = torch.ops.aten._upsample_bilinear2d_aa.default
    x = torch.randn(1, 2, 7, 3, generator=torch.Generator().manual_seed(0))
    check_rule(s.upsample_bilinear2d_aa, op, x, [1, 1], True, None, None)
    check_rule(s.upsample_bilinear2d_aa, op, x, [7, 37], False, None, None, rtol=1e-5, atol=1e-6)
    check_rule(s.upsample_bilinear2d_aa, op, x, [3, 3], False, 0.45, 1.0, rtol=1e-5, atol=1e-6)
