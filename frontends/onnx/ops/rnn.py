"""Recurrent ONNX ops: RNN, GRU, LSTM (https://onnx.ai/onnx/operators/onnx__LSTM.html ...),
each direction a ``lax.scan`` over time. Gate orders follow the operator pages: LSTM
``i, o, f, c``; GRU ``z, r, h``. ``sequence_lens`` masks steps past each batch entry's length
(state held, output zero), as the pages specify.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import onnx_op

_ACT = {
    "Sigmoid": lambda x, a, b: jax.nn.sigmoid(x),
    "Tanh": lambda x, a, b: jnp.tanh(x),
    "Relu": lambda x, a, b: jnp.maximum(x, 0),
    "Affine": lambda x, a, b: a * x + b,
    "LeakyRelu": lambda x, a, b: jnp.where(x >= 0, x, a * x),
    "ThresholdedRelu": lambda x, a, b: jnp.where(x > a, x, 0),
    "ScaledTanh": lambda x, a, b: a * jnp.tanh(b * x),
    "HardSigmoid": lambda x, a, b: jnp.clip(a * x + b, 0, 1),
    "Elu": lambda x, a, b: jnp.where(x >= 0, x, a * jnp.expm1(x)),
    "Softsign": lambda x, a, b: x / (1 + jnp.abs(x)),
    "Softplus": lambda x, a, b: jnp.logaddexp(x, 0),
}
_DEFAULT_ALPHA = {
    "Affine": 1.0,
    "LeakyRelu": 0.01,
    "ThresholdedRelu": 1.0,
    "ScaledTanh": 1.0,
    "HardSigmoid": 0.2,
    "Elu": 1.0,
}
_DEFAULT_BETA = {"Affine": 0.0, "ScaledTanh": 1.0, "HardSigmoid": 0.5}


def _acts(names, alphas, betas, per_dir, num_dir, defaults):
    names = list(names) if names else defaults * num_dir
    if len(names) == per_dir:
        names = names * num_dir
    out, ai, bi = [], 0, 0
    alphas, betas = list(alphas or []), list(betas or [])
    for n in names:
        a = _DEFAULT_ALPHA.get(n, 0.0)
        b = _DEFAULT_BETA.get(n, 0.0)
        if n in _DEFAULT_ALPHA and ai < len(alphas):
            a, ai = alphas[ai], ai + 1
        if n in _DEFAULT_BETA and bi < len(betas):
            b, bi = betas[bi], bi + 1
        out.append(lambda x, f=_ACT[n], a=a, b=b: f(x, a, b))
    return [out[d * per_dir : (d + 1) * per_dir] for d in range(num_dir)]


def _run(cell, x, states, seq_lens, reverse):
    """Scan ``cell(x_t, *states) -> states`` over time; returns (Y[seq, batch, hidden], states)."""
    t_len = x.shape[0]
    steps = jnp.arange(t_len)

    def step(carry, inp):
        xt, t = inp
        new = cell(xt, *carry)
        if seq_lens is None:
            return new, new[0]
        valid = (t < seq_lens)[:, None]
        new = tuple(jnp.where(valid, n, c) for n, c in zip(new, carry, strict=True))
        return new, jnp.where(valid, new[0], 0)

    final, ys = lax.scan(step, tuple(states), (x, steps), reverse=reverse)
    return ys, final


def _prepare(x, layout, initial, num_dir, batch, hidden, dtype):
    if layout:
        x = jnp.swapaxes(x, 0, 1)
    if initial is not None and layout:
        initial = jnp.swapaxes(initial, 0, 1)
    if initial is None:
        initial = jnp.zeros((num_dir, batch, hidden), dtype)
    return x, initial


def _finish(ys, finals, layout, ctx):
    y = jnp.stack(ys, axis=1)  # [seq, dir, batch, hidden]
    outs = [y] + [jnp.stack(f, axis=0) for f in finals]
    if layout:
        outs[0] = jnp.transpose(y, (2, 0, 1, 3))
        outs[1:] = [jnp.swapaxes(o, 0, 1) for o in outs[1:]]
    return tuple(outs[: ctx.num_outputs])


def _dirs(direction):
    return {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction]


def _seq_lens(ctx, seq_lens, t_len):
    return None if seq_lens is None else jnp.asarray(seq_lens).astype(np.int64)


@onnx_op("RNN", 7)
def rnn(
    ctx,
    x,
    w,
    r,
    b=None,
    seq_lens=None,
    initial_h=None,
    *,
    activation_alpha=None,
    activation_beta=None,
    activations=None,
    clip=None,
    direction="forward",
    hidden_size,
    layout=0,
):
    dirs = _dirs(direction)
    batch = x.shape[1 - layout] if layout == 0 else x.shape[0]
    x, h0 = _prepare(x, layout, initial_h, len(dirs), batch, hidden_size, x.dtype)
    acts = _acts(activations, activation_alpha, activation_beta, 1, len(dirs), ["Tanh"])
    sl = _seq_lens(ctx, seq_lens, x.shape[0])
    ys, hs = [], []
    for d, rev in enumerate(dirs):
        bias = 0 if b is None else b[d, :hidden_size] + b[d, hidden_size:]
        f = acts[d][0]

        def cell(xt, h, d=d, bias=bias, f=f):
            z = xt @ w[d].T + h @ r[d].T + bias
            if clip is not None:
                z = jnp.clip(z, -clip, clip)
            return (f(z),)

        y, (h,) = _run(cell, x, (h0[d],), sl, rev)
        ys.append(y)
        hs.append(h)
    return _finish(ys, [hs], layout, ctx)


@onnx_op("GRU", 7)
def gru(
    ctx,
    x,
    w,
    r,
    b=None,
    seq_lens=None,
    initial_h=None,
    *,
    activation_alpha=None,
    activation_beta=None,
    activations=None,
    clip=None,
    direction="forward",
    hidden_size,
    layout=0,
    linear_before_reset=0,
):
    dirs = _dirs(direction)
    batch = x.shape[1] if layout == 0 else x.shape[0]
    x, h0 = _prepare(x, layout, initial_h, len(dirs), batch, hidden_size, x.dtype)
    acts = _acts(activations, activation_alpha, activation_beta, 2, len(dirs), ["Sigmoid", "Tanh"])
    sl = _seq_lens(ctx, seq_lens, x.shape[0])
    H = hidden_size  # noqa: N806
    ys, hs = [], []
    for d, rev in enumerate(dirs):
        bw = jnp.zeros(3 * H, x.dtype) if b is None else b[d, : 3 * H]
        br = jnp.zeros(3 * H, x.dtype) if b is None else b[d, 3 * H :]
        f, g = acts[d]

        def cell(xt, h, d=d, bw=bw, br=br, f=f, g=g):
            xw = xt @ w[d].T + bw
            hr = h @ r[d, : 2 * H].T + br[: 2 * H]
            cz = xw[:, :H] + hr[:, :H]
            cr = xw[:, H : 2 * H] + hr[:, H:]
            if clip is not None:
                cz, cr = jnp.clip(cz, -clip, clip), jnp.clip(cr, -clip, clip)
            z, rr = f(cz), f(cr)
            if linear_before_reset:
                ch = xw[:, 2 * H :] + rr * (h @ r[d, 2 * H :].T + br[2 * H :])
            else:
                ch = xw[:, 2 * H :] + (rr * h) @ r[d, 2 * H :].T + br[2 * H :]
            if clip is not None:
                ch = jnp.clip(ch, -clip, clip)
            hh = g(ch)
            return ((1 - z) * hh + z * h,)

        y, (h,) = _run(cell, x, (h0[d],), sl, rev)
        ys.append(y)
        hs.append(h)
    return _finish(ys, [hs], layout, ctx)


@onnx_op("LSTM", 7)
def lstm(
    ctx,
    x,
    w,
    r,
    b=None,
    seq_lens=None,
    initial_h=None,
    initial_c=None,
    p=None,
    *,
    activation_alpha=None,
    activation_beta=None,
    activations=None,
    clip=None,
    direction="forward",
    hidden_size,
    input_forget=0,
    layout=0,
):
    dirs = _dirs(direction)
    batch = x.shape[1] if layout == 0 else x.shape[0]
    H = hidden_size  # noqa: N806
    xs, h0 = _prepare(x, layout, initial_h, len(dirs), batch, H, x.dtype)
    _, c0 = _prepare(x, layout, initial_c, len(dirs), batch, H, x.dtype)
    acts = _acts(activations, activation_alpha, activation_beta, 3, len(dirs), ["Sigmoid", "Tanh", "Tanh"])
    sl = _seq_lens(ctx, seq_lens, xs.shape[0])
    ys, hs, cs = [], [], []
    for d, rev in enumerate(dirs):
        bias = 0 if b is None else b[d, : 4 * H] + b[d, 4 * H :]
        pi, po, pf = (0, 0, 0) if p is None else (p[d, :H], p[d, H : 2 * H], p[d, 2 * H :])
        f, g, hf = acts[d]

        def cell(xt, h, c, d=d, bias=bias, pi=pi, po=po, pf=pf, f=f, g=g, hf=hf):
            gates = xt @ w[d].T + h @ r[d].T + bias
            if clip is not None:
                gates = jnp.clip(gates, -clip, clip)
            gi, go, gf, gc = (gates[:, k * H : (k + 1) * H] for k in range(4))
            i = f(gi + pi * c)
            fg = 1 - i if input_forget else f(gf + pf * c)
            cn = fg * c + i * g(gc)
            o = f(go + po * cn)
            return (o * hf(cn), cn)

        y, (h, c) = _run(cell, xs, (h0[d], c0[d]), sl, rev)
        ys.append(y)
        hs.append(h)
        cs.append(c)
    return _finish(ys, [hs, cs], layout, ctx)
