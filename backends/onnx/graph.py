"""A small builder for ONNX graphs (nodes, initializers, unique names)."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import helper, numpy_helper

from converter import dtypes

ONNX_DTYPE = {
    "float16": onnx.TensorProto.FLOAT16,
    "bfloat16": onnx.TensorProto.BFLOAT16,
    "float32": onnx.TensorProto.FLOAT,
    "float64": onnx.TensorProto.DOUBLE,
    "bool": onnx.TensorProto.BOOL,
    "int8": onnx.TensorProto.INT8,
    "int16": onnx.TensorProto.INT16,
    "int32": onnx.TensorProto.INT32,
    "int64": onnx.TensorProto.INT64,
    "uint8": onnx.TensorProto.UINT8,
    "uint16": onnx.TensorProto.UINT16,
    "uint32": onnx.TensorProto.UINT32,
    "uint64": onnx.TensorProto.UINT64,
    "complex64": onnx.TensorProto.COMPLEX64,
    "complex128": onnx.TensorProto.COMPLEX128,
}


# Element types onnxruntime's CPU kernels lack, per ONNX operator, mapped to the type the
# operator computes in instead. Every mapping is exact for what the operator does: wider
# integers for comparisons, selections and padding; int64 for running sums and
# contractions of narrower (or unsigned) integers, whose wrapping results truncate back to
# the same bits; the same bits as int64 for a uint64 selection. (bfloat16 is widened for
# every op by the interpreter: see converter.backends.onnx.OnnxInterpreter.) No integer
# ReduceSum/ReduceProd is emitted at all: onnxruntime computes those through float64 (see
# ops/reductions.py's _integer_reduce).
ORT_WIDENED: dict[str, dict[str, str]] = {
    "Where": {"bool": "uint8", "int16": "int32", "uint16": "int32", "uint64": "int64"},
    "Max": {"int16": "int32", "uint16": "int32"},
    "Min": {"int16": "int32", "uint16": "int32"},
    "Pad": {"int16": "int32", "uint16": "int32"},
    "ReduceMax": {"int16": "int32", "uint16": "int32", "uint32": "int64"},
    "ReduceMin": {"int16": "int32", "uint16": "int32", "uint32": "int64"},
    "TopK": {"uint16": "int32", "uint32": "int64"},
    "IsInf": {"float16": "float32"},
    **{
        op: {t: "int64" for t in ("int8", "int16", "uint8", "uint16", "uint32", "uint64")}
        for op in ("CumSum", "Einsum")
    },
    **{op: {"bool": "uint8"} for op in ("Less", "LessOrEqual", "Greater", "GreaterOrEqual")},
}


#: Element types whose splat constants are one ``ConstantOfShape`` (opset 9's value types).
_CONSTANT_OF_SHAPE = {
    "float16", "float32", "float64", "bool",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
}  # fmt: skip
#: Element types onnxruntime's ``Range`` computes in.
_RANGE_TYPES = {"float32", "float64", "int16", "int32", "int64"}
#: Constants of at most this many elements are stored as they are.
SMALL_CONSTANT = 16


def compressed(arr: np.ndarray) -> np.ndarray | None:
    """The smallest array that ``arr`` is a broadcast of (size 1 along every axis along
    which ``arr`` repeats, bit for bit), when ``arr`` is large (over
    :data:`SMALL_CONSTANT` elements), of a type ``Expand`` takes, and the core at most a
    quarter of it; else None."""
    name = dtypes.name_of(arr.dtype)
    if arr.size <= SMALL_CONSTANT or name not in _CONSTANT_OF_SHAPE:
        return None
    bits = arr.view(np.uint8) if name == "bool" else arr.view(f"u{arr.dtype.itemsize}")
    core = bits
    for axis in range(arr.ndim):
        first = core.take([0], axis=axis)
        if core.shape[axis] > 1 and np.array_equal(core, np.broadcast_to(first, core.shape)):
            core = first
    if core.size * 4 > arr.size:
        return None
    return np.ascontiguousarray(core).view(arr.dtype)


def onnx_dtype(name: str) -> int:
    """The ``TensorProto`` element type for a canonical dtype name.

    Raises:
        NotImplementedError: a dtype ONNX lacks (float8 variants other than ONNX's).
    """
    try:
        return ONNX_DTYPE[name]
    except KeyError:
        raise NotImplementedError(f"dtype {name} has no ONNX equivalent") from None


class GraphBuilder:
    """Collects nodes and initializers of one ONNX graph (the main graph or a subgraph)."""

    def __init__(self, names: itertools.count, prefix: str = "", reserved: set[str] | None = None):
        self._ids = names
        self.prefix = prefix
        self.reserved = set() if reserved is None else reserved
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._small: dict[tuple, str] = {}  # small constants already stored, by value

    def child(self) -> GraphBuilder:
        """A builder for a subgraph (Loop/If body) sharing this graph's name counter and
        reserved names."""
        return GraphBuilder(self._ids, self.prefix, self.reserved)

    def fresh(self, hint: str = "v") -> str:
        """A graph-unique value name, never one of :attr:`reserved` (the graph's input,
        initializer and output names, which may look like generated ones: a model read back
        by ``from_onnx`` names its parameters ``const_0``...)."""
        name = f"{self.prefix}{hint}_{next(self._ids)}"
        while name in self.reserved:
            name = f"{self.prefix}{hint}_{next(self._ids)}"
        return name

    def op(
        self, op_type: str, inputs: list[str], n_out: int = 1, *, domain: str = "", **attrs
    ) -> str | list[str]:
        """Emit one node; returns its output name (or names when ``n_out > 1``). A
        ``Transpose`` by the identity permutation is its input (no node)."""
        if op_type == "Transpose" and list(attrs.get("perm") or [-1]) == list(range(len(attrs["perm"]))):
            return inputs[0]
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(
            helper.make_node(op_type, inputs, outs, name=self.fresh(op_type), domain=domain, **attrs)
        )
        return outs[0] if n_out == 1 else outs

    def op_as(
        self,
        op_type: str,
        inputs: list[str],
        dtype: str,
        *,
        data: tuple[int, ...] = (0,),
        n_out: int = 1,
        same_out: tuple[int, ...] = (0,),
        **attrs,
    ) -> str | list[str]:
        """Emit ``op_type`` whose inputs at positions ``data`` have element type ``dtype``;
        when onnxruntime has no kernel for it (:data:`ORT_WIDENED`), those inputs are cast to
        the wider type and the outputs at positions ``same_out`` cast back."""
        work = ORT_WIDENED.get(op_type, {}).get(dtype)
        if work is None:
            return self.op(op_type, inputs, n_out, **attrs)
        inputs = [self.cast(x, work) if i in data else x for i, x in enumerate(inputs)]
        outs = self.op(op_type, inputs, n_out, **attrs)
        outs = [outs] if n_out == 1 else outs
        outs = [self.cast(o, dtype) if i in same_out else o for i, o in enumerate(outs)]
        return outs[0] if n_out == 1 else outs

    def cast(self, x: str, dtype: str) -> str:
        """``x`` cast to ``dtype`` (between integer types it wraps, as C casts do)."""
        return self.op("Cast", [x], to=onnx_dtype(dtype))

    def const(self, value, dtype: str | None = None, hint: str = "c", whole: bool = False) -> str:
        """``value`` (a NumPy array or scalar) as an initializer; a large one that repeats
        along some axes (a splat, a broadcast row, an index grid) is stored once along the
        others and expanded in the graph (:func:`compressed`), a splat as one
        ``ConstantOfShape``; ``whole``: stored as it is (an operator's small weight)."""
        arr = np.asarray(value, dtype=dtypes.to_numpy(dtype) if dtype else None)
        key = None
        if arr.size <= SMALL_CONSTANT:  # one initializer per distinct small value
            key = (str(arr.dtype), arr.shape, arr.tobytes())
            if key in self._small:
                return self._small[key]
        core = None if whole else compressed(arr)
        if core is not None:
            if core.size == 1 and dtypes.name_of(arr.dtype) in _CONSTANT_OF_SHAPE:
                scalar = numpy_helper.from_array(core.reshape(1), "value")
                return self.op("ConstantOfShape", [self.ints(arr.shape)], value=scalar)
            return self.op("Expand", [self.const(core, hint=hint), self.ints(arr.shape)])
        name = self.fresh(hint)
        self.initializers.append(_tensor(arr, name))
        if key is not None:
            self._small[key] = name
        return name

    def iota(self, shape, dim: int, dtype: str) -> str:
        """``0, 1, ...`` along ``dim`` of ``shape``, computed in the graph (``Range``, then
        ``Reshape``/``Expand`` when the shape has other dimensions) rather than stored
        (StableHLO spec: iota). ``shape`` holds ints, or for a dynamic dimension the name of
        its int64 ``[1]`` run-time size (what :meth:`sizes` returns)."""
        if any(isinstance(d, str) for d in shape):
            return self._dynamic_iota(shape, dim, dtype)
        n = int(shape[dim])
        work = dtype if dtype in _RANGE_TYPES else ("float64" if dtypes.is_floating(dtype) else "int64")
        zero, one = np.zeros((), dtypes.to_numpy(work)), np.ones((), dtypes.to_numpy(work))
        x = self.op(
            "Range", [self.const(zero), self.const(np.asarray(n, dtypes.to_numpy(work))), self.const(one)]
        )
        x = x if work == dtype else self.cast(x, dtype)
        if len(shape) == 1:
            return x
        view = [1] * len(shape)
        view[dim] = n
        x = self.op("Reshape", [x, self.ints(view)])
        return x if list(view) == list(shape) else self.op("Expand", [x, self.ints(shape)])

    def _dynamic_iota(self, sizes, dim: int, dtype: str) -> str:
        """:meth:`iota` of a shape with run-time sizes: ``Range`` to the size (int64),
        ``Reshape`` onto its axis, ``Expand`` to :meth:`shape_vector` of the sizes."""
        n = sizes[dim] if isinstance(sizes[dim], str) else self.ints([sizes[dim]])
        zero, one = self.const(np.int64(0)), self.const(np.int64(1))
        x = self.op("Range", [zero, self.op("Squeeze", [n, self.ints([0])]), one])
        x = x if dtype == "int64" else self.cast(x, dtype)
        if len(sizes) == 1:
            return x
        x = self.op("Reshape", [x, self.ints([-1 if i == dim else 1 for i in range(len(sizes))])])
        return self.op("Expand", [x, self.shape_vector(sizes)])

    def ints(self, values) -> str:
        """An int64 1-D initializer (shapes, axes, starts)."""
        return self.const(np.asarray(list(values), dtype=np.int64))

    def dim(self, x: str, axis: int) -> str:
        """The size of ``x`` along ``axis`` at run time: an int64 ``[1]`` (ONNX ``Shape``
        with ``start``/``end``, opset 15)."""
        return self.op("Shape", [x], start=axis, end=axis + 1)

    def sizes(self, x: str, shape) -> list:
        """``shape`` (a type's dimensions, None for a dynamic one) with each dynamic
        dimension replaced by :meth:`dim` of ``x`` (whose shape ``shape`` is)."""
        return [d if d is not None else self.dim(x, i) for i, d in enumerate(shape)]

    def shape_vector(self, parts) -> str:
        """A 1-D int64 shape from ``parts``: ints and names of int64 ``[1]`` tensors (runs
        of ints become one initializer; all ints: one initializer)."""
        pieces: list[str] = []
        run: list[int] = []
        for p in parts:
            if isinstance(p, str):
                if run:
                    pieces.append(self.ints(run))
                    run = []
                pieces.append(p)
            else:
                run.append(int(p))
        if run or not pieces:
            pieces.append(self.ints(run))
        return pieces[0] if len(pieces) == 1 else self.op("Concat", pieces, axis=0)

    def product(self, parts) -> int | str:
        """The product of ``parts`` (ints and int64 ``[1]`` names): an int when all are
        ints, else an int64 ``[1]`` value."""
        static = int(np.prod([p for p in parts if not isinstance(p, str)], dtype=np.int64))
        dynamic = [p for p in parts if isinstance(p, str)]
        if not dynamic:
            return static
        out = dynamic[0]
        for p in dynamic[1:]:
            out = self.op("Mul", [out, p])
        return out if static == 1 else self.op("Mul", [out, self.ints([static])])


class RetypedOp:
    """A view of an :class:`converter.mlir.Op` whose operand and result types read through
    :meth:`retype` (what a rule evaluating it in other types is given); everything else is
    the op's own. Subclasses define ``retype``."""

    def __init__(self, op):
        self._op = op

    def __getattr__(self, name: str):
        return getattr(self._op, name)

    def retype(self, t):
        raise NotImplementedError

    @property
    def result_types(self) -> list:
        return [self.retype(t) for t in self._op.result_types]

    @property
    def result_type(self):
        return self.retype(self._op.result_type)

    def operand_type(self, i: int):
        return self.retype(self._op.operand_type(i))


def used_names(nodes) -> set[str]:
    """Every value name read by ``nodes`` or by their subgraphs."""
    used: set[str] = set()
    for node in nodes:
        used.update(node.input)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                used |= used_names(attr.g.node)
    return used


def live(nodes, initializers, outputs) -> tuple[list, list]:
    """``(nodes, initializers)`` of a graph without what its ``outputs`` do not need: nodes
    whose results nothing reads (transitively; ONNX nodes have no side effects, e.g. shape
    computations a static result made unnecessary) and initializers no live node reads."""
    needed = set(outputs)
    kept = []
    for node in reversed(nodes):
        if any(name in needed for name in node.output if name):
            kept.append(node)
            needed |= used_names([node])
    return kept[::-1], [t for t in initializers if t.name in needed]


def _tensor(arr: np.ndarray, name: str) -> onnx.TensorProto:
    if dtypes.name_of(arr.dtype) == "bfloat16":
        t = helper.make_tensor(
            name, onnx.TensorProto.BFLOAT16, arr.shape, arr.view(np.uint16).tobytes(), raw=True
        )
        return t
    return numpy_helper.from_array(arr, name)
