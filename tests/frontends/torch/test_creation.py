"""Factory ATen rules (``frontends/torch/ops/creation.py``) against eager torch."""

from __future__ import annotations

import pytest
import torch

from tests.frontends.torch.both_targets import check_targets

X = torch.randn(2, 3)


def test_full_zeros_ones(check):
    def fn(v):
        return (
            torch.full((2, 2), 1.5) + v.sum(),
            torch.full((3,), 7) + v.shape[0],  # int fill -> int64
            torch.full((2,), True),
            torch.zeros(2, 3) + v,
            torch.ones(2, 3, dtype=torch.int32) + v.long().int(),
            torch.full_like(v, -2.0),
            torch.zeros_like(v, dtype=torch.int64),
            torch.ones_like(v),
            v.new_zeros(4),
            v.new_ones((1, 2)),
            v.new_full((2,), 3.25),
        )

    check(fn, X, ops=["aten.full.default", "aten.full_like.default"])


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((10,), {}),
        ((2, 11, 3), {}),
        ((0.0, 1.0, 0.1), {}),
        ((-1.0, 2.5, 0.25), {}),
        ((5, -3, -2), {}),
        ((1, 4), {"dtype": torch.float32}),
        ((0.5, 4.0, 0.5), {"dtype": torch.float64}),
    ],
)
def test_arange(check, args, kwargs):
    check(lambda v: (torch.arange(*args, **kwargs), v), X, ops="aten.arange.start_step")


def test_scalar_tensor_and_fill(check):
    def fn(v):
        out = v.clone()
        out.fill_(3.5)
        return out, torch.scalar_tensor(2.0) * v, v.masked_fill(v > 0, 1.0)

    check(fn, X, ops=["aten.full_like.default", "aten.scalar_tensor.default"])


def test_eye(check):
    check(lambda v: (torch.eye(3) + v[0, 0], torch.eye(2, 4, dtype=torch.int64)), X)


def test_empty_has_right_shape_and_dtype(check):
    # Contents of empty tensors are undefined: fill them before comparing values.
    def fn(v):
        e = torch.empty(2, 3)
        e.fill_(1.0)
        return e + v, torch.empty_like(v).fill_(2.0)

    check(fn, X, ops="aten.empty.memory_format")


def test_tri_indices(check):
    def fn(v):
        return (
            torch.triu_indices(4, 5, 1),
            torch.tril_indices(3, 3, -1),
            torch.triu_indices(3, 4, -1) + v.long().sum(),
        )

    check(fn, X, ops=["aten.triu_indices.default", "aten.tril_indices.default"])


def test_strided_empties_copies_and_value_asserts():
    """``empty_strided``/``new_empty_strided`` (filled, so defined), ``slice_copy.Tensor``
    with a step, ``split_copy.Tensor`` with a short last piece, and ``_assert_async.msg`` (no
    value, and no effect on the outputs; the message-less overload is decomposed into it)."""

    def fn(x):
        torch._assert_async(x.abs().sum() >= 0, "sums are never negative")
        e = torch.empty_strided((2, 3), (3, 1), dtype=torch.float64).fill_(2.5)
        n = x.new_empty_strided((3, 2), (2, 1)).fill_(-1.0)
        return (e, n, torch.slice_copy(x, 0, 1, 6, 2), *torch.split_copy(x, 3, 1))

    x = torch.arange(7 * 8, dtype=torch.float32).reshape(7, 8)
    ops = [
        "aten._assert_async.msg",
        "aten.empty_strided.default",
        "aten.new_empty_strided.default",
        "aten.slice_copy.Tensor",
        "aten.split_copy.Tensor",
    ]
    check_targets(fn, x, ops=ops, rtol=0, atol=0)


def test_rules_of_decomposed_factories():
    """Rules of factories the Core ATen decompositions replace, called directly (the
    ``empty`` ones share the code of the ``zeros`` ones: torch's values are uninitialized)."""
    from converter.frontends.torch.registry import ATEN_RULES

    from tests.frontends.torch.conftest import check_rule

    aten = torch.ops.aten
    x = torch.randn(2, 3)

    def rule(op):
        return ATEN_RULES._rules[str(op)]  # not through get(): no registry hit

    check_rule(rule(aten.ones_like.default), aten.ones_like.default, x)
    check_rule(rule(aten.zeros_like.default), aten.zeros_like.default, x, dtype=torch.int32)
    check_rule(rule(aten.new_ones.default), aten.new_ones.default, x, [4])
    check_rule(rule(aten.new_zeros.default), aten.new_zeros.default, x, [1, 2], dtype=torch.bool)
    check_rule(rule(aten.new_full.default), aten.new_full.default, x, [3], 2.5)
    check_rule(rule(aten.new_full.default), aten.new_full.default, x, [2, 2], 7, dtype=torch.int64)
    check_rule(rule(aten.fill.Scalar), aten.fill.Scalar, x, 1.5)
    check_rule(rule(aten.fill.Tensor), aten.fill.Tensor, x.long(), torch.tensor(3.7))
    check_rule(rule(aten.eye.default), aten.eye.default, 3)
    check_rule(rule(aten.eye.m), aten.eye.m, 2, 4, dtype=torch.int32)


class _SymbolicAranges(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        return torch.arange(n, 1, -2), torch.arange(1, n, 3), torch.arange(-n, -1, 2)


def test_arange_with_a_symbolic_bound_and_either_step_sign():
    """An integer arange whose bound is a dynamic size keeps a symbolic length, with either
    step sign, the values of eager torch at each size (regression: with a negative step the
    length was written ``(n - 1 + 1) // 2``, which JAX cannot prove equal to the ``(-n) // -2``
    torch.export gives ``arange(n, 1, -2)``, and the conversion was refused)."""
    import numpy as np

    import converter

    m = converter.from_torch(
        _SymbolicAranges(), (torch.zeros(6),), dynamic_shapes=({0: torch.export.Dim("n", min=5, max=16)},)
    )
    f = m.to_jax()
    for size in (5, 6):
        x = torch.zeros(size)
        for got, want in zip(f(x.numpy()), _SymbolicAranges()(x), strict=True):
            np.testing.assert_array_equal(np.asarray(got), want.numpy())
