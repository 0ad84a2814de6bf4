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
from converter.backends.onnx import DynamicShapeError
from converter.frontends.onnx import from_onnx
from jax import lax

import converter
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
        lax.conv_transpose(h[:, :, None], _KERNEL, (2,), "SAME", dimension_numbers=("NWC", "WIO", "NWC")),
    )


_KERNEL = np.arange(1, 7, dtype=np.float32).reshape(3, 1, 2) / 6  # interior padding, dynamic batch


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


def _scan_argmax(xs, h0):
    def body(h, x):
        h = jnp.tanh(h + x)
        return h, (h.sum(-1), h > 0)

    h, ys = lax.scan(body, h0, xs)  # stacks its outputs with dynamic_update_slice
    update = lax.dynamic_update_slice(xs, h0[None] * 2, (xs.shape[0] // 2, 0, 0))
    best = jnp.take_along_axis(xs, jnp.argmax(xs, axis=-1, keepdims=True), axis=-1)  # gather, batching dims
    return h, ys, jnp.argmax(xs, axis=0), jnp.argmin(xs, axis=-1), update, best


def test_scan_over_symbolic_length_and_argmax() -> None:
    """``lax.scan`` over a symbolic length (``dynamic_update_slice`` of dynamic shapes),
    ``argmax``/``argmin`` (a value/index reduce, an ONNX ``Loop``) and ``take_along_axis``
    (a gather with batching dimensions) on symbolic dimensions: onnxruntime matches
    ``jax.jit`` at two sizes of each."""
    s, n = jax.export.symbolic_shape("s, n")
    m = converter.from_jax(
        _scan_argmax, jax.ShapeDtypeStruct((s, n, 4), np.float32), jax.ShapeDtypeStruct((n, 4), np.float32)
    )
    model = m.to_onnx()
    onnx.checker.check_model(model, full_check=True)
    session = _session(model)
    for size_s, size_n in ((3, 2), (5, 1)):
        r = np.random.default_rng(size_s)
        xs, h0 = (
            r.normal(size=(size_s, size_n, 4)).astype(np.float32),
            r.normal(size=(size_n, 4)).astype(np.float32),
        )
        got = session.run(None, dict(zip((i.name for i in session.get_inputs()), (xs, h0), strict=True)))
        want = jax.tree_util.tree_leaves(jax.jit(_scan_argmax)(xs, h0))
        for g, e in zip(got, want, strict=True):
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


_PAD_RESHAPE_IOTA = """
func.func public @main(%x: tensor<?x3xf32>, %y: tensor<2x2xf32>, %lo: tensor<2xi32>, %hi: tensor<2xi32>,
    %s: tensor<2xi64>, %t: tensor<2xi64>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xi64>) {
  %fill = stablehlo.constant dense<-1.0> : tensor<f32>
  %interior = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %0 = stablehlo.dynamic_pad %y, %fill, %lo, %hi, %interior
    : (tensor<2x2xf32>, tensor<f32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<?x?xf32>
  %1 = stablehlo.dynamic_reshape %x, %s : (tensor<?x3xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  %2 = stablehlo.dynamic_iota %t, dim = 0 : (tensor<2xi64>) -> tensor<?x?xi64>
  return %0, %1, %2 : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xi64>
}
"""


def test_dynamic_pad_interior_reshape_with_zero_and_iota_along_dim_0() -> None:
    """StableHLO spec: dynamic_pad inserts ``interior`` fill values between neighbours (then
    the edges, a negative one cropping); dynamic_reshape's 0 is a size (``[2, 0]`` of an empty
    operand); dynamic_iota counts along ``iota_dimension`` 0 (int64: no cast)."""
    session = _session(converter.from_stablehlo(_PAD_RESHAPE_IOTA).to_onnx())
    x = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    y = np.array([[1, 2], [3, 4]], np.float32)
    lo, hi = np.array([1, -1], np.int32), np.array([0, 2], np.int32)
    t = np.array([3, 2], np.int64)
    names = [f"args[{i}]" for i in range(6)]
    padded, reshaped, iota = session.run(
        None, dict(zip(names, (x, y, lo, hi, np.array([3, 2], np.int64), t), strict=True))
    )
    spread = np.full((3, 4), -1, np.float32)
    spread[::2, ::3] = y  # interior padding 1 along dimension 0, 2 along dimension 1
    want = np.pad(spread[:, 1:], ((1, 0), (0, 2)), constant_values=-1)
    np.testing.assert_array_equal(padded, want)
    np.testing.assert_array_equal(reshaped, x.reshape(3, 2))
    np.testing.assert_array_equal(iota, [[0, 0], [1, 1], [2, 2]])
    assert iota.dtype == np.int64
    empty = np.zeros((0, 3), np.float32)
    feeds = dict(zip(names, (empty, y, lo, hi, np.array([2, 0], np.int64), t), strict=True))
    assert session.run(None, feeds)[1].shape == (2, 0)


def test_dynamic_pad_with_run_time_interior_padding_is_refused() -> None:
    text = """
func.func public @main(%x: tensor<?xf32>, %p: tensor<1xi32>) -> tensor<?xf32> {
  %fill = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.dynamic_pad %x, %fill, %p, %p, %p
    : (tensor<?xf32>, tensor<f32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
"""
    with pytest.raises(
        converter.ConversionError, match="dynamic_pad with interior padding not known at conversion"
    ):
        converter.from_stablehlo(text).to_onnx()


_RESHAPE_TO_STATIC = """
func.func @main(%x: tensor<?x4xf32>) -> tensor<8xf32> {
  %0 = stablehlo.reshape %x : (tensor<?x4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""


def test_reshape_of_a_dynamic_operand_to_a_static_shape() -> None:
    """``stablehlo.reshape`` of an operand of dynamic shape to a static result (the element
    counts agree at run time): converted, the Reshape reads only the result's shape."""
    model = converter.from_stablehlo(_RESHAPE_TO_STATIC).to_onnx()
    assert _dims(model.graph.output) == [[8]]
    assert not model.graph.input[0].type.tensor_type.shape.dim[0].HasField("dim_value")  # still dynamic
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(_session(model).run(None, {"args[0]": x})[0], x.reshape(8))


def test_op_without_dynamic_rule_names_it_and_specialize() -> None:
    """A ``select_and_scatter`` (max pooling's gradient) on a dynamic operand has no dynamic
    lowering: one error names it and the specialize call; the specialized module converts
    and matches."""
    (n,) = jax.export.symbolic_shape("n")

    def f(x):
        pooled = lambda x: jnp.sum(lax.reduce_window(x, -jnp.inf, lax.max, (1, 2), (1, 2), "VALID"))  # noqa: E731
        return jax.grad(pooled)(x)

    m = converter.from_jax(f, jax.ShapeDtypeStruct((n, 4), np.float32))
    with pytest.raises(
        DynamicShapeError,
        match=r"stablehlo\.select_and_scatter \(x1.*\n.*specialize\(\{'args\[0\]': \(1, 4\)\}\)",
    ):
        m.to_onnx()
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    model = m.specialize({"args[0]": (3, 4)}).to_onnx()
    np.testing.assert_allclose(_session(model).run(None, {"args[0]": x})[0], np.asarray(f(x)), rtol=1e-6)


def _scatters(x, i, v):
    return (
        x.at[i].set(v),  # the indexed dimension is dynamic, as the number of indices
        x.at[i + 2].add(v, mode="drop"),  # out of bounds past the run-time size: dropped
        jnp.zeros(4).at[jnp.clip(i, 0, 3)].add(1.0),  # a histogram of a dynamic number of values
        jnp.tanh(x).at[0].add(1.0),
        x.at[:, 0].set(2.0),  # the dynamic dimension taken whole (BART's shift_tokens_right)
        x.at[:, jnp.array([0, 2])].multiply(v[0, :2]),
    )


def test_dynamic_scatters() -> None:
    """Scatters into an operand of dynamic size and of a dynamic number of updates (Mixtral's
    routing: a histogram of expert ids, an inverse permutation): onnxruntime equals
    ``jax.jit`` at two sizes each."""
    n, k = jax.export.symbolic_shape("n, k")
    specs = [((n, 3), np.float32), ((k,), np.int32), ((k, 3), np.float32)]
    m = converter.from_jax(_scatters, *(jax.ShapeDtypeStruct(s, t) for s, t in specs))
    session = _session(m.to_onnx())
    for rows, count in ((2, 3), (5, 1)):
        rng = np.random.default_rng(rows)
        x = rng.standard_normal((rows, 3)).astype(np.float32)
        i = (rng.permutation(max(rows, count))[:count] - 1).astype(np.int32)
        v = rng.standard_normal((count, 3)).astype(np.float32)
        got = session.run(None, {"args[0]": x, "args[1]": i, "args[2]": v})
        for g, w in zip(got, jax.jit(_scatters)(x, i, v), strict=True):
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-6)


def _gathers(x, i):
    return (
        x[:, :, jnp.array([2, 0, 3, 3])],  # dynamic_gather, batch dimension after the offsets
        x[:, :, jnp.array([1])],  # the same, one index (Falcon's fused-QKV split)
        jnp.take_along_axis(x, i, axis=2),  # gather, batching dimensions of dynamic size
    )


def test_dynamic_gathers_of_rows_and_batching_dims() -> None:
    """Index-select along an axis of a dynamic operand (``dynamic_gather`` with a batch of
    indices: SegFormer's upsampling, Falcon's head split) and a batched gather whose indices
    have a dynamic batch (CLIP's pooled token): onnxruntime equals ``jax.jit`` at n = 1, 4,
    out-of-range indices clamped."""
    (n,) = jax.export.symbolic_shape("n")
    specs = (jax.ShapeDtypeStruct((n, 3, 4), np.float32), jax.ShapeDtypeStruct((n, 3, 2), np.int32))
    model = converter.from_jax(_gathers, *specs).to_onnx()
    session = _session(model)
    for k in (1, 4):
        rng = np.random.default_rng(k)
        x = rng.standard_normal((k, 3, 4)).astype(np.float32)
        i = rng.integers(-1, 6, (k, 3, 2)).astype(np.int32)
        got = session.run(None, {"args[0]": x, "args[1]": i})
        for g, w in zip(got, jax.jit(_gathers)(x, i), strict=True):
            np.testing.assert_array_equal(g, np.asarray(w))


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


def test_integer_convolution_with_dynamic_batch_and_size() -> None:
    """``quantize_dynamic``'s ConvInteger on a symbolic batch and image size: an int32
    convolution, which ONNX ``Conv`` cannot run, goes through im2col with run-time sizes;
    onnxruntime's ``ConvInteger`` on the source gives the same integers at two sizes."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.integers(-128, 128, (4, 3, 3, 2)).astype(np.int8), "w")
    zp = numpy_helper.from_array(np.array(121, np.uint8), "zp")
    node = helper.make_node(
        "ConvInteger", ["x", "w", "zp"], ["y"], pads=[1, 0, 1, 1], strides=[2, 1], dilations=[1, 2]
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, ["N", 4, None, None])],
        [w, zp],
    )
    source = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model = from_onnx(source).to_onnx()
    want, got = _session(source), _session(model)
    for n, h, wd in ((1, 5, 6), (3, 8, 7), (1, 4, 70)):  # 70: a last tap's slice runs to the end
        x = rng.integers(0, 256, (n, 3, h, wd)).astype(np.uint8)
        np.testing.assert_array_equal(got.run(None, {"x": x})[0], want.run(None, {"x": x})[0])


_IF_DYNAMIC = """
func.func public @main(%p: tensor<i1>, %x: tensor<?xf32>) -> tensor<?xf32> {
  %r = "stablehlo.if"(%p) ({
    %s = stablehlo.sine %x : tensor<?xf32>
    stablehlo.return %s : tensor<?xf32>
  }, {
    %c = stablehlo.cosine %x : tensor<?xf32>
    stablehlo.return %c : tensor<?xf32>
  }) : (tensor<i1>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""


def test_if_on_a_dynamic_size() -> None:
    """``stablehlo.if`` whose branches compute on a run-time size: an ONNX ``If``."""
    session = _session(converter.from_stablehlo(_IF_DYNAMIC).to_onnx())
    names = [i.name for i in session.get_inputs()]
    for n, pred in ((3, True), (5, False)):
        x = np.linspace(-1, 1, n, dtype=np.float32)
        (got,) = session.run(None, dict(zip(names, (np.array(pred), x), strict=True)))
        np.testing.assert_allclose(got, np.sin(x) if pred else np.cos(x), rtol=1e-6)


def _slice_at_two_indices(x, ij):
    dn = lax.GatherDimensionNumbers(offset_dims=(0, 1), collapsed_slice_dims=(1,), start_index_map=(1, 2))
    return lax.gather(x, ij, dn, (x.shape[0], 1, 2), mode=lax.GatherScatterMode.CLIP)


def test_dynamic_gather_of_one_slice_with_two_start_indices() -> None:
    """A ``dynamic_gather`` of one slice (the slice sizes hold ``n``) whose index vector
    starts two dimensions at once: onnxruntime equals ``jax.jit``, starts clamped."""
    (n,) = jax.export.symbolic_shape("n")
    specs = (jax.ShapeDtypeStruct((n, 5, 4), np.float32), jax.ShapeDtypeStruct((2,), np.int32))
    m = converter.from_jax(_slice_at_two_indices, *specs)
    assert "dynamic_gather" in m.text(debug_info=False)
    session = _session(m.to_onnx())
    x = np.random.default_rng(0).standard_normal((3, 5, 4)).astype(np.float32)
    for ij in ([2, 1], [4, 0], [7, 3]):
        ij = np.array(ij, np.int32)
        (got,) = session.run(None, {"args[0]": x, "args[1]": ij})
        np.testing.assert_array_equal(got, np.asarray(jax.jit(_slice_at_two_indices)(x, ij)))


# every elementwise rule declared dynamic, on operands of one dynamic dimension
_ELEMENTWISE_UNARY_F = (
    "abs exponential log logistic sqrt tanh sine cosine floor ceil round_nearest_even real imag tan negate "
    "sign rsqrt exponential_minus_one log_plus_one cbrt round_nearest_afz"
).split()
_ELEMENTWISE_BINARY_F = "subtract add multiply maximum minimum power atan2 divide remainder".split()
_ELEMENTWISE_BINARY_I = (
    "add divide remainder power and or xor shift_left shift_right_logical shift_right_arithmetic"
).split()
_ELEMENTWISE_UNARY_I = "not popcnt count_leading_zeros negate sign".split()


def _elementwise_module() -> tuple[str, list[str]]:
    """A module applying each elementwise op to ``tensor<?x...>`` operands; (text, result
    element types)."""
    f, i, b = "tensor<?xf32>", "tensor<?xi32>", "tensor<?xi1>"
    ops = [f"stablehlo.{o} %x : {f}" for o in _ELEMENTWISE_UNARY_F]
    ops += [f"chlo.{o} %x : {f} -> {f}" for o in ("tan", "atan", "asin", "acos", "square")]
    ops += [f"stablehlo.{o} %x, %y : {f}" for o in _ELEMENTWISE_BINARY_F]
    ops += [f"stablehlo.{o} %i, %j : {i}" for o in _ELEMENTWISE_BINARY_I]
    ops += [f"stablehlo.{o} %i : {i}" for o in _ELEMENTWISE_UNARY_I]
    ops += [
        f"chlo.is_inf %x : {f} -> {b}",
        f"stablehlo.is_finite %x : ({f}) -> {b}",
        f"stablehlo.convert %x : ({f}) -> {i}",
        f"stablehlo.compare LT, %x, %y : ({f}, {f}) -> {b}",
        f"stablehlo.select %p, %x, %y : {b}, {f}",
        f"stablehlo.clamp %y, %x, %x : {f}",
        f"stablehlo.bitcast_convert %i : ({i}) -> {f}",
        f"stablehlo.reduce_precision %x, format = e5m2 : {f}",
        f"stablehlo.and %p, %p : {b}",
    ]
    types = [o.rsplit(" ", 1)[-1] for o in ops]
    body = [f"  %r{k} = {o}" for k, o in enumerate(ops)]
    results = ", ".join(f"%r{k}" for k in range(len(ops)))
    text = "\n".join(
        [
            f"func.func @main(%x: {f}, %y: {f}, %i: {i}, %j: {i}, %p: {b}) -> ({', '.join(types)}) {{",
            *body,
            f"  return {results} : {', '.join(types)}",
            "}",
        ]
    )
    return text, [t[len("tensor<?x") : -1] for t in types]


def test_every_elementwise_op_converts_on_a_dynamic_dimension() -> None:
    """Each elementwise rule takes operands of a dynamic dimension (no DynamicShapeError):
    every result keeps the dimension dynamic and its element type. (Values: the static tests
    of test_elementwise.py; the simplifier is skipped to keep this cheap.)"""
    text, etypes = _elementwise_module()
    model = converter.from_stablehlo(text).to_onnx(optimize=False)
    kinds = {"f32": onnx.TensorProto.FLOAT, "i32": onnx.TensorProto.INT32, "i1": onnx.TensorProto.BOOL}
    outputs = [v.type.tensor_type for v in model.graph.output]
    assert [t.elem_type for t in outputs] == [kinds[t] for t in etypes]
    assert all(not t.shape.dim[0].HasField("dim_value") for t in outputs)
