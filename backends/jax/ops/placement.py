"""Placement ops: ``annotate_device_placement``, the custom call JAX emits for
``jax.device_put(x, <memory kind>)`` inside ``jit`` on TPU/GPU and around ``compute_on``
results (``jax._src.interpreters.mlir.wrap_with_memory_kind``). Normalization
(:mod:`converter.passes.placement`) turns one that only feeds ``@main``'s return into the
result's memory kind; one in the middle of a function stays and is run here."""

from __future__ import annotations

import jax

from converter.placement import buffer_placement

from ..registry import register

_SPACES = {
    "device": jax.memory.Space.Device,
    "pinned_host": jax.memory.Space.Host,
    # JAX's memory spaces have one host space (pinned); an unpinned_host buffer is put there
    "unpinned_host": jax.memory.Space.Host,
}


@register("stablehlo.custom_call@annotate_device_placement")
def _annotate_device_placement(interp, op, x):
    """``jax.device_put(x, space)``: the value moves to host memory (``pinned_host``,
    ``unpinned_host``) or back to device memory (``device``); numbers unchanged. Under
    ``jit`` the traced value carries the memory space, so a later op mixing host-memory
    and device-memory operands raises (JAX's memory-space check), as it does in the source.

    Raises:
        ConversionError: ``_xla_buffer_placement`` names no known memory kind."""
    return jax.device_put(x, _SPACES[buffer_placement(op)])
