"""Evaluate an ONNX graph node by node with the JAX rules of :data:`ONNX_RULES`.

Values are ``jax.Array`` tracers while ``jax.jit`` lowers the model, or ``np.ndarray`` when
they are known at conversion time (initializers, ``Constant`` outputs, ``Shape`` of a static
shape, and every node whose inputs are all known: such nodes are folded eagerly under
``jax.ensure_compile_time_eval``). Rules that need a static input (Reshape's shape, Slice's
starts, TopK's k...) read it with :meth:`NodeContext.static`. Sequences are Python lists,
an empty optional is ``None``. A rule returns a tuple
for several outputs (a list is one sequence value).

Each node runs under ``jax.named_scope("OpType[node_name]")``, so the StableHLO ``loc(...)``
of every op names the ONNX node it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx
from onnx import helper, numpy_helper

from converter.errors import ConversionError, OpConversionError

from . import symbolic
from .registry import DEFAULT_DOMAIN, canonical_domain, function_body, lookup, schema_function

# Ops never folded at conversion time even when their inputs are known.
NO_FOLD = {
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Bernoulli",
    "Multinomial",
}


class StaticValueRequired(ConversionError):
    """A rule needs an input's value at conversion time (a shape, axes, a trip count) but the
    value depends on a graph input.

    Attributes:
        names: the value names that had to be static.
    """

    def __init__(self, names: Sequence[str], node: onnx.NodeProto):
        self.names = list(names)
        super().__init__(
            f"{node.op_type} node {node.name!r} needs the value of {self.names} at conversion time; "
            "pass it with from_onnx(..., static_inputs={name: array}) when it is a graph input"
        )


def np_dtype(elem_type: int) -> np.dtype:
    """NumPy dtype of an ONNX ``TensorProto.DataType`` (bfloat16/float8 via ml_dtypes)."""
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def decode_attribute(attr: onnx.AttributeProto) -> Any:
    """An attribute's value: strings as ``str``, tensors as ``np.ndarray``, graphs as
    ``GraphProto``."""
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    if isinstance(value, list) and value and isinstance(value[0], onnx.TensorProto):
        return [numpy_helper.to_array(v) for v in value]
    return value


def is_known(value: Any) -> bool:
    """True for a value known at conversion time (NumPy arrays, lists of them, None)."""
    if value is None or isinstance(value, (np.ndarray, np.generic)):
        return True
    if isinstance(value, list):
        return all(is_known(v) for v in value)
    return False


def _to_known(value: Any) -> Any:
    if value is None or isinstance(value, (np.ndarray, np.generic)):
        return None if value is None else np.asarray(value)
    if isinstance(value, (list, tuple)):
        return [_to_known(v) for v in value]
    if isinstance(value, jax.core.Tracer):
        return value
    return np.asarray(value)


class NodeContext:
    """What a rule may ask about its node besides its input values.

    Attributes:
        node: the ``NodeProto``.
        version: the schema ``since_version`` being lowered.
        opset: the model's opset for the node's domain.
        runner: the :class:`GraphRunner`.
    """

    def __init__(self, runner: GraphRunner, node: onnx.NodeProto, version: int, opset: int, values: list):
        self.runner = runner
        self.node = node
        self.version = version
        self.opset = opset
        self.values = values

    def static(self, i: int, default: Any = None) -> np.ndarray | None:
        """Input ``i`` as a NumPy array known at conversion time (``default`` when omitted).

        Raises:
            StaticValueRequired: the value depends on a graph input.
        """
        if i >= len(self.values) or self.values[i] is None:
            return default
        value = self.values[i]
        if is_known(value):
            return value
        if self.node.input[i] in self.runner.lifted:  # a constant passed as a parameter
            return self.runner.lifted[self.node.input[i]]
        raise StaticValueRequired([self.node.input[i]], self.node)

    def out_dtype(self, i: int = 0) -> np.dtype | None:
        """The dtype ONNX shape inference gives output ``i``, or None."""
        t = self.runner.types.get(self.node.output[i]) if i < len(self.node.output) else None
        return t[0] if t else None

    def out_shape(self, i: int = 0) -> tuple | None:
        """The shape ONNX shape inference gives output ``i`` (ints and dim_param strings)."""
        t = self.runner.types.get(self.node.output[i]) if i < len(self.node.output) else None
        return t[1] if t else None

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    def subgraph(self, graph: onnx.GraphProto) -> Callable[..., list]:
        """A callable evaluating ``graph`` (an attribute of this node) on its inputs; it sees
        the values of the enclosing scopes."""
        env = self.runner.env
        return lambda *args: self.runner.run_graph(graph, list(args), env)


class GraphRunner:
    """Evaluates ONNX graphs with the rules of the registry.

    Args:
        opsets: the model's opset per canonical domain.
        types: value name → (dtype, shape) from ``onnx.shape_inference`` (may be partial).
        functions: model-local functions by ``(domain, name)``.
    """

    def __init__(self, opsets: dict[str, int], types: dict[str, tuple], functions: dict | None = None):
        self.opsets = opsets
        self.types = types
        self.functions = functions or {}
        self.env: dict[str, Any] = {}
        self.symbols: dict[str, Any] = {}  # dim_param name -> jax.export symbolic dimension
        self.lifted: dict[str, np.ndarray] = {}  # values known at conversion time, passed as parameters
        self.shape_notes: dict[str, str] = {}  # value name -> why its checked shape may be wrong
        #: (op type, domain, opset) -> :func:`lookup`'s answer, for this conversion (the
        #: registry and ONNX's schemas do not change under it; ``onnx.defs.get_schema``
        #: makes a new schema object per call: 20 us, more than the rest of a node's lookup)
        self._rules: dict[tuple[str, str, int], tuple[int, Callable | None]] = {}

    def run_graph(self, graph: onnx.GraphProto, args: Sequence[Any], outer: dict[str, Any]) -> list:
        """Evaluate ``graph`` with ``args`` bound to its non-initializer inputs (in order) and
        the enclosing scope ``outer``; returns its outputs."""
        env = dict(outer)
        for init in graph.initializer:
            env[init.name] = numpy_helper.to_array(init)
        inputs = [i.name for i in graph.input if i.name not in {x.name for x in graph.initializer}]
        if len(inputs) != len(args):
            raise ConversionError(f"graph {graph.name!r} takes {len(inputs)} inputs, got {len(args)}")
        env.update(zip(inputs, args, strict=False))
        self.run_nodes(graph.node, env)
        return [env[o.name] for o in graph.output]

    def run_nodes(self, nodes: Sequence[onnx.NodeProto], env: dict[str, Any]) -> None:
        """Evaluate ``nodes`` in order, adding their outputs to ``env``."""
        for node in nodes:
            values = [env[n] if n else None for n in node.input]
            outs = self.run_node(node, values, env)
            for name, value in zip(node.output, outs, strict=False):
                if name:
                    env[name] = value

    def run_node(self, node: onnx.NodeProto, values: list, env: dict[str, Any]) -> list:
        """Evaluate one node; errors are wrapped naming the node, its op type and version."""
        domain = canonical_domain(node.domain)
        opset = self.opsets.get(domain, 1)
        found = self._rules.get((node.op_type, domain, opset))
        if found is None:
            found = self._rules[(node.op_type, domain, opset)] = lookup(node.op_type, domain, opset)
        version, rule = found
        key = f"{domain}::{node.op_type}-{version}"
        while values and values[-1] is None:
            values.pop()
        attrs = {a.name: decode_attribute(a) for a in node.attribute}
        shape_inputs = [n for n, v in zip(node.input, values, strict=False) if symbolic.is_symbolic(v)]
        if shape_inputs and domain == DEFAULT_DOMAIN:
            out = symbolic.evaluate(node.op_type, version, values, attrs)
            if out is not None:
                return [out]
        if shape_inputs and not (domain == DEFAULT_DOMAIN and node.op_type in symbolic.CONSUMERS):
            values = [symbolic.materialize(v) for v in values]
        fold = (
            node.op_type not in NO_FOLD
            and not shape_inputs  # a symbolic shape gives a value of symbolic shape: traced
            and all(is_known(v) for v in values)
            and not any(
                a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute
            )
        )
        try:
            if (domain, node.op_type) in self.functions:
                return self._run_function(self.functions[(domain, node.op_type)], node, values)
            if rule is None:
                schema = schema_function(node.op_type, domain, opset)
                if schema is None:
                    raise NotImplementedError(f"no rule for {key}")
                fn = function_body(schema, opset, node, [_type_proto(v) for v in values])
                given = {a.name for a in node.attribute}
                defaults = [
                    a.default_value
                    for n, a in schema.attributes.items()
                    if a.default_value.type and n not in given
                ]
                return self._run_function(fn, node, values, defaults)
            saved, self.env = self.env, env
            ctx = NodeContext(self, node, version, opset, values)
            try:
                with jax.named_scope(f"{node.op_type}[{node.name}]"):
                    if fold:
                        with jax.ensure_compile_time_eval():
                            out = rule(ctx, *values, **attrs)
                    else:
                        out = rule(ctx, *values, **attrs)
            finally:
                self.env = saved
            out = list(out) if isinstance(out, tuple) else [out]
            if fold:
                out = [_to_known(o) for o in out]
            return [self._conform(name, o) for name, o in zip(node.output, out, strict=False)]
        except StaticValueRequired as e:
            symbolic_names = [n for n in e.names if n in shape_inputs]
            if symbolic_names:
                raise OpConversionError(
                    key,
                    f"node {node.name!r}",
                    ValueError(
                        f"{symbolic_names} depend on symbolic dimensions and are not known at "
                        "conversion time here; give those dimensions sizes with "
                        "from_onnx(..., dims={name: size}) to specialize"
                    ),
                ) from e
            raise
        except OpConversionError:
            raise
        except Exception as e:  # noqa: BLE001 - re-raised naming the node
            err = OpConversionError(key, f"node {node.name!r}", e)
            shapes_unproven = type(e).__name__ == "InconclusiveDimensionOperation" or isinstance(e, TypeError)
            err.dim_pairs = self._dim_pairs(node, values) if self.symbols and shapes_unproven else []
            raise err from e

    def _dim_pairs(self, node: onnx.NodeProto, values: list) -> list[tuple[str, str]]:
        """Pairs of differently named input dimensions (``dim_param``s) that ``node`` puts at
        the same place, when JAX could not prove a shape relation there: a Reshape's input
        against the output shape inference gives it (left-aligned: ``mask.view(batch, -1)``
        of a mask whose batch is named apart), the operands of any other node (right-aligned,
        as broadcasting). ``from_onnx`` retries with each pair as one dimension."""
        names = {str(d): n for n, d in self.symbols.items()}

        def dims(shape: Any) -> list:
            return [
                names.get(str(d)) if not isinstance(d, str) else (d if d in self.symbols else None)
                for d in shape
            ]

        shapes = [dims(v.shape) for v in values if hasattr(v, "shape") and not symbolic.is_symbolic(v)]
        pairs: list[tuple[str, str]] = []
        if node.op_type == "Reshape" and shapes and node.output[0] in self.types:
            out = self.types[node.output[0]][1] or ()
            aligned = [list(zip(shapes[0], dims(out), strict=False))]
        else:
            aligned = [
                list(zip(a[::-1], b[::-1], strict=False))
                for i, a in enumerate(shapes)
                for b in shapes[i + 1 :]
            ]
        for a, b in (p for group in aligned for p in group):
            if a and b and a != b and (a, b) not in pairs and (b, a) not in pairs:
                pairs.append((a, b))
        return pairs

    def _conform(self, name: str, value: Any) -> Any:
        """Cast to the dtype shape inference gives ``name`` and check static shapes."""
        t = self.types.get(name)
        if t is None or value is None or isinstance(value, list) or symbolic.is_symbolic(value):
            return value
        dtype, shape = t
        if dtype is not None and value.dtype != dtype:
            value = value.astype(dtype) if isinstance(value, np.ndarray) else jnp.asarray(value).astype(dtype)
        if (
            shape is not None
            and all(isinstance(d, int) for d in (*shape, *value.shape))
            and tuple(value.shape) != tuple(shape)
        ):
            raise ValueError(
                f"output {name!r} has shape {tuple(value.shape)}, ONNX shape inference gives {shape}"
                + self.shape_notes.get(name, "")
            )
        return value

    def _run_function(self, fn: onnx.FunctionProto, node: onnx.NodeProto, values: list, defaults=()) -> list:
        """Inline a function body: a model-local function, or the one ONNX defines an op by.
        ``defaults`` are extra ``AttributeProto`` values (the schema's attribute defaults)."""
        call_attrs = [*fn.attribute_proto, *defaults, *node.attribute]
        scope: dict[str, Any] = dict.fromkeys(fn.input)
        scope.update(zip(fn.input, values, strict=False))
        nodes = [_bind_attrs(n, call_attrs) for n in fn.node]
        saved = self.opsets, self.types
        self.opsets = {**self.opsets, **{canonical_domain(o.domain): o.version for o in fn.opset_import}}
        self.types = {}  # function-body names are local; inference types are the caller's
        try:
            self.run_nodes(nodes, scope)
        finally:
            self.opsets, self.types = saved
        outs = [scope.get(o) for o in fn.output]
        return [self._conform(name, o) for name, o in zip(node.output, outs, strict=False)]


def _bind_attrs(node: onnx.NodeProto, call_attrs) -> onnx.NodeProto:
    """A copy of a function body node with ``ref_attr_name`` attributes resolved (later
    entries of ``call_attrs`` win)."""
    if not any(a.ref_attr_name for a in node.attribute):
        return node
    by_name = {a.name: a for a in call_attrs}
    new = onnx.NodeProto()
    new.CopyFrom(node)
    del new.attribute[:]
    for a in node.attribute:
        if a.ref_attr_name:
            if a.ref_attr_name in by_name:
                b = onnx.AttributeProto()
                b.CopyFrom(by_name[a.ref_attr_name])
                b.name = a.name
                new.attribute.append(b)
        else:
            new.attribute.append(a)
    return new


def _type_proto(value: Any) -> onnx.TypeProto:
    """A ``TypeProto`` for a runtime value (for context-dependent function bodies)."""
    if value is None:
        return onnx.TypeProto()
    if isinstance(value, list):
        t = onnx.TypeProto()
        if value:
            t.sequence_type.elem_type.CopyFrom(_type_proto(value[0]))
        return t
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(value.dtype))
    return helper.make_tensor_type_proto(elem, list(np.shape(value)))


def _free_names(graph: onnx.GraphProto) -> set[str]:
    """Names a (sub)graph's nodes read that it neither computes nor takes: outer-scope values."""
    own = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    own |= {o for n in graph.node for o in n.output}
    used: set[str] = set()
    for n in graph.node:
        used.update(n.input)
        for a in n.attribute:
            for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                used |= _free_names(g)
    return used - own - {""}


def _sort_graph(graph: onnx.GraphProto, outer: set[str]) -> bool:
    """Reorder ``graph.node`` (and its subgraphs') topologically, keeping the file's order
    among ready nodes; True when anything moved. A node whose inputs never become available
    (a cycle, a name nothing computes) stays where the order ends, for the checker to name."""
    changed = False
    for n in graph.node:
        for a in n.attribute:
            for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                changed |= _sort_graph(g, outer | {o for m in graph.node for o in m.output})
    avail = set(outer) | {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    needs = []
    for n in graph.node:
        reads = set(n.input)
        for a in n.attribute:
            for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                reads |= _free_names(g)
        needs.append(reads)
    produced = {o for n in graph.node for o in n.output}
    order: list[int] = []
    pending = list(range(len(graph.node)))
    while pending:
        rest = []
        for i in pending:
            if all(r in avail or r not in produced for r in needs[i]):
                order.append(i)
                avail.update(graph.node[i].output)
            else:
                rest.append(i)
        if len(rest) == len(pending):  # a cycle: leave it to the checker
            order += rest
            break
        pending = rest
    if order != list(range(len(graph.node))):
        nodes = [graph.node[i] for i in order]
        copies = [onnx.NodeProto() for _ in nodes]
        for c, n in zip(copies, nodes, strict=True):
            c.CopyFrom(n)
        del graph.node[:]
        graph.node.extend(copies)
        changed = True
    return changed


def topologically_sorted(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every graph's nodes in a topological order (the ONNX IR requires one;
    onnxruntime sorts files that lack it, and ``onnxruntime.transformers.float16`` writes
    such files: its input and output ``Cast`` nodes come last). The model itself when it is
    already sorted, else a sorted copy; a file order among independent nodes is kept."""
    if not _needs_sort(model.graph, set()):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    _sort_graph(out.graph, set())
    return out


def _needs_sort(graph: onnx.GraphProto, outer: set[str]) -> bool:
    avail = set(outer) | {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    produced = {o for n in graph.node for o in n.output}
    for n in graph.node:
        if any(r not in avail and r in produced for r in n.input):
            return True
        for a in n.attribute:
            for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                if _needs_sort(g, avail) or any(r not in avail and r in produced for r in _free_names(g)):
                    return True
        avail.update(n.output)
    return False
