"""Pooling ATen rules (``frontends/torch/ops/pooling.py``) against eager torch: values,
max-pooling indices, ceil mode, padding, dilation, divisors."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import converter
from converter import mlir
from tests.frontends.torch.both_targets import check_targets, check_targets_batch
from tests.frontends.torch.conftest import Fn, run_check_batch

torch.manual_seed(0)
X = torch.randn(2, 3, 9, 10)


def _cases(fn, configs, *args) -> dict:
    """``{str(kwargs): (fn(*args, **kwargs), args)}``: one case of a batch per configuration."""
    return {str(kw): (functools.partial(fn, **kw), args) for kw in configs}


def test_max_pool2d_with_indices():
    configs = [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": (3, 2), "stride": (2, 3), "dilation": (2, 1)},
        {"kernel_size": 3, "stride": 2, "ceil_mode": True},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "dilation": 2},
    ]
    cases = _cases(functools.partial(F.max_pool2d, return_indices=True), configs, X)
    run_check_batch(cases, ops="aten.max_pool2d_with_indices.default")


_VALUES_ONLY = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": (3, 2), "stride": (2, 3), "padding": (1, 0)},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
]
_DILATED = [
    {"kernel_size": (3, 2), "stride": (2, 3), "dilation": (2, 1)},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "dilation": 2},
]


def _main_ops(module) -> list[str]:
    """Names of the ops ``@main`` runs (not those of the private functions JAX left dead)."""
    return [op.name for op in mlir.walk_ops(mlir.main_function(module.mlir))]


@pytest.mark.parametrize("kwargs", _VALUES_ONLY)
def test_max_pool_values_are_one_reduce_window(kwargs):
    # without its indices, max pooling is one reduce_window max over the -inf padded input,
    # the form every backend emits as its native max pooling; NaN windows give NaN
    x = X.clone()
    x[0, 0, 2, 3] = float("nan")
    x[1, 1, :4] = 0.5  # ties
    fn = lambda v: F.max_pool2d(v, **kwargs)  # noqa: E731
    ops = _main_ops(converter.from_torch(Fn(fn), (x,)))
    assert ops.count("stablehlo.reduce_window") == 1, ops
    assert not {"stablehlo.gather", "stablehlo.iota", "stablehlo.concatenate"} & set(ops), ops
    check_targets(fn, x, ops="aten.max_pool2d_with_indices.default", rtol=0, atol=0)


@pytest.mark.parametrize("kwargs", _DILATED)
def test_dilated_max_pool_values(kwargs):
    # dilated windows take their values from the stacked windows (JAX cannot differentiate
    # a dilated reduce_window max)
    x = X.clone()
    x[0, 0, 2, 3] = float("nan")
    check_targets(
        lambda v: F.max_pool2d(v, **kwargs), x, ops="aten.max_pool2d_with_indices.default", rtol=0, atol=0
    )


@pytest.mark.parametrize("kwargs", _VALUES_ONLY + _DILATED)
def test_grad_through_converted_max_pool_goes_to_the_first_maximum(kwargs):
    # jax.grad of the converted function: each window's gradient goes to its first
    # maximum, as torch's kernel sends it (through JAX's reduce_window max gradient, or the
    # chosen element of the stacked windows when dilated)
    x = torch.randint(0, 3, (2, 3, 9, 10)).float()  # many ties
    g = torch.randn_like(F.max_pool2d(x, **kwargs))
    f = converter.from_torch(Fn(lambda v: F.max_pool2d(v, **kwargs)), (x,)).to_jax()
    got = jax.grad(lambda v: (f(v) * g.numpy()).sum())(x.numpy())
    xt = x.clone().requires_grad_()
    (F.max_pool2d(xt, **kwargs) * g).sum().backward()
    np.testing.assert_array_equal(np.asarray(got), xt.grad.numpy())


def test_max_pool_ties_pick_first_and_ints(check):
    """Ties on floats and integers (padded with the dtype's lowest value), a ceil-mode window
    that would start in the padding (dropped), an integer average (truncated)."""
    x = torch.tensor([[[[1.0, 1.0, 0.0, 2.0], [1.0, 0.0, 2.0, 2.0], [5.0, 5.0, 5.0, 5.0]]]])

    def fn(v, i):
        return (
            F.max_pool2d(v, 2, 1, return_indices=True),
            F.max_pool2d(i, 2, 1, padding=1, return_indices=True),
            F.max_pool2d(v, 2, 2, 1, ceil_mode=True, return_indices=True),  # 3 rows: 2 windows
            F.avg_pool2d(i * 3 - 7, 2, 1),
        )

    ops = ["aten.max_pool2d_with_indices.default", "aten.avg_pool2d.default"]
    check(fn, x, (x * 2 - 5).long(), ops=ops)


def test_max_pool_1d_3d(check):
    x1, x3 = torch.randn(2, 3, 11), torch.randn(1, 2, 5, 6, 7)

    def fn(a, b):
        return F.max_pool1d(a, 3, 2, 1, return_indices=True), F.max_pool3d(
            b, 2, (1, 2, 2), return_indices=True
        )

    check(fn, x1, x3, ops="aten.max_pool3d_with_indices.default")


def test_avg_pool2d():
    configs = [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        {"kernel_size": (2, 3), "divisor_override": 5},
    ]
    run_check_batch(_cases(F.avg_pool2d, configs, X), ops="aten.avg_pool2d.default", rtol=1e-5, atol=1e-6)


def test_avg_pool_1d_3d(check):
    x1, x3 = torch.randn(2, 3, 11), torch.randn(1, 2, 5, 6, 7)

    def fn(a, b):
        return F.avg_pool1d(a, 3, 2, 1, ceil_mode=True), F.avg_pool3d(
            b, 2, (1, 2, 2), count_include_pad=False
        )

    check(fn, x1, x3, ops="aten.avg_pool3d.default", rtol=1e-5, atol=1e-6)


def test_adaptive_avg_pool2d():
    configs = [{"output_size": s} for s in (1, (3, 3), (4, 5), (2, 7))]
    ops = ["aten.mean.dim", "aten._adaptive_avg_pool2d.default"]  # export turns size 1 into mean
    run_check_batch(_cases(F.adaptive_avg_pool2d, configs, X), ops=ops, rtol=1e-5)


def test_adaptive_max_pool2d():
    configs = [{"output_size": s} for s in ((3, 3), (4, 7), 1)]
    cases = _cases(functools.partial(F.adaptive_max_pool2d, return_indices=True), configs, X)
    run_check_batch(cases, ops="aten.adaptive_max_pool2d.default")


def test_adaptive_max_pool_1d_3d(check):
    x1, x3 = torch.randn(2, 3, 11), torch.randn(1, 2, 5, 6, 7)
    fn = lambda a, b: (F.adaptive_max_pool1d(a, 4, True), F.adaptive_max_pool3d(b, (2, 4, 3), True))  # noqa: E731
    check(fn, x1, x3, ops="aten.adaptive_max_pool3d.default")


@pytest.mark.parametrize("batched", [True, False])
def test_max_pool2d_backward(batched):
    """Three configurations in one program."""
    x = torch.randn(2, 3, 6, 7) if batched else torch.randn(3, 6, 7)
    x.view(-1)[::5] = 0.5  # ties: the first maximum takes the gradient
    configs = [
        {"kernel_size": 3, "stride": 2, "ceil_mode": True},
        {"kernel_size": 3, "stride": 1, "padding": 1},  # overlapping windows: gradients add up
        {"kernel_size": 2, "stride": 2, "dilation": (1, 2)},
    ]

    def fn(v, g, kwargs):
        out, idx = F.max_pool2d(v, return_indices=True, **kwargs)
        return torch.ops.aten.max_pool2d_with_indices_backward(
            g[..., : out.shape[-2], : out.shape[-1]],
            v,
            [kwargs["kernel_size"]] * 2,
            [kwargs["stride"]] * 2,
            [kwargs.get("padding", 0)] * 2,
            list(kwargs.get("dilation", (1, 1))),
            kwargs.get("ceil_mode", False),
            idx,
        )

    g = torch.randn(x.shape)
    cases = {str(kw): (functools.partial(fn, kwargs=kw), (x, g)) for kw in configs}
    check_targets_batch(cases, ops="aten.max_pool2d_with_indices_backward.default", rtol=1e-6)


def _fractional(nd, kernel, out):
    fn = F.fractional_max_pool2d if nd == 2 else F.fractional_max_pool3d
    return lambda v, r: fn(v, kernel, output_size=out, return_indices=True, _random_samples=r)


_FRACTIONAL = [  # (nd, input shape, kernel, output size)
    (2, (2, 3, 9, 11), (3, 2), (4, 6)),
    (2, (3, 7, 7), 2, (5, 3)),  # unbatched
    (3, (1, 2, 6, 7, 8), (2, 3, 2), (3, 4, 5)),
    (2, (1, 1, 5, 5), 2, (1, 1)),  # one window: the last, ending at the input's end
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_fractional_max_pool(dtype):
    # window starts from the samples as ATen's generate_intervals computes them in the
    # samples' dtype (bfloat16 rounding included); every configuration in one module
    g = torch.Generator().manual_seed(3)
    args = []
    for nd, shape, _, _ in _FRACTIONAL:
        batch = 1 if len(shape) == nd + 1 else shape[0]
        args += [
            torch.randn(shape, generator=g).to(dtype),
            torch.rand(batch, shape[-nd - 1], nd, generator=g).to(dtype),
        ]

    def fn(*a):
        return [_fractional(nd, k, o)(a[2 * i], a[2 * i + 1]) for i, (nd, _, k, o) in enumerate(_FRACTIONAL)]

    ops = ["aten.fractional_max_pool2d.default", "aten.fractional_max_pool3d.default"]
    check_targets(fn, *args, ops=ops, rtol=0, atol=0)


def test_fractional_max_pool_ties_and_nans():
    # ATen keeps the running maximum on `val > max || isnan(val)`: first of equal maxima,
    # last NaN of a window
    x = torch.tensor([[[[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 1.0, 0.0], [0.0, float("nan"), float("nan"), 1.0]]]])
    r = torch.tensor([[[0.5, 0.5]]])
    check_targets(_fractional(2, 2, (2, 3)), x, r, ops="aten.fractional_max_pool2d.default", rtol=0, atol=0)


def test_max_pools_keep_the_last_nan():
    # every CPU max-pooling kernel replaces its running maximum on `val > max || isnan(val)`
    # (argmax keeps the first NaN instead)
    nan = float("nan")
    x = torch.tensor([[[[1.0, nan, 3.0, nan, 0.0, 2.0]]]])

    def fn(v):
        return (
            F.max_pool2d(v, (1, 4), stride=2, return_indices=True),
            F.adaptive_max_pool2d(v, (1, 2), return_indices=True),
            F.max_pool1d(v[0], 4, stride=2, return_indices=True),
            F.max_pool3d(v[None], (1, 1, 4), stride=2, return_indices=True),
        )

    ops = ["aten.max_pool2d_with_indices.default", "aten.adaptive_max_pool2d.default"]
    check_targets(fn, x, ops=ops, rtol=0, atol=0)
