"""Dead-argument elimination on ``@main``.

JAX's own lowering drops unused arguments (``jax.jit(...).lower()`` keeps only
``Exported.module_kept_var_idx``), so a caller that assumes one HLO parameter per input
gets a parameter-count mismatch. This pass makes the convention explicit: after removing
dead code, every ``@main`` argument without a use is erased and the indices (into
``signature.params + signature.inputs``) of the remaining ones are recorded in
``signature.kept_var_idx``, composed with what was dropped before (by JAX, or by an earlier
run). Backends accept the full signature and never transfer the dropped inputs.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from converter import mlir
from converter.module import Module

from ._ir import arg_attrs, function_type, remove_dead_code, set_function_type


def eliminate_dead_arguments(module: Module) -> Module:
    """Remove every ``@main`` argument that has no use after dead-code removal.

    Returns:
        A new Module (the input is not mutated) whose ``signature.kept_var_idx`` lists the
        kept indices into ``params + inputs``, or is None when every argument is kept.
        Parameter values are all kept (callers still pass the full signature).
    """
    sig = module.signature
    old_kept = list(range(len(sig.all_args)) if sig.kept_var_idx is None else sig.kept_var_idx)
    ir_module = mlir.clone_module(module.mlir)
    with ir_module.context, ir.Location.unknown():
        main = mlir.main_function(ir_module)
        block = main.regions[0].blocks[0]
        remove_dead_code(block, mlir.functions(ir_module))
        used = [bool(list(a.uses)) for a in block.arguments]
        attrs = arg_attrs(main)
        for i in reversed(range(len(used))):
            if not used[i]:
                block.erase_argument(i)
        ftype = function_type(main)
        set_function_type(main, [a.type for a in block.arguments], list(ftype.results))
        if attrs is not None:
            main.attributes["arg_attrs"] = ir.ArrayAttr.get(
                [a for a, u in zip(attrs, used, strict=True) if u]
            )
    kept = tuple(i for i, u in zip(old_kept, used, strict=True) if u)
    new_sig = sig.replace(kept_var_idx=None if len(kept) == len(sig.all_args) else kept)
    return Module(ir_module, new_sig, module.params, source=module.source, meta=module.meta)
