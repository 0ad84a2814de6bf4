"""A JaxFunction is a pytree whose leaves are its parameters: passed to jax.jit / grad / vmap
as an argument, its weights are arguments of the program, not baked-in constants."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import converter


@pytest.fixture(scope="module")
def fx():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Tanh(), torch.nn.Linear(128, 8)).eval()
    x = torch.randn(4, 64)
    with torch.no_grad():
        ref = model(x).numpy()
    return converter.from_torch(model, (x,)).to_jax(), x.numpy(), ref


def test_leaves_are_the_params(fx):
    f, _, _ = fx
    leaves, treedef = jax.tree_util.tree_flatten(f)
    assert len(leaves) == len(f.params) == 4
    g = jax.tree_util.tree_unflatten(treedef, [v * 0 for v in leaves])
    assert g is not f and sorted(g.params) == sorted(f.params)
    assert all(float(jnp.abs(v).max()) == 0 for v in g.params.values())
    assert float(jnp.abs(f.params["0.weight"]).max()) > 0  # the original is untouched


def test_jit_with_function_argument_does_not_bake_weights(fx):
    f, x, ref = fx
    call = jax.jit(lambda g, v: g(v))
    np.testing.assert_allclose(np.asarray(call(f, x)), ref, rtol=1e-5, atol=1e-6)
    weights = sum(np.asarray(v).nbytes for v in f.params.values())
    text = call.lower(f, x).as_text()
    assert len(text) < weights / 4, (len(text), weights)  # hex-encoded weights would be 2x
    baked = jax.jit(f).lower(x).as_text()  # plain jax.jit(f) closes over them (see README)
    assert len(baked) > weights


def test_grad_and_vmap_over_the_function(fx):
    f, x, _ = fx
    grads = jax.grad(lambda g: jnp.sum(g(x) ** 2))(f)
    want = jax.grad(lambda p: jnp.sum(f.apply(p, x) ** 2))(f.params)
    for name in f.params:
        np.testing.assert_allclose(
            np.asarray(grads.params[name]), np.asarray(want[name]), rtol=1e-5, atol=1e-6
        )
    batched = jax.vmap(lambda g, v: g(v), in_axes=(None, 0))(f, np.stack([x, 2 * x]))
    np.testing.assert_allclose(np.asarray(batched[1]), np.asarray(f(2 * x)), rtol=1e-5, atol=1e-6)


def test_export_of_jit_f_and_from_jax_keep_working(fx):
    """jax.jit(f) closes over the weights (no mechanism of JAX 0.10.2 makes them arguments
    without breaking these, README "Status and limitations"): jax.export of it and
    from_jax(f, ...) run and match eager torch."""
    f, x, ref = fx
    exp = jax.export.export(jax.jit(f))(jax.ShapeDtypeStruct(x.shape, x.dtype))
    np.testing.assert_allclose(np.asarray(exp.call(x)), ref, rtol=1e-5, atol=1e-6)
    g = converter.from_jax(f, x).to_jax()
    np.testing.assert_allclose(np.asarray(g(x)), ref, rtol=1e-5, atol=1e-6)


def _copy(f):
    """A fresh JaxFunction sharing f's module (its own params dict, never traced)."""
    return jax.tree_util.tree_map(lambda v: v, f)


def test_reassigning_params_captured_by_jit_warns(fx):
    f, x, ref = fx
    g = _copy(f)
    baked, passed = jax.jit(g), jax.jit(lambda h, v: h(v))
    np.testing.assert_allclose(np.asarray(baked(x)), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(passed(g, x)), ref, rtol=1e-5, atol=1e-6)
    with pytest.warns(converter.ClosedOverParamsWarning, match="jax.jit"):
        g.params = {k: v * 0 for k, v in g.params.items()}
    # JAX cached the trace with the old weights as constants; the argument form sees the new ones
    np.testing.assert_allclose(np.asarray(baked(x)), ref, rtol=1e-5, atol=1e-6)
    assert float(jnp.abs(passed(g, x)).max()) == 0
    assert float(jnp.abs(g(x)).max()) == 0


def test_reassigning_params_not_captured_is_silent(fx, recwarn):
    f, x, _ = fx
    g = _copy(f)
    g(x)  # eager
    jax.jit(lambda h, v: h(v))(g, x)  # weights are arguments
    jax.grad(lambda v: jnp.sum(g(v)))(x)  # grad and vmap stage nothing out
    jax.vmap(g)(np.stack([x, x]))
    jax.grad(lambda h: jnp.sum(h(x)))(g)
    g.params = dict(g.params)
    assert not [w for w in recwarn if issubclass(w.category, converter.ClosedOverParamsWarning)]
