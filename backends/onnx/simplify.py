"""Clean-ups of the emitted ONNX graph, before dead nodes are pruned (:func:`simplify`).

The rules emit one node group per StableHLO op, as the StableHLO spells it: explicit
``broadcast_in_dim``s, shape computations on constants, reshapes of reshapes. These passes
rewrite the main graph into what ONNX expresses directly, each one exact (the values the
graph computes are bit for bit those it computed before):

- **constant folding**: values computed from constants only (masks, position tables,
  index grids) are computed once with onnxruntime at conversion time and stored, when that
  takes fewer nodes and at most :data:`FOLD_BYTES` bytes (large repeating values are
  stored compressed: :func:`converter.backends.onnx.graph.compressed`); parameters are never folded
  into (their initializers keep their names, and a caller may replace them);
- **implicit broadcasting**: an ``Expand`` (or a ``Reshape`` that only prepends 1s) whose
  consumers broadcast multidirectionally (``Add``, ``Where``, ``Equal``, ...) is skipped
  when the consumer's result shape stays the same;
- **reshape chains**: ``Reshape(Reshape(x))`` is one ``Reshape``; a ``Reshape`` to the
  shape it already has, and ``Identity`` nodes, are dropped;
- **batched products**: ``Reshape(MatMul(Reshape(a), Reshape(b)))`` that only merges and
  splits the leading batch dimensions is ``MatMul(a, b)``; an elementwise unary op between
  a reshape and its inverse is applied to the original;
- **transpose chains** compose into one ``Transpose``; **common subexpressions** (the same
  operator on the same inputs with the same attributes) are computed once;
- **output names**: the value a graph output copies is renamed to the output (no
  trailing ``Identity``);
- **convolution epilogues**: a per-channel bias added to a ``Conv`` result becomes the
  ``Conv``'s bias input (a ``Reshape`` of a ``[C]`` parameter: that parameter); a
  per-channel scale and shift after it (eval-mode batch norm: ``(conv + b) * s + t`` with
  ``s``, ``t`` computed from parameters) are folded into its weight and bias, as
  ``torch.onnx`` does: new initializers ``folded:<weight>`` and ``folded:<weight>:bias``
  replace the weight (read by that ``Conv`` alone) and the parameters only the scale and
  shift read. This one pass reads parameters' values; it is exact within float32's
  rounding (the product ``W * s`` is rounded once), and skipped when a folded value is not
  finite or a parameter is state the model updates;
- **squeezing reductions**: a ``Reduce*`` keeping its reduced axes followed by a
  ``Reshape`` that drops exactly them is one ``Reduce*`` with ``keepdims=0``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from converter._optional import require
from converter.errors import MissingDependencyError

from .graph import GraphBuilder, compressed, used_names

#: Largest folded constant stored (bytes, after compression).
FOLD_BYTES = 4096
#: Constant values of more elements are not computed at conversion time (they stay in the graph).
FOLD_EVALUATED = 1 << 20

#: Operators with multidirectional (NumPy) broadcasting over all their inputs.
BROADCASTING = {
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Where",
    "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor",
    "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
}  # fmt: skip

#: Operators never folded (their result is not a function of their inputs).
_NOT_FOLDED = {
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
}


def require_runtime():
    """The ``onnxruntime`` module, which folds the constants.

    Raises:
        MissingDependencyError: onnxruntime is not installed (names the ``onnx`` extra).
    """
    return require("onnxruntime", "to_onnx's constant folding (optimize=True)")


def _run_constants(model: onnx.ModelProto, outputs: list) -> list:
    """The values ``outputs`` (ValueInfoProtos) of ``model``, a graph of constants, as
    onnxruntime computes them without its own graph optimizations."""
    ort = require_runtime()

    model.graph.output.extend(outputs)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return session.run([o.name for o in outputs], {})


def simplify(
    g: GraphBuilder,
    inputs: list,
    outputs: list[str],
    params: set[str],
    opset: int,
    param_data: Callable[[str], np.ndarray] | None = None,
    frozen: set[str] = frozenset(),
) -> None:
    """Rewrite ``g``'s main graph in place with the passes of this module.

    Args:
        g: the builder whose ``nodes``/``initializers`` are the main graph (outputs copied by
            ``Identity`` nodes into the names in ``outputs``).
        inputs: the graph inputs (``ValueInfoProto``).
        outputs: the graph output names.
        params: initializer names that are parameters (never folded into, except by the
            convolution epilogues).
        opset: the default-domain opset of the model.
        param_data: a parameter's value by name, for the convolution epilogues (without
            it, only a bias that is a parameter as it is moves into the ``Conv``).
        frozen: parameters never folded (state the model updates).
    """
    _fold_constants(g, params, outputs, opset)
    shapes = _shapes(g, inputs, opset)
    if shapes is not None:
        _implicit_broadcast(g, shapes)
        _reshape_chains(g, shapes, outputs)
        _batched_matmul(g, shapes, outputs)
        _unary_between_reshapes(g, shapes, outputs)
        _conv_epilogues(g, shapes, outputs, params, opset, param_data, frozen)
        _squeeze_reductions(g, shapes, outputs)
    _transpose_chains(g)
    _common_subexpressions(g)
    _drop_identities(g, outputs, {i.name for i in inputs} | {t.name for t in g.initializers})


# --------------------------------------------------------------------------- helpers


def _has_subgraph(node) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def _replace_inputs(nodes, mapping: dict[str, str]) -> None:
    """Rename the inputs ``mapping`` names in ``nodes`` (main graph only)."""
    for node in nodes:
        for i, name in enumerate(node.input):
            if name in mapping:
                node.input[i] = mapping[name]


def _rename_everywhere(nodes, old: str, new: str) -> None:
    """Rename value ``old`` to ``new`` in ``nodes`` and their subgraphs (outer-scope reads)."""
    for node in nodes:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for i, name in enumerate(node.output):
            if name == old:
                node.output[i] = new
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:  # its outputs are its own (Identity) values
                _rename_everywhere(attr.g.node, old, new)


def _shapes(g: GraphBuilder, inputs, opset: int) -> dict[str, list] | None:
    """Static shapes of the main graph's values (ONNX shape inference), None when it fails."""
    graph = helper.make_graph(g.nodes, "main", inputs, [], g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001 - an optimization: without shapes, skip the passes that need them
        return None
    shapes: dict[str, list] = {}
    for vi in [*inferred.graph.value_info, *inputs]:
        t = vi.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            shapes[vi.name] = [d.dim_value for d in t.shape.dim]
    for t in g.initializers:
        shapes[t.name] = list(t.dims)
    return shapes


# --------------------------------------------------------------------------- constant folding


def _fold_constants(g: GraphBuilder, params: set[str], outputs: list[str], opset: int) -> None:
    """Replace values computed from constants only by their values (see the module doc)."""
    known = {t.name for t in g.initializers if t.name not in params}
    producer: dict[str, onnx.NodeProto] = {}
    for node in g.nodes:
        if _has_subgraph(node) or node.op_type in _NOT_FOLDED or node.domain not in ("", "ai.onnx"):
            continue
        if all(i in known for i in node.input if i) and any(node.input):
            for o in node.output:
                if o:
                    producer[o] = node
                    known.add(o)
    if not producer:
        return
    const_nodes = {id(n) for n in producer.values()}
    frontier = []
    read_outside = set(outputs) | used_names([n for n in g.nodes if _has_subgraph(n)])
    for node in g.nodes:
        if id(node) not in const_nodes:
            read_outside.update(node.input)
    frontier = [v for v in producer if v in read_outside]
    cones = {v: _cone(v, producer) for v in frontier}
    values = _evaluate(g, producer, frontier, cones, opset)
    if values is None:
        return
    mapping = {}
    before = len(g.nodes)
    for v in frontier:
        arr = values.get(v)
        if arr is None:
            continue
        core = compressed(arr)
        stored = core if core is not None else arr
        new_nodes = 0 if core is None else 1
        if stored.nbytes > FOLD_BYTES or new_nodes >= len(cones[v]) or v in outputs:
            continue
        mapping[v] = g.const(arr, hint="folded")
    g.nodes[:] = g.nodes[before:] + g.nodes[:before]  # nodes of compressed constants first
    _replace_inputs(g.nodes, mapping)
    _replace_subgraph_reads(g.nodes, mapping)


def _numel(vi) -> float:
    """Elements of a value with a fully static inferred shape (infinity otherwise)."""
    if vi is None or not vi.type.tensor_type.HasField("shape"):
        return float("inf")
    dims = vi.type.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return float("inf")
    return float(np.prod([d.dim_value for d in dims]))


def _cone(value: str, producer: dict) -> list:
    """The constant nodes ``value`` is computed by."""
    seen, stack, nodes = set(), [value], []
    while stack:
        v = stack.pop()
        node = producer.get(v)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        stack.extend(i for i in node.input if i)
    return nodes


def _evaluate(g: GraphBuilder, producer, frontier, cones, opset) -> dict[str, np.ndarray] | None:
    """The frontier values, computed by onnxruntime from the constant nodes (None when
    onnxruntime refuses the subgraph: nothing is folded)."""

    ids = {id(n) for v in frontier for n in cones[v]}
    nodes = [n for n in g.nodes if id(n) in ids]
    read = {i for n in nodes for i in n.input}
    inits = [t for t in g.initializers if t.name in read]
    graph = helper.make_graph(nodes, "fold", [], [], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
        types = {vi.name: vi for vi in inferred.graph.value_info}
        frontier = [v for v in frontier if _numel(types.get(v)) <= FOLD_EVALUATED]
        if not frontier:
            return None
        ids = {id(n) for v in frontier for n in cones[v]}  # only what the kept values need
        del model.graph.node[:]
        model.graph.node.extend(n for n in nodes if id(n) in ids)
        results = _run_constants(model, [types[v] for v in frontier])
    except MissingDependencyError:
        raise  # never a model folded less than with onnxruntime
    except Exception:  # noqa: BLE001 - an optimization: a subgraph onnxruntime cannot run stays
        return None
    return dict(zip(frontier, results, strict=True))


# --------------------------------------------------------------------------- broadcasting


def _broadcast_shape(shapes: list[list[int]]) -> list[int]:
    """The broadcast of ``shapes``, which broadcast together: a value skipped for the one it
    is a broadcast of has, along each axis, 1 or the size of the value it replaces."""
    return list(np.broadcast_shapes(*[tuple(s) for s in shapes]))


def _implicit_broadcast(g: GraphBuilder, shapes: dict[str, list]) -> None:
    """Skip ``Expand``s, and ``Reshape``s that only prepend 1s, feeding broadcasting ops
    whose result shape does not depend on them."""
    source: dict[str, str] = {}  # value -> the value it is a broadcast of
    for node in list(g.nodes):
        if node.op_type == "Expand" and node.input[0] in shapes:
            source[node.output[0]] = node.input[0]
        elif node.op_type == "ConstantOfShape" and node.attribute:
            value = numpy_helper.to_array(node.attribute[0].t).reshape(())
            scalar = g.const(value, hint="scalar")
            shapes[scalar] = []
            source[node.output[0]] = scalar
        elif node.op_type == "Reshape" and node.input[0] in shapes and node.output[0] in shapes:
            before, after = shapes[node.input[0]], shapes[node.output[0]]
            k = len(after) - len(before)
            if k >= 0 and after[k:] == before and all(d == 1 for d in after[:k]):
                source[node.output[0]] = node.input[0]
    if not source:
        return
    for node in g.nodes:
        if node.op_type not in BROADCASTING or not node.output or node.output[0] not in shapes:
            continue
        want = shapes[node.output[0]]
        for i, name in enumerate(node.input):
            while name in source:
                trial = [shapes.get(x) for x in node.input]
                trial[i] = shapes[source[name]]
                if any(s is None for s in trial) or _broadcast_shape(trial) != want:
                    break
                name = source[name]
                node.input[i] = name


def _reshape_chains(g: GraphBuilder, shapes: dict[str, list], outputs: list[str]) -> None:
    """``Reshape(Reshape(x, a), b)`` → ``Reshape(x, b)`` (``b`` a constant without 0s);
    ``Reshape(x)`` to ``x``'s own shape → ``x``."""
    consts = {t.name: t for t in g.initializers}
    made_by: dict[str, onnx.NodeProto] = {}
    mapping: dict[str, str] = {}
    for node in g.nodes:
        _replace_inputs([node], mapping)
        if node.op_type == "Reshape":
            inner = made_by.get(node.input[0])
            target = consts.get(node.input[1])
            if inner is not None and inner.op_type == "Reshape" and target is not None:
                if 0 not in numpy_helper.to_array(target).tolist():
                    node.input[0] = inner.input[0]
            src, out = node.input[0], node.output[0]
            if src in shapes and out in shapes and shapes[src] == shapes[out] and out not in outputs:
                mapping[out] = src
        for o in node.output:
            made_by[o] = node
    _replace_subgraph_reads(g.nodes, mapping)


def _replace_subgraph_reads(nodes, mapping: dict[str, str]) -> None:
    for node in nodes:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _replace_inputs(attr.g.node, mapping)
                _replace_subgraph_reads(attr.g.node, mapping)


def _drop_identities(g: GraphBuilder, outputs: list[str], fixed: set[str]) -> None:
    """Skip ``Identity`` nodes; a graph output's copy becomes the value it copies, renamed."""
    mapping: dict[str, str] = {}
    out_set = set(outputs)
    for node in g.nodes:
        _replace_inputs([node], mapping)
        if node.op_type == "Identity" and node.output[0] not in out_set:
            mapping[node.output[0]] = node.input[0]
    _replace_subgraph_reads(g.nodes, mapping)
    copied: dict[str, int] = {}
    for node in g.nodes:
        if node.op_type == "Identity" and node.output[0] in out_set:
            copied[node.input[0]] = copied.get(node.input[0], 0) + 1
    produced = {o for n in g.nodes for o in n.output}
    keep = []
    for node in g.nodes:
        src = node.input[0] if node.op_type == "Identity" and node.input else None
        if (
            src is not None
            and node.output[0] in out_set
            and copied[src] == 1
            and src in produced
            and src not in fixed
            and src not in out_set
        ):
            target = node.output[0]
            _rename_everywhere(g.nodes, src, target)
            continue
        keep.append(node)
    g.nodes[:] = keep


def _consumers(nodes) -> dict[str, list]:
    uses: dict[str, list] = {}
    for node in nodes:
        for name in node.input:
            uses.setdefault(name, []).append(node)
    return uses


def _batched_matmul(g: GraphBuilder, shapes: dict[str, list], outputs: list[str]) -> None:
    """``Reshape(MatMul(Reshape(a), Reshape(b)))`` → ``MatMul(a, b)`` when the reshapes
    only merge (then split back) the same leading batch dimensions."""
    made_by = {o: n for n in g.nodes for o in n.output}
    uses = _consumers(g.nodes)
    sub_reads = used_names([n for n in g.nodes if _has_subgraph(n)])
    for node in g.nodes:
        if node.op_type != "MatMul":
            continue
        ra, rb = (made_by.get(x) for x in node.input)
        after = uses.get(node.output[0], [])
        if ra is None or rb is None or ra.op_type != "Reshape" or rb.op_type != "Reshape" or len(after) != 1:
            continue
        rc = after[0]
        if rc.op_type != "Reshape" or node.output[0] in outputs or node.output[0] in sub_reads:
            continue
        a, b, out = ra.input[0], rb.input[0], rc.output[0]
        sa, sb, so = shapes.get(a), shapes.get(b), shapes.get(out)
        sm = shapes.get(node.output[0])
        if None in (sa, sb, so, sm) or len(sa) < 3 or len(sa) != len(sb) or len(so) != len(sa):
            continue
        batch = sa[:-2]
        if sb[:-2] != batch or so[:-2] != batch or so[-2:] != [sa[-2], sb[-1]] or sm[-2:] != so[-2:]:
            continue
        node.input[0], node.input[1] = a, b
        node.output[0], rc.output[0] = out, g.fresh("unused")  # the old Reshape is now dead


def _unary_between_reshapes(g: GraphBuilder, shapes: dict[str, list], outputs: list[str]) -> None:
    """``Reshape(u(Reshape(x)))`` → ``u(x)`` for an elementwise unary ``u`` when the outer
    reshape gives ``x``'s shape back."""
    made_by = {o: n for n in g.nodes for o in n.output}
    uses = _consumers(g.nodes)
    sub_reads = used_names([n for n in g.nodes if _has_subgraph(n)])
    for node in g.nodes:
        if node.op_type not in _UNARY or len(node.input) != 1:
            continue
        inner = made_by.get(node.input[0])
        after = uses.get(node.output[0], [])
        if inner is None or inner.op_type != "Reshape" or len(after) != 1 or after[0].op_type != "Reshape":
            continue
        outer = after[0]
        x = inner.input[0]
        if node.output[0] in outputs or node.output[0] in sub_reads:
            continue
        if shapes.get(x) is None or shapes.get(x) != shapes.get(outer.output[0]):
            continue
        node.input[0] = x
        node.output[0], outer.output[0] = outer.output[0], g.fresh("unused")


#: Elementwise unary operators (shape-independent), moved across reshapes.
_UNARY = {
    "Gelu", "Relu", "Tanh", "Sigmoid", "Exp", "Log", "Neg", "Abs", "Sqrt", "Erf", "Cast", "Not",
    "Softplus", "Sin", "Cos", "Floor", "Ceil", "Round", "Reciprocal", "Sign", "IsNaN",
}  # fmt: skip


def _transpose_chains(g: GraphBuilder) -> None:
    """``Transpose(Transpose(x, p), q)`` → ``Transpose(x, p∘q)`` (identity: ``x``)."""
    made_by = {o: n for n in g.nodes for o in n.output}
    mapping: dict[str, str] = {}
    for node in g.nodes:
        _replace_inputs([node], mapping)
        if node.op_type != "Transpose":
            continue
        inner = made_by.get(node.input[0])
        if inner is None or inner.op_type != "Transpose":
            continue
        p = list(inner.attribute[0].ints) if inner.attribute else None
        q = list(node.attribute[0].ints) if node.attribute else None
        if p is None or q is None:
            continue
        composed = [p[i] for i in q]
        if composed == list(range(len(composed))):
            mapping[node.output[0]] = inner.input[0]
            continue
        node.input[0] = inner.input[0]
        del node.attribute[:]
        node.attribute.append(helper.make_attribute("perm", composed))
    _replace_subgraph_reads(g.nodes, mapping)


def _common_subexpressions(g: GraphBuilder) -> None:
    """Compute each (operator, inputs, attributes) once; later copies read the first."""
    seen: dict[tuple, list[str]] = {}
    mapping: dict[str, str] = {}
    for node in g.nodes:
        _replace_inputs([node], mapping)
        if _has_subgraph(node) or node.op_type in _NOT_FOLDED:
            continue
        key = (
            node.domain,
            node.op_type,
            tuple(node.input),
            tuple(a.SerializeToString() for a in node.attribute),
        )
        if key in seen:
            for old, new in zip(node.output, seen[key], strict=True):
                if old:
                    mapping[old] = new
        else:
            seen[key] = list(node.output)
    _replace_subgraph_reads(g.nodes, mapping)


# --------------------------------------------------------------------------- convolution epilogues


def _per_channel(shape: list[int] | None, out: list[int]) -> bool:
    """A value of ``shape`` broadcast against a ``[N, C, ...]`` result varies along ``C`` at
    most."""
    if shape is None or len(shape) > len(out):
        return False
    full = [1] * (len(out) - len(shape)) + list(shape)
    return all(d == 1 for i, d in enumerate(full) if i != 1) and full[1] in (1, out[1])


def _constant_producers(g: GraphBuilder, known: set[str]) -> dict[str, onnx.NodeProto]:
    """Nodes computed from ``known`` values only (``known`` grows with their results)."""
    producer: dict[str, onnx.NodeProto] = {}
    for node in g.nodes:
        if _has_subgraph(node) or node.op_type in _NOT_FOLDED or node.domain not in ("", "ai.onnx"):
            continue
        if any(node.input) and all(i in known for i in node.input if i):
            for o in node.output:
                if o:
                    producer[o] = node
                    known.add(o)
    return producer


def _known_values(g, names, producer, params, param_data, opset) -> dict[str, np.ndarray] | None:
    """The values of ``names`` (initializers, parameters among them, or computed from them
    by ``producer``'s nodes), computed with onnxruntime; None when it refuses."""

    inits = {t.name: t for t in g.initializers}
    direct = {}
    for v in names:
        if v in params:
            direct[v] = np.asarray(param_data(v))
        elif v in inits:
            direct[v] = numpy_helper.to_array(inits[v])
    computed = [v for v in names if v not in direct]
    if not computed:
        return direct
    ids = {id(n) for v in computed for n in _cone(v, producer)}
    nodes = [n for n in g.nodes if id(n) in ids]
    read = {i for n in nodes for i in n.input if i}
    tensors = [
        numpy_helper.from_array(np.asarray(param_data(t)), t) if t in params else inits[t]
        for t in sorted(read)
        if t in inits
    ]
    graph = helper.make_graph(nodes, "fold", [], [], tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
        types = {vi.name: vi for vi in inferred.graph.value_info}
        results = _run_constants(model, [types[v] for v in computed])
    except MissingDependencyError:
        raise
    except Exception:  # noqa: BLE001 - an optimization: what onnxruntime cannot compute stays
        return None
    return {**direct, **dict(zip(computed, results, strict=True))}


def _conv_epilogues(g, shapes, outputs, params, opset, param_data, frozen) -> None:
    """Per-channel ``Add``s and ``Mul``s after a ``Conv`` into its weight and bias (see the
    module doc)."""
    inits = {t.name for t in g.initializers}
    known = (inits - set(frozen)) if param_data is not None else (inits - set(params))
    producer = _constant_producers(g, known)
    made_by = {o: n for n in g.nodes for o in n.output}
    uses = _consumers(g.nodes)
    fixed = set(outputs) | used_names([n for n in g.nodes if _has_subgraph(n)])
    dropped: set[int] = set()
    for conv in g.nodes:
        out = shapes.get(conv.output[0]) if conv.op_type == "Conv" else None
        if out is None or len(out) < 3 or len(conv.input) < 2 or conv.input[1] in fixed:
            continue
        chain, cur = [], conv.output[0]
        while cur not in fixed and len(uses.get(cur, [])) == 1:
            node = uses[cur][0]
            if node.op_type not in ("Add", "Mul") or len(node.input) != 2 or node.input[0] == node.input[1]:
                break
            other = node.input[1] if node.input[0] == cur else node.input[0]
            if (
                other not in known
                or not _per_channel(shapes.get(other), out)
                or shapes.get(node.output[0]) != out
            ):
                break
            chain.append((node, other))
            cur = node.output[0]
        if not chain:
            continue
        folds = (param_data, frozen)
        inputs = _epilogue_inputs(g, conv, chain, made_by, uses, producer, params, folds, opset, out[1])
        if inputs is None:
            continue
        conv.input[:] = inputs
        conv.output[0] = cur
        dropped.update(id(n) for n, _ in chain)
    if dropped:
        g.nodes[:] = [n for n in g.nodes if id(n) not in dropped]


def _epilogue_inputs(g, conv, chain, made_by, uses, producer, params, folds, opset, channels):
    """The ``Conv``'s new inputs with ``chain`` (``(node, per-channel operand)`` pairs)
    folded in, or None when the chain stays (``folds``: the parameters' values by name, and
    the parameters never folded)."""
    param_data, frozen = folds
    x, w = conv.input[0], conv.input[1]
    bias = conv.input[2] if len(conv.input) > 2 and conv.input[2] else None
    if all(node.op_type == "Add" for node, _ in chain) and len(chain) == 1 and bias is None:
        reshape = made_by.get(chain[0][1])  # a [C] parameter reshaped to [1, C, 1...]
        if (
            reshape is not None
            and reshape.op_type == "Reshape"
            and reshape.input[0] in {t.name for t in g.initializers}
        ):
            source = next(t for t in g.initializers if t.name == reshape.input[0])
            if list(source.dims) == [channels]:
                return [x, w, source.name]
    scaled = any(node.op_type == "Mul" for node, _ in chain)
    if param_data is None or (scaled and (w in frozen or w not in {t.name for t in g.initializers})):
        return None
    if scaled and len(uses.get(w, [])) != 1:  # a weight read elsewhere too would be stored twice
        return None
    names = [*([w] if scaled else []), *([bias] if bias else []), *(v for _, v in chain)]
    values = _known_values(g, names, producer, params, param_data, opset)
    if values is None:
        return None
    dtype = values[chain[0][1]].dtype
    if dtype not in (np.float32, np.float16):
        return None
    scale = np.ones(channels, np.float64)
    shift = values[bias].astype(np.float64) if bias else np.zeros(channels, np.float64)
    for node, v in chain:
        arr = np.asarray(values[v], np.float64).reshape(-1)
        vec = np.broadcast_to(arr if arr.size == channels else arr[:1], (channels,))
        if node.op_type == "Add":
            shift = shift + vec
        else:
            scale, shift = scale * vec, shift * vec
    folded = [(shift.astype(dtype), f"folded:{w}:bias")]
    if scaled:
        weight = values[w]
        new_w = (weight.astype(np.float64) * scale.reshape(-1, *[1] * (weight.ndim - 1))).astype(dtype)
        folded.insert(0, (new_w, f"folded:{w}"))
    if not all(np.all(np.isfinite(arr)) for arr, _ in folded) or not np.all(np.isfinite(scale)):
        return None
    names = []
    for arr, name in folded:
        if name in g.reserved or any(t.name == name for t in g.initializers):
            name = g.fresh("folded")
        g.initializers.append(numpy_helper.from_array(arr, name))
        names.append(name)
    return [x, *(names if scaled else [w, *names])]


# --------------------------------------------------------------------------- reductions

_REDUCTIONS = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceL1"}


def _squeeze_reductions(g: GraphBuilder, shapes: dict[str, list], outputs: list[str]) -> None:
    """``Reshape(Reduce*(x, axes, keepdims=1))`` that only drops the reduced axes →
    ``Reduce*(x, axes, keepdims=0)``."""
    uses = _consumers(g.nodes)
    fixed = set(outputs) | used_names([n for n in g.nodes if _has_subgraph(n)])
    consts = {t.name: t for t in g.initializers}
    for node in g.nodes:
        if node.op_type not in _REDUCTIONS or node.output[0] in fixed:
            continue
        attrs = {a.name: a for a in node.attribute}
        if "keepdims" in attrs and attrs["keepdims"].i == 0:
            continue
        if len(node.input) > 1 and node.input[1] in consts:  # axes are an input from opset 18
            axes = numpy_helper.to_array(consts[node.input[1]]).reshape(-1).tolist()
        else:
            continue
        after = uses.get(node.output[0], [])
        src = shapes.get(node.input[0])
        if not axes or src is None or len(after) != 1 or after[0].op_type != "Reshape":
            continue
        axes = {a % len(src) for a in axes}
        reshape = after[0]
        if shapes.get(reshape.output[0]) != [d for i, d in enumerate(src) if i not in axes]:
            continue
        for a in list(node.attribute):
            if a.name == "keepdims":
                node.attribute.remove(a)
        node.attribute.append(helper.make_attribute("keepdims", 0))
        node.output[0], reshape.output[0] = reshape.output[0], g.fresh("unused")
