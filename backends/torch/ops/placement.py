"""Placement ops: ``annotate_device_placement``, the custom call JAX emits for
``jax.device_put(x, <memory kind>)`` inside ``jit`` on TPU/GPU and around ``compute_on``
results. Normalization (:mod:`converter.passes.placement`) turns one that only feeds
``@main``'s return into the result's memory kind; one in the middle of a function stays and
is run here, with the torch devices of :mod:`converter.backends.torch.placement`."""

from __future__ import annotations

from converter.placement import HOST_KINDS, buffer_placement

from ..placement import CPU
from ..registry import register


@register("stablehlo.custom_call@annotate_device_placement")
def _annotate_device_placement(interp, op, x):
    """Host memory kinds (``pinned_host``, ``unpinned_host``) are CPU tensors: ``x`` is
    copied to CPU (page-locked for ``pinned_host`` on a CUDA module); ``device`` copies it to
    the device being computed on. A value already there is not copied (on a CPU module the
    rule is the identity); a value copied back reuses its original. Without a placer (a bare
    interpreter) the rule is the identity: the numbers never change."""
    placer = getattr(interp, "placer", None)
    kind = buffer_placement(op)
    if placer is None:
        return x
    if kind in HOST_KINDS:
        return placer.to(x, CPU, pin=kind == "pinned_host")
    return placer.to(x, placer.current)
