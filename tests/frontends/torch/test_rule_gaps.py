"""Default-run cases of ATen rules no other test reached (``tests/registry_coverage.py``'s
``KNOWN_GAPS``): scalar-first and shift overloads, ``div.Scalar_mode``, ``prims``' cast,
strided empties, ``*_copy`` variants, value asserts, the size arithmetic of dynamic shapes,
and the random ops' remaining overloads. Each test is one small program batching several
rules, compared with eager torch (the random ops: their distributions, as in
``test_random.py``), and checks that the ops under test are in the exported graph."""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest
import torch
from torch.export import Dim

import converter
from frontends.torch import export
from frontends.torch.registry import ATEN_RULES, key_of
from tests import registry_coverage
from tests.frontends.torch.both_targets import check_targets
from tests.frontends.torch.conftest import Fn, graph_ops

aten = torch.ops.aten


def test_scalar_first_shift_and_rounding_overloads():
    """``bitwise_*.Scalar_Tensor`` (the scalar first), the shifts' Tensor_Scalar and dunder
    forms (arithmetic right shift of negatives), ``div.Scalar_mode`` and
    ``prims.convert_element_type``."""

    def fn(a, s, x):
        return (
            torch.bitwise_and(0b1011, a),
            torch.bitwise_or(0b1010, a),
            torch.bitwise_xor(0b0110, a),
            torch.bitwise_right_shift(-77, s),
            torch.bitwise_right_shift(a, 2),
            torch.bitwise_left_shift(a, 3),
            a.__lshift__(s),
            a.__rshift__(s),
            aten.div.Scalar_mode(x, 2.5, rounding_mode="floor"),
            aten.div.Scalar_mode(x, -2.5, rounding_mode="trunc"),
            torch.ops.prims.convert_element_type.default(x, torch.float64),
        )

    a = torch.tensor([-9, -8, -3, -1, 0, 1, 5, 6, 13, 100], dtype=torch.int32)
    s = torch.tensor([0, 1, 2, 3, 4, 5, 1, 2, 3, 4], dtype=torch.int32)
    x = torch.tensor([-7.6, -5.0, -2.5, -1.2, -0.0, 0.4, 2.5, 3.7, 6.25, 11.9])
    ops = [
        "aten.bitwise_and.Scalar_Tensor",
        "aten.bitwise_or.Scalar_Tensor",
        "aten.bitwise_xor.Scalar_Tensor",
        "aten.bitwise_right_shift.Scalar_Tensor",
        "aten.bitwise_right_shift.Tensor_Scalar",
        "aten.bitwise_left_shift.Tensor_Scalar",
        "aten.__lshift__.Tensor",
        "aten.__rshift__.Tensor",
        "aten.div.Scalar_mode",
        "prims.convert_element_type.default",
    ]
    check_targets(fn, a, s, x, ops=ops, rtol=0, atol=0)


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


class _SizeArithmetic(torch.nn.Module):
    """Sizes computed from a dynamic dimension: ``operator.sub``/``floordiv``/``mod``/``pow``
    on the ``SymInt`` (``torch.export`` records each as a graph node)."""

    def forward(self, x):
        n = x.shape[0]
        return torch.ones(n - 1), torch.ones(n // 3), torch.ones(n % 5 + 2), torch.ones(n**2) * x.sum()


def test_size_arithmetic_of_a_dynamic_dim():
    model = _SizeArithmetic()
    ep = export(model, (torch.randn(12, 2),), dynamic_shapes=({0: Dim("n", min=8, max=64)},))
    present = graph_ops(ep)
    for op in ("<built-in function sub>", "<built-in function floordiv>", "<built-in function mod>"):
        assert op in present, sorted(present)
    assert "<built-in function pow>" in present or "<built-in function pow_by_natural>" in present
    f = converter.from_torch(ep).to_jax()
    for n in (9, 13, 64):
        x = torch.randn(n, 2)
        got = [np.asarray(o) for o in f(x.numpy())]
        ref = [t.numpy() for t in model(x)]
        assert [g.shape for g in got] == [r.shape for r in ref], n
        for g, r in zip(got, ref, strict=True):  # x.sum() of random values: rounding absolute
            np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-5, err_msg=f"n = {n}")


class _SizesThroughFloats(torch.nn.Module):
    """Sizes through floats (``n / 3``, ``sym_float(n) * 0.5``: exact ratios until
    ``ceil``/``floor``/``trunc``), ceiling division by negation, ``max``/``sym_min`` of two
    dynamic dimensions, a size-derived float as a tensor op's scalar, and ``numel`` /
    ``sym_int`` of an int (which export records as ``mul`` / nothing)."""

    def forward(self, x, y):
        n, m = x.shape[0], y.shape[0]
        return (
            torch.ones(math.ceil(n / 3)),
            torch.ones(math.floor(n / 4)),
            torch.ones(torch.sym_int(n * 0.5)),  # records math.trunc
            torch.ones(-(-n // 2)),
            torch.ones(max(n, m)),
            torch.ones(torch.sym_min(n, m)),
            x * torch.sym_float(n) / 4,
            torch.ones(x.numel() + torch.sym_int(m)),
        )


_N, _M = Dim("n", min=8, max=64), Dim("m", min=8, max=64)
_SIZES = ((8, 9), (13, 8), (20, 20), (64, 8))


def _compare_sizes(model, ep, sizes=_SIZES):
    f = converter.from_torch(ep).to_jax()
    gen = torch.Generator().manual_seed(0)
    for n, m in sizes:  # small integers as floats: every sum exact, whatever the order
        x, y = (torch.randint(-4, 5, (k, 3), generator=gen).float() for k in (n, m))
        got = [np.asarray(o) for o in f(x.numpy(), y.numpy())]
        ref = [t.numpy() for t in model(x, y)]
        assert [g.shape for g in got] == [r.shape for r in ref], (n, m)
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-5, err_msg=f"sizes {n}, {m}")


def test_sizes_through_floats_and_extremes_of_dynamic_dims():
    model = _SizesThroughFloats()
    ep = export(model, (torch.randn(12, 3), torch.randn(9, 3)), dynamic_shapes=({0: _N}, {0: _M}))
    present = graph_ops(ep)
    for op in ("truediv", "ceil", "floor", "trunc", "neg"):
        assert f"<built-in function {op}>" in present, (op, sorted(present))
    for op in ("sym_float", "sym_max", "sym_min"):
        assert any(p.startswith(f"<function {op} ") for p in present), (op, sorted(present))
    assert not any("sym_int" in p or "sym_numel" in p for p in present), sorted(present)
    _compare_sizes(model, ep)


def test_symbolic_ratio_rounds_as_python():
    """The exact ratio behind a size-derived float rounds, adds and scales as Python's floats
    do (concrete numerators of both signs here; the test above runs symbolic ones)."""
    from fractions import Fraction

    from frontends.torch.lowering import SymbolicRatio

    for num in range(-7, 8):
        for den in (1, 2, 3, -4):
            r, q = SymbolicRatio(num, den), Fraction(num, den)
            want = (math.floor(q), math.ceil(q), math.trunc(q))
            assert (r.floor(), r.ceil(), r.trunc()) == want, (num, den)
            s = (r * 0.5 + 3) / 2 - r
            assert Fraction(s.num, s.den) == (q * Fraction(0.5) + 3) / 2 - q, (num, den)
    with pytest.raises(ZeroDivisionError):
        SymbolicRatio(3) / 0
    truediv = ATEN_RULES.get(key_of(operator.truediv))  # of two concrete numbers: a Python float
    assert truediv(7, 2) == 3.5 and truediv(-3, 4) == -0.75


class _SizePredicates(torch.nn.Module):
    """``torch.cond`` on comparisons of two dynamic dimensions: export records each
    comparison (and ``&``, ``|``, ``sym_not``) as a node; the ranges do not decide them, so
    they are computed from the input sizes at run time."""

    def forward(self, x, y):
        a, b = x.shape[0], y.shape[0]
        s = x.sum(0) + y.sum(0)
        return (
            torch.cond(a > b, lambda s: s + 1, lambda s: s - 1, (s,)),
            torch.cond(a >= 16, lambda s: s * 2, lambda s: s * 3, (s,)),
            torch.cond(a != b, lambda s: s + 10, lambda s: s - 10, (s,)),
            torch.cond((a <= b) & (a == 13), lambda s: s + 5, lambda s: s - 5, (s,)),
            torch.cond((a < b) | torch.sym_not(b == 8), lambda s: s + 7, lambda s: s - 7, (s,)),
            torch.cond(a >= 8, lambda s: s + 1, lambda s: s - 1, (s,)),  # decided: always true
        )


def test_size_predicates_of_cond():
    model = _SizePredicates()
    ep = export(model, (torch.randn(12, 3), torch.randn(9, 3)), dynamic_shapes=({0: _N}, {0: _M}))
    present = graph_ops(ep)
    for op in ("gt", "ge", "ne", "le", "eq", "lt", "and_", "or_"):
        assert f"<built-in function {op}>" in present, (op, sorted(present))
    assert any(p.startswith("<function sym_not ") for p in present), sorted(present)
    _compare_sizes(model, ep, _SIZES + ((13, 13), (13, 30), (16, 16)))


class _DeferredAsserts(torch.nn.Module):
    def forward(self, x, y):
        a, b = x.shape[0], y.shape[0]
        torch._check(a != b)
        torch._check((a < b) | (a > b + 1))
        torch._check(a % 2 == 0)
        return x.sum(0) * a, y.sum(0) - b


def test_deferred_runtime_asserts_on_sizes():
    """``prefer_deferred_runtime_asserts_over_guards=True`` puts torch's size guards in the
    graph as ``_assert_scalar`` nodes on size comparisons: the program converts and computes
    as torch, sizes torch refuses are refused by both backends (``shape_assertion``), and a
    condition false for every size is refused by the rule."""
    model = _DeferredAsserts()
    ep = torch.export.export(
        model,
        (torch.randn(12, 3), torch.randn(9, 3)),
        dynamic_shapes=({0: _N}, {0: _M}),
        prefer_deferred_runtime_asserts_over_guards=True,
    )
    assert "aten._assert_scalar.default" in graph_ops(ep)
    _compare_sizes(model, ep, ((8, 9), (20, 8), (64, 12)))
    module = converter.from_torch(ep)
    f, t = module.to_jax(), module.to_torch()
    for n, m in ((9, 9), (10, 9), (12, 12)):  # a == b; neither a < b nor a > b + 1; the same
        x, y = np.ones((n, 3), np.float32), np.ones((m, 3), np.float32)
        with pytest.raises(RuntimeError):
            ep.module()(torch.from_numpy(x), torch.from_numpy(y))  # torch refuses them too
        with pytest.raises(converter.SignatureMismatchError, match="size assertion failed"):
            f(x, y)
        with pytest.raises(converter.SignatureMismatchError, match="size assertion failed"):
            t(torch.from_numpy(x), torch.from_numpy(y))
    assert ATEN_RULES.get("aten._assert_scalar.default")(True, "holds") is None
    with pytest.raises(ValueError, match="fails for every input size: n < 0"):
        ATEN_RULES.get("aten._assert_scalar.default")(False, "n < 0")


def test_data_dependent_size_checks_are_refused_first():
    """``sym_constrain_range_for_size`` (``torch._check_is_size``) has no rule: it only
    constrains a data-dependent size, which conversion refuses before any rule runs."""

    def fn(x):
        v = x.sum().int().item()
        torch._check_is_size(v)
        torch._check(v < 100)
        return x * v

    with pytest.raises(converter.DataDependentShapeError, match="_local_scalar_dense"):
        converter.from_torch(Fn(fn), (torch.ones(4, 2),))
    for key in ("aten.sym_constrain_range_for_size.default", "aten.sym_numel.default", "torch.sym_int"):
        assert key not in ATEN_RULES, key


N = 40_000


@pytest.fixture(scope="module")
def random_overloads():
    """One program drawing with every remaining overload, run once on one key; and the eager
    torch outputs of the same program (for their shapes and dtypes)."""

    def fn(x, p):
        return (
            torch.randn(N),
            torch.randint(7, (N,)),
            torch.randint_like(x, 7),
            torch.randint_like(x, -3, 4, dtype=torch.int32),
            torch.normal(x + 2.0, p * 10),  # Tensor_Tensor: mean 2, std 3
            torch.normal(x - 1.0, 0.5),  # Tensor_float
            torch.normal(4.0, p * 5),  # float_Tensor: std 1.5
            torch.normal(-2.0, 2.0, (N,)),  # float_float
            x.clone().bernoulli_(p),  # bernoulli.Tensor: p = 0.3
            torch.nn.functional.rrelu(x - 1.0, training=True),  # rrelu_with_noise_functional
            torch.bernoulli(x, 0.7),  # bernoulli.p
        )

    x = torch.zeros(N)
    p = torch.full((N,), 0.3)
    ep = export(Fn(fn), (x, p))
    present = graph_ops(ep)
    module = converter.from_torch(ep)
    got = [np.asarray(o) for o in module.to_jax()(x.numpy(), p.numpy(), rng=0)]
    with torch.no_grad():
        ref = [t.numpy() for t in fn(x, p)]
    return present, got, ref


def test_random_overloads_are_in_the_graph_with_torch_shapes_and_dtypes(random_overloads):
    present, got, ref = random_overloads
    for op in (
        "aten.randn.default",
        "aten.randint.default",
        "aten.randint_like.default",
        "aten.randint_like.low_dtype",
        "aten.normal.Tensor_Tensor",
        "aten.normal.Tensor_float",
        "aten.normal.float_Tensor",
        "aten.normal.float_float",
        "aten.bernoulli.Tensor",
        "aten.rrelu_with_noise_functional.default",
        "aten.bernoulli.p",
    ):
        assert op in present, (op, sorted(present))
    assert [(g.shape, g.dtype) for g in got] == [(r.shape, r.dtype) for r in ref]


def _moments(v: np.ndarray, mean: float, std: float) -> None:
    se = std / np.sqrt(v.size)
    assert abs(v.mean() - mean) < 6 * se, (v.mean(), mean)
    assert abs(v.std() / std - 1) < 0.05, (v.std(), std)


def test_random_overloads_distributions(random_overloads):
    _, got, _ = random_overloads
    randn, randint, randint_like, randint_low, n_tt, n_tf, n_ft, n_ff, bern, rrelu, bern_p = got
    _moments(randn, 0.0, 1.0)
    _moments(n_tt, 2.0, 3.0)
    _moments(n_tf, -1.0, 0.5)
    _moments(n_ft, 4.0, 1.5)
    _moments(n_ff, -2.0, 2.0)
    for v, lo, hi in ((randint, 0, 7), (randint_like, 0, 7), (randint_low, -3, 4)):
        assert np.array_equal(v, np.round(v)) and v.min() == lo and v.max() == hi - 1, (v.min(), v.max())
        counts = np.bincount((v - lo).astype(np.int64), minlength=hi - lo)
        expected = v.size / (hi - lo)
        assert np.all(np.abs(counts - expected) < 6 * np.sqrt(expected)), counts
    assert set(np.unique(bern)) == {0.0, 1.0}
    _moments(bern, 0.3, np.sqrt(0.21))
    assert set(np.unique(bern_p)) == {0.0, 1.0}
    _moments(bern_p, 0.7, np.sqrt(0.21))
    # rrelu of x - 1 = -1 everywhere: -a with a ~ U(1/8, 1/3)
    a = -rrelu
    assert a.min() >= 1 / 8 and a.max() <= 1 / 3, (a.min(), a.max())
    _moments(a, (1 / 8 + 1 / 3) / 2, (1 / 3 - 1 / 8) / np.sqrt(12))


def test_rules_the_decompositions_always_replace():
    """The keys listed as replaced before lowering really are: each is in the Core ATen
    decomposition table (``_DECOMPOSED_BEFORE_LOWERING``), or has a CompositeImplicitAutograd
    kernel or mutates its arguments, or is dropped as unused (``_REPLACED_BEFORE_LOWERING``:
    decomposed, functionalized or eliminated whatever the table), so no ``from_torch``
    conversion reaches their rules -- and each still has a rule."""
    table = {str(op) for op in torch.export.default_decompositions()}
    keys = {str(k) for k in ATEN_RULES.keys()}
    for name in registry_coverage._DECOMPOSED_BEFORE_LOWERING:
        assert name in table and name in keys, name
    for name in registry_coverage._REPLACED_BEFORE_LOWERING:
        packet, overload = name.removeprefix("aten.").split(".")
        op = getattr(getattr(aten, packet), overload)
        implicit = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
        assert name in keys, name
        if name == "aten._assert_async.default":  # no result, and FX does not keep it for its effect
            asserting = Fn(lambda x: (torch._assert_async(x.sum() != 1e9), x + 1)[-1])
            raw = torch.export.export(asserting, (torch.ones(2),))
            assert name in graph_ops(raw) and name not in graph_ops(export(raw)), name
        else:
            assert implicit or op._schema.is_mutable, name
