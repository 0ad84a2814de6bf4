"""Module → Module passes, run as one flat list; each is followed by :func:`verify`.

A pass takes a :class:`converter.Module` and returns a new one (the input is never
mutated). :data:`DEFAULT_PASSES` is what the frontends run on every module they produce:

- ``dead_arguments`` (:func:`converter.passes.dead_args.eliminate_dead_arguments`): drop
  ``@main`` arguments without a use, recording the kept ones in ``signature.kept_var_idx``.
- ``placement`` (:func:`converter.passes.placement.normalize_placement`): outline host
  computation into private functions called with ``_xla_compute_type = "host"`` and put
  memory kinds on the signature.

Not a default: ``narrow_64bit`` (:func:`converter.passes.narrow.narrow_64bit`), 64-bit
integer types computed in 32 bits where that is exact, for JAX's default 32-bit mode.

Each backend declares the passes it needs on what it is given as a ``PREPARE`` list
(``converter.backends.jax.PREPARE``...), run by :func:`prepare` at its entry point; no backend runs a
pass otherwise (shape refinement per call, :mod:`converter.passes.shapes`, is specialization,
not preparation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jaxlib.mlir import ir

from converter import mlir
from converter.errors import ConversionError
from converter.module import Module


class PassError(ConversionError):
    """A pass produced an invalid module (MLIR verifier or signature inconsistency)."""


@dataclass(frozen=True)
class Pass:
    """A named ``Module -> Module`` function."""

    name: str
    fn: Callable[[Module], Module]

    def __call__(self, module: Module) -> Module:
        return self.fn(module)


def verify(module: Module, after: str = "input") -> None:
    """Check ``module`` after pass ``after``: the MLIR verifier, and ``@main``'s arguments
    agree with the signature (count and, per kept argument, shape and dtype).

    Raises:
        PassError: naming the pass and what is inconsistent.
    """
    try:
        module.mlir.operation.verify()
    except ir.MLIRError as e:
        raise PassError(f"after {after}: MLIR verifier failed: {e}") from None
    sig = module.signature
    main = mlir.main_function(module.mlir)
    args = list(main.regions[0].blocks[0].arguments)
    kept = range(len(sig.all_args)) if sig.kept_var_idx is None else sig.kept_var_idx
    if len(args) != len(kept):
        raise PassError(
            f"after {after}: @main takes {len(args)} arguments but the signature keeps {len(kept)} "
            f"of {len(sig.all_args)}"
        )
    for arg, i in zip(args, kept, strict=True):
        spec = sig.all_args[i]
        t = mlir.tensor_type(arg.type)
        if (
            t.dtype != spec.dtype
            or len(t.shape) != len(spec.shape)
            or any(isinstance(a, int) and a != b for a, b in zip(spec.shape, t.shape, strict=True))
        ):
            raise PassError(
                f"after {after}: @main argument for {spec.name} is {list(t.shape)} {t.dtype}, "
                f"the signature says {list(spec.shape)} {spec.dtype}"
            )


def run_passes(module: Module, passes: Sequence[Pass] | None = None) -> Module:
    """Run ``passes`` (default :data:`DEFAULT_PASSES`) in order, verifying after each."""
    verify(module)
    for p in DEFAULT_PASSES if passes is None else passes:
        module = p(module)
        verify(module, p.name)
    return module


def prepare(module: Module, passes: Sequence[Pass]) -> Module:
    """A backend's preparation: ``passes`` (its ``PREPARE`` list) run in order on the module it
    was given, each followed by :func:`verify` when it changed the module (a pass with
    nothing to do returns its input, which needs no second check).

    Raises:
        PassError: a pass produced an invalid module.
    """
    for p in passes:
        out = p(module)
        if out is not module:
            verify(out, p.name)
        module = out
    return module


from .dead_args import eliminate_dead_arguments  # noqa: E402
from .narrow import narrow_64bit  # noqa: E402
from .placement import ensure_canonical, normalize_placement, strip_placement  # noqa: E402

DEAD_ARGUMENTS = Pass("dead_arguments", eliminate_dead_arguments)
PLACEMENT = Pass("placement", normalize_placement)
#: not a default pass: ``to_jax`` runs it for JAX's 32-bit mode (:mod:`converter.passes.narrow`)
NARROW_64BIT = Pass("narrow_64bit", narrow_64bit)
DEFAULT_PASSES: list[Pass] = [PLACEMENT, DEAD_ARGUMENTS]
#: a backends' preparation: host computation outlined (:func:`placement.ensure_canonical`) when
#: the module was built without :data:`PLACEMENT` (a no-op otherwise)
CANONICAL_PLACEMENT = Pass("canonical_placement", ensure_canonical)


def strip_placement_for(target: str) -> Pass:
    """A backends' preparation: host placement removed for ``target``, which cannot express
    it (:func:`placement.strip_placement`; warns when there was some)."""
    return Pass(f"strip_placement[{target}]", lambda module: strip_placement(module, target))


__all__ = [
    "CANONICAL_PLACEMENT",
    "DEAD_ARGUMENTS",
    "DEFAULT_PASSES",
    "NARROW_64BIT",
    "PLACEMENT",
    "Pass",
    "PassError",
    "eliminate_dead_arguments",
    "narrow_64bit",
    "normalize_placement",
    "prepare",
    "run_passes",
    "strip_placement_for",
    "verify",
]
