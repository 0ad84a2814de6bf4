"""The only module that touches ``jax._src``.

A JAX upgrade that moves these internals breaks this file and nothing else.
"""

from __future__ import annotations

from jax._src.interpreters import mlir as _mlir


def make_ir_context():
    """A new ``jaxlib.mlir.ir.Context`` with every dialect JAX emits (func, stablehlo, chlo,
    sdy, mhlo) registered and loaded."""
    return _mlir.make_ir_context()


def refine_polymorphic_shapes(module):
    """JAX's own shape refinement of a ``jax.export`` module whose ``@main`` arguments are
    static (what ``Exported.call`` runs): it also turns the ``stablehlo.dynamic_*`` custom
    calls (``dynamic_reduce_window`` of ``cumsum``...) into static ops, which StableHLO's
    public passes leave dynamic. Returns a new module in JAX's context.

    Raises:
        ValueError: refinement failed (JAX's message, with the module dump hint).
    """
    return _mlir.refine_polymorphic_shapes(module)


def exported_from_stablehlo(name: str, serialized: bytes, in_avals: list, out_avals: list, platform: str):
    """A ``jax.export.Exported`` of an existing ``jax.export``-style StableHLO module
    (``serialized``: its portable artifact; ``@main`` takes exactly ``in_avals``, shapes may
    be ``jax.export`` symbolic, and returns ``out_avals`` as a flat tuple), so that
    ``Exported.call`` runs it, also under symbolic shapes inside another ``jax.export``.
    ``jax.export`` has no public constructor from StableHLO: this fills the fields as
    ``jax.export.export`` does for one platform, no shardings and no effects.

    Args:
        in_avals, out_avals: ``(shape, dtype)`` pairs.
    """
    import jax
    from jax._src import core

    ins = tuple(core.ShapedArray(tuple(s), d) for s, d in in_avals)
    outs = tuple(core.ShapedArray(tuple(s), d) for s, d in out_avals)
    symbolic = any(not isinstance(x, int) for a in (*ins, *outs) for x in a.shape)
    return jax.export.Exported(
        fun_name=name,
        in_tree=jax.tree.structure((tuple(range(len(ins))), {})),
        in_avals=ins,
        out_tree=jax.tree.structure(tuple(range(len(outs)))),
        out_avals=outs,
        _has_named_shardings=False,
        _in_named_shardings=(None,) * len(ins),
        _out_named_shardings=(None,) * len(outs),
        in_shardings_hlo=(None,) * len(ins),
        out_shardings_hlo=(None,) * len(outs),
        nr_devices=1,
        platforms=(platform,),
        ordered_effects=(),
        unordered_effects=(),
        disabled_safety_checks=(),
        mlir_module_serialized=serialized,
        calling_convention_version=jax.config.jax_export_calling_convention_version,  # what export writes
        module_kept_var_idx=tuple(range(len(ins))),
        uses_global_constants=symbolic,
        _get_vjp=None,
    )
