"""Matrix products: ``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``addmv``, ``mv``, ``dot``,
the grouped ``_grouped_mm`` of mixture-of-experts layers (``native_functions.yaml``).

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


@register(aten._int_mm.default)
def int_mm(x, y):
    """``aten::_int_mm(Tensor self, Tensor mat2) -> Tensor``: int8 ``(n, k) @ (k, m)``
    accumulated exactly in int32 (wrapping, as torch's), an int32 result."""
    return jnp.matmul(x, y, preferred_element_type=jnp.int32)


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


@register(aten._grouped_mm.default, "transformers.grouped_mm_fallback.default")
def grouped_mm(x, w, offs=None, bias=None, out_dtype=None):
    """Grouped matrix product of mixture-of-experts layers, ``x (S, K)`` rows sorted by
    expert, ``w (E, K, N)``, ``offs (E,)`` cumulative row counts: rows ``offs[e-1] <=
    r < offs[e]`` are multiplied by ``w[e]``; rows from ``offs[-1]`` on are 0 (transformers'
    ``grouped_mm_fallback`` custom op, which Mixtral-style models export with on CPU; ATen's
    ``_grouped_mm`` leaves them undefined). ``bias (E, N)`` is added per row's expert.

    The expert of each row is counted from ``offs``, not a data-dependent split: the product
    is one ``(S, E*K) @ (E*K, N)`` matmul of each row placed in its expert's block (exact
    zeros elsewhere), so shapes stay static (and symbolic in ``S``) at ``E`` times the FLOPs
    of the grouped kernel.

    Raises:
        NotImplementedError: another form of ``_grouped_mm`` (3-D ``x``, 2-D ``w``, no
            ``offs``).
    """
    if x.ndim != 2 or w.ndim != 3 or offs is None:
        raise NotImplementedError(
            f"grouped mm of a {x.ndim}-D input and {w.ndim}-D weights "
            f"{'without' if offs is None else 'with'} offsets (only (S, K) @ (E, K, N) with offs)"
        )
    e = w.shape[0]
    rows = jnp.arange(x.shape[0], dtype=offs.dtype)
    expert = jnp.sum(offs[None, :] <= rows[:, None], axis=1)  # (S,); E past the last group
    onehot = (expert[:, None] == jnp.arange(e, dtype=expert.dtype)[None, :]).astype(x.dtype)
    spread = (onehot[:, :, None] * x[:, None, :]).reshape(x.shape[0], e * x.shape[1])
    out = _matmul(spread, w.reshape(e * w.shape[1], w.shape[2]))
    if bias is not None:
        out = out + _matmul(onehot, bias.astype(x.dtype))
    return out if out_dtype is None else out.astype(out_dtype)


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
