"""Flax models → native torch (issue 3): outputs and parameter gradients match JAX, and a
JAX training step (value_and_grad + optax) converted to torch steps like JAX does."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch

import converter
from examples import flax_models

rng = np.random.default_rng(0)


@functools.cache
def _case(name: str):
    """``(apply, params, inputs)``, built on first use: initializing the Flax models
    compiles, which collection (on every xdist worker) should not pay for."""
    return flax_models.FACTORIES[name]()


def _named(tree):
    return {
        "params" + jax.tree_util.keystr(p): np.asarray(v)
        for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]
    }


@pytest.mark.parametrize("name", sorted(flax_models.FACTORIES))
def test_flax_model_to_torch_outputs_and_grads(name):
    apply, params, (x,) = _case(name)
    tm = converter.from_jax(apply, x, params=params).to_torch()

    out = tm(torch.from_numpy(x))
    # the reference outputs and gradients in one jax.jit program (eager Flax compiles op by op)
    loss = lambda p: (lambda y: (jnp.mean(y**2), y))(apply(p, x))  # noqa: E731
    (_, want), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-5, atol=1e-5)

    (out**2).mean().backward()
    jgrads = _named(grads)
    tgrads = {tm.param_names[a]: p.grad for a, p in tm.named_parameters()}
    assert set(tgrads) == set(jgrads)
    for key, g in jgrads.items():
        np.testing.assert_allclose(tgrads[key].numpy(), g, rtol=1e-4, atol=1e-5, err_msg=key)


@pytest.mark.parametrize("optimizer", [optax.sgd(0.1, momentum=0.9), optax.adam(1e-2)], ids=["sgd", "adam"])
def test_jax_training_step_runs_in_torch(optimizer):
    apply, params, (x,) = _case("mlp")
    y = rng.normal(size=(5, 4)).astype(np.float32)
    opt_state = optimizer.init(params)

    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((apply(p, x) - y) ** 2))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    torch_step = converter.from_jax(step, params, opt_state, x, y).to_torch()
    to_t = lambda t: jax.tree_util.tree_map(lambda a: torch.from_numpy(np.array(a)), t)  # noqa: E731
    tp, ts, xt, yt = to_t(params), to_t(opt_state), torch.from_numpy(x), torch.from_numpy(y)
    jstep = jax.jit(step)
    for _ in range(5):
        params, opt_state, jloss = jstep(params, opt_state, x, y)
        tp, ts, tloss = torch_step(tp, ts, xt, yt)
        np.testing.assert_allclose(tloss.item(), float(jloss), rtol=1e-5)
    final_t = {k: v.numpy() for k, v in zip(_named(params), jax.tree_util.tree_leaves(tp), strict=True)}
    for key, v in _named(params).items():
        np.testing.assert_allclose(final_t[key], v, rtol=1e-5, atol=1e-6, err_msg=key)
