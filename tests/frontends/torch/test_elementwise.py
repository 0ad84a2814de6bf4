"""Elementwise ATen rules (``frontends/torch/ops/elementwise.py``) against eager torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import converter
from tests.frontends.torch.both_targets import check_targets

aten = torch.ops.aten

torch.manual_seed(0)
X = torch.randn(3, 5)
Y = torch.randn(3, 5)
POS = torch.rand(3, 5) + 0.1
UNIT = torch.rand(3, 5) * 1.8 - 0.9  # inside (-1, 1)
I32 = torch.randint(-20, 20, (3, 5), dtype=torch.int32)
I64 = torch.randint(1, 9, (3, 5))
B = torch.rand(3, 5) > 0.5
SPECIAL = torch.tensor([0.0, -0.0, 1.5, -2.5, 2.5, float("inf"), float("-inf"), float("nan")])


@pytest.mark.parametrize(
    "name, fn, args",
    [
        ("add.Tensor", lambda x, y: x + y, (X, Y)),
        ("add.Tensor", lambda x, y: torch.add(x, y, alpha=2.5), (X, Y)),
        ("add.Tensor", lambda x, y: x + y, (I32, I64[0])),  # int promotion with broadcasting
        ("add.Tensor", lambda x, y: x + y, (B, B)),  # bool add is or
        ("add.Tensor", lambda x: x + 0.5, (I32,)),  # int + float scalar -> float32
        ("sub.Tensor", lambda x, y: torch.sub(x, y, alpha=3), (I32, I64)),
        ("mul.Tensor", lambda x, y: x * y, (X, Y)),
        ("mul.Tensor", lambda x, y: x * y, (X.half(), Y.half())),
        ("mul.Tensor", lambda x, y: x * y, (X.bfloat16(), Y)),
        ("mul.Tensor", lambda x: x * torch.tensor(2.0, dtype=torch.float64), (X,)),  # 0-dim f64 keeps f32
        ("div.Tensor", lambda x, y: x / y, (X, Y)),
        ("div.Tensor", lambda x, y: x / y, (I32, I64)),
        ("div.Tensor_mode", lambda x, y: torch.div(x, y, rounding_mode="floor"), (X * 4, Y)),
        ("div.Tensor_mode", lambda x, y: torch.div(x, y, rounding_mode="trunc"), (X * 4, Y)),
        ("div.Tensor_mode", lambda x, y: torch.div(x, y, rounding_mode="floor"), (I32, I64 - 5 + (I64 == 5))),
        ("div.Tensor_mode", lambda x, y: torch.div(x, y, rounding_mode="trunc"), (I32, I64 - 5 + (I64 == 5))),
        ("remainder.Tensor", torch.remainder, (X * 4, Y)),
        ("remainder.Tensor", torch.remainder, (I32, I64 - 5 + (I64 == 5))),
        ("fmod.Tensor", torch.fmod, (X * 4, Y)),
        ("fmod.Tensor", torch.fmod, (I32, I64)),
        ("pow.Tensor_Scalar", lambda x: x**2, (X,)),
        ("pow.Tensor_Scalar", lambda x: x**3.0, (X,)),
        ("pow.Tensor_Scalar", lambda x: x**0.5, (POS,)),
        ("pow.Tensor_Scalar", lambda x: x**-1.5, (POS,)),
        # torch's special exponents (pow_tensor_scalar_optimized_kernel): 1/x, 1/(x*x), rsqrt
        ("pow.Tensor_Scalar", lambda x: x**-1, (X,)),
        ("pow.Tensor_Scalar", lambda x: x**-2.0, (X,)),
        ("pow.Tensor_Scalar", lambda x: x**-0.5, (POS,)),
        ("pow.Tensor_Scalar", lambda x: x**1, (X,)),
        ("pow.Tensor_Scalar", lambda x: x**0, (X,)),
        ("pow.Tensor_Scalar", lambda x: x**3, (I32,)),
        ("pow.Tensor_Tensor", torch.pow, (POS, Y)),
        ("pow.Scalar", lambda y: torch.pow(2.0, y), (Y,)),
        ("atan2.default", torch.atan2, (X, Y)),
        ("maximum.default", torch.maximum, (SPECIAL, SPECIAL.flip(0))),
        ("minimum.default", torch.minimum, (SPECIAL, SPECIAL.flip(0))),
        ("fmax.default", torch.fmax, (SPECIAL, SPECIAL.flip(0))),
        ("fmin.default", torch.fmin, (SPECIAL, SPECIAL.flip(0))),
        ("copysign.Tensor", torch.copysign, (X, Y)),
    ],
)
def test_binary(check, name, fn, args):
    check(fn, *args, ops=f"aten.{name}")


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(check, op):
    f = getattr(torch, op)
    x = torch.tensor([1.0, 2.0, float("nan"), 3.0])
    y = torch.tensor([1.0, 3.0, float("nan"), 2.0])
    check(
        lambda a, b: (f(a, b), f(a, 2.0), f(I32, I64)), x, y, ops=(f"aten.{op}.Tensor", f"aten.{op}.Scalar")
    )


def test_logic_and_bitwise(check):
    def fn(a, b, i, j):
        return (
            torch.logical_and(a, b),
            torch.logical_or(i, b),
            torch.logical_xor(a, i),
            torch.logical_not(i),
            i & j,
            i | j,
            i ^ j,
            ~i,
            a & b,
            i << 2,
            i >> 1,
            torch.bitwise_left_shift(i, j.abs() % 8),
            torch.bitwise_right_shift(i, j.abs() % 8),
        )

    ops = ["logical_and.default", "logical_or.default", "logical_xor.default", "logical_not.default"]
    ops += ["bitwise_and.Tensor", "bitwise_or.Tensor", "bitwise_xor.Tensor", "bitwise_not.default"]
    ops += [
        "__lshift__.Scalar",
        "__rshift__.Scalar",
        "bitwise_left_shift.Tensor",
        "bitwise_right_shift.Tensor",
    ]
    check(fn, B, B.flip(0), I32, I32.flip(1), ops=[f"aten.{o}" for o in ops])


def test_where_and_clamp(check):
    def fn(c, x, y):
        return (
            torch.where(c, x, y),
            torch.where(c, x, 0.0),
            torch.clamp(x, -0.5, 0.5),
            torch.clamp(x, min=0.1),
            torch.clamp(x, y, y + 1),
            torch.clamp(I32, -3, 4),
        )

    check(fn, B, X, Y, ops=["aten.where.self", "aten.clamp.default", "aten.clamp.Tensor"])


def test_clamp_propagates_nan(check):
    check(lambda x: torch.clamp(x, -1.0, 1.0), SPECIAL, ops="aten.clamp.default")


UNARY = {
    "exp": X,
    "expm1": X,
    "log": POS,
    "log1p": POS,
    "log2": POS,
    "log10": POS,
    "sqrt": POS,
    "rsqrt": POS,
    "sin": X,
    "cos": X,
    "tan": UNIT,
    "asin": UNIT,
    "acos": UNIT,
    "atan": X,
    "sinh": X,
    "cosh": X,
    "tanh": X,
    "asinh": X,
    "acosh": POS + 1,
    "atanh": UNIT,
    "erf": X,
    "erfinv": UNIT,
    "sigmoid": X * 5,
    "reciprocal": POS,
    "neg": X,
    "abs": X,
    "floor": X * 3,
    "ceil": X * 3,
    "trunc": X * 3,
    "round": SPECIAL,
    "sign": SPECIAL,
    "relu": SPECIAL,
    "isnan": SPECIAL,
    "isinf": SPECIAL,
}


_NAMES = sorted(UNARY)
GROUPS = {f"{g[0]}..{g[-1]}": g for g in (_NAMES[i : i + 6] for i in range(0, len(_NAMES), 6))}


@pytest.mark.parametrize("group", list(GROUPS))
def test_unary_float(check, group):
    """Six ops per conversion (one output each), to keep the suite fast."""
    names = GROUPS[group]
    fn = lambda *xs: tuple(getattr(torch, n)(x) for n, x in zip(names, xs, strict=True))  # noqa: E731
    check(fn, *(UNARY[n] for n in names), ops=[f"aten.{n}.default" for n in names], rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_unary_on_integers_computes_in_float32(check, dtype):
    names = ["exp", "sqrt", "sin", "sigmoid", "reciprocal"]
    fn = lambda x: tuple(getattr(torch, n)(x) for n in names)  # noqa: E731
    check(fn, I64.to(dtype), ops=[f"aten.{n}.default" for n in names], rtol=2e-6)


def test_unary_on_integers_keeps_dtype(check):
    names = ["abs", "neg", "floor", "sign", "round"]
    fn = lambda x: tuple(getattr(torch, n)(x) for n in names)  # noqa: E731
    check(fn, I32, ops=[f"aten.{n}.default" for n in names])


def test_round_decimals(check):
    x = torch.tensor([1.2345, -2.5678, 1234.5, 0.125, -0.375])
    check(lambda v: (torch.round(v, decimals=2), torch.round(v, decimals=-2)), x, ops="aten.round.decimals")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(check, approximate):
    f = torch.nn.functional.gelu
    check(lambda v: f(v * 3, approximate=approximate), X, ops="aten.gelu.default")


def test_activations(check):
    F = torch.nn.functional

    def fn(x):
        return F.hardtanh(x, -0.5, 0.7), F.leaky_relu(x, 0.2), F.elu(x, 1.5), F.selu(x), F.relu6(x * 4)

    check(fn, X * 2, ops=["aten.hardtanh.default", "aten.leaky_relu.default", "aten.elu.default"])


def test_nan_to_num(check):
    fn = lambda v: (torch.nan_to_num(v), torch.nan_to_num(v, nan=1.0, posinf=2.0, neginf=-2.0))  # noqa: E731
    check(fn, SPECIAL, ops="aten.isnan.default")  # decomposed by torch.export


def test_half_precision_unary_rounds_like_torch(check):
    check(lambda v: (torch.exp(v), torch.tanh(v)), X.half(), ops="aten.exp.default", rtol=1e-3, atol=1e-3)


def test_special_functions(check):
    def fn(x, e):
        m, ex = torch.frexp(x)
        return torch.i0(x), torch.ldexp(x, e), m, ex

    e = torch.randint(-3, 4, (3, 5))
    check(fn, X * 3, e, ops=["aten.i0.default", "aten.ldexp.Tensor", "aten.frexp.Tensor"], rtol=2e-6)


def test_complex_views(check):
    def fn(re, im, pairs):
        z = torch.complex(re, im)
        return torch.view_as_real(z * z), torch.view_as_real(torch.view_as_complex(pairs) + 1)

    pairs = torch.randn(4, 2)
    check(fn, X, Y, pairs, ops=["aten.complex.default", "aten.view_as_complex.default"], rtol=2e-6)


def test_complex_broadcasts_ranks(check):
    def fn(re, im, row):
        return (
            torch.view_as_real(torch.complex(re, im[0, 0])),  # (3, 5) with ()
            torch.view_as_real(torch.complex(row[:, None], im)),  # (3, 1) with (3, 5)
            torch.view_as_real(torch.complex(re[:, :1, None], im[None])),  # (3, 1, 1) with (1, 3, 5)
        )

    check(fn, X, Y, X[:, 0], ops="aten.complex.default")


def test_hypot(check):
    check(torch.hypot, X * 1e20, Y * 1e20, ops="aten.hypot.default", rtol=2e-6)


def test_nextafter_igamma_dist(check):
    def fn(x, y, a):
        dists = torch.dist(x, y, 3), torch.dist(x, y)  # p = 3, and the default p = 2 (left out of the graph)
        return torch.nextafter(x, y), torch.igamma(a, a * 1.5), torch.igammac(a, a * 0.5), *dists

    ops = ["aten.nextafter.default", "aten.igamma.default", "aten.igammac.default", "aten.dist.default"]
    check(fn, X, Y, POS * 3, ops=ops, rtol=2e-5, atol=1e-6)


def test_signbit_angle_polar_polygamma(check):
    def fn(s, r, theta, p):
        return (
            torch.signbit(s),
            torch.angle(s),
            torch.polar(r, theta),
            torch.polygamma(1, p),
            torch.polygamma(2, p),
        )

    ops = ["aten.signbit.default", "aten.angle.default", "aten.polar.default", "aten.polygamma.default"]
    check(fn, SPECIAL, POS, X, POS + 0.5, ops=ops, rtol=1e-5)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma_negative_arguments(check, n):
    x = torch.tensor([-8.4784, -1.7658, -4.3228, -2.4005, 3.6116, -0.3, 0.7, 12.0, 0.0, -0.0])
    check(lambda v: torch.polygamma(n, v), x, ops="aten.polygamma.default", rtol=1e-5, atol=1e-5)


def test_conj(check):
    z = torch.complex(X, Y)
    check(lambda v: torch.view_as_real(torch.conj_physical(v) * 2), z, ops="aten._conj_physical.default")


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8])
def test_gcd_lcm_edges(check, dtype):
    # zeros, signs, the minimum integer (whose abs wraps) and lcm overflow wrap as ATen's
    # calc_gcd / calc_lcm
    lo, hi = torch.iinfo(dtype).min, torch.iinfo(dtype).max
    a = torch.tensor([0, 0, -6, hi, lo, 7, lo, -9, 12], dtype=dtype)
    b = torch.tensor([0, -4, 4, 3, 6, lo, lo, -6, -18], dtype=dtype)
    check(lambda x, y: (torch.gcd(x, y), torch.lcm(x, y)), a, b, ops=["aten.gcd.default", "aten.lcm.default"])


def test_gcd_broadcasts(check):
    # the Euclid loop carries both operands at the broadcast shape
    a, b = torch.tensor([[12], [-9]]), torch.tensor([8, 6, 0])
    check(lambda x, y: (torch.gcd(x, y), torch.lcm(y, x)), a, b, ops="aten.gcd.default")


def test_integer_pow_negative_exponent(check):
    # powi: a negative exponent gives 0 except for bases 1 and -1; positive ones wrap
    base = torch.tensor([6, 1, -1, -1, 0, 2, 3, -2, 7])
    exp = torch.tensor([-8, -3, -3, -4, 2, 62, 41, 63, 0])
    check(lambda x, y: x**y, base, exp, ops="aten.pow.Tensor_Tensor")


def test_digamma_at_zero(check):
    # calc_digamma: -inf at +0, +inf at -0, NaN at negative integers
    x = torch.tensor([0.0, -0.0, -1.0, -2.0, 0.5, 3.0])
    check(
        lambda v, i: (torch.digamma(v), torch.digamma(i), torch.polygamma(0, v)),
        x,
        torch.tensor([0, -3, 4]),
        ops="aten.digamma.default",
        rtol=1e-6,
    )


class _ScalarOverloads(torch.nn.Module):
    """Overloads the Core ATen decompositions keep with a Python-number operand."""

    def forward(self, x, y, i, v):
        return (
            i & 3, i | 3, i ^ 3, 2 << i,  # bitwise_*.Scalar, bitwise_left_shift.Scalar_Tensor
            torch.copysign(x, -1.0), torch.remainder(3.0, y), x.prod(),
            torch.scatter(x, 0, torch.tensor([[0, 1, 0, 1]]), 2.0, reduce="add"),  # scatter.value_reduce
            torch.searchsorted(v, 0.5),  # searchsorted.Scalar
        )  # fmt: skip


def test_scalar_overloads_in_one_module():
    """Nine rules reached only with a Python-number operand, in one conversion, against eager torch."""
    from converter.frontends.torch import export

    from converter.tools.validate import as_numpy, compare

    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(4, 4, generator=g), torch.rand(4, 4, generator=g) + 0.5
    i, v = torch.arange(16).reshape(4, 4), torch.sort(torch.randn(6, generator=g)).values
    module = _ScalarOverloads()
    ep = export(module, (x, y, i, v))
    got = converter.from_torch(ep).to_jax()(*[as_numpy(t) for t in (x, y, i, v)])
    want = module(x, y, i, v)
    assert len(got) == len(want)
    for n, (g_, w) in enumerate(zip(got, want, strict=True)):
        assert compare(w, np.asarray(g_)).passed, f"output {n}: {np.asarray(g_)} vs {w}"


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


def test_optional_branches_of_the_rules():
    """``div.Tensor_mode`` without a mode, a complex power by a plain exponent, an unsigned
    right shift (logical), ``sign`` of bools and ``angle`` of complex: one program."""
    from tests.frontends.torch.conftest import run_check_batch

    c = torch.complex(X, Y)
    u8 = torch.tensor([200, 3, 255, 128], dtype=torch.uint8)
    cases = {
        "div.Tensor_mode(None)": (lambda x, y: aten.div.Tensor_mode(x, y, rounding_mode=None), (X, POS)),
        "complex ** 0.7": (lambda z: z**0.7, (c,)),
        "uint8 >> 3": (lambda u: u >> 3, (u8,)),
        "sign(bool)": (torch.sign, (B,)),
        "angle(complex)": (torch.angle, (c,)),
    }
    ops = ["aten.div.Tensor_mode", "aten.pow.Tensor_Scalar", "aten.sign.default", "aten.angle.default"]
    run_check_batch(cases, ops=ops, rtol=1e-5, atol=1e-6)


def test_copysign_of_int64_rounds_once_to_float32():
    """torch computes ``copysign`` of integers in float32 (its default dtype), rounding each
    int64 once: ``2**60 + 2**36 + 1`` becomes ``2**60 + 2**37``; through float64 it would
    round twice (to the tie ``2**60 + 2**36``, then to the even ``2**60``). In 64-bit mode:
    the 32-bit form takes no such int64."""
    import jax
    from converter.frontends.torch import export

    from .conftest import Fn

    v = torch.tensor([2**60 + 2**36 + 1, -(2**60 + 2**36 + 1), 3, -7])
    s = torch.tensor([-1, 1, 0, 5])
    want = torch.copysign(v, s)
    m = converter.from_torch(export(Fn(torch.copysign), (v, s)))
    with jax.enable_x64(True):
        np.testing.assert_array_equal(np.asarray(m.to_jax(x64=True)(v.numpy(), s.numpy())), want.numpy())


def test_integer_to_a_negative_scalar_power_raises():
    """torch refuses it when run; ``torch.export`` lets it through to the rule."""
    import jax.numpy as jnp
    from converter.frontends.torch.ops.elementwise import pow_

    with pytest.raises(ValueError, match="integers to negative integer powers"):
        pow_(jnp.array([3, -4]), -2)
    with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
        I64**-2


def test_rules_of_decomposed_elementwise_ops():
    """Rules of ops the Core ATen decompositions replace, called directly."""
    from converter.frontends.torch.ops import elementwise as e

    from tests.frontends.torch.conftest import check_rule

    check_rule(e.rsub, aten.rsub.Tensor, X, Y, alpha=2)
    check_rule(e.rsub, aten.rsub.Scalar, I32, 3)
    check_rule(
        e.floor_divide, aten.floor_divide.default, I32, torch.tensor([3, -4, 5, -6, 7], dtype=torch.int32)
    )
    check_rule(e.floor_divide, aten.floor_divide.default, X, -0.75)
    check_rule(e.clamp_min, aten.clamp_min.default, X, 0.25)
    check_rule(e.clamp_max, aten.clamp_max.Tensor, X, Y)
    check_rule(e.sign, aten.sgn.default, torch.complex(X, Y) * (X > 0))  # zeros give 0
    check_rule(e.sign, aten.sgn.default, X)
    check_rule(e.isfinite, aten.isfinite.default, SPECIAL)
    check_rule(e.nan_to_num, aten.nan_to_num.default, SPECIAL)
    check_rule(e.nan_to_num, aten.nan_to_num.default, SPECIAL.half(), 1.0, 2.0, -3.0)
    check_rule(e.nan_to_num, aten.nan_to_num.default, I32)
    check_rule(e.silu, aten.silu.default, X, rtol=1e-6)


def test_round_decimals_to_the_bit():
    """ATen rounds ``x * 10**d`` and divides by ``10**d`` for ``d >= 0`` (0.01 is inexact:
    ``x / 0.01 * 0.01`` lands one float32 step off torch on half of these), ``x / 10**-d``
    times ``10**-d`` below: the rule's StableHLO run by the torch backend and by XLA (whose
    CPU compiler would turn a division by 100 into a product by 0.01), against eager torch."""
    import jax
    import jax.numpy as jnp
    from converter.frontends.torch.ops import elementwise as e

    x = torch.tensor([5.364436, -7.3593903, 2.6815739, -0.19813156, 0.5, -2.5, 15.0, 25.0, -35.0])
    ds = (2, 0, -1)
    fn = lambda v: tuple(e.round_decimals(v, d) for d in ds)  # noqa: E731
    m = converter.from_jax(fn, jnp.asarray(x.numpy()))
    for d, got, got_xla in zip(ds, m.to_torch()(x), jax.jit(fn)(x.numpy()), strict=True):
        want = torch.round(x, decimals=d)
        assert torch.equal(got, want), f"decimals={d}: {got} vs {want}"
        np.testing.assert_array_equal(np.asarray(got_xla), want.numpy(), err_msg=f"decimals={d}")


def test_relu_keeps_the_sign_of_zero_and_its_gradient_at_zero_is_zero():
    """ATen's relu is ``clamp_min(x, 0)``: ``relu(-0.0)`` is -0.0, NaN stays NaN, and
    ``threshold_backward`` gives 0 at either zero and 1 for NaN."""
    import jax
    from converter.frontends.torch.ops import elementwise as e

    x = torch.tensor([-0.0, 0.0, -1.5, 2.0, float("nan")], requires_grad=True)
    want = torch.relu(x)
    want.sum().backward()
    got = np.asarray(jax.jit(e.relu)(x.detach().numpy()))
    np.testing.assert_array_equal(got, want.detach().numpy())
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want.detach().numpy()))
    grad = jax.grad(lambda v: e.relu(v).sum())(x.detach().numpy())
    np.testing.assert_array_equal(np.asarray(grad), x.grad.numpy())


def test_floor_division_by_zero_by_one_and_to_signed_zeros():
    """``c10::div_floor_floating``: a zero divisor gives IEEE ``a / b`` (±inf, NaN for 0/0),
    a divisor of ±1 floors, and a zero quotient takes the sign of ``a / b`` (``-1 // -3`` is
    +0.0, ``1 // -3`` is -1, ``-0.0 // 3`` is -0.0): values and signs of zero exact against
    eager torch."""
    import jax
    from converter.frontends.torch.ops import elementwise as e

    a = torch.tensor([1.0, -1.0, 0.0, -0.0, 2.5, -2.5, 7.5, -1.0, 1.0, 0.0, -0.0, 0.2, -0.2, 6.0])
    b = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, -1.0, -3.0, -3.0, -3.0, 3.0, 0.5, -0.5, -0.25])
    want = torch.div(a, b, rounding_mode="floor").numpy()
    got = np.asarray(jax.jit(lambda x, y: e.div_mode(x, y, "floor"))(a.numpy(), b.numpy()))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
