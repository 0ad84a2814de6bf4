"""Fused neural-network kernels: ``aten._trilinear`` (what ``F.bilinear`` exports to) and the
chunked linear + cross-entropy custom ops ``torch_nn._linear_cross_entropy_batch_chunked``
and ``torch_nn._linear_cross_entropy_batch_chunked_no_reduction``
(``torch/nn/modules/linear_cross_entropy.py``).

The chunking of the latter only bounds torch's peak memory; the lowering computes the same
loss (and, when asked, the gradients the op precomputes) over the whole batch at once.
"""

from __future__ import annotations

import string

import jax
import jax.numpy as jnp
import numpy as np

from ..registry import register
from ._util import acc_dtype, np_dtype

aten = __import__("torch").ops.aten


@register(aten._trilinear.default)
def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """``sum(i1' * i2' * i3', sumdim)`` where ``ik'`` is ``ik`` with size-1 dims inserted at
    ``expandk`` (``Linear.cpp``, ``_trilinear``): all three span the same ``total_dim`` dims,
    the summed ones are dropped from the result. ``unroll_dim`` only changes how torch loops.
    Computed as one ``einsum``."""
    total = i1.ndim + len(expand1)
    if total > len(string.ascii_letters):
        raise NotImplementedError(f"_trilinear over {total} dims")
    labels = string.ascii_letters[:total]
    subs, sizes = [], {}
    for x, expand in ((i1, expand1), (i2, expand2), (i3, expand3)):
        kept = [d for d in range(total) if d not in {e % total for e in expand}]
        subs.append("".join(labels[d] for d in kept))
        sizes.update({d: s for d, s in zip(kept, x.shape, strict=True)})
    summed = {d % total for d in sumdim}
    out_dims = [d for d in range(total) if d not in summed]
    present = [d for d in out_dims if d in sizes]
    spec = f"{','.join(subs)}->{''.join(labels[d] for d in present)}"
    dt = acc_dtype(np.result_type(i1.dtype, i2.dtype, i3.dtype))
    out = jnp.einsum(spec, i1.astype(dt), i2.astype(dt), i3.astype(dt))
    return out.reshape([sizes.get(d, 1) for d in out_dims])


def _class_weights(target, num_classes, weight, ignore_index, dtype):
    """Per-row ``weight[target]`` (1 without ``weight``), 0 where ``target == ignore_index``,
    and the target with ignored rows pointed at class 0."""
    ignored = target == ignore_index
    safe = jnp.where(ignored, 0, target)
    w = jnp.ones(target.shape, dtype) if weight is None else jnp.take(weight.astype(dtype), safe)
    return jnp.where(ignored, jnp.zeros((), dtype), w), safe


def _row_losses(x, linear_weight, linear_bias, safe_target, dtype):
    """``logsumexp(logits) - logits[target]`` per row, ``logits = x @ linear_weight.T + bias``."""
    logits = x.astype(dtype) @ linear_weight.astype(dtype).T
    if linear_bias is not None:
        logits = logits + linear_bias.astype(dtype)
    shifted = logits - jax.lax.stop_gradient(jnp.max(logits, axis=1, keepdims=True))
    picked = jnp.take_along_axis(shifted, safe_target[:, None], axis=1)[:, 0]
    return jnp.log(jnp.sum(jnp.exp(shifted), axis=1)) - picked


@register("torch_nn._linear_cross_entropy_batch_chunked.default")
def linear_cross_entropy_chunked(
    x,
    linear_weight,
    target,
    linear_bias,
    weight,
    reduction,
    ignore_index,
    label_smoothing,
    batch_chunk_size,
    acc_policy,
    acc_dtype_,
    allow_retain_graph,
    compute_input_grad,
    compute_linear_weight_grad,
    compute_linear_bias_grad,
):
    """``(loss, grad_input, grad_linear_weight, grad_linear_bias)`` of
    ``F.linear_cross_entropy``'s chunked path: the cross-entropy of ``x @ linear_weight.T +
    linear_bias`` (``x`` ``(N, F)``, ``linear_weight`` ``(C, F)``) against class indices
    ``target`` ``(N,)``, rows weighted by ``weight[target]`` and ``ignore_index`` rows left
    out, reduced by ``"sum"`` or ``"mean"`` (divided by the summed row weights; NaN when they
    sum to 0). Each gradient is computed when its ``compute_*`` flag is set, else it is an
    empty tensor (``(0, 0)``, ``(0, 0)``, ``(0,)``), as the op returns them.

    Raises:
        NotImplementedError: ``label_smoothing != 0`` or another reduction (torch never routes
            those here).
    """
    if label_smoothing != 0 or reduction not in ("mean", "sum"):
        raise NotImplementedError(
            f"chunked linear_cross_entropy with reduction={reduction!r}, label_smoothing={label_smoothing}"
        )
    dt = np_dtype(acc_dtype_) if acc_dtype_ is not None else acc_dtype(x.dtype)
    w, safe = _class_weights(target, linear_weight.shape[0], weight, ignore_index, dt)

    def loss_of(xx, lw, lb):
        total = jnp.sum(w * _row_losses(xx, lw, lb, safe, dt))
        if reduction == "sum":
            return total
        d = jnp.sum(w)
        return total / jnp.where(d == 0, jnp.asarray(np.nan, dt), d)

    loss, pullback = jax.vjp(loss_of, x, linear_weight, linear_bias)
    wanted = compute_input_grad or compute_linear_weight_grad or compute_linear_bias_grad
    grads = pullback(jnp.ones((), dt)) if wanted else (None, None, None)
    gx = grads[0] if compute_input_grad else jnp.zeros((0, 0), x.dtype)
    gw = grads[1] if compute_linear_weight_grad else jnp.zeros((0, 0), x.dtype)
    gb = grads[2] if compute_linear_bias_grad else jnp.zeros((0,), x.dtype)
    return loss, gx, gw, gb


@register("torch_nn._linear_cross_entropy_batch_chunked_no_reduction.default")
def linear_cross_entropy_chunked_no_reduction(
    x, linear_weight, target, linear_bias, weight, ignore_index, batch_chunk_size, acc_policy, acc_dtype_
):
    """Per-row loss ``(N,)`` of ``F.linear_cross_entropy(..., reduction="none")``'s chunked
    path: ``weight[target] * (logsumexp(logits) - logits[target])``, 0 for ``ignore_index``
    rows (see :func:`linear_cross_entropy_chunked`)."""
    dt = np_dtype(acc_dtype_) if acc_dtype_ is not None else acc_dtype(x.dtype)
    w, safe = _class_weights(target, linear_weight.shape[0], weight, ignore_index, dt)
    return w * _row_losses(x, linear_weight, linear_bias, safe, dt)
