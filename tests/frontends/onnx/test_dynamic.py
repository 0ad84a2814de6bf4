"""Graph inputs with symbolic dimensions (``dim_param``) stay dynamic: the signature records
the name, the StableHLO is shape-polymorphic (``jax.export`` symbolic shapes), the JAX
backend runs any batch size, the torch backend specializes only when given shapes.

Checked against onnxruntime at batch 1 and 5.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from converter.frontends.onnx import from_onnx
from onnx import TensorProto, helper, numpy_helper

import converter
from converter.errors import (
    ConversionError,
    DimensionsUnifiedWarning,
    OpConversionError,
    SignatureMismatchError,
)

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def _init(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32) * 0.3, name)


def _i64(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _cnn(opset: int, flatten: str) -> onnx.ModelProto:
    """Conv → Relu → MaxPool → {Reshape [0, -1] | Flatten | Shape-computed Reshape} → Gemm
    → Softmax, or AveragePool/GlobalAveragePool → MatMul → LogSoftmax, batch ``N``."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
    ]
    inits = [_init("w1", 4, 3, 3, 3), _init("b1", 4), _init("wg", 10, 64), _init("bg", 10)]
    if flatten == "reshape":
        nodes.append(helper.make_node("Reshape", ["p1", "shp"], ["f"], name="reshape"))
        inits.append(_i64("shp", [0, -1]))
    elif flatten == "flatten":
        nodes.append(helper.make_node("Flatten", ["p1"], ["f"], axis=1, name="flatten"))
    elif flatten == "shape":  # x.view(x.size(0), -1) as exporters write it
        nodes += [
            helper.make_node("Shape", ["p1"], ["s"], name="shape"),
            helper.make_node("Gather", ["s", "zero"], ["n"], axis=0, name="gather"),
            helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"], name="unsqueeze")
            if opset >= 13
            else helper.make_node("Unsqueeze", ["n"], ["n1"], axes=[0], name="unsqueeze"),
            helper.make_node("Concat", ["n1", "minus1"], ["shp"], axis=0, name="concat"),
            helper.make_node("Reshape", ["p1", "shp"], ["f"], name="reshape"),
        ]
        inits += [_i64("zero", 0), _i64("ax0", [0]), _i64("minus1", [-1])]
    if flatten == "pools":
        nodes += [
            helper.make_node("AveragePool", ["p1"], ["a1"], kernel_shape=[2, 2], strides=[2, 2], name="avg"),
            helper.make_node("GlobalAveragePool", ["a1"], ["gap"], name="gap"),
            helper.make_node("Flatten", ["gap"], ["f"], name="flatten"),
            helper.make_node("MatMul", ["f", "wm"], ["g"], name="matmul"),
            helper.make_node("LogSoftmax", ["g"], ["y"], axis=1, name="logsoftmax"),
        ]
        inits = inits[:2] + [_init("wm", 4, 10)]
    else:
        nodes += [
            helper.make_node("Gemm", ["f", "wg", "bg"], ["g"], transB=1, name="gemm"),
            helper.make_node("Softmax", ["g"], ["y"], axis=1, name="softmax"),
        ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", F, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", F, ["N", 10])],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


CASES = [(13, "reshape"), (13, "flatten"), (13, "shape"), (13, "pools"), (9, "flatten"), (9, "shape")]


@pytest.mark.parametrize(("opset", "flatten"), CASES, ids=[f"opset{o}-{f}" for o, f in CASES])
def test_batch_dimension_stays_dynamic(opset: int, flatten: str) -> None:
    model = _cnn(opset, flatten)
    m = from_onnx(model)
    assert m.signature.inputs[0].shape == ("N", 3, 8, 8)
    assert m.signature.outputs[0].shape == ("N", 10)
    assert "tensor<?x3x8x8xf32>" in m.text(debug_info=False)
    f = m.to_jax()
    session = ort.InferenceSession(model.SerializeToString())
    for n in (1, 5):
        x = np.random.default_rng(n).standard_normal((n, 3, 8, 8)).astype(np.float32)
        (y,) = f(x)
        (want,) = session.run(None, {"x": x})
        assert np.asarray(y).shape == (n, 10)
        np.testing.assert_allclose(np.asarray(y), want, rtol=1e-5, atol=1e-6)


def test_torch_backend_runs_any_batch_or_specializes_when_given_shapes() -> None:
    model = _cnn(13, "shape")
    m = from_onnx(model)
    session = ort.InferenceSession(model.SerializeToString())
    dynamic = m.to_torch()  # one graph per batch size, parameters shared
    for n in (1, 5):
        x = np.random.default_rng(n).standard_normal((n, 3, 8, 8)).astype(np.float32)
        with torch.no_grad():
            (y,) = dynamic(torch.from_numpy(x))
        (want,) = session.run(None, {"x": x})
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(SignatureMismatchError, match=r"args\[0\]: expected shape \['N', 3, 8, 8\]"):
        dynamic(torch.zeros(2, 4, 8, 8))
    x = np.random.default_rng(5).standard_normal((5, 3, 8, 8)).astype(np.float32)
    t = m.to_torch(input_shapes={"x": (5, 3, 8, 8)})
    with torch.no_grad():
        (y,) = t(torch.from_numpy(x))
    (want,) = session.run(None, {"x": x})
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)


def test_specialized_module_is_static() -> None:
    m = from_onnx(_cnn(13, "flatten")).specialize({"x": (2, 3, 8, 8)})
    assert m.signature.inputs[0].shape == (2, 3, 8, 8) and m.signature.outputs[0].shape == (2, 10)
    assert "?" not in m.text(debug_info=False) and "get_dimension_size" not in m.text()
    with pytest.raises(ConversionError, match="cannot take shape"):
        from_onnx(_cnn(13, "flatten")).specialize({"x": (2, 4, 8, 8)})


def test_dims_still_specialize() -> None:
    m = from_onnx(_cnn(13, "reshape"), dims={"N": 2})
    assert m.signature.inputs[0].shape == (2, 3, 8, 8) and m.meta["specialized_dims"] == {"N": 2}
    assert "?" not in m.text(debug_info=False)


def test_dims_with_an_unknown_name_raises() -> None:
    with pytest.raises(ConversionError, match=r"unknown symbolic dimension\(s\) \['B'\].*are \['N'\]"):
        from_onnx(_cnn(13, "flatten"), dims={"B": 2})
    with pytest.raises(ConversionError, match=r"non-negative integers, got \{'N': -1\}"):
        from_onnx(_cnn(13, "flatten"), dims={"N": -1})


def _two_inputs() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"], name="add")],
        "g",
        [helper.make_tensor_value_info(n, F, ["N", 2]) for n in "ab"],
        [helper.make_tensor_value_info("y", F, ["N", 2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_dims_take_sizes_of_integer_types_only_and_zero() -> None:
    """``dims`` sizes: 0 (an empty batch) and NumPy integers are sizes; ``True`` (an ``int``
    in Python, equal to 1) and ``2.0`` (equal to 2) are not."""
    m = from_onnx(_two_inputs(), dims={"N": 0})
    assert m.signature.inputs[0].shape == (0, 2)
    a = np.zeros((0, 2), np.float32)
    assert np.asarray(m.to_jax()(a, a)[0]).shape == (0, 2)
    assert from_onnx(_two_inputs(), dims={"N": np.int64(3)}).signature.inputs[0].shape == (3, 2)
    for bad in (True, 2.0):
        with pytest.raises(ConversionError, match="non-negative integers"):
            from_onnx(_two_inputs(), dims={"N": bad})


def test_one_name_is_one_size() -> None:
    f = from_onnx(_two_inputs()).to_jax()
    a = np.ones((3, 2), np.float32)
    np.testing.assert_array_equal(np.asarray(f(a, a)[0]), 2 * a)
    with pytest.raises(SignatureMismatchError, match="dimension 'N' is 3 in a but 4 in b"):
        f(a, np.ones((4, 2), np.float32))


def _mask_named_apart() -> onnx.ModelProto:
    """The dynamo exporter's GPT-2 mask: ``ids [s0, s1]``, ``mask [s2, s3]`` named apart,
    ``mask.view(ids.shape[0], -1)`` then added to ``ids`` (JAX cannot prove the view divides)."""
    nodes = [
        helper.make_node("Shape", ["ids"], ["s"], name="shape", end=1),
        helper.make_node("Concat", ["s", "minus1"], ["shp"], axis=0, name="concat"),
        helper.make_node("Reshape", ["mask", "shp"], ["m"], name="view"),
        helper.make_node("Add", ["ids", "m"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("ids", F, ["s0", "s1"]),
            helper.make_tensor_value_info("mask", F, ["s2", "s3"]),
        ],
        [helper.make_tensor_value_info("y", F, ["s0", "s1"])],
        initializer=[_i64("minus1", [-1])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_dimensions_the_graph_relates_become_one() -> None:
    """Dimensions named apart that the graph relates (a Reshape, a broadcast) are assumed
    equal with a warning, and the signature checks it at each call."""
    model = _mask_named_apart()
    with pytest.warns(DimensionsUnifiedWarning, match="s2 == s0, s3 == s1"):
        m = from_onnx(model)
    assert [s.shape for s in m.signature.inputs] == [("s0", "s1"), ("s0", "s1")]
    f = m.to_jax()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in ((1, 3), (4, 2)):
        ids, mask = RNG.standard_normal((2, *shape)).astype(np.float32)
        (want,) = session.run(None, {"ids": ids, "mask": mask})
        np.testing.assert_allclose(np.asarray(f(ids, mask)[0]), want, rtol=1e-6)
    with pytest.raises(SignatureMismatchError, match="'s0' is 2 in ids but 1 in mask"):
        f(np.zeros((2, 3), np.float32), np.zeros((1, 6), np.float32))


def _range_of_batch() -> onnx.ModelProto:
    """``Range(0, N)``: an output whose shape is a symbolic dimension's *value*."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0, name="gather"),
        helper.make_node("Range", ["zero", "n", "one"], ["y"], name="range"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, ["N"])],
        initializer=[_i64("zero", 0), _i64("one", 1)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_range_up_to_a_symbolic_dimension() -> None:
    f = from_onnx(_range_of_batch()).to_jax()
    for n in (3, 5):
        np.testing.assert_array_equal(np.asarray(f(np.zeros((n, 2), np.float32))[0]), np.arange(n))


def _tile_by_batch() -> onnx.ModelProto:
    """``Tile(x, [N, 1])``: repeats from a symbolic dimension's value."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0, name="gather"),
        helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"], name="unsqueeze"),
        helper.make_node("Concat", ["n1", "one1"], ["r"], axis=0, name="concat"),
        helper.make_node("Tile", ["x", "r"], ["y"], name="tile"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, ["N", 2])],
        [helper.make_tensor_value_info("y", F, [None, 2])],
        initializer=[_i64("zero", 0), _i64("zero1", [0]), _i64("one1", [1])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_rule_that_needs_a_static_dimension_names_the_node() -> None:
    with pytest.raises(OpConversionError, match=r"Tile-13.*'tile'.*symbolic dimensions.*dims="):
        from_onnx(_tile_by_batch())
    m = from_onnx(_tile_by_batch(), dims={"N": 3})
    (y,) = m.to_jax()(np.ones((3, 2), np.float32))
    assert np.asarray(y).shape == (9, 2)


def _exporter_shape_patterns() -> onnx.ModelProto:
    """What the torch exporters write for dynamic batch ``N`` and sequence ``S``: a position
    table sliced to ``[:, :S]`` by a Shape-computed end; ``expand`` through the TorchScript
    exporter's ``Where(Equal(shape, -1), 1, shape)``; ``Range(0, S)``; an LSTM's zero initial
    state ``ConstantOfShape([2, N, 3])`` (every input known, of symbolic shape); ``Flatten``
    at the rank."""
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["s"]),
        n("Gather", ["s", "i0"], ["b"], axis=0),
        n("Gather", ["s", "i1"], ["t"], axis=0),
        n("Unsqueeze", ["b", "a0"], ["b1"]),
        n("Unsqueeze", ["t", "a0"], ["t1"]),
        n("Slice", ["pos", "a0", "t1", "a1"], ["p"], name="slice"),
        n("Concat", ["b1", "m1", "m1"], ["shp0"], axis=0),
        n("Reshape", ["shp0", "m1"], ["shp"]),
        n("Shape", ["shp"], ["shp_s"]),
        n("ConstantOfShape", ["shp_s"], ["ones"], value=numpy_helper.from_array(np.array([1], np.int64))),
        n("Mul", ["ones", "i_1"], ["neg"]),
        n("Equal", ["shp", "neg"], ["eq"]),
        n("Where", ["eq", "ones", "shp"], ["w"]),
        n("Expand", ["p", "w"], ["pe"]),
        n("Range", ["i0", "t", "i1"], ["r"]),
        n("Cast", ["r"], ["rf"], to=F),
        n("Unsqueeze", ["rf", "a02"], ["rf3"]),
        n("Add", ["x", "pe"], ["y0"]),
        n("Add", ["y0", "rf3"], ["y"]),
        n("Concat", ["two", "b1", "three"], ["hshape"], axis=0),
        n("ConstantOfShape", ["hshape"], ["h0"], value=numpy_helper.from_array(np.array([0.5], np.float32))),
        n("Flatten", ["x"], ["flat"], axis=3),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, ["N", "S", 4])],
        [
            helper.make_tensor_value_info("y", F, ["N", "S", 4]),
            helper.make_tensor_value_info("h0", F, [2, "N", 3]),
            helper.make_tensor_value_info("flat", F, [None, 1]),
        ],
        initializer=[
            _init("pos", 1, 16, 4), _i64("i0", 0), _i64("i1", 1), _i64("i_1", -1), _i64("a0", [0]),
            _i64("a1", [1]), _i64("a02", [0, 2]), _i64("m1", [-1]), _i64("two", [2]), _i64("three", [3]),
        ],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_exporter_shape_patterns_stay_dynamic() -> None:
    model = _exporter_shape_patterns()
    m = from_onnx(model)
    assert m.signature.inputs[0].shape == ("N", "S", 4)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    f, t = m.to_jax(), m.to_torch()
    for shape in ((1, 5, 4), (3, 11, 4)):
        x = RNG.standard_normal(shape).astype(np.float32)
        expected = sess.run(None, {"x": x})
        with torch.no_grad():
            tout = [v.numpy() for v in t(torch.from_numpy(x))]
        for got in (f(x), tout):
            for g, e in zip(got, expected, strict=True):
                assert np.asarray(g).shape == e.shape
                np.testing.assert_allclose(np.asarray(g), e, rtol=1e-6, atol=1e-6)


def test_slice_past_a_static_table_fails_at_call() -> None:
    """``pos[:, :S]`` of a 16-row table: onnxruntime clamps to 16 rows (and the model's Add
    then fails); the converted module refuses the size instead of giving another shape."""
    f = from_onnx(_exporter_shape_patterns()).to_jax()
    with pytest.raises(SignatureMismatchError, match="bound S exceeds the size 16 of axis 1"):
        f(np.zeros((1, 17, 4), np.float32))


def test_converter_entry_point_and_save_round_trip(tmp_path) -> None:
    m = converter.from_onnx(_cnn(13, "flatten"))
    path = tmp_path / "m.shlo"
    m.save(path)
    loaded = converter.load(path)
    assert loaded.signature.inputs[0].shape == ("N", 3, 8, 8)
    x = np.random.default_rng(0).standard_normal((3, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(loaded.to_jax()(x)[0]), np.asarray(m.to_jax()(x)[0]), rtol=1e-6)


def test_symbolic_tracing_of_shape_computations() -> None:
    """``jax.export`` with symbolic shapes of a module that computes shapes (every ONNX
    module with a ``dim_param`` does: its dimension checks) runs the module as a
    ``jax.export.Exported`` (JAX refines it per concrete shape); the export runs at any batch."""
    import jax

    (n,) = jax.export.symbolic_shape("n")
    spec = jax.ShapeDtypeStruct((n, 2), np.float32)
    add = from_onnx(_two_inputs()).to_jax()
    exported = jax.export.export(jax.jit(add))(spec, spec)
    for rows in (3, 5):
        a = np.arange(2 * rows, dtype=np.float32).reshape(rows, 2)
        np.testing.assert_array_equal(np.asarray(exported.call(a, a)[0]), 2 * a)
    np.testing.assert_array_equal(np.asarray(jax.jit(add)(a, a)[0]), 2 * a)


def _shape_prefix_reshape(opset: int) -> onnx.ModelProto:
    """``x.reshape(*x.shape[:2], 2, 2)`` as exporters write it: Shape → Slice → Concat →
    Reshape, the Slice's bounds as attributes before opset 10 and as inputs from it on."""
    n = helper.make_node
    if opset < 10:
        head = n("Slice", ["s"], ["lead"], starts=[0], ends=[2], axes=[0])
    else:
        head = n("Slice", ["s", "zero", "two"], ["lead"])
    nodes = [
        n("Shape", ["x"], ["s"]),
        head,
        n("Concat", ["lead", "tail"], ["shp"], axis=0),
        n("Reshape", ["x", "shp"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, ["N", "S", 4])],
        [helper.make_tensor_value_info("y", F, ["N", "S", 2, 2])],
        initializer=[_i64("zero", [0]), _i64("two", [2]), _i64("tail", [2, 2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("opset", [9, 13])
def test_slice_of_a_symbolic_shape_reads_its_bounds_by_opset(opset: int) -> None:
    model = _shape_prefix_reshape(opset)
    f = from_onnx(model).to_jax()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in ((1, 3, 4), (2, 5, 4)):
        x = RNG.standard_normal(shape).astype(np.float32)
        (want,) = sess.run(None, {"x": x})
        (got,) = f(x)
        assert np.asarray(got).shape == (*shape[:2], 2, 2)
        np.testing.assert_array_equal(np.asarray(got), want)


def _shape_equalities() -> onnx.ModelProto:
    """``Equal`` on the shape ``[N, S]`` of ``x``: against ``[5, 5]``, ``[S, N]``, and
    ``[1, 1] == [N, S]`` (the constant first: ``1 - N`` is never positive but may be 0), true
    for some sizes; against itself plus one and against ``[0, -1]`` (false for every size),
    and against itself (true for every size)."""
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["s"]),
        n("Gather", ["s", "rev"], ["sr"], axis=0),
        n("Add", ["s", "one"], ["s1"]),
        n("Equal", ["s", "fives"], ["e0"]),
        n("Equal", ["s", "sr"], ["e1"]),
        n("Equal", ["s1", "s"], ["e2"]),
        n("Equal", ["s", "edge"], ["e3"]),
        n("Equal", ["s", "s"], ["e4"]),
        n("Equal", ["ones", "s"], ["e5"]),
        n("Concat", ["e0", "e1", "e2", "e3", "e4", "e5"], ["e"], axis=0),
        n("Cast", ["e"], ["y"], to=TensorProto.INT64),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, ["N", "S"])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [12])],
        initializer=[
            _i64("rev", [1, 0]),
            _i64("one", [1]),
            _i64("fives", [5, 5]),
            _i64("edge", [0, -1]),
            _i64("ones", [1, 1]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_equal_of_symbolic_sizes_is_decided_only_when_every_size_agrees() -> None:
    """``N == 5``, ``N == S`` and ``1 == N`` hold for some sizes only: computed at run time,
    not decided False at conversion (JAX's own ``==`` and ``!=`` of symbolic dimensions
    answer as if unequal when they cannot decide); ``N + 1 == N``, ``N == 0`` and ``N == -1``
    are False and ``N == N`` True for every size."""
    model = _shape_equalities()
    f = from_onnx(model).to_jax()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in ((5, 1), (1, 1)):
        x = np.zeros(shape, np.float32)
        (want,) = sess.run(None, {"x": x})
        np.testing.assert_array_equal(np.asarray(f(x)[0]), want)


def test_zero_equal_to_a_symbolic_size_is_decided_at_conversion() -> None:
    """``[0, 0] == [N, S]`` (the constant first: ``0 - N`` is at most -1 for every size) is
    False at conversion, so a shape computed from it is known: ``ConstantOfShape`` of it
    converts to one shape-polymorphic module (not one specialized on each input's sizes)."""
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["s"]),
        n("Equal", ["zeros", "s"], ["e"]),
        n("Cast", ["e"], ["c"], to=TensorProto.INT64),
        n("Add", ["c", "twos"], ["shape"]),
        n("ConstantOfShape", ["shape"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, ["N", "S"])],
        [helper.make_tensor_value_info("y", F, [2, 2])],
        initializer=[_i64("zeros", [0, 0]), _i64("twos", [2, 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m = from_onnx(model)
    assert isinstance(m, converter.Module)
    assert [d.shape for d in m.signature.inputs] == [("N", "S")]
    (y,) = m.to_jax()(np.ones((3, 1), np.float32))
    np.testing.assert_array_equal(np.asarray(y), np.zeros((2, 2), np.float32))


def test_shape_arithmetic_of_a_symbolic_size_is_the_ops_own() -> None:
    """``Reshape(x, [N * 4 - 1 + 1 ...])`` through Shape/Gather and Mul, Sub, Add, Div on the
    symbolic batch, and a Cast to int32 and back: each shape op computes its own arithmetic
    (a flattened ``(N, 4)`` is ``(N * 4 // 2, 2)``), for every batch, as onnxruntime, in one
    shape-polymorphic module (the int32 cast too is a shape op, not a value to specialize on)."""
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["s"]),
        n("Gather", ["s", "i0"], ["b"], axis=0),
        n("Mul", ["b", "four"], ["b4"]),
        n("Sub", ["b4", "one"], ["b3"]),
        n("Add", ["b3", "one"], ["b4again"]),
        n("Div", ["b4again", "two"], ["half"]),
        n("Cast", ["half"], ["half32"], to=TensorProto.INT32),
        n("Cast", ["half32"], ["half64"], to=TensorProto.INT64),
        n("Unsqueeze", ["half64", "a0"], ["h1"]),
        n("Concat", ["h1", "two1"], ["shape"], axis=0),
        n("Reshape", ["x", "shape"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, ["N", 4])],
        [helper.make_tensor_value_info("y", F, [None, 2])],
        initializer=[_i64("i0", 0), _i64("four", 4), _i64("one", 1), _i64("two", 2), _i64("a0", [0]),
                     _i64("two1", [2])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m = from_onnx(model)
    assert isinstance(m, converter.Module)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    f = m.to_jax()
    for batch in (1, 3):
        x = np.arange(batch * 4, dtype=np.float32).reshape(batch, 4)
        (want,) = sess.run(None, {"x": x})
        (got,) = f(x)
        assert want.shape == (batch * 2, 2)
        np.testing.assert_array_equal(np.asarray(got), want)


def test_reshape_of_a_shape_value_copies_a_zero_dimension() -> None:
    """A shape value ``Shape(x)`` (symbolic batch) reshaped by ``[0]`` (``allowzero`` 0: copy
    the input's dimension) stays ``[N, 4]`` and reshapes ``x`` to itself."""
    n = helper.make_node
    nodes = [n("Shape", ["x"], ["s"]), n("Reshape", ["s", "zero"], ["s2"]), n("Reshape", ["x", "s2"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, ["N", 4])],
        [helper.make_tensor_value_info("y", F, ["N", 4])],
        initializer=[_i64("zero", [0])],
    )
    m = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    (got,) = m.to_jax()(x)
    np.testing.assert_array_equal(np.asarray(got), x)


def _shape_value_ops(opset: int) -> onnx.ModelProto:
    """The other integer ops exporters compute shapes with, on the shape ``[N, S, 4]`` of
    ``x``: ``ReduceProd`` (all axes kept as ``[N*S]``; one axis of a ``[[N, S] * 3]`` matrix,
    dropped or kept), ``Max``/``Min`` of several inputs, ``Where`` of a constant condition,
    ``Squeeze``, ``Gather`` along axis 1, a reversing ``Slice`` (negative step), ``Reshape``
    of a shape value by ``-1``, ``Cast`` to int32 and back; their axes as inputs or as
    attributes by opset (``ReduceProd``'s from 18, ``Squeeze``'s from 13); from 18 an empty
    ``axes`` input, with ``noop_with_empty_axes`` (no reduction) and without (all axes)."""
    n = helper.make_node

    def attr_or_input(op: str, x: str, out: str, axes: str, since: int, **attrs):
        if opset >= since:
            return n(op, [x, axes], [out], **attrs)
        return n(op, [x], [out], axes=[{"ax0": 0, "ax1": 1, "axm1": -1}[axes]], **attrs)

    nodes = [
        n("Shape", ["x"], ["s"]),
        n("Slice", ["s", "zero", "two"], ["ns"]),  # [N, S]
        n("Cast", ["ns"], ["ns32"], to=TensorProto.INT32),
        n("Cast", ["ns32"], ["nsi"], to=TensorProto.INT64),
        n("ReduceProd", ["nsi"], ["p"], keepdims=1),  # [N*S]
        n("Concat", ["p", "four"], ["shp1"], axis=0),
        n("Reshape", ["x", "shp1"], ["y1"]),  # (N*S, 4)
        n("Concat", ["ns", "ns", "ns"], ["ns3"], axis=0),
        n("Reshape", ["ns3", "three_two"], ["m"]),  # [[N, S], [N, S], [N, S]]
        attr_or_input("ReduceProd", "m", "q", "ax0", 18, keepdims=0),  # [N^3, S^3]
        n("Max", ["q", "twos", "ones"], ["mx"]),
        n("Min", ["mx", "nines", "tens"], ["mn"]),
        n("Where", ["cond", "mn", "fives"], ["shp2"]),  # [min(max(N^3, 2), 9), 5]
        n("ConstantOfShape", ["shp2"], ["y2"], value=numpy_helper.from_array(np.array([1.5], np.float32))),
        n("Slice", ["s", "m1", "m4", "zero", "m1"], ["rev"]),  # [4, S, N]
        n("Slice", ["rev", "zero", "two"], ["fs"]),  # [4, S]
        n("Concat", ["ns", "fs"], ["ns_fs"], axis=0),
        n("Reshape", ["ns_fs", "two_two"], ["m2"]),  # [[N, S], [4, S]]
        attr_or_input("ReduceProd", "m2", "r", "ax1", 18, keepdims=1),  # [[N*S], [4*S]]
        attr_or_input("Squeeze", "r", "r1", "axm1", 13),  # [N*S, 4*S]
        n("Identity", ["r1"], ["r2"]),
        n("ConstantOfShape", ["r2"], ["y3"]),
        n("Gather", ["m2", "zero"], ["g"], axis=1),  # [[N], [4]]
        n("Reshape", ["g", "m1"], ["shp4"]),  # [N, 4]
        n("ConstantOfShape", ["shp4"], ["y4"]),
    ]
    if opset >= 18:  # empty axes: no reduction with noop_with_empty_axes, else all axes
        nodes += [
            n("ReduceProd", ["ns", "empty"], ["same"], noop_with_empty_axes=1),
            n("ReduceProd", ["ns", "empty"], ["all"]),
        ]
    else:
        nodes += [n("Identity", ["ns"], ["same"]), n("Identity", ["p"], ["all"])]
    nodes += [n("Concat", ["same", "all"], ["shp5"], axis=0), n("ConstantOfShape", ["shp5"], ["y5"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, ["N", "S", 4])],
        [helper.make_tensor_value_info(f"y{i}", F, [None, None]) for i in range(1, 5)]
        + [helper.make_tensor_value_info("y5", F, [None, None, None])],
        initializer=[
            numpy_helper.from_array(np.zeros(0, np.int64), "empty"),
            _i64("zero", [0]), _i64("two", [2]), _i64("four", [4]), _i64("three_two", [3, 2]),
            _i64("two_two", [2, 2]), _i64("ax0", [0]), _i64("ax1", [1]), _i64("axm1", [-1]),
            _i64("m1", [-1]), _i64("m4", [-4]), _i64("ones", [1, 1]), _i64("twos", [2, 2]),
            _i64("nines", [9, 9]), _i64("tens", [10, 10]), _i64("fives", [5, 5]),
            numpy_helper.from_array(np.array([True, False]), "cond"),
        ],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("opset", [13, 18])
def test_shape_value_ops_keep_the_module_dynamic(opset: int) -> None:
    """Each op evaluates on the symbolic shape value at conversion (the output shapes are
    expressions of ``N`` and ``S``: nothing computed at run time), as onnxruntime computes it,
    at sizes on both sides of ``Max``'s and ``Min``'s constants."""
    model = _shape_value_ops(opset)
    m = from_onnx(model)
    shapes = [("N*S", 4), ("min(max(N^3, 2), 9)", 5), ("N*S", "4*S"), ("N", 4), ("N", "S", "N*S")]
    assert [o.shape for o in m.signature.outputs] == shapes
    f = m.to_jax()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in ((1, 3, 4), (3, 2, 4)):
        x = RNG.standard_normal(shape).astype(np.float32)
        want = sess.run(None, {"x": x})
        for got, w in zip(f(x), want, strict=True):
            assert np.asarray(got).shape == w.shape
            np.testing.assert_array_equal(np.asarray(got), w)


def test_static_part_of_a_symbolic_shape_is_a_known_value() -> None:
    """``Shape(x)[1:2]`` of ``x: [N, 3]`` holds no symbolic dimension: it is the constant
    ``[3]``, so rules that need their input at conversion (``Tile``'s repeats, ``TopK``'s
    ``k``) take it, as onnxruntime computes them."""
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["s"]),
        n("Slice", ["s", "one", "two"], ["c"]),
        n("Concat", ["one", "c"], ["reps"], axis=0),
        n("Tile", ["x", "reps"], ["y"]),
        n("TopK", ["x", "c"], ["v", "i"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, ["N", 3])],
        [
            helper.make_tensor_value_info("y", F, [None, None]),
            helper.make_tensor_value_info("v", F, [None, None]),
        ],
        initializer=[_i64("one", [1]), _i64("two", [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m = from_onnx(model)
    assert [o.shape for o in m.signature.outputs] == [("N", 9), ("N", 3)]
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for got, want in zip(m.to_jax()(x), sess.run(None, {"x": x}), strict=True):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_shape_value_rules_directly_on_symbolic_dimensions() -> None:
    """``symbolic.evaluate`` on shape values holding ``N`` and ``S`` (no model): ReduceProd
    without axes and ``keepdims=0`` is the 0-d product (with the default ``keepdims`` a
    ``[1]``); a Cast to float is not a shape computation (None), to int32 or int64 is;
    Slice-9 with its bounds as attributes and no ``axes`` slices axis 0; a reversing Slice
    (step -1); Unsqueeze-11 with negative attribute axes (counted in the output rank),
    Squeeze-11 without axes and with a negative one; Gather of a negative index; ``N == 2``
    undecided at conversion (None: computed at run time), ``N == N + 1``, ``2N == N`` and
    ``0 == N`` False; a traced operand or a Slice with a symbolic bound is not evaluated here
    (None)."""
    import jax
    import jax.numpy as jnp
    from converter.frontends.onnx.symbolic import evaluate, shape_value

    n, s = jax.export.symbolic_shape("N, S")
    nsf = shape_value([n, s, 4])
    ns = shape_value([n, s])
    prod0 = evaluate("ReduceProd", 18, [ns, None], {"keepdims": 0})
    assert prod0.shape == () and prod0[()] == n * s
    prod1 = evaluate("ReduceProd", 13, [ns], {})
    assert prod1.shape == (1,) and prod1.tolist() == [n * s]
    assert evaluate("Cast", 13, [ns], {"to": TensorProto.FLOAT}) is None
    assert evaluate("Cast", 13, [ns], {"to": TensorProto.INT32}).tolist() == [n, s]
    assert evaluate("Cast", 13, [ns], {"to": TensorProto.INT64}).tolist() == [n, s]
    assert evaluate("Slice", 9, [nsf], {"starts": [1], "ends": [3]}).tolist() == [s, 4]
    stop = np.array([-(2**62)])
    assert evaluate("Slice", 13, [nsf, np.array([-1]), stop, None, np.array([-1])], {}).tolist() == [4, s, n]
    assert evaluate("Unsqueeze", 11, [np.array(n, dtype=object)], {"axes": [-1]}).tolist() == [n]
    assert evaluate("Unsqueeze", 11, [ns], {"axes": [-1, 0]}).shape == (1, 2, 1)  # -1 of rank 3
    squeezed = evaluate("Squeeze", 11, [shape_value([n]).reshape(1, 1)], {})
    assert squeezed.shape == () and squeezed[()] == n
    assert evaluate("Squeeze", 11, [ns.reshape(2, 1)], {"axes": [-1]}).tolist() == [n, s]
    assert evaluate("Gather", 13, [nsf, np.array(-2)], {})[()] == s
    assert evaluate("Equal", 13, [shape_value([n]), np.array([2])], {}) is None
    assert evaluate("Equal", 13, [shape_value([n]), shape_value([n + 1])], {}).tolist() == [False]
    assert evaluate("Equal", 13, [shape_value([2 * n]), shape_value([n])], {}).tolist() == [False]
    assert evaluate("Equal", 13, [np.array([0]), shape_value([n])], {}).tolist() == [False]
    assert evaluate("Add", 13, [ns, jnp.array([1, 1])], {}) is None
    assert evaluate("Slice", 13, [np.arange(5), np.array([0]), shape_value([n])], {}) is None
    assert evaluate("Slice", 13, [np.arange(5), shape_value([n]), np.array([5])], {}) is None


def test_more_shape_value_rules_directly_on_symbolic_dimensions() -> None:
    """``symbolic.evaluate`` on the rules the test above leaves out: ReduceProd along given
    axes (with and without ``keepdims``) and with empty axes (every axis; the input as it is
    under ``noop_with_empty_axes``); Unsqueeze-13/Squeeze-13 with their axes as inputs; Concat skipping
    an empty operand; Where on a known condition (None on a symbolic one); Max/Min of three
    operands (each one counts); Div (integer, floor: ``2N / 2 = N``); Reshape to a symbolic
    target is not evaluated here (None)."""
    import jax
    from converter.frontends.onnx.symbolic import evaluate, shape_value

    n, s = jax.export.symbolic_shape("N, S")
    ns = shape_value([n, s])
    grid = np.array([[n, 2], [s, 3]], dtype=object)
    assert evaluate("ReduceProd", 18, [grid, np.array([1])], {"keepdims": 0}).tolist() == [2 * n, 3 * s]
    assert evaluate("ReduceProd", 18, [grid, np.array([0])], {}).tolist() == [[n * s, 6]]
    noop = evaluate("ReduceProd", 18, [ns, np.zeros(0, np.int64)], {"noop_with_empty_axes": 1})
    assert noop.tolist() == [n, s]
    every = evaluate("ReduceProd", 18, [ns, np.zeros(0, np.int64)], {"keepdims": 0})  # empty: all axes
    assert every.shape == () and every[()] == n * s
    assert evaluate("Unsqueeze", 13, [ns, np.array([0])], {}).shape == (1, 2)
    assert evaluate("Unsqueeze", 13, [ns, np.array([1])], {}).tolist() == [[n], [s]]
    assert evaluate("Unsqueeze", 13, [ns, np.array([-1])], {}).shape == (2, 1)
    assert evaluate("Squeeze", 13, [ns.reshape(1, 2), np.array([0])], {}).tolist() == [n, s]
    cat = evaluate("Concat", 13, [ns, np.zeros(0, np.int64), shape_value([4])], {"axis": 0})
    assert cat.tolist() == [n, s, 4]
    assert evaluate("Where", 16, [np.array([True, False]), ns, np.array([7, 8])], {}).tolist() == [n, 8]
    assert evaluate("Where", 16, [shape_value([n]), ns, np.array([7, 8])], {}) is None
    a, b, c = np.array([2, 5, 1]), np.array([3, 1, 0]), np.array([1, 2, 9])
    assert evaluate("Max", 13, [a, b, c], {}).tolist() == [3, 5, 9]
    assert evaluate("Min", 13, [a, b, c], {}).tolist() == [1, 1, 0]
    assert evaluate("Div", 14, [shape_value([2 * n, 7]), np.array([2, 2])], {}).tolist() == [n, 3]
    assert evaluate("Reshape", 14, [np.array([1, 2]), shape_value([n])], {}) is None
