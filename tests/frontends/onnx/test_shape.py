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
