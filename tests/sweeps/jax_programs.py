"""Realistic JAX programs for the JAX sweep (``tests/sweeps/jax_sweep.py``).

Each factory returns a :class:`Program`: the function (called ``fn(params, *args)`` when it
has parameters, else ``fn(*args)``), its parameters, a ``make(**sizes)`` building example
arguments at given sizes, the symbolic shape of each argument leaf (``None`` when the program
is not shape-polymorphic) and which checks apply. Tiny sizes: each program builds in well
under a second.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx


@dataclasses.dataclass
class Program:
    """One program of the sweep.

    ``make(**sizes)`` returns the argument tuple at those sizes (``sizes`` are the names in
    ``shapes``; defaults give the example). ``shapes`` is a tuple of ``jax.export`` shape
    specs, one per argument leaf in flattening order (``"b, s"``), or None (static shapes).
    ``sizes`` lists the size assignments run (two for symbolic programs). ``grad``: the
    outputs are differentiable in the parameters and float inputs. ``compile``/``texport``:
    run ``torch.compile`` / ``torch.export`` of the converted module. ``vmap``: run
    ``jax.vmap`` of the converted function (leading batch axis on every argument leaf)."""

    fn: Callable
    params: Any
    make: Callable[..., tuple]
    shapes: tuple[str, ...] | None = None
    constraints: tuple[str, ...] = ()
    sizes: tuple[dict, ...] = ({},)
    grad: bool = True
    compile: bool = False
    texport: bool = False
    vmap: bool = True
    tol: float = 1e-4
    note: str = ""


def _rng(seed=0):
    return np.random.default_rng(seed)


def _f32(*shape, seed=0, scale=1.0):
    return (_rng(seed).normal(size=shape) * scale).astype(np.float32)


# ---------------------------------------------------------------------------- transformer decoders


def rope(x, pos):
    """Rotary position embedding of ``x`` [b, s, heads, head_dim] at positions ``pos`` [s]."""
    half = x.shape[-1] // 2
    freqs = 1.0 / (10000.0 ** (jnp.arange(half, dtype=jnp.float32) / half))
    ang = pos[:, None] * freqs[None]
    cos, sin = jnp.cos(ang)[None, :, None, :], jnp.sin(ang)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


class RopeAttention(nn.Module):
    heads: int
    dim: int

    @nn.compact
    def __call__(self, x, mask):
        hd = self.dim // self.heads
        q, k, v = (nn.DenseGeneral((self.heads, hd), name=n)(x) for n in "qkv")
        pos = jnp.arange(x.shape[1], dtype=jnp.float32)
        q, k = rope(q, pos), rope(k, pos)
        a = nn.dot_product_attention(q, k, v, mask=mask)
        return nn.DenseGeneral(self.dim, axis=(-2, -1), name="o")(a)


class LinenDecoder(nn.Module):
    """Token decoder: embedding, a RoPE layer (``nn.dot_product_attention``), a layer with
    ``nn.MultiHeadDotProductAttention``, both causal; RMSNorm/LayerNorm; tied LM head."""

    vocab: int = 97
    dim: int = 32
    heads: int = 4

    @nn.compact
    def __call__(self, ids):
        embed = nn.Embed(self.vocab, self.dim)
        x = embed(ids)
        mask = nn.make_causal_mask(ids)
        x = x + RopeAttention(self.heads, self.dim)(nn.RMSNorm()(x), mask)
        x = x + nn.Dense(self.dim)(nn.silu(nn.Dense(2 * self.dim)(nn.RMSNorm()(x))))
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads)(h, h, mask=mask)
        x = x + nn.Dense(self.dim)(nn.gelu(nn.Dense(2 * self.dim)(nn.LayerNorm()(x))))
        return embed.attend(nn.LayerNorm()(x))


def _ids(b=2, s=7, vocab=97, seed=0):
    return (_rng(seed).integers(0, vocab, size=(b, s)).astype(np.int32),)


def linen_decoder():
    model = LinenDecoder()
    params = model.init(jax.random.PRNGKey(0), _ids()[0])
    return Program(
        model.apply,
        params,
        lambda b=2, s=7: _ids(b, s),
        shapes=("b, s",),
        sizes=({"b": 2, "s": 7}, {"b": 3, "s": 5}),
        compile=True,
        texport=True,
    )


class NnxBlock(nnx.Module):
    def __init__(self, dim, heads, rngs):
        self.heads = heads
        self.norm1 = nnx.LayerNorm(dim, rngs=rngs)
        self.qkv = nnx.Linear(dim, 3 * dim, rngs=rngs)
        self.out = nnx.Linear(dim, dim, rngs=rngs)
        self.norm2 = nnx.RMSNorm(dim, rngs=rngs)
        self.up = nnx.Linear(dim, 2 * dim, rngs=rngs)
        self.down = nnx.Linear(2 * dim, dim, rngs=rngs)

    def __call__(self, x):
        b, s, d = x.shape
        q, k, v = jnp.split(self.qkv(self.norm1(x)), 3, axis=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads) for t in (q, k, v))
        pos = jnp.arange(s, dtype=jnp.float32)
        a = jax.nn.dot_product_attention(rope(q, pos), rope(k, pos), v, is_causal=True)
        x = x + self.out(a.reshape(b, s, d))
        return x + self.down(jax.nn.gelu(self.up(self.norm2(x))))


class NnxDecoder(nnx.Module):
    def __init__(self, vocab=97, dim=32, heads=4, rngs=None):
        self.embed = nnx.Embed(vocab, dim, rngs=rngs)
        self.blocks = nnx.List([NnxBlock(dim, heads, rngs) for _ in range(2)])
        self.norm = nnx.LayerNorm(dim, rngs=rngs)
        self.head = nnx.Linear(dim, vocab, use_bias=False, rngs=rngs)

    def __call__(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def nnx_decoder():
    graphdef, state = nnx.split(NnxDecoder(rngs=nnx.Rngs(0)))

    def fn(state, ids):
        return nnx.merge(graphdef, state)(ids)

    return Program(
        fn,
        state,
        lambda b=2, s=7: _ids(b, s),
        shapes=("b, s",),
        constraints=("s <= 64",),
        sizes=({"b": 2, "s": 7}, {"b": 1, "s": 4}),
        compile=True,
        texport=True,
    )


def decoder_train_step():
    """One optax Adam step of the linen decoder (value_and_grad + update in one function)."""
    model = LinenDecoder(vocab=61, dim=32)
    ids0 = _ids(2, 6, vocab=61)[0]
    params = model.init(jax.random.PRNGKey(0), ids0)
    # eps 1e-4, not 1e-8: attention's key biases have a zero gradient (softmax ignores a
    # shift of every score), whose rounding noise Adam would scale up to +-lr in any framework
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-2, eps=1e-4, weight_decay=1e-2))
    state = {"params": params, "opt": opt.init(params), "step": jnp.zeros((), jnp.int32)}

    def step(state, ids, labels):
        def loss_fn(p):
            logits = model.apply(p, ids)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        loss, grads = jax.value_and_grad(loss_fn)(state["params"])
        updates, opt_state = opt.update(grads, state["opt"], state["params"])
        new = {
            "params": optax.apply_updates(state["params"], updates),
            "opt": opt_state,
            "step": state["step"] + 1,
        }
        return new, {"loss": loss, "grad_norm": optax.global_norm(grads)}

    def make(b=2, s=6):
        ids = _rng(1).integers(0, 61, size=(b, s)).astype(np.int32)
        return ids, np.roll(ids, -1, axis=1)

    return Program(
        step,
        state,
        make,
        shapes=("b, s", "b, s"),
        sizes=({"b": 2, "s": 6}, {"b": 3, "s": 4}),
        grad=False,
        vmap=False,
        note="state (params, adam moments, step) as parameters; outputs the new state",
    )


# ---------------------------------------------------------------------------- CNN with BatchNorm, Dropout


class BNCNN(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.Conv(8, (3, 3))(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        x = nn.relu(x)
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = nn.Conv(16, (3, 3), padding="VALID")(x)
        x = nn.BatchNorm(use_running_average=not train)(x)
        x = nn.Dropout(0.25, deterministic=not train)(nn.relu(x))
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(10)(x)


def _bn_cnn_vars():
    x = _f32(2, 10, 10, 3)
    variables = BNCNN().init({"params": jax.random.PRNGKey(0)}, x, train=False)
    # non-trivial running statistics
    variables = jax.tree_util.tree_map(lambda a: a, variables)
    variables["batch_stats"] = jax.tree_util.tree_map(
        lambda a: a + 0.1 * jnp.arange(a.size, dtype=a.dtype).reshape(a.shape), variables["batch_stats"]
    )
    return variables


def bn_cnn_train():
    """Train mode: dropout from an input key, batch statistics returned (mutable)."""
    model = BNCNN()

    def fn(variables, x, key):
        y, updates = model.apply(variables, x, train=True, rngs={"dropout": key}, mutable=["batch_stats"])
        return y, updates

    return Program(
        fn,
        _bn_cnn_vars(),
        lambda b=2: (_f32(b, 10, 10, 3), jax.random.PRNGKey(3)),
        shapes=("b, 10, 10, 3", "2"),
        sizes=({"b": 2}, {"b": 4}),
        vmap=False,
        compile=True,
    )


def bn_cnn_eval():
    model = BNCNN()
    return Program(
        lambda v, x: model.apply(v, x, train=False),
        _bn_cnn_vars(),
        lambda b=2: (_f32(b, 10, 10, 3),),
        shapes=("b, 10, 10, 3",),
        sizes=({"b": 2}, {"b": 5}),
        texport=True,
    )


# ---------------------------------------------------------------------------- recurrent


class LSTMModel(nn.Module):
    @nn.compact
    def __call__(self, x):
        ys = nn.RNN(nn.OptimizedLSTMCell(16))(x)
        back = nn.RNN(nn.LSTMCell(8), reverse=True, keep_order=True)(x)
        return nn.Dense(4)(jnp.concatenate([ys, back], -1))


def lstm():
    model = LSTMModel()
    x = _f32(2, 6, 5)
    params = model.init(jax.random.PRNGKey(0), x)
    return Program(
        model.apply,
        params,
        lambda b=2, s=6: (_f32(b, s, 5),),
        shapes=("b, s, 5",),
        sizes=({"b": 2, "s": 6}, {"b": 3, "s": 3}),
        texport=True,
    )


class GRUScan(nn.Module):
    @nn.compact
    def __call__(self, x):
        scan = nn.scan(
            nn.GRUCell, variable_broadcast="params", split_rngs={"params": False}, in_axes=1, out_axes=1
        )
        carry = jnp.zeros((x.shape[0], 12), x.dtype)
        carry, ys = scan(features=12)(carry, x)
        return carry, nn.Dense(3)(ys)


def gru_scan():
    model = GRUScan()
    x = _f32(2, 5, 4)
    params = model.init(jax.random.PRNGKey(0), x)
    return Program(
        model.apply,
        params,
        lambda b=2, s=5: (_f32(b, s, 4),),
        shapes=("b, s, 4",),
        sizes=({"b": 2, "s": 5}, {"b": 1, "s": 8}),
    )


# ---------------------------------------------------------------------------- VAE, MoE


class VAE(nn.Module):
    latent: int = 8

    @nn.compact
    def __call__(self, x, key):
        h = nn.relu(nn.Dense(32)(x))
        mu, logvar = nn.Dense(self.latent)(h), nn.Dense(self.latent)(h)
        eps = jax.random.normal(key, mu.shape)
        z = mu + jnp.exp(0.5 * logvar) * eps
        recon = nn.sigmoid(nn.Dense(x.shape[-1])(nn.relu(nn.Dense(32)(z))))
        kl = -0.5 * jnp.sum(1 + logvar - mu**2 - jnp.exp(logvar), axis=-1)
        return recon, kl


def vae():
    model = VAE()
    x = _f32(3, 12)
    key = jax.random.key(1)
    params = model.init(jax.random.PRNGKey(0), x, key)
    return Program(
        model.apply,
        params,
        lambda b=3: (_f32(b, 12), jax.random.key(1)),
        shapes=("b, 12", ""),
        sizes=({"b": 3}, {"b": 2}),
        vmap=False,
        note="typed key (jax.random.key) input",
    )


def vae_rawkey():
    model = VAE()
    x = _f32(3, 12)
    params = model.init(jax.random.PRNGKey(0), x, jax.random.PRNGKey(1))
    return Program(model.apply, params, lambda: (_f32(3, 12), jax.random.PRNGKey(2)), vmap=False)


class MoE(nn.Module):
    experts: int = 4
    k: int = 2
    hidden: int = 32

    @nn.compact
    def __call__(self, x):
        t, d = x.shape
        logits = nn.Dense(self.experts, use_bias=False)(x)
        vals, idx = jax.lax.top_k(logits, self.k)
        gates = jax.nn.softmax(vals, axis=-1)
        init = nn.initializers.lecun_normal()
        w1 = self.param("w1", init, (self.experts, d, self.hidden))
        w2 = self.param("w2", init, (self.experts, self.hidden, d))
        # dispatch by one-hot combine weights, as in GShard/Switch implementations
        combine = jnp.sum(jax.nn.one_hot(idx, self.experts) * gates[..., None], axis=1)  # [t, E]
        h = jax.nn.gelu(jnp.einsum("td,edh->teh", x, w1))
        y = jnp.einsum("teh,ehd->ted", h, w2)
        out = jnp.einsum("te,ted->td", combine, y)
        # gather-based selection of the same experts
        sel = jnp.take_along_axis(y, idx[..., None], axis=1)
        out2 = jnp.sum(gates[..., None] * sel, axis=1)
        load = jnp.mean(jax.nn.one_hot(idx[:, 0], self.experts), axis=0)
        aux = self.experts * jnp.sum(load * jnp.mean(jax.nn.softmax(logits), axis=0))
        return {"out": out, "out_gather": out2, "experts": idx, "aux": aux}


def moe():
    model = MoE()
    x = _f32(6, 16)
    params = model.init(jax.random.PRNGKey(0), x)
    return Program(
        model.apply,
        params,
        lambda t=6: (_f32(t, 16),),
        shapes=("t, 16",),
        sizes=({"t": 6}, {"t": 9}),
        compile=True,
    )


# ---------------------------------------------------------------------------- lax control flow


def scan_ema():
    def fn(p, xs, h0):
        def body(h, x):
            h = jnp.tanh(p["a"] * h + x @ p["w"])
            return h, (h.sum(-1), h > 0)

        h, (ys, pos) = jax.lax.scan(body, h0, xs)
        return h, ys, pos

    p = {"a": np.float32(0.7), "w": _f32(4, 4, seed=1)}
    return Program(
        fn,
        p,
        lambda s=5, b=2: (_f32(s, b, 4), _f32(b, 4, seed=2)),
        shapes=("s, b, 4", "b, 4"),
        sizes=({"s": 5, "b": 2}, {"s": 3, "b": 3}),
        texport=True,
    )


def fori_newton():
    """sqrt by 6 Newton steps (static trip count) and a fori_loop with a traced bound."""

    def fn(x, n):
        y = jax.lax.fori_loop(0, 6, lambda i, y: 0.5 * (y + x / y), jnp.ones_like(x))
        z = jax.lax.fori_loop(0, n, lambda i, z: z * 0.5 + jnp.sin(z) + i, x)
        return y, z

    return Program(
        fn,
        None,
        lambda: (np.abs(_f32(3, 4)) + 0.5, np.int32(4)),
        grad=False,  # JAX itself has no reverse mode through a fori_loop with a traced bound
        note="traced fori bound: a while loop",
    )


def while_converge():
    def fn(x):
        def cond(c):
            i, y, err = c
            return (err > 1e-5) & (i < 50)

        def body(c):
            i, y, _ = c
            y2 = jnp.cos(y)
            return i + 1, y2, jnp.max(jnp.abs(y2 - y))

        i, y, _ = jax.lax.while_loop(cond, body, (jnp.int32(0), x, jnp.float32(1.0)))
        return y, i

    return Program(fn, None, lambda b=4: (_f32(b),), shapes=("b",), sizes=({"b": 4}, {"b": 6}), grad=False)


def cond_switch():
    def fn(p, x, branch):
        y = jax.lax.cond(jnp.sum(x) > 0, lambda v: jnp.sin(v) @ p, lambda v: jnp.cos(v) @ p.T, x)
        z = jax.lax.switch(branch, [lambda v: v * 2, lambda v: jnp.exp(-v), lambda v: v**2], y)
        return z, jnp.argmax(z, axis=-1)

    return Program(
        fn,
        _f32(4, 4, seed=3),
        lambda b=2: (_f32(b, 4), np.int32(1)),
        shapes=("b, 4", ""),
        sizes=({"b": 2}, {"b": 3}),
    )


# ---------------------------------------------------------------------------- checkpoint, custom rules


class RematMLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        Block = nn.remat(nn.Dense)
        for _ in range(2):
            x = nn.gelu(Block(16)(x))
        return x


def checkpoint():
    model = RematMLP()
    x = _f32(3, 8)
    params = model.init(jax.random.PRNGKey(0), x)

    def fn(params, x):
        f = jax.checkpoint(lambda p, x: model.apply(p, x) ** 2, policy=jax.checkpoint_policies.dots_saveable)
        return f(params, x).sum(-1)

    return Program(fn, params, lambda b=3: (_f32(b, 8),), shapes=("b, 8",), sizes=({"b": 3}, {"b": 2}))


@jax.custom_jvp
def log1pexp(x):
    return jnp.log1p(jnp.exp(x))


log1pexp.defjvp(lambda primals, tangents: (log1pexp(primals[0]), tangents[0] * jax.nn.sigmoid(primals[0])))


@jax.custom_vjp
def stable_norm(x):
    return jnp.sqrt(jnp.sum(x * x, -1))


def _sn_fwd(x):
    n = stable_norm(x)
    return n, (x, n)


def _sn_bwd(res, g):
    x, n = res
    return (g[..., None] * x / jnp.maximum(n, 1e-12)[..., None],)


stable_norm.defvjp(_sn_fwd, _sn_bwd)


def custom_rules():
    def fn(w, x):
        h = log1pexp(x @ w)
        return stable_norm(h), jnp.sum(log1pexp(x), -1)

    return Program(
        fn,
        _f32(5, 6, seed=4),
        lambda b=3: (_f32(b, 5, scale=3.0),),
        shapes=("b, 5",),
        sizes=({"b": 3}, {"b": 4}),
        note="custom_vjp whose bwd is the true derivative",
    )


# ---------------------------------------------------------------------------- linalg


def linalg():
    def fn(a, b):
        spd = a @ a.T + 4 * jnp.eye(a.shape[0], dtype=a.dtype)
        chol = jnp.linalg.cholesky(spd)
        x = jnp.linalg.solve(spd, b)
        sign, logdet = jnp.linalg.slogdet(spd)
        q, r = jnp.linalg.qr(a)
        s = jnp.linalg.svd(a, compute_uv=False)
        w = jnp.linalg.eigvalsh(spd)
        inv = jnp.linalg.inv(spd)
        return {
            "chol": chol,
            "x": x,
            "logdet": logdet,
            "sign": sign,
            "det": jnp.linalg.det(spd),
            "r_abs": jnp.abs(jnp.diag(r)),
            "qr": q @ r,
            "s": s,
            "w": w,
            "inv": inv,
            "norm": jnp.linalg.norm(a, axis=-1),
            "pinv": jnp.linalg.pinv(a),
        }

    return Program(fn, None, lambda: (_f32(4, 4), _f32(4, 2, seed=1)), grad=True)


def linalg_batched():
    """Batched solve/cholesky under a symbolic batch."""

    def fn(a, b):
        spd = a @ jnp.swapaxes(a, -1, -2) + 4 * jnp.eye(a.shape[-1], dtype=a.dtype)
        return jnp.linalg.solve(spd, b), jnp.linalg.cholesky(spd), jnp.linalg.slogdet(spd)[1]

    return Program(
        fn,
        None,
        lambda n=2: (_f32(n, 3, 3), _f32(n, 3, 2, seed=1)),
        shapes=("n, 3, 3", "n, 3, 2"),
        sizes=({"n": 2}, {"n": 5}),
    )


# ---------------------------------------------------------------------------- integer/bool outputs, pytrees


def int_bool_outputs():
    def fn(x, labels):
        pred = jnp.argmax(x, -1)
        correct = pred == labels
        order = jnp.argsort(x, axis=-1)
        counts = jnp.sum(x > 0, axis=0, dtype=jnp.int32)
        top = jax.lax.top_k(x, 2)[1]
        return {
            "pred": pred,
            "correct": correct,
            "acc": correct.mean(),
            "order": order,
            "counts": counts,
            "top": top,
        }

    return Program(
        fn,
        None,
        lambda b=4: (_f32(b, 5), _rng(1).integers(0, 5, size=(b,)).astype(np.int32)),
        shapes=("b, 5", "b"),
        sizes=({"b": 4}, {"b": 7}),
        grad=False,
    )


def pytree_io():
    def fn(p, batch):
        x, (mask, extra) = batch["x"], batch["aux"]
        h = jnp.tanh(x @ p["dense"]["w"] + p["dense"]["b"])
        h = jnp.where(mask[..., None], h, 0.0)
        return {
            "h": h,
            "pair": (h.sum(), None),
            "stats": {"mean": h.mean(0), "any": jnp.any(mask)},
            "extra": extra * 2 if extra is not None else None,
        }

    p = {"dense": {"w": _f32(4, 3), "b": np.zeros(3, np.float32)}}
    return Program(
        fn,
        p,
        lambda b=3: ({"x": _f32(b, 4), "aux": (_rng(2).random(b) > 0.3, None)},),
        shapes=("b", "b, 4"),  # leaf order: dict keys sorted ("aux" before "x")
        sizes=({"b": 3}, {"b": 5}),
    )


# ---------------------------------------------------------------------------- more Flax idioms


class NnxTrainNet(nnx.Module):
    """nnx model whose call updates its state: BatchNorm statistics and the Dropout rng count."""

    def __init__(self, rngs):
        self.conv = nnx.Conv(3, 8, (3, 3), rngs=rngs)
        self.bn = nnx.BatchNorm(8, rngs=rngs)
        self.drop = nnx.Dropout(0.2, rngs=rngs)
        self.out = nnx.Linear(8, 5, rngs=rngs)

    def __call__(self, x):
        h = self.drop(nnx.relu(self.bn(self.conv(x))))
        return self.out(h.mean(axis=(1, 2)))


def nnx_bn_dropout_train():
    graphdef, state = nnx.split(NnxTrainNet(nnx.Rngs(0, dropout=1)))

    def fn(state, x):
        model = nnx.merge(graphdef, state)
        model.train()
        y = model(x)
        return y, nnx.state(model)

    return Program(fn, state, lambda b=2: (_f32(b, 8, 8, 3),), vmap=False, note="state with typed rng keys")


class ScannedLayers(nn.Module):
    """Transformer-style stack as ``nn.scan`` over layers (parameters stacked on axis 0)."""

    @nn.compact
    def __call__(self, x):
        class Layer(nn.Module):
            @nn.compact
            def __call__(self, h, _):
                return h + nn.Dense(h.shape[-1])(nn.gelu(nn.LayerNorm()(h))), None

        Stack = nn.scan(Layer, variable_axes={"params": 0}, split_rngs={"params": True}, length=3)
        h, _ = Stack()(x, None)
        return h


def linen_scan_layers():
    model = ScannedLayers()
    x = _f32(2, 5, 16)
    params = model.init(jax.random.PRNGKey(0), x)
    return Program(
        model.apply,
        params,
        lambda b=2, s=5: (_f32(b, s, 16),),
        shapes=("b, s, 16",),
        sizes=({"b": 2, "s": 5}, {"b": 1, "s": 3}),
    )


def linen_bf16_decoder():
    """Mixed precision: bfloat16 compute, float32 parameters (``dtype``/``param_dtype``)."""

    class Bf16Block(nn.Module):
        @nn.compact
        def __call__(self, ids):
            x = nn.Embed(97, 32, dtype=jnp.bfloat16)(ids)
            mask = nn.make_causal_mask(ids)
            h = nn.LayerNorm(dtype=jnp.bfloat16)(x)
            x = x + nn.MultiHeadDotProductAttention(num_heads=4, dtype=jnp.bfloat16)(h, h, mask=mask)
            x = x + nn.Dense(32, dtype=jnp.bfloat16)(nn.gelu(nn.Dense(64, dtype=jnp.bfloat16)(x)))
            return nn.Dense(97, dtype=jnp.float32)(x)

    model = Bf16Block()
    params = model.init(jax.random.PRNGKey(0), _ids()[0])
    return Program(model.apply, params, lambda: _ids(), tol=3e-2, note="bfloat16 compute")


class ConvMisc(nn.Module):
    """Conv idioms: strided/dilated/depthwise convs, GroupNorm, ConvTranspose, resize."""

    @nn.compact
    def __call__(self, x):
        h = nn.Conv(8, (3, 3), strides=2, padding="SAME")(x)
        h = nn.GroupNorm(num_groups=4)(h)
        h = nn.Conv(8, (3, 3), feature_group_count=8, kernel_dilation=2, padding="SAME")(nn.swish(h))
        h = nn.ConvTranspose(4, (3, 3), strides=(2, 2), padding="SAME")(h)
        h = jax.image.resize(h, (h.shape[0], 12, 12, h.shape[-1]), "bilinear")
        return nn.Conv(3, (1, 1))(h)


def conv_misc():
    model = ConvMisc()
    x = _f32(2, 10, 10, 3)
    params = model.init(jax.random.PRNGKey(0), x)
    return Program(
        model.apply,
        params,
        lambda b=2: (_f32(b, 10, 10, 3),),
        shapes=("b, 10, 10, 3",),
        sizes=({"b": 2}, {"b": 3}),
    )


def lax_misc():
    """lax.map, associative_scan, cumulative ops, segment_sum, sort with several operands."""

    def fn(x, seg):
        m = jax.lax.map(lambda r: jnp.sort(r) * jnp.arange(r.shape[0]), x)
        a = jax.lax.associative_scan(jnp.add, x, axis=1)
        c = jnp.cumprod(1 + 0.1 * x, axis=0) + jax.lax.cummax(x, axis=1)
        s = jax.ops.segment_sum(x.sum(-1), seg, num_segments=3)
        keys, vals = jax.lax.sort((x[:, 0], x[:, 1]), num_keys=1)
        return m, a, c, s, vals, jax.nn.logsumexp(x, axis=-1), jnp.linalg.norm(x, ord=1)

    return Program(fn, None, lambda: (_f32(4, 5), np.array([0, 2, 1, 2], np.int32)))


PROGRAMS: dict[str, Callable[[], Program]] = {
    "linen_decoder": linen_decoder,
    "nnx_decoder": nnx_decoder,
    "decoder_train_step": decoder_train_step,
    "bn_cnn_train": bn_cnn_train,
    "bn_cnn_eval": bn_cnn_eval,
    "lstm": lstm,
    "gru_scan": gru_scan,
    "vae": vae,
    "vae_rawkey": vae_rawkey,
    "moe": moe,
    "scan_ema": scan_ema,
    "fori_newton": fori_newton,
    "while_converge": while_converge,
    "cond_switch": cond_switch,
    "checkpoint": checkpoint,
    "custom_rules": custom_rules,
    "linalg": linalg,
    "linalg_batched": linalg_batched,
    "int_bool_outputs": int_bool_outputs,
    "pytree_io": pytree_io,
    "nnx_bn_dropout_train": nnx_bn_dropout_train,
    "linen_scan_layers": linen_scan_layers,
    "linen_bf16_decoder": linen_bf16_decoder,
    "conv_misc": conv_misc,
    "lax_misc": lax_misc,
}
