"""PyTorch → StableHLO: ``torch.export``, Core ATen decompositions, ATen → JAX rules, and
:func:`converter.lowering.lower` to StableHLO."""

from __future__ import annotations

import contextlib
import copy
import re
from typing import Any

import jax
import numpy as np
import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from converter import _threads, dtypes, progress
from converter._torch_internal import (
    HigherOrderOperator,
    OperatorBase,
    OpOverload,
    cached_cia_ops,
    hold_export_prints,
    lazy_clone,
)
from converter.errors import ExportError
from converter.lowering import lower as lower_flat
from converter.module import Module
from converter.passes import run_passes
from converter.signature import RNG_KEY, UPDATE_PREFIX, LeafSpec, Mutation, Signature, leaf_paths
from converter.weights import ALIGN, aligned_copy, aligned_empty

from . import ops  # noqa: F401 - registers the rules
from .data_dependent import resolve_data_dependent
from .decompose import decompose_graph, decomposition_table
from .lowering import check_supported, graphs, interpret, jax_dim, op_name, symbolic_dims
from .ops.random import RANDOM_OPS, key_stream
from .pytree import treespec_to_json
from .registry import ATEN_RULES

_PARAM_KINDS = {
    InputKind.PARAMETER: "parameter",
    InputKind.BUFFER: "buffer",
    InputKind.CONSTANT_TENSOR: "constant",
}


def export(
    model: torch.nn.Module | ExportedProgram, args=(), kwargs=None, dynamic_shapes=None
) -> ExportedProgram:
    """``torch.export.export`` (strict=False) then the Core ATen decompositions (one thread
    at a time: :data:`converter._threads.TORCH_TRACE`)."""
    with _threads.TORCH_TRACE:
        hold_export_prints()
        ep = model if isinstance(model, ExportedProgram) else _export(model, args, kwargs, dynamic_shapes)
        return _run_decompositions(ep)


def _run_decompositions(ep: ExportedProgram, core: bool | None = None) -> ExportedProgram:
    """``ep.run_decompositions()``, skipped for a program already in Core ATen (``core``:
    that answer when the caller has it), with the CompositeImplicitAutograd op set reused
    while no op registration changes."""
    if _is_core_aten(ep.graph_module) if core is None else core:
        return ep  # already decomposed: a second pass would re-trace for nothing
    if _unalias_hop_operands(ep.graph_module, dry_run=True) or _subgraph_constants(ep.graph_module):
        ep = copy.deepcopy(ep)  # the caller's program stays as it was
        _unalias_hop_operands(ep.graph_module)
        _rebuild_subgraph_constants(ep.graph_module)
    with cached_cia_ops():
        return ep.run_decompositions(decomposition_table())


# Higher-order ops whose operand tuple torch's functionalization checks for aliasing
# (torch/_higher_order_ops/utils.py ``_check_alias_and_mutation``): (op, operand args).
_HOP_OPERANDS = {
    "cond": (3,),
    "while_loop": (2, 3),
    "scan": (2, 3),
    "map_impl": (1, 2),
    "associative_scan": (1, 2),
}


def _subgraph_constants(gm: torch.fx.GraphModule) -> list[tuple[torch.fx.GraphModule, torch.fx.Node]]:
    """``lift_fresh_copy(constant)`` nodes of a 0-d tensor constant inside higher-order-op
    subgraphs, with their subgraph: what ``torch.tensor(0)`` written in a ``torch.cond``
    branch (a ``while_loop`` counter there) becomes. ``run_decompositions()`` fails on such a
    constant in a branch ("Attempting to use FunctionalTensor on its own", torch 2.13)."""
    found = []
    for sub in gm.modules():
        if sub is gm or not isinstance(sub, torch.fx.GraphModule):
            continue
        for node in sub.graph.nodes:
            if node.op != "call_function" or node.target is not torch.ops.aten.lift_fresh_copy.default:
                continue
            src = node.args[0]
            if isinstance(src, torch.fx.Node) and src.op == "get_attr":
                value = getattr(sub, src.target, None)
                if isinstance(value, torch.Tensor) and value.dim() == 0:
                    found.append((sub, node))
    return found


def _rebuild_subgraph_constants(gm: torch.fx.GraphModule) -> None:
    """Each node of :func:`_subgraph_constants` becomes ``aten.scalar_tensor(value, dtype)``
    (a fresh tensor of the same value), and the ``detach_`` torch puts after it goes (on a
    fresh tensor it only drops autograd history)."""
    for sub, node in _subgraph_constants(gm):
        value = getattr(sub, node.args[0].target)
        with sub.graph.inserting_before(node):
            fresh = sub.graph.call_function(
                torch.ops.aten.scalar_tensor.default, (value.item(),), {"dtype": value.dtype}
            )
        fresh.meta = dict(node.meta)
        for user in list(node.users):
            if user.op == "call_function" and user.target is torch.ops.aten.detach_.default:
                user.replace_all_uses_with(fresh)
                sub.graph.erase_node(user)
        src = node.args[0]
        node.replace_all_uses_with(fresh)
        sub.graph.erase_node(node)
        if not src.users:  # the constant itself, unless something else reads it
            sub.graph.erase_node(src)
            delattr(sub, src.target)
        sub.recompile()


def _unalias_hop_operands(gm: torch.fx.GraphModule, dry_run: bool = False) -> bool:
    """Clone the operands of ``cond``/``while_loop``/``scan``/``map`` nodes (in ``gm`` and
    its subgraphs) that are views of other values or repeat an earlier operand.

    ``torch.export`` passes a view a branch closes over (``x @ self.lin.weight.T`` inside a
    ``torch.cond`` branch: ``numpy_T(p_lin_weight)``) as an operand beside the parameter it
    views; ``run_decompositions()`` then refuses the program ("cond_true might be aliasing
    the input or the output!", torch 2.13). A clone is the same value without the alias.
    Returns whether any operand was (with ``dry_run``: would be) replaced."""
    changed = False
    for sub in gm.modules():
        if not isinstance(sub, torch.fx.GraphModule):
            continue
        g, edited = sub.graph, False
        for node in list(g.nodes):
            if node.op != "call_function" or not isinstance(node.target, HigherOrderOperator):
                continue
            args, seen = list(node.args), set()
            for pos in _HOP_OPERANDS.get(node.target.name(), ()):
                if pos >= len(args) or not isinstance(args[pos], (tuple, list)):
                    continue
                operands = list(args[pos])
                for i, o in enumerate(operands):
                    if not isinstance(o, torch.fx.Node):
                        continue
                    is_view = isinstance(o.target, OpOverload) and o.target.is_view
                    if is_view or o in seen:
                        if dry_run:
                            return True
                        with g.inserting_before(node):
                            operands[i] = g.call_function(torch.ops.aten.clone.default, (o,))
                        operands[i].meta = dict(o.meta)
                        edited = True
                    seen.add(o)
                args[pos] = type(args[pos])(operands)
            node.args = tuple(args)
        if edited:
            sub.recompile()
            changed = True
    return changed


# Non-core ATen ops the Core ATen decomposition table keeps as they are (assertions and
# symbolic-size queries): their presence does not mean the program still needs decomposing.
_KEPT_BY_DECOMPOSITION = frozenset(
    {
        "aten::_assert_tensor_metadata",
        "aten::_assert_scalar",
        "aten::_assert_async.msg",
        "aten::sym_size.int",
        "aten::sym_stride.int",
        "aten::sym_numel",
        "aten::sym_storage_offset",
        "aten::sym_constrain_range_for_size",
    }
)


def _is_core_aten(gm: torch.fx.GraphModule) -> bool:
    """Whether every op of the graph is already in the Core ATen opset (``torch.Tag.core``,
    functional), as ``run_decompositions()`` leaves it: then decomposing again (about 0.15 s
    of fixed cost per call, most of a small model's conversion) changes nothing. Any other
    target — a non-core or mutating ATen op, a higher-order op (their regions may hold
    grad/autocast wrappers that decomposition inlines) — answers False, and the caller
    decomposes."""
    for node in gm.graph.nodes:  # no call_module: torch.export's verifier refuses it
        if node.op != "call_function":
            continue
        target = node.target
        if isinstance(target, OpOverload):
            if torch.Tag.core in target.tags and not target._schema.is_mutable:
                continue
            if target.name() in _KEPT_BY_DECOMPOSITION:  # "aten::sym_size.int"
                continue
            return False
        if isinstance(target, OperatorBase):  # higher-order ops and the like
            return False
    return True


#: torch.export's refusal of an output type without a pytree registration
_UNKNOWN_OUTPUT = re.compile(r"Found <class '(?:[\w.]+\.)?(\w+)'> in output")


def _export(model: torch.nn.Module, args=(), kwargs=None, dynamic_shapes=None) -> ExportedProgram:
    """``torch.export.export`` (strict=False), without decompositions, leaving ``model`` as
    it found it (:func:`_state_kept`).

    Raises:
        ExportError: the model returns a Hugging Face key/value cache (a decoder at its
            default ``use_cache=True``); the message names ``use_cache=False``.
    """
    try:
        with _state_kept(model):
            if dynamic_shapes is not None:
                return torch.export.export(model, tuple(args), kwargs or {}, dynamic_shapes=dynamic_shapes)
            return torch.export.export(model, tuple(args), kwargs or {})
    except RuntimeError as e:
        found = _UNKNOWN_OUTPUT.search(str(e))
        if found is None or not found.group(1).endswith("Cache"):
            raise
        raise ExportError(
            f"{type(model).__name__} returns a {found.group(1)} (a transformers key/value cache: the "
            "model runs with use_cache=True, its config's default), which is no tensor output. "
            "Convert without it: pass kwargs={'use_cache': False} (or set model.config.use_cache = "
            "False before converting). To keep the cache, give it as explicit tensor inputs and "
            "outputs (a StaticCache, as examples/generate.py does)."
        ) from e


@contextlib.contextmanager
def _state_kept(model: torch.nn.Module):
    """Put back every attribute, parameter, buffer and submodule entry of ``model`` and its
    submodules that the traced ``forward`` added, replaced or removed.

    ``torch.export`` runs ``forward`` on FakeTensors: whatever the forward stores on the
    module (only warned about as "assigned during export") is a tracing placeholder left on
    the user's model. Transformers' longrope (Phi-3) caches its long-context frequencies as
    a plain attribute on the first call: after an export the eager model held a FakeTensor
    there, its ``inv_freq.copy_(torch.where(...))`` from it copied nothing, and the eager
    model kept the short-context frequencies past ``original_max_position_embeddings``
    (off by up to 2.4 on the rotary embedding, ~5e-3 on Phi-3's logits) while the
    converted module, which keeps the ``where`` on the length, was right.
    """
    saved = [
        (
            mod,
            dict(vars(mod)),
            dict(mod._parameters),
            dict(mod._buffers),
            dict(mod._modules),
            set(mod._non_persistent_buffers_set),
        )
        for mod in model.modules()
    ]
    try:
        yield
    finally:
        for mod, attrs, params, buffers, modules, transient in saved:
            now = vars(mod)
            for name in [k for k in now if k not in attrs]:
                del now[name]
            for name, value in attrs.items():
                if now.get(name, _MISSING) is not value:
                    now[name] = value
            for live, old in ((mod._parameters, params), (mod._buffers, buffers), (mod._modules, modules)):
                if live.keys() != old.keys() or any(live[k] is not v for k, v in old.items()):
                    live.clear()
                    live.update(old)
            if mod._non_persistent_buffers_set != transient:
                mod._non_persistent_buffers_set.clear()
                mod._non_persistent_buffers_set.update(transient)


_MISSING = object()


def _tensor_key(t: torch.Tensor) -> tuple:
    """Tensors with equal keys are the same data (tied weights). ``const_data_ptr``: the
    mutable pointer would make a copy-on-write tensor (a parameter already converted with
    ``copy=True``) copy itself. A conjugate or negative view of the same memory holds other
    values (the conjugates, the negations): its lazy bits are part of the key."""
    return (t.const_data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype, t.is_conj(), t.is_neg())


def _to_numpy(t: torch.Tensor, copy: bool = True) -> np.ndarray:
    """The NumPy array of a parameter, C-contiguous and 64-byte aligned wherever possible (so
    that ``to_jax`` on CPU uses it in place: then the conversion holds no second copy).

    With ``copy`` a snapshot: later in-place updates of the torch model (an optimizer step,
    batch-norm running statistics) must not change the converted parameters. A contiguous
    CPU tensor whose memory torch allocated is not copied: it becomes copy-on-write
    (:func:`converter._torch_internal.lazy_clone`) and the result is a read-only view of the memory
    the clone keeps; the first in-place write to the torch tensor afterwards copies that
    tensor in torch. Other tensors are copied once, straight into an aligned array; a
    conjugate or negative view with its lazy bit applied (its memory holds the values
    before conjugation or negation).

    Without ``copy``, never a copy: the same copy-on-write view where torch allows it (a
    plain view could point to freed memory once another conversion made the storage
    copy-on-write and the model then wrote it), else a read-only view of the tensor's memory
    (the torch model must not change afterwards)."""
    t = t.detach()
    if t.is_conj() or t.is_neg():  # the values, not the memory: a copy, ours alone
        t = t.resolve_conj().resolve_neg()
    if t.device.type == "cpu" and t.is_contiguous() and not t.is_sparse and t.numel():
        if not copy or t.const_data_ptr() % ALIGN == 0:  # else JAX would copy: copy aligned here
            clone = lazy_clone(t)
            view = None if clone is None else _readonly_view(clone)
            if view is not None:
                return view
        if not copy:
            view = _readonly_view(t)
            return _to_numpy(t) if view is None else view
    if t.device.type == "cpu" and not t.is_sparse:
        try:  # NumPy's single-threaded copy of the bytes: torch's copy_ on two threads is
            # several times slower on a fresh allocation (each thread faults its pages in)
            src = np.asarray(_Bytes(t.contiguous()))  # not .numpy(): see _tensor_key
            out = aligned_empty(tuple(t.shape), dtypes.to_numpy(dtypes.name_of(t.dtype)))
        except (KeyError, TypeError, RuntimeError):  # a dtype without a NumPy spelling or byte view
            pass
        else:
            np.copyto(out.reshape(-1).view(np.uint8), src, casting="no")
            return out
    if t.dtype == torch.bfloat16:
        out = aligned_empty(tuple(t.shape), dtypes.to_numpy("bfloat16"))
        torch.from_numpy(out.view(np.uint16)).view(torch.bfloat16).copy_(t)
        return out
    try:
        out = aligned_empty(tuple(t.shape), dtypes.to_numpy(dtypes.name_of(t.dtype)))
        torch.from_numpy(out).copy_(t)
    except (KeyError, TypeError):  # a dtype NumPy or torch.from_numpy lacks a spelling for
        return aligned_copy(t.cpu().contiguous().numpy())
    return out


class _Bytes:
    """The bytes of a contiguous tensor for ``np.asarray`` (read-only ``uint8``), without
    taking torch's mutable data pointer (``.numpy()`` does: a copy-on-write tensor would copy
    itself). The NumPy array keeps this object, and so the tensor, alive: for a
    copy-on-write clone, the memory stays as it was for as long as the array lives."""

    def __init__(self, t: torch.Tensor):
        self.tensor = t
        self.__array_interface__ = {
            "data": (t.const_data_ptr(), True),
            "shape": (t.numel() * t.element_size(),),
            "typestr": "|u1",
            "version": 3,
        }


def _readonly_view(t: torch.Tensor) -> np.ndarray | None:
    """A read-only NumPy view of the contiguous CPU tensor ``t``'s memory, its dtype and
    shape (the view keeps ``t`` alive); None for a dtype without a NumPy spelling."""
    try:
        dtype = dtypes.to_numpy(dtypes.name_of(t.dtype))
    except (KeyError, TypeError):
        return None
    view = np.asarray(_Bytes(t)).view(dtype).reshape(tuple(t.shape))
    view.flags.writeable = False
    return view


def _spec(name: str, val: torch.Tensor, kind: str, symbols: dict | None = None) -> LeafSpec:
    shape = tuple(_dim_spec(jax_dim(d, symbols)) for d in val.shape)
    return LeafSpec(name, shape, dtypes.name_of(val.dtype), kind)


def _dim_spec(d: Any) -> int | str:
    """A signature dimension: an int, or a symbolic dimension as its ``jax.export`` text."""
    return d if isinstance(d, int) else str(d)


def from_torch(
    model: torch.nn.Module | ExportedProgram,
    args: tuple = (),
    kwargs: dict | None = None,
    dynamic_shapes: Any = None,
    *,
    copy: bool = True,
) -> Module:
    """Convert a PyTorch model to a :class:`converter.Module`.

    Args:
        model: an ``nn.Module`` (exported here with ``args``/``kwargs`` as example inputs) or
            an ``ExportedProgram``.
        args, kwargs: example inputs: pytrees of tensors and static Python values.
        dynamic_shapes: ``torch.export.export``'s ``dynamic_shapes`` (``Dim("batch", min=2,
            max=64)``, ``Dim.AUTO``/``Dim.DYNAMIC``, derived dims such as ``2 * seq``), for an
            ``nn.Module``. An ``ExportedProgram`` keeps the dynamic dimensions it was
            exported with.
        copy: the Module is a snapshot (default) that later in-place updates of the torch
            model (an optimizer step, ``load_state_dict``, batch-norm statistics) leave
            alone. The weights are not copied for it: a contiguous, 64-byte aligned CPU
            tensor torch allocated becomes copy-on-write (``torch._lazy_clone``), the Module
            holds a read-only NumPy view of its memory and ``to_jax`` on CPU uses that
            memory in place; the first in-place write to a torch tensor afterwards copies
            that tensor (in torch: reading it, forward and backward passes included, does
            not). Other tensors are copied once into aligned arrays: those whose storage
            another tensor shares (a view, a NumPy array from ``.numpy()``, a DLPack
            export), ``torch.from_numpy`` or memory-mapped storage, unaligned or
            non-contiguous ones. ``copy=False`` never copies: the same copy-on-write views,
            else read-only views of the tensors' memory, for a model that is not changed
            afterwards (the ``convert`` command does this).

    Returns:
        A Module whose ``@main`` takes the parameters, buffers and lifted constants first,
        one argument per distinct tensor (tied weights such as GPT-2's embedding and LM head
        are one parameter, named as ``named_parameters()`` names it; its other names are
        ``signature.tied``, ``{alias: parameter name}``), then the user tensor
        inputs. Parameters with ``requires_grad=False`` are listed in
        ``signature.frozen``: the backends give them no gradient, as autograd does;
        buffers registered with ``persistent=False`` in ``signature.non_persistent``
        (left out of ``state_dict()``, as torch leaves them out). A model whose result
        depends on its training mode (dropout, BatchNorm) records the mode it was converted
        in as ``signature.training``: ``to_torch()``'s module starts in it and
        raises when called in the other. Non-tensor inputs are
        specialized and recorded as ``static`` in the signature.

        Dynamic dimensions make the module shape-polymorphic (``jax.export`` symbolic
        shapes named as torch named them: the ``Dim`` name, or torch's ``s0``/``s77`` for
        automatic and ``.pt2`` dimensions; a derived one is an expression, ``2*seq``). The
        signature records them as these strings and their ranges in
        ``signature.dim_ranges`` (``{"batch": [2, 64]}``, ``None`` for no upper
        bound); the StableHLO carries them as ``jax.export`` constraints.

        A model with random ops (dropout in training mode, ``torch.rand``...)
        takes a PRNG key last (``signature.rng``): the backends supply it, and the numbers
        follow torch's distributions, not its exact stream. State the model updates in
        place (``BUFFER_MUTATION`` and ``USER_INPUT_MUTATION`` outputs of ``torch.export``:
        BatchNorm's running statistics in training mode, ``x.add_(...)`` on an input) is
        ``signature.mutations``: ``@main`` returns the new values after the outputs, named
        ``updated:<buffer name or input path>``.

    Raises:
        DataDependentShapeError: naming every op whose output size depends on the input
            values (``nonzero``, ``x[mask]``...), with its source line and the static-size fix;
            a ``nonzero`` bounded by ``torch._check(n <= N)`` converts to its padded form.
        UnsupportedOpError: naming every ATen op without a rule, with counts and the source
            line of the first occurrence.
        OpConversionError: a rule failed; names the ATen op and its source line.
        DynamicDimensionError: (an ``OpConversionError``) a rule needs the concrete value of
            a dynamic dimension; names the dimension, the ATen op and its source line.
    """
    stage = "Core ATen decompositions"
    if not isinstance(model, ExportedProgram):
        stage = "torch.export and " + stage
    # torch.export, its decompositions and the reading of its shape environment are not
    # thread-safe: one thread at a time (converter._threads); the lowering below runs freely
    with _threads.TORCH_TRACE, progress.stage(stage):
        hold_export_prints()
        ep = model if isinstance(model, ExportedProgram) else _export(model, args, kwargs, dynamic_shapes)
        # node by node, cached; None: a graph it does not cover (or one already decomposed)
        core = _is_core_aten(ep.graph_module)
        graph = None if core else decompose_graph(ep)
        if graph is None:
            ep = _run_decompositions(ep, core)
            resolve_data_dependent(ep)
            graph = ep.graph_module.graph
    check_supported(graph)
    state = {**ep.state_dict, **ep.constants}
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]

    params: dict[str, np.ndarray] = {}
    param_specs: list[LeafSpec] = []
    canonical: dict[tuple, str] = {}
    tied: dict[str, str] = {}  # a second name of one tensor (tied weights) -> its parameter's name
    frozen: list[str] = []  # parameters with requires_grad=False
    transient: list[str] = []  # buffers registered with persistent=False: not in state_dict()
    # per placeholder: ("param", name) | ("input", i) | ("static", v); a TOKEN input (the
    # effect token of ``with_effects``, see lowering.WITH_EFFECTS) is a static dummy, and
    # TOKEN outputs are dropped with every output that is not a USER_OUTPUT
    feed: list[tuple[str, Any]] = []
    user_vals: list[Any] = []
    input_leaf: dict[str, int] = {}  # placeholder name -> index of its user input tensor
    for node, spec in zip(placeholders, ep.graph_signature.input_specs, strict=True):
        if spec.kind in _PARAM_KINDS:
            tensor = state[spec.target]
            key = _tensor_key(tensor)
            if key not in canonical:
                canonical[key] = spec.target
                params[spec.target] = _to_numpy(tensor, copy)
                param_specs.append(_spec(spec.target, tensor, _PARAM_KINDS[spec.kind]))
                if spec.kind == InputKind.PARAMETER and not tensor.requires_grad:
                    frozen.append(spec.target)
                if spec.kind == InputKind.BUFFER and not spec.persistent:
                    transient.append(spec.target)
            elif canonical[key] != spec.target:
                tied[spec.target] = canonical[key]
            feed.append(("param", canonical[key]))
        elif spec.kind == InputKind.USER_INPUT:
            val = node.meta.get("val")
            user_vals.append(val)
            if isinstance(val, torch.Tensor):
                input_leaf[spec.arg.name] = sum(1 for f in feed if f[0] == "input")
                feed.append(("input", input_leaf[spec.arg.name]))
            else:
                feed.append(("static", val))
        elif spec.kind == InputKind.TOKEN:
            feed.append(("static", np.zeros((0,), np.float32)))
        else:
            raise NotImplementedError(f"torch.export input kind {spec.kind} ({node.name})")

    in_tree = treespec_to_json(ep.call_spec.in_spec, user_vals)
    paths = leaf_paths(in_tree)
    tensor_vals = [v for v in user_vals if isinstance(v, torch.Tensor)]
    with _threads.TORCH_TRACE:
        symbols, ranges = dynamic_dims(ep, tensor_vals)
    input_specs = [
        _spec(_input_name(p), v, "input", symbols) for p, v in zip(paths, tensor_vals, strict=True)
    ]

    out_node = next(n for n in graph.nodes if n.op == "output")
    out_vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in out_node.args[0]]
    user_out = [i for i, s in enumerate(ep.graph_signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    out_tree = treespec_to_json(ep.call_spec.out_spec, [out_vals[i] for i in user_out])
    tensor_out = [i for i in user_out if isinstance(out_vals[i], torch.Tensor)]
    out_paths = leaf_paths(out_tree)
    output_specs = [
        _spec(f"outputs{p}", out_vals[i], "output", symbols)
        for p, i in zip(out_paths, tensor_out, strict=True)
    ]

    # state the model updates in place: the new values are outputs after the user outputs
    mutations: list[Mutation] = []
    mutation_out: list[int] = []
    for i, s in enumerate(ep.graph_signature.output_specs):
        if s.kind == OutputKind.BUFFER_MUTATION:
            target = canonical[_tensor_key(state[s.target])]
            mutations.append(Mutation("buffer", target))
        elif s.kind == OutputKind.USER_INPUT_MUTATION:
            mutations.append(Mutation("input", input_specs[input_leaf[s.target]].name))
        else:
            continue
        mutation_out.append(i)
        output_specs.append(_spec(UPDATE_PREFIX + mutations[-1].target, out_vals[i], "update", symbols))

    rng = RNG_KEY if _draws_random(graph) else None

    def fn(*flat):
        pvals = dict(zip((p.name for p in param_specs), flat[: len(param_specs)], strict=True))
        uvals = flat[len(param_specs) : len(param_specs) + len(input_specs)]
        inputs = [pvals[v] if k == "param" else uvals[v] if k == "input" else v for k, v in feed]
        with symbolic_dims(symbols):
            if rng is None:
                outs = interpret(graph, inputs)
            else:
                with key_stream(flat[-1]):
                    outs = interpret(graph, inputs)
        return tuple(outs[i] for i in (*tensor_out, *mutation_out))

    arg_specs = (*param_specs, *input_specs, *((rng,) if rng else ()))
    shapes = [s.shape for s in param_specs]
    shapes += [tuple(jax_dim(d, symbols) for d in v.shape) for v in tensor_vals]
    shapes += [rng.shape] if rng else []
    avals = [
        jax.ShapeDtypeStruct(shp, dtypes.to_numpy(s.dtype)) for shp, s in zip(shapes, arg_specs, strict=True)
    ]
    # a Tensor.detach() has no StableHLO op: kept as a marker (the lowering's other
    # stop_gradients, as softmax's max, are marked too: gradient-neutral either way)
    detaches = sum(1 for g in graphs(graph) for n in g.nodes if n.target is torch.ops.aten.detach.default)
    with progress.stage(f"lowering {len(graph.nodes)} ATen nodes to StableHLO") as info:
        # symbolic: shape-polymorphic StableHLO, as jax.export writes it
        module, out_avals = lower_flat(
            fn,
            avals,
            symbolic=bool(symbols),
            filename=type(model).__name__,
            mark_stop_gradients=bool(detaches),
        )
        if symbols:
            output_specs = [
                LeafSpec(s.name, tuple(_dim_spec(d) for d in a.shape), s.dtype, s.kind)
                for s, a in zip(output_specs, out_avals, strict=True)
            ]
        size = sum(a.nbytes for a in params.values())
        info["detail"] = f"{len(params)} parameters, {progress.size_text(size)}"
    signature = Signature(
        params=tuple(param_specs),
        inputs=tuple(input_specs),
        outputs=tuple(output_specs),
        in_tree=in_tree,
        out_tree=out_tree,
        rng=rng,
        mutations=tuple(mutations),
        dim_ranges=ranges or {},
        tied=tied,
        frozen=tuple(frozen),
        non_persistent=tuple(transient),
        training=model.training if _mode_dependent(model, rng, mutations) else None,
    )
    meta = {"torch_version": torch.__version__, "model": type(model).__name__}
    if symbols:
        meta["dynamic_dims"] = sorted(ranges)
    with progress.stage("passes"):
        return run_passes(Module(module, signature, params, source="torch", meta=meta))


def _mode_dependent(model: Any, rng: Any, mutations: list[Mutation]) -> bool:
    """Whether ``model`` (an ``nn.Module``) computes differently in the other training mode:
    it draws random numbers or updates buffers (dropout, BatchNorm in training mode), or
    holds a dropout with ``p > 0`` or a BatchNorm with running statistics."""
    if not isinstance(model, torch.nn.Module):
        return False  # an ExportedProgram: its mode is not known
    if rng is not None or any(m.kind == "buffer" for m in mutations):
        return True
    for mod in model.modules():
        if isinstance(mod, torch.nn.modules.dropout._DropoutNd) and mod.p > 0:
            return True
        if isinstance(mod, torch.nn.modules.batchnorm._NormBase) and mod.track_running_stats:
            return True
    return False


def dynamic_dims(ep: ExportedProgram, inputs: list[torch.Tensor]) -> tuple[dict, dict]:
    """The dynamic dimensions of ``ep``'s tensor ``inputs`` (their FakeTensors): ``(symbols,
    ranges)``, ``symbols`` mapping each sympy symbol of their sizes to a ``jax.export``
    symbolic dimension (one scope, with the ranges as its constraints), ``ranges`` mapping
    each dimension's name to ``[min, max]`` (``max`` None when unbounded).

    A dimension is named as its ``torch.export.Dim`` was (``batch``) when the export ran in
    this process, else as torch's symbol (``s77``: ``Dim.AUTO``, a loaded ``.pt2``). A
    minimum below 1 is raised to 1 (``jax.export`` dimensions are at least 1)."""
    syms = sorted(
        {s for v in inputs for d in v.shape if isinstance(d, torch.SymInt) for s in d.node.expr.free_symbols},
        key=str,
    )
    if not syms:
        return {}, {}
    bounds = {str(k): v for k, v in ep.range_constraints.items()}
    related = _guard_relations(inputs, syms, bounds)
    free = [s for s in syms if s not in related]
    names = _dim_names(inputs, free)
    ranges: dict[str, list] = {}
    constraints: list[str] = []
    for s in free:
        name, vr = names[s], bounds.get(str(s))
        lo = max(1, _finite(vr.lower) or 1) if vr is not None else 1
        hi = _finite(vr.upper) if vr is not None else None
        ranges[name] = [lo, hi]
        constraints += [f"{name} >= {lo}"] if lo > 1 else []
        constraints += [f"{name} <= {hi}"] if hi is not None else []
    constraints += _guard_inequalities(inputs, free, names)
    constraints += _nonlinear_sizes(ep, free, names, related)
    scope = jax.export.SymbolicScope(constraints)
    dims = jax.export.symbolic_shape(", ".join(names[s] for s in free), scope=scope)
    symbols = dict(zip(free, dims, strict=True))
    for s, (base, k, c) in related.items():
        symbols[s] = k * symbols[base] + c
    return symbols, ranges


def _guard_inequalities(inputs: list[torch.Tensor], free: list, names: dict) -> list[str]:
    """torch's guards that order two or more input sizes (``s1 >= s0``: ``y[: x.shape[0]]``)
    as ``jax.export`` constraints (``a >= b``), so rules can decide those comparisons too.
    Only linear guards over the input sizes are taken; others stay torch's."""
    import sympy

    env = next((v.fake_mode.shape_env for v in inputs if getattr(v, "fake_mode", None)), None)
    out: list[str] = []
    rename = {s: sympy.Symbol(names[s], integer=True) for s in free}
    for g in getattr(env, "guards", ()) if env is not None else ():
        e = g.expr
        if not isinstance(e, (sympy.Ge, sympy.Le, sympy.Gt, sympy.Lt)) or len(e.free_symbols) < 2:
            continue
        if not e.free_symbols <= set(free):
            continue
        lhs, rhs = (e.lhs, e.rhs) if isinstance(e, (sympy.Ge, sympy.Gt)) else (e.rhs, e.lhs)
        diff = sympy.expand(lhs - rhs - (1 if isinstance(e, (sympy.Gt, sympy.Lt)) else 0))
        if not diff.is_polynomial(*e.free_symbols) or sympy.Poly(diff, *e.free_symbols).total_degree() > 1:
            continue
        text = f"{sympy.sstr(diff.xreplace(rename))} >= 0"
        if text not in out:
            out.append(text)
    return out


def _nonlinear_sizes(ep: ExportedProgram, free: list, names: dict, related: dict) -> list[str]:
    """``e >= 0`` for every tensor size of ``ep``'s graph that is a product of dimensions
    minus something (``batch * (frames - 1)``, Wav2Vec2's flattened frames), as ``jax.export``
    constraints: JAX bounds a polynomial term by term, so it cannot decide the sign of
    ``batch*frames - batch`` (which every reshape to that size asks) although a size is never
    negative. Sizes linear in the dimensions are left to JAX, which decides them; sizes of
    data-dependent (unbacked) symbols are skipped."""
    import sympy

    rename = {s: sympy.Symbol(names[s], integer=True) for s in free}
    subst = {s: k * rename[base] + c for s, (base, k, c) in related.items()}
    known = set(free) | set(related)
    out: list[str] = []
    for e in _tensor_sizes(ep):
        if not e.free_symbols or not e.free_symbols <= known:
            continue
        e = sympy.expand(e.xreplace(subst).xreplace(rename))
        syms = e.free_symbols
        if not syms or not e.is_polynomial(*syms) or sympy.Poly(e, *syms).total_degree() < 2:
            continue
        if all(t.could_extract_minus_sign() is False for t in sympy.Add.make_args(e)):
            continue  # a sum of positive terms: JAX decides it
        text = f"{sympy.sstr(e).replace('**', '^')} >= 0"
        if text not in out:
            out.append(text)
    return out


def _tensor_sizes(ep: ExportedProgram) -> Any:
    """The symbolic sizes (sympy expressions) of every tensor value of ``ep``'s graphs."""
    for g in graphs(ep.graph):
        for node in g.nodes:
            val = node.meta.get("val")
            for v in val if isinstance(val, (tuple, list)) else (val,):
                for d in v.shape if isinstance(v, torch.Tensor) else ():
                    if isinstance(d, torch.SymInt):
                        yield d.node.expr


def _guard_relations(inputs: list[torch.Tensor], syms: list, bounds: dict) -> dict:
    """Input sizes that torch's guards tie to another one: ``{s: (base, k, c)}`` for
    ``s == k * base + c``. With ``Dim.AUTO`` torch keeps such sizes separate symbols and the
    relation a guard of the example (``y.view(b, 2, -1)`` with ``rows(y) == 2 * rows(x)``
    records ``(s1 // s0) == 2`` and ``s1 % s0 == 0``), where a derived ``Dim`` would make one
    an expression of the other. A relation is taken only when the guards *force* it: every
    guard on ``s`` holds with it (for several sizes of ``base`` in range) and fails for the
    sizes of ``s`` next to it; anything else stays a separate dimension."""
    import sympy

    env = next((v.fake_mode.shape_env for v in inputs if getattr(v, "fake_mode", None)), None)
    hints = getattr(env, "var_to_val", None) or {}
    if env is None or not all(s in hints for s in syms):
        return {}
    guards = [g.expr for g in getattr(env, "guards", ())]
    related: dict = {}

    def holds(on: list, values: dict) -> bool:
        try:
            return all(bool(g.xreplace({k: sympy.Integer(v) for k, v in values.items()})) for g in on)
        except TypeError:  # a guard that does not evaluate to a truth value
            return False

    def in_range(s, v: int) -> bool:
        vr = bounds.get(str(s))
        lo = _finite(vr.lower) if vr is not None else None
        hi = _finite(vr.upper) if vr is not None else None
        return v >= max(lo or 1, 1) and (hi is None or v <= hi)

    for s in syms:
        on = [g for g in guards if s in g.free_symbols]
        if not on:
            continue
        for base in syms:
            if base is s or base in related or any(b is s for b, _, _ in related.values()):
                continue
            hb, hs = int(hints[base]), int(hints[s])
            candidates = [(hs // hb, 0)] if hs % hb == 0 and hs // hb >= 2 else []
            candidates.append((1, hs - hb))
            for k, c in candidates:
                others = {t: int(hints[t]) for t in syms if t not in (s, base)}
                samples = [v for v in (hb, hb + 1, hb + 3, 2 * hb + 5) if in_range(base, v)]
                sufficient = all(holds(on, {**others, base: v, s: k * v + c}) for v in samples)
                forced = not any(
                    holds(on, {**others, base: hb, s: hs + d}) for d in (-2, -1, 1, 2) if hs + d >= 1
                )
                if sufficient and forced:
                    related[s] = (base, k, c)
                    break
            if s in related:
                break
    return related


def _finite(bound: Any) -> int | None:
    """A range bound as an int; None for torch's ``int_oo``/``-int_oo`` (no bound)."""
    try:
        return int(bound)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None


def _dim_names(inputs: list[torch.Tensor], syms: list) -> dict:
    """sympy symbol → name: the ``Dim`` name the shape environment recorded for the input
    size it stands for, else the symbol's own name; unique."""
    env = next((v.fake_mode.shape_env for v in inputs if getattr(v, "fake_mode", None)), None)
    debug = getattr(env, "source_name_to_debug_name", None) or {}
    sources = getattr(env, "var_to_sources", None) or {}
    names: dict = {}
    for s in syms:
        found = (debug.get(_source_name(src), "") for src in sources.get(s, ()))
        name = next((n for n in found if n.isidentifier()), None)
        names[s] = name if name and name not in names.values() else str(s)
    return names


def _source_name(source: Any) -> str:
    """A torch guard source's name (``L['x'].size()[0]``); a property in newer torch, a
    method in older."""
    name = source.name
    return name() if callable(name) else name


def _draws_random(graph: torch.fx.Graph) -> bool:
    """Whether ``graph`` (or a subgraph) calls a random ATen op (then the module takes a PRNG key)."""
    return any(n.op == "call_function" and op_name(n) in RANDOM_OPS for g in graphs(graph) for n in g.nodes)


def _input_name(path: str) -> str:
    from converter.signature import input_path

    return input_path(path)


__all__ = ["ATEN_RULES", "dynamic_dims", "export", "from_torch"]
