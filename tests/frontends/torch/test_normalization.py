"""Normalization ATen rules (``frontends/torch/ops/normalization.py``) against eager
torch: layer norm (with saved mean/rstd), group norm, batch norm in eval and training."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

torch.manual_seed(0)
X = torch.randn(4, 6, 5, 3) * 3 + 1


@pytest.mark.parametrize("shape", [(3,), (5, 3), (6, 5, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(check, shape, affine):
    w = torch.rand(shape) + 0.5 if affine else None
    b = torch.randn(shape) if affine else None

    def fn(x):
        out, mean, rstd = torch.ops.aten.native_layer_norm(x, list(shape), w, b, 1e-5)
        return F.layer_norm(x, shape, w, b, eps=1e-3), out, mean, rstd

    check(fn, X, ops="aten.native_layer_norm.default", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm(check, groups):
    m = torch.nn.GroupNorm(groups, 6).eval()
    with torch.no_grad():
        m.weight.uniform_(0.5, 1.5)
        m.bias.uniform_(-1, 1)
    check(m, X, ops="aten.native_group_norm.default", rtol=1e-5, atol=1e-5)


def _bn(dims, channels):
    m = {1: torch.nn.BatchNorm1d, 2: torch.nn.BatchNorm2d, 3: torch.nn.BatchNorm3d}[dims](channels)
    with torch.no_grad():
        m.running_mean.uniform_(-1, 1)
        m.running_var.uniform_(0.5, 2)
        m.weight.uniform_(0.5, 1.5)
        m.bias.uniform_(-1, 1)
    return m


@pytest.mark.parametrize(
    "dims, shape", [(1, (4, 6)), (1, (4, 6, 7)), (2, (4, 6, 5, 3)), (3, (2, 6, 3, 2, 2))]
)
def test_batch_norm_eval(check, dims, shape):
    check(
        _bn(dims, 6).eval(), torch.randn(shape) * 2, ops="aten._native_batch_norm_legit_no_training.default"
    )


def test_batch_norm_functional_training_batch_stats(check):
    x = torch.randn(4, 6, 5, 3) * 2 + 1
    w, b = torch.rand(6) + 0.5, torch.randn(6)

    def fn(v):
        return F.batch_norm(v, None, None, w, b, training=True), F.instance_norm(v)

    check(fn, x, rtol=1e-5, atol=1e-5)


class TrainingBN(torch.nn.Module):
    """Batch norm in training mode, returning the updated running statistics."""

    def __init__(self):
        super().__init__()
        self.bn = _bn(2, 6).train()

    def forward(self, v):
        out = self.bn(v)
        return out, self.bn.running_mean * 1, self.bn.running_var * 1


def test_batch_norm_training_updates_running_stats(check):
    x = torch.randn(4, 6, 5, 3) * 2 + 1
    # The conversion snapshots the initial running stats before the eager reference call
    # updates them, so both sides start from the same statistics.
    check(TrainingBN(), x, rtol=1e-5, atol=1e-5)


def test_batch_norm_with_update(check):
    x = torch.randn(4, 6, 5, 3) * 2 + 1
    w, b, rm, rv = torch.rand(6) + 0.5, torch.randn(6), torch.randn(6), torch.rand(6) + 0.5

    def fn(v, rm, rv):
        out = torch.ops.aten._batch_norm_with_update_functional(v, w, b, rm, rv, 0.1, 1e-5)
        return out[0], out[1], out[2], out[4], out[5]

    check(fn, x, rm, rv, ops="aten._batch_norm_with_update_functional.default", rtol=1e-5, atol=1e-5)


def test_functional_batch_norm_outside_training():
    """``_native_batch_norm_legit_functional`` with ``training=False`` (export gives the
    ``no_training`` op for eval mode, so called directly): normalized by the running
    statistics, which come back unchanged."""
    from converter.frontends.torch.ops.normalization import batch_norm_functional

    from tests.frontends.torch.conftest import check_rule

    x, w, b = torch.randn(2, 3, 4), torch.rand(3) + 0.5, torch.randn(3)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    op = torch.ops.aten._native_batch_norm_legit_functional.default
    check_rule(batch_norm_functional, op, x, w, b, rm, rv, False, 0.1, 1e-5, rtol=1e-5)
