"""PyTorch → StableHLO: ``torch.export``, Core ATen decompositions, ATen → JAX rules, and
``jax.jit(...).lower()`` to StableHLO."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from converter import dtypes, progress
from converter.module import Module
from converter.passes import run_passes
from converter.signature import RNG_KEY, LeafSpec, Signature, leaf_paths
from converter.weights import aligned_copy, aligned_empty

from . import ops  # noqa: F401 - registers the rules
from .lowering import check_supported, interpret, op_name
from .ops.random import RANDOM_OPS, key_stream
from .pytree import treespec_to_json
from .registry import ATEN_RULES

_PARAM_KINDS = {
    InputKind.PARAMETER: "parameter",
    InputKind.BUFFER: "buffer",
    InputKind.CONSTANT_TENSOR: "constant",
}


def export(model: torch.nn.Module | ExportedProgram, args=(), kwargs=None) -> ExportedProgram:
    """``torch.export.export`` (strict=False) then the Core ATen decompositions."""
    if isinstance(model, ExportedProgram):
        ep = model
    else:
        ep = torch.export.export(model, tuple(args), kwargs or {})
    return ep.run_decompositions()


def _tensor_key(t: torch.Tensor) -> tuple:
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def _to_numpy(t: torch.Tensor, copy: bool = True) -> np.ndarray:
    """A copy (not a view: later in-place updates of the torch model, e.g. batch-norm
    running stats or an optimizer step, must not change the converted parameters), made
    straight into a 64-byte aligned array that ``to_jax`` on CPU then uses in place: the
    one copy of the parameters a conversion makes. Without ``copy``, a read-only view of a
    contiguous CPU tensor's memory (torch allocates 64-byte aligned, so JAX shares it too)."""
    t = t.detach()
    if not copy and t.device.type == "cpu" and t.is_contiguous() and not t.is_sparse:
        if t.dtype == torch.bfloat16:
            view = t.view(torch.uint16).numpy().view(dtypes.to_numpy("bfloat16"))
        else:
            try:
                view = t.numpy()
            except (TypeError, RuntimeError):  # a dtype NumPy lacks
                return _to_numpy(t)
        view.flags.writeable = False
        return view
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


def _spec(name: str, val: torch.Tensor, kind: str) -> LeafSpec:
    return LeafSpec(name, tuple(int(d) for d in val.shape), dtypes.name_of(val.dtype), kind)


def from_torch(
    model: torch.nn.Module | ExportedProgram,
    args: tuple = (),
    kwargs: dict | None = None,
    *,
    copy: bool = True,
) -> Module:
    """Convert a PyTorch model to a :class:`converter.Module`.

    Args:
        model: an ``nn.Module`` (exported here with ``args``/``kwargs`` as example inputs) or
            an ``ExportedProgram``.
        args, kwargs: example inputs: pytrees of tensors and static Python values.
        copy: copy the parameters (default), so that the Module is a snapshot that later
            updates of the torch model leave alone. ``copy=False`` shares the memory of the
            model's CPU tensors (read-only NumPy views; ``to_jax`` on CPU shares it too),
            for a model that is not changed afterwards: a conversion then holds no second
            copy of the weights (the ``convert`` command does this).

    Returns:
        A Module whose ``@main`` takes the parameters, buffers and lifted constants first,
        one argument per distinct tensor (tied weights such as GPT-2's embedding and LM head
        are one parameter, named as ``named_parameters()`` names it), then the user tensor
        inputs. Non-tensor inputs are specialized and recorded as ``static`` in the
        signature. A model with random ops (dropout in training mode, ``torch.rand``...)
        takes a PRNG key last (``signature.rng``): the backends supply it, and the numbers
        follow torch's distributions, not its exact stream.

    Raises:
        UnsupportedOpError: naming every ATen op without a rule, with counts and the source
            line of the first occurrence.
        OpConversionError: a rule failed; names the ATen op and its source line.
    """
    if isinstance(model, ExportedProgram):
        with progress.stage("Core ATen decompositions"):
            ep = export(model, args, kwargs)
    else:
        with progress.stage("torch.export and Core ATen decompositions"):
            ep = export(model, args, kwargs)
    graph = ep.graph_module.graph
    check_supported(graph)
    state = {**ep.state_dict, **ep.constants}
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]

    params: dict[str, np.ndarray] = {}
    param_specs: list[LeafSpec] = []
    canonical: dict[tuple, str] = {}
    # per placeholder: ("param", name) | ("input", i) | ("static", v); a TOKEN input (the
    # effect token of ``with_effects``, see lowering.WITH_EFFECTS) is a static dummy, and
    # TOKEN outputs are dropped with every output that is not a USER_OUTPUT
    feed: list[tuple[str, Any]] = []
    user_vals: list[Any] = []
    for node, spec in zip(placeholders, ep.graph_signature.input_specs, strict=True):
        if spec.kind in _PARAM_KINDS:
            tensor = state[spec.target]
            key = _tensor_key(tensor)
            if key not in canonical:
                canonical[key] = spec.target
                params[spec.target] = _to_numpy(tensor, copy)
                param_specs.append(_spec(spec.target, tensor, _PARAM_KINDS[spec.kind]))
            feed.append(("param", canonical[key]))
        elif spec.kind == InputKind.USER_INPUT:
            val = node.meta.get("val")
            user_vals.append(val)
            if isinstance(val, torch.Tensor):
                feed.append(("input", sum(1 for f in feed if f[0] == "input")))
            else:
                feed.append(("static", val))
        elif spec.kind == InputKind.TOKEN:
            feed.append(("static", np.zeros((0,), np.float32)))
        else:
            raise NotImplementedError(f"torch.export input kind {spec.kind} ({node.name})")

    in_tree = treespec_to_json(ep.call_spec.in_spec, user_vals)
    paths = leaf_paths(in_tree)
    tensor_vals = [v for v in user_vals if isinstance(v, torch.Tensor)]
    input_specs = [_spec(_input_name(p), v, "input") for p, v in zip(paths, tensor_vals, strict=True)]

    out_node = next(n for n in graph.nodes if n.op == "output")
    out_vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in out_node.args[0]]
    user_out = [i for i, s in enumerate(ep.graph_signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    out_tree = treespec_to_json(ep.call_spec.out_spec, [out_vals[i] for i in user_out])
    tensor_out = [i for i in user_out if isinstance(out_vals[i], torch.Tensor)]
    out_paths = leaf_paths(out_tree)
    output_specs = [
        _spec(f"outputs{p}", out_vals[i], "output") for p, i in zip(out_paths, tensor_out, strict=True)
    ]

    rng = RNG_KEY if _draws_random(graph) else None

    def fn(*flat):
        pvals = dict(zip((p.name for p in param_specs), flat[: len(param_specs)], strict=True))
        uvals = flat[len(param_specs) : len(param_specs) + len(input_specs)]
        inputs = [pvals[v] if k == "param" else uvals[v] if k == "input" else v for k, v in feed]
        if rng is None:
            outs = interpret(graph, inputs)
        else:
            with key_stream(flat[-1]):
                outs = interpret(graph, inputs)
        return tuple(outs[i] for i in tensor_out)

    arg_specs = (*param_specs, *input_specs, *((rng,) if rng else ()))
    avals = [jax.ShapeDtypeStruct(s.shape, dtypes.to_numpy(s.dtype)) for s in arg_specs]
    with progress.stage(f"lowering {len(graph.nodes)} ATen nodes to StableHLO") as info:
        with jax.enable_x64(True):
            lowered = jax.jit(fn, keep_unused=True).lower(*avals)  # dropped by the pass below
        module = lowered.compiler_ir("stablehlo")
        size = sum(a.nbytes for a in params.values())
        info["detail"] = f"{len(params)} parameters, {progress.size_text(size)}"
    signature = Signature(
        params=tuple(param_specs),
        inputs=tuple(input_specs),
        outputs=tuple(output_specs),
        in_tree=in_tree,
        out_tree=out_tree,
        rng=rng,
    )
    meta = {"torch_version": torch.__version__, "model": type(model).__name__}
    with progress.stage("passes"):
        return run_passes(Module(module, signature, params, source="torch", meta=meta))


def _draws_random(graph: torch.fx.Graph) -> bool:
    """Whether ``graph`` calls a random ATen op (then the module takes a PRNG key)."""
    return any(n.op == "call_function" and op_name(n) in RANDOM_OPS for n in graph.nodes)


def _input_name(path: str) -> str:
    from converter.signature import input_path

    return input_path(path)


__all__ = ["ATEN_RULES", "export", "from_torch"]
