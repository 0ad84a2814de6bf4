"""Regression tests for the defects the differential fuzzer (``test_fuzz.py``) found.

Each is the smallest explicit program showing the defect, run through the path that failed
and compared with its source (``jax.jit`` / eager torch) by the fuzzer's comparator. A defect
not fixed yet is ``xfail(strict=True, raises=...)`` with what is wrong in the reason; a
fixed one is a plain test.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import converter
from tests.fuzz import harness


def check(fn, *args, paths=("torch", "onnx", "jax", "onnx>jax"), slack=0.0):
    """``fn`` converted with ``from_jax`` through each of ``paths`` matches ``jax.jit(fn)``."""
    want = harness._leaves(jax.jit(fn)(*args))
    module = converter.from_jax(fn, *args)
    for name in paths:
        got = harness.JAX_PATHS[name](module, list(args))
        assert len(got) == len(want), name
        for k, (w, g) in enumerate(zip(want, got, strict=True)):
            msg = harness.compare(w, g, slack)
            assert msg is None, f"{name} output {k}: {msg}"


# --------------------------------------------------------------------------- fixed


@pytest.mark.parametrize("shape", [(1,), (4, 3, 1)])
def test_onnx_scan_along_length_one_axis(shape):
    """``lax.cummax``/``cummin`` along a length-1 axis is a ``reduce_window`` whose windows are
    all one element; ``to_onnx`` built a ``MaxPool`` with no kernel dimensions and crashed
    (``ValueError: Could not infer attribute `dilations` type from empty iterator``). Fixed:
    the identity."""
    x = np.random.default_rng(0).uniform(-3, 3, shape).astype(np.float16)
    check(lambda a: (lax.cummin(a, axis=len(shape) - 1, reverse=True), lax.cummax(a, axis=0)), x)
    check(lambda a: lax.cummax(a, axis=len(shape) - 1), x.astype(np.int32))


def test_onnx_pool_padding_not_smaller_than_window():
    """A max/min ``reduce_window`` whose padding is not smaller than its window (here window
    1, padding (1, 1)) became a ``MaxPool`` with pads >= kernel_shape, which onnxruntime
    refuses when the session is created ('Pad should be smaller than kernel'). Fixed: an
    explicit ``Pad`` with -inf first (and windows wholly in the padding give -inf, where
    onnxruntime's ``MaxPool`` would give -3.4e38)."""
    x = np.random.default_rng(0).uniform(-3, 3, (2, 3, 1)).astype(np.float32)
    fn = lambda a: lax.reduce_window(a, -jnp.inf, lax.max, (1, 1, 1), (1, 1, 1), ((0, 0), (0, 0), (1, 1)))  # noqa: E731
    check(fn, x, paths=("onnx",))


@pytest.mark.parametrize("op", ["add", "mul", "max", "min"])
def test_onnx_float16_scatter_with_reduction(op):
    """A float16 scatter with a reduction (``x.at[i].add``) became a ``ScatterND`` with
    ``reduction='add'``, which onnxruntime's CPU provider has no float16 kernel for. Fixed:
    computed in float32 and rounded back, as bfloat16 is."""
    x, u = np.arange(3).astype(np.float16), np.array([1.5, -2.25], np.float16)
    check(lambda x, u: getattr(x.at[jnp.array([0, 0])], op)(u), x, u, paths=("onnx",))


def test_onnx_torch_argmax_loop_strides():
    """Found by the fuzzer: the ONNX model of this argmax holds a Loop (the ONNX backend's
    lowering of the variadic reduce) whose first carried value is a transpose; to_torch's
    ``while_loop`` refused it (carried input and body output differ in stride). Fixed: the
    torch backend makes carried values contiguous, as the body's outputs are."""
    a = np.array([[0, 5, 2], [4, 1, 3]], np.float32)
    check(lambda a: jnp.argmax(a, axis=1), a, paths=("onnx", "onnx>jax", "onnx>torch"))


def test_onnx_frontend_scatter_on_constant_data():
    """An ONNX ``ScatterND`` whose data is a constant at conversion time (here a scatter-min
    into an iota, and into the product over an empty axis) reached ``from_onnx``'s rule as a
    NumPy array, and ``x.at[...]`` crashed (``AttributeError: 'numpy.ndarray' object has no
    attribute 'at'``). Fixed: the rule takes ``jnp.asarray(x)``."""
    upd = jnp.array([0], np.int32)
    check(
        lambda a: jnp.arange(3, dtype=np.int32).at[jnp.array([1])].min(upd) + a,
        np.ones(3, np.int32),
        paths=("onnx>jax", "onnx>torch"),
    )
    check(
        lambda a: jnp.prod(a, axis=0).at[jnp.array([1])].min(upd),
        np.ones((0, 2), np.int32),
        paths=("onnx>jax", "onnx>torch"),
    )


@pytest.mark.parametrize("op", ["min", "max"])
def test_onnx_scatter_min_max_nan_operand(op):
    """Found by the fuzzer: onnxruntime's ScatterND min/max kept the number where the operand
    (or an update) is NaN; StableHLO's minimum/maximum give NaN. Fixed in the ONNX backend."""
    x, u = np.array([np.nan, 2.0, 3.0], np.float32), np.array([1.0, np.nan], np.float32)
    check(lambda x, u: getattr(x.at[jnp.array([0, 1])], op)(u), x, u, paths=("torch", "onnx"))
    x64 = np.array([[np.nan, 2.0], [5.0, -1.0]]), np.array([[1.0, np.nan]])
    check(lambda x, u: getattr(x.at[jnp.array([0])], op)(u), *x64, paths=("onnx",))


def test_jax_backend_top_k_of_empty_dimension():
    """Found by the fuzzer: to_jax of lax.top_k(x, 0) on a (3, 0) input divided by the size of
    the empty dimension in the sort rule; fixed by the sort/top_k total-order rework."""
    check(lambda a: lax.top_k(a, 0)[1], np.zeros((3, 0), np.int8), paths=("jax",))
