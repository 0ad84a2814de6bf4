"""Lowering a flat JAX function to StableHLO: the one path every frontend takes.

The torch and ONNX frontends build a flat function of arrays (parameters, then inputs) that
replays the source graph with ``jax.lax``; ``from_jax`` takes the user's function. All lower
it here, to the StableHLO ``jax.jit`` would compile:

- static shapes: ``jax.jit(fn, keep_unused=True).lower(*avals)`` with constants embedded in
  the program (``@main`` takes the signature's arguments only);
- symbolic shapes (``jax.export`` symbolic dimensions in ``avals``): :func:`export`, the
  shape-polymorphic module ``jax.export`` serializes, with its shape assertions.

``lax.stop_gradient`` has no StableHLO op; with ``mark_stop_gradients`` each one is kept as
``stablehlo.custom_call @converter.stop_gradient`` (:mod:`converter.markers`) so that the
backends keep gradients from flowing where the source's do not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
from jaxlib.mlir import ir

from . import _jax_internal, mlir
from .markers import STOP_GRADIENT_TARGET


def export(jitted: Any, *args: Any, mark_stop_gradients: bool = True, **kwargs: Any) -> jax.export.Exported:
    """``jax.export.export(jitted)(*args, **kwargs)``, each ``lax.stop_gradient`` kept as a
    ``@converter.stop_gradient`` marker when ``mark_stop_gradients`` (the export's safety
    check allows that custom call either way). Works on static and symbolic shapes.

    Raises:
        whatever ``jax.export`` raises (tracing errors, unsupported primitives).
    """
    allow = [jax.export.DisabledSafetyCheck.custom_call(STOP_GRADIENT_TARGET)]
    marked = _jax_internal.stop_gradient_marked() if mark_stop_gradients else contextlib.nullcontext()
    with marked:
        return jax.export.export(jitted, disabled_checks=allow)(*args, **kwargs)


def lower(
    fn: Callable[..., Any],
    avals: Sequence[jax.ShapeDtypeStruct],
    *,
    symbolic: bool,
    filename: str = "<lowered>",
    mark_stop_gradients: bool = False,
) -> tuple[ir.Module, list[Any]]:
    """The StableHLO of the flat function ``fn`` of arrays shaped as ``avals`` (64-bit types
    enabled while tracing, every argument kept), and its output avals (flattened).

    Args:
        fn: a function of ``len(avals)`` arrays returning a pytree of arrays.
        avals: one ``jax.ShapeDtypeStruct`` per argument; with ``symbolic``, their shapes may
            hold ``jax.export`` symbolic dimensions.
        symbolic: lower through :func:`export` (shape-polymorphic StableHLO, parsed into the
            converter's MLIR context, errors naming ``filename``); otherwise through
            ``jax.jit(...).lower`` with constants embedded.
        filename: the source's name, for parse errors.
        mark_stop_gradients: keep ``lax.stop_gradient`` as ``@converter.stop_gradient``.
    """
    marked = _jax_internal.stop_gradient_marked() if mark_stop_gradients else contextlib.nullcontext()
    with jax.enable_x64(True), marked:
        if symbolic:
            exported = export(jax.jit(fn, keep_unused=True), *avals, mark_stop_gradients=False)
            return mlir.parse_module(exported.mlir_module_serialized, filename=filename, verified=True), list(
                exported.out_avals
            )
        with _jax_internal.embedded_constants():  # @main takes the signature's arguments only
            lowered = jax.jit(fn, keep_unused=True).lower(*avals)
        return lowered.compiler_ir("stablehlo"), jax.tree.leaves(lowered.out_info)


__all__ = ["export", "lower"]
