"""Shape ops with operand sizes in the torch backend: ``stablehlo.real_dynamic_slice`` and
``stablehlo.dynamic_pad``, which ``jax.export`` writes for a slice or pad by a symbolic
amount. Calling ``to_torch()`` specializes the module to the call's shapes first (no such op
is left), so they run under ``torch.export`` with the dimension kept symbolic; compared with
``jax.jit`` of the source function at several sizes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax import lax
from torch.export import Dim

import converter


def _source(x):
    m = x.shape[0]
    return (
        lax.slice(x, (1, 0), (m, 4), (1, 2)),  # real_dynamic_slice: rows 1..m, every other column
        lax.pad(x, jnp.float32(0.5), ((0, m, 0), (1, 0, 0))),  # dynamic_pad: m rows of 0.5 below
    )


def test_real_dynamic_slice_and_dynamic_pad_under_torch_export():
    (n,) = jax.export.symbolic_shape("n", constraints=["n >= 4", "n <= 64"])
    exp = jax.export.export(jax.jit(_source))(jax.ShapeDtypeStruct((n, 4), jnp.float32))
    text = exp.mlir_module()
    assert "stablehlo.real_dynamic_slice" in text and "stablehlo.dynamic_pad" in text
    m = converter.from_jax(exp)
    assert m.signature.dim_ranges == {"n": [4, 64]}  # the constraints' bounds
    t = m.to_torch()
    assert str(t.export_dynamic_shapes()) == str({"args": ({0: Dim("n", min=4, max=64)},)})
    ep = torch.export.export(t, (torch.randn(5, 4),), dynamic_shapes=t.export_dynamic_shapes())
    run = ep.module()
    rng = np.random.default_rng(0)
    for size in (4, 7, 64):
        x = rng.standard_normal((size, 4)).astype(np.float32)
        with torch.no_grad():
            got = run(torch.from_numpy(x))
        want = jax.jit(_source)(x)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g.numpy(), np.asarray(w), err_msg=f"n = {size}")


def _lookup(table, ids):
    emb = jnp.take(table, ids, axis=0)  # gather: (b, s, 4), dimensions from the indices
    return emb * 2, emb[:, -1]


def test_gather_with_symbolic_batch_under_torch_export():
    """An embedding lookup of ids of symbolic shape ``(b, s)``: the gather's result type
    holds dynamic dimensions (``tensor<?x?x4xf32>``), which the traced graph takes from the
    indices (it raised expanding to a None size)."""
    spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, s"), jnp.int32)
    table = np.random.default_rng(1).standard_normal((11, 4)).astype(np.float32)
    t = converter.from_jax(_lookup, table, spec).to_torch()
    ids = torch.tensor([[1, 2, 3], [4, 5, 10]], dtype=torch.int32)
    ep = torch.export.export(t, (torch.from_numpy(table), ids), dynamic_shapes=t.export_dynamic_shapes())
    for shape in ((2, 3), (3, 5)):
        x = np.random.default_rng(shape[1]).integers(0, 11, size=shape).astype(np.int32)
        with torch.no_grad():
            got = ep.module()(torch.from_numpy(table), torch.from_numpy(x))
        for g, w in zip(got, jax.jit(_lookup)(table, x), strict=True):
            np.testing.assert_array_equal(g.numpy(), np.asarray(w))


def _loop(x):
    def body(c):
        i, y = c
        return i + 1, jnp.tanh(y + jnp.mean(y, axis=0))  # the mean divides by the symbolic size

    return lax.while_loop(lambda c: (c[0] < 3) & (jnp.sum(c[1]) < 100.0), body, (0, x))[1]


def test_while_capturing_a_symbolic_size_under_torch_export():
    """A data-dependent loop whose body uses a symbolic size (``jnp.mean`` over ``b``): the
    size is closed over by the ``while_loop`` body, not passed to it as a tensor (it raised)."""
    t = converter.from_jax(
        _loop, jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, 3"), jnp.float32)
    ).to_torch()
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    ep = torch.export.export(t, (torch.from_numpy(x),), dynamic_shapes=t.export_dynamic_shapes())
    for n in (2, 5):
        x = np.random.default_rng(n).normal(size=(n, 3)).astype(np.float32)
        with torch.no_grad():
            got = ep.module()(torch.from_numpy(x))
        np.testing.assert_allclose(got.numpy(), np.asarray(jax.jit(_loop)(x)), rtol=1e-5, atol=1e-6)


def test_scan_over_a_symbolic_length_under_torch_export_names_the_limit():
    """``lax.scan`` over a symbolic length of rows of symbolic width slices at its loop
    counter (tensor data) by a symbolic size: that slice has no symbolic form under
    ``torch.export``, which raises saying so (the module still runs eagerly at any size)."""

    def cumulative(xs):
        return lax.scan(lambda c, x: (c + x, c * x), jnp.zeros_like(xs[0]), xs)

    spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("s, b"), jnp.float32)
    t = converter.from_jax(cumulative, spec).to_torch()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    for g, w in zip(t(torch.from_numpy(x)), jax.jit(cumulative)(x), strict=True):
        np.testing.assert_array_equal(g.numpy(), np.asarray(w))
    with pytest.raises(converter.ConversionError, match="loop counter.*input_shapes"):
        torch.export.export(t, (torch.from_numpy(x),), dynamic_shapes=t.export_dynamic_shapes())
