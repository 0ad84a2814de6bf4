"""Small Flax models used by the tests and the round-trip suite.

Each factory returns ``(apply_fn, params, example_args)``.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.gelu(nn.Dense(32)(x))
        return nn.Dense(4)(nn.relu(nn.Dense(16)(x)))


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(8, (3, 3))(x))
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = nn.relu(nn.Conv(16, (3, 3), strides=(2, 2), padding="VALID")(x))
        x = nn.avg_pool(x, (2, 2), strides=(1, 1), padding="SAME")
        return nn.Dense(10)(x.reshape(x.shape[0], -1))


class DecoderBlock(nn.Module):
    """Pre-norm transformer decoder block: causal self-attention and a GELU MLP."""

    heads: int = 4
    dim: int = 32

    @nn.compact
    def __call__(self, x):
        mask = nn.make_causal_mask(jnp.ones(x.shape[:2]))
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads, qkv_features=self.dim)(h, h, mask=mask)
        h = nn.LayerNorm()(x)
        return x + nn.Dense(self.dim)(nn.gelu(nn.Dense(4 * self.dim)(h)))


def _make(model: nn.Module, shape: tuple[int, ...], seed: int = 0):
    x = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    params = jax.jit(model.init)(jax.random.PRNGKey(seed), x)  # one compile, not one per op
    return model.apply, params, (x,)


def mlp():
    return _make(MLP(), (5, 12))


def cnn():
    return _make(CNN(), (2, 12, 12, 3))


def decoder_block(batch: int = 2, seq: int = 7, dim: int = 32):
    """A :class:`DecoderBlock` on ``(batch, seq, dim)`` inputs: 4 heads up to width 64, else 8."""
    return _make(DecoderBlock(heads=4 if dim <= 64 else 8, dim=dim), (batch, seq, dim))


FACTORIES = {"mlp": mlp, "cnn": cnn, "decoder_block": decoder_block}
