"""Random well-typed JAX programs for the differential fuzzer (a hypothesis strategy).

A :class:`Program` is straight-line Python source over ``jnp``/``lax``::

    def f(v0, v1):
        v2 = jnp.tanh(v0)
        v3 = jnp.sum(v2 * v1, axis=(0,), keepdims=False)
        return (v3,)

built by :func:`programs`: a pool of typed values (the inputs first), to which each step
applies one *op family* to operands drawn from the pool. A family (:data:`FAMILIES`) says
which operand dtypes it accepts and draws its parameters; the result's shape and dtype come
from ``jax.eval_shape`` of the step itself, so every program is well-typed by construction.
Families: elementwise unary and binary (with broadcasting and jnp type promotion), casts,
reductions and cumulative reductions, shape ops (reshape, transpose, broadcast, slice, pad,
concatenate, flip, roll), gathers and scatters, sorts, top_k, matmul/einsum, convolutions and
pools, control flow (cond, fori_loop, while_loop, scan) and a miscellany (softmax,
logsumexp, var, triu/tril, diagonal, repeat, one_hot, searchsorted, shifts, population
count, float remainders).

Every value carries what the comparison needs to stay meaningful for random inputs:

* ``bound``: an upper bound of ``|x|`` over its finite elements. A step whose bound would
  exceed :data:`LIMIT` for its dtype is rescaled by an exact power of two, so nothing
  overflows by accident (overflow thresholds are where implementations legitimately differ
  by one rounding).
* ``err``: an upper bound of the absolute difference two correct implementations may show
  (rounding, excess precision such as XLA's fused bf16 arithmetic in f32, transcendental
  functions' last ulps), propagated with each op's Lipschitz constant. The comparator allows
  ``4 * err`` on top of the dtype's tolerance.
* ``exact``: no rounding went into it (inputs, data movement, integer and bool ops, max/min,
  abs, floor...). Discontinuous ops (floor, round, sign, comparisons, float → int casts,
  argmax, argsort, top_k indices, value-dependent indices) only take exact operands:
  applied to a rounded value their result is ill-conditioned.
* ``nonfinite``: it may hold inf/NaN (inputs of a program with ``specials`` do). Ops whose
  result on NaN is implementation-defined (sort and top_k order, argmax, float → int) only
  take finite values.

Other exclusions (legitimately implementation-defined results): integer division and
remainder only by a divisor in ``[2, 8]`` (no division by zero, no ``INT_MIN // -1``);
scatter ``set`` only with unique indices (duplicate writes have no defined order); sorts
that return indices are stable (``argsort``; an unstable sort's tie order is unspecified).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from hypothesis import strategies as st
from jax import lax

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I8, I32, I64, U8 = np.dtype(np.int8), np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.uint8)
BOOL = np.dtype(np.bool_)
FLOATS = (F32, F16, BF16, F64)
INTS = (I32, I8, I64, U8)
DTYPES = (F32, F16, BF16, F64, I32, I8, I64, U8, BOOL)

#: Unit roundoff (half an ulp at 1) per float dtype.
EPS = {F16: 2.0**-11, BF16: 2.0**-8, F32: 2.0**-24, F64: 2.0**-53}
#: Largest magnitude a float value may reach before the step is rescaled.
LIMIT = {F16: 512.0, BF16: 512.0, F32: 1e5, F64: 1e5}
#: Rounding slack, in ulps of the result: one correctly rounded op, and a transcendental
#: function (libraries differ in their last bits).
ROUND, TRANS = 1.0, 4.0

NAMESPACE = {"jnp": jnp, "lax": lax, "jax": jax, "np": np}


def is_float(dt: np.dtype) -> bool:
    return dt in EPS


def is_int(dt: np.dtype) -> bool:
    return dt.kind in "iu"


def dtype_src(dt: np.dtype) -> str:
    """The ``jnp`` spelling of ``dt``."""
    return f"jnp.{'bfloat16' if dt == BF16 else dt.name}"


@dataclass
class Value:
    """One value of the pool: its name, type and the bounds the comparator uses."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    bound: float = 0.0
    err: float = 0.0
    exact: bool = True
    nonfinite: bool = False

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def eps(self) -> float:
        return EPS.get(self.dtype, 0.0)


@dataclass
class Program:
    """A generated program: its inputs, straight-line steps and outputs."""

    inputs: list[Value]
    steps: list[tuple[Value, str]] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    seed: int = 0
    specials: bool = False

    def source(self) -> str:
        """The program as a Python function ``f`` (``jnp``, ``lax``, ``jax``, ``np`` in scope)."""
        lines = [f"def f({', '.join(v.name for v in self.inputs)}):"]
        lines += [f"    {v.name} = {expr}" for v, expr in self.steps]
        lines.append(f"    return ({''.join(v.name + ', ' for v in self.outputs)})")
        return "\n".join(lines)

    def fn(self):
        """The program as a callable (compiled from :meth:`source`)."""
        scope = dict(NAMESPACE)
        exec(compile(self.source(), "<fuzz program>", "exec"), scope)  # noqa: S102 - generated code
        return scope["f"]

    def args(self) -> list[np.ndarray]:
        """The seeded inputs: floats uniform in [-3, 3] (with some inf/NaN when ``specials``),
        signed integers in [-8, 8], unsigned in [0, 16], bools fair coins."""
        rng = np.random.default_rng(self.seed)
        return [make_input(v, rng, self.specials) for v in self.inputs]

    def __repr__(self) -> str:
        ins = ", ".join(f"{v.name}: {v.dtype.name}{list(v.shape)}" for v in self.inputs)
        return f"Program(seed={self.seed}, specials={self.specials}, inputs=[{ins}])\n{self.source()}"


def make_input(v: Value, rng: np.random.Generator, specials: bool) -> np.ndarray:
    """A seeded input for ``v`` (see :meth:`Program.args`)."""
    if v.dtype == BOOL:
        return np.asarray(rng.random(v.shape) < 0.5)
    if is_int(v.dtype):
        lo = 0 if v.dtype.kind == "u" else -8
        return np.asarray(rng.integers(lo, 17 if lo == 0 else 9, v.shape)).astype(v.dtype)
    x = rng.uniform(-3, 3, v.shape)
    if specials and x.size:
        mask = rng.random(v.shape) < 0.15
        x = np.where(mask, rng.choice([np.inf, -np.inf, np.nan], v.shape), x)
    return np.asarray(x).astype(v.dtype)


def input_bound(dt: np.dtype) -> float:
    return 1.0 if dt == BOOL else (16.0 if dt == U8 else (8.0 if is_int(dt) else 3.0))


# --------------------------------------------------------------------------- building


class Builder:
    """The pool of values of a program under construction."""

    def __init__(self, draw, program: Program):
        self.draw = draw
        self.program = program
        self.pool: list[Value] = list(program.inputs)

    def pick(self, pred=lambda v: True) -> Value | None:
        cands = [v for v in self.pool if pred(v)]
        if not cands:
            return None
        # favour recent values so programs chain rather than fan out
        i = self.draw(st.integers(0, len(cands) - 1))
        return cands[len(cands) - 1 - i]

    def add(
        self, expr: str, operands: list[Value], *, bound: float, err: float, exact: bool, nonfinite=None
    ) -> Value | None:
        """Add step ``expr`` (``{0}``, ``{1}``... name the operands); its type comes from
        ``jax.eval_shape``. Returns None (and adds nothing) when JAX rejects it."""
        text = expr.format(*[o.name for o in operands])
        uniq = list({o.name: o for o in operands}.values())
        try:
            aval = jax.eval_shape(
                eval(f"lambda {', '.join(o.name for o in uniq)}: {text}", dict(NAMESPACE)),  # noqa: S307
                *[jax.ShapeDtypeStruct(o.shape, o.dtype) for o in uniq],
            )
        except Exception as e:  # noqa: BLE001 - JAX rejecting a step is a generator defect
            raise GeneratorBug(f"{text}: {type(e).__name__}: {e}") from e
        dt = np.dtype(aval.dtype)
        if nonfinite is None:
            nonfinite = any(o.nonfinite for o in operands)
        if not is_float(dt):
            bound, err, exact, nonfinite = (
                min(bound, float(np.iinfo(dt).max)) if is_int(dt) else 1.0,
                0.0,
                True,
                False,
            )
        v = Value(f"v{len(self.pool)}", tuple(aval.shape), dt, bound, err, exact, nonfinite)
        if is_float(dt) and bound > LIMIT[dt]:
            k = math.ceil(math.log2(bound / LIMIT[dt]))
            text = f"({text}) * {2.0**-k!r}"
            v.bound, v.err = bound * 2.0**-k, err * 2.0**-k
        self.program.steps.append((v, text))
        self.pool.append(v)
        return v


class GeneratorBug(Exception):
    """A family produced a step JAX rejects: a defect of the generator, not of the converter."""


def rounding(v_dtype: np.dtype, bound: float, ulps: float = ROUND) -> float:
    return ulps * EPS.get(v_dtype, 0.0) * bound


def result_dtype(*dts: np.dtype) -> np.dtype:
    return np.dtype(jnp.result_type(*[jnp.zeros((), d) for d in dts]))


# --------------------------------------------------------------------------- families

FAMILIES: dict[str, object] = {}


def family(name: str, weight: int = 1):
    def register(fn):
        FAMILIES[name] = (fn, weight)
        return fn

    return register


# (expression, Lipschitz constant, output bound as a function of the input bound)
SMOOTH_UNARY = [
    ("jnp.sin({0})", 1.0, lambda b: 1.0),
    ("jnp.cos({0})", 1.0, lambda b: 1.0),
    ("jnp.tanh({0})", 1.0, lambda b: 1.0),
    ("jax.nn.sigmoid({0})", 0.25, lambda b: 1.0),
    ("lax.erf({0})", 1.13, lambda b: 1.0),
    ("jax.nn.gelu({0})", 1.13, lambda b: b),
    ("jax.nn.gelu({0}, approximate=False)", 1.13, lambda b: b),
    ("jax.nn.silu({0})", 1.1, lambda b: b),
    ("jax.nn.softplus({0})", 1.0, lambda b: b + 1),
    ("jnp.exp(jnp.clip({0}, -4, 4))", 55.0, lambda b: 55.0),
    ("jnp.log1p(jnp.abs({0}))", 1.0, lambda b: math.log1p(b) + 1),
    ("jnp.log(jnp.abs({0}) + 1)", 1.0, lambda b: math.log1p(b) + 1),
    ("jnp.sqrt(jnp.abs({0}) + 1)", 0.5, lambda b: math.sqrt(b + 1)),
    ("lax.rsqrt(jnp.abs({0}) + 1)", 0.5, lambda b: 1.0),
    ("jnp.arctan({0})", 1.0, lambda b: 1.6),
    ("1 / (jnp.abs({0}) + 1)", 1.0, lambda b: 1.0),
    ("jnp.square({0})", None, lambda b: b * b),
    ("{0} * 0.5 + 1", 0.5, lambda b: b / 2 + 1),
    ("jnp.expm1(jnp.clip({0}, -4, 2))", 7.4, lambda b: 7.4),
]
EXACT_UNARY_FLOAT = [
    "jnp.abs({0})",
    "-{0}",
    "jax.nn.relu({0})",
    "jnp.floor({0})",
    "jnp.ceil({0})",
    "jnp.round({0})",
    "jnp.sign({0})",
    "jnp.trunc({0})",
]
CONTINUOUS_EXACT = {"jnp.abs({0})", "-{0}", "jax.nn.relu({0})"}


@family("unary", 6)
def _unary(b: Builder):
    x = b.pick(lambda v: v.dtype != BOOL)
    if x is None:
        return
    if is_float(x.dtype):
        if b.draw(st.booleans()):
            expr, lip, bound = b.draw(st.sampled_from(SMOOTH_UNARY))
            ulps = TRANS if "jnp.square" not in expr and "*" not in expr and "1 /" not in expr else ROUND
            lip = 2 * x.bound if lip is None else lip
            out = bound(x.bound)
            b.add(expr, [x], bound=out, err=lip * x.err + rounding(x.dtype, out, ulps), exact=False)
            return
        exprs = EXACT_UNARY_FLOAT if x.exact else sorted(CONTINUOUS_EXACT)
        expr = b.draw(st.sampled_from(exprs))
        b.add(expr, [x], bound=x.bound + 1, err=x.err, exact=x.exact)
        return
    expr = b.draw(st.sampled_from(["jnp.abs({0})", "-{0}", "~{0}", "jnp.sign({0})", "jnp.square({0})"]))
    bound = x.bound**2 if "square" in expr else x.bound + 1
    b.add(expr, [x], bound=bound, err=0.0, exact=True)


@family("special_tests", 1)
def _special_tests(b: Builder):
    x = b.pick(lambda v: is_float(v.dtype) and v.nonfinite)
    if x is None:
        return
    expr = b.draw(
        st.sampled_from(
            [
                "jnp.isnan({0})",
                "jnp.isinf({0})",
                "jnp.isfinite({0})",
                "jnp.nan_to_num({0}, nan=0.5, posinf=7.0, neginf=-7.0)",
            ]
        )
    )
    b.add(expr, [x], bound=max(x.bound, 7.0), err=x.err, exact=x.exact, nonfinite=False)


def _broadcast_partner_shape(b: Builder, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with ``shape``: some dims set to 1, some leading ones dropped,
    or one leading dim added."""
    dims = [d if not b.draw(st.integers(0, 3)) == 0 else 1 for d in shape]
    drop = b.draw(st.integers(0, len(dims)))
    dims = dims[drop:]
    if drop == 0 and len(dims) < 3 and b.draw(st.integers(0, 4)) == 0:
        dims = [b.draw(st.integers(1, 3)), *dims]
    return tuple(dims)


def _broadcasts(a: tuple, c: tuple) -> bool:
    for x, y in zip(reversed(a), reversed(c), strict=False):
        if x != y and x != 1 and y != 1:
            return False
    return True


def _partner(b: Builder, x: Value, same_dtype: bool, kinds=None) -> Value:
    """A second operand for ``x``: a pool value whose shape broadcasts with it, or a new
    input of a broadcast-compatible shape."""

    def ok(v):
        if not _broadcasts(v.shape, x.shape):
            return False
        if same_dtype:
            return v.dtype == x.dtype
        return kinds(v.dtype) if kinds else True

    y = b.pick(ok) if b.draw(st.integers(0, 2)) else None
    if y is None:
        dt = x.dtype
        if not same_dtype and b.draw(st.integers(0, 3)) == 0:
            dt = b.draw(st.sampled_from([d for d in DTYPES if (kinds(d) if kinds else True)]))
        y = new_input(b, _broadcast_partner_shape(b, x.shape), dt)
    return y


def new_input(b: Builder, shape, dt) -> Value:
    v = Value(
        f"v{len(b.pool)}",
        tuple(shape),
        np.dtype(dt),
        input_bound(np.dtype(dt)),
        0.0,
        True,
        b.program.specials and is_float(np.dtype(dt)),
    )
    # inputs are numbered in order of creation; the program's signature lists them all first
    b.program.inputs.append(v)
    b.pool.append(v)
    return v


@family("binary", 8)
def _binary(b: Builder):
    x = b.pick()
    if x is None:
        return
    kind = "float" if is_float(x.dtype) else ("int" if is_int(x.dtype) else "bool")
    if kind == "bool":
        y = _partner(b, x, True)
        expr = b.draw(
            st.sampled_from(
                [
                    "{0} & {1}",
                    "{0} | {1}",
                    "{0} ^ {1}",
                    "{0} == {1}",
                    "{0} != {1}",
                    "jnp.logical_and({0}, {1})",
                ]
            )
        )
        b.add(expr, [x, y], bound=1, err=0, exact=True)
        return
    if kind == "int":
        y = _partner(b, x, b.draw(st.booleans()), is_int)
        ops = [
            "{0} + {1}",
            "{0} - {1}",
            "{0} * {1}",
            "jnp.maximum({0}, {1})",
            "jnp.minimum({0}, {1})",
            "{0} // (jnp.abs({1}) % 7 + 2)",
            "{0} % (jnp.abs({1}) % 7 + 2)",
            "lax.div({0}, (jnp.abs({1}) % 7 + 2).astype({0}.dtype))",
            "lax.rem({0}, (jnp.abs({1}) % 7 + 2).astype({0}.dtype))",
            "{0} & {1}",
            "{0} | {1}",
            "{0} ^ {1}",
            "{0} < {1}",
            "{0} >= {1}",
            "{0} == {1}",
            "jnp.where({0} > {1}, {0}, {1} * 2)",
        ]
        expr = b.draw(st.sampled_from(ops))
        if "lax." in expr and x.dtype != y.dtype:
            y = new_input(b, _broadcast_partner_shape(b, x.shape), x.dtype)
            if "lax." in expr and y.shape != x.shape:
                expr = expr.replace("{1}", "jnp.broadcast_to({1}, {0}.shape)")
        if "lax." in expr and not (_broadcasts(y.shape, x.shape) and len(y.shape) <= len(x.shape)):
            return
        if "lax." in expr and y.shape != x.shape and "broadcast_to" not in expr:
            expr = expr.replace("{1}", "jnp.broadcast_to({1}, {0}.shape)")
        bound = x.bound * y.bound if "*" in expr else x.bound + y.bound + 1
        b.add(expr, [x, y], bound=bound, err=0, exact=True)
        return
    y = _partner(b, x, b.draw(st.integers(0, 3)) != 0, lambda d: d != BOOL)
    ops = [
        ("{0} + {1}", "add"),
        ("{0} - {1}", "add"),
        ("{0} * {1}", "mul"),
        ("jnp.maximum({0}, {1})", "max"),
        ("jnp.minimum({0}, {1})", "max"),
        ("{0} / (jnp.abs({1}) + 1)", "div"),
        ("jnp.where({0} > {1}, {0}, {1})", "max"),
        ("jnp.arctan2({0}, jnp.abs({1}) + 1)", "atan2"),
    ]
    if x.exact and y.exact:
        ops += [
            ("{0} < {1}", "cmp"),
            ("{0} >= {1}", "cmp"),
            ("{0} == {1}", "cmp"),
            ("jnp.where({0} > {1}, {0}, {1} * 2)", "max"),
        ]
    expr, rule = b.draw(st.sampled_from(ops))
    out_dt = result_dtype(x.dtype, y.dtype)
    if rule == "cmp":
        b.add(expr, [x, y], bound=1, err=0, exact=True)
        return
    # an operand converted to a narrower float rounds; to a wider one it is exact
    ex, ey = _converted_err(x, out_dt), _converted_err(y, out_dt)
    if rule == "add":
        bound = x.bound + y.bound
        err, exact = ex + ey + rounding(out_dt, bound), False
    elif rule == "mul":
        bound = x.bound * y.bound
        err, exact = ex * y.bound + ey * x.bound + rounding(out_dt, bound), False
    elif rule == "div":
        bound = x.bound
        err, exact = ex + ey * x.bound + rounding(out_dt, bound), False
    elif rule == "atan2":
        bound = 1.6
        err, exact = ex + ey + rounding(out_dt, bound, TRANS), False
    else:  # max / min / where: exact selections; "* 2" is exact
        bound = 2 * max(x.bound, y.bound)
        err, exact = 2 * max(ex, ey), x.exact and y.exact and out_dt in (x.dtype, y.dtype)
    b.add(expr, [x, y], bound=bound, err=err, exact=exact)


def _converted_err(v: Value, to: np.dtype) -> float:
    if not is_float(v.dtype) or not is_float(to):
        return v.err + (rounding(to, v.bound) if is_float(to) and v.bound > 1 / EPS[to] else 0.0)
    return v.err + (rounding(to, v.bound) if EPS[to] > EPS[v.dtype] else 0.0)


@family("where", 2)
def _where(b: Builder):
    c = b.pick(lambda v: v.dtype == BOOL)
    if c is None:
        return
    x = b.pick(lambda v: v.dtype != BOOL and _broadcasts(v.shape, c.shape))
    if x is None:
        return
    y = _partner(b, x, True)
    if not _broadcasts(y.shape, c.shape):
        return
    b.add(
        "jnp.where({0}, {1}, {2})",
        [c, x, y],
        bound=max(x.bound, y.bound),
        err=max(x.err, y.err),
        exact=x.exact and y.exact,
    )


@family("cast", 3)
def _cast(b: Builder):
    x = b.pick()
    if x is None:
        return
    to = b.draw(st.sampled_from([d for d in DTYPES if d != x.dtype]))
    if is_float(x.dtype) and not is_float(to):
        if not (x.exact and not x.nonfinite):
            return
        if to == BOOL:
            b.add(f"{{0}}.astype({dtype_src(to)})", [x], bound=1, err=0, exact=True)
            return
        lo, hi = (0, 200) if to == U8 else (-100, 100)
        b.add(f"jnp.clip({{0}}, {lo}, {hi}).astype({dtype_src(to)})", [x], bound=hi, err=0, exact=True)
        return
    if is_float(to):
        err = _converted_err(x, to)
        exact = x.exact and err == x.err
        b.add(f"{{0}}.astype({dtype_src(to)})", [x], bound=x.bound, err=err, exact=exact)
        return
    # int/bool -> int/bool: wraps modulo 2**bits (defined); bound follows the target
    bound = x.bound if to == BOOL or x.bound <= np.iinfo(to).max else float(np.iinfo(to).max) + 1
    b.add(f"{{0}}.astype({dtype_src(to)})", [x], bound=bound, err=0, exact=True)


def _axes(b: Builder, rank: int) -> tuple[int, ...]:
    if rank == 0:
        return ()
    return tuple(sorted(b.draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank))))


@family("reduce", 5)
def _reduce(b: Builder):
    x = b.pick(lambda v: len(v.shape) > 0)
    if x is None:
        return
    axes = _axes(b, len(x.shape))
    n = math.prod(x.shape[a] for a in axes)
    keep = b.draw(st.booleans())
    kw = f"axis={axes}, keepdims={keep}"
    if x.dtype == BOOL:
        expr = b.draw(st.sampled_from(["jnp.any", "jnp.all", "jnp.sum", "jnp.count_nonzero"]))
        b.add(f"{expr}({{0}}, {kw})", [x], bound=n, err=0, exact=True)
        return
    ops = ["jnp.sum", "jnp.max", "jnp.min", "jnp.mean", "jnp.prod"]
    if n == 0:
        ops = ["jnp.sum", "jnp.prod"]
    if x.exact and not x.nonfinite and len(axes) == 1 and n > 0:
        ops += ["jnp.argmax", "jnp.argmin"]
    op = b.draw(st.sampled_from(ops))
    if op in ("jnp.argmax", "jnp.argmin"):
        b.add(f"{op}({{0}}, axis={axes[0]}, keepdims={keep})", [x], bound=n, err=0, exact=True)
        return
    if op == "jnp.prod":
        if n > 4:
            return
        bound = max(x.bound, 1.0) ** n
        err = n * x.err * max(x.bound, 1.0) ** (n - 1) + rounding(x.dtype, bound, n)
    elif op == "jnp.sum":
        bound = n * x.bound
        err = n * x.err + rounding(x.dtype, bound, n)
    elif op == "jnp.mean":
        bound = x.bound
        err = x.err + rounding(x.dtype, bound, n + 1)
    else:
        bound, err = x.bound, x.err
    out = b.add(
        f"{op}({{0}}, {kw})", [x], bound=bound, err=err, exact=x.exact and op in ("jnp.max", "jnp.min")
    )
    if out is not None and is_int(out.dtype):
        pass


@family("cumulative", 2)
def _cumulative(b: Builder):
    x = b.pick(lambda v: len(v.shape) > 0 and v.dtype != BOOL)
    if x is None:
        return
    axis = b.draw(st.integers(0, len(x.shape) - 1))
    n = x.shape[axis]
    op = b.draw(st.sampled_from(["jnp.cumsum", "lax.cummax", "lax.cummin", "jnp.cumprod"]))
    if op == "jnp.cumprod" and n > 4:
        op = "jnp.cumsum"
    rev = ", reverse=True" if op.startswith("lax") and b.draw(st.booleans()) else ""
    if op == "jnp.cumsum":
        bound, err, exact = (
            n * x.bound,
            n * x.err + rounding(x.dtype, n * x.bound, n),
            x.exact and not is_float(x.dtype),
        )
    elif op == "jnp.cumprod":
        bm = max(x.bound, 1.0)
        bound = bm**n
        err, exact = n * x.err * bm ** (n - 1) + rounding(x.dtype, bound, n), not is_float(x.dtype)
    else:
        bound, err, exact = x.bound, x.err, x.exact
    b.add(f"{op}({{0}}, axis={axis}{rev})", [x], bound=bound, err=err, exact=exact)


def _same(b: Builder, x: Value, expr: str, operands=None):
    return b.add(expr, operands or [x], bound=x.bound, err=x.err, exact=x.exact)


@family("shape", 6)
def _shape(b: Builder):
    x = b.pick()
    if x is None:
        return
    r = len(x.shape)
    choice = b.draw(
        st.sampled_from(
            [
                "reshape",
                "transpose",
                "broadcast",
                "expand",
                "slice",
                "flip",
                "roll",
                "pad",
                "concat",
                "squeeze",
                "tile",
                "dynamic_slice",
            ]
        )
    )
    if choice == "reshape":
        dims, rest = [], x.size
        if rest == 0:
            _same(b, x, f"jnp.reshape({{0}}, {tuple(reversed(x.shape))})" if r else "jnp.reshape({0}, (1,))")
            return
        for f in (2, 3, 2, 5):
            if rest % f == 0 and b.draw(st.booleans()):
                dims.append(f)
                rest //= f
        dims.append(rest)
        perm = b.draw(st.permutations(dims))
        _same(b, x, f"jnp.reshape({{0}}, {tuple(perm)})")
    elif choice == "transpose" and r >= 2:
        _same(b, x, f"jnp.transpose({{0}}, {tuple(b.draw(st.permutations(range(r))))})")
    elif choice == "broadcast" and r <= 3:
        shape = (b.draw(st.integers(1, 3)), *x.shape)
        _same(b, x, f"jnp.broadcast_to({{0}}, {shape})")
    elif choice == "expand" and r <= 3:
        _same(b, x, f"jnp.expand_dims({{0}}, {b.draw(st.integers(-r - 1, r))})")
    elif choice == "squeeze" and 1 in x.shape:
        _same(b, x, f"jnp.squeeze({{0}}, axis={x.shape.index(1)})")
    elif choice == "slice" and r >= 1:
        start, limit, strides = [], [], []
        for d in x.shape:
            s = b.draw(st.integers(0, d))
            e = b.draw(st.integers(s, d))
            start.append(s), limit.append(e), strides.append(b.draw(st.integers(1, 2)))
        _same(b, x, f"lax.slice({{0}}, {tuple(start)}, {tuple(limit)}, {tuple(strides)})")
    elif choice == "dynamic_slice" and r >= 1:
        idx = b.pick(lambda v: is_int(v.dtype) and v.shape == ())
        sizes = tuple(b.draw(st.integers(0, d)) for d in x.shape)
        starts = ", ".join(
            "{1}.astype(int)" if (idx is not None and i == 0) else str(b.draw(st.integers(-1, d + 1)))
            for i, d in enumerate(x.shape)
        )
        ops = [x, idx] if idx is not None else [x]
        _same(b, x, f"lax.dynamic_slice({{0}}, ({starts},), {sizes})", ops)
    elif choice == "flip" and r >= 1:
        _same(b, x, f"jnp.flip({{0}}, axis={_axes(b, r)})")
    elif choice == "roll" and r >= 1:
        _same(b, x, f"jnp.roll({{0}}, {b.draw(st.integers(-3, 3))}, axis={b.draw(st.integers(0, r - 1))})")
    elif choice == "tile" and r >= 1:
        reps = tuple(b.draw(st.integers(1, 2)) for _ in range(r))
        _same(b, x, f"jnp.tile({{0}}, {reps})")
    elif choice == "pad" and r >= 1:
        cfg = tuple(
            (
                b.draw(st.integers(-1 if d > 1 else 0, 2)),
                b.draw(st.integers(-1 if d > 1 else 0, 2)),
                b.draw(st.integers(0, 1)),
            )
            for d in x.shape
        )
        pv = "False" if x.dtype == BOOL else ("1" if is_int(x.dtype) else "-1.5")
        _same(b, x, f"lax.pad({{0}}, jnp.array({pv}, {{0}}.dtype), {cfg})")
    elif choice == "concat" and r >= 1:
        axis = b.draw(st.integers(0, r - 1))
        y = b.pick(
            lambda v: (
                v.dtype == x.dtype
                and len(v.shape) == r
                and all(a == c for i, (a, c) in enumerate(zip(v.shape, x.shape, strict=True)) if i != axis)
            )
        )
        if y is None:
            shape = list(x.shape)
            shape[axis] = b.draw(st.integers(1, 3))
            y = new_input(b, shape, x.dtype)
        b.add(
            f"jnp.concatenate([{{0}}, {{1}}], axis={axis})",
            [x, y],
            bound=max(x.bound, y.bound),
            err=max(x.err, y.err),
            exact=x.exact and y.exact,
        )


@family("gather", 3)
def _gather(b: Builder):
    x = b.pick(lambda v: len(v.shape) > 0 and v.size > 0)
    if x is None:
        return
    axis = b.draw(st.integers(0, len(x.shape) - 1))
    n = x.shape[axis]
    kind = b.draw(st.sampled_from(["take", "take_pool", "index", "take_along"]))
    if kind == "take":
        idx = b.draw(st.lists(st.integers(-n - 1, n + 1), min_size=1, max_size=5))
        mode = b.draw(st.sampled_from(["clip", "fill", "wrap"]))
        _same(b, x, f"jnp.take({{0}}, jnp.array({idx}), axis={axis}, mode={mode!r})")
    elif kind == "take_pool":
        idx = b.pick(lambda v: is_int(v.dtype) and len(v.shape) <= 2)
        if idx is None:
            return
        mode = b.draw(st.sampled_from(["clip", "fill"]))
        _same(b, x, f"jnp.take({{0}}, {{1}}, axis={axis}, mode={mode!r})", [x, idx])
    elif kind == "index":
        idx = b.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4))
        _same(b, x, f"{{0}}[{'' if axis == 0 else ':, ' * axis}jnp.array({idx})]")
    else:
        shape = list(x.shape)
        shape[axis] = b.draw(st.integers(1, 4))
        rng = np.random.default_rng(b.draw(st.integers(0, 2**16)))
        idx = rng.integers(0, n, shape).tolist()
        _same(b, x, f"jnp.take_along_axis({{0}}, jnp.array({idx}), axis={axis})")


@family("scatter", 3)
def _scatter(b: Builder):
    x = b.pick(lambda v: len(v.shape) > 0 and v.size > 0 and v.dtype != BOOL)
    if x is None:
        return
    n = x.shape[0]
    op = b.draw(st.sampled_from(["set", "add", "max", "min", "mul"]))
    if op == "set":
        idx = b.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    else:
        idx = b.draw(st.lists(st.integers(-n, n + 1), min_size=1, max_size=5))
    mode = b.draw(st.sampled_from(["drop", "clip"])) if op != "set" else "drop"
    if op != "set" and mode == "clip":
        pass
    upd_shape = (len(idx), *x.shape[1:])
    if b.draw(st.booleans()) and len(upd_shape) > 1:
        upd_shape = upd_shape[-1:] if b.draw(st.booleans()) else (1, *upd_shape[1:])
    y = b.pick(lambda v: v.dtype == x.dtype and v.shape == upd_shape)
    if y is None:
        y = new_input(b, upd_shape, x.dtype)
    k = len(idx)
    if op == "add":
        bound, err = x.bound + k * y.bound, x.err + k * y.err + rounding(x.dtype, x.bound + k * y.bound, k)
    elif op == "mul":
        if k > 2:
            return
        bound = x.bound * max(y.bound, 1) ** k
        err = (x.err + y.err * x.bound) * max(y.bound, 1) ** k + rounding(x.dtype, bound, k)
    else:
        bound, err = max(x.bound, y.bound), max(x.err, y.err)
    exact = x.exact and y.exact and (op in ("set", "max", "min") or not is_float(x.dtype))
    b.add(f"{{0}}.at[jnp.array({idx})].{op}({{1}}, mode={mode!r})", [x, y], bound=bound, err=err, exact=exact)


@family("sort", 2)
def _sort(b: Builder):
    x = b.pick(lambda v: len(v.shape) > 0 and not v.nonfinite and v.dtype != BOOL)
    if x is None:
        return
    axis = b.draw(st.integers(-1, len(x.shape) - 1))
    choices = ["sort", "sort_desc"] + (["argsort", "top_k", "top_k_idx"] if x.exact else ["top_k"])
    kind = b.draw(st.sampled_from(choices))
    if kind == "sort":
        _same(b, x, f"jnp.sort({{0}}, axis={axis})")
    elif kind == "sort_desc":
        _same(b, x, f"jnp.sort({{0}}, axis={axis}, descending=True)")
    elif kind == "argsort":
        b.add(f"jnp.argsort({{0}}, axis={axis}, stable=True)", [x], bound=x.shape[axis], err=0, exact=True)
    else:
        k = b.draw(st.integers(0 if x.shape[-1] == 0 else 1, x.shape[-1]))
        if kind == "top_k":
            _same(b, x, f"lax.top_k({{0}}, {k})[0]")
        else:
            b.add(f"lax.top_k({{0}}, {k})[1]", [x], bound=x.shape[-1], err=0, exact=True)


@family("matmul", 3)
def _matmul(b: Builder):
    x = b.pick(lambda v: len(v.shape) >= 1 and v.dtype != BOOL)
    if x is None:
        return
    k = x.shape[-1]
    if len(x.shape) == 1 or b.draw(st.booleans()):
        shape = (k, b.draw(st.integers(1, 4)))
    else:
        shape = (*x.shape[:-2][-1:], k, b.draw(st.integers(1, 4)))
    y = b.pick(lambda v: v.dtype == x.dtype and v.shape == shape)
    if y is None:
        y = new_input(b, shape, x.dtype)
    bound = max(k, 1) * x.bound * y.bound
    err = k * (x.err * y.bound + y.err * x.bound) + rounding(x.dtype, bound, k + 1)
    expr = "jnp.matmul({0}, {1})"
    if len(x.shape) == 2 and len(shape) == 2 and b.draw(st.booleans()):
        expr = "jnp.einsum('ij,jk->ik', {0}, {1})"
    b.add(expr, [x, y], bound=bound, err=err, exact=not is_float(x.dtype))


@family("misc", 4)
def _misc(b: Builder):
    """softmax, logsumexp, var, triangles, diagonals, repeat, one_hot, searchsorted, shifts,
    population count, float remainders, descending argsort, batched einsum, iota offsets."""
    x = b.pick(lambda v: v.dtype != BOOL)
    if x is None:
        return
    r, fl = len(x.shape), is_float(x.dtype)
    kinds = ["iota", "repeat"]
    if fl and r >= 1 and x.size:
        kinds += ["softmax", "logsumexp", "var"]
    if r >= 2:
        kinds += ["tri", "diagonal"]
    if is_int(x.dtype):
        kinds += ["one_hot", "shift", "popcount"]
    if x.exact and not x.nonfinite and r >= 1 and x.size:
        kinds += ["searchsorted", "argsort_desc"] + (["fmod"] if fl else [])
    if r == 3 and fl:
        kinds += ["bmm"]
    kind = b.draw(st.sampled_from(kinds))
    axis = b.draw(st.integers(-r, r - 1)) if r else 0
    if kind == "iota":
        if not r:
            return
        b.add(
            "{0} + jnp.arange({0}.shape[-1], dtype={0}.dtype)",
            [x],
            bound=x.bound + x.shape[-1],
            err=x.err + rounding(x.dtype, x.bound + x.shape[-1]),
            exact=not fl,
        )
    elif kind == "repeat":
        if not r:
            return
        _same(b, x, f"jnp.repeat({{0}}, {b.draw(st.integers(1, 3))}, axis={axis})")
    elif kind == "softmax":
        expr = b.draw(st.sampled_from(["jax.nn.softmax", "jax.nn.log_softmax"]))
        n = x.shape[axis]
        bound = 1.0 if expr == "jax.nn.softmax" else 2 * x.bound + math.log(n) + 1
        b.add(
            f"{expr}({{0}}, axis={axis})",
            [x],
            bound=bound,
            err=2 * x.err + rounding(x.dtype, bound, TRANS * n),
            exact=False,
        )
    elif kind == "logsumexp":
        n = x.shape[axis]
        bound = x.bound + math.log(n) + 1
        b.add(
            f"jax.nn.logsumexp({{0}}, axis={axis})",
            [x],
            bound=bound,
            err=x.err + rounding(x.dtype, bound, TRANS * n),
            exact=False,
        )
    elif kind == "var":
        n = x.shape[axis]
        bound = 4 * x.bound**2
        b.add(
            f"jnp.var({{0}}, axis={axis})",
            [x],
            bound=bound,
            err=4 * x.bound * x.err + rounding(x.dtype, bound, 2 * n + 2),
            exact=False,
        )
    elif kind == "tri":
        fn = b.draw(st.sampled_from(["jnp.triu", "jnp.tril"]))
        _same(b, x, f"{fn}({{0}}, {b.draw(st.integers(-1, 1))})")
    elif kind == "diagonal":
        _same(b, x, f"jnp.diagonal({{0}}, {b.draw(st.integers(-1, 1))}, axis1=0, axis2=1)")
    elif kind == "one_hot":
        b.add("jax.nn.one_hot({0}, 5)", [x], bound=1, err=0, exact=True)
    elif kind == "shift":
        y = _partner(b, x, True)
        bits = x.dtype.itemsize * 8
        op = b.draw(st.sampled_from(["<<", ">>"]))
        # shifting by the bit width or more is implementation-defined in C; StableHLO defines
        # it, but keep to [0, bits - 1] like every lowering does
        b.add(
            f"{{0}} {op} ({{1}} & {bits - 1})", [x, y], bound=float(np.iinfo(x.dtype).max), err=0, exact=True
        )
    elif kind == "popcount":
        b.add("lax.population_count({0})", [x], bound=64, err=0, exact=True)
    elif kind == "searchsorted":
        side = b.draw(st.sampled_from(["left", "right"]))
        y = b.pick(lambda v: v.dtype == x.dtype and v.exact and not v.nonfinite)
        b.add(
            f"jnp.searchsorted(jnp.sort({{0}}.ravel()), {{1}}, side={side!r})",
            [x, y],
            bound=x.size,
            err=0,
            exact=True,
        )
    elif kind == "argsort_desc":
        b.add(
            f"jnp.argsort({{0}}, axis={axis}, descending=True, stable=True)",
            [x],
            bound=x.shape[axis],
            err=0,
            exact=True,
        )
    elif kind == "fmod":
        expr = b.draw(st.sampled_from(["jnp.remainder({0}, 1.5)", "jnp.fmod({0}, 1.5)", "{0} // 1.5"]))
        bound = x.bound if "//" in expr else 1.5
        b.add(expr, [x], bound=bound, err=rounding(x.dtype, bound, 2), exact=False)
    elif kind == "bmm":
        bsz, _, k = x.shape
        y = b.pick(lambda v: v.dtype == x.dtype and len(v.shape) == 3 and v.shape[:2] == (bsz, k))
        if y is None:
            y = new_input(b, (bsz, k, b.draw(st.integers(1, 3))), x.dtype)
        bound = max(k, 1) * x.bound * y.bound
        err = k * (x.err * y.bound + y.err * x.bound) + rounding(x.dtype, bound, k + 1)
        b.add("jnp.einsum('bij,bjk->bik', {0}, {1})", [x, y], bound=bound, err=err, exact=False)


@family("window", 2)
def _window(b: Builder):
    """Convolutions (``lax.conv_general_dilated``, NC... layout, strides, padding, dilations,
    feature groups) and pools (``lax.reduce_window`` max/min/add)."""
    x = b.pick(lambda v: len(v.shape) in (3, 4) and is_float(v.dtype) and v.size > 0)
    if x is None:
        return
    nsp = len(x.shape) - 2
    spatial = x.shape[2:]
    win = tuple(b.draw(st.integers(1, min(3, s))) for s in spatial)
    strides = tuple(b.draw(st.integers(1, 2)) for _ in spatial)
    pads = tuple((b.draw(st.integers(0, 1)), b.draw(st.integers(0, 1))) for _ in spatial)
    if b.draw(st.booleans()):
        cin = x.shape[1]
        groups = cin if cin > 1 and b.draw(st.booleans()) else 1
        cout = groups * b.draw(st.integers(1, 2))
        dil = tuple(
            b.draw(st.integers(1, 2)) if w * 2 - 1 <= s else 1 for w, s in zip(win, spatial, strict=True)
        )
        w = new_input(b, (cout, cin // groups, *win), x.dtype)
        k = cin // groups * math.prod(win)
        bound = k * x.bound * w.bound
        err = k * (x.err * w.bound + w.err * x.bound) + rounding(x.dtype, bound, k + 1)
        b.add(
            f"lax.conv_general_dilated({{0}}, {{1}}, {strides}, {list(pads)}, rhs_dilation={dil}, "
            f"feature_group_count={groups})",
            [x, w],
            bound=bound,
            err=err,
            exact=False,
        )
        return
    op = b.draw(st.sampled_from(["max", "min", "add"]))
    init = {"max": "-jnp.inf", "min": "jnp.inf", "add": "0.0"}[op]
    n = math.prod(win)
    bound = x.bound * (n if op == "add" else 1)
    err = x.err * (n if op == "add" else 1) + (rounding(x.dtype, bound, n) if op == "add" else 0.0)
    b.add(
        f"lax.reduce_window({{0}}, jnp.array({init}, {{0}}.dtype), lax.{op}, (1, 1, *{win}), "
        f"(1, 1, *{strides}), ((0, 0), (0, 0), *{pads}))",
        [x],
        bound=bound,
        err=err,
        exact=x.exact and op != "add",
    )
    del nsp


@family("control", 2)
def _control(b: Builder):
    x = b.pick(lambda v: is_float(v.dtype))
    if x is None:
        return
    kind = b.draw(st.sampled_from(["cond", "fori", "while", "scan"]))
    if kind == "cond":
        p = b.pick(lambda v: v.exact and not v.nonfinite and v.dtype != BOOL or v.dtype == BOOL)
        if p is None:
            return
        pred = "jnp.any({1})" if p.dtype == BOOL else "jnp.sum({1}) > 0"
        b.add(
            f"lax.cond({pred}, lambda a: jnp.sin(a) * 2, lambda a: a - 1, {{0}})",
            [x, p],
            bound=max(2.0, x.bound + 1),
            err=x.err + rounding(x.dtype, x.bound + 1, TRANS),
            exact=False,
        )
    elif kind == "fori":
        n = b.draw(st.integers(0, 4))
        b.add(
            f"lax.fori_loop(0, {n}, lambda i, c: jnp.tanh(c) + i.astype(c.dtype), {{0}})",
            [x],
            bound=max(x.bound, n + 1.0),
            err=x.err + n * rounding(x.dtype, n + 1.0, TRANS),
            exact=n == 0 and x.exact,
        )
    elif kind == "while":
        b.add(
            "lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 0.5 + 1), (0, {0}))[1]",
            [x],
            bound=x.bound + 2,
            err=x.err + rounding(x.dtype, x.bound + 2, 6),
            exact=False,
        )
    elif len(x.shape) >= 1:
        n = x.shape[0]
        b.add(
            "lax.scan(lambda c, r: (c * 0.5 + r, jnp.sin(c)), jnp.zeros_like({0}[0]), {0})[1]",
            [x],
            bound=2.0,
            err=2 * x.err + rounding(x.dtype, 2 * x.bound, TRANS * n),
            exact=False,
        )


# --------------------------------------------------------------------------- the strategy


@st.composite
def shapes(draw, allow_empty: bool) -> tuple[int, ...]:
    rank = draw(st.integers(0, 3))
    lo = 0 if allow_empty else 1
    return tuple(draw(st.integers(lo, 4)) for _ in range(rank))


@st.composite
def programs(
    draw, max_steps: int = 6, families: tuple[str, ...] | None = None, specials: bool | None = None
) -> Program:
    """A random well-typed program (see the module docstring): up to ``max_steps`` steps
    from ``families`` (default all); ``specials`` (default: one program in ten) puts inf and
    NaN in the float inputs."""
    if specials is None:
        specials = draw(st.integers(0, 9)) == 0
    allow_empty = draw(st.integers(0, 14)) == 0
    prog = Program(inputs=[], seed=draw(st.integers(0, 2**32 - 1)), specials=specials)
    b = Builder(draw, prog)
    for _ in range(draw(st.integers(1, 2))):
        new_input(b, draw(shapes(allow_empty)), draw(st.sampled_from(DTYPES)))
    names = sorted(families or FAMILIES)
    weights = [FAMILIES[n][1] for n in names]
    choices = [n for n, w in zip(names, weights, strict=True) for _ in range(w)]
    n_steps = draw(st.integers(1, max_steps))
    for _ in range(n_steps * 3):
        if len(prog.steps) >= n_steps:
            break
        FAMILIES[draw(st.sampled_from(choices))][0](b)
    if not prog.steps:
        _unary(b) if b.pool[-1].dtype != BOOL else _binary(b)
    if not prog.steps:
        b.add("{0}", [b.pool[-1]], bound=b.pool[-1].bound, err=0, exact=True)
    outs = [prog.steps[-1][0]]
    others = [v for v, _ in prog.steps[:-1]]
    if others and draw(st.booleans()):
        outs.append(others[draw(st.integers(0, len(others) - 1))])
    prog.outputs = outs
    # inputs added mid-program are renumbered to come first in the signature
    return _renumber(prog)


def _renumber(prog: Program) -> Program:
    """Rename values so inputs are v0..vk and steps follow, in order."""
    import re

    mapping = {}
    for i, v in enumerate(prog.inputs):
        mapping[v.name] = f"a{i}"
    for i, (v, _) in enumerate(prog.steps):
        mapping[v.name] = f"v{i}"

    def sub(text):
        return re.sub(r"\bv(\d+)\b", lambda m: mapping.get(m.group(0), m.group(0)), text)

    steps = []
    for v, expr in prog.steps:
        steps.append((v, sub(expr)))
    for v in prog.inputs:
        v.name = mapping[v.name]
    for v, _ in prog.steps:
        v.name = mapping[v.name]
    prog.steps = steps
    return prog
