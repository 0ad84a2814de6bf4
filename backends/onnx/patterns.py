"""Multi-op StableHLO patterns emitted as one ONNX operator (``to_onnx(optimize=True)``).

Frameworks lower ``softmax``, ``layer_norm``, ``gelu`` and ``relu`` into several StableHLO
ops; ONNX has one operator for each. :func:`find` matches the decompositions before
emission; :meth:`converter.backends.onnx.OnnxInterpreter.run_op` emits the operator at the pattern's
last op (its *root*), and the pattern's inner ops, which nothing else reads, are pruned
with the dead nodes. A pattern fires only where the operator computes the same function
within the dtype's tolerance, on float32 (and float64 where onnxruntime has the kernel):

- **Softmax** (opset 13): ``e / sum(e, a)`` with ``e = exp(x - max(x, a))`` over one axis
  ``a`` (``jax.nn.softmax``, ``torch.softmax``);
- **LayerNormalization** (opset 17): ``(x - mean) * rsqrt(var + eps) [* w] [+ b]`` with the
  mean and the biased variance over trailing axes computed as ``sum / n`` (torch's
  ``native_layer_norm``, ``flax.linen.LayerNorm``'s form with ``square``);
- **Gelu** (opset 20): ``0.5 x (1 + erf(x / sqrt 2))`` and ``0.5 x (1 + tanh(sqrt(2/pi)
  (x + 0.044715 x^3)))`` (``approximate="tanh"``);
- **Relu**: ``select(x <= 0, 0, x)``, ``select(x < 0, 0, select(x == 0, x * 0, x))`` (torch's
  ``relu``) and ``max(x, 0)`` (``jax.nn.relu``).

Matching looks through ``broadcast_in_dim`` (and unit-dimension ``reshape``s) of its
operands and into private functions (``func.call``, as ``jnp.where`` lowers), and checks
constants by value. The pattern's inputs must be values the root's function sees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from jaxlib.mlir import ir

from converter import mlir
from converter.interpreter import fold_constant
from converter.markers import STOP_GRADIENT_TARGET
from converter.regions import classify_combiner

#: Element types the fused operators are emitted for (onnxruntime's CPU kernels).
_FLOAT = {"float32", "float64"}
_GELU_FLOAT = {"float32"}
#: Ops a splat constant is seen through (its value is checked after them, in float64).
_FOLDED_THROUGH = {"stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert"}


@dataclass
class Match:
    """One matched pattern: the ONNX operator, its inputs (StableHLO values of the root's
    function, in the operator's input order; None for an absent optional input) and
    attributes."""

    op_type: str
    inputs: list
    attrs: dict = field(default_factory=dict)
    opset: int = 13


class _Scope:
    """Resolves the op defining a value, looking into ``func.call`` callees: values of a
    callee's body are mapped back to the caller's operands (``amap``)."""

    def __init__(self, functions):
        self.functions = functions

    def owner(self, v, amap):
        """``(op, amap)`` defining ``v`` (an ``ir.Operation``), or ``(None, value)`` for a
        block argument of the root's scope."""
        v = amap.get(v, v)
        if v in amap.values():
            amap = {}
        owner = v.owner
        if not isinstance(owner, ir.Operation) and hasattr(owner, "operation"):
            owner = owner.operation
        if not isinstance(owner, ir.Operation):
            return None, v
        if owner.name == "func.call":
            callee = self.functions[mlir.Op(owner).attr("callee")]  # a verified module resolves it
            block = callee.regions[0].blocks[0]
            ret = list(block.operations)[-1]
            index = next(i for i, r in enumerate(owner.results) if r == v)
            inner = {a: amap.get(o, o) for a, o in zip(block.arguments, owner.operands, strict=True)}
            return self.owner(ret.operands[index], inner)
        return owner, amap

    def value(self, v, amap):
        return amap.get(v, v)


class _Matcher:
    """Pattern terms over StableHLO values; ``bind`` collects variable bindings."""

    def __init__(self, scope: _Scope):
        self.scope = scope
        self.bind: dict = {}

    # terms ----------------------------------------------------------------
    def var(self, name, v, amap) -> bool:
        """``v`` is variable ``name`` (the same value at every occurrence)."""
        value = self.scope.value(v, amap)
        if name in self.bind:
            return self.bind[name] == value
        self.bind[name] = value
        return True

    def strip(self, v, amap):
        """``v`` through ``broadcast_in_dim``s (dims increasing), unit-dim reshapes, no-op
        converts and ``stop_gradient`` markers."""
        while True:
            op, inner = self.scope.owner(v, amap)
            if op is None:
                return v, amap
            if op.name == "stablehlo.broadcast_in_dim":
                dims = list(mlir.Op(op).attr("broadcast_dimensions"))
                if dims != sorted(dims):
                    return v, amap
            elif op.name == "stablehlo.convert":
                if op.operands[0].type != op.results[0].type:
                    return v, amap
            elif op.name == "stablehlo.reshape":
                a, b = (mlir.tensor_type(t).shape for t in (op.operands[0].type, op.results[0].type))
                if [d for d in a if d != 1] != [d for d in b if d != 1]:
                    return v, amap
            elif op.name != "stablehlo.custom_call":
                return v, amap
            elif mlir.Op(op).attr("call_target_name") != STOP_GRADIENT_TARGET:
                return v, amap
            v, amap = op.operands[0], inner

    def const(self, v, amap, value: float, rtol: float = 1e-6) -> bool:
        """``v`` is a splat constant equal to ``value``."""
        op, inner = self.scope.owner(v, amap)
        while op is not None and op.name in _FOLDED_THROUGH:  # operands may be a callee's arguments
            op, inner = self.scope.owner(op.operands[0], inner)
        if op is None:
            return False
        folded = fold_constant(op.results[0]) if op.name != "func.call" else None
        if folded is None or folded.size == 0:
            return False
        flat = np.asarray(folded, np.float64).reshape(-1)
        return bool(np.all(flat == flat[0])) and math.isclose(flat[0], value, rel_tol=rtol, abs_tol=0)

    def op(self, v, amap, name: str):
        """``(operands, amap)`` of ``v``'s defining op when it is ``stablehlo.<name>``."""
        op, inner = self.scope.owner(v, amap)
        if op is None or op.name not in (f"stablehlo.{name}", f"chlo.{name}"):
            return None
        return list(op.operands), inner, op

    def either(self, a, b, amap, left, right) -> bool:
        """A commutative op's operands ``(a, b)`` match ``left``/``right`` in some order."""
        saved = dict(self.bind)
        if left(a, amap) and right(b, amap):
            return True
        self.bind = saved
        if left(b, amap) and right(a, amap):
            return True
        self.bind = saved
        return False


def find(module: ir.Module, opset: int) -> dict:
    """The patterns of every function of ``module``: ``{root result value: Match}``."""
    functions = mlir.functions(module)
    scope = _Scope(functions)
    found: dict = {}
    for fn in functions.values():
        for operation in mlir.walk_ops(fn):
            if not operation.results or len(operation.results) != 1:
                continue
            t = operation.results[0].type
            if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
                continue
            dtype = mlir.tensor_type(t).dtype
            if dtype not in _FLOAT:
                continue
            for matcher in _MATCHERS:
                m = matcher(_Matcher(scope), operation, dtype, opset)
                if m is not None:
                    found[operation.results[0]] = m
                    break
    return found


# --------------------------------------------------------------------------- patterns


def _reduce(m: _Matcher, v, amap, kind: str):
    """``(operand, dims, amap)`` of a single-operand ``reduce`` of ``kind`` ('add', 'max')
    with the identity as init value, seen through broadcasts; else None."""
    v, amap = m.strip(v, amap)
    got = m.op(v, amap, "reduce")
    if got is None:
        return None
    operands, inner, op = got
    if len(operands) != 2 or classify_combiner(op.regions[0]) != kind:
        return None
    init = fold_constant(operands[1])
    ident = 0.0 if kind == "add" else -np.inf
    if init is None or float(np.asarray(init)) != ident:
        return None
    return operands[0], list(mlir.Op(op).attr("dimensions")), inner


def _softmax(m: _Matcher, operation, dtype, opset):
    if operation.name != "stablehlo.divide":
        return None
    e, s = operation.operands
    amap: dict = {}
    red = _reduce(m, s, amap, "add")
    if red is None or len(red[1]) != 1:
        return None
    e_inner, dims, inner = red
    if m.scope.value(e_inner, inner) != m.scope.value(e, amap):
        return None
    got = m.op(e, amap, "exponential")
    if got is None:
        return None
    got = m.op(got[0][0], got[1], "subtract")
    if got is None:
        return None
    (x, mx), inner = got[0], got[1]
    mx, inner = m.strip(mx, inner)
    floor = m.op(mx, inner, "maximum")  # jax.nn.softmax: max(-inf, max(x))
    if floor is not None:
        (p, q), fin = floor[0], floor[1]
        if m.const(*m.strip(p, fin), -np.inf):
            mx, inner = q, fin
        elif m.const(*m.strip(q, fin), -np.inf):
            mx, inner = p, fin
    red = _reduce(m, mx, inner, "max")
    if red is None or red[1] != dims or m.scope.value(red[0], red[2]) != m.scope.value(x, inner):
        return None
    m.var("x", x, inner)
    return Match("Softmax", [m.bind["x"]], {"axis": dims[0]})


def _mean(m: _Matcher, v, amap, name: str):
    """``v`` is ``sum(name, axes) / n`` (n the number of reduced elements, not 0: the mean
    of nothing is ``0 / 0 = NaN``, where ``ReduceMean`` gives 0), seen through broadcasts;
    returns the axes."""
    v, amap = m.strip(v, amap)
    got = m.op(v, amap, "divide")
    if got is None:
        return None
    (num, den), inner = got[0], got[1]
    red = _reduce(m, num, inner, "add")
    if red is None:
        return None
    x, dims, rin = red
    shape = mlir.tensor_type(x.type).shape
    count = None if None in shape else math.prod(shape[d] for d in dims)
    if not count or not m.const(den, inner, float(count)):
        return None
    if not m.var(name, x, rin):
        return None
    return dims


def _square_of(m: _Matcher, v, amap, name: str) -> bool:
    got = m.op(v, amap, "square")
    if got is not None:
        return m.var(name, got[0][0], got[1])
    got = m.op(v, amap, "multiply")
    if got is None:
        return False
    (a, b), inner = got[0], got[1]
    return m.scope.value(a, inner) == m.scope.value(b, inner) and m.var(name, a, inner)


def _normalized(m: _Matcher, v, amap):
    """``v`` is ``(x - mean) * rsqrt(var + eps)``; returns ``(dims, eps)`` with ``x``
    bound."""
    got = m.op(v, amap, "multiply")
    if got is None:
        return None
    (a, b), inner = got[0], got[1]
    for centered, scale in ((a, b), (b, a)):
        saved = dict(m.bind)
        got_c = m.op(centered, inner, "subtract")
        scale_v, scale_map = m.strip(scale, inner)
        got_r = m.op(scale_v, scale_map, "rsqrt")
        if got_c is None or got_r is None:
            continue
        (x, mean), cin = got_c[0], got_c[1]
        m.var("x", x, cin)
        dims = _mean(m, mean, cin, "x")
        if dims is None:
            m.bind = saved
            continue
        got_a = m.op(got_r[0][0], got_r[1], "add")
        if got_a is None:
            m.bind = saved
            continue
        (p, q), ain = got_a[0], got_a[1]
        for var, eps in ((p, q), (q, p)):
            eps_v, eps_map = m.strip(eps, ain)
            op, _ = m.scope.owner(eps_v, eps_map)
            folded = fold_constant(op.results[0]) if op is not None and op.name != "func.call" else None
            if folded is None or folded.size == 0 or not np.all(folded == folded.reshape(-1)[0]):
                continue
            var_v, var_map = m.strip(var, ain)
            got_d = m.op(var_v, var_map, "divide")
            if got_d is None:
                continue
            vdims = _var_dims(m, var_v, var_map)
            if vdims == dims:
                return dims, float(folded.reshape(-1)[0])
        m.bind = saved
    return None


def _var_dims(m: _Matcher, v, amap):
    """``v`` is ``sum((x - mean(x))^2) / n``: the biased variance of bound ``x``."""
    got = m.op(v, amap, "divide")
    (num, den), inner = got[0], got[1]
    red = _reduce(m, num, inner, "add")
    if red is None:
        return None
    sq, dims, rin = red
    saved = dict(m.bind)
    if not _square_of(m, sq, rin, "d"):
        m.bind = saved
        return None
    d = m.bind.pop("d")
    got = m.op(d, {}, "subtract")
    if got is None:
        return None
    (x, mean), cin = got[0], got[1]
    shape = mlir.tensor_type(x.type).shape
    if not m.var("x", x, cin) or _mean(m, mean, cin, "x") != dims:
        return None
    if None in shape or not m.const(den, inner, float(math.prod(shape[i] for i in dims))):
        return None
    return dims


def _affine(m: _Matcher, v, amap, kind: str, shape):
    """``v`` is ``kind(body, broadcast(p))`` with ``p`` of the shape of trailing dims of
    ``shape``: ``(body, amap, p)``; else None."""
    got = m.op(v, amap, kind)
    if got is None:
        return None
    (a, b), inner = got[0], got[1]
    for body, p in ((a, b), (b, a)):
        src, smap = m.strip(p, inner)
        value = m.scope.value(src, smap)
        pshape = list(mlir.tensor_type(value.type).shape)
        if pshape and pshape == list(shape[len(shape) - len(pshape) :]):
            return body, inner, value
    return None


def _layer_norm(m: _Matcher, operation, dtype, opset):
    if opset < 17 or operation.name not in ("stablehlo.add", "stablehlo.multiply"):
        return None
    shape = list(mlir.tensor_type(operation.results[0].type).shape)
    root, amap = operation.results[0], {}
    weight = bias = None
    found = _normalized(m, root, amap) if operation.name == "stablehlo.multiply" else None
    if found is None and operation.name == "stablehlo.add":
        got = _affine(m, root, amap, "add", shape)
        if got is None:
            return None
        root, amap, bias = got
        found = _normalized(m, root, amap)
    if found is None:
        got = _affine(m, root, amap, "multiply", shape)
        if got is None:
            return None
        root, amap, weight = got
        found = _normalized(m, root, amap)
    if found is None:
        return None
    dims, eps = found
    axis = dims[0]
    if dims != list(range(axis, len(shape))):
        return None
    for p in (weight, bias):
        if p is not None and list(mlir.tensor_type(p.type).shape) != shape[axis:]:
            return None
    return Match("LayerNormalization", [m.bind["x"], weight, bias], {"axis": axis, "epsilon": eps}, opset=17)


def _gelu(m: _Matcher, operation, dtype, opset):
    """``half_x * (1 + f(...))`` with ``half_x = 0.5 * x`` (or ``x * 0.5``)."""
    if opset < 20 or dtype not in _GELU_FLOAT or operation.name != "stablehlo.multiply":
        return None
    a, b = operation.operands
    amap: dict = {}

    def half_x(v, mp):
        got = m.op(v, mp, "multiply")
        return got is not None and m.either(
            *got[0], got[1], lambda u, q: m.const(*m.strip(u, q), 0.5), lambda u, q: m.var("x", u, q)
        )

    def one_plus(v, mp):
        got = m.op(v, mp, "add")
        return got is not None and m.either(
            *got[0], got[1], lambda u, q: m.const(*m.strip(u, q), 1.0), lambda u, q: inner_fn(u, q)
        )

    kind = {}

    def inner_fn(v, mp):
        got = m.op(v, mp, "erf")
        if got is not None:
            kind["approximate"] = "none"
            g2 = m.op(got[0][0], got[1], "multiply")
            return g2 is not None and m.either(
                *g2[0],
                g2[1],
                lambda u, q: m.var("x", u, q),
                lambda u, q: m.const(*m.strip(u, q), 1 / math.sqrt(2), 1e-6),
            )
        got = m.op(v, mp, "tanh")
        if got is None:
            return False
        kind["approximate"] = "tanh"
        g2 = m.op(got[0][0], got[1], "multiply")
        return g2 is not None and m.either(
            *g2[0], g2[1], lambda u, q: m.const(*m.strip(u, q), math.sqrt(2 / math.pi), 1e-6), cubic
        )

    def cubic(v, mp):  # x + 0.044715 * x^3
        got = m.op(v, mp, "add")
        return got is not None and m.either(*got[0], got[1], lambda u, q: m.var("x", u, q), cube_term)

    def cube_term(v, mp):
        got = m.op(v, mp, "multiply")
        return got is not None and m.either(
            *got[0], got[1], lambda u, q: m.const(*m.strip(u, q), 0.044715, 1e-6), cube
        )

    def cube(v, mp):
        got = m.op(v, mp, "multiply")
        if got is not None:
            return m.either(
                *got[0], got[1], lambda u, q: m.var("x", u, q), lambda u, q: _square_of(m, u, q, "x")
            )
        got = m.op(v, mp, "power")
        return got is not None and m.var("x", got[0][0], got[1]) and m.const(*m.strip(got[0][1], got[1]), 3.0)

    def half_one_plus(v, mp):  # 0.5 * (1 + f(...)), multiplied by x (jax.nn.gelu)
        got = m.op(v, mp, "multiply")
        return got is not None and m.either(
            *got[0], got[1], lambda u, q: m.const(*m.strip(u, q), 0.5), one_plus
        )

    saved = dict(m.bind)
    if not m.either(a, b, amap, half_x, one_plus):
        m.bind = saved
        if not m.either(a, b, amap, lambda u, q: m.var("x", u, q), half_one_plus):
            return None
    return Match("Gelu", [m.bind["x"]], {"approximate": kind["approximate"]}, opset=20)


def _relu(m: _Matcher, operation, dtype, opset):
    amap: dict = {}
    v = operation.results[0]
    got = m.op(v, amap, "maximum")
    if got is not None:
        if m.either(
            *got[0], got[1], lambda u, q: m.const(*m.strip(u, q), 0.0), lambda u, q: m.var("x", u, q)
        ):
            return Match("Relu", [m.bind["x"]])
        return None
    got = m.op(v, amap, "select")
    if got is None:
        return None
    (pred, on_true, on_false), inner = got[0], got[1]
    if not _x_compared_to_zero(m, pred, inner, ("LE", "LT")):
        return None
    if not (m.const(*m.strip(on_true, inner), 0.0) and _x_or_signed_zero(m, on_false, inner)):
        return None
    return Match("Relu", [m.bind["x"]])


def _x_compared_to_zero(m: _Matcher, pred, amap, directions) -> bool:
    """``pred`` is ``compare(x, 0)`` with one of ``directions``."""
    cmp = m.op(pred, amap, "compare")
    if cmp is None or mlir.Op(cmp[2]).attr("comparison_direction") not in directions:
        return False
    (x, zero), cin = cmp[0], cmp[1]
    return m.var("x", x, cin) and m.const(*m.strip(zero, cin), 0.0)


def _x_or_signed_zero(m: _Matcher, v, amap) -> bool:
    """``v`` is ``x``, or ``select(x == 0, x * 0, x)`` (torch's relu keeping the sign of a
    zero with a zero gradient there; ONNX's Relu leaves the sign of a zero unspecified)."""
    if m.var("x", v, amap):
        return True
    got = m.op(v, amap, "select")
    if got is None:
        return False
    (pred, on_true, on_false), inner = got[0], got[1]
    if not (_x_compared_to_zero(m, pred, inner, ("EQ",)) and m.var("x", on_false, inner)):
        return False
    prod = m.op(on_true, inner, "multiply")
    return prod is not None and m.either(
        *prod[0], prod[1], lambda u, q: m.var("x", u, q), lambda u, q: m.const(*m.strip(u, q), 0.0)
    )


def _gemm(m: _Matcher, operation, dtype, opset):
    """``dot_general([m, k], [k, n]) + broadcast(c)`` (``c`` of shape ``[n]``, ``[1, n]``
    or ``[m, n]``) → ``Gemm`` (``transB`` when the right operand is a transpose)."""
    from .ops.linalg import matmul_form

    if operation.name != "stablehlo.add" or len(operation.results[0].type.shape) != 2:
        return None
    shape = list(operation.results[0].type.shape)
    for dot_v, c_v in (tuple(operation.operands), tuple(operation.operands)[::-1]):
        owner = getattr(dot_v.owner, "operation", dot_v.owner)
        if not isinstance(owner, ir.Operation) or owner.name != "stablehlo.dot_general":
            continue
        form = matmul_form(mlir.Op(owner))
        if form not in ("matmul", "gemm_t") or len(owner.operands[0].type.shape) != 2:
            continue
        src, smap = m.strip(c_v, {})
        c = m.scope.value(src, smap)
        cshape = list(mlir.tensor_type(c.type).shape)
        if cshape not in ([shape[1]], [1, shape[1]], shape) or c.owner == owner:
            continue
        a, b = owner.operands
        if form == "gemm_t":
            b = getattr(b.owner, "operation", b.owner).operands[0]
        return Match("Gemm", [a, b, c], {"transB": 1 if form == "gemm_t" else 0})
    return None


def _mean_pattern(m: _Matcher, operation, dtype, opset):
    """``sum(x, axes) / n`` (n the reduced count; the sum possibly broadcast to unit
    dimensions at the reduced axes) → ``ReduceMean`` (keepdims as the result's rank)."""
    if operation.name != "stablehlo.divide":
        return None
    dims = _mean(m, operation.results[0], {}, "x")
    if dims is None:
        return None
    x = m.bind["x"]
    shape = list(mlir.tensor_type(x.type).shape)
    out = list(mlir.tensor_type(operation.results[0].type).shape)
    kept = [1 if i in dims else n for i, n in enumerate(shape)]
    if out == kept:
        keep = 1
    elif out == [n for i, n in enumerate(shape) if i not in dims]:
        keep = 0
    else:
        return None
    return Match("ReduceMean", [x], {"axes": dims, "keepdims": keep}, opset=18)


def _avg_pool(m: _Matcher, operation, dtype, opset):
    """``reduce_window(add, x, 0) / d`` over the trailing spatial dims of an
    ``[N, C, spatial...]`` value, without dilation, where ``d`` is the window size
    (``count_include_pad=1``) or, with zero padding, each window's count of input elements
    (``count_include_pad=0``: torch's ``count_include_pad=False``) → ``AveragePool``.
    Padding must be smaller than the window (onnxruntime refuses other pads); other
    divisors (torch's ``ceil_mode`` windows clipped at the padded end) stay as they are."""
    if operation.name != "stablehlo.divide" or dtype != "float32":
        return None
    num, den = operation.operands
    got = m.op(num, {}, "reduce_window")
    if got is None:
        return None
    operands, _, op = got
    view = mlir.Op(op)
    if len(operands) != 2 or classify_combiner(op.regions[0]) != "add":
        return None
    init = fold_constant(operands[1])
    if init is None or float(np.asarray(init)) != 0.0:
        return None
    shape = list(operands[0].type.shape)
    rank = len(shape)
    win = list(view.attr("window_dimensions"))
    strides = list(view.attr("window_strides") or [1] * rank)
    padding = view.attr("padding")
    pads = [(0, 0)] * rank if padding is None else [tuple(int(v) for v in p) for p in np.asarray(padding)]
    dil = list(view.attr("window_dilations") or [1] * rank)
    base = list(view.attr("base_dilations") or [1] * rank)
    if rank < 3 or win[:2] != [1, 1] or strides[:2] != [1, 1] or any(v != 1 for v in dil + base):
        return None
    if pads[:2] != [(0, 0), (0, 0)] or any(
        not 0 <= p < w for lohi, w in zip(pads[2:], win[2:], strict=True) for p in lohi
    ):
        return None
    attrs = {"kernel_shape": win[2:], "strides": strides[2:]}
    if all(p == (0, 0) for p in pads):
        if not m.const(den, {}, float(math.prod(win))):
            return None
    else:
        divisor = fold_constant(den)
        out = list(operation.results[0].type.shape)
        if divisor is None or list(divisor.shape) != out:
            return None
        counts = np.ones((), np.float64)
        for n, w, s, (lo, _), o in zip(shape[2:], win[2:], strides[2:], pads[2:], out[2:], strict=True):
            start = np.arange(o) * s - lo
            counts = np.multiply.outer(counts, np.minimum(start + w, n) - np.maximum(start, 0))
        divisor = np.asarray(divisor, np.float64)
        if np.all(divisor == math.prod(win)):
            include = 1
        elif np.all(divisor == counts):
            include = 0
        else:
            return None
        attrs.update(pads=[p[0] for p in pads[2:]] + [p[1] for p in pads[2:]], count_include_pad=include)
    m.var("x", operands[0], {})
    return Match("AveragePool", [m.bind["x"]], attrs)


_MATCHERS = (_softmax, _layer_norm, _gelu, _relu, _gemm, _avg_pool, _mean_pattern)
