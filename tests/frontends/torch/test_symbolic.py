"""Rules of frontends/torch/ops/symbolic.py: the size arithmetic, ratios and comparisons of
dynamic dimensions that ``torch.export`` records as graph nodes (and the ``_assert_scalar``
asserts on them), compared with eager torch at several sizes."""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest
import torch
from converter.frontends.torch import export
from converter.frontends.torch.registry import ATEN_RULES, key_of
from torch.export import Dim

import converter
from tests.frontends.torch.conftest import graph_ops


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

    from converter.frontends.torch.lowering import SymbolicRatio

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


def test_symbolic_ratio_divides_by_negative_numbers_as_python():
    """Only a zero divisor is refused: a negative one (int, float or ratio) divides as
    Python's ``Fraction`` does and the quotient rounds as Python's floats do."""
    from fractions import Fraction

    from converter.frontends.torch.lowering import SymbolicRatio

    divisors = ((-2, Fraction(-2)), (-0.5, Fraction(-1, 2)), (SymbolicRatio(-3, 4), Fraction(-3, 4)))
    for num in (-7, -3, 3, 7):
        for div, exact in divisors:
            q, r = Fraction(num) / exact, SymbolicRatio(num) / div
            assert Fraction(r.num, r.den) == q, (num, div)
            assert (r.floor(), r.ceil(), r.trunc()) == (math.floor(q), math.ceil(q), math.trunc(q))


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


def test_symbolic_ratio_and_size_expressions_without_a_symbolic_form():
    """A ratio's reflected operators and text; what has no ``jax.export`` form raises
    ``NoSymbolicForm`` naming the size: a ratio divided by a dimension, a symbol that is no
    input dimension, an expression outside the size arithmetic."""
    from fractions import Fraction

    import jax
    import sympy
    from converter.frontends.torch.lowering import NoSymbolicForm, SymbolicRatio, jax_dim

    r = SymbolicRatio(3, 4)
    for got, want in ((2 - r, Fraction(5, 4)), (1 / r, Fraction(4, 3)), (0.5 - r, Fraction(-1, 4))):
        assert Fraction(got.num, got.den) == want
    assert repr(SymbolicRatio(-6, 4)) == "-6/4" and repr(SymbolicRatio(1, -2)) == "-1/2"
    with pytest.raises(TypeError, match="str is not a size"):
        SymbolicRatio.of("3")
    (n,) = jax.export.symbolic_shape("n")
    with pytest.raises(NoSymbolicForm, match=r"\(3/4\) / \(n/1\) has no jax.export symbolic form"):
        r / n
    s0, s1 = sympy.symbols("s0 s1", integer=True)
    third = jax_dim(sympy.Rational(1, 3) * s0, {s0: n})
    assert isinstance(third, SymbolicRatio) and (str(third.num), third.den) == ("n", 3)
    with pytest.raises(NoSymbolicForm, match="the size s1 is no dimension of the graph inputs"):
        jax_dim(s0 + s1, {s0: n})
    with pytest.raises(NoSymbolicForm, match=r"the size sin\(s0\) has no jax.export symbolic form"):
        jax_dim(sympy.sin(s0), {s0: n})


def test_size_rules_on_concrete_and_symbolic_operands():
    """The size rules called directly: concrete operands give Python values, comparisons of
    dimensions and ratios decided by the ranges give bools, ``math.floor`` of a dimension is
    itself, extremes of ratios and unexpected comparison errors raise."""
    import jax
    import jax.numpy as jnp
    from converter.frontends.torch.lowering import SymbolicRatio
    from converter.frontends.torch.ops.symbolic import _decided, sym_stride

    def rule(fn):
        return ATEN_RULES.get(key_of(fn))

    (n,) = jax.export.symbolic_shape("n")
    half = SymbolicRatio(n, 2)
    assert [sym_stride(jnp.zeros((2, 3, 4)), d) for d in (0, 1, -1)] == [12, 4, 1]
    assert rule(operator.eq)(3, 3) is True and rule(operator.lt)(3, 2) is False
    assert rule(operator.eq)(n, n) is True and rule(operator.ne)(n, n + 1) is True
    assert rule(operator.lt)(half, n) is True and rule(operator.ge)(half, n) is False
    assert rule(operator.and_)(True, False) is False and rule(operator.or_)(True, False) is True
    assert rule(math.floor)(n) is n and rule(math.ceil)(2.5) == 3
    with pytest.raises(ValueError, match="max of size-derived floats"):
        rule(torch.sym_max)(half, n)
    with pytest.raises(ZeroDivisionError):
        _decided(operator.truediv, 1, 0)  # only JAX's inconclusive comparison means undecided
