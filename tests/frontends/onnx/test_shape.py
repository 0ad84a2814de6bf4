"""Rules of frontends/onnx/ops/shape.py against onnxruntime."""

import os
import sys

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from converter.frontends.onnx import from_onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node, single_node_model  # noqa: E402

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_reshape_zero_copies_dim():
    check_node("Reshape", {"x": X, "s": np.array([0, -1], np.int64)}, static=("s",))


def test_slice_negative_steps():
    check_node(
        "Slice",
        {
            "x": X,
            "st": np.array([-1, 3], np.int64),
            "en": np.array([-100, 0], np.int64),
            "ax": np.array([0, 2], np.int64),
            "sp": np.array([-1, -2], np.int64),
        },
        static=("st", "en", "ax", "sp"),
    )


def test_pad_reflect_on_axes():
    check_node(
        "Pad",
        {"x": X, "p": np.array([1, 2, 1, 0], np.int64), "v": np.float32(0), "a": np.array([1, 2], np.int64)},
        {"mode": "reflect"},
        static=("p", "v", "a"),
    )


def test_split_uneven_num_outputs():
    check_node(
        "Split",
        {"x": np.arange(30, dtype=np.float32).reshape(2, 3, 5)},
        {"axis": 2, "num_outputs": 3},
        n_out=3,
    )


def test_split_num_outputs_that_parts_cannot_fill_is_refused():
    """5 in parts of ceil(5 / 4) = 2 fills three outputs, not four: the reference's last size
    is negative and onnxruntime refuses the node; the conversion names it."""
    from converter.errors import ConversionError

    node = helper.make_node("Split", ["x"], ["a", "b", "c", "d"], axis=0, num_outputs=4)
    outs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, ["n"]) for n in "abcd"]
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [5])], outs
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ConversionError, match=r"Split of a dimension of 5 into 4 outputs"):
        from_onnx(model)


def test_flatten_at_the_rank():
    """``axis == rank`` is in range and gives ``(size, 1)`` (was ``axis % rank``: ``(1, size)``)."""
    check_node("Flatten", {"x": X}, {"axis": 3})
    check_node("Flatten", {"x": X}, {"axis": -3})


def test_expand_and_tile():
    check_node("Expand", {"x": X[:, :1], "s": np.array([4, 1, 1, 1], np.int64)}, static=("s",))
    check_node("Tile", {"x": X, "r": np.array([1, 2, 1], np.int64)}, static=("r",))


def test_expand_symbolic_dim_to_higher_rank():
    """Expand of an input with a symbolic dim (``N``) to a shape of higher rank: the input's
    dims align with the shape's trailing ones (numpy broadcasting), checked at N = 1 and 5."""
    graph = helper.make_graph(
        [helper.make_node("Expand", ["x", "s"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 1])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 1, "N", 3])],
        initializer=[numpy_helper.from_array(np.array([2, 1, 1, 3], np.int64), "s")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    fn = from_onnx(model).to_jax()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 5):
        x = np.arange(n, dtype=np.float32).reshape(n, 1) + 0.5
        (want,) = sess.run(None, {"x": x})
        (got,) = fn(x)
        assert want.shape == (2, 1, n, 3)
        np.testing.assert_array_equal(np.asarray(got), want)


def test_old_opset_attribute_forms():
    """Squeeze-1, Split-2, Slice-1 and Pad-2: axes, split sizes, bounds and pads as attributes."""
    check_node("Squeeze", {"x": X.reshape(2, 1, 3, 4)}, {"axes": [1]}, opset=11)
    check_node("Squeeze", {"x": X.reshape(2, 1, 3, 4, 1)}, {"axes": [-1]}, opset=11)  # keeps dim 1
    check_node("Squeeze", {"x": X.reshape(2, 1, 3, 4, 1)}, {}, opset=11)  # every size-1 dim
    check_node("Split", {"x": X}, {"axis": 2, "split": [1, 3]}, n_out=2, opset=11)
    check_node("Slice", {"x": X}, {"starts": [1, -3], "ends": [2, 100], "axes": [0, 2]}, opset=9)
    check_node("Pad", {"x": X}, {"pads": [0, 1, 2, 0, 0, 1], "mode": "reflect"}, opset=10)
    check_node("Pad", {"x": X}, {"pads": [1, 0, 0, 0, 2, 0], "value": 1.5}, opset=10)


@pytest.mark.parametrize(("dtype", "stash_type"), [("float16", None), ("bfloat16", 11)])
def test_range_27_computes_half_floats_in_its_stash_type(dtype, stash_type):
    """Range-27: float16/bfloat16 bounds are computed in ``stash_type`` (FLOAT by default) and
    each element rounded once (the onnx reference); in the half type, ``1.1 + 3 * 0.7`` and
    ``1.1 + 6 * 0.7`` round twice to other values in both types."""
    from onnx.reference import ReferenceEvaluator

    dt = np.dtype(dtype) if dtype == "float16" else np.dtype(ml_dtypes.bfloat16)
    bounds = {n: np.array(v, dt) for n, v in zip("sld", (1.1, 6.7, 0.7), strict=True)}
    attrs = {} if stash_type is None else {"stash_type": stash_type}
    model = single_node_model("Range", bounds, attrs, opset=27, static=tuple(bounds))
    (want,) = ReferenceEvaluator(model).run(None, {})
    (got,) = from_onnx(model).to_jax()()
    assert np.asarray(got).dtype == want.dtype == dt and want.shape == (8,)
    np.testing.assert_array_equal(np.asarray(got).astype(np.float32), want.astype(np.float32))


def test_center_crop_pad_crops_and_pads():
    """CenterCropPad-18 to a shape smaller in one axis (cropped) and larger in another (padded
    with zeros, the odd extra on the end)."""
    x = np.arange(2 * 5 * 4, dtype=np.float32).reshape(2, 5, 4)
    check_node(
        "CenterCropPad", {"x": x, "shape": np.array([3, 7], np.int64)}, {"axes": [1, 2]}, static=("shape",)
    )


def test_depth_to_space_with_blocksize_3():
    """DepthToSpace in both modes with a block of 3 (the output depth is ``C // 9``)."""
    x = np.arange(1 * 18 * 2 * 3, dtype=np.float32).reshape(1, 18, 2, 3)
    for mode in ("DCR", "CRD"):
        check_node("DepthToSpace", {"x": x}, {"blocksize": 3, "mode": mode})


def test_dropout_in_inference_mode_with_and_without_its_mask():
    """Dropout-13 in inference mode: the input, and with a second output the mask, all true."""
    check_node("Dropout", {"x": X}, n_out=2, opset=13)
    check_node("Dropout", {"x": X}, opset=13)


def test_constant_value_float_and_sparse_value():
    """``sparse_value`` with linear indices (``[NNZ]``) and with coordinates (``[NNZ, rank]``),
    the other elements 0 (the ONNX SparseTensorProto)."""
    values = numpy_helper.from_array(np.array([5.0, -2.0], np.float32), "v")
    linear = helper.make_sparse_tensor(
        values, numpy_helper.from_array(np.array([1, 4], np.int64), "i"), [2, 3]
    )
    coords = helper.make_sparse_tensor(
        values, numpy_helper.from_array(np.array([[0, 1], [1, 1]], np.int64), "i"), [2, 3]
    )
    nodes = [
        helper.make_node("Constant", [], ["f"], value_float=1.5),
        helper.make_node("Constant", [], ["s"], sparse_value=linear),
        helper.make_node("Constant", [], ["t"], sparse_value=coords),
        helper.make_node("Add", ["x", "f"], ["y"]),
        helper.make_node("Add", ["x", "s"], ["z"]),
        helper.make_node("Add", ["x", "t"], ["w"]),
    ]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    vi = lambda n: helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2, 3])  # noqa: E731
    graph = helper.make_graph(nodes, "g", [vi("x")], [vi("y"), vi("z"), vi("w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    y, z, w = from_onnx(model).to_jax()(x)  # onnxruntime does not run a sparse Constant here
    sparse = np.array([[0, 5, 0], [0, -2, 0]], np.float32)
    np.testing.assert_array_equal(np.asarray(y), x + 1.5)
    np.testing.assert_array_equal(np.asarray(z), x + sparse)
    np.testing.assert_array_equal(np.asarray(w), x + sparse)


def test_constant_of_strings_is_refused_by_name():
    import pytest

    from converter.errors import ConversionError

    node = helper.make_node("Constant", [], ["c"], value_strings=["a", "b"])
    graph = helper.make_graph(
        [node], "g", [], [helper.make_tensor_value_info("c", onnx.TensorProto.STRING, [2])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ConversionError, match="Constant with value_strings"):
        from_onnx(model).to_jax()()


def test_pad_negative_pads_crop():
    """Pad-18 with negative pads removes elements (the operator page): on one axis at the
    start, on another at the end, while the opposite side pads; constant and edge modes."""
    from onnx_oracle import check_nodes

    pads = np.array([0, -1, 2, -1, 1, -2], np.int64)  # begins of axes 0, 1, 2, then ends
    nodes = [
        helper.make_node("Pad", ["x", "p", "v"], ["const"], mode="constant"),
        helper.make_node("Pad", ["x", "p"], ["edge"], mode="edge"),
    ]
    check_nodes(nodes, {"x": X, "p": pads, "v": np.float32(-3)}, static=("p", "v"))


def test_old_opset_even_split_and_dropout_mask():
    """Split-11 without ``split`` divides the axis evenly among its outputs; Dropout-10 in
    inference gives the input and, as a second output, a mask of all true (the ONNX
    reference's; onnxruntime 1.32 gives all false for this opset, all true from Dropout-12)."""
    from onnx.reference import ReferenceEvaluator

    check_node(
        "Split", {"x": np.arange(36, dtype=np.float32).reshape(2, 6, 3)}, {"axis": 1}, n_out=3, opset=11
    )
    model = single_node_model("Dropout", {"x": X}, n_out=2, opset=10)
    want_y, want_mask = ReferenceEvaluator(model).run(None, {"x": X})
    y, mask = from_onnx(model).to_jax()(X)
    np.testing.assert_array_equal(np.asarray(y), want_y)
    assert np.asarray(mask).dtype == want_mask.dtype == np.bool_ and np.asarray(mask).shape == X.shape
    np.testing.assert_array_equal(np.asarray(mask), want_mask)


def test_constant_value_floats_and_value_ints():
    """Constant's list attributes: ``value_floats`` a float32 vector, ``value_ints`` and
    ``value_int`` int64 (the operator page's types), as onnxruntime gives them."""
    from onnx_oracle import check_nodes

    nodes = [
        helper.make_node("Constant", [], ["fs"], value_floats=[1.5, -2.25]),
        helper.make_node("Constant", [], ["is_"], value_ints=[3, -4, 5]),
        helper.make_node("Constant", [], ["i"], value_int=7),
        helper.make_node("Add", ["x", "fs"], ["y"]),
    ]
    check_nodes(nodes, {"x": np.array([0.5, 1.0], np.float32)}, opset=18)


def test_slice_negative_step_stops_before_index_zero():
    """A reversing Slice ending at 0 stops before element 0 (``x[3:0:-1]``: 3, 2, 1); one
    ending below the start of the axis takes element 0 too (``x[2::-1]``)."""
    from onnx_oracle import check_nodes

    nodes = [
        helper.make_node("Slice", ["x", "s3", "e0", "a2", "m1"], ["to_zero"]),
        helper.make_node("Slice", ["x", "s2", "em", "a2", "m1"], ["past_zero"]),
    ]
    consts = {"s3": [3], "e0": [0], "a2": [2], "m1": [-1], "s2": [2], "em": [-100]}
    inputs = {"x": X, **{k: np.array(v, np.int64) for k, v in consts.items()}}
    check_nodes(nodes, inputs, static=tuple(consts))


def test_shape_slices_size_and_flatten_at_axis_zero():
    """Shape-15 with and without ``start``/``end`` (``end`` negative counts from the rank),
    Size (an int64 scalar), Flatten at ``axis=0`` (``(1, size)``) and at ``-1``."""
    from onnx_oracle import check_nodes

    nodes = [
        helper.make_node("Shape", ["x"], ["all"]),
        helper.make_node("Shape", ["x"], ["mid"], start=1, end=-1),
        helper.make_node("Shape", ["x"], ["tail"], start=-2),
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Flatten", ["x"], ["f0"], axis=0),
        helper.make_node("Flatten", ["x"], ["fm1"], axis=-1),
    ]
    check_nodes(nodes, {"x": X})


def test_squeeze_and_unsqueeze_with_negative_axes():
    """Unsqueeze-13 with ``axes`` counted from the end of the *output* rank (-1 of a rank-2
    input inserts at position 3), in any order; Squeeze-13 with a negative axis and with no
    ``axes`` (every 1 removed)."""
    from onnx_oracle import check_nodes

    x = X.reshape(2, 1, 12, 1)
    nodes = [
        helper.make_node("Unsqueeze", ["x", "u"], ["up"]),
        helper.make_node("Squeeze", ["x", "sq"], ["down"]),
        helper.make_node("Squeeze", ["x"], ["all"]),
    ]
    check_nodes(
        nodes, {"x": x, "u": np.array([-1, 0], np.int64), "sq": np.array([-1], np.int64)}, static=("u", "sq")
    )


def test_range_empty_and_negative_delta():
    """Range with the limit behind the start is empty (``max(ceil(...), 0)`` elements);
    with a negative delta it counts down (``ceil((1 - 6) / -2) = 3``: 6, 4, 2); float
    bounds give ``ceil`` elements too (``ceil(2.5 / 1) = 3``)."""
    from onnx_oracle import check_nodes

    nodes = [
        helper.make_node("Range", ["i5", "i1", "p1"], ["empty"]),
        helper.make_node("Range", ["i6", "i1", "m2"], ["down"]),
        helper.make_node("Range", ["f0", "f25", "f1"], ["floats"]),
    ]
    ints = {"i5": 5, "i1": 1, "p1": 1, "i6": 6, "m2": -2}
    inputs = {k: np.array(v, np.int64) for k, v in ints.items()}
    inputs.update({"f0": np.float32(0.0), "f25": np.float32(2.5), "f1": np.float32(1.0)})
    inputs = {k: np.asarray(v) for k, v in inputs.items()}
    check_nodes(nodes, inputs, static=tuple(inputs))


def test_one_hot_negative_zero_and_out_of_range_indices():
    """OneHot-11: index 0 is on at 0, a negative index counts from ``depth`` (-1 is the
    last), an index at or past ``depth`` (or below ``-depth``) is a row all off; along
    ``axis=0`` and the default last axis."""
    from onnx_oracle import check_nodes

    idx = np.array([[0, -1, 2], [4, -5, 3]], np.int64)
    nodes = [
        helper.make_node("OneHot", ["i", "d", "v"], ["last"]),
        helper.make_node("OneHot", ["i", "d", "v"], ["first"], axis=0),
    ]
    inputs = {"i": idx, "d": np.array(4, np.int64), "v": np.array([-1.0, 3.0], np.float32)}
    check_nodes(nodes, inputs, static=("d", "v"), opset=11)


def test_eye_like_trilu_and_constant_of_shape_attributes():
    """EyeLike on the diagonal (``k`` defaults to 0), below and above it (``k``) of a
    non-square input, with a ``dtype`` attribute; Trilu lower with ``k = 1`` and upper without
    ``k``; ConstantOfShape without ``value`` (float32 zeros) and with an int64 ``value``."""
    from onnx_oracle import check_nodes

    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    nodes = [
        helper.make_node("EyeLike", ["x"], ["diag"]),
        helper.make_node("EyeLike", ["x"], ["below"], k=-1),
        helper.make_node("EyeLike", ["x"], ["above"], k=2, dtype=onnx.TensorProto.INT32),
        helper.make_node("Trilu", ["x", "k"], ["lower"], upper=0),
        helper.make_node("Trilu", ["x"], ["upper"]),
        helper.make_node("ConstantOfShape", ["s"], ["zeros"]),
        helper.make_node(
            "ConstantOfShape", ["s"], ["sevens"], value=numpy_helper.from_array(np.array([7], np.int64))
        ),
    ]
    inputs = {"x": x, "k": np.array(1, np.int64), "s": np.array([2, 3], np.int64)}
    check_nodes(nodes, inputs, static=("k", "s"))


def test_space_to_depth_modes():
    """SpaceToDepth: DCR (the block's offsets before the channels) against onnxruntime; CRD
    (opset 28: channels before the block) against the operator page's reshape/transpose."""
    x = np.arange(1 * 2 * 4 * 6, dtype=np.float32).reshape(1, 2, 4, 6)
    check_node("SpaceToDepth", {"x": x}, {"blocksize": 2}, opset=13)
    model = single_node_model("SpaceToDepth", {"x": x}, {"blocksize": 2, "mode": "CRD"}, opset=28)
    (got,) = from_onnx(model).to_jax()(x)
    want = x.reshape(1, 2, 2, 2, 3, 2).transpose(0, 1, 3, 5, 2, 4).reshape(1, 8, 2, 3)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_dropout_training_mode():
    """Dropout-13 in training mode with ``ratio = 0`` drops nothing (the input, mask all
    true), as does ``training_mode = False`` with any ratio; training with a non-zero ratio is
    random and refused by name."""
    from converter.errors import ConversionError

    inputs = {"x": X, "r": np.array(0.0, np.float32), "t": np.array(True)}
    check_node("Dropout", inputs, n_out=2, opset=13, static=("r", "t"))
    off = {**inputs, "r": np.array(0.5, np.float32), "t": np.array(False)}
    check_node("Dropout", off, n_out=2, opset=13, static=("r", "t"))
    model = single_node_model(
        "Dropout", {**inputs, "r": np.array(0.5, np.float32)}, opset=13, static=("r", "t")
    )
    with pytest.raises(ConversionError, match="Dropout in training mode"):
        from_onnx(model).to_jax()(X)


def test_range_and_slice_of_a_symbolic_dimension():
    """With ``N`` a symbolic dimension: Range(N, -1, -2) counts down (``ceil((N + 1) / 2)``
    elements), Range(1, N, 2) and Range(0, N, 2) count up (``ceil((N - 1) / 2)``,
    ``ceil(N / 2)``), Range(N, 0, 1) is empty; Slice of the ``N`` axis from -2 to INT64_MAX
    (the end) and from 0 to 2 have ``min(N, 2)`` rows, from 1 to -1 ``max(N - 2, 0)`` (none at
    N = 1). Checked at several N against onnxruntime. A zero delta (no length defined) is
    refused by name."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Range", ["n", "m1", "m2"], ["down"]),
        helper.make_node("Range", ["one", "n", "two"], ["up"]),
        helper.make_node("Range", ["zero", "n", "two"], ["even"]),
        helper.make_node("Range", ["n", "zero", "one"], ["empty"]),
        helper.make_node("Slice", ["x", "m2v", "end"], ["tail"]),
        helper.make_node("Slice", ["x", "zerov", "twov"], ["head"]),
        helper.make_node("Slice", ["x", "onev", "m1v"], ["inner"]),
    ]
    scalars = {"zero": 0, "one": 1, "two": 2, "m1": -1, "m2": -2}
    inits = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in scalars.items()]
    inits += [
        numpy_helper.from_array(np.array([v], np.int64), k)
        for k, v in (("m2v", -2), ("end", 2**63 - 1), ("zerov", 0), ("twov", 2), ("onev", 1), ("m1v", -1))
    ]
    outs = [
        helper.make_tensor_value_info(o, onnx.TensorProto.INT64, [o]) for o in ("down", "up", "even", "empty")
    ]
    outs += [
        helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, [o, 2]) for o in ("tail", "head", "inner")
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 2])], outs, inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    fn = from_onnx(model).to_jax()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 2, 5):
        x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
        for name, g, w in zip(
            ("down", "up", "even", "empty", "tail", "head", "inner"),
            fn(x),
            sess.run(None, {"x": x}),
            strict=True,
        ):
            assert np.asarray(g).shape == w.shape, (n, name)
            np.testing.assert_array_equal(np.asarray(g), w, err_msg=f"{name} at N={n}")
    from converter.errors import ConversionError

    model.graph.node[2].input[2] = "zero"  # Range(N, -1, 0)
    with pytest.raises(ConversionError, match="needs a static non-zero integer delta"):
        from_onnx(model)
