"""Shape-polymorphic modules through the ONNX backend: the model keeps the symbolic
dimensions (``dim_param``), computes shapes with ONNX ``Shape``/``Expand``/``Reshape``...,
passes ``onnx.checker`` (full check) and matches its source at several sizes in onnxruntime.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from jax import lax

import converter
from backends.onnx import DynamicShapeError
from frontends.onnx import from_onnx
from tests.frontends.onnx.test_dynamic import CASES, _cnn


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _dims(values) -> list[list]:
    return [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in values]


@pytest.mark.parametrize(("opset", "flatten"), CASES, ids=[f"opset{o}-{f}" for o, f in CASES])
def test_dim_param_model_round_trips_dynamic(opset: int, flatten: str) -> None:
    """ONNX (batch ``N``) → from_onnx → to_onnx: still batch ``N``, and onnxruntime gives
    the original model's numbers at batch 1 and 5."""
    source = _cnn(opset, flatten)
    model = from_onnx(source).to_onnx()
    onnx.checker.check_model(model, full_check=True)
    assert _dims(model.graph.input) == [["N", 3, 8, 8]] and _dims(model.graph.output) == [["N", 10]]
    ops = {n.op_type for n in model.graph.node}
    assert "Shape" in ops and "Expand" in ops
    want, got = _session(source), _session(model)
    for n in (1, 5):
        x = np.random.default_rng(n).standard_normal((n, 3, 8, 8)).astype(np.float32)
        (expected,) = want.run(None, {"x": x})
        (actual,) = got.run(None, {"x": x})
        assert actual.shape == (n, 10)
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dims", [None, {"N": 3}], ids=["dynamic", "static"])
def test_converted_model_converts_again(dims) -> None:
    """``from_onnx`` of a converted model names its parameters like the backend's generated
    values (``const_0``); converting it again must not reuse those names."""
    source = _cnn(13, "shape")  # random weights per call
    m = from_onnx(from_onnx(source, dims=dims).to_onnx())
    assert m.signature.inputs[0].shape == (3 if dims else "N", 3, 8, 8)
    model = m.to_onnx()
    x = np.random.default_rng(3).standard_normal((3, 3, 8, 8)).astype(np.float32)
    (expected,) = _session(source).run(None, {"x": x})
    np.testing.assert_allclose(_session(model).run(None, {"x": x})[0], expected, rtol=1e-5, atol=1e-6)


def _jax_ops(x, w):
    h = jnp.tanh(x @ w)
    return (
        jnp.concatenate([h[:, 1:], h[:, :1]], axis=1) - h.mean(0),  # dynamic_gather, dynamic_broadcast
        jnp.arange(x.shape[0], dtype=jnp.float32)[:, None] * h,  # dynamic_iota
        jnp.sort((h * 10).astype(jnp.int32), axis=0),  # TopK with a run-time k
        jnp.pad(h, ((1, 2), (0, 1))),
        h[1:-1],  # empty at n = 2
        h.reshape(-1),  # dynamic_reshape
        lax.dynamic_slice(h, (x.shape[0] - 1, 0), (1, 4)),  # clamped against the run-time size
        jnp.cumsum(h, axis=1),  # reduce_window with a dynamic carried dimension
        h[::2],  # gather indexing the dynamic dimension
    )


def test_jax_symbolic_module() -> None:
    """``from_jax`` with a symbolic batch ``n``: the outputs keep ``n``-expressions as
    ``dim_param``s, and onnxruntime matches ``jax.jit`` at n = 2 and 5."""
    (n,) = jax.export.symbolic_shape("n")
    w = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    m = converter.from_jax(_jax_ops, jax.ShapeDtypeStruct((n, 3), np.float32), w)
    text = m.text(debug_info=False)
    for op in ("dynamic_gather", "dynamic_iota", "dynamic_reshape", "shape_assertion"):
        assert op in text
    model = m.to_onnx()
    assert _dims(model.graph.input)[0] == ["n", 3]
    assert _dims(model.graph.output)[:2] == [["n", 4], ["n", 4]]
    session = _session(model)
    for k in (2, 5):
        x = np.random.default_rng(k).standard_normal((k, 3)).astype(np.float32)
        got = session.run(None, dict(zip((i.name for i in session.get_inputs()), (x, w), strict=True)))
        want = jax.jit(_jax_ops)(x, w)
        assert len(got) == len(want)
        for g, e in zip(got, want, strict=True):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, np.asarray(e), rtol=1e-5, atol=1e-6)


MLIR = """
func.func public @main(%x: tensor<?x4xf32>, %lo: tensor<2xi32>, %hi: tensor<2xi32>,
    %start: tensor<2xi64>, %limit: tensor<2xi64>) ->
    (tensor<?x?xf32>, tensor<?x?xf32>, tensor<4x?x2xf32>, tensor<?x3xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %no = stablehlo.constant dense<0> : tensor<2xi32>
  %step = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
  %0 = stablehlo.dynamic_pad %x, %zero, %lo, %hi, %no
    : (tensor<?x4xf32>, tensor<f32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<?x?xf32>
  %1 = stablehlo.real_dynamic_slice %0, %start, %limit, %step
    : (tensor<?x?xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<?x?xf32>
  %n = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x4xf32>) -> tensor<i32>
  %n1 = stablehlo.reshape %n : (tensor<i32>) -> tensor<1xi32>
  %c4 = stablehlo.constant dense<4> : tensor<1xi32>
  %c2 = stablehlo.constant dense<2> : tensor<1xi32>
  %s = stablehlo.concatenate %c4, %n1, %c2, dim = 0
    : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
  %2 = stablehlo.dynamic_broadcast_in_dim %x, %s, dims = [1, 0]
    : (tensor<?x4xf32>, tensor<3xi32>) -> tensor<4x?x2xf32>
  %c3 = stablehlo.constant dense<3> : tensor<1xi32>
  %s2 = stablehlo.concatenate %n1, %c3, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %3 = stablehlo.dynamic_iota %s2, dim = 1 : (tensor<2xi32>) -> tensor<?x3xf32>
  return %0, %1, %2, %3 : tensor<?x?xf32>, tensor<?x?xf32>, tensor<4x?x2xf32>, tensor<?x3xf32>
}
"""


def test_dynamic_pad_slice_broadcast_iota() -> None:
    """Shape ops jax.export writes less often, against NumPy (StableHLO spec semantics;
    a negative pad crops)."""
    model = converter.from_stablehlo(MLIR).to_onnx()
    session = _session(model)
    for n in (1, 3):
        x = np.arange(4 * n, dtype=np.float32).reshape(n, 4) + 1
        lo, hi = np.array([1, -1], np.int32), np.array([2, 1], np.int32)
        start, limit = np.array([1, 0], np.int64), np.array([n + 2, 4], np.int64)
        names = [f"args[{i}]" for i in range(5)]
        padded, sliced, bcast, iota = session.run(
            None, dict(zip(names, (x, lo, hi, start, limit), strict=True))
        )
        want = np.pad(x[:, 1:], ((1, 2), (0, 1)))
        np.testing.assert_array_equal(padded, want)
        np.testing.assert_array_equal(sliced, want[1 : n + 2, 0:4:2])
        np.testing.assert_array_equal(bcast, np.broadcast_to(x.T[:, :, None], (4, n, 2)))
        np.testing.assert_array_equal(iota, np.broadcast_to(np.arange(3, dtype=np.float32), (n, 3)))


def test_op_without_dynamic_rule_names_it_and_specialize() -> None:
    """A scatter on a dynamic operand has no dynamic lowering: one error names it and the
    specialize call; the specialized module converts and matches."""
    (n,) = jax.export.symbolic_shape("n")

    def f(x):
        return jnp.tanh(x).at[0].add(1.0)

    m = converter.from_jax(f, jax.ShapeDtypeStruct((n, 3), np.float32))
    with pytest.raises(
        DynamicShapeError, match=r"stablehlo\.scatter \(x1.*\n.*specialize\(\{'args\[0\]': \(1, 3\)\}\)"
    ):
        m.to_onnx()
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    model = m.specialize({"args[0]": (4, 3)}).to_onnx()
    np.testing.assert_allclose(_session(model).run(None, {"args[0]": x})[0], np.asarray(f(x)), rtol=1e-6)


def test_dynamic_update_slice_on_dynamic_shapes() -> None:
    """``lax.dynamic_update_slice`` of an update with a dynamic dimension into a dynamic
    buffer (what a scan over a symbolic length writes its outputs with: an exported LSTM),
    the start clamped as the spec says, against ``jax.jit`` at two sizes."""
    (n,) = jax.export.symbolic_shape("n")

    def f(buf, row, i):
        return jax.lax.dynamic_update_slice(buf, row, (i, jnp.int32(0)))

    m = converter.from_jax(
        f,
        jax.ShapeDtypeStruct((n, 3), np.float32),
        jax.ShapeDtypeStruct((1, 3), np.float32),
        jax.ShapeDtypeStruct((), np.int32),
    )
    session = _session(m.to_onnx())
    names = [f"args[{i}]" for i in range(3)]
    for size, i in ((2, 1), (5, 7)):  # 7: clamped to the last row
        row = np.arange(3, dtype=np.float32)[None] + 1
        args = (np.zeros((size, 3), np.float32), row, np.array(i, np.int32))
        got = session.run(None, dict(zip(names, args, strict=True)))[0]
        np.testing.assert_array_equal(got, np.asarray(jax.jit(f)(*args)))
