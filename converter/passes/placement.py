"""Host/device placement: one canonical form for every module.

JAX marks host computation with ``compute_on("device_host")``. Depending on how it is
stacked with ``jax.jit``, the StableHLO has either a ``func.call`` to a private function
carrying ``mhlo.frontend_attributes = {_xla_compute_type = "host"}``, or the attribute only
on loose ops inlined into their caller. Host memory is marked with ``mhlo.memory_kind``
argument/result attributes (``pinned_host``, ``unpinned_host``, ``device``) and
``annotate_device_placement`` custom calls (``_xla_buffer_placement``).

Canonical form, produced by :func:`normalize_placement`:

- every maximal run of host-marked ops in a block (a function body, or a ``while`` body or
  ``if``/``case`` branch nested in it; with the constants only they use) is outlined into a
  private ``@host_computation_N`` called with the host attribute from that block;
- each ``@main`` argument and result carries its memory kind both as ``mhlo.memory_kind``
  and in the signature (``LeafSpec.memory_kind``); a result produced by
  ``annotate_device_placement`` gets that placement as its memory kind, and the custom
  call, now redundant, is removed (one in the middle of a function, read by other ops too,
  stays: the backends have rules for it);
- ``signature.host_functions`` names the functions called for the host;
- ``sdy.sharding_constraint`` ops of a one-partition module (no-ops) are removed.

Backends then place host calls on the host: the JAX backend re-emits them under
``compute_on("device_host")``, so ``jax.jit(...).lower().compile()`` keeps
``_xla_compute_type="host"``. A target without host placement calls
:func:`strip_placement`, which removes it and records a warning in ``meta["warnings"]``.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_d

from converter import mlir
from converter.module import Module
from converter.placement import COMPUTE_TYPE, FRONTEND_ATTRS, MEMORY_KIND, host_functions, is_host

from ._ir import TERMINATORS, arg_attrs


class PlacementStrippedWarning(UserWarning):
    """Host placement was removed for a target that has none (:func:`strip_placement`): the
    numbers are unchanged, but host-placed computation runs on the target's device."""


def _host_attr() -> ir.Attribute:
    return ir.DictAttr.get({COMPUTE_TYPE: ir.StringAttr.get("host")})


def _nested(ops: list[ir.Operation]) -> set[ir.Operation]:
    out = set()
    for op in ops:
        out.add(op)
        out.update(mlir.walk_ops(op))
    return out


def _runs(block: ir.Block) -> list[list[ir.Operation]]:
    """Maximal runs of host ops (plus constants used only by host ops) in ``block``."""
    ops = [o.operation for o in block.operations]
    host = {op for op in ops if op.name != "func.call" and is_host(op)}

    def hostish(op: ir.Operation) -> bool:
        if op in host:
            return True
        return op.name == "stablehlo.constant" and all(u.owner.operation in host for u in op.results[0].uses)

    runs, cur = [], []
    for op in ops:
        if op.name not in TERMINATORS and hostish(op):
            cur.append(op)
            continue
        if any(o in host for o in cur):
            runs.append(cur)
        cur = []
    return runs


def _outline(module: ir.Module, run: list[ir.Operation], name: str) -> None:
    """Move ``run`` into a new private function ``name`` and call it with the host attribute."""
    inside = _nested(run)
    defined = {r for op in inside for r in op.results}
    defined |= {a for op in inside for reg in op.regions for b in reg.blocks for a in b.arguments}
    inputs: list[ir.Value] = []
    for op in inside:
        for v in op.operands:
            if v not in defined and v not in inputs:
                inputs.append(v)
    outputs = [r for op in run for r in op.results if any(u.owner.operation not in inside for u in r.uses)]
    siblings = [o.operation for o in run[0].block.operations]
    anchor = siblings[siblings.index(run[-1]) + 1]  # a run never ends with the terminator
    out_uses = {r: [u.owner.operation for u in r.uses if u.owner.operation not in inside] for r in outputs}

    with ir.InsertionPoint(module.body):
        fn = func_d.FuncOp(name, ([v.type for v in inputs], [r.type for r in outputs]), visibility="private")
    entry = fn.add_entry_block()
    with ir.InsertionPoint(entry):
        ret = func_d.ReturnOp(outputs)
    for op in run:
        op.move_before(ret.operation)
    for v, barg in zip(inputs, entry.arguments, strict=True):
        for op in inside:
            op.replace_uses_of_with(v, barg)
    with ir.InsertionPoint(anchor):
        call = func_d.CallOp([r.type for r in outputs], name, inputs)
    call.operation.attributes[FRONTEND_ATTRS] = _host_attr()
    for r, new in zip(outputs, call.operation.results, strict=True):
        for user in out_uses[r]:
            user.replace_uses_of_with(r, new)


def _annotated_placement(value: ir.Value) -> str | None:
    owner = value.owner
    if not isinstance(owner, ir.Block) and owner.operation.name == "stablehlo.custom_call":
        op = mlir.Op(owner.operation)
        if op.attr("call_target_name") == "annotate_device_placement":
            fa = op.attr(FRONTEND_ATTRS) or {}
            return fa.get("_xla_buffer_placement")
    return None


def _drop_annotation(value: ir.Value, ret: ir.Operation) -> None:
    """Bypass an ``annotate_device_placement`` feeding only ``@main``'s return: the
    result's memory kind now says the same; erase the custom call."""
    annot = value.owner.operation
    if any(u.owner.operation != ret for u in value.uses):
        return
    ret.replace_uses_of_with(value, annot.operands[0])
    if not list(value.uses):
        annot.erase()


def _set_dict_entry(attrs: list[ir.Attribute], i: int, key: str, value: str) -> None:
    d = ir.DictAttr(attrs[i])
    entries = {d[j].name: d[j].attr for j in range(len(d))}
    entries[key] = ir.StringAttr.get(value)
    attrs[i] = ir.DictAttr.get(entries)


def _memory_kinds(module: ir.Module, sig):
    """Reconcile memory kinds between ``@main``'s attributes and the signature."""
    main = mlir.main_function(module)
    block = main.regions[0].blocks[0]
    kept = list(range(len(sig.all_args))) if sig.kept_var_idx is None else list(sig.kept_var_idx)
    all_args = list(sig.all_args)
    a_attrs = arg_attrs(main) or [ir.DictAttr.get({}) for _ in block.arguments]
    for j, i in enumerate(kept):
        d = ir.DictAttr(a_attrs[j])
        if MEMORY_KIND in d:
            all_args[i] = replace(all_args[i], memory_kind=ir.StringAttr(d[MEMORY_KIND]).value)
        elif all_args[i].memory_kind:
            _set_dict_entry(a_attrs, j, MEMORY_KIND, all_args[i].memory_kind)
    main.attributes["arg_attrs"] = ir.ArrayAttr.get(a_attrs)
    ret = [o.operation for o in block.operations][-1]
    r_attrs = arg_attrs(main, "res_attrs") or [ir.DictAttr.get({}) for _ in ret.operands]
    outputs = list(sig.outputs)
    for j, v in enumerate(ret.operands):
        d = ir.DictAttr(r_attrs[j])
        kind = ir.StringAttr(d[MEMORY_KIND]).value if MEMORY_KIND in d else _annotated_placement(v)
        if not kind and j < len(outputs):
            kind = outputs[j].memory_kind
        if kind and j < len(outputs):
            outputs[j] = replace(outputs[j], memory_kind=kind)
            _set_dict_entry(r_attrs, j, MEMORY_KIND, kind)
        if kind and _annotated_placement(v) == kind:
            _drop_annotation(v, ret)
    main.attributes["res_attrs"] = ir.ArrayAttr.get(r_attrs)
    return sig.with_all_args(all_args).replace(outputs=tuple(outputs))


def _drop_single_device_constraints(module: ir.Module) -> None:
    """``sdy.sharding_constraint`` in a one-partition module (nested ``jit`` with
    shardings emits them) constrains nothing; forward its operand and erase it."""
    attrs = module.operation.attributes
    parts = mlir.decode_attribute(attrs["mhlo.num_partitions"]) if "mhlo.num_partitions" in attrs else 1
    if parts != 1:
        return
    for fn in mlir.functions(module).values():
        for op in list(mlir.walk_ops(fn)):
            if op.name == "sdy.sharding_constraint":
                op.results[0].replace_all_uses_with(op.operands[0])
                op.erase()


def loose_host_ops(module: ir.Module) -> list[ir.Operation]:
    """The host-marked ops (``_xla_compute_type = "host"``) that are not inside a host-called
    function and are not themselves host calls: what :func:`normalize_placement` outlines.
    Ops nested in ``while``/``if``/``case`` regions count. Empty for a canonical module."""
    host_fns = set(host_functions(module))
    return [
        op
        for name, fn in mlir.functions(module).items()
        if name not in host_fns
        for op in mlir.walk_ops(fn)
        if op.name != "func.call" and is_host(op)
    ]


class _Namer:
    """``host_computation_N`` names not yet taken in the module."""

    def __init__(self, module: ir.Module):
        self.module = module
        self.n = 0

    def __call__(self) -> str:
        taken = set(mlir.functions(self.module))
        while f"host_computation_{self.n}" in taken:
            self.n += 1
        name = f"host_computation_{self.n}"
        self.n += 1
        return name


def _outline_block(module: ir.Module, block: ir.Block, name: _Namer) -> None:
    """Outline the host runs of ``block``, then of the blocks nested in the ops left there
    (the bodies of ``while``, the branches of ``if``/``case``...): a host op in a loop body
    becomes a host call in the loop body."""
    for run in _runs(block):
        _outline(module, run, name())
    for op in [o.operation for o in block.operations]:
        for region in op.regions:
            for inner in region.blocks:
                _outline_block(module, inner, name)


def normalize_placement(module: Module) -> Module:
    """Bring host computation and memory kinds into the canonical form (module docstring).

    Host runs are outlined at every nesting level: one inside a ``while`` body or an
    ``if``/``case`` branch becomes a host call inside that region (capturing the enclosing
    values it reads as call operands).

    Returns:
        A new Module; the input is not mutated. ``signature.host_functions`` lists
        the host-called functions (absent when there are none).
    """
    ir_module = mlir.clone_module(module.mlir)
    with ir_module.context, ir.Location.unknown():
        host_fns = set(host_functions(ir_module))
        name = _Namer(ir_module)
        for fname, fn in list(mlir.functions(ir_module).items()):
            if fname not in host_fns:
                _outline_block(ir_module, fn.regions[0].blocks[0], name)
        sig = _memory_kinds(ir_module, module.signature)
        _drop_single_device_constraints(ir_module)
    sig = sig.replace(host_functions=tuple(host_functions(ir_module)))
    return Module(ir_module, sig, module.params, source=module.source, meta=module.meta)


def ensure_canonical(module: Module) -> Module:
    """``module`` itself when it has no :func:`loose_host_ops`, else
    :func:`normalize_placement` of it. The backends' preparation runs it
    (:data:`converter.passes.CANONICAL_PLACEMENT` in their ``PREPARE``), so a Module built
    without the frontends' passes still places its host computation."""
    return normalize_placement(module) if loose_host_ops(module.mlir) else module


def strip_placement(module: Module, target: str) -> Module:
    """Remove host placement for ``target``, a backend that cannot place computation on
    the host: the host attribute goes from every op and call, ``annotate_device_placement``
    custom calls are bypassed, memory kinds go from ``@main`` and the signature. Numerics
    are unchanged (everything runs on the target's device).

    Emits a :class:`PlacementStrippedWarning` and records it in ``meta["warnings"]``.
    """
    ir_module = mlir.clone_module(module.mlir)
    stripped = []
    with ir_module.context:
        for fn in mlir.functions(ir_module).values():
            for op in list(mlir.walk_ops(fn)):
                if is_host(op):
                    del op.attributes[FRONTEND_ATTRS]
                    stripped.append(op.name)
                elif _annotated_placement(op.results[0]) if len(op.results) == 1 else False:
                    op.results[0].replace_all_uses_with(op.operands[0])
                    op.erase()
                    stripped.append("annotate_device_placement")
        main = mlir.main_function(ir_module)
        for key in ("arg_attrs", "res_attrs"):
            attrs = arg_attrs(main, key)
            if attrs is None:
                continue
            new = []
            for a in attrs:
                d = ir.DictAttr(a)
                new.append(
                    ir.DictAttr.get({d[j].name: d[j].attr for j in range(len(d)) if d[j].name != MEMORY_KIND})
                )
            main.attributes[key] = ir.ArrayAttr.get(new)
    sig = module.signature
    kinds = sorted({s.memory_kind for s in sig.all_args + sig.outputs if s.memory_kind})
    clear = lambda specs: tuple(replace(s, memory_kind=None) for s in specs)  # noqa: E731
    sig = sig.replace(params=clear(sig.params), inputs=clear(sig.inputs), outputs=clear(sig.outputs))
    sig = sig.replace(host_functions=())
    meta = dict(module.meta)
    if stripped or kinds:
        msg = (
            f"{target} has no host placement: {len(stripped)} host-marked op(s)/call(s)/annotation(s) "
            "will run on the device" + (f"; memory kinds {kinds} dropped" if kinds else "")
        )
        warnings.warn(msg, PlacementStrippedWarning, stacklevel=2)
        meta["warnings"] = [*meta.get("warnings", []), msg]
    return Module(ir_module, sig, module.params, source=module.source, meta=meta)
