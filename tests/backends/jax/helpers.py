"""Round trip a JAX function through StableHLO and the JAX backend's interpreter."""

import jax
import numpy as np

import converter
from tests.compare import assert_outputs_close


def through_backend(fn, *args):
    """``fn`` lowered by ``jax.jit`` to StableHLO, read back, and interpreted by the JAX
    backend; returns (converted outputs, reference outputs) as lists of NumPy arrays."""
    module = converter.from_stablehlo(jax.jit(fn).lower(*args).as_text())
    got = module.to_jax()(*args)
    want = jax.jit(fn)(*args)
    flat = lambda t: [np.asarray(x) for x in jax.tree_util.tree_leaves(t)]  # noqa: E731
    return flat(got), flat(want)


def assert_same(fn, *args, rtol=1e-6, atol=1e-6):
    """Converted and reference outputs agree: bit for bit for integers and bools,
    within ``rtol``/``atol`` for floats (NaN == NaN)."""
    got, want = through_backend(fn, *args)
    assert_outputs_close(got, want, rtol, atol)
