"""Idiomatic ONNX from ``to_onnx`` (``backends/onnx/patterns.py``, ``simplify.py`` and the
single-op rules): each rewrite fires (its operator is in the graph, the ops it replaces are
not) and the model's numbers match ``jax.jit`` (or eager torch) in onnxruntime."""

import collections
import importlib
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from jax import lax

import converter
from tests.backends.onnx.helpers import run_session

RNG = np.random.default_rng(0)


def _convert(fn, *args, opset=20, optimize=True):
    module = converter.from_stablehlo(jax.jit(fn).lower(*args).as_text())
    return module.to_onnx(opset=opset, optimize=optimize)


def _run(model, *args):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return run_session(sess, args)


def _ops(model) -> collections.Counter:
    return collections.Counter(n.op_type for n in model.graph.node)


def _check(fn, *args, fires: str, gone=(), opset=20, rtol=1e-5, atol=1e-6):
    """``fn`` converts with ``fires`` in the graph and none of ``gone``; onnxruntime's
    results match ``jax.jit``'s. Returns the model."""
    model = _convert(fn, *args, opset=opset)
    ops = _ops(model)
    assert ops[fires] >= 1, ops
    for op in gone:
        assert op not in ops, ops
    want = [np.asarray(y) for y in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
    got = _run(model, *args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return model


X = RNG.normal(size=(2, 5, 16)).astype(np.float32) * 3


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax(axis):
    _check(lambda x: jax.nn.softmax(x, axis=axis), X, fires="Softmax", gone=("Exp", "ReduceMax"))


def test_softmax_of_from_jax_through_the_stop_gradient_marker():
    """``from_jax`` marks ``jax.nn.softmax``'s ``stop_gradient(max)``: still one Softmax."""
    model = converter.from_jax(lambda x: jax.nn.softmax(x, axis=-1), X).to_onnx(opset=20)
    assert _ops(model) == {"Softmax": 1}, _ops(model)
    want = np.asarray(jax.jit(lambda x: jax.nn.softmax(x, axis=-1))(X))
    np.testing.assert_allclose(_run(model, X)[0], want, rtol=1e-5, atol=1e-6)


def test_softmax_with_masked_row_keeps_nan_and_zeros():
    x = X.copy()
    x[0, 0, :] = -np.inf  # a fully masked row: NaN in JAX and in ONNX Softmax
    x[0, 1, :3] = -np.inf
    model = _convert(lambda v: jax.nn.softmax(v, axis=-1), x)
    got = _run(model, x)[0]
    want = np.asarray(jax.jit(lambda v: jax.nn.softmax(v, axis=-1))(x))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _layer_norm(x, w=None, b=None, eps=1e-5):
    mean = jnp.sum(x, axis=-1, keepdims=True) / x.shape[-1]
    var = jnp.sum(jnp.square(x - mean), axis=-1, keepdims=True) / x.shape[-1]
    y = (x - mean) * lax.rsqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


W = RNG.normal(size=(16,)).astype(np.float32)
B = RNG.normal(size=(16,)).astype(np.float32)


@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_layer_norm(affine):
    args = {"none": (), "weight": (W,), "both": (W, B)}[affine]
    _check(lambda x, *p: _layer_norm(x, *p), X, *args, fires="LayerNormalization", gone=("ReduceSum", "Sqrt"))


def test_layer_norm_from_torch_matches_eager():
    model = torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 8)).eval()
    x = torch.from_numpy(X)
    onnx_model = converter.from_torch(model, (x,)).to_onnx(opset=20)
    assert {"LayerNormalization", "Gemm"} <= set(_ops(onnx_model)) or "MatMul" in _ops(onnx_model)
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(_run(onnx_model, X)[0], want, rtol=1e-5, atol=1e-5)


def test_layer_norm_not_over_leading_axes():
    # normalized over axis 1 of 3 (not trailing): no LayerNormalization, still exact
    def fn(x):
        mean = jnp.sum(x, axis=1, keepdims=True) / x.shape[1]
        var = jnp.sum(jnp.square(x - mean), axis=1, keepdims=True) / x.shape[1]
        return (x - mean) * lax.rsqrt(var + 1e-5)

    model = _convert(fn, X)
    assert "LayerNormalization" not in _ops(model)
    np.testing.assert_allclose(_run(model, X)[0], np.asarray(jax.jit(fn)(X)), rtol=1e-5, atol=1e-5)


def _gelu_erf(x):
    return 0.5 * x * (1 + lax.erf(x * np.float32(1 / np.sqrt(2))))


def _gelu_tanh(x):  # torch's form of gelu(approximate="tanh")
    return 0.5 * x * (1 + jnp.tanh(np.float32(np.sqrt(2 / np.pi)) * (x + (x * x * x) * 0.044715)))


@pytest.mark.parametrize(
    "fn", [_gelu_erf, _gelu_tanh, lambda x: jax.nn.gelu(x, approximate=True)], ids=["erf", "tanh", "jax-tanh"]
)
def test_gelu(fn):
    _check(fn, X, fires="Gelu", gone=("Erf", "Tanh"), atol=1e-5)


def test_gelu_needs_opset_20():
    assert "Gelu" not in _ops(_convert(_gelu_erf, X, opset=18))


def test_gelu_other_constant_does_not_fire():
    model = _convert(lambda x: 0.5 * x * (1 + lax.erf(x * np.float32(0.6))), X)
    assert "Gelu" not in _ops(model)


def test_relu_forms():
    x = X.copy()
    x[0, 0, 0] = np.nan
    _check(jax.nn.relu, x, fires="Relu", gone=("Max",))
    _check(lambda v: jnp.where(v <= 0, 0.0, v), x, fires="Relu", gone=("Where",))
    signed = lambda v: jnp.where(v < 0, 0.0, jnp.where(v == 0, v * 0.0, v))  # noqa: E731
    _check(signed, x, fires="Relu", gone=("Where", "Mul"))
    not_relu = lambda v: jnp.where(v < 0, 0.0, jnp.where(v == 0, v * 2.0, v + 1))  # noqa: E731
    assert "Relu" not in _ops(_convert(not_relu, x, opset=20))


def test_gemm_and_matmul():
    w = RNG.normal(size=(8, 16)).astype(np.float32)
    b = RNG.normal(size=(8,)).astype(np.float32)
    x2 = X.reshape(10, 16)
    _check(lambda x, w, b: x @ w.T + b, x2, w, b, fires="Gemm", gone=("Einsum", "Transpose", "Add"))
    y = RNG.normal(size=(2, 16, 3)).astype(np.float32)
    _check(lambda a, c: a @ c, X, y, fires="MatMul", gone=("Einsum",))


def test_matmul_of_a_3d_operand_by_a_matrix():
    """``[b, m, k] @ [k, n]`` (no batch dimensions, MatMul's broadcasting) is one ``MatMul``;
    with the matrix transposed it stays a ``MatMul`` (``Gemm`` takes 2-D operands only)."""
    w = RNG.normal(size=(16, 3)).astype(np.float32)
    _check(lambda a, c: a @ c, X, w, fires="MatMul", gone=("Einsum", "Gemm"))
    _check(lambda a, c: a @ c.T, X, w.T.copy(), fires="MatMul", gone=("Einsum", "Gemm"))


def test_conv_without_layout_transposes():
    x = RNG.normal(size=(1, 3, 8, 8)).astype(np.float32)
    k = RNG.normal(size=(4, 3, 3, 3)).astype(np.float32)
    _check(
        lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME"),
        x,
        k,
        fires="Conv",
        gone=("Transpose",),
        atol=1e-5,
    )


def _initializer_bytes(model) -> int:
    return sum(onnx.numpy_helper.to_array(t).nbytes for t in model.graph.initializer)


def test_iota_computed_in_graph():
    x = RNG.normal(size=(4, 8, 16)).astype(np.float32)
    model = _check(lambda v: v * lax.broadcasted_iota(jnp.float32, (4, 8, 16), 1), x, fires="Mul")
    assert _initializer_bytes(model) <= 8 * 4 + 64  # at most the 8 positions once, not 4x8x16
    plain = _convert(lambda v: v * lax.broadcasted_iota(jnp.float32, (4, 8, 16), 1), x, optimize=False)
    assert "Range" in _ops(plain) and _initializer_bytes(plain) <= 64


def test_repeating_constants_are_not_stored_whole():
    x = RNG.normal(size=(64, 64)).astype(np.float32)
    row = np.arange(64, dtype=np.float32)
    model = _check(lambda v: v + jnp.full((64, 64), 3.0) * jnp.broadcast_to(row, (64, 64)), x, fires="Add")
    assert _initializer_bytes(model) <= 64 * 4 + 64  # the row once, and scalars/shapes


def test_constant_mask_folded():
    # a causal mask from iotas is computed once at conversion time, not in the graph
    def fn(s):
        i = lax.broadcasted_iota(jnp.int32, (8, 8), 0)
        j = lax.broadcasted_iota(jnp.int32, (8, 8), 1)
        return jnp.where(i >= j, s, -jnp.inf)

    s = RNG.normal(size=(2, 8, 8)).astype(np.float32)
    model = _check(fn, s, fires="Where", gone=("Range", "GreaterOrEqual"))
    plain = _convert(fn, s, optimize=False)
    assert len(model.graph.node) < len(plain.graph.node)


def test_no_output_copies_and_broadcasts_implicit():
    b = RNG.normal(size=(16,)).astype(np.float32)
    model = _check(
        lambda x, b: x * 2.0 + b, X, b, fires="Add", gone=("Identity", "Expand", "ConstantOfShape")
    )
    assert len(model.graph.node) == 2


def test_optimize_false_keeps_plain_form():
    assert "Softmax" not in _ops(_convert(lambda x: jax.nn.softmax(x), X, optimize=False))


def _example(name: str):
    """An example model of ``examples/``, its inputs, its Module and its ONNX model (opset 20)."""
    import importlib

    model, args = importlib.import_module(f"examples.{name}").factory()
    module = converter.from_torch(model, args)
    return model, args, module, module.to_onnx(opset=20)


@pytest.fixture(scope="module")
def gpt2_model():
    return _example("gpt2")


def test_gpt2_idiomatic_and_exact(gpt2_model):
    model, args, module, onnx_model = gpt2_model
    ops = _ops(onnx_model)
    for op in ("LayerNormalization", "Softmax", "Gelu", "Gemm", "MatMul"):
        assert ops[op] >= 1, ops
    assert "Einsum" not in ops and "Expand" not in ops
    weights = sum(np.asarray(v).nbytes for v in module.params.values())
    assert _initializer_bytes(onnx_model) <= 1.05 * weights
    with torch.no_grad():
        want = model(*args).logits.numpy()
    np.testing.assert_allclose(_run(onnx_model, args[0].numpy())[0], want, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def cnn_model():
    return _example("cnn")


def test_cnn_idiomatic_and_exact(cnn_model):
    # Conv (batch norm folded in, biases as its input), Relu, one MaxPool, AveragePool,
    # ReduceMean, Gemm: no index tables, no batch-norm arithmetic, no reshapes
    model, args, module, onnx_model = cnn_model
    ops = _ops(onnx_model)
    assert ops["MaxPool"] == 1 and ops["AveragePool"] == 1 and ops["Gemm"] == 1, ops
    assert not {"GatherND", "Gather", "Sqrt", "Div", "Reshape", "Concat", "Where", "Cast"} & set(ops), ops
    assert len(onnx_model.graph.node) <= 13, ops
    inits = {t.name for t in onnx_model.graph.initializer}
    assert {
        "features.8.weight",
        "features.8.bias",
        "folded:features.0.weight",
        "folded:features.4.weight",
    } <= inits
    assert not any(name.startswith("features.1.") or name.startswith("features.5.") for name in inits), inits
    weights = sum(np.asarray(v).nbytes for v in module.params.values())
    assert _initializer_bytes(onnx_model) <= 1.05 * weights
    x = args[0].clone()
    x[1, 0, 4:8, 4:8] = float("inf")
    x[0, 2, 9, 9] = float("nan")
    for inputs in (args[0], x):
        with torch.no_grad():
            want = model(inputs).numpy()
        got = _run(onnx_model, inputs.numpy())[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


class _TiedConvs(torch.nn.Module):
    """One convolution weight read twice, each product followed by its own batch norm."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, bias=False)
        self.bn1, self.bn2 = torch.nn.BatchNorm2d(4), torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn1(self.conv(x)) + self.bn2(self.conv(x * 2))


def test_batch_norm_folds_only_a_weight_read_once():
    torch.manual_seed(0)
    model = _TiedConvs().eval()
    for bn in (model.bn1, model.bn2):
        torch.nn.init.uniform_(bn.running_var, 0.5, 1.5)
        torch.nn.init.uniform_(bn.running_mean, -0.5, 0.5)
    x = torch.randn(2, 3, 8, 8)
    onnx_model = converter.from_torch(model, (x,)).to_onnx(opset=20)
    assert not any(t.name.startswith("folded:") for t in onnx_model.graph.initializer)
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(_run(onnx_model, x.numpy())[0], want, rtol=1e-5, atol=1e-5)


def test_reduction_then_reshape_is_one_reduction():
    x = RNG.normal(size=(2, 3, 8, 8)).astype(np.float32)
    model = _check(
        lambda v: jnp.mean(v, axis=(2, 3), keepdims=True).reshape(2, 3) * 2.0, x, fires="ReduceMean"
    )
    assert "Reshape" not in _ops(model)


def test_average_pool_and_mean():
    x = RNG.normal(size=(2, 3, 8, 8)).astype(np.float32)

    def fn(v):
        pooled = lax.reduce_window(v, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4.0
        return jnp.mean(pooled, axis=(2, 3), keepdims=True), jnp.mean(v, axis=(2, 3))

    model = _check(fn, x, fires="AveragePool", gone=("Conv", "Div", "ReduceSum"))
    assert _ops(model)["ReduceMean"] == 2


def test_mean_over_an_empty_axis_is_nan():
    """The mean of no elements is ``0 / 0 = NaN`` (what jax.jit gives), where onnxruntime's
    ``ReduceMean`` gives 0: no ``ReduceMean`` then (regression: the pattern fired)."""
    x = np.zeros((0, 3), np.float32)
    model = _convert(lambda v: jnp.mean(v, axis=0), x)
    assert "ReduceMean" not in _ops(model)
    (got,) = _run(model, x)
    assert got.shape == (3,) and np.isnan(got).all()


def test_average_pool_with_padding_counts_the_padding():
    x = RNG.normal(size=(2, 3, 8, 8)).astype(np.float32)

    def fn(v):  # a padded window sum divided by the full window size: count_include_pad=1
        return lax.reduce_window(v, 0.0, lax.add, (1, 1, 3, 3), (1, 1, 1, 1), "SAME") / 9.0

    model = _check(fn, x, fires="AveragePool", gone=("Conv", "Div"))
    (pool,) = [n for n in model.graph.node if n.op_type == "AveragePool"]
    assert {a.name: onnx.helper.get_attribute_value(a) for a in pool.attribute}["count_include_pad"] == 1


@pytest.mark.parametrize(
    ("kwargs", "fires"),
    [
        ({"kernel_size": 3, "stride": 2, "padding": 1}, True),
        ({"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}, True),
        ({"kernel_size": (3, 2), "stride": (1, 2), "padding": (1, 0), "count_include_pad": False}, True),
        # ceil mode: the last windows' divisors are clipped at the padded end, which
        # AveragePool's count_include_pad=1 does not do; the sum and division stay
        ({"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, False),
    ],
)
def test_torch_average_pools(kwargs, fires):
    model = torch.nn.AvgPool2d(**kwargs)
    x = torch.randn(2, 3, 9, 10)
    onnx_model = converter.from_torch(model, (x,)).to_onnx(opset=20)
    assert ("AveragePool" in _ops(onnx_model)) == fires, _ops(onnx_model)
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(_run(onnx_model, x.numpy())[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ids", [[[0, 3, 49], [7, 7, 1]], [0, 49, 7]], ids=["2d", "1d"])
def test_embedding_lookup_is_gather(ids):
    """ids of either rank (the batch dims of the gather's indices, before its index column)."""
    table = RNG.normal(size=(50, 8)).astype(np.float32)
    ids = np.array(ids, np.int64)
    with jax.enable_x64(True):
        _check(lambda t, i: t[i], table, ids, fires="Gather", gone=("GatherND",))


def test_large_constant_values_stay_computed(monkeypatch):
    simplify = importlib.import_module("converter.backends.onnx.simplify")  # the package exports the function

    def fn(s):
        i = lax.broadcasted_iota(jnp.int32, (8, 8), 0)
        j = lax.broadcasted_iota(jnp.int32, (8, 8), 1)
        return jnp.where(i >= j, s, -jnp.inf)

    s = RNG.normal(size=(2, 8, 8)).astype(np.float32)
    monkeypatch.setattr(simplify, "FOLD_EVALUATED", 8)  # the 8x8 mask is now "large"
    model = _check(fn, s, fires="GreaterOrEqual")
    assert "Range" in _ops(model)


def test_folded_constants_up_to_4096_bytes_are_stored():
    """A constant computed in the graph (``sin`` of an iota: no repeating core) is folded
    into an initializer up to ``FOLD_BYTES`` (4096 bytes: 1024 float32 values) and stays
    computed from one element more."""
    for n, folded in ((1024, True), (1025, False)):
        x = np.zeros(n, np.float32)
        model = _convert(lambda v: v + jnp.sin(jnp.arange(v.shape[0], dtype=jnp.float32)), x)
        assert ("Sin" not in _ops(model)) == folded, (n, _ops(model))


def test_unary_between_reshapes_that_cancel_runs_on_the_input():
    """``reshape(tanh(reshape(x)))`` back to ``x``'s shape: one Tanh of ``x``, no Reshape."""
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    model = _check(lambda x: jnp.tanh(x.reshape(6, 4)).reshape(2, 3, 4), x, fires="Tanh", gone=("Reshape",))
    (tanh,) = [n for n in model.graph.node if n.op_type == "Tanh"]
    assert tanh.input[0] == model.graph.input[0].name
    assert tanh.output[0] == model.graph.output[0].name


def test_unary_after_a_reshape_then_transposed_back_to_the_input_shape_stays():
    """``tanh(reshape(x)).T`` of ``x``'s shape: the outer op is a Transpose, not a Reshape, so
    the Tanh stays between the Reshape and the Transpose (moved onto ``x`` it gave
    ``tanh(x)``)."""
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    _check(lambda x: jnp.tanh(x.reshape(6, 4)).T, x, fires="Transpose")


def _near_misses(x, p):
    """Forms one step away from a fused pattern (each left as it is, or fused only in the
    part that matches): their numbers tell a wrongly fused form apart."""
    n = 16.0
    out = {}
    e = jnp.exp(x - jnp.max(x, -1, keepdims=True))
    out["sm_not_exp"] = x / jnp.sum(x, -1, keepdims=True)
    ex = jnp.exp(x)
    out["sm_exp_no_sub"] = ex / jnp.sum(ex, -1, keepdims=True)
    e0 = jnp.exp(x - jnp.max(x, 1, keepdims=True))
    out["sm_other_axis_max"] = e0 / jnp.sum(e0, -1, keepdims=True)
    out["sm_init1"] = e / lax.reduce(e, np.float32(1.0), lax.add, (2,))[..., None]
    sq = x[0, :4, :4]
    et = jnp.exp(sq - lax.broadcast_in_dim(jnp.max(sq, -1, keepdims=True), (4, 4), (1, 0)))
    out["sm_transposed_bcast"] = et / jnp.sum(et, -1, keepdims=True)
    d = x - jnp.sum(x, -1, keepdims=True) / n
    var = jnp.sum(d * d, -1, keepdims=True) / n
    out["ln_mean_by_mul"] = (x - jnp.sum(x, -1, keepdims=True) * (1 / n)) * lax.rsqrt(var + 1e-5)
    out["ln_mean_of_other"] = (x - jnp.sum(x * 2, -1, keepdims=True) / n) * lax.rsqrt(var + 1e-5)
    out["ln_abs_var"] = d * lax.rsqrt(jnp.sum(jnp.abs(d), -1, keepdims=True) / n + 1e-5)
    out["ln_no_eps"] = d * lax.rsqrt(var)
    out["ln_var_no_reduce"] = d * lax.rsqrt(d * d / n + 1e-5)
    out["ln_var_of_x"] = d * lax.rsqrt(jnp.sum(x * x, -1, keepdims=True) / n + 1e-5)
    d1 = x - jnp.sum(x, 1, keepdims=True) / 5.0
    out["ln_var_other_mean"] = d * lax.rsqrt(jnp.sum(d1 * d1, -1, keepdims=True) / n + 1e-5)
    out["ln_unbiased"] = d * lax.rsqrt(jnp.sum(d * d, -1, keepdims=True) / (n - 1) + 1e-5)
    d2 = x - jnp.sum(x, (1, 2), keepdims=True) / 80.0
    v2 = jnp.sum(d2 * d2, (1, 2), keepdims=True) / 80.0
    # normalized over the last two axes, scaled by a weight of the last axis only: only the
    # normalization is a LayerNormalization, the weight stays a Mul
    out["ln_weight_short"] = d2 * lax.rsqrt(v2 + 1e-5) * (jnp.arange(16, dtype=jnp.float32) / 16)
    out["gelu_sin"] = 0.5 * x * (1 + jnp.sin(x))
    cube = lax.pow(jnp.abs(x), np.float32(2.5))
    out["gelu_pow_2_5"] = 0.5 * x * (1 + jnp.tanh(0.7978845608 * (x + 0.044715 * cube)))
    out["mean_rank4"] = jnp.sum(x, -1)[..., None, None] / n
    win, st = (1, 1, 2, 2), (1, 1, 2, 2)
    out["pool_max"] = lax.reduce_window(p, -jnp.inf, lax.max, win, st, "VALID") / 4
    pads = ((0, 0), (0, 0), (2, 2), (0, 0))
    out["pool_pad_ge_win"] = lax.reduce_window(p, 0.0, lax.add, win, (1, 1, 1, 1), pads) / 4
    out["pool_div3"] = lax.reduce_window(p, 0.0, lax.add, win, st, "VALID") / 3
    rw = lax.reduce_window(p, 0.0, lax.add, win, st, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out["pool_pad_runtime_div"] = rw / (1 + jnp.abs(rw))
    return out


def test_near_misses_of_the_patterns_keep_their_numbers():
    """Against the plain form (``optimize=False``, no pattern), which the single-op rules'
    tests check against JAX (``jax.jit`` of these 23 outputs compiles for seconds)."""
    p = RNG.normal(size=(1, 2, 6, 6)).astype(np.float32)
    module = converter.from_stablehlo(jax.jit(_near_misses).lower(X, p).as_text())
    model = module.to_onnx(opset=20)
    ops = _ops(model)
    assert ops["Softmax"] == ops["Gelu"] == ops["AveragePool"] == 0 and ops["LayerNormalization"] == 1, ops
    plain = module.to_onnx(opset=20, optimize=False)
    assert "LayerNormalization" not in _ops(plain)
    names = sorted(jax.eval_shape(_near_misses, X, p))
    for name, got, want in zip(names, _run(model, X, p), _run(plain, X, p), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


def test_softmax_with_the_minus_inf_floor_second_and_gelu_with_a_power_cube():
    def softmax(x):
        e = jnp.exp(x - jnp.maximum(jnp.max(x, -1, keepdims=True), -jnp.inf))
        return e / jnp.sum(e, -1, keepdims=True)

    _check(softmax, X, fires="Softmax", gone=("Exp",))
    cube = lambda x: lax.pow(x, np.float32(3.0))  # noqa: E731
    gelu = lambda x: 0.5 * x * (1 + jnp.tanh(0.7978845608 * (x + 0.044715 * cube(x))))  # noqa: E731
    model = _check(gelu, X, fires="Gelu", gone=("Tanh", "Pow"))
    (node,) = [n for n in model.graph.node if n.op_type == "Gelu"]
    assert onnx.helper.get_attribute_value(node.attribute[0]) == b"tanh"


def test_a_window_sum_with_a_nonzero_init_is_not_an_average_pool():
    from converter.errors import OpConversionError

    p = X.reshape(1, 2, 5, 16)
    fn = lambda v: lax.reduce_window(v, np.float32(1.0), lax.add, (1, 1, 1, 2), (1, 1, 1, 2), "VALID") / 2  # noqa: E731
    with pytest.raises(OpConversionError, match="non-identity init value"):
        _convert(fn, p)


# --------------------------------------------------------------------------- simplify on hand-built graphs

_simplify = importlib.import_module("converter.backends.onnx.simplify")  # the package exports the function


def _node(op, inputs, outputs, **attrs):
    return onnx.helper.make_node(op, inputs, outputs, **attrs)


def _simplified(nodes, feeds, outputs, inits=None, params=(), param_data=None, run=True):
    """``nodes`` (graph outputs copied by ``Identity`` nodes into ``outputs``, of the first
    feed's type) and ``inits`` (name -> array) simplified by :func:`simplify` (opset 20);
    with ``run``, the numbers onnxruntime computes on ``feeds`` before and after must match.
    Returns the nodes and initializers after (dead ones pruned)."""
    from converter.backends.onnx.graph import GraphBuilder, live

    inits = inits or {}
    inputs = [
        onnx.helper.make_tensor_value_info(k, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for k, v in feeds.items()
    ]
    outs = [
        onnx.helper.make_tensor_value_info(o, inputs[0].type.tensor_type.elem_type, None) for o in outputs
    ]

    def execute(ns, ts):
        ns, ts = live(ns, ts, outputs)
        graph = onnx.helper.make_graph(ns, "g", inputs, outs, ts)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 20)], ir_version=10)
        return ns, ts, (_run(model, *feeds.values()) if run else [])

    tensors = [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()]
    g = GraphBuilder(itertools.count())
    g.reserved = {*feeds, *inits, *outputs}
    g.nodes = [onnx.NodeProto.FromString(n.SerializeToString()) for n in nodes]
    g.initializers = [onnx.TensorProto.FromString(t.SerializeToString()) for t in tensors]
    _, _, want = execute(nodes, tensors)
    _simplify.simplify(g, inputs, outputs, set(params), 20, param_data)
    ns, ts, got = execute(g.nodes, g.initializers)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    return ns, ts


def _conv_scaled(scale, dtype=np.float32, **kw):
    """``Conv(x, w) * scale`` (``w`` a parameter) through :func:`_simplified`."""
    w = RNG.normal(size=(2, 2, 1, 1)).astype(dtype)
    nodes = [
        _node("Conv", ["x", "w"], ["c"]),
        _node("Mul", ["c", "s"], ["m"]),
        _node("Identity", ["m"], ["y"]),
    ]
    feeds = {"x": RNG.normal(size=(1, 2, 3, 3)).astype(dtype)}
    inits = {"w": w, "s": np.asarray(scale, dtype), **kw.pop("inits", {})}
    params = kw.pop("params", {"w", "s"})
    return _simplified(nodes, feeds, ["y"], inits, params, param_data=lambda n: inits[n], **kw)


def test_conv_scale_of_a_constant_folds_into_the_weight():
    """The scale a plain initializer (not a parameter), the name ``folded:w`` already taken."""
    taken = {"folded:w": np.zeros(1, np.float32)}
    nodes, _ = _conv_scaled([[[[2.0]], [[3.0]]]], inits=taken, params={"w"})
    assert [n.op_type for n in nodes] == ["Conv"]
    assert nodes[0].input[1].startswith("folded_"), nodes[0].input


def test_conv_biases_of_a_shared_weight_get_their_own_names():
    inits = {
        "w": RNG.normal(size=(2, 2, 1, 1)).astype(np.float32),
        "b1": np.array([1.0, 2.0], np.float32).reshape(1, 2, 1, 1),
        "b2": np.array([3.0, 4.0], np.float32).reshape(1, 2, 1, 1),
    }
    nodes = [
        _node("Conv", ["x", "w"], ["c1"]),
        _node("Add", ["c1", "b1"], ["a1"]),
        _node("Conv", ["x", "w"], ["c2"]),
        _node("Add", ["c2", "b2"], ["a2"]),
        _node("Identity", ["a1"], ["y1"]),
        _node("Identity", ["a2"], ["y2"]),
    ]
    feeds = {"x": RNG.normal(size=(1, 2, 3, 3)).astype(np.float32)}
    nodes, ts = _simplified(nodes, feeds, ["y1", "y2"], inits, set(inits), param_data=inits.get)
    assert [n.op_type for n in nodes] == ["Conv", "Conv"]
    assert nodes[0].input[2] == "folded:w:bias" and nodes[1].input[2].startswith("folded_")


@pytest.mark.parametrize(
    "case, scale, dtype",
    [
        ("not finite", [[[[np.inf]], [[1.0]]]], np.float32),
        ("float64", [[[[2.0]], [[3.0]]]], np.float64),  # onnxruntime has no float64 Conv
        ("not per channel", np.ones((1, 1, 1, 1, 1)), np.float32),
    ],
)
def test_conv_scale_that_stays_a_mul(case, scale, dtype):
    nodes, _ = _conv_scaled(scale, dtype, run=dtype != np.float64)
    assert [n.op_type for n in nodes][:2] == ["Conv", "Mul"], case


def _conv_computed_scale(**kw):
    """``Conv(x, w) * -s`` (``w``, ``s`` parameters) through :func:`_simplified`."""
    inits = {
        "w": RNG.normal(size=(2, 2, 1, 1)).astype(np.float32),
        "s": np.full((1, 2, 1, 1), 2.0, np.float32),
    }
    nodes = [
        _node("Conv", ["x", "w"], ["c"]),
        _node("Neg", ["s"], ["ns"]),  # computed from a parameter: onnxruntime computes it
        _node("Mul", ["c", "ns"], ["m"]),
        _node("Identity", ["m"], ["y"]),
    ]
    feeds = {"x": RNG.normal(size=(1, 2, 3, 3)).astype(np.float32)}
    return _simplified(nodes, feeds, ["y"], inits, {"w", "s"}, param_data=inits.get, **kw)


def test_conv_scale_onnxruntime_refuses_stays_a_mul(monkeypatch):
    nodes, _ = _conv_computed_scale()
    assert [n.op_type for n in nodes] == ["Conv"]

    def refuse(model, outputs):
        raise RuntimeError("refused")

    monkeypatch.setattr(_simplify, "_run_constants", refuse)
    nodes, _ = _conv_computed_scale()
    assert [n.op_type for n in nodes] == ["Conv", "Neg", "Mul"]


def test_constant_folding_without_onnxruntime_raises(monkeypatch):
    from converter.errors import MissingDependencyError

    def missing():
        raise MissingDependencyError("onnxruntime", "onnx", "constant folding")

    monkeypatch.setattr(_simplify, "require_runtime", missing)
    nodes = [_node("Neg", ["c"], ["n"]), _node("Add", ["x", "n"], ["a"]), _node("Identity", ["a"], ["y"])]
    feeds = {"x": np.ones(3, np.float32)}
    with pytest.raises(MissingDependencyError, match="onnxruntime"):
        _simplified(nodes, feeds, ["y"], {"c": np.ones(3, np.float32)}, run=False)
    # the convolution epilogue's values (computed from parameters only: nothing folded before)
    with pytest.raises(MissingDependencyError, match="onnxruntime"):
        _conv_computed_scale(run=False)


def test_constant_of_unknown_shape_is_not_evaluated():
    """A constant value whose shape inference cannot bound stays computed."""
    nodes = [
        _node("Abs", ["three"], ["limit"]),
        _node("Range", ["one", "limit", "one"], ["shape"]),  # of unknown length: r of unknown rank
        _node("Reshape", ["c", "shape"], ["r"]),
        _node("Add", ["x", "r"], ["a"]),
        _node("Identity", ["a"], ["y"]),
    ]
    inits = {
        "one": np.array(1, np.int64),
        "three": np.array(3, np.int64),
        "c": np.arange(2, dtype=np.float32),
    }
    nodes, _ = _simplified(nodes, {"x": np.ones((1, 2), np.float32)}, ["y"], inits)
    assert [n.op_type for n in nodes] == ["Abs", "Range", "Reshape", "Add"]


def _reshaped_matmul(a, b, shape):
    """``MatMul(Reshape(a), Reshape(b))`` of feeds of shapes ``a``, ``b`` (their two leading
    dims merged), then ``Reshape`` to ``shape`` (``Relu`` for None), through :func:`_simplified`."""
    inits = {"sa": np.array([6, *a[2:]], np.int64), "sb": np.array([6, *b[2:]], np.int64)}
    nodes = [
        _node("Reshape", ["a", "sa"], ["ra"]),
        _node("Reshape", ["b", "sb"], ["rb"]),
        _node("MatMul", ["ra", "rb"], ["m"]),
    ]
    if shape is None:
        nodes.append(_node("Relu", ["m"], ["o"]))
    else:
        inits["so"] = np.array(shape, np.int64)
        nodes.append(_node("Reshape", ["m", "so"], ["o"]))
    nodes.append(_node("Identity", ["o"], ["y"]))
    feeds = {"a": RNG.normal(size=a).astype(np.float32), "b": RNG.normal(size=b).astype(np.float32)}
    nodes, _ = _simplified(nodes, feeds, ["y"], inits)
    return nodes


def test_batched_matmul_between_reshapes_merging_its_batch():
    """``Reshape(MatMul(Reshape(a), Reshape(b)))`` whose reshapes merge the batch dimensions
    (2, 3) into 6 and split them back is ``MatMul(a, b)`` (the same numbers: onnxruntime)."""
    nodes = _reshaped_matmul((2, 3, 4, 5), (2, 3, 5, 6), (2, 3, 4, 6))
    assert [n.op_type for n in nodes] == ["MatMul"] and list(nodes[0].input) == ["a", "b"]


@pytest.mark.parametrize(
    "case, a, b, shape, kept",
    [
        ("merged batch split otherwise", (2, 3, 4, 5), (2, 3, 5, 6), (3, 2, 4, 6), "Reshape"),
        ("not a reshape after", (2, 3, 4, 5), (2, 3, 5, 6), None, "Relu"),
    ],
)
def test_batched_matmul_near_misses(case, a, b, shape, kept):
    """``Reshape(MatMul(Reshape(a), Reshape(b)))`` whose reshapes do not only merge and split
    back the batch dimensions keeps its reshapes."""
    nodes = _reshaped_matmul(a, b, shape)
    ops = [n.op_type for n in nodes]
    assert ops.count("Reshape") >= 2 and ops[-1] == kept, (case, ops)
    (matmul,) = [n for n in nodes if n.op_type == "MatMul"]
    assert matmul.input[:] != ["a", "b"]


def test_transpose_without_a_permutation_is_not_composed():
    nodes = [
        _node("Transpose", ["x"], ["t"]),
        _node("Transpose", ["t"], ["u"], perm=[1, 0, 2]),
        _node("Identity", ["u"], ["y"]),
    ]
    nodes, _ = _simplified(nodes, {"x": RNG.normal(size=(2, 3, 4)).astype(np.float32)}, ["y"])
    assert [n.input[0] for n in nodes] == ["x", "t"]


@pytest.mark.parametrize("case", ["axes computed", "not a reshape after", "empty axes"])
def test_reduction_that_keeps_its_axes(case):
    """``Reduce*(keepdims=1)`` not followed by a ``Reshape`` dropping constant axes stays."""
    inits = {"axes": np.array([1], np.int64), "none": np.zeros(0, np.int64), "shape": np.array([2], np.int64)}
    axes = {"axes computed": "axes_n", "not a reshape after": "axes", "empty axes": "none"}[case]
    after = (
        _node("Relu", ["s"], ["o"])
        if case == "not a reshape after"
        else _node("Reshape", ["s", "shape"], ["o"])
    )
    if case == "empty axes":  # every axis reduced
        inits["shape"] = np.array([1], np.int64)
    nodes = [
        _node("Neg", ["ax"], ["axes_n"]),
        _node("ReduceSum", ["x", axes], ["s"], keepdims=1),
        after,
        _node("Identity", ["o"], ["y"]),
    ]
    feeds = {"x": RNG.normal(size=(2, 3)).astype(np.float32), "ax": np.array([-1], np.int64)}
    nodes, _ = _simplified(nodes, feeds, ["y"], inits)
    (reduce,) = [n for n in nodes if n.op_type == "ReduceSum"]
    assert onnx.helper.get_attribute_value(reduce.attribute[0]) == 1


def test_batched_matmul_between_reshapes_not_back():
    """The pass alone (no identity reshape dropped before): a ``MatMul`` not followed by a
    ``Reshape`` keeps its operands."""
    from converter.backends.onnx.graph import GraphBuilder

    g = GraphBuilder(itertools.count())
    g.nodes = [
        _node("Reshape", ["a", "sa"], ["ra"]),
        _node("Reshape", ["b", "sb"], ["rb"]),
        _node("MatMul", ["ra", "rb"], ["m"]),
        _node("Relu", ["m"], ["o"]),
    ]
    shapes = {
        "a": [2, 4, 5],
        "ra": [2, 4, 5],
        "b": [2, 5, 6],
        "rb": [2, 5, 6],
        "m": [2, 4, 6],
        "o": [2, 4, 6],
    }
    _simplify._batched_matmul(g, shapes, ["o"])
    assert list(g.nodes[2].input) == ["ra", "rb"] and list(g.nodes[3].output) == ["o"]


def test_random_ops_and_other_domains_are_neither_folded_nor_shared():
    """``Bernoulli`` of a constant draws anew on each run: it is not folded into one sample,
    and two of them are not one (common subexpressions); an ``ai.onnx.ml`` node on constants
    stays (folding runs the default domain), and the default-domain constants beside it
    still fold."""
    inits = {"p": np.full((4,), 0.5, np.float32), "c": np.arange(4, dtype=np.float32)}
    nodes = [
        _node("Bernoulli", ["p"], ["b1"]),
        _node("Bernoulli", ["p"], ["b2"]),
        _node("Add", ["b1", "b2"], ["s"]),
        _node("Binarizer", ["c"], ["bin"], domain="ai.onnx.ml", threshold=1.5),
        _node("Neg", ["c"], ["nc"]),
        _node("Add", ["x", "nc"], ["a"]),
        _node("Add", ["a", "s"], ["a2"]),
        _node("Identity", ["a2"], ["y"]),
        _node("Identity", ["bin"], ["z"]),
    ]
    nodes, ts = _simplified(nodes, {"x": np.ones(4, np.float32)}, ["y", "z"], inits, run=False)
    ops = collections.Counter(n.op_type for n in nodes)
    assert ops["Bernoulli"] == 2 and ops["Binarizer"] == 1 and ops["Neg"] == 0, ops
    (neg_c,) = [t for t in ts if t.name not in inits]  # -c, folded
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(neg_c), -inits["c"])
    # nor is a random per-channel scale folded into a convolution's weight
    params = {
        "w": RNG.normal(size=(2, 2, 1, 1)).astype(np.float32),
        "p": np.full((1, 2, 1, 1), 0.5, np.float32),
    }
    nodes = [
        _node("Conv", ["x", "w"], ["c"]),
        _node("Bernoulli", ["p"], ["r"]),
        _node("Mul", ["c", "r"], ["m"]),
        _node("Identity", ["m"], ["y"]),
    ]
    feeds = {"x": RNG.normal(size=(1, 2, 3, 3)).astype(np.float32)}
    nodes, _ = _simplified(nodes, feeds, ["y"], params, set(params), param_data=params.get, run=False)
    assert [n.op_type for n in nodes] == ["Conv", "Bernoulli", "Mul"]


def test_rewrites_keep_values_a_subgraph_reads():
    """The batched product, the unary op between reshapes and the squeezing reduction each
    rename the value they rewrite: one an ``If`` branch also reads (from the outer scope)
    keeps its producer, and the model's numbers stay onnxruntime's."""
    a, b, x = (RNG.normal(size=s).astype(np.float32) for s in ((2, 3, 4, 5), (2, 3, 5, 6), (2, 3)))
    inits = {
        "sa": np.array([6, 4, 5], np.int64),
        "sb": np.array([6, 5, 6], np.int64),
        "so": np.array([2, 3, 4, 6], np.int64),
        "flat": np.array([6], np.int64),
        "back": np.array([2, 3], np.int64),
        "axes": np.array([1], np.int64),
        "two": np.array([2], np.int64),
    }
    # the branch reads m (the product), u (the unary op's result), s (the kept-dims reduction)
    reads = [
        _node("ReduceSum", ["m"], ["t1"], keepdims=0),
        _node("ReduceSum", ["u"], ["t2"], keepdims=0),
        _node("ReduceSum", ["s"], ["t3"], keepdims=0),
        _node("Sum", ["t1", "t2", "t3"], ["t"]),
    ]
    out = onnx.helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [])
    then = onnx.helper.make_graph(reads, "then", [], [out])
    other = onnx.helper.make_graph([_node("Neg", ["t0"], ["t"])], "else", [], [out])
    nodes = [
        _node("Reshape", ["a", "sa"], ["ra"]),
        _node("Reshape", ["b", "sb"], ["rb"]),
        _node("MatMul", ["ra", "rb"], ["m"]),
        _node("Reshape", ["m", "so"], ["o"]),
        _node("Reshape", ["x", "flat"], ["rx"]),
        _node("Tanh", ["rx"], ["u"]),
        _node("Reshape", ["u", "back"], ["ub"]),
        _node("ReduceSum", ["x", "axes"], ["s"], keepdims=1),
        _node("Reshape", ["s", "two"], ["sq"]),
        _node("ReduceSum", ["o"], ["t0"], keepdims=0),
        _node("If", ["c"], ["z"], then_branch=then, else_branch=other),
        _node("Identity", ["o"], ["y1"]),
        _node("Identity", ["ub"], ["y2"]),
        _node("Identity", ["sq"], ["y3"]),
        _node("Identity", ["z"], ["y4"]),
    ]
    feeds = {"a": a, "b": b, "x": x, "c": np.array(True)}
    nodes, _ = _simplified(nodes, feeds, ["y1", "y2", "y3", "y4"], inits)
    ops = collections.Counter(n.op_type for n in nodes)
    assert ops["Reshape"] == 6 and ops["ReduceSum"] == 2, ops  # every rewrite skipped


def test_a_constant_shape_inference_rejects_stays_and_the_others_fold():
    """A constant value ONNX shape inference reports an error for (a ``Reshape`` of 6
    elements to ``[4, -1]``) gets no type: it is not evaluated and stays, while the
    constants beside it still fold (inference is not strict)."""
    inits = {"c": np.arange(6, dtype=np.float32), "bad": np.array([4, -1], np.int64)}
    nodes = [
        _node("Reshape", ["c", "bad"], ["r"]),
        _node("Neg", ["c"], ["nc"]),
        _node("Add", ["x", "nc"], ["a"]),
        _node("Identity", ["a"], ["y"]),
        _node("Identity", ["r"], ["z"]),
    ]
    nodes, ts = _simplified(nodes, {"x": np.ones(6, np.float32)}, ["y", "z"], inits, run=False)
    assert [n.op_type for n in nodes] == ["Reshape", "Add"]
    (neg_c,) = [t for t in ts if t.name not in inits]
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(neg_c), -inits["c"])


def test_subgraphs_read_the_folded_and_forwarded_values():
    """An ``If`` branch reading (from the outer scope) a folded constant and an
    ``Identity``'s copy reads the constant and the original after :func:`simplify`: the
    nodes that computed them are gone, and onnxruntime's numbers stay."""
    out = onnx.helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [3])
    then = onnx.helper.make_graph([_node("Sub", ["xi", "nc"], ["t"])], "then", [], [out])
    other = onnx.helper.make_graph([_node("Neg", ["xi"], ["t"])], "else", [], [out])
    nodes = [
        _node("Neg", ["c"], ["nc"]),
        _node("Identity", ["x"], ["xi"]),
        _node("If", ["b"], ["z"], then_branch=then, else_branch=other),
        _node("Add", ["z", "nc"], ["a"]),
        _node("Identity", ["a"], ["y"]),
    ]
    feeds = {"x": RNG.normal(size=3).astype(np.float32), "b": np.array(True)}
    nodes, _ = _simplified(nodes, feeds, ["y"], {"c": np.arange(3, dtype=np.float32)})
    assert [n.op_type for n in nodes] == ["If", "Add"]
    (branch,) = [a.g for a in nodes[0].attribute if a.name == "then_branch"]
    assert list(branch.node[0].input) == ["x", nodes[1].input[1]] and nodes[1].input[1] != "nc"


def test_transpose_chains_compose_and_cancel():
    """``Transpose(Transpose(x, p), q)`` is one ``Transpose(x, p∘q)`` (``[p[i] for i in q]``,
    ONNX's ``perm`` semantics: the numbers match onnxruntime's); a pair that composes to the
    identity leaves ``x`` itself."""
    nodes = [
        _node("Transpose", ["x"], ["t"], perm=[1, 2, 0]),
        _node("Transpose", ["t"], ["u"], perm=[0, 2, 1]),
        _node("Transpose", ["x"], ["v"], perm=[2, 0, 1]),
        _node("Transpose", ["v"], ["w"], perm=[1, 2, 0]),
        _node("Relu", ["w"], ["r"]),
        _node("Identity", ["u"], ["y1"]),
        _node("Identity", ["r"], ["y2"]),
    ]
    nodes, _ = _simplified(nodes, {"x": RNG.normal(size=(2, 3, 4)).astype(np.float32)}, ["y1", "y2"])
    assert [n.op_type for n in nodes] == ["Transpose", "Relu"]
    assert list(nodes[0].input) == ["x"] and list(nodes[0].attribute[0].ints) == [1, 0, 2]
    assert list(nodes[1].input) == ["x"]


def test_reshape_chains_merge_unless_the_outer_shape_copies_a_dimension():
    """``Reshape(Reshape(x, a), b)`` is ``Reshape(x, b)`` for a constant ``b`` without 0s; a
    0 in ``b`` copies the inner result's dimension (ONNX Reshape), so that chain stays; a
    Reshape to its input's own shape is its input (the numbers: onnxruntime's)."""
    inits = {
        "a": np.array([6, 4], np.int64),
        "b": np.array([3, 8], np.int64),
        "z": np.array([0, 2, 2], np.int64),
        "own": np.array([2, 3, 4], np.int64),
    }
    nodes = [
        _node("Reshape", ["x", "a"], ["r1"]),
        _node("Reshape", ["r1", "b"], ["r2"]),
        _node("Reshape", ["r1", "z"], ["r3"]),
        _node("Reshape", ["x", "own"], ["r4"]),
        _node("Neg", ["r2"], ["n"]),
        _node("Abs", ["r4"], ["m"]),
        _node("Identity", ["n"], ["y1"]),
        _node("Identity", ["r3"], ["y2"]),
        _node("Identity", ["m"], ["y3"]),
    ]
    feeds = {"x": RNG.normal(size=(2, 3, 4)).astype(np.float32)}
    nodes, _ = _simplified(nodes, feeds, ["y1", "y2", "y3"], inits)
    reshapes = {n.output[0]: list(n.input) for n in nodes if n.op_type == "Reshape"}
    assert sorted(reshapes.values()) == [["r1", "z"], ["x", "a"], ["x", "b"]]
    (neg,) = [n for n in nodes if n.op_type == "Neg"]
    (abs_,) = [n for n in nodes if n.op_type == "Abs"]
    assert reshapes[neg.input[0]] == ["x", "b"] and list(abs_.input) == ["x"]


def test_common_subexpressions_are_computed_once():
    """Two nodes of the same operator, inputs and attributes are one (their consumers read
    the first); other attributes, inputs or a random operator are not shared."""
    nodes = [
        _node("Neg", ["x"], ["a"]),
        _node("Neg", ["x"], ["b"]),
        _node("Softmax", ["x"], ["s0"], axis=0),
        _node("Softmax", ["x"], ["s1"], axis=1),
        _node("Abs", ["a"], ["c"]),
        _node("Abs", ["b"], ["d"]),
        _node("Sum", ["c", "d", "s0", "s1"], ["o"]),
        _node("Identity", ["o"], ["y"]),
    ]
    nodes, _ = _simplified(nodes, {"x": RNG.normal(size=(2, 3)).astype(np.float32)}, ["y"])
    ops = collections.Counter(n.op_type for n in nodes)
    assert ops == {"Neg": 1, "Abs": 1, "Softmax": 2, "Sum": 1}, ops
    (total,) = [n for n in nodes if n.op_type == "Sum"]
    assert total.input[0] == total.input[1]


def test_an_output_copied_twice_keeps_one_copy():
    """A value two graph outputs copy cannot be renamed to both: one ``Identity`` stays and
    both outputs have the value; a value copied once becomes its output."""
    nodes = [
        _node("Neg", ["x"], ["n"]),
        _node("Abs", ["x"], ["m"]),
        _node("Identity", ["n"], ["y1"]),
        _node("Identity", ["n"], ["y2"]),
        _node("Identity", ["m"], ["y3"]),
    ]
    nodes, _ = _simplified(nodes, {"x": RNG.normal(size=(2, 3)).astype(np.float32)}, ["y1", "y2", "y3"])
    ops = collections.Counter(n.op_type for n in nodes)
    assert ops == {"Neg": 1, "Abs": 1, "Identity": 2}, ops
    (abs_,) = [n for n in nodes if n.op_type == "Abs"]
    assert list(abs_.output) == ["y3"]


def test_a_kept_reduced_axis_is_dropped_only_into_a_reshape():
    """``ReduceSum(keepdims=1)`` followed by a ``Reshape`` dropping its axes becomes one
    ``ReduceSum(keepdims=0)``; followed by another op of the same output shape (``ReduceL1``
    over the kept axis: the absolute value) it stays as it is (onnxruntime: the same numbers)."""
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    inits = {"ax": np.array([1], np.int64), "shape": np.array([2, 4], np.int64)}
    for follower, want in (
        (_node("Reshape", ["r", "shape"], ["o"]), ["ReduceSum"]),
        (_node("ReduceL1", ["r", "ax"], ["o"], keepdims=0), ["ReduceSum", "ReduceL1"]),
    ):
        reduce = _node("ReduceSum", ["x", "ax"], ["r"], keepdims=1)
        nodes = [reduce, follower, _node("Identity", ["o"], ["y"])]
        got, _ = _simplified(nodes, {"x": x}, ["y"], inits)
        assert [n.op_type for n in got if n.op_type != "Identity"] == want
