"""``aten.convolution.default``: N-d (1-d, 2-d, 3-d) convolution and transposed convolution
with stride, padding, dilation, output padding and groups (``native_functions.yaml``;
``torch.nn.functional.conv_transpose2d`` for the transposed layout).

Lowered to ``lax.conv_general_dilated`` (StableHLO ``convolution``) at
``Precision.HIGHEST`` so float32 matches eager torch.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from ..registry import register
from ._util import acc_dtype

aten = __import__("torch").ops.aten
HIGHEST = lax.Precision.HIGHEST


def _spec(nd):
    sp = "DHW"[3 - nd :] if nd <= 3 else None
    if sp is None:
        raise NotImplementedError(f"{nd}-d convolution")
    return ("NC" + sp, "OI" + sp, "NC" + sp)


def _per_dim(v, nd):
    v = list(v)
    return v * nd if len(v) == 1 else v


@register(aten.convolution.default)
def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """Cross-correlation of ``x`` ``(N, C_in, *S)`` with ``weight`` ``(C_out, C_in/groups, *K)``
    (transposed: ``(C_in, C_out/groups, *K)``), plus ``bias`` ``(C_out,)`` if given.

    Transposed convolution is the gradient of convolution: the input is dilated by
    ``stride``, padded by ``dilation * (K - 1) - padding`` (plus ``output_padding`` on the
    high side) and convolved with the spatially flipped kernel, in/out channels swapped per
    group. ``x`` always has its batch dim: ``aten.convolution`` refuses an unbatched input
    (``conv2d`` and the like add the batch dim before calling it).
    """
    nd = weight.ndim - 2
    stride, padding, dilation = (_per_dim(v, nd) for v in (stride, padding, dilation))
    acc = acc_dtype(jnp.result_type(x, weight))
    w_shape = weight.shape if not transposed else _t_shape(weight, groups)
    dn = lax.conv_dimension_numbers(x.shape, w_shape, _spec(nd))
    if not transposed:
        out = lax.conv_general_dilated(
            x,
            weight,
            window_strides=stride,
            padding=[(p, p) for p in padding],
            rhs_dilation=dilation,
            dimension_numbers=dn,
            feature_group_count=groups,
            precision=HIGHEST,
            preferred_element_type=acc,
        )
    else:
        output_padding = _per_dim(output_padding, nd)
        k = weight.shape[2:]
        pads = [
            (d * (kk - 1) - p, d * (kk - 1) - p + op)
            for kk, d, p, op in zip(k, dilation, padding, output_padding, strict=True)
        ]
        out = lax.conv_general_dilated(
            x,
            _transpose_kernel(weight, groups),
            window_strides=[1] * nd,
            padding=pads,
            lhs_dilation=stride,
            rhs_dilation=dilation,
            dimension_numbers=dn,
            feature_group_count=groups,
            precision=HIGHEST,
            preferred_element_type=acc,
        )
    if bias is not None:
        out = out + bias.reshape((1, -1) + (1,) * nd)
    return out


def _t_shape(weight, groups):
    cin, cout_g = weight.shape[:2]
    return (cout_g * groups, cin // groups, *weight.shape[2:])


def _transpose_kernel(weight, groups):
    """``(C_in, C_out/g, *K)`` → ``(C_out, C_in/g, *K)`` with the spatial dims reversed."""
    cin, cout_g = weight.shape[:2]
    k = weight.shape[2:]
    w = weight.reshape(groups, cin // groups, cout_g, *k)
    w = jnp.swapaxes(w, 1, 2).reshape(groups * cout_g, cin // groups, *k)
    return jnp.flip(w, tuple(range(2, w.ndim)))
