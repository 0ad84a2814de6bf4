"""Rules of frontends/onnx/ops/indexing.py against onnxruntime."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_oracle import check_node, check_nodes  # noqa: E402

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_gather_negative_indices():
    check_node("Gather", {"x": X, "i": np.array([[-1, 0]], np.int64)}, {"axis": 2})


def test_gather_nd_batch_dims():
    check_node("GatherND", {"x": X, "i": np.array([[[1], [2]], [[0], [0]]], np.int64)}, {"batch_dims": 1})


def test_scatter_elements_add():
    check_node(
        "ScatterElements",
        {"x": X, "i": np.array([[[0, 1, 1, 0]]], np.int64), "u": np.ones((1, 1, 4), np.float32)},
        {"axis": 1, "reduction": "add"},
    )


def test_scatter_nd():
    check_node("ScatterND", {"x": X, "i": np.array([[1, 2]], np.int64), "u": np.full((1, 4), -1, np.float32)})


def test_non_max_suppression_center_point_boxes():
    """``center_point_box=1`` boxes (x centre, y centre, width, height) with odd widths: half a
    width of 3 is 1.5. The second box overlaps the first by IoU 0.2, above the 0.15
    threshold, so it is suppressed (with half widths floored to 1 the IoU would be 0.11)."""
    boxes = np.array([[[0.0, 0.0, 3.0, 1.0], [2.0, 0.0, 3.0, 1.0], [9.0, 5.0, 1.0, 3.0]]], np.float32)
    inputs = {
        "boxes": boxes,
        "scores": np.array([[[0.9, 0.8, 0.7]]], np.float32),
        "max_out": np.array([3], np.int64),
        "iou": np.array([0.15], np.float32),
    }
    check_node("NonMaxSuppression", inputs, {"center_point_box": 1}, static=tuple(inputs))


def test_non_max_suppression_center_point_boxes_apart_in_x():
    """Centre-point boxes at x 0 and 3, 2 wide: [-1, 1] and [2, 4] do not overlap, both kept
    under a 0.1 IoU threshold (left edges other than ``centre - width / 2`` make them overlap)."""
    boxes = np.array([[[0.0, 0.0, 2.0, 2.0], [3.0, 0.0, 2.0, 2.0]]], np.float32)
    inputs = {
        "boxes": boxes,
        "scores": np.array([[[0.9, 0.8]]], np.float32),
        "max_out": np.array([2], np.int64),
        "iou": np.array([0.1], np.float32),
    }
    check_node("NonMaxSuppression", inputs, {"center_point_box": 1}, static=tuple(inputs))


def test_non_max_suppression_center_point_boxes_apart_in_y():
    """Centre-point boxes offset in y: (5, 5) and (5, 6), 2 x 2, overlap by IoU 1/3, under the
    0.5 threshold: both are kept (corners computed other than ``centre -/+ size / 2`` change
    the IoU of boxes at different centres)."""
    boxes = np.array([[[5.0, 5.0, 2.0, 2.0], [5.0, 6.0, 2.0, 2.0], [5.0, 6.2, 2.0, 2.0]]], np.float32)
    inputs = {
        "boxes": boxes,
        "scores": np.array([[[0.9, 0.8, 0.7]]], np.float32),
        "max_out": np.array([3], np.int64),
        "iou": np.array([0.5], np.float32),
    }
    check_node("NonMaxSuppression", inputs, {"center_point_box": 1}, static=tuple(inputs))


def test_scatter_elements_on_symbolic_dimensions():
    """``x[:, 0] = fill`` as the dynamo exporter writes ``select_scatter`` (BART's
    ``shift_tokens_right``), batch ``N`` and length ``S`` symbolic."""
    import onnxruntime as ort
    from converter.frontends.onnx import from_onnx
    from onnx import TensorProto, helper

    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S"]),
            helper.make_tensor_value_info("i", TensorProto.INT64, ["N", 1]),
            helper.make_tensor_value_info("u", TensorProto.FLOAT, ["N", 1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "S"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    f = from_onnx(model).to_jax()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n, s in ((1, 3), (3, 5)):
        feeds = {
            "x": np.ones((n, s), np.float32),
            "i": np.full((n, 1), -1, np.int64),
            "u": np.zeros((n, 1), np.float32),
        }
        np.testing.assert_array_equal(np.asarray(f(*feeds.values())[0]), session.run(None, feeds)[0])


def test_max_unpool_output_shape_pads_the_inferred_shape():
    """MaxUnpool's indices count positions in the shape MaxPool's formula inverts to (4x4
    here); a larger ``output_shape`` pads it with zeros at the end of each axis (the ONNX
    reference implementation): values land at the same rows and columns, not at the flat
    positions of the 5x5 output. A smaller ``output_shape`` is refused."""
    import onnx
    import pytest
    from converter.frontends.onnx import from_onnx
    from onnx.reference import ReferenceEvaluator

    from converter.errors import ConversionError

    x = np.arange(1, 9, dtype=np.float32).reshape(1, 2, 2, 2)
    idx = np.array([5, 7, 13, 15, 16, 19, 28, 31], np.int64).reshape(1, 2, 2, 2)
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    for shape, ok in (([1, 2, 5, 6], True), ([1, 2, 4, 4], True), ([1, 2, 3, 5], False)):
        node = onnx.helper.make_node("MaxUnpool", ["x", "i", "s"], ["y"], **attrs)
        graph = onnx.helper.make_graph(
            [node],
            "g",
            [
                onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape),
                onnx.helper.make_tensor_value_info("i", onnx.TensorProto.INT64, idx.shape),
            ],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2, None, None])],
            initializer=[onnx.numpy_helper.from_array(np.array(shape, np.int64), "s")],
        )
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 11)])
        if not ok:
            with pytest.raises(ConversionError, match="output_shape"):
                from_onnx(model).to_jax()(x, idx)
            continue
        (want,) = ReferenceEvaluator(model).run(None, {"x": x, "i": idx})
        (got,) = from_onnx(model).to_jax()(x, idx)
        assert want.shape == tuple(shape)
        np.testing.assert_array_equal(np.asarray(got), want)


def test_max_unpool_of_rank_258_with_its_output_shape():
    """MaxUnpool over 256 spatial dims (rank 258, beyond the sizes CPython shares) with an
    ``output_shape`` equal to the inferred shape: no padding, and not refused. The 2 values
    come in and go out flat (Reshape nodes around it: NumPy holds at most 64 dims)."""
    from converter.frontends.onnx import from_onnx

    shape = [1, 2] + [1] * 256
    ints = {n: numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("s", shape), ("flat", [2]))}
    nodes = [
        helper.make_node("Reshape", ["x", "s"], ["xr"]),
        helper.make_node("Reshape", ["i", "s"], ["ir"]),
        helper.make_node("MaxUnpool", ["xr", "ir", "s"], ["u"], kernel_shape=[1] * 256),
        helper.make_node("Reshape", ["u", "flat"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("i", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        initializer=list(ints.values()),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    (got,) = from_onnx(model).to_jax()(np.array([5.0, 7.0], np.float32), np.array([1, 0], np.int64))
    np.testing.assert_array_equal(np.asarray(got), [7.0, 5.0])  # index 1 takes 5, index 0 takes 7


def test_defaults_and_limits_in_one_graph():
    """Compress without an axis (on the flattened input), Unique along an axis unsorted (rows
    in first-occurrence order), MaxUnpool without ``output_shape``, NonMaxSuppression stopping
    at ``max_output_boxes_per_class``."""
    nodes = [
        helper.make_node("Compress", ["x", "cond"], ["c"]),
        helper.make_node("Unique", ["u"], ["uy", "ui", "uinv", "ucnt"], axis=0, sorted=0),
        helper.make_node("MaxUnpool", ["p", "pi"], ["m"], kernel_shape=[2], strides=[2]),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out"], ["n"]),
    ]
    inputs = {
        "x": np.arange(6, dtype=np.float32).reshape(2, 3),
        "cond": np.array([True, False, False, True, True]),
        "u": np.array([[3, 1], [0, 2], [3, 1], [0, 0], [0, 2]], np.int64),
        "p": np.array([[[5.0, -1.0]]], np.float32),
        "pi": np.array([[[1, 2]]], np.int64),
        "boxes": np.array([[[0, 0, 1, 1], [0, 2, 1, 3], [0, 4, 1, 5]]], np.float32),
        "scores": np.array([[[0.2, 0.9, 0.5]]], np.float32),
        "max_out": np.array([2], np.int64),
    }
    check_nodes(nodes, inputs, static=("cond", "u", "boxes", "scores", "max_out"))


def test_tensor_scatter_circular_wraps_the_write_positions():
    """``mode=circular``: writes past the end of the axis continue at its start."""
    inputs = {
        "past": np.arange(2 * 4 * 2, dtype=np.float32).reshape(2, 4, 2),
        "update": -np.ones((2, 3, 2), np.float32),
        "idx": np.array([2, 0], np.int64),
    }
    check_node("TensorScatter", inputs, {"axis": 1, "mode": "circular"}, opset=24)


def test_nms_thresholds_and_defaults_and_max_unpool_pads():
    """NonMaxSuppression keeps only scores strictly above ``score_threshold`` (a score equal
    to it is dropped); without ``iou_threshold`` (0) any overlap suppresses; without
    ``max_output_boxes_per_class`` (0) nothing is selected. MaxUnpool with asymmetric pads:
    the unpooled size is ``(in - 1) * stride + kernel - pad_begin - pad_end`` per axis."""
    nodes = [
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "st"], ["n_st"]),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out"], ["n_iou0"]),
        helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["n_none"]),
        helper.make_node(
            "MaxUnpool", ["p", "pi"], ["m"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 0, 0, 1]
        ),
    ]
    inputs = {
        # box 1 overlaps box 0 a little (IoU 1/7), box 2 is apart
        "boxes": np.array([[[0, 0, 1, 1], [0, 0.5, 1, 1.5], [0, 4, 1, 5]]], np.float32),
        "scores": np.array([[[0.9, 0.5, 0.75]]], np.float32),
        "max_out": np.array([3], np.int64),
        "iou": np.array([0.5], np.float32),
        "st": np.array([0.5], np.float32),
        "p": np.array([[[[5.0, -1.0], [2.0, 3.0]]]], np.float32),  # unpooled to 3 x 3
        "pi": np.array([[[[0, 4], [6, 8]]]], np.int64),
    }
    check_nodes(nodes, inputs, static=("boxes", "scores", "max_out", "iou", "st"))


def test_indexing_ops_along_other_axes_in_one_graph():
    """GatherElements along axis -1 with negative indices (from the end; index 0 stays the
    first), ReverseSequence with the batch axis first (each row reversed over its own length),
    ScatterElements along axis -1 with ``reduction=max``, Compress along axis 1 with a
    condition shorter than the axis (the rest dropped), Unique of a flattened input sorted,
    NonZero of a known value."""
    mk = helper.make_node
    nodes = [
        mk("GatherElements", ["x", "gi"], ["ge"], axis=-1),
        mk("ReverseSequence", ["x", "lens"], ["rs"], batch_axis=0, time_axis=1),
        mk("ScatterElements", ["x", "si", "su"], ["se"], axis=-1, reduction="max"),
        mk("Compress", ["x", "cond"], ["cp"], axis=1),
        mk("Unique", ["u"], ["uy", "ui", "uinv", "ucnt"]),
        mk("NonZero", ["u"], ["nz"]),
    ]
    inputs = {
        "x": np.arange(12, dtype=np.float32).reshape(3, 4),
        "gi": np.array([[0, -1], [-4, 2], [3, -2]], np.int64),
        "lens": np.array([4, 1, 2], np.int64),
        "si": np.array([[0, -1], [1, 1], [-4, 3]], np.int64),
        "su": np.array([[5.0, 2.0], [9.0, 4.0], [1.0, 20.0]], np.float32),
        "cond": np.array([False, True, True]),
        "u": np.array([[3, 0, 3], [1, 0, 2]], np.int64),
    }
    check_nodes(nodes, inputs, opset=18, static=("cond", "u"))
