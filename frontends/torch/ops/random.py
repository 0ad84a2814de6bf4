"""Random ATen ops: ``rand``, ``randn``, ``randint``, ``randperm``, ``bernoulli``,
``native_dropout``, ``normal``, ``uniform``, ``exponential``, ``cauchy``, ``log_normal``,
``geometric``, ``multinomial``, ``rrelu_with_noise_functional`` (schemas in
``native_functions.yaml``).

JAX cannot reproduce torch's random streams (Philox/MT19937 on CPU), so these rules draw from
the same *distributions* with ``jax.random`` on a threefry key, never the same numbers. The key
is an argument of the converted module (:data:`converter.signature.RNG_KEY`): while a graph is
interpreted, :func:`key_stream` holds it and each random node takes
``fold_in(key, node_index)`` from :func:`next_key`, so two nodes never share bits and every call
with a fresh key gives fresh numbers. Threefry lowers to plain integer StableHLO on CPU, so every
backend reproduces the JAX backend's bits exactly from the same key.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import register
from ._util import np_dtype

aten = __import__("torch").ops.aten

#: Names (``str(OpOverload)``) of the ATen ops that draw random numbers; a graph using any of
#: them makes ``from_torch`` add the PRNG key argument.
RANDOM_OPS: set[str] = set()


class _Stream:
    def __init__(self, key: jax.Array):
        self.key = key
        self.count = 0

    def next(self) -> jax.Array:
        self.count += 1
        return jax.random.fold_in(self.key, self.count)


_CURRENT: contextvars.ContextVar[_Stream | None] = contextvars.ContextVar("torch_rng_stream", default=None)


@contextlib.contextmanager
def key_stream(key: jax.Array) -> Iterator[None]:
    """Make ``key`` (``uint32[2]``) the source of :func:`next_key` while interpreting a graph."""
    token = _CURRENT.set(_Stream(key))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def next_key() -> jax.Array:
    """A fresh key for one random node.

    Raises:
        RuntimeError: no :func:`key_stream` is active (the graph was interpreted without the
            module's PRNG key argument).
    """
    stream = _CURRENT.get()
    if stream is None:
        raise RuntimeError("a random op was lowered without a PRNG key (no key_stream is active)")
    return stream.next()


def register_random(*overloads) -> callable:
    """:func:`register`, also recording the overloads in :data:`RANDOM_OPS`."""
    RANDOM_OPS.update(str(o) for o in overloads)
    return register(*overloads)


def _float(dtype, default=np.float32) -> np.dtype:
    return np.dtype(default) if dtype is None else np_dtype(dtype)


def _draw_dtype(dtype) -> np.dtype:
    """The dtype random floats are drawn and transformed in: float32 for bfloat16/float16
    (ATen's samplers work in ``opmath_t``; a bfloat16 uniform has only 2^7 values in [0, 1),
    which skews every inverse-CDF transform), else ``dtype``; the result is rounded once."""
    return np.dtype(np.float32) if np.dtype(dtype) in (jnp.bfloat16, np.float16) else np.dtype(dtype)


def _uniform(shape, dtype, low=0.0, high=1.0) -> jax.Array:
    """``U[low, high)`` in ``dtype`` (float64 when x64 is on and asked for)."""
    wide = _draw_dtype(dtype)
    return jax.random.uniform(next_key(), tuple(shape), wide, low, high).astype(dtype)


def _open_uniform(shape, dtype) -> jax.Array:
    """``U(0, 1)`` in :func:`_draw_dtype` of ``dtype``: never exactly 0, for the inverse-CDF
    samplers that take a logarithm (they round their result to ``dtype``)."""
    wide = _draw_dtype(dtype)
    return jax.random.uniform(next_key(), tuple(shape), wide, jnp.finfo(wide).tiny, 1.0)


# --------------------------------------------------------------------------- factories


@register_random(aten.rand.default)
def rand(size, dtype=None, layout=None, device=None, pin_memory=None):
    """``U[0, 1)`` of shape ``size`` (default float32)."""
    return _uniform(size, _float(dtype))


@register_random(aten.randn.default)
def randn(size, dtype=None, layout=None, device=None, pin_memory=None):
    """Standard normal of shape ``size``."""
    return jax.random.normal(next_key(), tuple(size), _float(dtype))


@register_random(aten.rand_like.default)
def rand_like(x, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """``U[0, 1)`` with ``x``'s shape (and dtype unless given)."""
    return _uniform(x.shape, _float(dtype, x.dtype))


@register_random(aten.randn_like.default)
def randn_like(x, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """Standard normal with ``x``'s shape (and dtype unless given)."""
    return jax.random.normal(next_key(), x.shape, _float(dtype, x.dtype))


def _randint(low, high, shape, dtype) -> jax.Array:
    """Integers uniform on ``[low, high)``; floating ``dtype`` gets integral values."""
    dt = np.dtype(dtype)
    draw = np.int64 if jax.config.jax_enable_x64 else np.int32
    ints = jax.random.randint(next_key(), tuple(shape), int(low), int(high), draw)
    return ints.astype(dt)


@register_random(aten.randint.default)
def randint(high, size, dtype=None, layout=None, device=None, pin_memory=None):
    """Integers on ``[0, high)`` of shape ``size`` (default int64)."""
    return _randint(0, high, size, _float(dtype, np.int64))


@register_random(aten.randint.low)
def randint_low(low, high, size, dtype=None, layout=None, device=None, pin_memory=None):
    """Integers on ``[low, high)`` of shape ``size`` (default int64)."""
    return _randint(low, high, size, _float(dtype, np.int64))


@register_random(aten.randint_like.default)
def randint_like(x, high, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """Integers on ``[0, high)`` with ``x``'s shape and dtype."""
    return _randint(0, high, x.shape, _float(dtype, x.dtype))


@register_random(aten.randint_like.low_dtype)
def randint_like_low(x, low, high, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """Integers on ``[low, high)`` with ``x``'s shape and dtype."""
    return _randint(low, high, x.shape, _float(dtype, x.dtype))


@register_random(aten.randperm.default)
def randperm(n, dtype=None, layout=None, device=None, pin_memory=None):
    """A random permutation of ``0 .. n-1`` (default int64)."""
    perm = jax.random.permutation(next_key(), int(n))
    return perm.astype(_float(dtype, np.int64))


# --------------------------------------------------------------------------- distributions


@register_random(aten.bernoulli.default)
def bernoulli(probs, generator=None):
    """``1`` with probability ``probs`` (elementwise), else ``0``; ``probs``' dtype."""
    u = _uniform(probs.shape, np.float32)
    return (u < probs.astype(np.float32)).astype(probs.dtype)


@register_random(aten.bernoulli.p)
def bernoulli_p(x, p=0.5, generator=None):
    """``1`` with probability ``p`` in ``x``'s shape and dtype, else ``0``."""
    return (_uniform(x.shape, np.float32) < p).astype(x.dtype)


@register_random(aten.bernoulli.Tensor)
def bernoulli_tensor(x, p, generator=None):
    """``1`` with probability ``p`` (a tensor broadcast to ``x``), else ``0``."""
    u = _uniform(x.shape, np.float32)
    return (u < jnp.broadcast_to(p, x.shape).astype(np.float32)).astype(x.dtype)


@register_random(aten.native_dropout.default)
def native_dropout(x, p, train=None):
    """``(x * mask / (1 - p), mask)`` with ``mask ~ Bernoulli(1 - p)`` (bool); with
    ``train=False`` the identity and an all-true mask; ``p == 1`` zeroes everything, as
    ATen's kernel does."""
    if train is False:
        return x, jnp.ones(x.shape, bool)
    if p >= 1:
        return jnp.zeros_like(x), jnp.zeros(x.shape, bool)
    mask = _uniform(x.shape, np.float32) >= p
    scale = np.asarray(1.0 / (1.0 - p), x.dtype)
    return jnp.where(mask, x * scale, jnp.zeros((), x.dtype)), mask


def _normal(mean, std, shape, dtype) -> jax.Array:
    wide = _draw_dtype(dtype)
    z = jax.random.normal(next_key(), tuple(shape), wide)
    return (z * jnp.asarray(std, wide) + jnp.asarray(mean, wide)).astype(dtype)


def _out_dtype(*xs) -> np.dtype:
    arrays = [x for x in xs if hasattr(x, "dtype")]
    return np.dtype(arrays[0].dtype) if arrays else np.dtype(np.float32)


@register_random(aten.normal.Tensor_Tensor, aten.normal.Tensor_float, aten.normal.float_Tensor)
def normal(mean, std=1.0, generator=None):
    """``N(mean, std²)`` elementwise, ``mean`` and ``std`` broadcast together."""
    shape = jnp.broadcast_shapes(jnp.shape(mean), jnp.shape(std))
    return _normal(mean, std, shape, _out_dtype(mean, std))


@register_random(aten.normal.float_float)
def normal_float_float(
    mean, std, size, generator=None, dtype=None, layout=None, device=None, pin_memory=None
):
    """``N(mean, std²)`` of shape ``size``."""
    return _normal(mean, std, size, _float(dtype))


@register_random(aten.normal_functional.default)
def normal_functional(x, mean=0.0, std=1.0, generator=None):
    """``N(mean, std²)`` in ``x``'s shape and dtype (the functional ``Tensor.normal_``)."""
    return _normal(mean, std, x.shape, x.dtype)


@register_random(aten.uniform.default)
def uniform(x, low=0.0, high=1.0, generator=None):
    """``U[low, high)`` in ``x``'s shape and dtype (the functional ``Tensor.uniform_``)."""
    return _uniform(x.shape, x.dtype, low, high)


@register_random(aten.exponential.default)
def exponential(x, lambd=1.0, generator=None):
    """Exponential with rate ``lambd``: ``-log(U) / lambd``."""
    u = _open_uniform(x.shape, x.dtype)
    return (-jnp.log(u) / jnp.asarray(lambd, u.dtype)).astype(x.dtype)


@register_random(aten.cauchy.default)
def cauchy(x, median=0.0, sigma=1.0, generator=None):
    """Cauchy: ``median + sigma * tan(pi * (U - 1/2))``."""
    u = _open_uniform(x.shape, x.dtype)
    c = jnp.asarray(median, u.dtype) + jnp.asarray(sigma, u.dtype) * jnp.tan(np.pi * (u - 0.5))
    return c.astype(x.dtype)


@register_random(aten.log_normal.default)
def log_normal(x, mean=1.0, std=2.0, generator=None):
    """``exp(N(mean, std²))``."""
    return jnp.exp(_normal(mean, std, x.shape, _draw_dtype(x.dtype))).astype(x.dtype)


@register_random(aten.geometric.default)
def geometric(x, p, generator=None):
    """Trials to the first success, ``ceil(log(U) / log(1 - p))`` (values ≥ 1)."""
    u = _open_uniform(x.shape, np.float32)
    k = jnp.ceil(jnp.log(u) / math.log1p(-p)) if p < 1 else jnp.ones(x.shape, np.float32)
    return jnp.maximum(k, 1).astype(x.dtype)


@register_random(aten.multinomial.default)
def multinomial(probs, num_samples, replacement=False, generator=None):
    """``num_samples`` category indices per row of ``probs`` (``(k,)`` or ``(n, k)``,
    non-negative weights, not necessarily normalized), int64. Without replacement the
    categories are distinct (Gumbel top-k); with it they are independent draws."""
    logits = jnp.log(probs.astype(np.float32))
    batch = probs.shape[:-1]
    if replacement:
        keys = next_key()
        idx = jax.random.categorical(keys, logits, axis=-1, shape=(num_samples, *batch))
        idx = jnp.moveaxis(idx, 0, -1)
    else:
        gumbel = jax.random.gumbel(next_key(), probs.shape, np.float32)
        idx = lax.top_k(logits + gumbel, num_samples)[1]
    return idx.astype(np.int64 if jax.config.jax_enable_x64 else np.int32)


@register_random(aten.rrelu_with_noise_functional.default)
def rrelu_with_noise_functional(x, noise, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """Randomized leaky ReLU, ``(out, noise)``. In training, inputs ``x <= 0`` are scaled by a
    slope ``~ U[lower, upper)`` recorded in ``noise`` (1 where ``x > 0``; zeros draw a slope
    too, as in ATen's ``_rrelu_with_noise_train``); otherwise negative inputs are scaled by
    the fixed slope ``(lower + upper) / 2`` and ``noise`` is returned unchanged."""
    if not training:
        slope = np.asarray((lower + upper) / 2, x.dtype)
        return jnp.where(x >= 0, x, x * slope), noise
    a = _uniform(x.shape, x.dtype, lower, upper)
    slope = jnp.where(x > 0, jnp.ones((), x.dtype), a)
    return x * slope, slope.astype(noise.dtype)
