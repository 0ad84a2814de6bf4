"""``torch.special`` ATen rules (``frontends/torch/ops/special.py``) against eager torch,
through ``to_jax`` (the ``check`` fixture) and ``to_torch``, on values that reach every
branch of torch's algorithms: both sides of each approximation's switch points, zeros,
negative arguments, huge arguments, ``±inf`` and ``nan``; negative, fractional, ``nan`` and
large degrees for the polynomials."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from converter.frontends.torch import export

import converter
from converter.tools.validate import TOLERANCES, as_numpy

from .conftest import Fn, assert_jax_matches, convert_batch

F32 = TOLERANCES["float32"]
F64 = TOLERANCES["float64"]

torch.manual_seed(0)
EDGES = [0.0, -0.0, 1e-6, -1e-6, 0.3, -0.5, 1.0, -1.0, 2.0, 2.09, -2.09, 4.99, 5.0, 5.01, -5.0, 8.0, 8.5]
EDGES += [-8.5, 20.0, -26.0, 50.0, 88.0, 89.0, -89.0, 95.0, 110.0, -110.0, 1e4, -1e4, 1e30, -1e30]
EDGES += [math.inf, -math.inf, math.nan]
X = torch.cat([torch.tensor(EDGES), torch.randn(64) * 4, torch.rand(32) * 200 - 100])
UNIT_EDGES = [0.0, 1.0, -0.5, 1.5, 1e-30, 1e-39, 1e-44, 1 - 1e-7, 0.5, math.nan]  # 1e-39, 1e-44: subnormal
UNIT = torch.cat([torch.tensor(UNIT_EDGES), torch.rand(32)])


@pytest.fixture(autouse=True)
def _seeded():
    """Each test draws from a seeded generator: the draws do not depend on which tests ran
    before in the worker."""
    torch.manual_seed(0)


UNARY = [
    "airy_ai",
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "spherical_bessel_j0",
    "i0e",
    "i1",
    "i1e",
    "erfcx",
]

POLYNOMIALS = [
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
]

# x over the closed forms (±1, 0, 1/2), inside and outside [-1, 1] and [0, 1];
# n: negative, zero, one, fractional (truncated), past the trigonometric thresholds, large,
# and nan / inf (which torch treats as a negative degree)
_XS = [-1.0, 1.0, 0.0, 0.5, 0.25, -0.3, 0.9, 1.5, -2.0, 3.0, 1.0000001]
_NS = [-2.0, 0.0, 1.0, 2.0, 2.7, 3.0, 5.0, 7.0, 9.0, 10.0, 25.0, 60.0, 128.0, 130.0, -0.5, math.nan, math.inf]
POLY_X = torch.tensor(_XS).repeat_interleave(len(_NS))
POLY_N = torch.tensor(_NS).repeat(len(_XS))


def check_both(check, fn, *args, ops=(), tol=F32):
    """``check``'s comparison through ``to_jax``, then the same through ``to_torch``, of one
    export and conversion (:func:`convert_batch` of one case)."""
    (r,) = convert_batch({"": (fn, args)}, ops, targets=("jax", "torch")).values()
    assert_jax_matches(r["jax"], r["eager"], tol.rtol, tol.atol)
    want, got = r["eager"], r["torch"]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(
            as_numpy(g), as_numpy(w), rtol=tol.rtol, atol=tol.atol, equal_nan=True, err_msg=f"output {i}"
        )


@pytest.mark.parametrize("names", [UNARY[i : i + 4] for i in range(0, len(UNARY), 4)], ids=lambda n: n[0])
def test_unary(check, names):
    fn = lambda x: tuple(getattr(torch.special, n)(x) for n in names)  # noqa: E731
    check_both(check, fn, X, ops=[f"aten.special_{n}.default" for n in names])


#: The functions computed with Cephes' own rational approximations and series, as torch's
#: (everything of UNARY but airy_ai and erfcx, whose evaluation orders differ in the last bits)
CEPHES = [n for n in UNARY if n not in ("airy_ai", "erfcx")]


def test_unary_float64(check):
    """Within float64's tolerance (1e-7); the Cephes functions to 1e-14, where a coefficient
    wrong in its tenth digit shows (modified_bessel_i1 past 8: a relative error of 1e-8 from
    one of order 1e-9; bessel_j0 near 5: 3e-12 from its rational's leading coefficient)."""
    fn = lambda x: tuple(getattr(torch.special, n)(x) for n in UNARY)  # noqa: E731
    x = X.double()
    out = check(fn, x, ops=[f"aten.special_{n}.default" for n in UNARY], rtol=F64.rtol, atol=F64.atol)
    for name in CEPHES:
        want = getattr(torch.special, name)(x).numpy()
        np.testing.assert_allclose(out[UNARY.index(name)], want, rtol=1e-14, atol=0, err_msg=name)


@pytest.mark.parametrize("dtype, rtol", [(torch.float32, 1.5e-7), (torch.float64, 2e-16)])
def test_modified_bessel_i1_at_the_series_switch(check, dtype, rtol):
    """Cephes ``i1`` takes its series on ``[0, 8]``: at ``|x| = 8`` exactly, the series beyond
    (6 float32 ulps off there, 2 float64 ulps) is not the value; within about an ulp."""
    x = torch.tensor([8.0, -8.0], dtype=dtype)
    op = "aten.special_modified_bessel_i1.default"
    check(torch.special.modified_bessel_i1, x, ops=op, rtol=rtol, atol=0)


def test_unary_of_integers_is_float(check):
    x = torch.arange(-3, 12)
    fn = lambda x: (torch.special.bessel_j0(x), torch.special.modified_bessel_k1(x))  # noqa: E731
    check_both(
        check, fn, x, ops=["aten.special_bessel_j0.default", "aten.special_modified_bessel_k1.default"]
    )


def test_ndtri(check):
    check_both(check, torch.special.ndtri, UNIT, ops="aten.special_ndtri.default")


def test_log_ndtr_uses_erfcx(check):
    """``log_ndtr`` decomposes into ``special_erfcx`` for ``x < -1``: down to -1e4."""
    x = torch.cat([X, torch.linspace(-200, 5, 64)])
    check_both(check, torch.special.log_ndtr, x, ops="aten.special_erfcx.default")


@pytest.mark.parametrize(
    "names", [POLYNOMIALS[i : i + 4] for i in range(0, len(POLYNOMIALS), 4)], ids=lambda n: n[0]
)
def test_polynomials(check, names):
    fn = lambda x, n: tuple(getattr(torch.special, name)(x, n) for name in names)  # noqa: E731
    check_both(check, fn, POLY_X, POLY_N, ops=[f"aten.special_{n}.default" for n in names])


def test_polynomials_float64(check):
    fn = lambda x, n: tuple(getattr(torch.special, name)(x, n) for name in POLYNOMIALS)  # noqa: E731
    ops = [f"aten.special_{n}.default" for n in POLYNOMIALS]
    check(fn, POLY_X.double(), POLY_N.double(), ops=ops, rtol=F64.rtol, atol=F64.atol)


def test_polynomials_broadcast_random(check):
    """Random x around [-1.5, 1.5] against a row of degrees 0..11, broadcast. The draw is
    seeded here: near a root, the float32 recurrences of torch and of the rule (same terms,
    another evaluation order) differ by a few ulps of the O(1) terms, more than ``F32``'s
    relative tolerance of the tiny result (5 of 200 unseeded draws; each side is as far from
    the float64 value as the other); the seed makes the draw not depend on test order."""
    x = torch.rand(40, 1, generator=torch.Generator().manual_seed(1)) * 3 - 1.5
    n = torch.arange(12.0)
    fn = lambda x, n: tuple(getattr(torch.special, name)(x, n) for name in POLYNOMIALS)  # noqa: E731
    check_both(check, fn, x, n, ops=[f"aten.special_{n}.default" for n in POLYNOMIALS])


def test_polynomial_scalar_overloads(check):
    def fn(x):
        return (
            torch.special.chebyshev_polynomial_t(x, 9),
            torch.special.legendre_polynomial_p(0.3, x * 10),
            torch.special.hermite_polynomial_h(x, 4),
        )

    ops = [
        "aten.special_chebyshev_polynomial_t.n_scalar",
        "aten.special_legendre_polynomial_p.x_scalar",
        "aten.special_hermite_polynomial_h.n_scalar",
    ]
    check_both(check, fn, torch.rand(16) * 2 - 1, ops=ops)


def test_chebyshev_closed_forms_at_a_huge_degree(check):
    """At ``x = ±1`` the Chebyshev polynomials have closed forms (``U_n(1) = n + 1``...),
    taken for any degree: a degree of ``2**25`` needs no 33 million recurrence steps, and
    the float32 recurrence would not give ``n + 1`` there (past ``2**24`` its steps round).
    (At ``x = 0``: the trigonometric form.)"""
    x, n = torch.tensor([1.0, -1.0, 0.0]), torch.full((3,), 2.0**25 + 3)
    check(torch.special.chebyshev_polynomial_u, x, n, ops=["aten.special_chebyshev_polynomial_u.default"])


def test_polynomial_degrees_near_the_int64_limits(check):
    """torch truncates a float degree to int64: ``2**62`` and ``1.5 * 2**62`` are degrees
    (``T_n(±1) = (±1)^n``, ``U_n(±1) = (±1)^n (n + 1)``); ``2**63`` and beyond, out of range,
    give a negative degree (0, as ``-2**62``)."""
    x = torch.tensor([1.0, -1.0], dtype=torch.float64).repeat(5)
    n = torch.tensor([2.0**62, 1.5 * 2**62, 2.0**63, 1e19, -(2.0**62)], dtype=torch.float64)
    ops = ["aten.special_chebyshev_polynomial_t.default", "aten.special_chebyshev_polynomial_u.default"]
    fn = lambda x, n: (torch.special.chebyshev_polynomial_t(x, n), torch.special.chebyshev_polynomial_u(x, n))  # noqa: E731
    check(fn, x, n.repeat_interleave(2), ops=ops, rtol=1e-15, atol=0)


def test_polynomial_nan_x_is_nan():
    """Where torch's recurrence never runs (``x = nan``, degree >= 2) it returns an
    uninitialised value; the rule returns nan for every family."""
    x = torch.full((1,), math.nan)
    n = torch.full((1,), 4.0)
    fn = Fn(lambda x, n: tuple(getattr(torch.special, name)(x, n) for name in POLYNOMIALS))
    out = converter.from_torch(export(fn, (x, n))).to_jax()(x.numpy(), n.numpy())
    assert all(np.isnan(np.asarray(o)).all() for o in out)


def test_zeta(check):
    x = torch.tensor(
        [1.0, 0.5, 2.0, 2.0, 3.0, 2.5, math.inf, math.inf, math.inf, math.inf, 4.0, math.nan, 1.5]
        + [2.5, 2.0, 2.0]  # the pole at q = 0 (and -0.0) itself, of a non-integer x too
    )
    q = torch.tensor(
        [1.0, 1.0, -2.0, -2.5, -math.inf, 0.3, 0.5, 1.0, 2.0, -2.5, math.inf, 1.0, math.nan]
        + [0.0, 0.0, -0.0]
    )
    x = torch.cat([x, torch.rand(32) * 10 + 1, torch.rand(32) * 10 - 2])
    q = torch.cat([q, torch.rand(32) * 10 - 4, torch.rand(32) * 10])
    check_both(check, torch.special.zeta, x, q, ops="aten.special_zeta.default")


def test_zeta_scalar_overloads(check):
    def fn(x):
        return torch.special.zeta(x, 2.0), torch.special.zeta(3.0, x)

    ops = ["aten.special_zeta.other_scalar", "aten.special_zeta.self_scalar"]
    check_both(check, fn, torch.rand(16) * 5 + 1.1, ops=ops)


_POLYNOMIALS = [
    torch.special.chebyshev_polynomial_t, torch.special.chebyshev_polynomial_u,
    torch.special.chebyshev_polynomial_v, torch.special.chebyshev_polynomial_w,
    torch.special.hermite_polynomial_h, torch.special.hermite_polynomial_he,
    torch.special.laguerre_polynomial_l, torch.special.legendre_polynomial_p,
    torch.special.shifted_chebyshev_polynomial_t, torch.special.shifted_chebyshev_polynomial_u,
    torch.special.shifted_chebyshev_polynomial_v, torch.special.shifted_chebyshev_polynomial_w,
]  # fmt: skip


class _ScalarOperands(torch.nn.Module):
    """Every polynomial with a Python-number degree (``.n_scalar``) and a Python-number
    ``x`` (``.x_scalar``), and zeta with either operand a number."""

    def forward(self, x, n):
        out = []
        for p in _POLYNOMIALS:
            out += [p(x, 3), p(0.25, n)]
        return (*out, torch.special.zeta(x + 2, 1.5), torch.special.zeta(2.5, x + 1))


def test_scalar_operand_overloads_in_one_module():
    """The ``n_scalar``/``x_scalar``/``self_scalar``/``other_scalar`` overloads (26 rules)
    in one conversion, against eager torch."""
    x, n = torch.linspace(-0.9, 0.9, 7), torch.tensor([0.0, 1, 2, 3, 4, 5, 6])
    module = _ScalarOperands()
    ep = export(module, (x, n))
    keys = {str(node.target) for node in ep.graph.nodes if node.op == "call_function"}
    assert sum(k.endswith(("n_scalar", "x_scalar", "self_scalar", "other_scalar")) for k in keys) == 26
    got = converter.from_torch(ep).to_jax()(as_numpy(x), as_numpy(n))
    want = module(x, n)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(
            np.asarray(g), w.numpy(), rtol=F32.rtol, atol=F32.atol, err_msg=f"output {i}"
        )


def test_widen_and_recurrence_helpers_edges():
    """``_widen`` of a float64 value is the value; the recurrence of an empty tensor is the
    empty tensor (no while_loop: torch's cannot trace it)."""
    import jax.numpy as jnp
    from converter.frontends.torch.ops.special import _recurrence, _widen

    x = np.array([1e-310, -2.5, 3.0])  # a float64 subnormal stays
    got = _widen(jnp.asarray(x))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, x)
    q = jnp.zeros((0, 2))
    assert _recurrence(jnp.zeros((0, 2)), jnp.ones((0, 2)), q, lambda k, p, q: p + q) is q


def test_modified_bessel_at_their_series_switches():
    """Cephes ``i0`` switches series at ``|x| = 8`` and ``k0``, ``k1`` at ``x = 2``, each
    switch point on the lower series (the upper one is a few ulps off there: i0 in float32,
    k0 and scaled k1 in float64); the rules called directly, within an ulp of torch's."""
    from converter.frontends.torch.ops import special as s

    from .conftest import check_rule

    aten = torch.ops.aten
    check_rule(
        s.modified_bessel_i0,
        aten.special_modified_bessel_i0.default,
        torch.tensor([8.0, -8.0]),
        rtol=1.5e-7,
        atol=0,
    )
    rule = lambda x: (s.modified_bessel_k0(x), s.scaled_modified_bessel_k1(x))  # noqa: E731
    op = lambda x: (aten.special_modified_bessel_k0(x), aten.special_scaled_modified_bessel_k1(x))  # noqa: E731
    check_rule(rule, op, torch.tensor([2.0], dtype=torch.float64), rtol=2e-16, atol=0)
