"""The converter's own marker ops: the vocabulary the frontends write and the backends read.

StableHLO has no op for JAX's ``lax.stop_gradient``; ``from_jax`` (and ``from_torch`` when it
traces through JAX) keeps each one as ``stablehlo.custom_call @converter.stop_gradient(x)``
so that the converter's backends can emit ``lax.stop_gradient``/``Tensor.detach``/``Identity``.
This module only names the marker; :mod:`converter.passes.markers` removes it for consumers
that do not know it (XLA, other StableHLO tools). It imports nothing.
"""

from __future__ import annotations

#: the ``call_target_name`` of the custom call that marks a JAX source's ``lax.stop_gradient``
STOP_GRADIENT_TARGET = "converter.stop_gradient"
#: the backends' registry key of that custom call (``"stablehlo.custom_call@<target>"``)
STOP_GRADIENT_KEY = f"stablehlo.custom_call@{STOP_GRADIENT_TARGET}"

__all__ = ["STOP_GRADIENT_KEY", "STOP_GRADIENT_TARGET"]
