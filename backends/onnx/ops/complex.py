"""Complex values as real pairs: StableHLO ops on complex tensors → ONNX on float tensors.

ONNX arithmetic operators take no complex types and onnxruntime cannot load a complex
tensor, so a complex value of shape ``S`` travels as a float tensor of shape ``S + [2]``
(complex64 → float32, complex128 → float64; real part at index 0 of the last axis, imaginary
part at index 1: ``torch.view_as_real``'s layout, the convention of torch.onnx's exporter).

The interpreter (:meth:`converter.backends.onnx.OnnxInterpreter.dispatch_key`) sends every op with a
complex operand or result to the rule registered under :func:`complex_key` of its name, so
an op without a real-pair rule is reported by ``check_supported`` with every other missing
op, as ``stablehlo.xxx[complex]``. Rules receive complex operands as real-pair value names
and return complex results the same way.

- Data movement (reshape, transpose, broadcast_in_dim, slice, concatenate, pad, reverse,
  gather, dynamic_slice, dynamic_update_slice, select, reduce with an ``add`` body, scatter
  that adds or overwrites) runs the ordinary real rule twice, on the real parts and on the
  imaginary parts (:func:`componentwise`), through a :class:`ComponentView` of the op whose
  complex types read as their real component type.
- Arithmetic follows XLA's CPU results: ``multiply`` is the textbook product (complex64 in
  float64), ``divide`` is
  Smith's algorithm with C99 Annex G's recovery of infinite and zero divisors, ``abs`` is a
  scaled hypot (no overflow; NaN when a part is NaN, as XLA), ``sqrt`` the half-angle form,
  ``log``'s real part is accurate near ``|z| = 1`` (float64 squares for complex64), ``sign`` is
  ``z / |z|`` (``z`` itself at zero), ``dot_general`` is four real contractions.
- ``fft`` uses ONNX ``DFT`` (opset 17's attribute form up to opset 19, opset 20's input form
  after), one transform per axis; ``IRFFT`` rebuilds the Hermitian half it is not given.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from converter import dtypes, mlir
from converter.regions import classify_combiner

from ..graph import RetypedOp
from ..realpairs import to_pairs
from ..registry import ONNX_RULES, register
from .linalg import dot_general

#: Ops handled the same whatever their element types: the walker's own (calls, tuples,
#: region terminators) pass values through untouched.
PASS_THROUGH = {
    "func.call",
    "func.return",
    "stablehlo.return",
    "stablehlo.tuple",
    "stablehlo.get_tuple_element",
}

COMPONENT = {"complex64": "float32", "complex128": "float64"}


def complex_key(key: str) -> str:
    """The registry key of the real-pair rule for ops ``key`` on complex values."""
    return f"{key}[complex]"


def touches_complex(op: mlir.Op) -> bool:
    """True when a ranked tensor operand or result of ``op`` is complex."""
    return any(_is_complex(v) for v in (*op.operands, *op.results))


def _is_complex(value) -> bool:
    try:
        return dtypes.is_complex(mlir.tensor_type(value.type).dtype)
    except TypeError:  # tokens, tuples
        return False


def pair_type(t: mlir.TensorType) -> mlir.TensorType:
    """The real-pair type carrying a complex tensor type ``t`` (other types unchanged)."""
    if t.dtype not in COMPONENT:
        return t
    return mlir.TensorType((*t.shape, 2), COMPONENT[t.dtype])


def register_complex(*names: str, dynamic: bool = True) -> Callable:
    """Decorator: register a real-pair rule for the ops ``names`` on complex values."""
    return register(*(complex_key(n) for n in names), dynamic=dynamic)


# --------------------------------------------------------------------------- pairs


def part(g, x: str, k: int) -> str:
    """Component ``k`` (0 real, 1 imaginary) of the real-pair value ``x``: shape ``S``."""
    return g.op("Gather", [x, g.const(np.int64(k))], axis=-1)


def pair(g, re: str, im: str) -> str:
    """The real-pair value with real part ``re`` and imaginary part ``im`` (shape ``S``)."""
    axis = g.ints([-1])
    return g.op("Concat", [g.op("Unsqueeze", [re, axis]), g.op("Unsqueeze", [im, axis])], axis=-1)


def _parts(g, x: str) -> tuple[str, str]:
    return part(g, x, 0), part(g, x, 1)


def _c(g, value: float, dtype: str) -> str:
    return g.const(np.asarray(value, dtypes.to_numpy(dtype)))


class ComponentView(RetypedOp):
    """A view of an :class:`converter.mlir.Op` whose complex operand and result types read as
    their component type (complex64 → float32); ``component`` says which part (0 real, 1
    imaginary) the rule computes, so :meth:`converter.backends.onnx.OnnxInterpreter.static_operand`
    folds complex constants to that part."""

    def __init__(self, op: mlir.Op, component: int):
        super().__init__(op)
        self.component = component

    def retype(self, t: mlir.TensorType) -> mlir.TensorType:
        return mlir.TensorType(t.shape, COMPONENT.get(t.dtype, t.dtype))

    def __repr__(self) -> str:
        return f"Component{self.component}({self._op!r})"


class _Typed:
    """A stand-in op carrying only a result type, for reusing real rules on components."""

    def __init__(self, shape, dtype: str):
        self.result_type = mlir.TensorType(tuple(shape), dtype)
        self.result_types = [self.result_type]


def _real_rule(name: str) -> Callable:
    rule = ONNX_RULES.get(name)
    if rule is None:
        raise NotImplementedError(f"{name} has no ONNX rule")
    return rule


def componentwise(interp, op, *xs) -> list[str]:
    """Run ``op``'s real rule on the real parts, then on the imaginary parts, of its complex
    operands (others given as they are to both) and pair the complex results."""
    rule = _real_rule(op.name)
    runs = []
    for k in (0, 1):
        g = interp.graph
        ins = [part(g, x, k) if _is_complex(v) else x for v, x in zip(op.operands, xs, strict=True)]
        out = rule(interp, ComponentView(op, k), *ins)
        runs.append(list(out) if isinstance(out, (list, tuple)) else [out])
    g = interp.graph
    return [
        pair(g, re, im) if _is_complex(v) else re
        for v, re, im in zip(op.results, runs[0], runs[1], strict=True)
    ]


_MOVES = (
    "stablehlo.broadcast_in_dim",
    "stablehlo.reshape",
    "stablehlo.transpose",
    "stablehlo.slice",
    "stablehlo.concatenate",
    "stablehlo.pad",
    "stablehlo.reverse",
    "stablehlo.dynamic_slice",
    "stablehlo.gather",
    "stablehlo.optimization_barrier",
)
for _name in _MOVES:
    register_complex(_name)(componentwise)
register_complex("stablehlo.dynamic_update_slice", dynamic=False)(componentwise)


@register_complex("stablehlo.scatter", dynamic=False)
def _scatter(interp, op, *xs):
    """A one-operand scatter that overwrites or adds, per component."""
    kind = classify_combiner(op.regions[0]) if len(xs) == 3 else None
    if kind not in ("replace", "add"):
        raise NotImplementedError(f"scatter with a {kind or 'general'} body on complex values")
    return componentwise(interp, op, *xs)


# --------------------------------------------------------------------------- structure


@register_complex("stablehlo.constant")
def _constant(interp, op):
    return interp.graph.const(to_pairs(op.attr("value")), hint="const")


@register_complex("stablehlo.real")
def _real(interp, op, x):
    return part(interp.graph, x, 0)


@register_complex("stablehlo.imag")
def _imag(interp, op, x):
    return part(interp.graph, x, 1)


@register_complex("stablehlo.complex")
def _complex(interp, op, re, im):
    return pair(interp.graph, re, im)


@register_complex("stablehlo.add")
def _add(interp, op, x, y):
    return interp.graph.op("Add", [x, y])


@register_complex("stablehlo.subtract")
def _subtract(interp, op, x, y):
    return interp.graph.op("Sub", [x, y])


@register_complex("stablehlo.negate")
def _negate(interp, op, x):
    return interp.graph.op("Neg", [x])


@register_complex("stablehlo.select")
def _select(interp, op, pred, on_true, on_false):
    g = interp.graph
    return g.op("Where", [g.op("Unsqueeze", [pred, g.ints([-1])]), on_true, on_false])


@register_complex("stablehlo.convert")
def _convert(interp, op, x):
    """complex → complex: both parts cast; real → complex: imaginary part 0; complex →
    float or integer: the real part, as XLA converts; complex → bool: the spec's nonzero test
    (true when either part is nonzero, NaN included)."""
    g = interp.graph
    src, dst = op.operand_type(0).dtype, op.result_type.dtype
    if src in COMPONENT and dst in COMPONENT:
        return g.cast(x, COMPONENT[dst]) if src != dst else x
    if dst in COMPONENT:
        re = g.cast(x, COMPONENT[dst])
        zero = g.op("ConstantOfShape", [g.op("Shape", [re])], value=_zero_tensor(COMPONENT[dst]))
        return pair(g, re, zero)
    if dst == "bool":
        zero = g.const(0, COMPONENT[src])
        return g.op("Or", [g.op("Not", [g.op("Equal", [part(g, x, i), zero])]) for i in (0, 1)])
    return g.cast(part(g, x, 0), dst)


def _zero_tensor(dtype: str):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.zeros([1], dtypes.to_numpy(dtype)))


@register_complex("stablehlo.compare")
def _compare(interp, op, x, y):
    """EQ: both parts equal; NE: either part differs (StableHLO spec: compare on complex
    takes only EQ and NE)."""
    g = interp.graph
    direction = op.attr("comparison_direction")
    if direction not in ("EQ", "NE"):
        raise NotImplementedError(f"compare {direction} on complex values")
    xr, xi = _parts(g, x)
    yr, yi = _parts(g, y)
    both = g.op("And", [g.op("Equal", [xr, yr]), g.op("Equal", [xi, yi])])
    return both if direction == "EQ" else g.op("Not", [both])


# --------------------------------------------------------------------------- arithmetic


def _component_dtype(op) -> str:
    return COMPONENT[next(t.dtype for t in (*op.result_types, op.operand_type(0)) if t.dtype in COMPONENT)]


def _mul_parts(g, ar, ai, br, bi) -> tuple[str, str]:
    """``(ar + i ai) * (br + i bi)`` by the textbook formula (what XLA's CPU backend emits)."""
    re = g.op("Sub", [g.op("Mul", [ar, br]), g.op("Mul", [ai, bi])])
    im = g.op("Add", [g.op("Mul", [ar, bi]), g.op("Mul", [ai, br])])
    return re, im


@register_complex("stablehlo.multiply")
def _multiply(interp, op, x, y):
    """The textbook product; complex64 computes it in float64, where the four products are
    exact and each part is rounded once (XLA fuses one product of each part with FMA, so
    float32 arithmetic would differ from it where the parts cancel)."""
    g = interp.graph
    narrow = _component_dtype(op) == "float32"
    if narrow:
        x, y = g.cast(x, "float64"), g.cast(y, "float64")
    out = pair(g, *_mul_parts(g, *_parts(g, x), *_parts(g, y)))
    return g.cast(out, "float32") if narrow else out


def _isinf(g, x):
    return g.op("IsInf", [x])


def _isnan(g, x):
    return g.op("IsNaN", [x])


def _unit_sign(g, x, dt, test) -> str:
    """``copysign(test ? 1 : 0, x)``: C99 Annex G's boxing of an infinite part."""
    one = g.op("Where", [test, _c(g, 1, dt), _c(g, 0, dt)])
    return _copysign(g, one, x, dt)


def _copysign(g, magnitude, x, dt) -> str:
    """``magnitude`` (non-negative) with the sign bit of ``x`` (-0.0 counts as negative)."""
    neg = g.op(
        "Or", [g.op("Less", [x, _c(g, 0, dt)]), g.op("Less", [g.op("Div", [_c(g, 1, dt), x]), _c(g, 0, dt)])]
    )
    return g.op("Where", [neg, g.op("Neg", [magnitude]), magnitude])


@register_complex("stablehlo.divide")
def _divide(interp, op, x, y):
    """Smith's algorithm (R. L. Smith, ACM Algorithm 116): the divisor's larger part is
    divided out first, so no intermediate overflows or underflows needlessly; then C99
    Annex G (``_Cdivd``)'s recovery: a zero divisor gives ``copysign(inf, c) * (a, b)``,
    an infinite dividend over a finite divisor infinite parts, a finite dividend over an
    infinite divisor zeros (XLA's CPU results, checked in tests)."""
    g = interp.graph
    dt = _component_dtype(op)
    a, b = _parts(g, x)
    c, d = _parts(g, y)
    wide = g.op("GreaterOrEqual", [g.op("Abs", [c]), g.op("Abs", [d])])
    # |c| >= |d|: r = d/c, den = c + d r, (a + b r, b - a r) / den; else r = c/d, den = d + c r,
    # (a r + b, b r - a) / den
    r = g.op("Where", [wide, g.op("Div", [d, c]), g.op("Div", [c, d])])
    den = g.op("Where", [wide, g.op("Add", [c, g.op("Mul", [d, r])]), g.op("Add", [d, g.op("Mul", [c, r])])])
    ar, br = g.op("Mul", [a, r]), g.op("Mul", [b, r])
    re = g.op("Div", [g.op("Where", [wide, g.op("Add", [a, br]), g.op("Add", [ar, b])]), den])
    im = g.op("Div", [g.op("Where", [wide, g.op("Sub", [b, ar]), g.op("Sub", [br, a])]), den])
    inf = _c(g, np.inf, dt)
    finite = lambda v: g.op("Not", [g.op("Or", [_isinf(g, v), _isnan(g, v)])])  # noqa: E731
    # a zero divisor and a dividend not all NaN
    zero = g.op("And", [g.op("Equal", [c, _c(g, 0, dt)]), g.op("Equal", [d, _c(g, 0, dt)])])
    zero = g.op("And", [zero, g.op("Not", [g.op("And", [_isnan(g, a), _isnan(g, b)])])])
    sinf = _copysign(g, inf, c, dt)
    re = g.op("Where", [zero, g.op("Mul", [sinf, a]), re])
    im = g.op("Where", [zero, g.op("Mul", [sinf, b]), im])
    # an infinite dividend over a finite divisor
    big = g.op("And", [g.op("Or", [_isinf(g, a), _isinf(g, b)]), g.op("And", [finite(c), finite(d)])])
    a1, b1 = _unit_sign(g, a, dt, _isinf(g, a)), _unit_sign(g, b, dt, _isinf(g, b))
    re = g.op(
        "Where", [big, g.op("Mul", [inf, g.op("Add", [g.op("Mul", [a1, c]), g.op("Mul", [b1, d])])]), re]
    )
    im = g.op(
        "Where", [big, g.op("Mul", [inf, g.op("Sub", [g.op("Mul", [b1, c]), g.op("Mul", [a1, d])])]), im]
    )
    # a finite dividend over an infinite divisor
    small = g.op("And", [g.op("Or", [_isinf(g, c), _isinf(g, d)]), g.op("And", [finite(a), finite(b)])])
    c1, d1 = _unit_sign(g, c, dt, _isinf(g, c)), _unit_sign(g, d, dt, _isinf(g, d))
    zero_c = _c(g, 0, dt)
    re = g.op(
        "Where", [small, g.op("Mul", [zero_c, g.op("Add", [g.op("Mul", [a, c1]), g.op("Mul", [b, d1])])]), re]
    )
    im = g.op(
        "Where", [small, g.op("Mul", [zero_c, g.op("Sub", [g.op("Mul", [b, c1]), g.op("Mul", [a, d1])])]), im]
    )
    return pair(g, re, im)


def _hypot(g, x, y, dt) -> str:
    """``sqrt(x^2 + y^2)`` without overflow: ``max * sqrt(1 + (min/max)^2)``; 0 at 0, inf
    when a part is infinite, NaN when a part is NaN whatever the other (as XLA's CPU abs,
    unlike C99's hypot)."""
    ax, ay = g.op("Abs", [x]), g.op("Abs", [y])
    hi, lo = g.op("Max", [ax, ay]), g.op("Min", [ax, ay])
    q = g.op("Div", [lo, hi])
    r = g.op("Mul", [hi, g.op("Sqrt", [g.op("Add", [_c(g, 1, dt), g.op("Mul", [q, q])])])])
    r = g.op("Where", [g.op("Equal", [hi, _c(g, 0, dt)]), _c(g, 0, dt), r])
    r = g.op("Where", [_isinf(g, lo), _c(g, np.inf, dt), r])
    return g.op("Where", [g.op("Or", [_isnan(g, x), _isnan(g, y)]), _c(g, np.nan, dt), r])


@register_complex("stablehlo.abs")
def _abs(interp, op, x):
    g = interp.graph
    return _hypot(g, *_parts(g, x), op.result_type.dtype)


@register_complex("stablehlo.sign")
def _sign(interp, op, x):
    """``z / |z|``, and ``z`` itself where ``|z|`` is 0 (signed zeros kept), as XLA."""
    g = interp.graph
    dt = _component_dtype(op)
    re, im = _parts(g, x)
    mag = _hypot(g, re, im, dt)
    is_zero = g.op("Equal", [mag, _c(g, 0, dt)])
    mag = g.op("Unsqueeze", [mag, g.ints([-1])])
    return g.op("Where", [g.op("Unsqueeze", [is_zero, g.ints([-1])]), x, g.op("Div", [x, mag])])


@register_complex("stablehlo.exponential")
def _exp(interp, op, x):
    """``exp(a) * (cos b, sin b)``."""
    g = interp.graph
    a, b = _parts(g, x)
    e = g.op("Exp", [a])
    return pair(g, g.op("Mul", [e, g.op("Cos", [b])]), g.op("Mul", [e, g.op("Sin", [b])]))


@register_complex("stablehlo.sqrt")
def _sqrt(interp, op, x):
    """The half-angle form: ``t = sqrt(|a|/2 + |z|/2)``; ``(t, b / 2t)`` when ``a >= 0``,
    else ``(|b| / 2t, ±t)`` with the sign of ``b`` (a zero imaginary part counts as
    positive, as XLA); 0 at 0; ``(inf, b)`` when ``b`` is infinite and ``a`` not NaN."""
    g = interp.graph
    dt = _component_dtype(op)
    a, b = _parts(g, x)
    half = _c(g, 0.5, dt)
    mag = _hypot(g, a, b, dt)
    t = g.op("Sqrt", [g.op("Add", [g.op("Mul", [half, g.op("Abs", [a])]), g.op("Mul", [half, mag])])])
    two_t = g.op("Add", [t, t])
    nonneg = g.op("GreaterOrEqual", [a, _c(g, 0, dt)])
    re = g.op("Where", [nonneg, t, g.op("Div", [g.op("Abs", [b]), two_t])])
    signed_t = g.op("Where", [g.op("Less", [b, _c(g, 0, dt)]), g.op("Neg", [t]), t])
    im = g.op("Where", [nonneg, g.op("Div", [b, two_t]), signed_t])
    zero = g.op("Equal", [mag, _c(g, 0, dt)])
    re = g.op("Where", [zero, _c(g, 0, dt), re])
    im = g.op("Where", [zero, _c(g, 0, dt), im])
    inf_b = g.op("And", [_isinf(g, b), g.op("Not", [_isnan(g, a)])])
    re = g.op("Where", [inf_b, _c(g, np.inf, dt), re])
    im = g.op("Where", [inf_b, b, im])
    return pair(g, re, im)


@register_complex("stablehlo.log")
def _log(interp, op, x):
    """``(log |z|, atan2(b, a))``. complex64: ``log(a^2 + b^2) / 2`` in float64, where the
    squares and their sum are exact or nearly (no overflow, no cancellation near ``|z| = 1``);
    complex128: ``log(max) + log1p((min/max)^2) / 2``. ``-inf`` at 0, ``inf`` when a part is
    infinite, NaN when a part is NaN (XLA: also beside an infinite part)."""
    g = interp.graph
    dt = _component_dtype(op)
    a, b = _parts(g, x)
    shape = op.result_type.shape
    if dt == "float32":
        a64, b64 = g.cast(a, "float64"), g.cast(b, "float64")
        sq = g.op("Add", [g.op("Mul", [a64, a64]), g.op("Mul", [b64, b64])])
        re = g.cast(g.op("Mul", [_c(g, 0.5, "float64"), g.op("Log", [sq])]), "float32")
    else:
        ax, ay = g.op("Abs", [a]), g.op("Abs", [b])
        hi, lo = g.op("Max", [ax, ay]), g.op("Min", [ax, ay])
        q = g.op("Div", [lo, hi])
        log1p = _real_rule("stablehlo.log_plus_one")(interp, _Typed(shape, dt), g.op("Mul", [q, q]))
        g = interp.graph
        re = g.op("Add", [g.op("Log", [hi]), g.op("Mul", [_c(g, 0.5, dt), log1p])])
        re = g.op("Where", [g.op("Equal", [hi, _c(g, 0, dt)]), _c(g, -np.inf, dt), re])
    re = g.op("Where", [g.op("Or", [_isinf(g, a), _isinf(g, b)]), _c(g, np.inf, dt), re])
    re = g.op("Where", [g.op("Or", [_isnan(g, a), _isnan(g, b)]), _c(g, np.nan, dt), re])
    angle = _real_rule("stablehlo.atan2")(interp, _Typed(shape, dt), b, a)
    return pair(interp.graph, re, angle)


# --------------------------------------------------------------------------- contractions


@register_complex("stablehlo.dot_general")
def _dot(interp, op, lhs, rhs):
    """Four real contractions (``(a + ib)(c + id) = ac - bd + i(ad + bc)``; not Gauss's three,
    which lose accuracy); two when one operand is real."""
    g = interp.graph
    views = [ComponentView(op, 0), ComponentView(op, 1)]
    dot = lambda x, y: dot_general(interp, views[0], x, y)  # noqa: E731
    lc, rc = _is_complex(op.operands[0]), _is_complex(op.operands[1])
    a, b = _parts(g, lhs) if lc else (lhs, None)
    c, d = _parts(g, rhs) if rc else (rhs, None)
    if lc and rc:
        re = g.op("Sub", [dot(a, c), dot(b, d)])
        im = g.op("Add", [dot(a, d), dot(b, c)])
    elif lc:
        re, im = dot(a, c), dot(b, c)
    else:
        re, im = dot(a, c), dot(a, d)
    return pair(interp.graph, re, im)


@register_complex("stablehlo.reduce")
def _reduce(interp, op, *args):
    """A one-operand reduce: an ``add`` body sums each component; a ``multiply`` body
    multiplies by halves (:func:`_product`). Other bodies are refused."""
    kind = classify_combiner(op.regions[0]) if len(args) == 2 else None
    if kind == "add":
        return componentwise(interp, op, *args)
    if kind == "mul":
        return _product(interp, op, *args)
    raise NotImplementedError(f"reduce with a {kind or 'general'} body on complex values")


def _product(interp, op, x, init):
    """The complex product over the reduced dimensions: they are moved last and flattened,
    padded with ones to a power of two, and halved ``log2`` times by elementwise complex
    products (a different association than a sequential fold: the same within rounding).

    Raises:
        NotImplementedError: a dynamic shape.
    """
    g = interp.graph
    shape = op.operand_type(0).shape
    if None in shape:
        raise NotImplementedError("complex product reduce on dynamic shapes")
    dims = list(op.attr("dimensions"))
    kept = [i for i in range(len(shape)) if i not in dims]
    n = int(np.prod([shape[i] for i in dims], dtype=np.int64))
    out_shape = [shape[i] for i in kept]
    size = 1 << max(n - 1, 0).bit_length()
    x = g.op("Transpose", [x], perm=[*kept, *dims, len(shape)])
    x = g.op("Reshape", [x, g.ints([*out_shape, n, 2])], allowzero=1)
    dt = _component_dtype(op)
    if size != n:
        rank = len(out_shape) + 1
        pads = g.ints([0] * (2 * rank - 1) + [size - n])  # the high side of the last axis
        re, im = _parts(g, x)
        re = g.op("Pad", [re, pads, _c(g, 1, dt)], mode="constant")
        im = g.op("Pad", [im, pads, _c(g, 0, dt)], mode="constant")
        x = pair(g, re, im)
    axis = len(out_shape)
    while size > 1:
        size //= 2
        lo = g.op("Slice", [x, g.ints([0]), g.ints([size]), g.ints([axis])])
        hi = g.op("Slice", [x, g.ints([size]), g.ints([2 * size]), g.ints([axis])])
        x = pair(g, *_mul_parts(g, *_parts(g, lo), *_parts(g, hi)))
    x = g.op("Squeeze", [x, g.ints([axis])])
    if interp.static_operand(op, 1) is not None and np.all(interp.static_operand(op, 1) == 1):
        return x
    return pair(g, *_mul_parts(g, *_parts(g, x), *_parts(g, init)))


# --------------------------------------------------------------------------- fft

DFT_INPUT_AXIS_OPSET = 20  # ONNX DFT-20 takes the axis as an input, DFT-17 as an attribute
#: Largest length transformed by a DFT matrix (onnxruntime's DFT is accurate only for powers
#: of two: its other lengths lose digits, float64 ones keep float32's; see :func:`_dft`).
MATRIX_DFT_LIMIT = 2048


def _dft(
    interp, x: str, axis: int, n: int, dt: str, rank: int, *, inverse: bool = False, real: bool = False
) -> str:
    """The DFT of length ``n`` along ``axis`` of the real-pair value ``x`` (``rank`` dimensions
    besides the pair axis) (of the real value
    ``x`` when ``real``: then one-sided, ``n // 2 + 1`` outputs); the inverse is scaled by
    ``1/n`` as StableHLO's IFFT. Powers of two use ONNX ``DFT``; other lengths a product
    with the DFT matrix (:func:`_matrix_dft`): onnxruntime's ``DFT`` of such lengths is off
    by 2e-4 relative at n = 1000 in float32 and by 4e-8 (float32's) in float64.

    Raises:
        NotImplementedError: a length over :data:`MATRIX_DFT_LIMIT` that is no power of two.
    """
    if n & (n - 1) == 0:
        g = interp.graph
        if real:
            x = g.op("Unsqueeze", [x, g.ints([-1])])
        flags = {"inverse": int(inverse), "onesided": int(real)}
        if interp.opset >= DFT_INPUT_AXIS_OPSET:
            return g.op("DFT", [x, "", g.const(np.int64(axis))], **flags)
        return g.op("DFT", [x], axis=axis, **flags)
    if n > MATRIX_DFT_LIMIT:
        raise NotImplementedError(
            f"an FFT of length {n}: onnxruntime's DFT is inexact for lengths that are not powers "
            f"of two, and a DFT matrix over {MATRIX_DFT_LIMIT} is too large"
        )
    return _matrix_dft(interp, x, axis, n, dt, rank, inverse=inverse, real=real)


def _matrix_dft(interp, x: str, axis: int, n: int, dt: str, rank: int, *, inverse: bool, real: bool) -> str:
    """``x`` (moved to put ``axis`` last) times the ``n x m`` DFT matrix
    ``exp(∓2πi jk/n)`` (``/n`` for the inverse), whose angles are reduced ``jk mod n``
    and evaluated in float64 before rounding to ``dt``: two real products for a real
    input, four for a complex one."""
    g = interp.graph
    m = n // 2 + 1 if real else n
    jk = np.outer(np.arange(n), np.arange(m)) % n
    w = np.exp((2j if inverse else -2j) * np.pi * jk / n) / (n if inverse else 1)
    wr, wi = g.const(w.real.astype(dtypes.to_numpy(dt))), g.const(w.imag.astype(dtypes.to_numpy(dt)))
    re, im = (x, None) if real else _parts(g, x)
    perm = [d for d in range(rank) if d != axis] + [axis]
    back = [perm.index(d) for d in range(rank)]
    re = g.op("Transpose", [re], perm=perm)
    out_re, out_im = g.op("MatMul", [re, wr]), g.op("MatMul", [re, wi])
    if im is not None:
        im = g.op("Transpose", [im], perm=perm)
        out_re = g.op("Sub", [out_re, g.op("MatMul", [im, wi])])
        out_im = g.op("Add", [out_im, g.op("MatMul", [im, wr])])
    return pair(g, g.op("Transpose", [out_re], perm=back), g.op("Transpose", [out_im], perm=back))


@register_complex("stablehlo.fft", dynamic=False)
def _fft(interp, op, x):
    """StableHLO spec: fft. FFT/IFFT: one complex ``DFT`` per transformed (trailing) axis.
    RFFT: a one-sided ``DFT`` of the real input on the last axis, then complex ones on the
    others. IRFFT: inverse complex ``DFT`` on the leading transformed axes, then the last
    axis's Hermitian half ``X[n-k] = conj(X[k])`` is rebuilt and inverted, keeping the real
    part (the imaginary parts of ``X[0]`` and ``X[n/2]`` are ignored, as XLA's C2R does).

    Raises:
        NotImplementedError: a length over :data:`MATRIX_DFT_LIMIT` that is no power of two.
    """
    kind = op.attr("fft_type")
    kind = getattr(kind, "name", str(kind)).rpartition(".")[2].upper()
    lengths = list(op.attr("fft_length"))
    t = op.operand_type(0)  # static: not a dynamic rule
    rank = t.rank
    axes = list(range(rank - len(lengths), rank))
    dt = _component_dtype(op)
    dft = lambda v, a, n, **kw: _dft(interp, v, a, n, dt, rank, **kw)  # noqa: E731
    if kind in ("FFT", "IFFT"):
        for a, n in zip(axes, lengths, strict=True):
            x = dft(x, a, n, inverse=kind == "IFFT")
        return x
    if kind == "RFFT":
        x = dft(x, axes[-1], lengths[-1], real=True)
        for a, n in zip(axes[:-1], lengths[:-1], strict=True):
            x = dft(x, a, n)
        return x
    # IRFFT, the one type left (StableHLO has four)
    for a, n in zip(axes[:-1], lengths[:-1], strict=True):
        x = dft(x, a, n, inverse=True)
    n, last = lengths[-1], axes[-1]
    m = t.shape[last]
    g = interp.graph
    if n > m:  # m = n // 2 + 1 (the spec); n < m only for n = 0, an empty result never converted
        mirror = g.op("Gather", [x, g.ints([n - k for k in range(m, n)])], axis=last)
        mirror = g.op("Mul", [mirror, g.const(np.asarray([1, -1], dtypes.to_numpy(dt)))])
        x = g.op("Concat", [x, mirror], axis=last)
    return part(interp.graph, dft(x, last, n, inverse=True), 0)
