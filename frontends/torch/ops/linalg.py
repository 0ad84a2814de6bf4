"""Matrix products: ``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``addmv``, ``mv``, ``dot``
(``native_functions.yaml``).

Products use ``Precision.HIGHEST`` so float32 results match eager torch on CPU; float16 and
bfloat16 accumulate in float32 (``preferred_element_type``) as torch's CPU BLAS does.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import register
from ._util import acc_dtype

aten = __import__("torch").ops.aten
HIGHEST = lax.Precision.HIGHEST


def _matmul(x, y):
    """``x @ y`` at the highest precision, accumulating half types in float32."""
    acc = acc_dtype(jnp.result_type(x, y))
    return jnp.matmul(x, y, precision=HIGHEST, preferred_element_type=acc)


def _addmul(bias, prod, beta, alpha):
    """``beta * bias + alpha * prod``; ``beta == 0`` ignores ``bias`` (even NaN), as torch.
    For integer and bool results the scalars are first converted to that dtype, as ATen's
    kernels do (``alpha.to<scalar_t>()``: ``alpha=0.6`` scales an int64 product by 0)."""
    if not jnp.issubdtype(prod.dtype, jnp.inexact):
        kind = np.dtype(prod.dtype).type
        alpha, beta = kind(alpha).item(), kind(beta).item()
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return prod
    return prod + (bias if beta == 1 else bias * beta)


@register(aten.mm.default)
def mm(x, y):
    """``(n, k) @ (k, m) -> (n, m)``."""
    return _matmul(x, y)


@register(aten.bmm.default)
def bmm(x, y):
    """``(b, n, k) @ (b, k, m) -> (b, n, m)``."""
    return _matmul(x, y)


@register(aten.mv.default)
def mv(x, v):
    """``(n, k) @ (k,) -> (n,)``."""
    return _matmul(x, v)


@register(aten.dot.default)
def dot(x, y):
    """Inner product of two vectors."""
    return _matmul(x, y)


@register(aten.addmm.default)
def addmm(bias, x, y, beta=1, alpha=1):
    """``beta * bias + alpha * (x @ y)``, ``bias`` broadcast to ``(n, m)``."""
    return _addmul(bias, _matmul(x, y), beta, alpha)


@register(aten.baddbmm.default)
def baddbmm(bias, x, y, beta=1, alpha=1):
    """``beta * bias + alpha * bmm(x, y)``."""
    return _addmul(bias, _matmul(x, y), beta, alpha)


@register(aten.addmv.default)
def addmv(bias, x, v, beta=1, alpha=1):
    """``beta * bias + alpha * (x @ v)``."""
    return _addmul(bias, _matmul(x, v), beta, alpha)


@register(aten.addbmm.default)
def addbmm(bias, x, y, beta=1, alpha=1):
    """``beta * bias + alpha * sum_b(x[b] @ y[b])``: ``(n, m)``."""
    return _addmul(bias, jnp.sum(_matmul(x, y), axis=0), beta, alpha)


@register(aten._cdist_forward.default)
def cdist(x1, x2, p, compute_mode=None):
    """Pairwise ``p``-norm distances ``(..., P, R)`` between the rows of ``x1`` ``(..., P, M)``
    and ``x2`` ``(..., R, M)``; ``p = 0`` counts differing coordinates, ``p = inf`` takes
    the largest difference. Computed directly (never through the matmul expansion)."""
    d = jnp.abs(x1[..., :, None, :] - x2[..., None, :, :])
    if p == 0:
        return jnp.sum((d != 0).astype(d.dtype), axis=-1)
    if p == float("inf"):
        return jnp.max(d, axis=-1)
    if p == 1:
        return jnp.sum(d, axis=-1)
    if p == 2:
        return jnp.sqrt(jnp.sum(d * d, axis=-1))
    return jnp.sum(d**p, axis=-1) ** (1.0 / p)


@register(aten._pdist_forward.default)
def pdist(x, p=2.0):
    """The ``p``-norm distances between every pair of rows ``i < j`` of ``x`` ``(N, M)``, in
    row-major pair order: ``(N * (N - 1) / 2,)``."""
    n = x.shape[0]
    i, j = np.triu_indices(n, 1)
    d = cdist(x[None], x[None], p)[0]
    return d[jnp.asarray(i), jnp.asarray(j)]
