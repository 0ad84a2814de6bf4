"""View/shape ATen rules (``frontends/torch/ops/shape.py``) against eager torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.frontends.torch.both_targets import check_targets

torch.manual_seed(0)
X = torch.randn(2, 3, 4)
INTS = torch.arange(24).reshape(2, 3, 4)


def test_views(check):
    def fn(v):
        return (
            v.view(6, 4),
            v.reshape(-1),
            v.permute(2, 0, 1),
            v.permute(-1, -3, -2),
            v.transpose(0, 2).contiguous(),
            v[:, None].expand(2, 5, 3, 4),
            v[:1].expand(4, -1, -1, -1),
            v.unsqueeze(-1),
            v[:, :1].squeeze(1),
            v[:1, :, :1].squeeze(),
            v[0].t(),
        )

    ops = ["view.default", "permute.default", "expand.default", "unsqueeze.default", "squeeze.dims"]
    check(fn, X, ops=[f"aten.{o}" for o in ops])


def test_cat_stack_split(check):
    def fn(a, b, i):
        return (
            torch.cat([a, b], dim=1),
            torch.cat([a, b, a], dim=-1),
            torch.cat([a, i.float()], 0),
            torch.cat([i, a.long()], 0),  # promotion of mixed dtypes
            torch.stack([a, b], dim=1),
            *torch.split(a, [1, 2], dim=1),
            *torch.split(a, 3, dim=2),
            *torch.unbind(b, dim=0),
            *torch.chunk(a, 2, dim=-1),
        )

    check(fn, X, X * 2, INTS, ops=["aten.cat.default", "aten.split_with_sizes.default"])


def test_slice_select_narrow(check):
    def fn(v):
        return (
            v[:, 1:],
            v[..., ::2],
            v[:, -2:],
            v[:, 1:100],
            v[:, -100:2],
            v[1],
            v[:, -1],
            v.narrow(2, 1, 2),
            v[:, :, 3:1],  # empty
        )

    check(fn, X, ops=["aten.slice.Tensor", "aten.select.int"])


def test_scatters(check):
    def fn(v, src):
        out1 = v.clone()
        out1[:, 1:3] = src[:, :2]
        out2 = v.clone()
        out2.select(1, -1).copy_(src[:, 0])
        out3 = v.clone()
        out3[:, :, ::2] = 7.0
        out4 = v.clone()
        out4.diagonal(dim1=1, dim2=2).fill_(-1.0)
        return out1, out2, out3, out4, torch.diagonal(v, 1, 1, 2), torch.diagonal(v, -1, -1, 0)

    check(
        fn,
        X,
        X + 10,
        ops=["aten.slice_scatter.default", "aten.diagonal_scatter.default", "aten.diagonal.default"],
    )


def test_flip_roll_repeat_tril(check):
    def fn(v):
        return (
            v.flip(0, 2),
            v.roll(1, 2),
            v.roll((1, -2), (0, 1)),
            v.roll(3),
            v.repeat(2, 1, 3),
            v.repeat(2, 1, 1, 1),
            v.tril(),
            v.triu(1),
            v.tril(-1),
        )

    check(fn, X, ops=["aten.flip.default", "aten.repeat.default"])


@pytest.mark.parametrize("pad", [(1, 2), (1, 0, 2, 3), (-1, 2, 0, 1), (1, 1, 1, 1, 1, 1)])
def test_constant_pad(check, pad):
    check(lambda v: F.pad(v, pad, value=-3.0), X, ops="aten.constant_pad_nd.default")


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_mode_pads(check, mode):
    x4 = torch.randn(1, 2, 5, 6)
    fn = lambda v, w: (F.pad(v, (2, 1), mode=mode), F.pad(w, (1, 2, 3, 1), mode=mode))  # noqa: E731
    check(fn, X, x4, ops="aten.index.Tensor")  # torch.export decomposes these pads into indexing


def test_as_strided(check):
    fn = lambda v: (torch.as_strided(v, (3, 2), (1, 3), 1), torch.as_strided(v, (2, 2, 2), (12, 4, 1)))  # noqa: E731
    check(fn, X, ops="aten.as_strided.default")


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.bool, torch.float16, torch.bfloat16])
def test_casts(check, dtype):
    x = torch.tensor([-2.7, -0.5, 0.0, 0.4, 1.5, 3.9, 100.25])
    check(lambda v: (v.to(dtype), v.to(dtype).to(torch.float32)), x, ops="aten._to_copy.default")


def test_unfold(check):
    def fn(v, s):  # a 0-dim tensor unfolds to its value as a (1,) tensor
        return v.unfold(2, 2, 1), v.unfold(1, 2, 2), v.unfold(-1, 4, 3), s.unfold(0, 1, 1)

    check(fn, X, torch.tensor(2.5), ops="aten.unfold.default")


class _StridedRows(torch.nn.Module):
    def forward(self, v):  # every other column of each row, rows of a dynamic count
        return torch.as_strided(v, (v.shape[0], 3), (v.shape[1], 2), 1) * 2


def test_as_strided_with_a_dynamic_dimension():
    """Symbolic sizes and strides (Swin's pooled output with a dynamic batch raised
    DynamicDimensionError): the index is built from iotas; equal to eager torch at 2 sizes."""
    import numpy as np
    from torch.export import Dim

    import converter

    f = converter.from_torch(
        _StridedRows(), (torch.randn(4, 7),), dynamic_shapes=({0: Dim("n", max=16)},)
    ).to_jax()
    for n in (2, 9):
        v = torch.randn(n, 7)
        np.testing.assert_array_equal(np.asarray(f(v.numpy())), _StridedRows()(v).numpy())


def test_as_strided_scatter(check):
    src = torch.randn(3, 2)
    check(
        lambda v, s: torch.as_strided_scatter(v, s, (3, 2), (1, 3), 1),
        X,
        src,
        ops="aten.as_strided_scatter.default",
    )


def test_copy_variants(check):
    def fn(v):
        return (
            torch.permute_copy(v, (2, 0, 1)),
            torch.view_copy(v, (6, 4)),
            torch.narrow_copy(v, 1, 1, 2),
            torch.expand_copy(v[:1], (3, 3, 4)),
            torch.squeeze_copy(v[:1], 0),
            torch.select_copy(v, 2, -1),
        )

    check(fn, X, ops=["aten.permute_copy.default", "aten.view_copy.default", "aten.narrow_copy.default"])


def test_resize():
    def fn(v):
        a = v.clone().resize_(3, 8)  # same size
        b = v.clone().resize_(2, 5)  # shrinks: the leading elements
        return a, b, torch.zeros(4, 6).resize_as_(v.clone()) + v  # zeros: empty may hold NaN

    check_targets(fn, X, ops="aten.resize.default")


def test_lift_fresh_copy_rule_is_a_copy_of_its_input():
    """``aten.lift_fresh_copy`` (``torch.tensor(...)`` in a forward) reaches the rules only
    when a program keeps it; the Core ATen decompositions usually turn it into ``clone``, so
    the rule is called directly here, against eager torch."""
    import jax.numpy as jnp
    import numpy as np
    from converter.frontends.torch.registry import ATEN_RULES

    t = torch.arange(6.0).reshape(2, 3)
    rule = ATEN_RULES.get("aten.lift_fresh_copy.default")
    np.testing.assert_array_equal(
        np.asarray(rule(jnp.asarray(t.numpy()))), torch.ops.aten.lift_fresh_copy(t).numpy()
    )


class _Detached(torch.nn.Module):
    """A value used with and without gradient: ``detach`` (which the Core ATen table turns
    into ``alias``); with ``mutate`` an in-place update of the input first (the graph then
    takes ``run_decompositions``' path, else the node-by-node one)."""

    def __init__(self, mutate: bool):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1, 1, 4))
        self.mutate = mutate

    def forward(self, x):
        if self.mutate:
            x.add_(1.0)
        y = x * self.w
        d = y.detach()
        return (y + d * y + d**2).sum()


@pytest.mark.parametrize("mutate", [False, True])
def test_detach_stops_gradient_in_both_backends(mutate):
    import jax

    import converter

    model, x = _Detached(mutate), X[0, :, :].clone()
    m = converter.from_torch(model, (x.clone(),))
    model(x.clone()).backward()
    f = m.to_jax()
    grads = jax.jit(jax.grad(lambda p: f.apply(p, x.numpy(), mutable=True)[0]))(f.params)
    torch.testing.assert_close(torch.from_numpy(np.array(grads["w"])), model.w.grad)
    tm = m.to_torch()
    tm(x.clone()).backward()
    torch.testing.assert_close(next(tm.parameters()).grad, model.w.grad)


def test_detach_stops_gradient_on_symbolic_shapes():
    """A ``detach`` in a program exported with a dynamic dimension keeps its marker (with its
    shape as an operand): the gradients of ``to_torch`` at two sizes equal torch's."""
    import warnings

    import converter

    model = _Detached(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = converter.from_torch(
            model, (torch.randn(3, 4),), dynamic_shapes=({0: torch.export.Dim("n", min=2, max=16)},)
        )
    tm = m.to_torch()
    for n in (3, 6):
        x = torch.linspace(-2, 2, n * 4).reshape(n, 4)
        model.w.grad = None
        tm.zero_grad()
        model(x.clone()).backward()
        tm(x.clone()).backward()
        torch.testing.assert_close(next(tm.parameters()).grad, model.w.grad)


def test_cast_to_float8_e4m3fn_saturates_like_torch(check):
    """float8_e4m3fn has no infinity: torch's cast saturates beyond 448 (infinities too), XLA's
    gives NaN; the NaN input stays NaN."""
    x = torch.tensor([0.1, -3.3, 448.0, 464.0, 500.0, -1e5, float("inf"), float("-inf"), float("nan")])
    fp8 = torch.float8_e4m3fn
    check(
        lambda v: (v.to(fp8).to(torch.float32), v.half().to(fp8).to(torch.float32)),
        x,
        ops="aten._to_copy.default",
    )


def test_cat_skips_legacy_empty_1d_tensors_but_promotes_with_them():
    """``torch.cat`` accepts 1-D empty tensors beside tensors of any rank (skipped for the
    shapes) and promotes with their dtype; an empty tensor of the same rank takes part as any."""

    def fn(x, e64, ei, z):
        return torch.cat([e64, x], dim=1), torch.cat([x, ei, x], dim=-1), torch.cat([z, x], dim=0)

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    e64, ei, z = torch.empty(0, dtype=torch.float64), torch.empty(0, dtype=torch.int64), torch.zeros(0, 3)
    check_targets(fn, x, e64, ei, z, ops="aten.cat.default", rtol=0, atol=0)


def test_resize_that_grows_pads_with_zeros():
    """torch leaves the elements past ``x.numel()`` uninitialised; the rule gives zeros."""
    import jax.numpy as jnp
    from converter.frontends.torch.ops.shape import resize

    got = np.asarray(resize(jnp.arange(6.0).reshape(2, 3), [3, 3]))
    np.testing.assert_array_equal(got, np.concatenate([np.arange(6.0), np.zeros(3)]).reshape(3, 3))


def test_rules_of_decomposed_shape_ops():
    """Rules of ops the Core ATen decompositions replace, called directly."""
    from converter.frontends.torch.ops import shape as sh
    from converter.frontends.torch.registry import ATEN_RULES

    from tests.frontends.torch.conftest import check_rule

    aten = torch.ops.aten
    v = torch.arange(5.0)
    check_rule(sh.t, aten.t.default, X[0])
    check_rule(sh.t, aten.t.default, v)
    check_rule(sh.transpose, aten.transpose.int, X, -1, 0)
    check_rule(sh.transpose, aten.transpose.int, torch.tensor(3.0), 0, -1)
    check_rule(sh.stack, aten.stack.default, [X, INTS.float()], -1)
    check_rule(sh.select_scatter, aten.select_scatter.default, X, X[:, 0] * 0, 1, -3)
    check_rule(sh.roll, aten.roll.default, INTS, [5])  # over the flattened tensor
    check_rule(sh.roll, aten.roll.default, INTS, [1, -2], [0, -1])
    check_rule(sh.tril, aten.tril.default, X, -1)
    check_rule(sh.triu, aten.triu.default, X, 1)
    for name, pad in (("reflection_pad2d", [1, 2, 2, 1]), ("replication_pad1d", [3, 1])):
        op = getattr(aten, name).default
        check_rule(ATEN_RULES._rules[str(op)], op, X, pad)  # _rules: not a registry hit


def test_narrow_with_a_negative_start_counts_from_the_end():
    """``narrow`` with ``start < 0`` wraps it once (``-2`` of 4 is 2), so ``start + length``
    may reach the end of the dim (called directly: the decompositions replace ``narrow``)."""
    from converter.frontends.torch.ops import shape as sh

    from tests.frontends.torch.conftest import check_rule

    check_rule(sh.narrow, torch.ops.aten.narrow.default, X, 2, -2, 2)
    check_rule(sh.narrow, torch.ops.aten.narrow.default, X, -1, -3, 1)


def test_slice_split_unbind_rules_edge_bounds():
    """``slice`` with ``None`` bounds and an end of 0, ``split`` by a size (the last piece
    shorter; a size of 0 on an empty dim) and ``unbind`` on a negative dim, called directly
    (the decompositions give the graph other forms)."""
    from converter.frontends.torch.ops import shape as sh

    from tests.frontends.torch.conftest import check_rule

    aten = torch.ops.aten
    check_rule(sh.slice_, aten.slice.Tensor, X, 2, None, None, 2)
    check_rule(sh.slice_, aten.slice.Tensor, X, 1, 0, 0)  # empty
    check_rule(sh.slice_, aten.slice.Tensor, X, -1, -3, -1)
    check_rule(sh.split, aten.split.Tensor, X, 3, 2)
    check_rule(sh.split, aten.split.Tensor, torch.zeros(2, 0), 0, 1)
    check_rule(sh.unbind, aten.unbind.int, X, -1)


def test_cat_rule_of_1d_tensors_and_of_empty_ones_only():
    """Non-empty 1-D tensors are concatenated, not skipped; when every tensor is a legacy
    empty one the result is empty, of their common dtype; an empty 2-D tensor is no legacy
    one: its dtype takes part in the promotion."""
    from converter.frontends.torch.ops import shape as sh

    from tests.frontends.torch.conftest import check_rule

    cat = torch.ops.aten.cat.default
    check_rule(sh.cat, cat, [torch.tensor([5.0]), torch.tensor([1.0, 2.0])])
    check_rule(sh.cat, cat, [torch.empty(0, dtype=torch.float64), torch.empty(0, dtype=torch.int64)])
    check_rule(sh.cat, cat, [torch.zeros(0, 4, dtype=torch.float64), X[0]])


def test_diagonal_scatter_rule_off_the_main_diagonal():
    from converter.frontends.torch.ops import shape as sh

    from tests.frontends.torch.conftest import check_rule

    op = torch.ops.aten.diagonal_scatter.default
    x = torch.arange(12.0).reshape(3, 4)
    check_rule(sh.diagonal_scatter, op, x, -torch.arange(1.0, 4.0), 1)  # above: 3 of (3, 4)
    check_rule(sh.diagonal_scatter, op, x, -torch.arange(1.0, 3.0), -1, 0, 1)  # below: 2
    check_rule(sh.diagonal_scatter, op, X, -torch.ones(2, 2), -2, 2, 1)  # planes (dim2=2, dim1=1)


def test_cast_rules_keep_values_beyond_float8_range_and_no_dtype():
    """Only casts to float8_e4m3fn saturate at 448: 1000 stays 1000 in float16/float64;
    ``_to_copy`` without a dtype is the identity; constant_pad_nd's default value is 0."""
    from converter.frontends.torch.ops import shape as sh

    from tests.frontends.torch.conftest import check_rule

    aten = torch.ops.aten
    big = torch.tensor([1000.0, -600.0, 3.5])
    for dtype in (torch.float16, torch.float64, torch.int32):
        check_rule(sh.to_copy, aten._to_copy.default, big, dtype=dtype)
    check_rule(sh.to_copy, aten._to_copy.default, big)
    check_rule(sh.constant_pad_nd, aten.constant_pad_nd.default, X, [1, 1])


def test_squeeze_rule_of_given_dims_keeps_other_size_one_dims():
    """``squeeze`` of one dim (or a negative one) leaves the other size-1 dims; with no dim
    every size-1 dim goes (called directly: export records only ``squeeze.dims``)."""
    from converter.frontends.torch.ops import shape as sh

    from tests.frontends.torch.conftest import check_rule

    aten, x = torch.ops.aten, torch.arange(3.0).reshape(1, 3, 1)
    check_rule(sh.squeeze, aten.squeeze.dim, x, 0)
    check_rule(sh.squeeze, aten.squeeze.dims, x, [-1])
    check_rule(sh.squeeze, aten.squeeze.default, x)
