"""Fused-kernel ATen rules (``frontends/torch/ops/fused.py``) against eager torch, on both
targets: ``_trilinear`` (``F.bilinear``) and the chunked linear cross-entropy ops."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

from tests.frontends.torch.both_targets import check_targets

torch.manual_seed(0)


@pytest.mark.parametrize("batch", [(), (4,), (2, 3)])
def test_bilinear(batch):
    a, b = torch.randn(*batch, 3), torch.randn(*batch, 4)
    w, bias = torch.randn(5, 3, 4), torch.randn(5)
    fn = lambda x, y, w, c: (F.bilinear(x, y, w, c), F.bilinear(x, y, w))  # noqa: E731
    check_targets(fn, a, b, w, bias, ops="aten._trilinear.default", rtol=1e-5, atol=1e-5)


def test_trilinear_general_expand_and_sum_dims():
    def fn(x, y, z):
        return (
            torch.ops.aten._trilinear(x, y, z, [2], [0], [1], [3]),  # inputs missing different dims
            torch.ops.aten._trilinear(x, y, z, [2], [0], [1], []),  # no sum: a 4-d product
            torch.ops.aten._trilinear(x, y, z, [2], [0], [1], [0, 3], 0),
        )

    x, y, z = torch.randn(2, 3, 6), torch.randn(3, 4, 6), torch.randn(2, 4, 6)
    check_targets(fn, x, y, z, ops="aten._trilinear.default", rtol=1e-5, atol=1e-5)


OPTS = LinearCrossEntropyOptions(batch_chunk_size=3)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("class_weight", [False, True])
def test_linear_cross_entropy_chunked(reduction, class_weight):
    x, lw, lb = torch.randn(7, 4), torch.randn(6, 4), torch.randn(6)
    t = torch.tensor([0, 5, 2, 2, -100, 3, 1])  # an ignored row (default ignore_index)
    cw = torch.rand(6) if class_weight else None

    def fn(x, lw, lb, t):
        return (
            F.linear_cross_entropy(x, lw, t, weight=cw, reduction=reduction, options=OPTS),
            F.linear_cross_entropy(x, lw, t, linear_bias=lb, reduction=reduction, options=OPTS),
            F.linear_cross_entropy(x, lw, t.clamp(min=0), ignore_index=2, reduction=reduction, options=OPTS),
        )

    name = "batch_chunked" if reduction != "none" else "batch_chunked_no_reduction"
    check_targets(
        fn, x, lw, lb, t, ops=f"torch_nn._linear_cross_entropy_{name}.default", rtol=1e-5, atol=1e-5
    )


def test_linear_cross_entropy_chunked_mean_of_all_ignored_is_nan():
    fn = lambda x, lw, t: F.linear_cross_entropy(x, lw, t, options=OPTS)  # noqa: E731
    x, lw, t = torch.randn(3, 4), torch.randn(5, 4), torch.full((3,), -100)
    check_targets(fn, x, lw, t, ops="torch_nn._linear_cross_entropy_batch_chunked.default")


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_linear_cross_entropy_chunked_precomputed_gradients(reduction):
    # torch registers the custom op when F.linear_cross_entropy first imports its module:
    # import it here, so the test does not depend on another one running first
    import torch.nn.modules.linear_cross_entropy  # noqa: F401

    op = torch.ops.torch_nn._linear_cross_entropy_batch_chunked

    def fn(x, lw, lb, t, cw):
        flags = (True, True, True, True)
        return op(x, lw, t, lb, cw, reduction, 1, 0.0, 2, "compact", torch.float32, *flags)

    x, lw, lb, cw = torch.randn(5, 3), torch.randn(4, 3), torch.randn(4), torch.rand(4)
    t = torch.tensor([0, 3, 1, 1, 2])  # class 1 is ignore_index
    check_targets(fn, x, lw, lb, t, cw, ops="torch_nn._linear_cross_entropy_batch_chunked.default", rtol=1e-5)


def test_forms_the_fused_rules_refuse():
    """``_trilinear`` over more dims than einsum has letters, and the chunked linear
    cross-entropy with label smoothing or no reduction (torch never routes those to it)."""
    import jax.numpy as jnp
    from converter.frontends.torch.ops.fused import linear_cross_entropy_chunked, trilinear

    one = jnp.zeros((1,) * 53)
    with pytest.raises(NotImplementedError, match="_trilinear over 53 dims"):
        trilinear(one, one, one, [], [], [], [])
    x, lw, t = jnp.zeros((2, 3)), jnp.zeros((4, 3)), jnp.zeros(2, int)
    for reduction, smoothing in (("mean", 0.1), ("none", 0.0)):
        with pytest.raises(
            NotImplementedError, match=f"reduction='{reduction}', label_smoothing={smoothing}"
        ):
            linear_cross_entropy_chunked(
                x, lw, t, None, None, reduction, -100, smoothing, 1, None, None, False, False, False, False
            )
