"""A JaxFunction is a pytree whose leaves are its parameters: passed to jax.jit / grad / vmap
as an argument, its weights are arguments of the program, not baked-in constants."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import converter.backends.jax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import converter
from converter import _jax_internal

ROOT = Path(__file__).resolve().parents[2]


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
    baked = jax.jit(f).lower(x).as_text()  # plain jax.jit(f) closes over them (see docs/limitations.md)
    if not _jax_internal.constants_hoisted():  # unless JAX hoists constants (test below)
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
    without breaking these, docs/limitations.md): jax.export of it and
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


@pytest.mark.skipif(_jax_internal.constants_hoisted(), reason="JAX passes closed-over arrays as arguments")
def test_jit_f_embedding_its_params_warns_once(fx, monkeypatch):
    f, x, ref = fx
    monkeypatch.setattr(converter.backends.jax.function, "EMBED_WARN_BYTES", 1)
    g = _copy(f)
    with pytest.warns(converter.EmbeddedParamsWarning, match="JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS"):
        np.testing.assert_allclose(np.asarray(jax.jit(g)(x)), ref, rtol=1e-5, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", converter.EmbeddedParamsWarning)
        jax.jit(lambda v: g(v) * 2)(x)  # once per function
        monkeypatch.undo()  # the default bound (16 MiB)
        jax.jit(_copy(f))(x)  # small parameters: silent


@pytest.mark.skipif(_jax_internal.constants_hoisted(), reason="JAX passes closed-over arrays as arguments")
def test_embedding_warns_from_exactly_its_bound(fx, monkeypatch):
    """Embedding at least ``EMBED_WARN_BYTES`` (16 MiB, as docs/jax.md states) of parameters
    warns: parameters of exactly the bound's size do, one byte fewer than it do not
    (``jax.make_jaxpr`` stages the call as ``jax.jit`` does, without compiling it)."""
    f, x, _ = fx
    assert converter.backends.jax.function.EMBED_WARN_BYTES == 16 * 2**20
    size = sum(np.asarray(v).nbytes for v in f.params.values())
    monkeypatch.setattr(converter.backends.jax.function, "EMBED_WARN_BYTES", size)
    with pytest.warns(converter.EmbeddedParamsWarning, match=f"closes over f's {size / 2**20:.0f} MiB"):
        jax.make_jaxpr(_copy(f))(x)
    monkeypatch.setattr(converter.backends.jax.function, "EMBED_WARN_BYTES", size + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", converter.EmbeddedParamsWarning)
        jax.make_jaxpr(_copy(f))(x)


_HOISTED = textwrap.dedent(
    """
    import jax, numpy as np, onnx, torch, warnings
    from onnx import TensorProto, helper
    import converter
    from converter import _jax_internal
    from examples import models

    assert _jax_internal.constants_hoisted()
    warnings.simplefilter("error", converter.EmbeddedParamsWarning)
    model, args = models.load("cnn")  # rules close over index/window constants
    f = converter.from_torch(model, args).to_jax()
    x = args[0].numpy()
    with torch.no_grad():
        ref = model(*args).numpy()
    np.testing.assert_allclose(np.asarray(f(x)), ref, rtol=1e-5, atol=1e-5)
    jitted = jax.jit(f)
    main = jitted.lower(x).as_text().split("func.func public @main(")[1].split(")")[0]
    big = sum(np.asarray(v).nbytes > 32 for v in f.params.values())  # JAX embeds <= 32 bytes
    assert main.count("%arg") >= big + 1  # the weights are arguments, not constants
    np.testing.assert_allclose(np.asarray(jitted(x)), ref, rtol=1e-5, atol=1e-5)

    const = helper.make_node("Constant", [], ["c"], value=helper.make_tensor(
        "c", TensorProto.FLOAT, [16], np.arange(16, dtype=np.float32)))
    graph = helper.make_graph(
        [const, helper.make_node("Add", ["x", "c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    v = np.ones((2, 16), np.float32)
    (out,) = converter.from_onnx(m).to_jax()(v)
    np.testing.assert_array_equal(np.asarray(out), v + np.arange(16, dtype=np.float32))
    print("ok")
    """
)


def test_frontends_and_jit_f_with_jax_hoisting_constants():
    """With JAX's simplified constants (``JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=True``, the
    future default of JAX, docs.jax.dev internals/constants), ``jax.jit(...).lower()`` adds
    closed-over arrays to ``@main``'s arguments: the frontends still produce a module taking
    exactly its signature's arguments, and ``jax.jit(f)`` takes the weights as arguments."""
    env = {**os.environ, "JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS": "True", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _HOISTED], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
