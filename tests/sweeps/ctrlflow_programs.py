"""Control-flow programs of the control-flow sweep (``tests/sweeps/ctrlflow_sweep.py``), in all
three source frameworks, tiny and seeded:

* JAX (:data:`JAX_PROGRAMS`, :class:`tests.sweeps.jax_programs.Program` factories): ``lax.switch``
  with out-of-range indices (clamped), ``while_loop`` with a data-dependent trip count,
  ``fori_loop`` with static and traced bounds, ``scan`` (reverse, ``unroll``, ``length``
  without xs), ``checkpoint`` + ``custom_jvp``/``custom_vjp`` inside a scan, nested loops,
  loop-carried int8/bfloat16/bool values, ``vmap`` of a while loop, ``cond`` on a symbolic
  size, ``lax.map``/``associative_scan`` on symbolic shapes, ``stop_gradient`` in a scan, a PRNG
  key split in a while loop and folded in a scan.
* torch (:data:`TORCH_PROGRAMS`): ``torch.cond`` closing over parameters and buffers,
  ``while_loop`` with a counter, ``scan`` (an RNN cell, reverse along dim 1), ``map``,
  ``associative_scan``, a GRU cell over a dynamic length (``Dim``), a KV-cache decode step
  writing registered buffers in place (state after 5 calls), a ``cond`` on a size and one
  whose result updates a buffer, a ``while_loop`` (its counter a constant) inside a ``cond``
  branch after a ``scan``.
* ONNX (:data:`ONNX_PROGRAMS`, ``() -> (ModelProto, feeds)``): hand-built ``Loop`` (scan
  outputs, data-dependent and graph-input conditions, cond-only, runtime trip count, a
  growing carried value, ``SequenceInsert``, mixed carried dtypes), ``If`` (outer-scope
  values, branches of different shapes), ``Scan``; and what the exporters write: the
  TorchScript exporter's scripted ``for``/``while``/``if`` and the dynamo exporter's
  ``torch.cond``.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import torch
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh
from torch._higher_order_ops.associative_scan import associative_scan
from torch._higher_order_ops.map import map as tmap
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop
from torch.export import Dim

from tests.sweeps.jax_programs import Program, _f32

# ---------------------------------------------------------------------------- JAX


def switch_clamp():
    def fn(p, x, k):
        y = jax.lax.switch(k, [lambda v: v @ p, lambda v: jnp.tanh(v) * 2.0, lambda v: -v + 1.0], x)
        z = jax.lax.cond(k > 0, lambda v: v.sum(-1), lambda v: v.max(-1), y)
        return y, z

    return Program(
        fn, _f32(4, 4, seed=3), lambda k=-2: (_f32(3, 4), np.int32(k)), sizes=({"k": -2}, {"k": 7}, {"k": 1})
    )


def while_data_trip():
    def fn(p, x):
        def cond(c):
            i, y = c
            return (jnp.linalg.norm(y) > 0.1) & (i < 40)

        def body(c):
            i, y = c
            return i + 1, jnp.tanh(y @ p) * 0.8

        i, y = jax.lax.while_loop(cond, body, (jnp.int32(0), x))
        return y, i

    return Program(
        fn,
        _f32(4, 4, seed=5, scale=0.5),
        lambda b=3: (_f32(b, 4),),
        shapes=("b, 4",),
        sizes=({"b": 3}, {"b": 5}),
        grad=False,
    )


def fori_bounds():
    def fn(p, x, lo, hi):
        a = jax.lax.fori_loop(0, 5, lambda i, c: c @ p * 0.5 + i, x)
        b = jax.lax.fori_loop(lo, hi, lambda i, c: jnp.sin(c) + i.astype(c.dtype) * 0.1, x)
        return a, b

    return Program(
        fn,
        _f32(4, 4, seed=6),
        lambda lo=1, hi=4: (_f32(2, 4), np.int32(lo), np.int32(hi)),
        sizes=({"lo": 1, "hi": 4}, {"lo": 3, "hi": 2}),
        grad=False,
    )


def scan_variants():
    def fn(p, xs):
        def body(c, x):
            c = jnp.tanh(c @ p + x)
            return c, c * 2

        c1, ys1 = jax.lax.scan(body, jnp.zeros(xs.shape[1:], xs.dtype), xs, reverse=True)
        c2, ys2 = jax.lax.scan(body, c1, xs, unroll=2)
        c3, ys3 = jax.lax.scan(lambda c, _: (c * 0.9 + 1.0, c.sum()), c2, None, length=4)
        return c1, ys1, c2, ys2, c3, ys3

    return Program(fn, _f32(4, 4, seed=7, scale=0.5), lambda s=5: (_f32(s, 2, 4),))


def scan_checkpoint_custom():
    @jax.custom_jvp
    def sp(x):
        return jnp.log1p(jnp.exp(x))

    sp.defjvp(lambda pr, t: (sp(pr[0]), t[0] * jax.nn.sigmoid(pr[0])))

    @jax.custom_vjp
    def sin_vjp(x):
        return jnp.sin(x)

    # its true derivative: a custom_vjp rule that changes gradients does not survive StableHLO
    sin_vjp.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))

    def fn(p, xs):
        @jax.checkpoint
        def body(c, x):
            h = sp(c @ p["w"] + x)
            h = sin_vjp(h) * p["a"]
            return h, h.sum(-1)

        c, ys = jax.lax.scan(body, jnp.zeros((xs.shape[1], 4), xs.dtype), xs)
        return c, ys

    return Program(
        fn,
        {"w": _f32(4, 4, seed=8, scale=0.5), "a": np.float32(0.9)},
        lambda s=4: (_f32(s, 2, 4),),
        shapes=("s, 2, 4",),
        sizes=({"s": 4}, {"s": 6}),
    )


def nested_loops():
    def fn(p, xs):
        def outer(c, x):
            def inner(i, h):
                return jnp.tanh(h @ p + x * i.astype(h.dtype))

            h = jax.lax.fori_loop(0, 3, inner, c)

            def wc(s):
                return s[1].sum() > 0.5 * s[0]

            def wb(s):
                return s[0] + 1.0, s[1] * 0.5

            _, h2 = jax.lax.while_loop(lambda s: (jnp.abs(s[1]).sum() > 0.5) & (s[0] < 10), wb, (0.0, h))
            return h2 + h, jnp.mean(h)

        return jax.lax.scan(outer, jnp.ones((2, 4), xs.dtype), xs)

    return Program(fn, _f32(4, 4, seed=9, scale=0.5), lambda s=3: (_f32(s, 2, 4),), grad=False)


def carried_dtypes():
    def fn(x, n):
        def body(i, c):
            cnt, acc, h, m = c
            return (
                cnt + jnp.int8(1),
                acc + i,
                (h * 1.5).astype(jnp.bfloat16),
                m | (h.astype(jnp.float32) > 1.0),
            )

        init = (jnp.int8(120), jnp.int32(0), x.astype(jnp.bfloat16), jnp.zeros(x.shape, bool))
        cnt, acc, h, m = jax.lax.fori_loop(0, n, body, init)
        return cnt, acc, h.astype(jnp.float32), m  # int8 wraps; bfloat16 rounding each trip

    return Program(
        fn, None, lambda n=12: (_f32(2, 3), np.int32(n)), sizes=({"n": 12}, {"n": 3}), grad=False, tol=1e-2
    )


def vmap_while():
    def fn(x, lim):
        def cond(c):
            return c[1] < lim

        def body(c):
            return c[0] * 1.1 + 0.1, c[1] + c[0].sum()

        return jax.lax.while_loop(cond, body, (x, jnp.float32(0.0)))

    return Program(fn, None, lambda: (_f32(3), np.float32(4.0)), grad=False)


def cond_symbolic():
    def fn(x, y):
        a = jax.lax.cond(jnp.asarray(x.shape[0]) > 3, lambda: x[:1].sum(0) * 2, lambda: x.mean(0))
        b = jax.lax.cond(
            jnp.sum(y) > 0, lambda u: jnp.concatenate([u, u], 0)[: u.shape[0]] * 2, lambda u: u[::-1], y
        )
        return a, b

    return Program(
        fn,
        None,
        lambda b=5, s=4: (_f32(b, 3), _f32(s, 3, seed=1)),
        shapes=("b, 3", "s, 3"),
        sizes=({"b": 5, "s": 4}, {"b": 2, "s": 6}),
    )


def map_assoc_symbolic():
    def fn(x):
        m = jax.lax.map(lambda r: jnp.cumsum(r) * r.max(), x)
        a = jax.lax.associative_scan(lambda u, v: jnp.maximum(u, v) + 0.0 * u, x, axis=1, reverse=True)
        b = jax.lax.associative_scan(jnp.multiply, 1 + 0.1 * x, axis=1)
        return m, a, b

    return Program(fn, None, lambda b=5: (_f32(b, 6),), shapes=("b, 6",), sizes=({"b": 5}, {"b": 3}))


def x64_counter():
    def fn(x):
        i, y = jax.lax.while_loop(
            lambda c: c[0] < jnp.int64(5) if jax.config.jax_enable_x64 else c[0] < 5,
            lambda c: (c[0] + 1, c[1] * 2.0),
            (jnp.asarray(0, jnp.int64 if jax.config.jax_enable_x64 else jnp.int32), x),
        )
        return i, y

    return Program(fn, None, lambda: (_f32(3),), grad=False)


def stopgrad_loop():
    def fn(p, xs):
        def body(c, x):
            h = jnp.tanh(c @ p + x)
            return jax.lax.stop_gradient(h) * 0.5 + h * 0.5, jax.lax.stop_gradient(h).sum()

        return jax.lax.scan(body, jnp.zeros((2, 4), xs.dtype), xs)

    return Program(fn, _f32(4, 4, seed=9, scale=0.5), lambda s=3: (_f32(s, 2, 4),))


def random_walk():
    """A key carried through a while loop (split each trip) and fold_in inside a scan."""

    def fn(x, key):
        def body(c):
            i, k, y = c
            k, sub = jax.random.split(k)
            return i + 1, k, y + 0.1 * jax.random.normal(sub, y.shape, y.dtype)

        _, k, y = jax.lax.while_loop(lambda c: (c[0] < 4) & (jnp.max(c[2]) < 10.0), body, (0, key, x))

        def step(c, i):
            return c * 0.9 + jax.random.uniform(jax.random.fold_in(k, i), c.shape, c.dtype), c.sum()

        z, zs = jax.lax.scan(step, y, jnp.arange(3))
        return y, z, zs

    return Program(fn, None, lambda: (_f32(2, 3), jax.random.key(7)), grad=False, vmap=False)


# ---------------------------------------------------------------------------- torch


class CondParams(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.tensor([0.5, 1.0, 2.0, 3.0]))

    def forward(self, x):
        def t(x):
            return torch.relu(self.lin(x)) * self.scale

        def f(x):
            return torch.sigmoid(x @ self.lin.weight.T) - self.scale

        return torch.cond(x.sum() > 0, t, f, (x,))


class WhileCounter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4) * 0.3)

    def forward(self, x, n):
        def c(i, h, acc):
            return i < n

        def b(i, h, acc):
            h2 = torch.tanh(h @ self.w)
            return i + 1, h2, acc + h2.sum(0)

        i, h, acc = while_loop(c, b, (torch.zeros((), dtype=torch.int64), x, torch.zeros(4)))
        return i, h, acc


class WhileConverge(torch.nn.Module):
    def forward(self, x):
        def c(i, y, err):
            return (err > 1e-5) & (i < 50)

        def b(i, y, err):
            y2 = torch.cos(y)
            return i + 1, y2, (y2 - y).abs().max()

        return while_loop(c, b, (torch.tensor(0), x, torch.tensor(1.0)))


class ScanRNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = torch.nn.RNNCell(3, 4)

    def forward(self, xs, h0):
        def comb(h, x):
            h = self.cell(x, h)
            return h, h * 2

        return scan(comb, h0, xs)


class ScanReverse(torch.nn.Module):
    def forward(self, xs):
        def comb(c, x):
            c = c * 0.9 + x
            return c, c.sum(-1)

        return scan(comb, torch.zeros(xs.shape[0], xs.shape[2]), xs, reverse=True, dim=1)


class MapMod(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)

    def forward(self, xs, y):
        return tmap(lambda x, y: self.lin(x * y).softmax(-1), xs, y)


class AssocScan(torch.nn.Module):
    def forward(self, x):
        return associative_scan(lambda a, b: a * b + 0.0, x, dim=1, combine_mode="generic"), associative_scan(
            torch.add, x, dim=0, reverse=True, combine_mode="generic"
        )


class RNNDynamic(torch.nn.Module):
    """GRU cell unrolled over a dynamic sequence length by while_loop with index_select at the counter."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.GRUCell(3, 5)

    def forward(self, xs):
        T = xs.shape[0]

        def c(i, h):
            return i < T

        def b(i, h):
            x = xs.index_select(0, i.reshape(1)).squeeze(0)
            return i + 1, self.cell(x, h)

        i, h = while_loop(c, b, (torch.zeros((), dtype=torch.int64), torch.zeros(xs.shape[1], 5)))
        return h


class KVDecode(torch.nn.Module):
    """One decode step: writes k/v at position pos into registered cache buffers (index_copy_),
    attends over the cache with a mask of positions <= pos, counts steps in a buffer (copy_)."""

    def __init__(self, L=8, d=4):
        super().__init__()
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.register_buffer("kc", torch.zeros(2, L, d))
        self.register_buffer("vc", torch.zeros(2, L, d))
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))

    def forward(self, x, pos):
        self.kc.index_copy_(1, pos, self.k(x).unsqueeze(1))
        self.vc.index_copy_(1, pos, self.v(x).unsqueeze(1))
        self.steps.copy_(self.steps + 1)
        s = torch.einsum("bd,bld->bl", self.q(x), self.kc) / 2.0
        mask = torch.arange(self.kc.shape[1]) <= pos
        s = s.masked_fill(~mask, float("-inf"))
        return torch.einsum("bl,bld->bd", s.softmax(-1), self.vc), self.steps.clone()


class CondSizes(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.shape[0] > 4, lambda x: x.cos() * 2, lambda x: x.sin() + 1, (x,))


class CondBufferRead(torch.nn.Module):
    """cond inside which the branches read a buffer that the forward then updates in place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("ema", torch.zeros(4))

    def forward(self, x):
        m = x.mean(0)
        y = torch.cond(m.sum() > 0, lambda m: self.ema * 0.9 + m * 0.1, lambda m: self.ema * 0.5, (m,))
        self.ema.copy_(y)
        return x - y


class NestedHops(torch.nn.Module):
    """A cond inside a scan's combine function and a while_loop inside a cond branch; the cond
    returns an int and a float output."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 3) * 0.4)

    def forward(self, xs):
        def comb(c, x):
            nc = torch.tanh(c @ self.w + x)
            return nc, nc.sum()

        c, ks = scan(comb, torch.zeros(xs.shape[1]), xs)
        c, k = torch.cond(
            c.sum() > 0, lambda c: (c * 2, (c > 0).sum()), lambda c: (c - 1, (c < 0).sum()), (c,)
        )

        def loop(c):
            _, y = while_loop(
                lambda i, y: (i < 5) & (y.abs().sum() < 20),
                lambda i, y: (i + 1, y * 1.5 + 0.1),
                (torch.tensor(0), c),
            )  # a constant in a branch
            return y

        d = torch.cond(c.sum() > 0, loop, lambda c: c.cos(), (c,))
        return c, k, ks, d


def _r(*s, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*s, generator=g)


@dataclasses.dataclass
class TorchProgram:
    """``build()`` the module (seeded); ``inputs(size)`` its positional inputs; ``dynamic``
    the ``torch.export`` dynamic shapes (None: static); ``sizes`` one call each, in order;
    ``stateful``: the calls update buffers, compared after the last; ``grad``: compare
    ``jax.grad`` of the converted module with torch autograd."""

    build: Callable[[], torch.nn.Module]
    inputs: Callable[[Any], tuple]
    dynamic: Any
    sizes: tuple
    stateful: bool = False
    grad: bool = False


TORCH_PROGRAMS: dict[str, TorchProgram] = {
    "cond_params": TorchProgram(
        CondParams,
        lambda b: (_r(b, 4) + (0.5 if b % 2 else -0.5),),
        {"x": {0: Dim("b", min=2, max=16)}},
        (3, 4, 5),
        stateful=False,
        grad=True,
    ),
    "while_counter": TorchProgram(
        WhileCounter, lambda n: (_r(2, 4), torch.tensor(n)), None, (3, 5, 0), stateful=False, grad=True
    ),
    "while_converge": TorchProgram(
        WhileConverge,
        lambda b: (_r(b),),
        {"x": {0: Dim("b", min=2, max=16)}},
        (4, 6),
        stateful=False,
        grad=False,
    ),
    "scan_rnn": TorchProgram(
        ScanRNN,
        lambda s: (_r(s, 2, 3), _r(2, 4, seed=1)),
        {"xs": {0: Dim("s", min=2, max=16)}, "h0": None},
        (5, 3, 7),
        stateful=False,
        grad=True,
    ),
    "scan_reverse": TorchProgram(
        ScanReverse,
        lambda s: (_r(2, s, 3),),
        {"xs": {1: Dim("s", min=2, max=16)}},
        (5, 3),
        stateful=False,
        grad=True,
    ),
    "map": TorchProgram(
        MapMod,
        lambda b: (_r(b, 4), _r(4, seed=2)),
        {"xs": {0: Dim("b", min=2, max=16)}, "y": None},
        (3, 5),
        stateful=False,
        grad=True,
    ),
    "assoc_scan": TorchProgram(AssocScan, lambda b: (_r(b, 5),), None, (3,), stateful=False, grad=True),
    "rnn_dynamic": TorchProgram(
        RNNDynamic,
        lambda s: (_r(s, 2, 3),),
        {"xs": {0: Dim("s", min=2, max=32)}},
        (6, 3, 11),
        stateful=False,
        grad=True,
    ),
    "kv_decode": TorchProgram(
        KVDecode,
        lambda p: (_r(2, 4, seed=p), torch.tensor([p])),
        None,
        (0, 1, 2, 3, 4),
        stateful=True,
        grad=False,
    ),
    "cond_sizes": TorchProgram(
        CondSizes,
        lambda b: (_r(b, 3),),
        {"x": {0: Dim("b", min=2, max=16)}},
        (3, 6),
        stateful=False,
        grad=True,
    ),
    "cond_buffer": TorchProgram(
        CondBufferRead,
        lambda b: (_r(b, 4, seed=b) + (0.3 if b % 2 else -0.3),),
        None,
        (3, 3, 3),
        stateful=True,
        grad=False,
    ),
    "nested_hops": TorchProgram(
        NestedHops, lambda s: (_r(s, 3, seed=s),), {"xs": {0: Dim("s", min=2, max=16)}}, (5, 3, 8)
    ),
}


# ---------------------------------------------------------------------------- ONNX

F, I64, B = TP.FLOAT, TP.INT64, TP.BOOL


def vi(n, t, s):
    return h.make_tensor_value_info(n, t, s)


def model(nodes, ins, outs, inits=(), opset=17):
    g = h.make_graph(nodes, "g", ins, outs, initializer=list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def loop_scan_static():
    """Loop M=5 (initializer), cond true, carried h, scan output h*2 and i."""
    body = h.make_graph(
        [
            h.make_node("MatMul", ["h_in", "W"], ["hw"]),
            h.make_node("Tanh", ["hw"], ["h_out"]),
            h.make_node("Identity", ["c_in"], ["c_out"]),
            h.make_node("Add", ["h_out", "h_out"], ["s1"]),
            h.make_node("Cast", ["i"], ["s2"], to=F),
        ],
        "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("h_in", F, [2, 3])],
        [vi("c_out", B, []), vi("h_out", F, [2, 3]), vi("s1", F, [2, 3]), vi("s2", F, [])],
    )
    W = nh.from_array(np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32) * 0.5, "W")
    M = nh.from_array(np.array(5, np.int64), "M")
    T = nh.from_array(np.array(True), "T")
    m = model(
        [h.make_node("Loop", ["M", "T", "x"], ["h", "S1", "S2"], body=body)],
        [vi("x", F, [2, 3])],
        [vi("h", F, [2, 3]), vi("S1", F, [5, 2, 3]), vi("S2", F, [5])],
        [W, M, T],
    )
    return m, [{"x": np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)}]


def loop_dyn_cond_scan():
    """Loop M=6 with a data-dependent condition (stops when sum > 3) and a scan output: the
    scan output's length depends on the data."""
    body = h.make_graph(
        [
            h.make_node("Add", ["h_in", "one"], ["h_out"]),
            h.make_node("ReduceSum", ["h_out"], ["s"], keepdims=0),
            h.make_node("Less", ["s", "lim"], ["c_out"]),
            h.make_node("Identity", ["h_out"], ["y"]),
        ],
        "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("h_in", F, [2])],
        [vi("c_out", B, []), vi("h_out", F, [2]), vi("y", F, [2])],
        initializer=[nh.from_array(np.float32(0.5), "one"), nh.from_array(np.float32(3.0), "lim")],
    )
    M = nh.from_array(np.array(6, np.int64), "M")
    T = nh.from_array(np.array(True), "T")
    m = model(
        [h.make_node("Loop", ["M", "T", "x"], ["h", "ys"], body=body)],
        [vi("x", F, [2])],
        [vi("h", F, [2]), vi("ys", F, ["n", 2])],
        [M, T],
    )
    return m, [{"x": np.array([0.1, 0.2], np.float32)}, {"x": np.array([-3.0, -2.0], np.float32)}]


def loop_dyn_cond_carry():
    """As above, no scan output; M static 300 (> unroll limit) and data-dependent cond."""
    body = h.make_graph(
        [
            h.make_node("Mul", ["h_in", "k"], ["h_out"]),
            h.make_node("ReduceSum", ["h_out"], ["s"], keepdims=0),
            h.make_node("Less", ["s", "lim"], ["c_out"]),
        ],
        "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("h_in", F, [2])],
        [vi("c_out", B, []), vi("h_out", F, [2])],
        initializer=[nh.from_array(np.float32(1.5), "k"), nh.from_array(np.float32(100.0), "lim")],
    )
    M = nh.from_array(np.array(300, np.int64), "M")
    T = nh.from_array(np.array(True), "T")
    m = model(
        [h.make_node("Loop", ["M", "T", "x"], ["h"], body=body)], [vi("x", F, [2])], [vi("h", F, [2])], [M, T]
    )
    return m, [{"x": np.array([0.5, 1.0], np.float32)}, {"x": np.array([2.0, 3.0], np.float32)}]


def loop_cond_only():
    """Loop without M: cond-only (while); counter from the iteration number."""
    body = h.make_graph(
        [
            h.make_node("Mul", ["h_in", "k"], ["h_out"]),
            h.make_node("ReduceMax", ["h_out"], ["s"], keepdims=0),
            h.make_node("Less", ["s", "lim"], ["c_out"]),
            h.make_node("Add", ["n_in", "one"], ["n_out"]),
        ],
        "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("h_in", F, [3]), vi("n_in", I64, [])],
        [vi("c_out", B, []), vi("h_out", F, [3]), vi("n_out", I64, [])],
        initializer=[
            nh.from_array(np.float32(1.7), "k"),
            nh.from_array(np.float32(50.0), "lim"),
            nh.from_array(np.int64(1), "one"),
        ],
    )
    m = model(
        [
            h.make_node("Greater", ["x0", "zero"], ["c0"]),
            h.make_node("Loop", ["", "c0", "x", "n0"], ["h", "n"], body=body),
        ],
        [vi("x", F, [3]), vi("x0", F, []), vi("n0", I64, [])],
        [vi("h", F, [3]), vi("n", I64, [])],
        [nh.from_array(np.float32(0), "zero")],
    )
    return m, [
        {
            "x": np.array([0.5, 1.0, 2.0], np.float32),
            "x0": np.array(1, np.float32),
            "n0": np.array(0, np.int64),
        },
        {
            "x": np.array([0.5, 1.0, 2.0], np.float32),
            "x0": np.array(-1, np.float32),
            "n0": np.array(3, np.int64),
        },
    ]


def loop_dyn_trip_scan():
    """M is a graph input (runtime), with a scan output."""
    body = h.make_graph(
        [
            h.make_node("Add", ["h_in", "x"], ["h_out"]),
            h.make_node("Identity", ["c_in"], ["c_out"]),
            h.make_node("Mul", ["h_out", "h_out"], ["y"]),
        ],
        "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("h_in", F, [2])],
        [vi("c_out", B, []), vi("h_out", F, [2]), vi("y", F, [2])],
    )
    T = nh.from_array(np.array(True), "T")
    m = model(
        [h.make_node("Loop", ["M", "T", "x"], ["h", "ys"], body=body)],
        [vi("x", F, [2]), vi("M", I64, [])],
        [vi("h", F, [2]), vi("ys", F, ["n", 2])],
        [T],
    )
    return m, [
        {"x": np.array([0.5, -1], np.float32), "M": np.array(3, np.int64)},
        {"x": np.array([0.5, -1], np.float32), "M": np.array(5, np.int64)},
    ]


def loop_growing():
    """Carried value grows each trip (Concat): shapes change across iterations (allowed)."""
    body = h.make_graph(
        [
            h.make_node("Concat", ["h_in", "h_in"], ["h_out"], axis=0),
            h.make_node("Identity", ["c_in"], ["c_out"]),
        ],
        "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("h_in", F, None)],
        [vi("c_out", B, []), vi("h_out", F, None)],
    )
    T = nh.from_array(np.array(True), "T")
    m = model(
        [h.make_node("Loop", ["M", "T", "x"], ["h"], body=body)],
        [vi("x", F, [2]), vi("M", I64, [])],
        [vi("h", F, ["k"])],
        [T],
    )
    return m, [{"x": np.array([0.5, -1], np.float32), "M": np.array(3, np.int64)}]


def loop_sequence():
    """SequenceInsert accumulation inside a Loop, ConcatFromSequence after."""
    body = h.make_graph(
        [
            h.make_node("Cast", ["i"], ["fi"], to=F),
            h.make_node("Mul", ["x", "fi"], ["v"]),
            h.make_node("SequenceInsert", ["seq_in", "v"], ["seq_out"]),
            h.make_node("Identity", ["c_in"], ["c_out"]),
        ],
        "body",
        [vi("i", I64, []), vi("c_in", B, []), h.make_tensor_sequence_value_info("seq_in", F, None)],
        [vi("c_out", B, []), h.make_tensor_sequence_value_info("seq_out", F, None)],
    )
    M = nh.from_array(np.array(4, np.int64), "M")
    T = nh.from_array(np.array(True), "T")
    m = model(
        [
            h.make_node("SequenceEmpty", [], ["s0"], dtype=F),
            h.make_node("Loop", ["M", "T", "s0"], ["s"], body=body),
            h.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1),
        ],
        [vi("x", F, [3])],
        [vi("y", F, [4, 3])],
        [M, T],
    )
    return m, [{"x": np.array([0.5, -1, 2], np.float32)}]


def if_outer_scope():
    """If whose branches use outer-scope values and different ops."""
    then = h.make_graph(
        [h.make_node("MatMul", ["x", "W"], ["a"]), h.make_node("Relu", ["a"], ["y"])],
        "then",
        [],
        [vi("y", F, [2, 3])],
    )
    els = h.make_graph(
        [h.make_node("Sigmoid", ["x"], ["b"]), h.make_node("Sub", ["b", "bias"], ["y2"])],
        "else",
        [],
        [vi("y2", F, [2, 3])],
    )
    W = nh.from_array(np.eye(3, dtype=np.float32) * 2, "W")
    bias = nh.from_array(np.ones(3, np.float32), "bias")
    m = model(
        [
            h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            h.make_node("Greater", ["s", "z"], ["c"]),
            h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els),
        ],
        [vi("x", F, [2, 3])],
        [vi("y", F, [2, 3])],
        [W, bias, nh.from_array(np.float32(0), "z")],
    )
    r = np.random.default_rng(2).normal(size=(2, 3)).astype(np.float32)
    return m, [{"x": np.abs(r)}, {"x": -np.abs(r)}]


def if_shapes_differ():
    """If whose branches give outputs of different shapes (allowed by the spec)."""
    then = h.make_graph([h.make_node("Concat", ["x", "x"], ["y"], axis=0)], "then", [], [vi("y", F, [4])])
    els = h.make_graph([h.make_node("Identity", ["x"], ["y2"])], "else", [], [vi("y2", F, [2])])
    m = model(
        [
            h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            h.make_node("Greater", ["s", "z"], ["c"]),
            h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els),
        ],
        [vi("x", F, [2])],
        [vi("y", F, ["k"])],
        [nh.from_array(np.float32(0), "z")],
    )
    return m, [{"x": np.array([1.0, 2.0], np.float32)}, {"x": np.array([-1.0, -2.0], np.float32)}]


def scan_op():
    """Scan (opset 16) with a reverse input, an axis-1 input and a reverse output on axis 1."""
    body = h.make_graph(
        [
            h.make_node("Add", ["s_in", "a"], ["t"]),
            h.make_node("Mul", ["t", "b"], ["s_out"]),
            h.make_node("Identity", ["s_out"], ["y"]),
        ],
        "body",
        [vi("s_in", F, [3]), vi("a", F, [3]), vi("b", F, [3])],
        [vi("s_out", F, [3]), vi("y", F, [3])],
    )
    m = model(
        [
            h.make_node(
                "Scan",
                ["s0", "A", "Bm"],
                ["s", "Y"],
                body=body,
                num_scan_inputs=2,
                scan_input_directions=[1, 0],
                scan_input_axes=[0, 1],
                scan_output_axes=[1],
                scan_output_directions=[1],
            )
        ],
        [vi("s0", F, [3]), vi("A", F, [4, 3]), vi("Bm", F, [3, 4])],
        [vi("s", F, [3]), vi("Y", F, [3, 4])],
    )
    r = np.random.default_rng(3)
    return m, [
        {
            "s0": r.normal(size=3).astype(np.float32),
            "A": r.normal(size=(4, 3)).astype(np.float32),
            "Bm": r.normal(size=(3, 4)).astype(np.float32) * 0.5,
        }
    ]


def loop_dtype_counter():
    """Loop carrying an int32 counter, a float16 accumulator and a bool flag."""
    body = h.make_graph(
        [
            h.make_node("Add", ["k_in", "one"], ["k_out"]),
            h.make_node("Cast", ["i"], ["fi"], to=TP.FLOAT16),
            h.make_node("Add", ["a_in", "fi"], ["a_out"]),
            h.make_node("Cast", ["k_out"], ["kf"], to=TP.FLOAT16),
            h.make_node("Greater", ["a_out", "kf"], ["g"]),
            h.make_node("ReduceMax", ["g_c"], ["gm"], keepdims=0)
            if False
            else h.make_node("Or", ["f_in", "g"], ["f_out"]),
            h.make_node("Identity", ["c_in"], ["c_out"]),
        ],
        "body",
        [
            vi("i", I64, []),
            vi("c_in", B, []),
            vi("k_in", TP.INT32, []),
            vi("a_in", TP.FLOAT16, [2]),
            vi("f_in", B, [2]),
        ],
        [vi("c_out", B, []), vi("k_out", TP.INT32, []), vi("a_out", TP.FLOAT16, [2]), vi("f_out", B, [2])],
        initializer=[nh.from_array(np.int32(1), "one")],
    )
    T = nh.from_array(np.array(True), "T")
    m = model(
        [h.make_node("Loop", ["M", "T", "k0", "a0", "f0"], ["k", "a", "f"], body=body)],
        [vi("M", I64, []), vi("k0", TP.INT32, []), vi("a0", TP.FLOAT16, [2]), vi("f0", B, [2])],
        [vi("k", TP.INT32, []), vi("a", TP.FLOAT16, [2]), vi("f", B, [2])],
        [T],
    )
    return m, [
        {
            "M": np.array(n, np.int64),
            "k0": np.array(2, np.int32),
            "a0": np.array([0.5, 7.0], np.float16),
            "f0": np.array([False, False]),
        }
        for n in (4, 9)
    ]


def loop_scan_cond_input():
    """Loop M=4 whose first condition is a graph input (body passes it through), scan output."""
    body = h.make_graph(
        [
            h.make_node("Add", ["h_in", "one"], ["h_out"]),
            h.make_node("Identity", ["c_in"], ["c_out"]),
            h.make_node("Identity", ["h_out"], ["y"]),
        ],
        "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("h_in", F, [2])],
        [vi("c_out", B, []), vi("h_out", F, [2]), vi("y", F, [2])],
        initializer=[nh.from_array(np.float32(0.5), "one")],
    )
    M = nh.from_array(np.array(4, np.int64), "M")
    m = model(
        [h.make_node("Loop", ["M", "go", "x"], ["h", "ys"], body=body)],
        [vi("x", F, [2]), vi("go", B, [])],
        [vi("h", F, [2]), vi("ys", F, ["n", 2])],
        [M],
    )
    return m, [
        {"x": np.array([0.1, 0.2], np.float32), "go": np.array(True)},
        {"x": np.array([0.1, 0.2], np.float32), "go": np.array(False)},
    ]


def loop_long_dyn_cond_scan():
    """M=300 (past the unroll limit), data-dependent condition, a scan output."""
    body = h.make_graph(
        [
            h.make_node("Add", ["h_in", "one"], ["h_out"]),
            h.make_node("ReduceSum", ["h_out"], ["s"], keepdims=0),
            h.make_node("Less", ["s", "lim"], ["c_out"]),
            h.make_node("Identity", ["h_out"], ["y"]),
        ],
        "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("h_in", F, [2])],
        [vi("c_out", B, []), vi("h_out", F, [2]), vi("y", F, [2])],
        initializer=[nh.from_array(np.float32(0.5), "one"), nh.from_array(np.float32(3.0), "lim")],
    )
    M = nh.from_array(np.array(300, np.int64), "M")
    T = nh.from_array(np.array(True), "T")
    m = model(
        [h.make_node("Loop", ["M", "T", "x"], ["h", "ys"], body=body)],
        [vi("x", F, [2])],
        [vi("h", F, [2]), vi("ys", F, ["n", 2])],
        [M, T],
    )
    return m, [{"x": np.array([0.1, 0.2], np.float32)}]


def loop_cond_input_carry():
    """Loop with M=5 and a graph-input first condition, no scan output (while path)."""
    body = h.make_graph(
        [
            h.make_node("Mul", ["h_in", "k"], ["h_out"]),
            h.make_node("Identity", ["c_in"], ["c_out"]),
        ],
        "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("h_in", F, [2])],
        [vi("c_out", B, []), vi("h_out", F, [2])],
        initializer=[nh.from_array(np.float32(1.5), "k")],
    )
    M = nh.from_array(np.array(5, np.int64), "M")
    m = model(
        [h.make_node("Loop", ["M", "go", "x"], ["h"], body=body)],
        [vi("x", F, [2]), vi("go", B, [])],
        [vi("h", F, [2])],
        [M],
    )
    return m, [{"x": np.array([0.1, 0.2], np.float32), "go": np.array(v)} for v in (True, False)]


def loop_short_dyn_cond_carry():
    """M=6 (unrolled), a data-dependent condition, no scan output."""
    m, feeds = loop_dyn_cond_carry()
    m.graph.initializer[0].CopyFrom(nh.from_array(np.array(6, np.int64), "M"))
    return m, feeds + [{"x": np.array([5.0, 9.0], np.float32)}, {"x": np.array([100.0, 9.0], np.float32)}]


def loop_if_nested_shadow():
    """Loop whose body input is named like an outer value ('x') and holds an If whose
    branches read the body's 'x' (shadowing the outer one), the outer W and the iteration."""
    then = h.make_graph(
        [h.make_node("MatMul", ["x", "W"], ["t1"]), h.make_node("Tanh", ["t1"], ["yo"])],
        "then",
        [],
        [vi("yo", F, [2, 3])],
    )
    els = h.make_graph([h.make_node("Mul", ["x", "half"], ["yo2"])], "else", [], [vi("yo2", F, [2, 3])])
    body = h.make_graph(
        [
            h.make_node("Cast", ["i"], ["fi"], to=F),
            h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            h.make_node("Less", ["s", "fi"], ["c"]),
            h.make_node("If", ["c"], ["xo"], then_branch=then, else_branch=els),
            h.make_node("Identity", ["cin"], ["cout"]),
        ],
        "body",
        [vi("i", I64, []), vi("cin", B, []), vi("x", F, [2, 3])],
        [vi("cout", B, []), vi("xo", F, [2, 3])],
    )
    W = nh.from_array(np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32), "W")
    m = model(
        [h.make_node("Add", ["x", "x"], ["x2"]), h.make_node("Loop", ["M", "", "x2"], ["y"], body=body)],
        [vi("x", F, [2, 3])],
        [vi("y", F, [2, 3])],
        [W, nh.from_array(np.array(6, np.int64), "M"), nh.from_array(np.float32(0.5), "half")],
    )
    r = np.random.default_rng(5)
    return m, [
        {"x": r.normal(size=(2, 3)).astype(np.float32)},
        {"x": r.normal(size=(2, 3)).astype(np.float32) + 1},
    ]


# ---------------------------------------------------------------------------- ONNX from the exporters


class _ScriptLoop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4) * 0.3)

    def forward(self, x, n: int):
        h = x
        outs: list[torch.Tensor] = []
        for i in range(n):
            h = torch.tanh(h @ self.w) + i
            outs.append(h.sum(-1))
        return h, torch.stack(outs)


class _ScriptWhile(torch.nn.Module):
    def forward(self, x):
        i = 0
        while bool(x.abs().sum() < 50.0) and i < 20:
            x = x * 1.7 + 0.1
            i += 1
        return x


class _ScriptIf(torch.nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            y = x.relu() * 2
        else:
            y = x.sigmoid() - 1
        return y


class _CondModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: self.lin(x).relu(), lambda x: x.sigmoid() - 1.0, (x,))


def _torchscript(module, args, names) -> onnx.ModelProto:
    f = io.BytesIO()
    torch.onnx.export(torch.jit.script(module), args, f, dynamo=False, opset_version=17, input_names=names)
    return onnx.load_from_string(f.getvalue())


def _randn(*shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def ts_for_loop():
    """TorchScript exporter: ``for i in range(n)`` appending to a list, ``torch.stack`` after
    (Loop of runtime count carrying a sequence, ConcatFromSequence)."""
    torch.manual_seed(0)
    m = _torchscript(_ScriptLoop(), (torch.randn(2, 4), 5), ["x", "n"])
    return m, [{"x": _randn(2, 4, seed=s), "n": np.array(n, np.int64)} for s, n in ((1, 5), (2, 3))]


def ts_while():
    """TorchScript exporter: a data-dependent ``while`` (Loop without a count)."""
    m = _torchscript(_ScriptWhile(), (torch.randn(3),), ["x"])
    return m, [{"x": _randn(3, seed=3)}, {"x": np.array([20.0, 30.0, 1.0], np.float32)}]


def ts_if():
    """TorchScript exporter: an ``if`` on a data-dependent condition (If)."""
    m = _torchscript(_ScriptIf(), (torch.randn(3),), ["x"])
    return m, [{"x": np.abs(_randn(3, seed=4))}, {"x": -np.abs(_randn(3, seed=5))}]


def dynamo_cond():
    """dynamo exporter: ``torch.cond`` with a dynamic batch (If with a parameter-reading branch)."""
    torch.manual_seed(0)
    prog = torch.onnx.export(
        _CondModule(),
        (torch.randn(3, 4),),
        dynamo=True,
        dynamic_shapes=({0: Dim("b", min=2, max=16)},),
        verbose=False,
    )
    return prog.model_proto, [{"x": np.abs(_randn(3, 4, seed=6))}, {"x": -np.abs(_randn(5, 4, seed=7))}]


JAX_PROGRAMS: dict[str, Callable[[], Program]] = {
    f.__name__: f
    for f in (
        switch_clamp,
        while_data_trip,
        fori_bounds,
        scan_variants,
        scan_checkpoint_custom,
        nested_loops,
        carried_dtypes,
        vmap_while,
        cond_symbolic,
        map_assoc_symbolic,
        x64_counter,
        stopgrad_loop,
        random_walk,
    )
}

ONNX_PROGRAMS: dict[str, Callable[[], tuple]] = {
    f.__name__: f
    for f in (
        loop_scan_static,
        loop_dyn_cond_scan,
        loop_dyn_cond_carry,
        loop_short_dyn_cond_carry,
        loop_cond_only,
        loop_dyn_trip_scan,
        loop_scan_cond_input,
        loop_long_dyn_cond_scan,
        loop_cond_input_carry,
        loop_growing,
        loop_sequence,
        loop_dtype_counter,
        if_outer_scope,
        if_shapes_differ,
        loop_if_nested_shadow,
        scan_op,
        ts_for_loop,
        ts_while,
        ts_if,
        dynamo_cond,
    )
}
