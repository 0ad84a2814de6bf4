"""View and shape ATen ops: ``view``, ``permute``, ``expand``, ``t``, ``clone``...

Every view is a value here (JAX has no aliasing); ``torch.export`` has already functionalized
the graph, so no in-place op reaches the rules.
"""

from __future__ import annotations

import jax.numpy as jnp

from ..registry import register

aten = __import__("torch").ops.aten


@register(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(x, shape):
    return jnp.reshape(x, shape)


@register(aten.permute.default)
def permute(x, dims):
    return jnp.transpose(x, dims)


@register(aten.t.default)
def t(x):
    return jnp.transpose(x) if x.ndim == 2 else x


@register(aten.expand.default)
def expand(x, size, implicit=False):
    shape = [x.shape[i - (len(size) - x.ndim)] if s == -1 else s for i, s in enumerate(size)]
    return jnp.broadcast_to(x, shape)


@register(aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default)
def clone(x, memory_format=None):
    return x


@register(aten._to_copy.default)
def to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    return x  # the walker casts to the recorded dtype
