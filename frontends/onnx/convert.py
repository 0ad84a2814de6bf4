"""ONNX → StableHLO: ONNX nodes lower to JAX through :data:`ONNX_RULES`, and the whole graph
is lowered by :func:`converter.lowering.lower` (``jax.jit`` lowering, ``jax.export`` when a
graph input keeps a symbolic dimension) to a :class:`converter.Module`.

Follows the ONNX IR spec (https://onnx.ai/onnx/repo-docs/IR.html) and the operator pages
(https://onnx.ai/onnx/operators/).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections import defaultdict
from typing import Any

import jax
import numpy as np
import onnx
import onnx.checker
import onnx.defs
import onnx.shape_inference
from onnx import numpy_helper

from converter import dtypes, onnx_skeleton
from converter.errors import (
    ConversionError,
    DimensionsUnifiedWarning,
    MissingOp,
    OpConversionError,
    ParseError,
    UnsupportedOpError,
)
from converter.lowering import lower as lower_flat
from converter.module import Module
from converter.passes import run_passes
from converter.signature import LEAF, LeafSpec, Mutation, Signature, args_tree

from . import ops  # noqa: F401 - registers the rules
from .graph import NO_FOLD, GraphRunner, StaticValueRequired, is_known, np_dtype, topologically_sorted
from .registry import DEFAULT_DOMAIN, ONNX_RULES, canonical_domain, lookup, schema_function
from .symbolic import materialize
from .values import ValueDependentModule, ValueSpecializedModel

MAX_OPSET = onnx.defs.onnx_opset_version()
MIN_OPSET = 7


def load_model(model: str | os.PathLike | bytes | onnx.ModelProto) -> onnx.ModelProto:
    """An ``onnx.ModelProto`` from a path (external data loaded from beside it), serialized
    bytes, or a ModelProto.

    Raises:
        ParseError: the file is missing or not an ONNX model.
    """
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        if isinstance(model, bytes):
            return onnx.load_from_string(model)
        return onnx.load(os.fspath(model), load_external_data=True)
    except Exception as e:  # noqa: BLE001 - reported as a typed error naming the file
        raise ParseError(
            f"cannot read ONNX model {model if not isinstance(model, bytes) else '<bytes>'}: {e}"
        ) from e


def _walk_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _walk_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _walk_nodes(g)


def check_supported(model: onnx.ModelProto) -> None:
    """Raise one :class:`UnsupportedOpError` naming every node (name, op type, schema version)
    whose op has no rule, or whose domain's opset is outside what the converter supports."""
    opsets = {canonical_domain(o.domain): o.version for o in model.opset_import}
    local = {(canonical_domain(f.domain), f.name) for f in model.functions}
    found: dict[str, list[str]] = defaultdict(list)
    default = opsets.get(DEFAULT_DOMAIN, MAX_OPSET)
    for node in _walk_nodes(model.graph):
        domain = canonical_domain(node.domain)
        if (domain, node.op_type) in local:
            continue
        if domain == DEFAULT_DOMAIN and not MIN_OPSET <= default <= MAX_OPSET:
            found[
                f"{domain}::{node.op_type} at opset {default} (supported: {MIN_OPSET}..{MAX_OPSET})"
            ].append(node.name)
            continue
        version, rule = lookup(node.op_type, domain, opsets.get(domain, 1))
        if rule is None and schema_function(node.op_type, domain, opsets.get(domain, 1)) is None:
            found[f"{domain}::{node.op_type}-{version}"].append(node.name)
    for f in model.functions:
        for node in f.node:
            domain = canonical_domain(node.domain)
            if (domain, node.op_type) in local:
                continue
            fops = {canonical_domain(o.domain): o.version for o in f.opset_import}
            fopset = fops.get(domain, opsets.get(domain, 1))
            version, rule = lookup(node.op_type, domain, fopset)
            if rule is None and schema_function(node.op_type, domain, fopset) is None:
                found[f"{domain}::{node.op_type}-{version}"].append(f"{f.name}/{node.name}")
    if found:
        missing = [
            MissingOp(k, len(v), "nodes " + ", ".join(repr(n) for n in v[:8])) for k, v in found.items()
        ]
        raise UnsupportedOpError(missing, "ONNX frontend")


def _value_types(model: onnx.ModelProto) -> dict[str, tuple]:
    """name → (dtype, shape) for every tensor value shape inference typed. Subgraphs may
    declare a name of the outer graph again (a branch output named as the ``If``'s own
    output): such a name keeps only what all its declarations agree on (``None`` for the
    rest), so neither graph's values are checked or cast against the other's type."""
    types: dict[str, tuple] = {}

    def visit(graph: onnx.GraphProto) -> None:
        for vi in (*graph.value_info, *graph.output, *graph.input):
            t = vi.type
            if t.WhichOneof("value") != "tensor_type" or not t.tensor_type.elem_type:
                continue
            try:
                dtype = np_dtype(t.tensor_type.elem_type)
            except KeyError:  # an element type number ONNX does not define (a malformed file)
                continue
            shape = None
            if t.tensor_type.HasField("shape"):
                shape = tuple(
                    d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                    for d in t.tensor_type.shape.dim
                )
            seen = types.get(vi.name, (dtype, shape))
            if seen != (dtype, shape):  # a subgraph reuses an outer name (the checker allows it):
                # keep only what every declaration of the name agrees on
                dtype = seen[0] if seen[0] == dtype else None
                shape = seen[1] if seen[1] == shape else None
            types[vi.name] = (dtype, shape)
        for node in graph.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    visit(a.g)

    visit(model.graph)
    return types


def _same_conv_transpose_padding(node: onnx.NodeProto, dims: dict[str, tuple]) -> list[int] | None:
    """For a ConvTranspose ``node`` whose size onnx's shape inference gets wrong, the
    ``output_padding`` that makes that inference give the operator page's size; else None.

    With ``auto_pad`` SAME_UPPER/SAME_LOWER and no ``output_shape``, the ConvTranspose page
    (opsets 11 and 22) makes each output size ``input * stride``, ``output_padding`` only
    shifting the padding; onnxruntime and ``onnx.reference`` agree. onnx 1.23's inference
    (checked on 1.23.2, ``convTransposeShapeInference``) instead pads by
    ``max(k_eff - stride, 0)`` and adds ``output_padding``: it gives ``input * stride +
    output_padding`` (``k_eff >= stride``), ``input * stride + output_padding + k_eff - stride``
    otherwise (``k_eff`` the dilated kernel extent). An ``output_padding`` of
    ``max(stride - k_eff, 0)`` makes its formula give ``input * stride``. None as well when
    the kernel size is unknown (``kernel_shape`` absent, ``dims`` lacking the weight's) and
    when ``k_eff + output_padding < stride`` on an axis (the rule refuses that node: there
    onnxruntime gives a smaller size than the page)."""
    if node.op_type != "ConvTranspose" or canonical_domain(node.domain) != DEFAULT_DOMAIN:
        return None
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute if not a.ref_attr_name}
    if attrs.get("auto_pad") not in (b"SAME_UPPER", b"SAME_LOWER") or "output_shape" in attrs:
        return None
    weight = dims.get(node.input[1]) if len(node.input) > 1 else None
    k = attrs.get("kernel_shape") or (weight or ())[2:]
    if not k or not all(isinstance(v, int) for v in k):
        return None
    n = len(k)
    s = list(attrs.get("strides") or [1] * n)
    d = list(attrs.get("dilations") or [1] * n)
    op = list(attrs.get("output_padding") or [0] * n)
    if not len(s) == len(d) == len(op) == n:
        return None  # malformed: left to the rule
    k_eff = [(k[i] - 1) * d[i] + 1 for i in range(n)]
    if any(k_eff[i] + op[i] < s[i] for i in range(n)):
        return None
    fixed = [max(s[i] - k_eff[i], 0) for i in range(n)]
    return fixed if fixed != op else None


def _spec_sized(
    model: onnx.ModelProto, types: dict[str, tuple]
) -> tuple[onnx.ModelProto, dict[str, str], dict[str, tuple]] | None:
    """``model`` (the skeleton shape inference reads) changed so that onnx's shape inference
    gives the ConvTranspose nodes it gets wrong their operator page's size (see
    :func:`_same_conv_transpose_padding`; ``types`` from a first inference give the weights'
    shapes); every value computed from such a node mapped to that node's name; and the shapes
    the graph (or a subgraph) declares for its outputs among those values. None when no node
    of the graph or its subgraphs needs it (model-local functions are not changed: the size
    onnx infers for a call of one holding such a node can still fail the shape check, a
    refusal, never a wrong size). The copy drops the ``value_info`` of those values (a model saved after
    onnx's inference carries the wrong sizes there) and the declared shapes of those outputs,
    which :func:`_declared_sizes` compares with the sizes inferred anew."""
    graphs = [model.graph]  # the graph and its subgraphs, outer before inner
    for graph in graphs:
        graphs += [
            g
            for node in graph.node
            for a in node.attribute
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs))
        ]
    if not any(n.op_type == "ConvTranspose" for g in graphs for n in g.node):
        return None  # the common case: no copy
    dims = {n: t[1] for n, t in types.items() if t[1] is not None}
    dims.update({t.name: tuple(t.dims) for g in graphs for t in g.initializer})
    if not any(_same_conv_transpose_padding(n, dims) is not None for g in graphs for n in g.node):
        return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    origin: dict[str, str] = {}  # value name -> the ConvTranspose node it is computed from
    declared: dict[str, tuple] = {}  # graph output name -> its declared shape

    def visit(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            fixed = _same_conv_transpose_padding(node, dims)
            if fixed is not None:
                del node.attribute[[a.name for a in node.attribute].index("output_padding")]
                node.attribute.append(onnx.helper.make_attribute("output_padding", fixed))
                source = node.name or f"<unnamed, output {node.output[0]}>"
            else:
                source = next((origin[v] for v in node.input if v in origin), None)
            for a in node.attribute:
                for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                    visit(g)  # sees this scope's names in ``origin``
                    source = source or next((origin[o.name] for o in g.output if o.name in origin), None)
            if source is not None:
                origin.update((o, source) for o in node.output if o)
        if origin:
            kept = [vi for vi in graph.value_info if vi.name not in origin]
            if len(kept) != len(graph.value_info):
                del graph.value_info[:]
                graph.value_info.extend(kept)
            for o in graph.output:
                if o.name in origin and o.type.tensor_type.HasField("shape"):
                    declared[o.name] = tuple(
                        d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                        for d in o.type.tensor_type.shape.dim
                    )
                    o.type.tensor_type.ClearField("shape")  # inferred anew

    visit(out.graph)
    return (out, origin, declared) if origin else None


def _declared_sizes(
    types: dict[str, tuple], origin: dict[str, str], declared: dict[str, tuple], opsets: dict[str, int]
) -> dict[str, str]:
    """Check the shapes the graph declares for outputs computed from the ConvTranspose
    nodes :func:`_spec_sized` corrects (``declared``) against the shapes inference gives
    them now (in ``types``), updated in place to the two merged (inferred sizes first).
    Returns name → a note for the check of the converted value, for the declared sizes
    inference left open.

    Raises:
        OpConversionError: a declared size differs from the inferred one (naming the
            ConvTranspose node and both shapes).
    """
    notes = {}
    version, _ = lookup("ConvTranspose", DEFAULT_DOMAIN, opsets.get(DEFAULT_DOMAIN, 1))
    for name, want in declared.items():
        dtype, got = types.get(name, (None, None))
        node = origin[name]
        why = (
            f"{name!r} is computed from ConvTranspose node {node!r}, whose output the ONNX operator "
            "page sizes input * strides under auto_pad SAME_UPPER/SAME_LOWER (onnxruntime agrees); "
            "onnx 1.23's shape inference adds output_padding there, and a model saved after it "
            "declares that size"
        )
        if got is None:
            types[name] = (dtype, want)
        elif len(got) != len(want) or any(
            isinstance(g, int) and isinstance(w, int) and g != w for g, w in zip(got, want, strict=False)
        ):
            raise OpConversionError(
                f"{DEFAULT_DOMAIN}::ConvTranspose-{version}",
                f"node {node!r}",
                ValueError(
                    f"the graph declares output {name!r} with shape {want}, the operator page gives "
                    f"{got}: {why}"
                ),
            )
        else:
            types[name] = (
                dtype,
                tuple(
                    g if isinstance(g, int) or not isinstance(w, int) else w
                    for g, w in zip(got, want, strict=True)
                ),
            )
        if got is None or any(
            isinstance(w, int) and not isinstance(g, int) for g, w in zip(got, want, strict=True)
        ):
            notes[name] = f" (declared by the graph: {why})"
    return notes


def _input_shape(
    vi: onnx.ValueInfoProto,
    dims: dict[str, int],
    shapes: dict[str, tuple],
    aliases: dict[str, str] | None = None,
) -> tuple:
    """The shape of graph input ``vi``: ``input_shapes`` when given, else its dimensions with
    ``dims`` substituted; a dimension left symbolic is its ``dim_param`` name (or
    ``<input>_<axis>`` when unnamed), renamed by ``aliases`` (dimensions assumed equal)."""
    if vi.name in shapes:
        return tuple(int(d) for d in shapes[vi.name])
    out: list = []
    for i, d in enumerate(vi.type.tensor_type.shape.dim):
        if d.HasField("dim_value"):
            out.append(d.dim_value)
        elif d.dim_param and d.dim_param in dims:
            out.append(int(dims[d.dim_param]))
        else:
            name = d.dim_param or f"{vi.name}_{i}"
            out.append((aliases or {}).get(name, name))
    return tuple(out)


def _unify(graph: onnx.GraphProto, aliases: dict[str, str], pairs: list[tuple[str, str]]) -> dict[str, str]:
    """``aliases`` with each pair of dimension names made one (the name of the earlier graph
    input kept: ``attention_mask``'s ``s6`` becomes ``input_ids``' ``s33``); the same
    ``aliases`` when no pair adds anything."""
    order = {
        d.dim_param: i
        for i, vi in reversed(list(enumerate(graph.input)))
        for d in vi.type.tensor_type.shape.dim
        if d.dim_param
    }
    out = dict(aliases)
    for a, b in pairs:
        a, b = out.get(a, a), out.get(b, b)
        if a == b:
            continue
        keep, drop = sorted((a, b), key=lambda n: (order.get(n, len(order)), n))
        out = {k: keep if v == drop else v for k, v in out.items()}
        out[drop] = keep
    return out


def _check_dims(graph: onnx.GraphProto, dims: dict[str, int], skip: set[str]) -> None:
    """Raise when ``dims`` names a dimension no graph input (other than those in ``skip``:
    initializers, static inputs) has as its ``dim_param``, or gives one a size that is not a
    non-negative integer.

    Raises:
        ConversionError: names the unknown dimensions and the graph inputs' ``dim_param``s.
    """
    known = sorted(
        {
            d.dim_param
            for vi in graph.input
            if vi.name not in skip
            for d in vi.type.tensor_type.shape.dim
            if d.dim_param and not d.HasField("dim_value")
        }
    )
    unknown = sorted(set(dims) - set(known))
    if unknown:
        raise ConversionError(
            f"dims: unknown symbolic dimension(s) {unknown}; the graph inputs' symbolic "
            f"dimensions (dim_param) are {known}"
        )
    bad = {
        k: v for k, v in dims.items() if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0
    }
    if bad:
        raise ConversionError(f"dims: sizes must be non-negative integers, got {bad}")


def _symbols(specs: list[LeafSpec]) -> dict[str, Any]:
    """``jax.export`` symbolic dimensions for the symbolic dimension names of ``specs`` (one
    scope: the same name is the same size)."""
    names = sorted({d for s in specs for d in s.shape if isinstance(d, str)})
    if not names:
        return {}
    idents = [_identifier(n) for n in names]
    dims = jax.export.symbolic_shape(", ".join(idents), scope=jax.export.SymbolicScope())
    return dict(zip(names, dims, strict=True))


#: The ``metadata_props`` entry our ONNX backend writes (``converter.backends.onnx.realpairs``): JSON
#: naming the complex inputs/outputs it carries as float ``S + [2]`` real pairs.
COMPLEX_AS_REAL_KEY = "converter.complex_as_real"


def _complex_as_real(model: onnx.ModelProto) -> dict[str, list[str]]:
    for prop in model.metadata_props:
        if prop.key == COMPLEX_AS_REAL_KEY:
            return json.loads(prop.value)
    return {}


def _identifier(name: str) -> str:
    ident = re.sub(r"\W", "_", name)
    return ident if ident and not ident[0].isdigit() else f"d_{ident}"


def from_onnx(
    model: str | os.PathLike | bytes | onnx.ModelProto,
    *,
    dims: dict[str, int] | None = None,
    input_shapes: dict[str, tuple] | None = None,
    static_inputs: dict[str, Any] | None = None,
    check: bool = True,
    values_at_call: bool = True,
) -> Module | ValueSpecializedModel:
    """Convert an ONNX model to a :class:`converter.Module`, or to a
    :class:`~converter.frontends.onnx.values.ValueSpecializedModel` when its shapes are computed from
    the values of graph inputs (see ``values_at_call``).

    The module's ``@main`` takes the initializers first (as parameters named after them,
    ``kind="parameter"``), then large floating-point tensors computed at conversion time
    (``kind="constant"``, named after the value; see :data:`LIFT_MIN_ELEMENTS`), then the
    graph inputs that are not initializers, in graph order (call ``f(*inputs)``); it returns
    a tuple of the graph outputs, in graph order (a sequence output is a list of arrays, an
    empty optional None). Initializers whose values a rule needs at conversion time (small
    integer shapes and axes, float ``Resize`` scales...) are folded into the program, as
    ``torch.onnx`` constants would be: their signature entries are ``kind="constant"`` and
    dead-argument elimination drops their ``@main`` arguments (``signature.kept_var_idx``),
    except for buffers the model updates (``converter.updates`` metadata), which always stay
    arguments.

    Args:
        model: a path (external data is loaded from beside it), serialized bytes or a
            ``ModelProto``.
        dims: a concrete size for symbolic dimensions (``dim_param``) of the graph inputs,
            e.g. ``{"batch": 1}``: the module is specialized to those sizes (the signature
            records them as ints). A symbolic dimension without a size stays dynamic: the
            signature records its name, the StableHLO is shape-polymorphic (``jax.export``
            symbolic shapes; one name is one size), ``to_jax`` runs any size and
            ``to_torch(input_shapes=...)`` specializes. A name no graph input has raises.
        input_shapes: full concrete shapes per input name (overrides ``dims``).
        static_inputs: graph inputs to fold in as constants (name → array), for models
            whose shapes, axes or trip counts are computed from inputs.
        check: run ``onnx.checker.check_model`` first.
        values_at_call: when a shape, axes, count or size is computed from graph inputs
            not in ``static_inputs`` (``Reshape`` with a shape input, ``TopK`` with a ``k``
            input...), return a :class:`converter.frontends.onnx.values.ValueSpecializedModel` (not a
            Module: it has no single StableHLO program) whose ``to_jax``/``to_torch``
            specialize on those inputs' values at call time (cached per value, as
            ``jax.jit``'s static arguments) and whose ``specialize_values`` gives the Module
            of given values; False raises :class:`StaticValueRequired` instead.

    Raises:
        ParseError: unreadable file, or ``onnx.checker`` rejects the graph.
        UnsupportedOpError: one error naming every node (name, op type, schema version)
            without a lowering, or whose opset is outside 7..``onnx.defs.onnx_opset_version()``.
        StaticValueRequired: a shape/axes input depends on a graph input, with
            ``values_at_call=False`` (see ``static_inputs``).
        OpConversionError: a rule failed; names the node, its op type and version (also
            when a rule needs the value of a symbolic dimension: give it a size with ``dims``).
        ConversionError: inputs of a type StableHLO cannot hold (strings, sequences), or
            ``dims`` names a dimension no graph input has (the message lists those it has).
    """
    path = model if isinstance(model, (str, os.PathLike)) else None
    model = topologically_sorted(load_model(model))
    fold: frozenset[str] = frozenset()
    aliases: dict[str, str] = {}
    while True:
        try:
            module = _from_onnx(model, path, dims, input_shapes, static_inputs, check, fold, aliases)
        except OpConversionError as e:
            more = _unify(model.graph, aliases, getattr(e, "dim_pairs", []))
            if more == aliases:
                raise
            aliases, check = more, False  # the graph relates dimensions named apart: one name
            continue
        except StaticValueRequired as e:
            more = _initializers_needed(model.graph, e.names, static_inputs) - fold
            if more:  # a rule needs an initializer's value (e.g. float Resize scales): fold it
                fold, check = fold | more, False
                continue
            if not values_at_call:
                raise
            return _value_dependent(model, e, dims, input_shapes, static_inputs)
        if aliases:
            equal = ", ".join(f"{a} == {b}" for a, b in sorted(aliases.items()))
            warnings.warn(
                f"from_onnx: the graph relates dimensions its inputs name apart; assumed {equal} "
                "(the converted module refuses inputs where they differ: SignatureMismatchError); "
                "give them one dim_param, or sizes with dims=, to silence this",
                DimensionsUnifiedWarning,
                stacklevel=3,
            )
            module.meta["unified_dims"] = dict(sorted(aliases.items()))
        return module


def _initializers_needed(graph: onnx.GraphProto, names: list[str], static_inputs: dict | None) -> set[str]:
    """The initializers the values ``names`` come from, when they come from no graph input
    outside ``static_inputs`` (then folding those initializers makes the values static);
    otherwise the empty set."""
    from .values import value_sources

    inits = {t.name for t in graph.initializer}
    runtime = {vi.name for vi in graph.input} - inits - set(static_inputs or ())
    found = value_sources(graph, names, inits | runtime)
    return set() if found & runtime else found


def _value_dependent(
    model: onnx.ModelProto,
    error: StaticValueRequired,
    dims: dict[str, int] | None,
    input_shapes: dict[str, tuple] | None,
    static_inputs: dict[str, Any] | None,
) -> ValueSpecializedModel:
    """The :class:`~converter.frontends.onnx.values.ValueSpecializedModel` of ``model``, whose
    conversion raised ``error``: the graph inputs it comes from are value inputs (re-raised
    when it comes from none, a value computed from symbolic dimensions, or when a graph input
    or output is a sequence or optional, which it does not take)."""
    from .values import graph_input_sources

    graph = model.graph
    params = {t.name: _weight_array(t, None) for t in graph.initializer}
    given = {k: _static(v) for k, v in (static_inputs or {}).items()}
    runtime = [vi for vi in graph.input if vi.name not in params and vi.name not in given]
    sources = graph_input_sources(graph, error.names, {vi.name for vi in runtime})
    if not sources or any(
        vi.type.WhichOneof("value") != "tensor_type" for vi in (*graph.input, *graph.output)
    ):
        raise error  # from symbolic dimensions, or sequence/optional values (not specialized)
    inputs = tuple(
        LeafSpec(
            vi.name,
            _input_shape(vi, dims or {}, input_shapes or {}),
            _dtype_name(np_dtype(vi.type.tensor_type.elem_type), vi.name),
        )
        for vi in runtime
    )
    outputs = tuple(
        LeafSpec(
            vi.name,
            tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in vi.type.tensor_type.shape.dim
            ),
            _dtype_name(np_dtype(vi.type.tensor_type.elem_type), vi.name),
            "output",
        )
        for vi in graph.output
    )
    signature = Signature(
        params=tuple(
            LeafSpec(n, tuple(v.shape), _dtype_name(v.dtype, n), "parameter") for n, v in params.items()
        ),
        inputs=inputs,
        outputs=outputs,
        in_tree=args_tree({"kind": "tuple", "children": [LEAF] * len(inputs)}, _EMPTY_DICT),
        out_tree={"kind": "tuple", "children": [LEAF] * len(outputs)},
    )

    def convert(values: dict[str, np.ndarray]) -> Module:
        return from_onnx(
            model,
            dims=dims,
            input_shapes=input_shapes,
            static_inputs={**given, **values},
            check=False,
            values_at_call=False,
        )

    meta = {"onnx_version": onnx.__version__, "producer": model.producer_name, "graph": graph.name}
    return ValueSpecializedModel(model, signature, params, sources, convert, meta)


def _from_onnx(
    model: onnx.ModelProto,
    path: Any,
    dims: dict[str, int] | None,
    input_shapes: dict[str, tuple] | None,
    static_inputs: dict[str, Any] | None,
    check: bool,
    fold: frozenset[str] = frozenset(),
    aliases: dict[str, str] | None = None,
) -> Module:
    """:func:`from_onnx` of a loaded model, raising :class:`StaticValueRequired`; the
    initializers in ``fold`` are used as constants besides the small integer ones."""
    skeleton = onnx_skeleton.skeleton(model)  # what the checker and shape inference read, without big weights
    if check:
        try:
            onnx.checker.check_model(skeleton)
        except Exception as e:  # noqa: BLE001 - onnx.checker raises ValidationError and others
            raise ParseError(f"invalid ONNX model{f' {path}' if path else ''}: {e}") from e
    check_supported(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(skeleton, data_prop=True)
    except Exception:  # noqa: BLE001 - inference is an aid; conversion proceeds without it
        inferred = model
    types = _value_types(inferred)
    opsets = {canonical_domain(o.domain): o.version for o in model.opset_import}
    notes: dict[str, str] = {}
    spec_sized = _spec_sized(skeleton, types)
    if spec_sized is not None:  # onnx 1.23 sizes some SAME_* ConvTranspose off the page: redo
        skeleton, origin, declared = spec_sized
        try:
            inferred = onnx.shape_inference.infer_shapes(skeleton, data_prop=True)
        except Exception:  # noqa: BLE001 - as above
            inferred = skeleton
        types = _value_types(inferred)
        notes = _declared_sizes(types, origin, declared, opsets)
    functions = {(canonical_domain(f.domain), f.name): f for f in model.functions}
    runner = GraphRunner(opsets, types, functions)
    runner.shape_notes = notes

    graph = model.graph
    init_names = [t.name for t in graph.initializer]
    params = {t.name: _weight_array(t, path) for t in graph.initializer}
    static_inputs = {k: _static(v) for k, v in (static_inputs or {}).items()}
    state = _state_targets(model)  # updated by the model: never a constant
    baked = {n for n, v in params.items() if (_foldable(v) or n in fold) and n not in state}
    stats = _statistics(graph, set(params)) - baked
    param_specs = [
        LeafSpec(
            n,
            tuple(v.shape),
            _dtype_name(v.dtype, n),
            "constant" if n in baked else "buffer" if n in stats else "parameter",
        )
        for n, v in params.items()
    ]
    _check_dims(graph, dims or {}, set(params) | set(static_inputs))
    input_specs: list[LeafSpec] = []
    problems: list[str] = []
    for vi in graph.input:
        if vi.name in params or vi.name in static_inputs:
            continue
        vtype = vi.type
        if vtype.WhichOneof("value") == "optional_type" and vtype.optional_type.elem_type.HasField(
            "tensor_type"
        ):
            vtype = vtype.optional_type.elem_type  # a present optional tensor is a tensor input
            vi = onnx.helper.make_value_info(vi.name, vtype)
        if vtype.WhichOneof("value") != "tensor_type":
            problems.append(f"input {vi.name!r} is a {vi.type.WhichOneof('value')}, not a tensor")
            continue
        shape = _input_shape(vi, dims or {}, input_shapes or {}, aliases)
        input_specs.append(
            LeafSpec(vi.name, shape, _dtype_name(np_dtype(vi.type.tensor_type.elem_type), vi.name))
        )
    if problems:
        raise ConversionError("cannot convert the graph inputs:\n  " + "\n  ".join(problems))
    for spec in input_specs:  # inputs' concrete shapes let the checks use them
        dtype = dtypes.to_numpy(spec.dtype)
        types[spec.name] = (dtype, spec.shape)
    symbols = _symbols(input_specs)
    runner.symbols = symbols
    # complex values our ONNX backend carries as real pairs become complex again
    paired = _complex_as_real(model)
    paired_in, paired_out = set(paired.get("inputs", ())), set(paired.get("outputs", ()))
    input_specs = [
        LeafSpec(s.name, s.shape[:-1], "complex64" if s.dtype == "float32" else "complex128")
        if s.name in paired_in
        else s
        for s in input_specs
    ]
    known = dict(static_inputs)
    known.update({n: params[n] for n in baked})
    folded = _fold_nodes(runner, graph, known)
    lifted = _lifted(graph, known, folded)
    param_specs += [
        LeafSpec(n, tuple(known[n].shape), _dtype_name(known[n].dtype, n), "constant") for n in lifted
    ]
    params.update({n: known[n] for n in lifted})
    runner.lifted = {n: known[n] for n in lifted}
    arg_names = [*init_names, *lifted]
    remaining = [n for n in graph.node if not all(o in folded for o in n.output if o)]
    outputs: list = []

    def fn(*flat):
        env: dict[str, Any] = dict(known)
        env.update(zip(arg_names, flat[: len(arg_names)], strict=False))
        env.update({n: params[n] for n in baked})
        user = [
            jax.numpy.stack([v.real, v.imag], axis=-1) if s.name in paired_in else v
            for s, v in zip(input_specs, flat[len(arg_names) :], strict=False)
        ]
        env.update(zip((s.name for s in input_specs), user, strict=False))
        runner.env = env
        runner.run_nodes(remaining, env)
        outs = [
            jax.lax.complex(env[o.name][..., 0], env[o.name][..., 1]) if o.name in paired_out else env[o.name]
            for o in graph.output
        ]
        trees, names, flat_out = [], [], []
        for vi, o in zip(graph.output, outs, strict=True):
            if o is None:
                trees.append({"kind": "none"})
            elif isinstance(o, list):
                trees.append({"kind": "list", "children": [LEAF] * len(o)})
                names += [f"{vi.name}[{i}]" for i in range(len(o))]
                flat_out += o
            else:
                trees.append(LEAF)
                names.append(vi.name)
                flat_out.append(o)
        outputs[:] = [trees, names]
        return tuple(jax.numpy.asarray(materialize(o)) for o in flat_out)

    avals = [
        jax.ShapeDtypeStruct(tuple(symbols.get(d, d) for d in s.shape), dtypes.to_numpy(s.dtype))
        for s in (*param_specs, *input_specs)
    ]
    # symbolic: shape-polymorphic StableHLO, as jax.export writes it
    ir_module, out_avals = lower_flat(fn, avals, symbolic=bool(symbols), filename=graph.name or "<onnx>")
    trees, names = outputs
    output_specs = [
        LeafSpec(
            n, tuple(d if isinstance(d, int) else str(d) for d in a.shape), dtypes.name_of(a.dtype), "output"
        )
        for n, a in zip(names, out_avals, strict=True)
    ]
    signature = Signature(
        params=tuple(param_specs),
        inputs=tuple(input_specs),
        outputs=tuple(output_specs),
        in_tree=args_tree({"kind": "tuple", "children": [LEAF] * len(input_specs)}, _EMPTY_DICT),
        out_tree={"kind": "tuple", "children": trees},
    )
    signature = _state_updates(model, signature, {p.name for p in param_specs})
    meta = {
        "onnx_version": onnx.__version__,
        "opset_import": {d: v for d, v in opsets.items()},
        "producer": model.producer_name,
        "graph": graph.name,
    }
    if dims:
        meta["specialized_dims"] = dict(dims)
    if symbols:
        meta["dynamic_dims"] = sorted(symbols)
    if static_inputs:
        meta["static_inputs"] = sorted(static_inputs)
    return run_passes(Module(ir_module, signature, params, source="onnx", meta=meta))


def _weight_array(t: onnx.TensorProto, path: Any) -> np.ndarray:
    """The initializer's value (``numpy_helper.to_array``).

    Raises:
        ParseError: its data does not fit its dims (what the checker checks of the
            initializers :func:`converter.onnx_skeleton.skeleton` leaves out), naming it.
    """
    try:
        return numpy_helper.to_array(t)
    except ValueError as e:
        where = f" {path}" if path else ""
        raise ParseError(
            f"invalid ONNX model{where}: initializer {t.name!r} does not fit dims {list(t.dims)}: {e}"
        ) from e


def _updates_record(model: onnx.ModelProto) -> dict[str, Any]:
    """The ``converter.updates`` metadata entry of a model written by
    :func:`converter.backends.onnx.to_onnx` (``{updated output name: mutation}``; empty if none)."""
    props = {p.key: p.value for p in model.metadata_props}
    return json.loads(props.get("converter.updates", "{}"))


def _statistics(graph: onnx.GraphProto, inits: set[str]) -> set[str]:
    """Initializers that are BatchNormalization's ``input_mean``/``input_var`` (inputs 3 and
    4, onnx.ai/onnx/operators/onnx__BatchNormalization) and feed nothing else: running
    statistics, not trained by gradient (kind ``buffer``)."""
    stats, other = set(), set()
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in inits:
                (
                    stats
                    if node.op_type == "BatchNormalization" and node.domain in ("", "ai.onnx") and i >= 3
                    else other
                ).add(name)
    return stats - other


def _state_targets(model: onnx.ModelProto) -> set[str]:
    """The names of the buffers and inputs the model updates (:func:`_updates_record`):
    their initializers hold the first call's state."""
    return {Mutation.from_json(r).target for r in _updates_record(model).values()}


def _state_updates(model: onnx.ModelProto, signature: Signature, params: set[str]) -> Signature:
    """A model written by :func:`converter.backends.onnx.to_onnx` from a module that updates state
    records its trailing ``updated:<target>`` outputs in the ``converter.updates``
    metadata entry; they become ``signature.mutations`` again (a buffer target that is not
    an initializer here stays an ordinary output)."""
    record = _updates_record(model)
    names = [o.name for o in signature.outputs]
    tail = []
    for name in reversed(names):
        if name not in record or len(tail) == len(signature.out_tree["children"]):
            break
        tail.append(name)
    tail.reverse()
    mutations = [Mutation.from_json(record[n]) for n in tail]
    inputs = {s.name for s in signature.inputs}
    if not mutations or any(m.target not in (params if m.kind == "buffer" else inputs) for m in mutations):
        return signature
    children = signature.out_tree["children"]  # one per graph output; the updates are leaves
    out_tree = {"kind": "tuple", "children": children[: len(children) - len(tail)]}
    return signature.replace(out_tree=out_tree, mutations=tuple(mutations))


#: Floating-point values computed at conversion time with at least this many elements become
#: parameters (``kind="constant"``) instead of literals in the StableHLO.
LIFT_MIN_ELEMENTS = 1024


def _fold_nodes(runner: GraphRunner, graph: onnx.GraphProto, known: dict[str, Any]) -> set[str]:
    """Evaluate, before tracing, every top-level node whose inputs are all known at conversion
    time (initializers used as constants, ``Constant``, ``ConstantOfShape`` of a known shape,
    and their consumers), adding the outputs to ``known``; returns the names so computed.

    A node that fails here is left to the traced pass, which reports the error naming it."""
    folded: set[str] = set()
    runner.env = known
    for node in graph.node:
        if node.op_type in NO_FOLD or any(
            a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute
        ):
            continue
        if not all(n in known for n in node.input if n):
            continue
        try:
            with jax.enable_x64(True):
                outs = runner.run_node(node, [known[n] if n else None for n in node.input], known)
        except Exception:  # noqa: BLE001 - re-raised by the traced pass, naming the node
            continue
        if not all(is_known(o) for o in outs):
            continue
        for name, value in zip(node.output, outs, strict=False):
            if name:
                known[name] = value
                folded.add(name)
    return folded


def _lifted(graph: onnx.GraphProto, known: dict[str, Any], folded: set[str]) -> list[str]:
    """Folded floating-point tensors of at least :data:`LIFT_MIN_ELEMENTS` elements that the
    traced graph uses (as a node input or a graph output): they become parameters of kind
    ``constant``, in the order they were computed.

    Besides keeping large literals out of the StableHLO text, this keeps weights computed from
    fills (``ConstantOfShape``, as in ONNX's light test models) from reaching XLA as splat
    constants: XLA CPU rewrites those as a broadcast scalar, and its YNNPACK reduce fusion of a
    dot/convolution whose kernel is a broadcast scalar computes wrong values (see
    ``tests/frontends/onnx/xla_cpu_repro.py``)."""
    used = {n for node in graph.node if not all(o in folded for o in node.output if o) for n in node.input}
    used |= {o.name for o in graph.output}
    out = []
    for name in known:
        value = known[name]
        if (
            name in folded
            and name in used
            and isinstance(value, np.ndarray)
            and value.size >= LIFT_MIN_ELEMENTS
            and jax.numpy.issubdtype(value.dtype, jax.numpy.inexact)
        ):
            out.append(name)
    return out


def _static(value: Any) -> Any:
    """A static input: an array, a sequence (list) of arrays, or None (empty optional)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [np.asarray(v) for v in value]
    return np.asarray(value)


def _foldable(value: np.ndarray) -> bool:
    """Small integer initializers (shapes, axes, indices) are constants of the program, so
    rules can read them at conversion time (``kind="constant"`` in the signature)."""
    return value.dtype.kind in "iub" and value.size <= 4096


_EMPTY_DICT = {"kind": "dict", "keys": [], "children": []}


def _dtype_name(dtype: np.dtype, name: str) -> str:
    """The canonical name of ``dtype`` (of the value ``name``); raises ConversionError for one
    StableHLO has no element type for (strings: NumPy ``object``)."""
    out = dtypes.name_of(dtype)
    if out not in dtypes.NAME_TO_MLIR:
        raise ConversionError(f"{name!r} has dtype {dtype}, which StableHLO cannot hold")
    return out


def supported_ops() -> dict[tuple[str, str], list[int]]:
    """``(domain, op_type)`` → the schema versions with a rule (for docs/onnx.md)."""
    out: dict[tuple[str, str], list[int]] = defaultdict(list)
    for d, op, v in ONNX_RULES.keys():
        out[(d, op)].append(v)
    return {k: sorted(v) for k, v in sorted(out.items())}


__all__ = [
    "MAX_OPSET",
    "ONNX_RULES",
    "StaticValueRequired",
    "ValueDependentModule",
    "ValueSpecializedModel",
    "check_supported",
    "from_onnx",
    "load_model",
    "supported_ops",
]
