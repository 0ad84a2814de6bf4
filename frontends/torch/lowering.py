"""Walk a ``torch.fx`` graph of Core ATen ops, evaluating each node with its JAX rule."""

from __future__ import annotations

import contextlib
import contextvars
import operator
import os
import re
import types
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch
from torch.fx.node import map_arg

from converter import dtypes
from converter._torch_internal import HigherOrderOperator
from converter.errors import DynamicDimensionError, MissingOp, OpConversionError, UnsupportedOpError

from .registry import ATEN_RULES, key_of

_TORCH_DIR = os.path.dirname(torch.__file__)
_PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_NOT_USER = (_TORCH_DIR, *(os.path.join(_PROJECT_DIR, d) for d in ("converter", "frontends", "backends")))
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def node_location(node: torch.fx.Node) -> str:
    """``file.py:42`` of the innermost user frame in the node's stack trace, or of the
    innermost torch frame (``linear.py:134``) when the model is all torch modules; ``""``
    when the node has no trace. Frames of this converter are never named."""
    frames = [f for f in _FRAME.findall(node.meta.get("stack_trace") or "") if not _ours(f[0])]
    for path, line in reversed(frames):
        if not path.startswith(_TORCH_DIR):
            return f"{path}:{line}"
    return f"{frames[-1][0]}:{frames[-1][1]}" if frames else ""


def _ours(path: str) -> bool:
    """This converter's frames, and the code torch.fx generates (``<eval_with_key>.5``: the
    graphs Dynamo builds for ``torch.cond`` and the other higher-order ops)."""
    return path.startswith(_NOT_USER[1:]) or path.startswith("<eval_with_key>")


#: ``torch.ops.higher_order.with_effects(token, op, *args, **kwargs) -> (token, op's result)``:
#: how ``torch.export`` orders side-effecting ops (the runtime error checks of ``linalg.inv``,
#: ``linalg.solve``, ``linalg.cholesky``...: ``aten._linalg_check_errors``). The token is a
#: dummy ``(0,)`` tensor threaded from a ``TOKEN`` input to a ``TOKEN`` output; the walker runs
#: the wrapped op's rule and passes the token through.
WITH_EFFECTS = torch.ops.higher_order.with_effects


def op_name(node: torch.fx.Node) -> str:
    """The registry key of a call_function node (``aten.addmm.default``); for a
    ``with_effects`` node, the key of the op it wraps."""
    if node.target is WITH_EFFECTS:
        return key_of(node.args[1])
    if isinstance(node.target, HigherOrderOperator):
        return f"higher_order.{node.target.name()}"
    return key_of(node.target)


def graphs(graph: torch.fx.Graph) -> list[torch.fx.Graph]:
    """``graph`` and the graphs of its submodules (the branches and bodies of ``cond``,
    ``while_loop``, ``scan``... at any depth)."""
    owner = graph.owning_module
    if owner is None:
        return [graph]
    return [graph] + [
        m.graph for m in owner.modules() if isinstance(m, torch.fx.GraphModule) and m is not owner
    ]


def check_supported(graph: torch.fx.Graph) -> None:
    """Raise :class:`UnsupportedOpError` naming every ATen op of ``graph`` (and of its
    subgraphs) without a rule, with its count and the source line of its first occurrence."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for node in (n for g in graphs(graph) for n in g.nodes):
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        name = op_name(node)
        if name not in ATEN_RULES:
            counts[name] += 1
            first.setdefault(name, node_location(node))
    if counts:
        raise UnsupportedOpError([MissingOp(k, n, first[k]) for k, n in counts.items()], "torch frontend")


def _scope_name(node: torch.fx.Node) -> str:
    loc = node_location(node)
    where = f"[{os.path.basename(loc)}]" if loc else ""
    return f"{op_name(node)}{where}"


def interpret(graph: torch.fx.Graph, inputs: list[Any]) -> list[Any]:
    """Evaluate ``graph`` on ``inputs`` (one per placeholder) with JAX; returns the flat
    outputs. Each node's ops are emitted under ``jax.named_scope("aten.op[file.py:line]")``,
    so the StableHLO ``loc(...)`` of every op names its source op and line."""
    env: dict[torch.fx.Node, Any] = {}
    it = iter(inputs)
    for node in graph.nodes:
        if node.op == "placeholder":
            env[node] = next(it)
        elif node.op == "call_function":
            args = map_arg(node.args, env.__getitem__)
            kwargs = map_arg(node.kwargs, env.__getitem__)
            env[node] = _run_node(node, args, kwargs)
        elif node.op == "get_attr" and isinstance(sub := _attr(graph, node.target), torch.fx.GraphModule):
            env[node] = sub  # a subgraph argument of a higher-order op (cond branches...)
        elif node.op == "output":
            out = map_arg(node.args[0], env.__getitem__)
            return list(out) if isinstance(out, (list, tuple)) else [out]
        else:
            raise OpConversionError(node.op, node_location(node), NotImplementedError(node.format_node()))
    raise ValueError("graph has no output node")


def _attr(graph: torch.fx.Graph, target: str) -> Any:
    obj = graph.owning_module
    for part in target.split("."):
        obj = getattr(obj, part, None)
    return obj


def _run_node(node: torch.fx.Node, args, kwargs):
    if node.target is operator.getitem:
        return args[0][args[1]]
    rule = ATEN_RULES.get(op_name(node))
    if not isinstance(node.target, (types.FunctionType, types.BuiltinFunctionType)) and any(
        isinstance(a, SymbolicRatio) for a in (*args, *kwargs.values())
    ):  # an ATen op: a size-derived float (SymFloat) is a scalar argument like any other
        args = tuple(_scalar(a) for a in args)
        kwargs = {k: _scalar(v) for k, v in kwargs.items()}
    val = node.meta.get("val")
    try:
        with jax.named_scope(_scope_name(node)):
            if node.target is WITH_EFFECTS:
                token, _, *args = args
                return (token, conform(rule(*args, **kwargs), val[1] if val else None))
            out = rule(*args, **kwargs)
        return conform(out, val)
    except Exception as e:  # noqa: BLE001 - re-raised naming the node and its source line
        dims = _symbolic_cause(e, (args, kwargs))
        if dims is not None:
            raise DynamicDimensionError(op_name(node), node_location(node), e, dims) from e
        raise OpConversionError(op_name(node), node_location(node), e) from e


def _symbolic_cause(e: BaseException, args: Any) -> list[str] | None:
    """The dynamic dimensions a failed rule could not keep symbolic: those named in ``e``
    when it says a symbolic dimension cannot be used here (JAX's
    ``InconclusiveDimensionOperation``, a size without a symbolic form), else those in the
    node's size arguments and argument shapes (``arange(seq)`` whose rule needs an int, a
    pooling rule that branches on a dynamic size); None when no argument has a dynamic
    dimension."""
    symbols = _SYMBOLS.get()
    if not symbols:
        return None
    names = sorted({str(v) for v in symbols.values()})
    if type(e).__name__ == "InconclusiveDimensionOperation" or isinstance(e, NoSymbolicForm):
        return [n for n in names if re.search(rf"\b{re.escape(n)}\b", str(e))]
    leaves = jax.tree.leaves(args)
    sizes = [v for v in leaves if jax.export.is_symbolic_dim(v)]
    sizes += [d for v in leaves for d in getattr(v, "shape", ()) if jax.export.is_symbolic_dim(d)]
    if not sizes:
        return None
    text = " ".join(str(v) for v in sizes)
    return [n for n in names if re.search(rf"\b{re.escape(n)}\b", text)]


class NoSymbolicForm(ValueError):
    """A torch size expression has no ``jax.export`` symbolic form."""


def _symbolic(v: Any) -> bool:
    return jax.export.is_symbolic_dim(v)


def _exact(v: Any) -> Any:
    """An int, a symbolic dimension or a :class:`SymbolicRatio` as is; a float as the exact
    fraction of its binary value (``0.5`` → 1/2)."""
    if isinstance(v, float):
        return Fraction(v)
    return v


class SymbolicRatio:
    """A size-derived float (torch's ``SymFloat``: ``x.shape[0] / 3``, ``sym_float(n) * 0.5``)
    kept exact: ``num / den``, ``num`` an int or a ``jax.export`` symbolic dimension
    expression, ``den`` a positive int. ``jax.export`` dimensions are integers, so the
    quotient itself has no symbolic form; :func:`math.floor`/``ceil``/``trunc`` of it do
    (``num // den``...), which is how a size computed through a float gets back to an int.

    Arithmetic with ints, dimensions, floats (as exact binary fractions) and other ratios
    keeps it exact; dividing by a symbolic dimension raises ``ValueError`` (no symbolic form).
    Given to an ATen op as a scalar, it becomes the run-time value ``num / den``
    (:meth:`value`).
    """

    __slots__ = ("num", "den")

    def __init__(self, num: Any, den: int = 1):
        if den <= 0:
            num, den = -num, -den
        self.num, self.den = num, den

    @staticmethod
    def of(v: Any) -> SymbolicRatio:
        """``v`` (int, dimension, float, ``Fraction`` or ratio) as a ratio."""
        v = _exact(v)
        if isinstance(v, SymbolicRatio):
            return v
        if isinstance(v, Fraction):
            return SymbolicRatio(v.numerator, v.denominator)
        if isinstance(v, (int, np.integer)) or _symbolic(v):
            return SymbolicRatio(v, 1)
        raise TypeError(f"{type(v).__name__} is not a size")

    def __add__(self, other: Any) -> SymbolicRatio:
        o = SymbolicRatio.of(other)
        return SymbolicRatio(self.num * o.den + o.num * self.den, self.den * o.den)

    __radd__ = __add__

    def __neg__(self) -> SymbolicRatio:
        return SymbolicRatio(-self.num, self.den)

    def __sub__(self, other: Any) -> SymbolicRatio:
        return self + -SymbolicRatio.of(other)

    def __rsub__(self, other: Any) -> SymbolicRatio:
        return SymbolicRatio.of(other) + -self

    def __mul__(self, other: Any) -> SymbolicRatio:
        o = SymbolicRatio.of(other)
        return SymbolicRatio(self.num * o.num, self.den * o.den)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> SymbolicRatio:
        o = SymbolicRatio.of(other)
        if _symbolic(o.num):
            raise NoSymbolicForm(f"({self}) / ({o}) has no jax.export symbolic form")
        if o.num == 0:
            raise ZeroDivisionError("division by zero")
        return SymbolicRatio(self.num * o.den, self.den * int(o.num))

    def __rtruediv__(self, other: Any) -> SymbolicRatio:
        return SymbolicRatio.of(other) / self

    def floor(self) -> Any:
        """``⌊num / den⌋`` (an int or a symbolic dimension)."""
        return self.num // self.den

    def ceil(self) -> Any:
        """``⌈num / den⌉``."""
        return -((-self.num) // self.den)

    def trunc(self) -> Any:
        """``num / den`` rounded toward zero: the floor when ``num >= 0``, else the ceiling
        (raises JAX's ``InconclusiveDimensionOperation`` when the sign is not decided)."""
        return self.floor() if self.num >= 0 else self.ceil()

    def value(self) -> Any:
        """The run-time value: a float64 scalar (float32 without x64)."""
        return jnp.true_divide(jnp.asarray(self.num), self.den)

    def __repr__(self) -> str:
        return f"{self.num}/{self.den}"


def dim_max(a: Any, b: Any) -> Any:
    """``max(a, b)`` of ints or symbolic dimensions; a ``jax.export`` expression
    (``max(m, n)``) when the ranges do not decide it, its operands in a fixed order (JAX
    compares ``max(n, m)`` and ``max(m, n)`` as different)."""
    from converter import _jax_internal

    return _jax_internal.max_dim(*sorted((a, b), key=str))


def dim_min(a: Any, b: Any) -> Any:
    """``min(a, b)`` (see :func:`dim_max`)."""
    from converter import _jax_internal

    return _jax_internal.min_dim(*sorted((a, b), key=str))


def _scalar(v: Any) -> Any:
    return v.value() if isinstance(v, SymbolicRatio) else v


#: sympy symbol of ``torch.export``'s shape environment -> ``jax.export`` symbolic dimension,
#: while a shape-polymorphic graph is lowered (:func:`symbolic_dims`).
_SYMBOLS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("torch_symbols", default=None)


@contextlib.contextmanager
def symbolic_dims(symbols: dict) -> Iterator[None]:
    """Within this context, the ``SymInt`` sizes of ``torch.export``'s FakeTensors evaluate
    to the ``jax.export`` symbolic dimensions ``symbols`` gives their sympy symbols
    (:func:`jax_dim`)."""
    token = _SYMBOLS.set(symbols)
    try:
        yield
    finally:
        _SYMBOLS.reset(token)


def jax_dim(d: Any, symbols: dict | None = None) -> Any:
    """A torch size (an int or a ``SymInt``) as an int or a ``jax.export`` symbolic dimension
    expression over ``symbols`` (default: those of :func:`symbolic_dims`).

    Raises:
        ValueError: the size's expression uses an operation symbolic dimensions do not have
            (``Max``, true division...), or a symbol without a dimension (an unbacked size).
    """
    if isinstance(d, (int, np.integer)):
        return int(d)
    if isinstance(d, torch.SymInt):
        d = d.node.expr
    symbols = _SYMBOLS.get() if symbols is None else symbols
    return _eval_expr(d, symbols or {})


def _eval_expr(e: Any, symbols: dict) -> Any:
    import sympy

    from converter._torch_internal import sympy_functions

    sf = sympy_functions()

    if isinstance(e, (int, np.integer)) or getattr(e, "is_Integer", False):
        return int(e)
    if getattr(e, "is_Rational", False):
        return SymbolicRatio(int(e.p), int(e.q))
    if getattr(e, "is_Float", False):
        return SymbolicRatio.of(float(e))
    if isinstance(e, sympy.Symbol):
        if e not in symbols:
            raise NoSymbolicForm(f"the size {e} is no dimension of the graph inputs")
        return symbols[e]
    args = [_eval_expr(a, symbols) for a in e.args]
    if any(isinstance(a, SymbolicRatio) for a in args) and isinstance(e, (sympy.Add, sympy.Mul)):
        args = [SymbolicRatio.of(a) for a in args]  # a float term (0.5*ToFloat(s0)): exact
    if isinstance(e, sympy.Add):
        out = args[0]
        for a in args[1:]:
            out = out + a
        return out
    if isinstance(e, sympy.Mul):
        out = args[0]
        for a in args[1:]:
            out = out * a
        return out
    if isinstance(e, sf.FloorDiv):
        return args[0] // args[1]
    if isinstance(e, (sf.Mod, sf.PythonMod)):
        return args[0] % args[1]
    if isinstance(e, (sympy.Pow, sf.PowByNatural)) and isinstance(args[1], int) and args[1] >= 0:
        out = 1
        for _ in range(args[1]):
            out = out * args[0]
        return out
    if isinstance(e, sf.ToFloat):
        return SymbolicRatio.of(args[0])
    if isinstance(e, (sf.IntTrueDiv, sf.FloatTrueDiv)):
        return SymbolicRatio.of(args[0]) / args[1]
    rounding = {sf.FloorToInt: "floor", sf.CeilToInt: "ceil", sf.TruncToInt: "trunc"}
    if type(e) in rounding:
        return getattr(SymbolicRatio.of(args[0]), rounding[type(e)])()
    if isinstance(e, (sympy.Max, sympy.Min, sf.Max, sf.Min)) and not any(
        isinstance(a, SymbolicRatio) for a in args
    ):
        fold = dim_max if isinstance(e, (sympy.Max, sf.Max)) else dim_min
        out = args[0]
        for a in args[1:]:
            out = fold(out, a)
        return out
    raise NoSymbolicForm(f"the size {e} has no jax.export symbolic form")


def conform(out: Any, val: Any) -> Any:
    """Cast ``out`` to the dtype torch.export recorded (``val``, a FakeTensor or a structure
    of them) and check its shape; recurses through tuples and lists.

    Raises:
        ValueError: the rule produced a different shape than torch would.
    """
    if isinstance(val, torch.Tensor):
        out = jnp.asarray(out)
        want = dtypes.to_numpy(dtypes.name_of(val.dtype))
        if out.dtype != want:
            out = out.astype(want)
        shape = tuple(jax_dim(d) for d in val.shape)
        if not _same_shape(tuple(out.shape), shape):
            raise ValueError(f"rule returned shape {tuple(out.shape)}, torch gives {shape}")
        return out
    if isinstance(val, (list, tuple)) and isinstance(out, (list, tuple)) and len(val) == len(out):
        return type(out)(conform(o, v) for o, v in zip(out, val, strict=True))
    return out


def _same_shape(a: tuple, b: tuple) -> bool:
    """Shapes equal, symbolic dimensions compared as ``jax.export`` expressions (whose
    ``==`` never raises: an undecidable comparison answers False, so counts as different)."""
    return len(a) == len(b) and all(x == y for x, y in zip(a, b, strict=True))
