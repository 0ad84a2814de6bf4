"""Random ATen ops (frontends/torch/ops/random.py) and the PRNG key argument they add.

Torch's random stream cannot be reproduced, so these tests check what must hold instead:
the distributions (moments on large samples), the key semantics (same key, same numbers;
fresh keys, fresh numbers; the JAX and torch backends agree bit for bit on one key), and the
errors that keep a baked-in key from silently repeating numbers.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
import torch
from converter.frontends.torch import export

import converter
from converter.errors import SignatureMismatchError
from converter.signature import RNG_KEY
from converter.tools.validate import as_numpy
from tests.frontends.torch.conftest import Fn, graph_ops


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _sample(fn, *inputs, rng=0):
    module = converter.from_torch(_Fn(fn), inputs)
    assert module.signature.rng == RNG_KEY
    return np.asarray(module.to_jax()(*[as_numpy(x) for x in inputs], rng=rng))


N = 200_000


@pytest.mark.parametrize(
    "fn, mean, var",
    [
        (lambda x: torch.rand_like(x), 0.5, 1 / 12),
        (lambda x: torch.randn_like(x), 0.0, 1.0),
        (lambda x: x.uniform_(-2.0, 4.0), 1.0, 3.0),
        (lambda x: x.normal_(3.0, 0.5), 3.0, 0.25),
        (lambda x: x.exponential_(2.0), 0.5, 0.25),
        (lambda x: x.log_normal_(0.0, 0.5), float(np.exp(0.125)), float((np.exp(0.25) - 1) * np.exp(0.25))),
        (lambda x: x.geometric_(0.25), 4.0, 12.0),
        (lambda x: torch.bernoulli(torch.full_like(x, 0.3)), 0.3, 0.21),
    ],
    ids=["rand", "randn", "uniform", "normal", "exponential", "log_normal", "geometric", "bernoulli"],
)
def test_distribution_moments(fn, mean, var):
    x = _sample(fn, torch.zeros(N))
    se = np.sqrt(var / N)
    assert abs(x.mean() - mean) < 6 * se, (x.mean(), mean)
    assert abs(x.var() / var - 1) < 0.05, (x.var(), var)


def test_cauchy_quartiles():
    x = _sample(lambda t: t.cauchy_(1.0, 2.0), torch.zeros(N))
    q1, med, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    assert abs(med - 1.0) < 0.05 and abs(q1 - (-1.0)) < 0.05 and abs(q3 - 3.0) < 0.05


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_samplers_draw_in_float32(dtype):
    # a bfloat16 uniform has 2^7 values in [0, 1): drawn in it, -log(U) would be skewed by the
    # U = tiny atom (mean 0.84 instead of 0.5 here); ATen draws in float32 and rounds once
    x = torch.zeros(N, dtype=dtype)
    e = _sample(lambda t: t.exponential_(2.0), x).astype(np.float64)
    c = _sample(lambda t: t.cauchy_(1.0, 2.0), x).astype(np.float64)
    g = _sample(lambda t: t.log_normal_(0.0, 0.5), x).astype(np.float64)
    assert np.isfinite(e).all() and (e >= 0).all() and abs(e.mean() - 0.5) < 0.01
    assert abs(np.median(c) - 1.0) < 0.05
    assert abs(g.mean() - np.exp(0.125)) < 0.01


def test_randint_range_and_uniformity():
    x = _sample(lambda t: torch.randint(3, 9, (N,)) + t, torch.zeros(N, dtype=torch.int64))
    assert x.dtype == np.int64 and x.min() == 3 and x.max() == 8
    counts = np.bincount(x - 3) / N
    assert np.allclose(counts, 1 / 6, atol=0.01)


def test_randperm_is_a_permutation():
    x = _sample(lambda t: torch.randperm(50) + t, torch.zeros(50, dtype=torch.int64))
    assert sorted(x.tolist()) == list(range(50))


def test_multinomial_without_replacement_is_distinct_and_respects_zero_weight():
    w = torch.tensor([[1.0, 0.0, 2.0, 3.0, 4.0]] * 64)
    x = _sample(lambda p: torch.multinomial(p, 4), w)
    assert x.shape == (64, 4)
    assert all(len(set(row)) == 4 for row in x.tolist())
    assert not (x == 1).any()  # weight 0 is never drawn


def test_multinomial_without_replacement_first_draw_frequencies():
    """The first of the draws without replacement (Gumbel top-k) falls on each category as
    often as its weight says."""
    w = torch.tensor([[1.0, 0.0, 2.0, 3.0, 4.0]] * 20_000)
    first = _sample(lambda p: torch.multinomial(p, 2), w)[:, 0]
    for k, freq in enumerate([0.1, 0.0, 0.2, 0.3, 0.4]):
        assert abs((first == k).mean() - freq) < 0.015, k


def test_multinomial_with_replacement_frequencies():
    w = torch.tensor([1.0, 3.0])
    x = _sample(lambda p: torch.multinomial(p, N, replacement=True), w)
    assert abs((x == 1).mean() - 0.75) < 0.01


def test_dropout_mask_and_scale():
    drop = torch.nn.Dropout(0.25).train()
    x = torch.ones(N)
    y = _sample(drop, x)
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)


def test_eval_mode_dropout_draws_nothing():
    torch.manual_seed(0)  # unseeded, an output near 0 could miss rtol alone by one float32 ulp
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).eval()
    x = torch.randn(2, 4)
    module = converter.from_torch(model, (x,))
    assert module.signature.rng is None
    np.testing.assert_allclose(module.to_jax()(x.numpy()), model(x).detach().numpy(), rtol=1e-6, atol=1e-6)


@pytest.fixture(scope="module")
def dropout_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Dropout(0.5)).train()
    x = torch.randn(4, 8)
    return converter.from_torch(model, (x,)), x


def test_same_key_same_numbers_fresh_keys_fresh_numbers(dropout_model):
    module, x = dropout_model
    f = module.to_jax()
    a, b = f(x.numpy(), rng=7), f(x.numpy(), rng=jax.random.PRNGKey(7))
    np.testing.assert_array_equal(a, b)
    c = f(x.numpy(), rng=jax.random.key(7))  # typed keys too
    np.testing.assert_array_equal(a, c)
    d, e = f(x.numpy()), f(x.numpy())  # the function's own stream advances
    assert not np.array_equal(d, e)


def test_key_required_under_transforms(dropout_model):
    module, x = dropout_model
    f = module.to_jax()
    with pytest.raises(SignatureMismatchError, match="pass the key explicitly"):
        jax.jit(f)(x.numpy())
    with pytest.raises(SignatureMismatchError, match="rng="):
        f.apply(f.params, x.numpy())
    jitted = jax.jit(lambda p, x, k: f.apply(p, x, rng=k))
    np.testing.assert_array_equal(jitted(f.params, x.numpy(), jax.random.PRNGKey(3)), f(x.numpy(), rng=3))
    grads = jax.grad(lambda p: f.apply(p, x.numpy(), rng=3).sum())(f.params)
    assert set(grads) == set(f.params)


def test_torch_backend_matches_jax_bit_for_bit_on_one_key(dropout_model):
    module, x = dropout_model
    f, t = module.to_jax(), module.to_torch()
    with torch.no_grad():
        got = t(x, rng=11).numpy()
    np.testing.assert_allclose(got, f(x.numpy(), rng=11), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(got == 0, np.asarray(f(x.numpy(), rng=11)) == 0)  # same mask


def test_torch_backend_follows_torch_manual_seed(dropout_model):
    module, x = dropout_model
    t = module.to_torch()
    torch.manual_seed(5)
    a = t(x)
    torch.manual_seed(5)
    b = t(x)
    c = t(x)
    assert torch.equal(a, b) and not torch.equal(b, c)
    exported = torch.export.export(t, (x,))
    assert exported.module()(x).shape == a.shape


def test_signature_rng_survives_save_and_load(dropout_model, tmp_path):
    module, x = dropout_model
    module.save(tmp_path / "m.shlo")
    loaded = converter.load(tmp_path / "m.shlo")
    assert loaded.signature.rng == RNG_KEY
    np.testing.assert_array_equal(loaded.to_jax()(x.numpy(), rng=2), module.to_jax()(x.numpy(), rng=2))


def test_rng_input_names_a_bad_key(dropout_model):
    module, x = dropout_model
    with pytest.raises(SignatureMismatchError, match="rng"):
        module.to_jax()(x.numpy(), rng=np.zeros(3, np.float32))


N_OVERLOADS = 40_000  # the draws of each remaining overload


@pytest.fixture(scope="module")
def random_overloads():
    """One program drawing with every remaining overload, run once on one key; and the eager
    torch outputs of the same program (for their shapes and dtypes)."""

    def fn(x, p):
        return (
            torch.randn(N_OVERLOADS),
            torch.randint(7, (N_OVERLOADS,)),
            torch.randint_like(x, 7),
            torch.randint_like(x, -3, 4, dtype=torch.int32),
            torch.normal(x + 2.0, p * 10),  # Tensor_Tensor: mean 2, std 3
            torch.normal(x - 1.0, 0.5),  # Tensor_float
            torch.normal(4.0, p * 5),  # float_Tensor: std 1.5
            torch.normal(-2.0, 2.0, (N_OVERLOADS,)),  # float_float
            x.clone().bernoulli_(p),  # bernoulli.Tensor: p = 0.3
            torch.nn.functional.rrelu(x - 1.0, training=True),  # rrelu_with_noise_functional
            torch.bernoulli(x, 0.7),  # bernoulli.p
            *torch.ops.aten.rrelu_with_noise_functional(x, x, 1 / 8, 1 / 3, True),  # (out, noise) at 0
        )

    x = torch.zeros(N_OVERLOADS)
    p = torch.full((N_OVERLOADS,), 0.3)
    ep = export(Fn(fn), (x, p))
    present = graph_ops(ep)
    module = converter.from_torch(ep)
    got = [np.asarray(o) for o in module.to_jax()(x.numpy(), p.numpy(), rng=0)]
    with torch.no_grad():
        ref = [t.numpy() for t in fn(x, p)]
    return present, got, ref


def test_random_overloads_are_in_the_graph_with_torch_shapes_and_dtypes(random_overloads):
    present, got, ref = random_overloads
    for op in (
        "aten.randn.default",
        "aten.randint.default",
        "aten.randint_like.default",
        "aten.randint_like.low_dtype",
        "aten.normal.Tensor_Tensor",
        "aten.normal.Tensor_float",
        "aten.normal.float_Tensor",
        "aten.normal.float_float",
        "aten.bernoulli.Tensor",
        "aten.rrelu_with_noise_functional.default",
        "aten.bernoulli.p",
    ):
        assert op in present, (op, sorted(present))
    assert [(g.shape, g.dtype) for g in got] == [(r.shape, r.dtype) for r in ref]


def _moments(v: np.ndarray, mean: float, std: float) -> None:
    se = std / np.sqrt(v.size)
    assert abs(v.mean() - mean) < 6 * se, (v.mean(), mean)
    assert abs(v.std() / std - 1) < 0.05, (v.std(), std)


def test_random_overloads_distributions(random_overloads):
    _, got, _ = random_overloads
    randn, randint, randint_like, randint_low, n_tt, n_tf, n_ft, n_ff, bern, rrelu, bern_p, zero, noise = got
    _moments(randn, 0.0, 1.0)
    _moments(n_tt, 2.0, 3.0)
    _moments(n_tf, -1.0, 0.5)
    _moments(n_ft, 4.0, 1.5)
    _moments(n_ff, -2.0, 2.0)
    for v, lo, hi in ((randint, 0, 7), (randint_like, 0, 7), (randint_low, -3, 4)):
        assert np.array_equal(v, np.round(v)) and v.min() == lo and v.max() == hi - 1, (v.min(), v.max())
        counts = np.bincount((v - lo).astype(np.int64), minlength=hi - lo)
        expected = v.size / (hi - lo)
        assert np.all(np.abs(counts - expected) < 6 * np.sqrt(expected)), counts
    assert set(np.unique(bern)) == {0.0, 1.0}
    _moments(bern, 0.3, np.sqrt(0.21))
    assert set(np.unique(bern_p)) == {0.0, 1.0}
    _moments(bern_p, 0.7, np.sqrt(0.21))
    # rrelu of x - 1 = -1 everywhere: -a with a ~ U(1/8, 1/3)
    a = -rrelu
    assert a.min() >= 1 / 8 and a.max() <= 1 / 3, (a.min(), a.max())
    _moments(a, (1 / 8 + 1 / 3) / 2, (1 / 3 - 1 / 8) / np.sqrt(12))
    # at x = 0 a slope is drawn too (ATen's kernel tests x <= 0), recorded in the noise
    assert not zero.any()
    assert noise.min() >= 1 / 8 and noise.max() <= 1 / 3, (noise.min(), noise.max())
    _moments(noise, (1 / 8 + 1 / 3) / 2, (1 / 3 - 1 / 8) / np.sqrt(12))


def test_random_rules_branches_that_draw_nothing_or_are_decided():
    """Called directly: no key stream raises; ``bernoulli`` (replaced by the Core ATen
    decompositions) of probabilities 0 and 1, ``native_dropout`` in eval mode and with
    ``p = 1``, eval-mode ``rrelu`` (the mean slope, as eager torch) give fixed values."""
    import jax.numpy as jnp
    from converter.frontends.torch.ops import random as r

    with pytest.raises(RuntimeError, match="without a PRNG key"):
        r.next_key()
    x = torch.tensor([-2.0, -0.5, 0.0, 3.0])
    with r.key_stream(jax.random.PRNGKey(0)):
        np.testing.assert_array_equal(r.bernoulli(jnp.array([0.0, 1.0, 1.0, 0.0])), [0, 1, 1, 0])
        out, mask = r.native_dropout(x.numpy(), 0.5, train=False)
        np.testing.assert_array_equal(out, x.numpy())
        assert mask.dtype == bool and mask.all()
        out, mask = r.native_dropout(x.numpy(), 1.0, train=True)
        np.testing.assert_array_equal(out, 0 * x.numpy())
        assert mask.dtype == bool and not mask.any()
        noise = jnp.full(4, 7.0)
        out, kept = r.rrelu_with_noise_functional(jnp.asarray(x.numpy()), noise, 0.1, 0.3)
    np.testing.assert_allclose(out, torch.nn.functional.rrelu(x, 0.1, 0.3, training=False).numpy(), rtol=1e-6)
    assert kept is noise
