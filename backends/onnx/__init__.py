"""StableHLO → ONNX: interpret a :class:`converter.Module` op by op into ONNX nodes.

Parameters become initializers named after ``signature.params``; user inputs become graph
inputs named by their argument paths (``args[0]``); outputs are named by the output leaf
names. The model targets the default domain at ``opset`` (18 unless asked) and passes
``onnx.checker.check_model(full_check=True)``.

Shape-polymorphic modules (``tensor<?x...>``: ``from_onnx`` of a model whose inputs keep a
``dim_param``, ``from_jax`` with symbolic dimensions) stay dynamic: graph inputs and outputs
keep the signature's dimension names as ``dim_param``s, and the shape computations lower to
ONNX ``Shape``/``Expand``/``Reshape``/``Range``/``Slice`` (:mod:`converter.backends.onnx.ops.dynamic`).
Ops whose rules need static shapes raise :class:`DynamicShapeError` (``Module.specialize``
first).

ONNX has no host placement: it is stripped (:func:`converter.passes.placement.strip_placement`,
a :class:`~converter.passes.placement.PlacementStrippedWarning`) and the module's recorded
warnings are kept in the model's ``metadata_props`` under ``converter.warnings``.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import onnx
from jaxlib.mlir import ir
from onnx import helper, numpy_helper

from converter import dtypes, mlir, onnx_skeleton
from converter.errors import MissingOp, UnsupportedOpError
from converter.fileio import atomic_path, staging_dir
from converter.interpreter import Interpreter
from converter.module import Module
from converter.passes import Pass, prepare, strip_placement_for
from converter.weights import ALIGN, external_threshold

from . import ops, patterns, widen  # noqa: F401 - ops registers the rules
from .graph import ONNX_DTYPE, GraphBuilder, live, onnx_dtype
from .ops import complex as complex_ops
from .realpairs import COMPLEX_AS_REAL_KEY
from .registry import DYNAMIC_SHAPES, ONNX_RULES
from .simplify import require_runtime, simplify

#: the passes this backend runs on the module it is given, at :func:`to_onnx`
#: (:func:`converter.passes.prepare`): ONNX cannot place computation on the host, so host
#: placement is removed (warning :class:`~converter.passes.placement.PlacementStrippedWarning`)
PREPARE: list[Pass] = [strip_placement_for("onnx")]

DEFAULT_OPSET = 18
MAX_OPSET = 26  # ONNX BitCast's opset; onnxruntime 1.32 runs the models up to it
IR_VERSION = 10  # what onnxruntime 1.31 reads; opsets past 23 get the IR version they need
TWO_GB = 2**31
WARNINGS_KEY = "converter.warnings"  # metadata_props entry: the module's recorded warnings
UPDATES_KEY = "converter.updates"  # metadata_props entry: outputs that are new state values


class DynamicShapeError(UnsupportedOpError):
    """A shape-polymorphic module uses ops the ONNX backend lowers only for static shapes
    (or not at all) on dynamic dimensions. The message names every such op (count, first
    location) and the ``Module.specialize`` call that makes the module static."""

    def __init__(self, missing, specialize: str):
        super().__init__(missing, "ONNX backend for dynamic shapes")
        self.args = (f"{self.args[0]}\nspecialize the module first: {specialize}",)


def _without_onnx_type(op) -> str | None:
    """The first element type of ``op``'s tensor operands and results that the backend has no
    ONNX type for (``int4``, ``float8_e4m3``, ``float6_e2m3fn``...: onnxruntime computes with
    none of them), or None. Such ops are refused by name, as ``stablehlo.add[int4]``."""
    for v in (*op.operands, *op.results):
        if isinstance(v.type, ir.RankedTensorType):
            try:
                name = mlir.tensor_type(v.type).dtype
            except KeyError:
                return str(ir.RankedTensorType(v.type).element_type)
            if name not in ONNX_DTYPE:
                return name
    return None


class OnnxInterpreter(Interpreter):
    """Emits ONNX nodes with :data:`converter.backends.onnx.registry.ONNX_RULES`; values are ONNX
    value names and ``graph`` is the builder being written."""

    registry = ONNX_RULES
    direction = "ONNX backend"

    def __init__(self, module, opset: int = DEFAULT_OPSET):
        super().__init__(module)
        self.graph = GraphBuilder(itertools.count())
        self.opset = opset  # the target opset: rules pick operators by it (BitCast from 26)
        self.patterns: dict = {}  # root value -> patterns.Match (set by to_onnx(optimize=True))

    def dispatch_key(self, op) -> str:
        """The op's key; ``<key>[complex]`` (:func:`converter.backends.onnx.ops.complex.complex_key`)
        for an op with a complex operand or result, whose values travel as real pairs."""
        key = super().dispatch_key(op)
        narrow = _without_onnx_type(op)
        if narrow is not None:  # no rule has this key: check_supported names the op and type
            return f"{key}[{narrow}]"
        if key not in complex_ops.PASS_THROUGH and complex_ops.touches_complex(op):
            return complex_ops.complex_key(key)
        return key

    def static_operand(self, op, index: int) -> np.ndarray | None:
        """As :meth:`Interpreter.static_operand`; a complex value read through a
        :class:`~converter.backends.onnx.ops.complex.ComponentView` gives that view's part."""
        value = super().static_operand(op, index)
        component = getattr(op, "component", None)
        if value is not None and component is not None and np.iscomplexobj(value):
            value = value.imag if component else value.real
        return value

    def run_op(self, op, operands, env):
        """Ops on bfloat16 compute in float32 (:mod:`converter.backends.onnx.widen`); ops on complex
        values go to their real-pair rules (:mod:`converter.backends.onnx.ops.complex`)."""
        empty = self._empty_results(op)
        if empty is not None:
            return empty
        match = self.patterns.get(op.results[0]) if len(op.results) == 1 else None
        if match is not None and all(v is None or v in env for v in match.inputs):
            return [self._emit_pattern(op, match, env)]
        if complex_ops.touches_complex(op) or not widen.needs_widening(op):
            return super().run_op(op, operands, env)
        return widen.run_widened(
            self, op, operands, lambda view, xs: super(OnnxInterpreter, self).run_op(view, xs, env)
        )

    def _emit_pattern(self, op, match, env) -> str:
        """The ONNX operator of a matched pattern (:mod:`converter.backends.onnx.patterns`)."""
        g = self.graph
        inputs = [None if v is None else env[v] for v in match.inputs]
        if match.op_type == "LayerNormalization":
            x, scale, bias = inputs
            axis = match.attrs["axis"]
            if scale is None:
                shape = op.result_type.shape[axis:]
                scale = g.const(np.ones(shape, dtypes.to_numpy(op.result_type.dtype)))
            inputs = [x, scale] + ([bias] if bias is not None else [])
        attrs = dict(match.attrs)
        if match.op_type == "ReduceMean":  # axes are an input from opset 18
            inputs = [*inputs, g.ints(attrs.pop("axes"))]
        return g.op(match.op_type, inputs, **attrs)

    def _empty_results(self, op) -> list[str] | None:
        """Initializers for an op whose results all have static shapes with no elements
        (``jnp.zeros((0,))``, a concatenation's empty piece...): there is nothing to compute,
        and ONNX Runtime's ``Expand`` to a 0-sized dimension infers size 1 instead."""
        ranked = all(isinstance(r.type, ir.RankedTensorType) for r in op.results)
        if not op.results or op.regions or not ranked:
            return None
        types = op.result_types
        if not all(None not in t.shape and 0 in t.shape for t in types):
            return None
        types = [complex_ops.pair_type(t) for t in types]
        return [self.graph.const(np.zeros(t.shape, dtypes.to_numpy(t.dtype)), hint="empty") for t in types]


def to_onnx(
    module: Module,
    *,
    opset: int = DEFAULT_OPSET,
    check: bool = True,
    interpreter: type[OnnxInterpreter] | None = None,
    path: str | os.PathLike | None = None,
    external_data: bool | None = None,
    optimize: bool = True,
) -> onnx.ModelProto:
    """Convert a :class:`converter.Module` to an ONNX model.

    Args:
        module: the module. Every user input of the full signature becomes a graph input,
            also those dead-argument elimination dropped (they are unused); parameters become
            initializers, except those the graph never reads (pruned with the dead nodes: a
            state buffer that is overwritten before it is read has an ``updated:`` output but
            no initializer).
        opset: the default-domain opset to target (18 to 26). ``bitcast_convert`` of floats
            to integers, and between widths, needs 26 (ONNX ``BitCast``).
        check: run ``onnx.checker.check_model(full_check=True)``: on the file when ``path``
            is given, else in memory on the graph with its large floating initializers as
            typed inputs (:func:`converter.onnx_skeleton.skeleton`: the weights are not
            serialized; skipped when even that takes 2 GB, which protobuf cannot serialize
            in one piece: pass ``path``).
        interpreter: an :class:`OnnxInterpreter` subclass to emit with (bisection uses one
            that records the ONNX value name of every op's results).
        path: also write the model there (atomically). With ``external_data`` (default:
            when the parameters take 2 GB, or ``$CONVERTER_EXTERNAL_THRESHOLD`` bytes, or
            more) the parameters go to ``<path>.data`` beside it, streamed from their
            arrays (no copy in memory), 64-byte aligned; the returned model then refers
            to that file (``onnx.load(path)`` and
            ``onnxruntime.InferenceSession(path)`` read it) and holds no weights itself.
        optimize: emit idiomatic ONNX (default): multi-op patterns as one operator
            (:mod:`converter.backends.onnx.patterns`) and the graph clean-ups of
            :mod:`converter.backends.onnx.simplify` (constants folded, implicit broadcasting, no
            reshape chains or copies), all exact. Integer buffers the model never updates
            count as constants there (what is computed from them alone is folded). A
            per-channel scale and shift after a ``Conv`` (eval-mode batch norm) are folded
            into its weight and bias, which become ``folded:<weight>`` initializers in
            place of those parameters (exact up to float32 rounding).
            ``False`` emits each op's node group as it is (for debugging a rule).

    A shape-polymorphic module gives a model of the same dynamism: the graph inputs and
    outputs have ``dim_param``s named as the signature's dynamic dimensions (``"N"``), and
    ``get_dimension_size``, ``dynamic_broadcast_in_dim``, ``dynamic_reshape``,
    ``dynamic_iota``, ``dynamic_pad``, ``real_dynamic_slice`` and the one-slice
    ``dynamic_gather`` are computed with ONNX ``Shape`` and friends; ``custom_call
    @shape_assertion`` is dropped (ONNX has no assertions).

    Complex values travel as real pairs (ONNX operators take no complex types and
    onnxruntime loads no complex tensor): a complex64 (complex128) input, output or
    parameter of shape ``S`` is a float32 (float64) tensor of shape ``S + [2]``, real part
    then imaginary part on the last axis (``torch.view_as_real``'s layout). The model's
    ``metadata_props`` entry ``converter.complex_as_real`` names them (JSON ``{"inputs":
    [...], "outputs": [...], "initializers": [...]}``); :mod:`converter.backends.onnx.realpairs`
    converts feeds and results. Ops on complex values have real-pair rules
    (:mod:`converter.backends.onnx.ops.complex`); one without is reported as ``<op>[complex]``.

    State the source updates in place (``signature.mutations``: BatchNorm's running
    statistics in training mode, inputs torch mutates) is returned: after the model's outputs
    come one graph output per update, named ``updated:<target>`` (``updated:bn.running_mean``
    for a buffer, the initializer of the same name; ``updated:args[1]`` for an input).
    ONNX has no in-place state: the model keeps its initializers; a caller that keeps
    the state replaces them (onnxruntime: ``SessionOptions.add_initializer``). The ``metadata_props`` entry
    ``converter.updates`` records them (JSON ``{"updated:bn.running_mean": {"kind":
    "buffer", "target": "bn.running_mean"}, ...}``).

    Raises:
        UnsupportedOpError: every StableHLO op without an ONNX rule, in one error (ops on
            complex values without a real-pair rule as ``stablehlo.xxx[complex]``).
        DynamicShapeError: (an ``UnsupportedOpError``) ops on dynamic shapes whose rules
            need static ones; names them and the ``Module.specialize`` call to make first.
        OpConversionError: a rule cannot express one op's form (names the op and its loc).
        MissingDependencyError: ``optimize`` and onnxruntime, which folds the constants, is
            not installed (``pip install 'converter[onnx]'``; never a model folded less).

    Warns:
        PlacementStrippedWarning: the module has host placement, which ONNX cannot express.
    """
    if not DEFAULT_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"opset {opset} is outside the supported {DEFAULT_OPSET}..{MAX_OPSET}")
    if optimize:
        require_runtime()  # before any work: without it, the folding would silently differ
    module = prepare(module, PREPARE)  # no warning when already stripped
    interp = (interpreter or OnnxInterpreter)(module.mlir, opset)
    if optimize:
        interp.patterns = patterns.find(module.mlir, opset)
    _check_dynamic(interp, module)
    interp.check_supported()
    g = interp.graph
    sig = module.signature
    g.reserved |= {s.name for s in (*sig.params, *sig.inputs, *sig.outputs)}
    if sig.rng is not None:
        g.reserved.add(sig.rng.name)
    stubs = {p.name: _stub(module.params[p.name], p.name) for p in sig.params}
    g.initializers.extend(stubs.values())
    graph_inputs = [*sig.inputs, *((sig.rng,) if sig.rng is not None else ())]
    inputs = [_value_info(s) for s in graph_inputs]
    names = [p.name for p in sig.params] + [s.name for s in graph_inputs]
    if sig.kept_var_idx is not None:
        names = [names[i] for i in sig.kept_var_idx]
    results = interp.run(*names)
    outputs = []
    for value, spec in zip(results, sig.outputs, strict=True):
        g.nodes.append(helper.make_node("Identity", [value], [spec.name], name=g.fresh("output")))
        outputs.append(_value_info(spec))
    if optimize:
        constant = _constant_buffers(sig)
        for name in constant:  # their values are needed to fold what is computed from them
            stubs[name].raw_data = _raw(_param_array(module.params[name]))
        mutated = {m.target for m in sig.mutations if m.kind == "buffer"}
        simplify(
            g,
            inputs,
            [spec.name for spec in sig.outputs],
            set(stubs) - constant,
            opset,
            param_data=lambda name: _param_array(module.params[name]),
            frozen=mutated,
        )
        for name in constant:
            stubs[name].ClearField("raw_data")
    nodes, initializers = live(g.nodes, g.initializers, [spec.name for spec in sig.outputs])
    params = {t.name: _param_array(module.params[t.name]) for t in initializers if t.name in stubs}
    size = sum(a.nbytes for a in params.values())
    if external_data is None:
        external_data = path is not None and size >= external_threshold(TWO_GB)
    if path is None and not external_data:
        for t in initializers:
            if t.name in stubs:
                t.raw_data = _raw(params[t.name])
    graph = helper.make_graph(nodes, "main", inputs, outputs, initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name="converter",
        ir_version=max(IR_VERSION, helper.find_min_ir_version_for([helper.make_opsetid("", opset)])),
    )
    props = {}
    if module.meta.get("warnings"):
        props[WARNINGS_KEY] = "\n".join(module.meta["warnings"])
    if sig.mutations:
        _, new = sig.split_outputs(list(sig.outputs))
        updates = {spec.name: m.to_json() for spec, m in zip(new, sig.mutations, strict=True)}
        props[UPDATES_KEY] = json.dumps(updates)
    as_real = _complex_as_real(sig)
    if as_real:
        props[COMPLEX_AS_REAL_KEY] = json.dumps(as_real)
    if props:
        helper.set_model_props(model, props)
    if path is not None:
        _write(model, params, Path(path), external=external_data, check=check)
    elif external_data:
        raise ValueError("to_onnx(external_data=True) needs the path to write the model and its data to")
    elif check:  # without serializing the weights (converter.onnx_skeleton)
        skeleton = onnx_skeleton.skeleton(model)
        if _model_size(skeleton) < TWO_GB:
            onnx.checker.check_model(skeleton, full_check=True)
    return model


def _constant_buffers(sig) -> set[str]:
    """Integer buffers the model never updates (``position_ids``, ``token_type_ids``):
    what is computed from them alone is folded into constants, as from the module's own
    constants (``torch.onnx`` does the same); their initializers stay while still read."""
    mutated = {m.target for m in sig.mutations if m.kind == "buffer"}
    return {
        p.name
        for p in sig.params
        if p.kind == "buffer"
        and p.name not in mutated
        and not dtypes.is_floating(p.dtype)
        and not dtypes.is_complex(p.dtype)
    }


def _stub(value, name: str) -> onnx.TensorProto:
    """An initializer for a parameter without its data yet (filled in, or pointed at the
    external data file, once it is known to be live)."""
    arr = _param_array(value)
    t = onnx.TensorProto(name=name, dims=list(arr.shape), data_type=onnx_dtype(dtypes.name_of(arr.dtype)))
    return t


def _param_array(value) -> np.ndarray:
    """A parameter as the array its initializer holds: C-contiguous, complex as real pairs
    (a view, no copy, for a contiguous array)."""
    arr = dtypes.contiguous(value)
    if np.iscomplexobj(arr):
        arr = arr.view(arr.real.dtype).reshape(*arr.shape, 2)
    return arr


_PACKED = {"int4", "uint4", "int2", "uint2", "float4_e2m1fn"}  # ONNX packs these, 2 or 4 per byte


def _raw_view(arr: np.ndarray) -> memoryview | bytes:
    """The bytes of an initializer as ONNX lays them out (little-endian; bool one byte;
    4- and 2-bit types packed, by ``numpy_helper``): a view of ``arr`` when that is its
    own memory."""
    if dtypes.name_of(arr.dtype) in _PACKED:
        return numpy_helper.from_array(arr).raw_data
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return memoryview(arr.reshape(-1).view(np.uint8))


def _raw(arr: np.ndarray) -> bytes:
    """``raw_data`` of an initializer (see :func:`_raw_view`)."""
    return bytes(_raw_view(arr))


def _write(model: onnx.ModelProto, params: dict[str, np.ndarray], path: Path, *, external: bool, check: bool):
    """Write ``model`` to ``path`` atomically, its parameters inline or (``external``)
    streamed to ``<path>.data``; the checker runs on the written file before it appears."""
    data_name = path.name + ".data"
    with staging_dir(path) as staging:
        staged = Path(staging) / path.name
        inits = [t for t in model.graph.initializer if t.name in params]
        if external:
            with open(Path(staging) / data_name, "wb") as f:
                for t in inits:
                    data = _raw_view(params[t.name])
                    f.write(b"\0" * ((-f.tell()) % ALIGN))
                    offset = f.tell()
                    f.write(data)
                    t.data_location = onnx.TensorProto.EXTERNAL
                    del t.external_data[:]
                    for key, value in (("location", data_name), ("offset", offset), ("length", len(data))):
                        t.external_data.add(key=key, value=str(value))
        else:
            for t in inits:
                t.raw_data = _raw(params[t.name])
        with open(staged, "wb") as f:
            f.write(model.SerializeToString())
        if check:
            onnx.checker.check_model(str(staged), full_check=True)
        if external:
            os.replace(Path(staging) / data_name, path.parent / data_name)
        os.replace(staged, path)


def _value_info(spec) -> onnx.ValueInfoProto:
    """A graph input or output for a signature entry; a complex one as its real pair."""
    dims = _dims(spec.shape)
    if dtypes.is_complex(spec.dtype):
        return helper.make_tensor_value_info(
            spec.name, onnx_dtype(complex_ops.COMPONENT[spec.dtype]), [*dims, 2]
        )
    return helper.make_tensor_value_info(spec.name, onnx_dtype(spec.dtype), dims)


def _complex_as_real(sig) -> dict[str, list[str]]:
    """The :data:`COMPLEX_AS_REAL_KEY` record: names of the complex inputs, outputs and
    initializers carried as real pairs (kinds with none left out)."""
    kinds = {"inputs": sig.inputs, "outputs": sig.outputs, "initializers": sig.params}
    found = {k: [s.name for s in specs if dtypes.is_complex(s.dtype)] for k, specs in kinds.items()}
    return {k: v for k, v in found.items() if v}


def _check_dynamic(interp: OnnxInterpreter, module: Module) -> None:
    """Raise :class:`DynamicShapeError` naming every op with a dynamic operand or result
    type whose key is not in :data:`~converter.backends.onnx.registry.DYNAMIC_SHAPES`."""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for fn in interp.functions.values():
        for operation in mlir.walk_ops(fn):
            op = mlir.Op(operation)
            key = interp.dispatch_key(op)
            if key in DYNAMIC_SHAPES or key in ("func.call", "func.return", "stablehlo.return"):
                continue
            values = [*operation.operands, *operation.results]
            if any(isinstance(v.type, ir.RankedTensorType) and not v.type.has_static_shape for v in values):
                counts[key] = counts.get(key, 0) + 1
                first.setdefault(key, mlir.format_location(operation.location))
    if counts:
        missing = [MissingOp(k, n, first[k]) for k, n in counts.items()]
        raise DynamicShapeError(missing, _specialize_hint(module))


def _specialize_hint(module: Module) -> str:
    """``module.specialize({...})`` with each dynamic input's shape, dynamic sizes as 1."""
    shapes = {
        s.name: tuple(d if isinstance(d, int) else 1 for d in s.shape)
        for s in module.signature.inputs
        if not all(isinstance(d, int) for d in s.shape)
    }
    return f"module.specialize({shapes!r}) (any sizes the model accepts), then to_onnx()"


def save_onnx(model: onnx.ModelProto, path: str | os.PathLike, *, external_threshold: int = TWO_GB) -> None:
    """Write ``model`` atomically. A model of ``external_threshold`` bytes or more (protobuf's
    2 GB limit by default) stores all its initializers as external data in ``<name>.data``
    beside it, written before the model file appears (no data file when it has none).

    Raises :class:`OSError` when a file cannot be written; nothing is left half-written."""
    path = Path(path)
    external = _model_size(model) >= external_threshold
    if not external:
        with atomic_path(path) as tmp:
            onnx.save_model(model, tmp)
        return
    data_name = path.name + ".data"
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # saving as external data rewrites the proto it is given
    model = copy
    with staging_dir(path) as staging:
        staged = Path(staging) / path.name
        onnx.save_model(  # every initializer (onnx's default keeps those under 1 KB inline)
            model,
            staged,
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=data_name,
            size_threshold=0,
        )
        if (Path(staging) / data_name).exists():  # none when the model has no initializer
            os.replace(Path(staging) / data_name, path.parent / data_name)
        os.replace(staged, path)


def _model_size(model: onnx.ModelProto) -> int:
    """The serialized size of ``model``, or at least :data:`TWO_GB` when it is that large:
    ``ByteSize()`` of the whole model only once its initializers (sized one by one) are
    below 2 GB (protobuf refuses to size a message past 2 GB)."""
    tensors = sum(t.ByteSize() for t in model.graph.initializer)
    return tensors if tensors >= TWO_GB else model.ByteSize()


def _dims(shape):
    return [d if isinstance(d, int) else (d or None) for d in shape]


__all__ = [
    "DEFAULT_OPSET",
    "MAX_OPSET",
    "PREPARE",
    "DynamicShapeError",
    "OnnxInterpreter",
    "save_onnx",
    "to_onnx",
]
