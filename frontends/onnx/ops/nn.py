"""Neural-network ONNX ops: Conv, ConvTranspose, pooling, normalizations, LRN, Resize
(https://onnx.ai/onnx/operators/). Layout is NC + spatial dims, as ONNX defines it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import onnx_op


def _auto_pad(auto_pad, in_sp, k, s, d, pads):
    n = len(in_sp)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for i in range(n):
            o = -(-in_sp[i] // s[i])
            total = max((o - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in_sp[i], 0)
            lo = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            out.append((lo, total - lo))
        return out
    if auto_pad == "VALID":
        return [(0, 0)] * n
    pads = list(pads) if pads else [0] * (2 * n)
    return [(pads[i], pads[i + n]) for i in range(n)]


@onnx_op("Conv", 1)
def conv(
    ctx,
    x,
    w,
    b=None,
    *,
    auto_pad="NOTSET",
    dilations=None,
    group=1,
    kernel_shape=None,
    pads=None,
    strides=None,
):
    """Conv (cross-correlation), groups via ``feature_group_count``."""
    n = x.ndim - 2
    k = w.shape[2:]
    s = strides or [1] * n
    d = dilations or [1] * n
    padding = _auto_pad(auto_pad, x.shape[2:], k, s, d, pads)
    y = lax.conv_general_dilated(
        x,
        w.astype(x.dtype),
        s,
        padding,
        rhs_dilation=d,
        feature_group_count=group,
        preferred_element_type=x.dtype if x.dtype != np.float16 else None,
    )
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * n)
    return y


@onnx_op("ConvTranspose", 1)
def conv_transpose(
    ctx,
    x,
    w,
    b=None,
    *,
    auto_pad="NOTSET",
    dilations=None,
    group=1,
    kernel_shape=None,
    output_padding=None,
    output_shape=None,
    pads=None,
    strides=None,
):
    """ConvTranspose as the gradient of Conv: dilate the input by the stride, pad by
    ``d*(k-1) - pad``, convolve with the flipped kernel (I/O swapped per group)."""
    n = x.ndim - 2
    k = w.shape[2:]
    s = strides or [1] * n
    d = dilations or [1] * n
    op = output_padding or [0] * n
    in_sp = x.shape[2:]
    if output_shape is not None:
        out_sp = list(output_shape)[-n:]
        total = [s[i] * (in_sp[i] - 1) + op[i] + ((k[i] - 1) * d[i] + 1) - out_sp[i] for i in range(n)]
        if auto_pad == "SAME_UPPER":
            pl = [t // 2 for t in total]
        else:
            pl = [t - t // 2 for t in total]
        padding = [(pl[i], total[i] - pl[i]) for i in range(n)]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out_sp = [in_sp[i] * s[i] for i in range(n)]
        total = [s[i] * (in_sp[i] - 1) + op[i] + ((k[i] - 1) * d[i] + 1) - out_sp[i] for i in range(n)]
        short = [i for i in range(n) if total[i] < 0]
        if short:  # the page's size input * stride needs negative padding (cropping) there
            raise ValueError(
                f"ConvTranspose auto_pad {auto_pad}: on spatial axes {short} the dilated kernel "
                "plus output_padding is shorter than the stride; the operator page's output "
                "size input * stride would need negative padding there, which onnxruntime "
                "clamps at 0 (a smaller output) and onnx.reference does not, so the size is "
                "ambiguous; give explicit pads or output_shape"
            )
        pl = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
        padding = [(pl[i], total[i] - pl[i]) for i in range(n)]
    else:
        p = list(pads) if pads else [0] * (2 * n)
        padding = [(p[i], p[i + n]) for i in range(n)]
    cin, cout_g = w.shape[0], w.shape[1]
    # w: (Cin, Cout/g, k...) -> (Cout, Cin/g, k...) flipped
    wg = w.reshape((group, cin // group, cout_g) + tuple(k))
    wg = jnp.swapaxes(wg, 1, 2).reshape((group * cout_g, cin // group) + tuple(k))
    wg = jnp.flip(wg, axis=tuple(range(2, 2 + n)))
    conv_pad = [
        (d[i] * (k[i] - 1) - padding[i][0], d[i] * (k[i] - 1) - padding[i][1] + op[i]) for i in range(n)
    ]
    y = lax.conv_general_dilated(
        x, wg.astype(x.dtype), [1] * n, conv_pad, lhs_dilation=s, rhs_dilation=d, feature_group_count=group
    )
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * n)
    return y


def _pool_padding(ctx, x, kernel, strides, dilations, pads, auto_pad, ceil_mode):
    n = len(kernel)
    in_sp = x.shape[2:]
    padding = _auto_pad(auto_pad, in_sp, kernel, strides, dilations, pads)
    if ceil_mode:
        new = []
        for i in range(n):
            lo, hi = padding[i]
            eff = (kernel[i] - 1) * dilations[i] + 1
            size = in_sp[i] + lo + hi - eff
            out = -(-size // strides[i]) + 1
            # the last window must start inside the (left-padded) input
            if (out - 1) * strides[i] >= in_sp[i] + lo:
                out -= 1
            need = (out - 1) * strides[i] + eff - (in_sp[i] + lo + hi)
            new.append((lo, hi + max(need, 0)))
        padding = new
    return padding


@onnx_op("MaxPool", 8)
def max_pool(
    ctx,
    x,
    *,
    auto_pad="NOTSET",
    ceil_mode=0,
    dilations=None,
    kernel_shape,
    pads=None,
    storage_order=0,
    strides=None,
):
    """MaxPool; the optional Indices output is the flat NCHW index (row-major, or column-major
    with ``storage_order=1``)."""
    n = len(kernel_shape)
    s = strides or [1] * n
    d = dilations or [1] * n
    padding = _pool_padding(ctx, x, kernel_shape, s, d, pads, auto_pad, ceil_mode)
    init = -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
    full_pad = [(0, 0), (0, 0)] + list(padding)
    win = (1, 1) + tuple(kernel_shape)
    strd = (1, 1) + tuple(s)
    dil = (1, 1) + tuple(d)
    y = lax.reduce_window(x, jnp.asarray(init, x.dtype), lax.max, win, strd, full_pad, window_dilation=dil)
    if ctx.num_outputs < 2 or not ctx.node.output[1]:
        return y
    # ties go to the first element in row-major order (onnxruntime and the ONNX reference
    # agree on it for both storage orders; the spec leaves it open)
    sp = x.shape[2:]
    size = int(np.prod(sp))
    row_major = [int(np.prod(sp[i + 1 :])) for i in range(n)]
    flat_idx = sum(lax.broadcasted_iota(np.int64, x.shape, 2 + i) * row_major[i] for i in range(n))
    nc = lax.broadcasted_iota(np.int64, x.shape, 0) * x.shape[1] + lax.broadcasted_iota(np.int64, x.shape, 1)
    flat_idx = flat_idx + nc * size

    def pick(a, b):
        (va, ia), (vb, ib) = a, b
        take_b = (vb > va) | ((vb == va) & (ib < ia))
        return jnp.where(take_b, vb, va), jnp.where(take_b, ib, ia)

    _, idx = lax.reduce_window(
        (x, flat_idx),
        (jnp.asarray(init, x.dtype), jnp.asarray(np.iinfo(np.int64).max, np.int64)),
        pick,
        win,
        strd,
        full_pad,
        window_dilation=dil,
    )
    if storage_order:  # the same element's index with the spatial dims column-major
        rest = idx % size
        col_major = [int(np.prod(sp[:i])) for i in range(n)]
        idx = idx - rest + sum((rest // row_major[i]) % sp[i] * col_major[i] for i in range(n))
    return y, idx


@onnx_op("AveragePool", 7)
def average_pool(
    ctx,
    x,
    *,
    auto_pad="NOTSET",
    ceil_mode=0,
    count_include_pad=0,
    dilations=None,
    kernel_shape,
    pads=None,
    strides=None,
):
    """AveragePool; padding counts toward the divisor only with ``count_include_pad`` (the
    extra ceil-mode padding never does)."""
    n = len(kernel_shape)
    s = strides or [1] * n
    d = dilations or [1] * n
    base = _auto_pad(auto_pad, x.shape[2:], kernel_shape, s, d, pads)
    padding = _pool_padding(ctx, x, kernel_shape, s, d, pads, auto_pad, ceil_mode)
    full_pad = [(0, 0), (0, 0)] + list(padding)
    win = (1, 1) + tuple(kernel_shape)
    strd = (1, 1) + tuple(s)
    dil = (1, 1) + tuple(d)
    total = lax.reduce_window(x, jnp.zeros((), x.dtype), lax.add, win, strd, full_pad, window_dilation=dil)
    cnt = np.ones((1, 1), np.float64)
    for i in range(n):
        lo, hi = base[i]
        size = x.shape[2 + i]
        valid_lo, valid_hi = (0, size + lo + hi) if count_include_pad else (lo, lo + size)
        eff = (kernel_shape[i] - 1) * d[i] + 1
        starts = np.arange(total.shape[2 + i]) * s[i]
        taps = starts[:, None] + np.arange(kernel_shape[i])[None, :] * d[i]
        per_dim = ((taps >= valid_lo) & (taps < valid_hi)).sum(axis=1)
        cnt = cnt[..., None] * per_dim
        del eff
    return total / cnt.astype(x.dtype)


@onnx_op("LpPool", 11)
def lp_pool(
    ctx, x, *, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape, p=2, pads=None, strides=None
):
    n = len(kernel_shape)
    s = strides or [1] * n
    d = dilations or [1] * n
    padding = _pool_padding(ctx, x, kernel_shape, s, d, pads, auto_pad, ceil_mode)
    full_pad = [(0, 0), (0, 0)] + list(padding)
    tot = lax.reduce_window(
        jnp.abs(x) ** p,
        jnp.zeros((), x.dtype),
        lax.add,
        (1, 1) + tuple(kernel_shape),
        (1, 1) + tuple(s),
        full_pad,
        window_dilation=(1, 1) + tuple(d),
    )
    return tot ** (1.0 / p)


@onnx_op("GlobalAveragePool", 1)
def global_average_pool(ctx, x):
    return jnp.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@onnx_op("GlobalMaxPool", 1)
def global_max_pool(ctx, x):
    return jnp.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@onnx_op("GlobalLpPool", 2)
def global_lp_pool(ctx, x, *, p=2):
    return jnp.sum(jnp.abs(x) ** p, axis=tuple(range(2, x.ndim)), keepdims=True) ** (1.0 / p)


def _chan(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


@onnx_op("BatchNormalization", 7)
def batch_norm(ctx, x, scale, b, mean, var, *, epsilon=1e-5, momentum=0.9, training_mode=0, spatial=1):
    """BatchNormalization in inference mode; ``training_mode=1`` (opset 14) also returns the
    running statistics updated with ``momentum``."""
    if training_mode:
        axes = (0,) + tuple(range(2, x.ndim))
        m = jnp.mean(x, axis=axes)
        v = jnp.var(x, axis=axes)
        y = _chan(scale, x.ndim) * (x - _chan(m, x.ndim)) / jnp.sqrt(_chan(v, x.ndim) + epsilon) + _chan(
            b, x.ndim
        )
        rm = mean * momentum + m * (1 - momentum)
        rv = var * momentum + v * (1 - momentum)
        return (y, rm, rv)[: ctx.num_outputs]
    y = _chan(scale, x.ndim) * (x - _chan(mean, x.ndim)) / jnp.sqrt(_chan(var, x.ndim) + epsilon) + _chan(
        b, x.ndim
    )
    return y


@onnx_op("InstanceNormalization", 6)
def instance_norm(ctx, x, scale, b, *, epsilon=1e-5):
    axes = tuple(range(2, x.ndim))
    m = jnp.mean(x, axis=axes, keepdims=True)
    v = jnp.var(x, axis=axes, keepdims=True)
    return _chan(scale, x.ndim) * (x - m) / jnp.sqrt(v + epsilon) + _chan(b, x.ndim)


@onnx_op("LayerNormalization", 17)
def layer_norm(ctx, x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    """LayerNormalization over ``axis..``; outputs Y, Mean, InvStdDev (computed in float32
    when ``stash_type=1``)."""
    axis = axis % x.ndim
    axes = tuple(range(axis, x.ndim))
    xf = x.astype(np.float32) if stash_type == 1 and x.dtype != np.float64 else x
    m = jnp.mean(xf, axis=axes, keepdims=True)
    v = jnp.mean((xf - m) ** 2, axis=axes, keepdims=True)
    inv = 1 / jnp.sqrt(v + epsilon)
    y = ((xf - m) * inv).astype(x.dtype) * scale
    if b is not None:
        y = y + b
    return (y, m, inv)[: ctx.num_outputs]


@onnx_op("RMSNormalization", 23)
def rms_norm(ctx, x, scale, *, axis=-1, epsilon=1e-5, stash_type=1):
    axis = axis % x.ndim
    axes = tuple(range(axis, x.ndim))
    xf = x.astype(np.float32) if stash_type == 1 and x.dtype != np.float64 else x
    inv = 1 / jnp.sqrt(jnp.mean(xf * xf, axis=axes, keepdims=True) + epsilon)
    return (xf * inv).astype(x.dtype) * scale


@onnx_op("GroupNormalization", 21)
def group_norm(ctx, x, scale, b, *, epsilon=1e-5, num_groups, stash_type=1):
    """GroupNormalization (opset 21: per-channel scale and bias)."""
    n, c = x.shape[:2]
    xf = x.astype(np.float32) if stash_type == 1 and x.dtype != np.float64 else x
    g = xf.reshape((n, num_groups, -1))
    m = jnp.mean(g, axis=2, keepdims=True)
    v = jnp.var(g, axis=2, keepdims=True)
    y = ((g - m) / jnp.sqrt(v + epsilon)).reshape(x.shape).astype(x.dtype)
    return y * _chan(scale, x.ndim) + _chan(b, x.ndim)


@onnx_op("GroupNormalization", 18, until=18)
def group_norm_18(ctx, x, scale, b, *, epsilon=1e-5, num_groups):
    """GroupNormalization-18: scale and bias are per group."""
    n, c = x.shape[:2]
    g = x.reshape((n, num_groups, -1))
    m = jnp.mean(g, axis=2, keepdims=True)
    v = jnp.var(g, axis=2, keepdims=True)
    y = (g - m) / jnp.sqrt(v + epsilon)
    y = y * scale.reshape(1, -1, 1) + b.reshape(1, -1, 1)
    return y.reshape(x.shape)


@onnx_op("LpNormalization", 1)
def lp_norm(ctx, x, *, axis=-1, p=2):
    if p == 1:
        nrm = jnp.sum(jnp.abs(x), axis=axis, keepdims=True)
    else:
        nrm = jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=True))
    return jnp.where(nrm == 0, jnp.zeros((), x.dtype), x / jnp.where(nrm == 0, 1, nrm))


@onnx_op("MeanVarianceNormalization", 13)
def mvn(ctx, x, *, axes=(0, 2, 3)):
    axes = tuple(axes)
    m = jnp.mean(x, axis=axes, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=axes, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-9)


@onnx_op("LRN", 13)
def lrn(ctx, x, *, alpha=0.0001, beta=0.75, bias=1.0, size):
    """LRN across channels: ``x / (bias + alpha/size * sum(x^2 over the window))^beta``."""
    sq = x * x
    lo = (size - 1) // 2
    hi = size - 1 - lo
    pad = [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2)
    s = lax.reduce_window(
        sq, jnp.zeros((), x.dtype), lax.add, (1, size) + (1,) * (x.ndim - 2), (1,) * x.ndim, pad
    )
    return x / (bias + alpha / size * s) ** beta


@onnx_op("LRN", 1, until=1)
def lrn_1(ctx, x, **kw):
    return lrn(ctx, x, **kw)


_ = jax


def _bilinear_zero(img, y, x):
    """Sample ``img`` (N, C, H, W) at float positions ``y``/``x`` (N, P), bilinear, corners
    outside the image read 0. Returns (N, C, P)."""
    n, c, h, w = img.shape
    flat = img.reshape(n, c, h * w)
    y0, x0 = jnp.floor(y), jnp.floor(x)
    out = 0
    for dy in (0, 1):
        for dx in (0, 1):
            yc, xc = y0 + dy, x0 + dx
            wt = (1 - jnp.abs(y - yc)) * (1 - jnp.abs(x - xc))
            ok = (yc >= 0) & (yc < h) & (xc >= 0) & (xc < w)
            idx = (jnp.clip(yc, 0, h - 1) * w + jnp.clip(xc, 0, w - 1)).astype(np.int64)
            vals = jnp.take_along_axis(flat, jnp.broadcast_to(idx[:, None, :], (n, c, idx.shape[1])), axis=2)
            out = out + vals * jnp.where(ok, wt, 0)[:, None, :].astype(img.dtype)
    return out


@onnx_op("DeformConv", 19)
def deform_conv(
    ctx,
    x,
    w,
    offset,
    b=None,
    mask=None,
    *,
    dilations=None,
    group=1,
    kernel_shape=None,
    offset_group=1,
    pads=None,
    strides=None,
):
    """DeformConv (2-D): each kernel tap samples the input bilinearly at its regular position
    plus a learned offset (zero outside), scaled by ``mask``; then a grouped convolution."""
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    s = strides or [1, 1]
    d = dilations or [1, 1]
    p = pads or [0, 0, 0, 0]
    oh = (h + p[0] + p[2] - (d[0] * (kh - 1) + 1)) // s[0] + 1
    ow = (wd + p[1] + p[3] - (d[1] * (kw - 1) + 1)) // s[1] + 1
    k = kh * kw
    base_y = (np.arange(oh) * s[0] - p[0])[None, :, None] + (np.arange(kh) * d[0]).repeat(kw)[:, None, None]
    base_x = (np.arange(ow) * s[1] - p[1])[None, None, :] + np.tile(np.arange(kw) * d[1], kh)[:, None, None]
    off = offset.reshape(n, offset_group, k, 2, oh, ow)
    cpg = c // offset_group
    cols = []
    for g in range(offset_group):
        ys = (base_y[None] + off[:, g, :, 0]).reshape(n, -1)
        xs = (base_x[None] + off[:, g, :, 1]).reshape(n, -1)
        v = _bilinear_zero(x[:, g * cpg : (g + 1) * cpg], ys, xs).reshape(n, cpg, k, oh, ow)
        if mask is not None:
            v = v * mask.reshape(n, offset_group, k, oh, ow)[:, g][:, None]
        cols.append(v)
    col = jnp.concatenate(cols, axis=1)  # (N, C, K, OH, OW)
    col = col.reshape(n, group, c // group, k, oh, ow)
    wg = w.reshape(group, oc // group, cg, k)
    y = jnp.einsum("ngckhw,gock->ngohw", col, wg).reshape(n, oc, oh, ow)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y
