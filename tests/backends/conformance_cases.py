# ruff: noqa: E501 - the case tables below keep one function per line
"""The conformance case table shared by the backend conformance suites
(tests/backends/test_conformance.py, one per backend):
functions from ``jax.numpy``, ``jax.lax``, ``jax.nn``, ``jax.scipy.special`` and
``jnp.linalg``, each with its input makers and the dtypes it runs in.

A case runs once per dtype, with the id ``f"{name}-{dtype}"`` (:func:`case_params`); its
inputs come from a generator seeded by the case name (:func:`make_args`), and results are
compared exactly for integers and bools, within :func:`tolerance` for floats.
"""

from __future__ import annotations

import functools
import os
import zlib
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import ml_dtypes
import numpy as np
from jax import lax

BF16 = ml_dtypes.bfloat16
F16, F32, F64 = np.float16, np.float32, np.float64
C64 = np.complex64
I8, I16, I32, I64 = np.int8, np.int16, np.int32, np.int64
U8, U16, U32 = np.uint8, np.uint16, np.uint32
BOOL = np.bool_

FLOATS = (F32, F64, F16, BF16)
INTS = (I32, I8, I64, U8, U32)

# (rtol, atol) per result dtype
TOL = {
    np.dtype(F64): (1e-9, 1e-12),
    np.dtype(F32): (2e-5, 2e-5),
    np.dtype(F16): (4e-3, 2e-3),
    np.dtype(BF16): (2e-2, 1e-2),
    np.dtype(C64): (2e-5, 2e-5),
    np.dtype(np.complex128): (1e-9, 1e-12),
}


# --------------------------------------------------------------------------- inputs


def U(lo=-2.0, hi=2.0, shape=(3, 4)):
    """Uniform values in [lo, hi] of the case dtype (integers: integers in range)."""

    def make(dtype, rng):
        dt = np.dtype(dtype)
        if dt.kind in "iu":
            info = np.iinfo(dt)
            return rng.integers(max(lo, info.min), min(hi, info.max) + 1, shape).astype(dt)
        if dt.kind == "b":
            return rng.random(shape) > 0.5
        if dt.kind == "c":
            return (rng.uniform(lo, hi, shape) + 1j * rng.uniform(lo, hi, shape)).astype(dt)
        return rng.uniform(lo, hi, shape).astype(dt)

    return make


def Fixed(value, dtype=None):
    """A fixed array (in the case dtype unless ``dtype`` is given)."""
    return lambda d, rng: np.asarray(value, dtype=dtype or d)


def Idx(hi, shape, lo=0):
    """int32 indices in [lo, hi)."""
    return lambda d, rng: rng.integers(lo, hi, shape).astype(np.int32)


def SPD(n=4, batch=()):
    """A well-conditioned symmetric positive definite matrix."""

    def make(dtype, rng):
        a = rng.standard_normal((*batch, n, n))
        return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)

    return make


SPECIALS = Fixed([[0.0, -0.0, 1.5, -2.5], [np.nan, np.inf, -np.inf, 0.5], [3.0, -1.0, 1e-3, -7.25]])


@dataclass(frozen=True)
class Case:
    """One function of the table. ``tol``: the (rtol, atol) of its float32/complex64 results
    (float16/bfloat16 results take at least their dtype's :data:`TOL`); ``tol64``: of its
    float64/complex128 results, given only where a documented accuracy is looser than
    float64's :data:`TOL` (a tolerance is never shared across dtypes)."""

    name: str
    fn: object
    args: tuple
    dtypes: tuple = (F32,)
    tol: tuple | None = None
    tol64: tuple | None = None


CASES: list[Case] = []


def case(name, fn, *args, dtypes=(F32,), tol=None, tol64=None):
    CASES.append(Case(name, fn, args or (U(),), tuple(dtypes), tol, tol64))


# --------------------------------------------------------------------------- jax.numpy elementwise

_CORE = (F32, F64, F16, BF16)
for _n, _dom, _dts in [
    ("abs", U(), _CORE), ("negative", U(), _CORE), ("sign", SPECIALS, _CORE), ("floor", SPECIALS, _CORE),
    ("ceil", SPECIALS, _CORE), ("round", SPECIALS, _CORE), ("rint", U(-5, 5), (F32,)), ("trunc", SPECIALS, (F32,)),
    ("exp", U(), _CORE), ("exp2", U(), (F32, F64)), ("expm1", U(), (F32, F64)),
    ("log", U(0.1, 5), _CORE), ("log2", U(0.1, 5), (F32,)), ("log10", U(0.1, 5), (F32,)),
    ("log1p", U(-0.5, 5), (F32, F64)), ("sqrt", U(0, 5), _CORE), ("cbrt", U(-5, 5), (F32, F64)),
    ("square", U(), (F32, F64)), ("reciprocal", U(0.5, 3), (F32,)), ("sin", U(), _CORE), ("cos", U(), _CORE),
    ("tan", U(-1, 1), (F32, F64)), ("arcsin", U(-0.9, 0.9), (F32, F64)), ("arccos", U(-0.9, 0.9), (F32, F64)),
    ("arctan", U(), (F32, F64)), ("sinh", U(), (F32, F64)), ("cosh", U(), (F32, F64)), ("tanh", U(), _CORE),
    ("arcsinh", U(), (F32, F64)), ("arccosh", U(1.1, 5), (F32, F64)), ("arctanh", U(-0.9, 0.9), (F32, F64)),
    ("deg2rad", U(), (F32,)), ("rad2deg", U(), (F32,)), ("sinc", U(), (F32,)), ("i0", U(), (F32,)),
    ("isfinite", SPECIALS, (F32,)), ("isinf", SPECIALS, (F32,)), ("isnan", SPECIALS, (F32,)),
    ("signbit", SPECIALS, (F32,)), ("logical_not", U(), (F32, BOOL)), ("nan_to_num", SPECIALS, (F32,)),
    ("fabs", U(), (F32,)), ("positive", U(), (F32,)), ("conj", U(), (F32, C64)), ("real", U(), (C64,)),
    ("imag", U(), (C64,)), ("angle", U(), (C64, F32)), ("isneginf", SPECIALS, (F32,)),
    ("isposinf", SPECIALS, (F32,)), ("isreal", U(), (C64,)), ("spacing", U(0.5, 3), (F32,)),
    ("signbit", U(), (I32,)), ("floor", U(), (I32,)),
]:  # fmt: skip
    case(f"jnp.{_n}", getattr(jnp, _n), _dom, dtypes=_dts)

case("jnp.exp[c64]", jnp.exp, U(-1, 1), dtypes=(C64,))
case("jnp.abs[c64]", jnp.abs, U(), dtypes=(C64,))
case("jnp.sqrt[c64]", jnp.sqrt, U(), dtypes=(C64,))
case("jnp.log[c64]", jnp.log, U(0.1, 2), dtypes=(C64,))
case("jnp.frexp", jnp.frexp, U(-5, 5))
case("jnp.modf", jnp.modf, U(-5, 5))
case("jnp.around2", lambda x: jnp.around(x, 2), U(-5, 5))
case("jnp.clip", lambda x: jnp.clip(x, -0.5, 1.0), SPECIALS, dtypes=(F32, F64))
case("jnp.clip[int]", lambda x: jnp.clip(x, -3, 5), U(-10, 10), dtypes=(I32, I8, U8))

for _n, _dts, _b in [
    ("add", (F32, F64, F16, BF16, C64), U()), ("subtract", (F32, F64, F16, BF16, C64), U()),
    ("multiply", (F32, F64, F16, BF16, C64), U()), ("divide", (F32, F64, F16, BF16, C64), U(0.5, 2)),
    ("true_divide", (F32,), U(0.5, 2)), ("floor_divide", (F32,), U(0.5, 2)), ("remainder", (F32,), U(0.5, 2)),
    ("fmod", (F32, F64), U(0.5, 2)), ("power", (F32, F64), U(-2, 2)), ("float_power", (F32,), U(-2, 2)),
    ("maximum", (F32, F64, F16, BF16), SPECIALS), ("minimum", (F32, F64, F16, BF16), SPECIALS),
    ("fmax", (F32,), SPECIALS), ("fmin", (F32,), SPECIALS), ("arctan2", (F32, F64), U()), ("hypot", (F32,), U()),
    ("copysign", (F32,), U()), ("nextafter", (F32, F64), U()), ("logaddexp", (F32, F64), U()),
    ("logaddexp2", (F32,), U()), ("heaviside", (F32,), U()), ("equal", (F32, C64), U()),
    ("not_equal", (F32,), U()), ("less", (F32, F16), SPECIALS), ("less_equal", (F32,), U()),
    ("greater", (F32, BF16), U()), ("greater_equal", (F32,), U()), ("logical_and", (F32, BOOL), U()),
    ("logical_or", (F32, BOOL), U()), ("logical_xor", (BOOL,), U()), ("isclose", (F32,), U()),
]:  # fmt: skip
    _first = U(0.1, 3) if _n in ("power", "float_power") else (SPECIALS if _b is SPECIALS else U())
    case(f"jnp.{_n}", getattr(jnp, _n), _first, _b, dtypes=_dts)

# --------------------------------------------------------------------------- integers

for _n, _dom2 in [
    ("add", U(-50, 50)), ("subtract", U(-50, 50)), ("multiply", U(-50, 50)), ("floor_divide", U(1, 9)),
    ("remainder", U(1, 9)), ("fmod", U(1, 9)), ("maximum", U(-50, 50)), ("minimum", U(-50, 50)),
    ("bitwise_and", U(-50, 50)), ("bitwise_or", U(-50, 50)), ("bitwise_xor", U(-50, 50)),
    ("left_shift", U(0, 9)), ("right_shift", U(0, 9)), ("equal", U(-3, 3)), ("less", U(-50, 50)),
    ("greater_equal", U(-50, 50)), ("gcd", U(1, 60)), ("lcm", U(1, 12)),
]:  # fmt: skip
    case(f"jnp.{_n}[int]", getattr(jnp, _n), U(-100, 100), _dom2, dtypes=INTS)
for _n in ("abs", "negative", "invert", "sign", "square"):
    case(f"jnp.{_n}[int]", getattr(jnp, _n), U(-100, 100), dtypes=INTS)
case("jnp.power[int]", lambda x: jnp.power(x, 3), U(-5, 5), dtypes=(I32, I64, U8))
case("jnp.power[int,array]", jnp.power, U(-3, 3), U(0, 4), dtypes=(I32,))
case("jnp.astype[f2i]", lambda x: x.astype(jnp.int32), U(-100, 100), dtypes=(F32, F64, F16))
case("jnp.astype[i2f]", lambda x: x.astype(jnp.float32), U(-100, 100), dtypes=(I32, U8, I64, U32))
case(
    "jnp.astype[u16]", lambda x: (x.astype(jnp.uint16) * 3 + 7).astype(jnp.int32), U(-100, 100), dtypes=(I32,)
)
case("jnp.astype[bool]", lambda x: x.astype(jnp.bool_), U(-2, 2), dtypes=(I32, F32))
case("jnp.bitwise_count", jnp.bitwise_count, U(-100, 100), dtypes=(I32, U8))

# --------------------------------------------------------------------------- reductions

for _n in ("sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "ptp", "median",
           "nanmean", "nansum", "nanmax", "nanmin", "nanstd", "nanvar", "nanprod", "average",
           "count_nonzero", "nanargmax", "nanargmin"):  # fmt: skip
    case(f"jnp.{_n}", functools.partial(getattr(jnp, _n), axis=1), U(shape=(3, 5, 2)))
case("jnp.sum[all]", jnp.sum, U(), dtypes=(F32, F64, F16, BF16, I32, U8, BOOL))
case("jnp.max[all]", jnp.max, SPECIALS, dtypes=(F32,))
case("jnp.max[int]", lambda x: jnp.max(x, axis=0), U(-100, 100), dtypes=INTS)
case("jnp.prod[int]", lambda x: jnp.prod(x, axis=1), U(-3, 3), dtypes=(I32, I64))
case("jnp.any", lambda x: jnp.any(x > 0, axis=0), U())
case("jnp.all", lambda x: jnp.all(x > -1, axis=1), U())
case("jnp.cumsum", lambda x: jnp.cumsum(x, axis=1), U(), dtypes=(F32, I32))
case("jnp.cumprod", lambda x: jnp.cumprod(x, axis=0), U())
case("jnp.nancumsum", lambda x: jnp.nancumsum(x, axis=1), SPECIALS)
case("jnp.percentile", lambda x: jnp.percentile(x, 30.0), U())
case("jnp.quantile", lambda x: jnp.quantile(x, jnp.array([0.1, 0.5]), axis=1), U())
case("jnp.diff", lambda x: jnp.diff(x, axis=1), U())
case("jnp.ediff1d", jnp.ediff1d, U())
case("jnp.trapezoid", jnp.trapezoid, U())
case("jnp.cov", jnp.cov, U())
case("jnp.corrcoef", jnp.corrcoef, U())
case("jnp.linalg.norm[vec]", lambda x: jnp.linalg.norm(x, axis=1), U())
case("jnp.histogram", lambda x: jnp.histogram(x, bins=5, range=(-2, 2))[0], U(shape=(40,)))
case("jnp.bincount", lambda x: jnp.bincount(x, length=10), U(0, 9, shape=(30,)), dtypes=(I32,))
case("jnp.average[w]", lambda x, w: jnp.average(x, axis=1, weights=w), U(), U(0.1, 1, shape=(4,)))

# --------------------------------------------------------------------------- shapes and indexing

A3 = U(shape=(2, 3, 4))
for _name, _fn in [
    ("reshape", lambda x: x.reshape(4, 6)), ("transpose", lambda x: x.transpose(2, 0, 1)),
    ("swapaxes", lambda x: jnp.swapaxes(x, 0, 2)), ("moveaxis", lambda x: jnp.moveaxis(x, 0, -1)),
    ("expand_dims", lambda x: jnp.expand_dims(x, 1)), ("squeeze", lambda x: jnp.squeeze(x[:1], 0)),
    ("flip", lambda x: jnp.flip(x, (0, 2))), ("fliplr", lambda x: jnp.fliplr(x)), ("flipud", jnp.flipud),
    ("roll", lambda x: jnp.roll(x, 2, axis=2)), ("rot90", lambda x: jnp.rot90(x, axes=(1, 2))),
    ("tile", lambda x: jnp.tile(x, (1, 2, 1))), ("repeat", lambda x: jnp.repeat(x, 2, axis=1)),
    ("concatenate", lambda x: jnp.concatenate([x, -x], axis=2)), ("stack", lambda x: jnp.stack([x, x * 2], 1)),
    ("hstack", lambda x: jnp.hstack([x, x])), ("vstack", lambda x: jnp.vstack([x, x])),
    ("split", lambda x: jnp.split(x, 2, axis=2)), ("array_split", lambda x: jnp.array_split(x, 3, axis=1)),
    ("pad_constant", lambda x: jnp.pad(x, ((0, 1), (2, 0), (1, 1)), constant_values=3.0)),
    ("pad_edge", lambda x: jnp.pad(x, 2, mode="edge")), ("pad_reflect", lambda x: jnp.pad(x, 1, mode="reflect")),
    ("pad_wrap", lambda x: jnp.pad(x, 1, mode="wrap")), ("pad_symmetric", lambda x: jnp.pad(x, 1, mode="symmetric")),
    ("pad_linear_ramp", lambda x: jnp.pad(x, 1, mode="linear_ramp")),
    ("tril", lambda x: jnp.tril(x)), ("triu", lambda x: jnp.triu(x, 1)), ("diagonal", lambda x: jnp.diagonal(x, 0, 1, 2)),
    ("trace", lambda x: jnp.trace(x, axis1=1, axis2=2)), ("ravel", jnp.ravel), ("atleast_3d", lambda x: jnp.atleast_3d(x[0])),
    ("broadcast_to", lambda x: jnp.broadcast_to(x[:, :1], (2, 3, 4))), ("where", lambda x: jnp.where(x > 0, x, -1.0)),
    ("select", lambda x: jnp.select([x > 1, x < -1], [x, -x], 0.0)), ("sort", lambda x: jnp.sort(x, axis=1)),
    ("argsort", lambda x: jnp.argsort(x, axis=2)), ("sort_desc", lambda x: jnp.sort(x, axis=2, descending=True)),
    ("argsort_stable_desc", lambda x: jnp.argsort(jnp.round(x), axis=2, stable=True, descending=True)),
    ("partition", lambda x: jnp.partition(x, 2, axis=2)), ("argpartition", lambda x: jnp.argpartition(x, 1, axis=2)[..., :1]),
    ("lexsort", lambda x: jnp.lexsort((x[0], jnp.round(x[1])), axis=1)), ("msort", lambda x: jnp.sort(x, axis=0)),
    ("searchsorted", lambda x: jnp.searchsorted(jnp.sort(x.ravel()), x[0])),
    ("digitize", lambda x: jnp.digitize(x, jnp.array([-1.0, 0.0, 1.0]))),
    ("take", lambda x: jnp.take(x, jnp.array([2, 0, 3, 3]), axis=2)),
    ("take_along_axis", lambda x: jnp.take_along_axis(x, jnp.argsort(x, axis=2), axis=2)),
    ("fancy_index", lambda x: x[jnp.array([1, 0]), :, jnp.array([3, 1])]),
    ("bool_mask_where", lambda x: jnp.where(x > 0.5, size=5, fill_value=-1)[0]),
    ("nonzero_size", lambda x: jnp.nonzero(x.ravel() > 0, size=6)[0]),
    ("flatnonzero", lambda x: jnp.flatnonzero(x > 0, size=4)),
    ("einsum", lambda x: jnp.einsum("abc,adc->abd", x, x)), ("matmul", lambda x: x @ x.transpose(0, 2, 1)),
    ("tensordot", lambda x: jnp.tensordot(x, x, axes=([1, 2], [1, 2]))), ("inner", lambda x: jnp.inner(x, x)),
    ("outer", lambda x: jnp.outer(x[0, 0], x[1, 1])), ("kron", lambda x: jnp.kron(x[0], x[1])),
    ("cross", lambda x: jnp.cross(x[..., :3], x[..., 1:])), ("vdot", lambda x: jnp.vdot(x, x)),
    ("dot", lambda x: jnp.dot(x[0], x[1].T)), ("convolve", lambda x: jnp.convolve(x.ravel(), jnp.array([1.0, -2.0, 0.5]))),
    ("correlate", lambda x: jnp.correlate(x.ravel(), jnp.array([1.0, 2.0]), mode="same")),
    ("interp", lambda x: jnp.interp(x, jnp.array([-1.0, 0.0, 2.0]), jnp.array([0.0, 1.0, 3.0]))),
    ("polyval", lambda x: jnp.polyval(jnp.array([1.0, -2.0, 0.5]), x)), ("unwrap", lambda x: jnp.unwrap(x * 3)),
    ("vander", lambda x: jnp.vander(x[0, 0], 3)), ("meshgrid", lambda x: jnp.meshgrid(x[0, 0], x[1, 1])),
    ("gradient", lambda x: jnp.gradient(x[0], axis=1)), ("diag", lambda x: jnp.diag(x[0, 0])),
    ("cumsum_rev", lambda x: jnp.flip(jnp.cumsum(jnp.flip(x, 2), 2), 2)), ("eye_like", lambda x: x[0, :, :3] * jnp.eye(3)),
    ("arange_mul", lambda x: x * jnp.arange(4)), ("linspace", lambda x: x + jnp.linspace(0, 1, 4)),
    ("tri", lambda x: x[0, :, :3] * jnp.tri(3)), ("put_along", lambda x: x.at[:, 1, 2].set(7.0)),
    ("at_add_dup", lambda x: x.at[0, jnp.array([0, 0, 2]), 1].add(1.0)), ("at_mul", lambda x: x.at[1, :, jnp.array([1, 3])].multiply(2.0)),
    ("at_min", lambda x: x.at[:, jnp.array([0, 2])].min(0.0)), ("at_max", lambda x: x.at[:, :, 0].max(0.5)),
    ("at_get_clip", lambda x: x.at[:, jnp.array([5, -7])].get(mode="clip")),
    ("at_get_fill", lambda x: x.at[:, jnp.array([5, -1, 1])].get(mode="fill", fill_value=-3.0)),
    ("dynamic_index", lambda x: x[1:, ::2, 1::2]), ("ix_", lambda x: x[0][jnp.ix_(jnp.array([0, 2]), jnp.array([1, 3]))]),
    ("packbits", lambda x: jnp.packbits(x > 0)), ("unpackbits", lambda x: jnp.unpackbits((x > 0).astype(jnp.uint8).ravel())),
]:  # fmt: skip
    case(f"jnp.{_name}", _fn, A3)
case("jnp.sort[int]", lambda x: jnp.sort(x, axis=1), U(-100, 100), dtypes=INTS)
case("jnp.sort[nan]", lambda x: jnp.sort(x, axis=1), SPECIALS, dtypes=(F32, F64, F16))
case("jnp.argsort[int]", lambda x: jnp.argsort(x, axis=0), U(-100, 100), dtypes=(I32, U8))
case("jnp.take[int]", lambda x, i: jnp.take(x, i, axis=1), U(-100, 100), Idx(4, (5,)), dtypes=(I32, U8, BOOL))
case("jnp.add[u16,i16,c128]", jnp.add, U(0, 100), U(0, 100), dtypes=(U16, I16, np.complex128, np.uint64))
case("jnp.multiply[wrap]", lambda x: x * x * x, U(0, 60000), dtypes=(U16, U32, np.uint64, I16))
case(
    "jnp.max[u16]",
    lambda x: (jnp.max(x, axis=1), jnp.argmax(x, axis=0)),
    U(0, 60000),
    dtypes=(U16, U32, np.uint64),
)
case("jnp.sort[u16]", lambda x: jnp.sort(x, axis=1), U(0, 60000), dtypes=(U16, U32, np.uint64))
case("jnp.exp[c128]", jnp.exp, U(-1, 1), dtypes=(np.complex128,))
case("jnp.matmul[c]", lambda a: a @ a.T, U(), dtypes=(C64, np.complex128))
case("jnp.where[int]", lambda x: jnp.where(x > 0, x, x * 2), U(-100, 100), dtypes=(I8, I64, U32))

# --------------------------------------------------------------------------- jax.lax

X4 = U(shape=(2, 3, 9, 8))
K4 = U(shape=(4, 3, 3, 3))
case("lax.conv", lambda x, k: lax.conv(x, k, (1, 1), "SAME"), X4, K4, tol=(1e-4, 1e-4))
case("lax.conv[strided]", lambda x, k: lax.conv(x, k, (2, 3), "VALID"), X4, K4, tol=(1e-4, 1e-4))
case("lax.conv_general_dilated[nhwc]", lambda x, k: lax.conv_general_dilated(
    x, k, (1, 2), ((1, 2), (0, 1)), rhs_dilation=(2, 1), dimension_numbers=("NHWC", "HWIO", "NHWC")),
    U(shape=(2, 9, 8, 3)), U(shape=(3, 2, 3, 5)), tol=(1e-4, 1e-4))  # fmt: skip
case("lax.conv_transpose", lambda x, k: lax.conv_transpose(x, k, (2, 2), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")),
     X4, U(shape=(5, 3, 3, 3)), tol=(1e-4, 1e-4))  # fmt: skip
case("lax.conv[groups]", lambda x, k: lax.conv_general_dilated(x, k, (1, 1), "SAME", feature_group_count=3),
     U(shape=(2, 6, 7, 7)), U(shape=(6, 2, 3, 3)), tol=(1e-4, 1e-4))  # fmt: skip
case("lax.conv[depthwise1d]", lambda x, k: lax.conv_general_dilated(x, k, (1,), "SAME", feature_group_count=4),
     U(shape=(2, 4, 10)), U(shape=(4, 1, 3)), tol=(1e-4, 1e-4))  # fmt: skip
case("lax.conv[3d]", lambda x, k: lax.conv(x, k, (1, 1, 1), "SAME"), U(shape=(1, 2, 5, 5, 5)), U(shape=(3, 2, 3, 3, 3)),
     tol=(1e-4, 1e-4))  # fmt: skip
case("lax.conv[int]", lambda x, k: lax.conv(x, k, (1, 1), "SAME"), U(-3, 3, shape=(1, 2, 6, 6)),
     U(-3, 3, shape=(3, 2, 3, 3)), dtypes=(I32, I8))  # fmt: skip
case(
    "lax.conv[f16]",
    lambda x, k: lax.conv(x, k, (1, 1), "SAME"),
    X4,
    K4,
    dtypes=(F16, BF16, F64),
    tol=(3e-2, 3e-2),
)
case("lax.conv[grad_w]", jax.grad(lambda x, k: (lax.conv(x, k, (1, 1), "SAME") ** 2).sum(), argnums=1), X4, K4,
     tol=(1e-4, 1e-3))  # fmt: skip
case(
    "lax.conv[grad_x]",
    jax.grad(lambda x, k: (lax.conv(x, k, (2, 2), "SAME") ** 2).sum()),
    X4,
    K4,
    tol=(1e-4, 1e-3),
)
case(
    "lax.reduce_window[max]",
    lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2), "SAME"),
    X4,
)
case(
    "lax.reduce_window[sum]",
    lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 1, 1), "VALID"),
    X4,
)
case("lax.reduce_window[min]", lambda x: lax.reduce_window(x, jnp.inf, lax.min, (1, 2, 2, 1), (1, 1, 2, 2), "VALID",
     window_dilation=(1, 1, 2, 1)), X4)  # fmt: skip
case("lax.reduce_window[maxpool_grad]", jax.grad(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2),
     (1, 1, 2, 2), "VALID").sum()), X4)  # fmt: skip
case("lax.reduce_window[avgpool_grad]", jax.grad(lambda x: (lax.reduce_window(x, 0.0, lax.add, (1, 1, 3, 3),
     (1, 1, 2, 2), "SAME") ** 2).sum()), X4, tol=(1e-4, 1e-4))  # fmt: skip
case("lax.cummax", lambda x: lax.cummax(x, axis=1), U())
case("lax.cummin", lambda x: lax.cummin(x, axis=1, reverse=True), U())
case("lax.cumlogsumexp", lambda x: lax.cumlogsumexp(x, axis=1), U())
case("lax.cumsum[int]", lambda x: lax.cumsum(x, axis=0), U(-9, 9), dtypes=(I32, U8))
case("lax.associative_scan", lambda x: lax.associative_scan(jnp.add, x, axis=1), U())
case("lax.dynamic_slice", lambda x, i: lax.dynamic_slice(x, (i, i - 1), (2, 2)), U(), Fixed(2, I32))
case("lax.dynamic_slice[clamp]", lambda x, i: lax.dynamic_slice(x, (i, i), (2, 3)), U(), Fixed(9, I32))
case("lax.dynamic_update_slice", lambda x, i: lax.dynamic_update_slice(x, jnp.ones((2, 2), x.dtype), (i, i)), U(),
     Fixed(-3, I32), dtypes=(F32, I32))  # fmt: skip
case("lax.dynamic_index_in_dim", lambda x, i: lax.dynamic_index_in_dim(x, i, axis=1), U(), Fixed(3, I32))
case(
    "lax.sort[multi]",
    lambda k, v: lax.sort((k, v), num_keys=1),
    U(-3, 3, shape=(12,)),
    U(shape=(12,)),
    dtypes=(I32,),
)
case("lax.sort_key_val", lambda k, v: lax.sort_key_val(k, v), U(shape=(12,)), U(shape=(12,)))
case("lax.top_k", lambda x: lax.top_k(x, 3), U(shape=(3, 7)), dtypes=(F32, I32))
case("lax.cond", lambda p, x: lax.cond(p > 0, lambda v: v * 2.0, lambda v: jnp.sin(v), x), Fixed(1.0), U())
case(
    "lax.cond[false]",
    lambda p, x: lax.cond(p > 0, lambda v: v * 2.0, lambda v: jnp.sin(v), x),
    Fixed(-1.0),
    U(),
)
case("lax.switch", lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], x), Fixed(1, I32), U())
case("lax.switch[clamp]", lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], x), Fixed(7, I32), U())
case(
    "lax.while_loop",
    lambda x: lax.while_loop(lambda c: c.sum() < 50.0, lambda c: c * 1.5 + 0.1, x),
    U(0.1, 1),
)
case("lax.fori_loop", lambda x: lax.fori_loop(0, 4, lambda i, c: c * x + i, x), U())
case(
    "lax.fori_loop[dynamic]",
    lambda n, x: lax.fori_loop(0, n, lambda i, c: c * 0.5 + x, x),
    Fixed(5, I32),
    U(),
)
case("lax.scan", lambda x: lax.scan(lambda c, v: (c + v, c * v), jnp.zeros(4, x.dtype), x), U())
case(
    "lax.scan[rev]",
    lambda x: lax.scan(lambda c, v: (c * 0.9 + v, c), jnp.zeros(4, x.dtype), x, reverse=True),
    U(),
)
case("lax.map", lambda x: lax.map(lambda r: jnp.sort(r) * r.sum(), x), U())
case("jax.vmap[cond]", jax.vmap(lambda v: lax.cond(v > 0, jnp.sin, jnp.cos, v)), U(shape=(6,)))
case("lax.reduce_precision", lambda x: lax.reduce_precision(x, 5, 10), U(-100, 100))
case("lax.reduce_precision[bf16]", lambda x: lax.reduce_precision(x, 8, 7), U(-100, 100))
case("lax.bitcast_convert_type", lambda x: lax.bitcast_convert_type(x, jnp.int32), SPECIALS)
case("lax.bitcast_convert_type[u8]", lambda x: lax.bitcast_convert_type(x, jnp.uint8), U())
case("lax.population_count", lax.population_count, U(-100, 100), dtypes=(I32, U8, I64))
case("lax.clz", lax.clz, U(-100, 100), dtypes=(I32, U8, I64))
case(
    "lax.shift_right_logical",
    lambda x, s: lax.shift_right_logical(x, s),
    U(-100, 100),
    U(0, 40),
    dtypes=(I32, I8, U32),
)
case(
    "lax.shift_right_arithmetic",
    lambda x, s: lax.shift_right_arithmetic(x, s),
    U(-100, 100),
    U(0, 40),
    dtypes=(I32, I64),
)
case("lax.shift_left", lambda x, s: lax.shift_left(x, s), U(-100, 100), U(0, 40), dtypes=(I32, U8, I16, U16))
case("lax.div", lax.div, U(-100, 100), U(-5, 5), dtypes=(I32, I64, I8))
case("lax.rem", lax.rem, U(-100, 100), U(-5, 5), dtypes=(I32, I64, I8))
case("lax.div[unsigned]", lax.div, U(0, 100), U(0, 5), dtypes=(U8, U32, U16))
case("lax.rem[unsigned]", lax.rem, U(0, 100), U(0, 5), dtypes=(U8, U32))
case(
    "lax.round[afz]",
    lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
    Fixed([0.5, 1.5, -2.5, 2.49, -0.5, 3.0]),
)
case(
    "lax.round[even]",
    lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
    Fixed([0.5, 1.5, -2.5, 2.49]),
)
case("lax.integer_pow", lambda x: lax.integer_pow(x, 5), U(), dtypes=(F32, I32))
case("lax.integer_pow[neg]", lambda x: lax.integer_pow(x, -2), U(0.5, 2))
case("lax.clamp", lambda x: lax.clamp(jnp.float32(-0.5), x, jnp.float32(0.5)), SPECIALS)
case("lax.select_n", lambda p, x: lax.select_n(p > 0, x, -x), U(), U())
case("lax.dot_general", lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))), U(shape=(2, 3, 4)),
     U(shape=(2, 4, 5)), dtypes=(F32, F64, I32, F16, BF16))  # fmt: skip
case("lax.dot[preferred]", lambda a, b: lax.dot(a, b, preferred_element_type=jnp.float32), U(shape=(3, 4)),
     U(shape=(4, 2)), dtypes=(BF16, F16))  # fmt: skip
case("lax.batch_matmul", lax.batch_matmul, U(shape=(2, 3, 4)), U(shape=(2, 4, 2)))
case("lax.rev", lambda x: lax.rev(x, (0, 1)), U())
case(
    "lax.pad", lambda x: lax.pad(x, jnp.array(-1, x.dtype), [(1, -1, 1), (-2, 3, 2)]), U(), dtypes=(F32, I32)
)
case(
    "lax.broadcasted_iota", lambda x: x + lax.broadcasted_iota(x.dtype, (3, 4), 1), U(), dtypes=(F32, I32, U8)
)
case("lax.erf_inv", lax.erf_inv, U(-0.9, 0.9), dtypes=(F32, F64))
case("lax.lgamma", lax.lgamma, U(0.1, 5), dtypes=(F32, F64))
case("lax.digamma", lax.digamma, U(0.1, 5), dtypes=(F32, F64), tol=(1e-4, 1e-5))
case("lax.bessel_i0e", lax.bessel_i0e, U(), dtypes=(F32, F64))
case("lax.bessel_i1e", lax.bessel_i1e, U(), dtypes=(F32, F64))
case("lax.igamma", lax.igamma, U(0.5, 3), U(0.5, 3), tol=(1e-4, 1e-5))
case("lax.rsqrt", lax.rsqrt, U(0.1, 5), dtypes=(F32, F64, BF16))
case("lax.logistic", lax.logistic, U(-5, 5), dtypes=(F32, F64, F16))
case("lax.complex", lax.complex, U(), U())
case("lax.conj", lax.conj, U(), dtypes=(C64,))
case("lax.nextafter", lax.nextafter, U(), U())
case("lax.sign", lax.sign, SPECIALS, dtypes=(F32, F64))
case("lax.is_finite", lax.is_finite, SPECIALS)
case("lax.collapse", lambda x: lax.collapse(x, 1, 3), A3)
case("lax.squeeze", lambda x: lax.squeeze(x[:, :1], (1,)), A3)
case("lax.expand_dims", lambda x: lax.expand_dims(x, (0, 2)), A3)
case("lax.slice", lambda x: lax.slice(x, (0, 1, 0), (2, 3, 4), (1, 1, 3)), A3)
case("lax.gather[batched]", jax.vmap(lambda r, i: r[i]), U(shape=(4, 6)), Idx(6, (4, 3)))
case("lax.scatter[batched]", jax.vmap(lambda r, i: r.at[i].add(1.0)), U(shape=(4, 6)), Idx(6, (4, 3)))
case("lax.optimization_barrier", lambda x: lax.optimization_barrier((x * 2, x + 1)), U())
case("jax.random.normal", lambda x: x + jax.random.normal(jax.random.key(1), x.shape, x.dtype), U())
case("jax.random.uniform", lambda x: x * jax.random.uniform(jax.random.key(2), x.shape), U())
case("jax.random.bits", lambda x: (jax.random.bits(jax.random.key(3), (5,), jnp.uint32), x), U())
case("jax.random.permutation", lambda x: jax.random.permutation(jax.random.key(4), x), U(shape=(8,)))
case("jax.random.categorical", lambda x: jax.random.categorical(jax.random.key(5), x), U(shape=(4, 6)))
case(
    "jax.random.dropout",
    lambda x: jnp.where(jax.random.bernoulli(jax.random.key(6), 0.5, x.shape), x, 0),
    U(),
)

# --------------------------------------------------------------------------- jax.nn

for _n in ("relu", "relu6", "sigmoid", "softplus", "soft_sign", "silu", "swish", "log_sigmoid", "leaky_relu",
           "hard_tanh", "hard_sigmoid", "hard_silu", "elu", "celu", "selu", "gelu", "mish", "squareplus",
           "sparse_plus", "tanh", "standardize", "logsumexp"):  # fmt: skip
    case(
        f"jax.nn.{_n}",
        getattr(jax.nn, _n),
        U(-4, 4),
        dtypes=(F32, F16, BF16) if _n in ("relu", "gelu", "silu") else (F32,),
    )
case("jax.nn.gelu[exact]", lambda x: jax.nn.gelu(x, approximate=False), U(-4, 4), dtypes=(F32, F64))
case("jax.nn.glu", jax.nn.glu, U(-4, 4))
case("jax.nn.softmax", lambda x: jax.nn.softmax(x, axis=-1), U(-4, 4), dtypes=(F32, F16, BF16, F64))
case("jax.nn.log_softmax", lambda x: jax.nn.log_softmax(x, axis=0), U(-4, 4), dtypes=(F32, F64))
case("jax.nn.one_hot", lambda i: jax.nn.one_hot(i, 5), U(0, 4), dtypes=(I32,))
case("jax.nn.dot_product_attention", lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True),
     U(shape=(1, 5, 2, 4)), U(shape=(1, 5, 2, 4)), U(shape=(1, 5, 2, 4)), tol=(1e-4, 1e-5))  # fmt: skip

# --------------------------------------------------------------------------- jax.scipy.special

for _n, _dom, _tol in [
    ("erf", U(), None), ("erfc", U(), None), ("erfinv", U(-0.9, 0.9), None), ("expit", U(-5, 5), None),
    ("logit", U(0.05, 0.95), None), ("gammaln", U(0.1, 5), None), ("digamma", U(0.1, 5), (1e-4, 1e-5)),
    ("gamma", U(0.1, 4), (1e-4, 1e-5)), ("i0", U(), None), ("i0e", U(), None), ("i1", U(), None),
    ("i1e", U(), None), ("ndtr", U(), None), ("ndtri", U(0.05, 0.95), (1e-4, 1e-5)), ("log_ndtr", U(-5, 3), (1e-4, 1e-5)),
    ("entr", U(0.01, 2), None), ("factorial", U(0, 6), (1e-4, 1e-4)), ("logsumexp", U(), None),
    ("softmax", U(), None), ("log_softmax", U(), None), ("spence", U(0.1, 3), (1e-4, 1e-5)),
    ("exp1", U(0.1, 3), (1e-4, 1e-5)), ("expi", U(0.1, 3), (1e-4, 1e-5)), ("erfcx", U(-1, 3), (1e-4, 1e-5)),
]:  # fmt: skip
    case(f"jss.{_n}", getattr(jss, _n), _dom, tol=_tol, dtypes=(F32, F64))
for _n, _a, _b, _tol in [
    ("xlogy", U(0, 2), U(0.1, 2), None), ("xlog1py", U(0, 2), U(0.1, 2), None), ("zeta", U(1.5, 4), U(0.5, 3), (1e-4, 1e-5)),
    ("betaln", U(0.5, 3), U(0.5, 3), (1e-4, 1e-5)), ("gammainc", U(0.5, 3), U(0.5, 3), (1e-4, 1e-5)),
    ("gammaincc", U(0.5, 3), U(0.5, 3), (1e-4, 1e-5)), ("rel_entr", U(0.1, 2), U(0.1, 2), None),
    ("kl_div", U(0.1, 2), U(0.1, 2), None), ("poch", U(0.5, 3), U(0, 3), (1e-4, 1e-5)),
]:  # fmt: skip
    case(f"jss.{_n}", getattr(jss, _n), _a, _b, tol=_tol)
case("jss.polygamma", lambda x: jss.polygamma(1, x), U(0.5, 4), tol=(1e-4, 1e-5))
case("jss.multigammaln", lambda x: jss.multigammaln(x, 2), U(1.5, 4), tol=(1e-4, 1e-5))
case("jss.betainc", lambda a, b, x: jss.betainc(a, b, x), U(0.5, 3), U(0.5, 3), U(0.1, 0.9), tol=(1e-4, 1e-5))
case("jss.erf[f64]", jss.erf, U(), dtypes=(F64, F16, BF16))
case("jss.gammaln[f64]", jss.gammaln, U(0.1, 5), dtypes=(F64,))

# --------------------------------------------------------------------------- jnp.linalg

LT = (1e-4, 1e-4)
M = SPD()
B = U(shape=(4, 2))
case("linalg.inv", jnp.linalg.inv, M, dtypes=(F32, F64), tol=LT)
case("linalg.inv[batch]", jnp.linalg.inv, SPD(3, (2,)), tol=LT)
case("linalg.det", jnp.linalg.det, M, dtypes=(F32, F64), tol=LT)
case("linalg.det[general]", jnp.linalg.det, U(shape=(4, 4)), tol=LT)
case("linalg.slogdet", jnp.linalg.slogdet, U(shape=(4, 4)), tol=LT)
case("linalg.solve", jnp.linalg.solve, M, B, dtypes=(F32, F64), tol=LT)
case("linalg.cholesky", jnp.linalg.cholesky, M, dtypes=(F32, F64), tol=LT)
case("linalg.cholesky[batch]", jnp.linalg.cholesky, SPD(3, (2,)), tol=LT)
case(
    "linalg.qr[recon]",
    lambda a: (lambda q, r: (q @ r, jnp.abs(jnp.diag(r))))(*jnp.linalg.qr(a)),
    U(shape=(5, 3)),
    tol=LT,
)
case("linalg.qr[r_abs]", lambda a: jnp.abs(jnp.linalg.qr(a, mode="r")), U(shape=(4, 4)), tol=LT)
case("linalg.eigh[vals]", jnp.linalg.eigvalsh, M, dtypes=(F32, F64), tol=LT)
case("linalg.eigh[recon]", lambda a: (lambda w, v: (v * w) @ v.T)(*jnp.linalg.eigh(a)), M, tol=LT)
case(
    "linalg.svd[vals]",
    lambda a: jnp.linalg.svd(a, compute_uv=False),
    U(shape=(5, 3)),
    dtypes=(F32, F64),
    tol=LT,
)
case("linalg.svd[recon]", lambda a: (lambda u, s, vt: (u * s) @ vt)(*jnp.linalg.svd(a, full_matrices=False)),
     U(shape=(5, 3)), tol=LT)  # fmt: skip
case("linalg.pinv", jnp.linalg.pinv, U(shape=(5, 3)), tol=LT)
case("linalg.matrix_power", lambda a: jnp.linalg.matrix_power(a, 3), U(shape=(3, 3)), tol=LT)
case("linalg.matrix_rank", jnp.linalg.matrix_rank, U(shape=(4, 3)))
case("linalg.norm[fro]", lambda a: jnp.linalg.norm(a), U(shape=(4, 3)))
case("linalg.norm[nuc]", lambda a: jnp.linalg.norm(a, "nuc"), U(shape=(4, 3)), tol=LT)
case("linalg.norm[2]", lambda a: jnp.linalg.norm(a, 2), U(shape=(4, 3)), tol=LT)
case("linalg.norm[inf]", lambda a: jnp.linalg.norm(a, jnp.inf), U(shape=(4, 3)))
case("linalg.cond", jnp.linalg.cond, M, tol=LT)
case(
    "linalg.lstsq", lambda a, b: jnp.linalg.lstsq(a, b)[0], U(shape=(5, 3)), U(shape=(5, 2)), tol=(1e-3, 1e-4)
)
case("linalg.multi_dot", lambda a, b: jnp.linalg.multi_dot([a, a.T, b]), U(shape=(4, 4)), B, tol=LT)
case("linalg.tensorsolve", lambda a, b: jnp.linalg.tensorsolve(a, b[:, 0]), M, B, tol=LT)
case("linalg.eig", lambda a: jnp.sort(jnp.abs(jnp.linalg.eigvals(a))), M, tol=LT)
case("linalg.matrix_transpose", jnp.linalg.matrix_transpose, A3)
case("linalg.vecdot", lambda a: jnp.linalg.vecdot(a, a), A3)
case("scipy.linalg.lu_factor", lambda a: jax.scipy.linalg.lu_factor(a), U(shape=(4, 4)), tol=LT)
case("scipy.linalg.lu", lambda a: jax.scipy.linalg.lu(a), U(shape=(4, 4)), tol=LT)
case(
    "scipy.linalg.cho_solve",
    lambda a, b: jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(a), b),
    M,
    B,
    tol=LT,
)
case(
    "scipy.linalg.solve_triangular",
    lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True),
    M,
    B,
    tol=LT,
)
case("scipy.linalg.solve_triangular[T]", lambda a, b: jax.scipy.linalg.solve_triangular(a, b, trans=1, unit_diagonal=True),
     M, B, tol=LT)  # fmt: skip
case("scipy.linalg.expm", jax.scipy.linalg.expm, U(-0.5, 0.5, shape=(3, 3)), tol=LT)
case("jnp.fft.fft", lambda x: jnp.fft.fft(x), U(), dtypes=(F32, C64), tol=LT)
case("jnp.fft.ifft", lambda x: jnp.fft.ifft(x), U(), dtypes=(C64,), tol=LT)
case("jnp.fft.rfft", lambda x: jnp.fft.rfft(x), U(), tol=LT)
case("jnp.fft.irfft", lambda x: jnp.fft.irfft(x), U(), dtypes=(C64,), tol=LT)
case("jnp.fft.fft2", lambda x: jnp.fft.fft2(x), A3, dtypes=(F32,), tol=LT)
case("jnp.fft.rfftn", lambda x: jnp.fft.rfftn(x), A3, tol=LT)


# --------------------------------------------------------------------------- running a case


def case_params() -> list[tuple[Case, object, str]]:
    """Every (case, dtype, id) of :data:`CASES`; ids are ``f"{name}-{dtype}"``, with a ``'``
    appended per repeat of a (name, dtype) pair."""
    out = []
    seen = set()
    for c in CASES:
        for dt in c.dtypes:
            cid = f"{c.name}-{np.dtype(dt).name}"
            while cid in seen:
                cid += "'"
            seen.add(cid)
            out.append((c, dt, cid))
    return out


#: ``CONFORMANCE_CASES=all`` runs every case; the default (CI) run takes every case's first
#: dtype (so every function of the table runs) and every :data:`CI_STEP`-th of the other
#: (case, dtype) pairs; the documented counts are full runs.
FULL = os.environ.get("CONFORMANCE_CASES") == "all"
CI_STEP = 4


def selected_params() -> list[tuple[Case, object, str]]:
    """:func:`case_params`: all with ``CONFORMANCE_CASES=all``; by default each case's first
    dtype and every :data:`CI_STEP`-th other pair, in table order."""
    params = case_params()
    if FULL:
        return params
    seen: set[int] = set()
    out = []
    others = 0
    for c, dt, cid in params:
        if id(c) not in seen:
            seen.add(id(c))
            out.append((c, dt, cid))
        else:
            if others % CI_STEP == 0:
                out.append((c, dt, cid))
            others += 1
    return out


def make_args(c: Case, dtype) -> list[np.ndarray]:
    """The inputs of case ``c`` in ``dtype``, from a generator seeded by the case name."""
    rng = np.random.default_rng(zlib.crc32(c.name.encode()))
    return [make(dtype, rng) for make in c.args]


def tolerance(c: Case, result_dtype: np.dtype) -> tuple[float, float]:
    """(rtol, atol) for a result of ``result_dtype``: float64/complex128 at :data:`TOL`
    (float64 precision) unless the case names its accuracy (``tol64``); float32/complex64 at
    the case's ``tol`` or :data:`TOL`; float16/bfloat16 at the larger of the two; (0, 0) for
    integers and bools."""
    base = TOL.get(np.dtype(result_dtype), (0, 0))
    if np.dtype(result_dtype) in (np.dtype(F64), np.dtype(np.complex128)):
        return c.tol64 or base
    if c.tol is None:
        return base
    if np.dtype(result_dtype) in (np.dtype(F16), np.dtype(BF16)):
        return max(c.tol[0], base[0]), max(c.tol[1], base[1])
    return c.tol
