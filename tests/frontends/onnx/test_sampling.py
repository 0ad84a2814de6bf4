"""Rules of frontends/onnx/ops/sampling.py (GridSample, RoiAlign) against onnxruntime (cases
the node suite's default run misses)."""

import os
import sys

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from converter import from_onnx

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node, single_node_model  # noqa: E402


def test_grid_sample_align_corners():
    """GridSample-16 with ``align_corners=1`` (-1 and 1 are the centres of the corner pixels),
    bilinear, nearest and bicubic, some samples outside [-1, 1]."""
    r = np.random.default_rng(6)
    x = r.standard_normal((1, 2, 4, 5)).astype(np.float32)
    grid = (r.random((1, 3, 2, 2)) * 2.4 - 1.2).astype(np.float32)
    for mode in ("bilinear", "nearest", "bicubic"):
        attrs = {"align_corners": 1, "mode": mode}
        check_node("GridSample", {"x": x, "grid": grid}, attrs, opset=16, atol=1e-5)


def test_grid_sample_reflection_folds_far_outside_points():
    """``padding_mode=reflection`` of points one to three ranges outside the input: each
    crossing of a border flips the direction, so an odd number of folds reads from the far
    side."""
    x = np.arange(2 * 4 * 5, dtype=np.float32).reshape(1, 2, 4, 5) % 7
    line = np.array([-6.3, -4.1, -2.6, -1.7, 0.3, 1.6, 2.9, 4.4, 6.2], np.float32)
    grid = np.stack(np.meshgrid(line, line[::-1][:3]), -1)[None].astype(np.float32)  # (1, 3, 9, 2)
    attrs = {"mode": "nearest", "padding_mode": "reflection"}
    check_node("GridSample", {"x": x, "grid": grid}, attrs, opset=16, atol=1e-5)


def test_grid_sample_border_clamps_outside_points():
    """``padding_mode=border``, bicubic: a point outside the input is moved to the edge
    pixel's centre before its taps are weighted (clamping only the taps would mix in the
    next pixel), as the ONNX reference implementation does; onnxruntime, which clamps only
    the taps of a bicubic sample, is not the oracle here. A point exactly on the outer edge
    (±1: half a pixel outside the edge pixel's centre) is inside, not moved."""
    from onnx.reference import ReferenceEvaluator

    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3) ** 2
    line = np.array([-2.0, -1.1, -1.0, -0.3, 0.8, 1.0, 1.05, 3.0], np.float32)  # ±1: the bounds
    grid = np.stack(np.meshgrid(line, line[::-1][:4]), -1)[None].astype(np.float32)  # (1, 4, 8, 2)
    attrs = {"padding_mode": "border", "mode": "cubic"}
    model = single_node_model("GridSample", {"x": x, "grid": grid}, attrs, 1, 20, ())
    (want,) = ReferenceEvaluator(model).run(None, {"x": x, "grid": grid})
    (got,) = from_onnx(model).to_jax()(x, grid)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_roi_align_adaptive_sampling_grid():
    """RoiAlign-16 with ``sampling_ratio=0``: ``ceil(roi_size / output_size)`` samples per
    bin, here ceil(5 / 3) = 2 across and ceil(3.5 / 2) = 2 down; the third ROI reaches more
    than a pixel past the map on every side (its samples there read 0)."""
    r = np.random.default_rng(8)
    inputs = {
        "x": r.standard_normal((1, 2, 8, 9)).astype(np.float32),
        "rois": np.array([[0.5, 1.0, 5.5, 4.5], [2.0, 0.25, 8.0, 7.0], [-3.0, -2.5, 12.0, 10.5]], np.float32),
        "batch_indices": np.array([0, 0, 0], np.int64),
    }
    attrs = {"output_height": 2, "output_width": 3, "sampling_ratio": 0}
    check_node("RoiAlign", inputs, attrs, opset=16, atol=1e-5)


def test_roi_align_output_half_pixel_widens_thin_rois_to_one_pixel():
    """RoiAlign-16 with ``output_half_pixel`` (the legacy mode): a ROI narrower or lower than
    one pixel is sampled as one pixel wide / high (the reference's ``max(size, 1)``)."""
    r = np.random.default_rng(9)
    inputs = {
        "x": r.standard_normal((1, 1, 6, 6)).astype(np.float32),
        "rois": np.array([[1.0, 2.0, 4.0, 2.25], [2.5, 0.5, 2.75, 4.5]], np.float32),
        "batch_indices": np.array([0, 0], np.int64),
    }
    attrs = {"output_height": 2, "output_width": 2, "sampling_ratio": 2}
    check_node(
        "RoiAlign",
        inputs,
        {**attrs, "coordinate_transformation_mode": "output_half_pixel"},
        opset=16,
        atol=1e-5,
    )


@pytest.mark.parametrize("attrs", [{"coordinate_transformation_mode": "align_corners"}, {"mode": "min"}])
def test_roi_align_refuses_values_outside_the_spec(attrs):
    """An attribute value RoiAlign-16 does not define is an error naming it (it was taken as
    ``output_half_pixel`` / ``avg``), as onnxruntime refuses it."""
    from converter.errors import ConversionError

    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 4, 4])
    b = helper.make_tensor_value_info("b", onnx.TensorProto.INT64, [1])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 1, 1, 1])
    rois = numpy_helper.from_array(np.array([[0, 0, 2, 2]], np.float32), "rois")
    node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], name="roi", **attrs)
    graph = helper.make_graph([node], "g", [x, b], [y], [rois])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    with pytest.raises(ConversionError, match=f"roi.*{next(iter(attrs.values()))!r}"):
        from_onnx(model, static_inputs={"b": np.zeros(1, np.int64)})


def test_grid_sample_half_pixel_zeros_and_border():
    """GridSample-16 with ``align_corners=0`` (-1 and 1 are the outer edges of the corner
    pixels): bilinear with ``zeros`` padding (taps outside read 0, those on the
    last row and column do not), and nearest and bilinear with ``border`` padding, the grid
    reaching past every side of a 3 x 4 input."""
    from onnx_oracle import check_nodes

    x = (np.arange(2 * 3 * 4, dtype=np.float32).reshape(1, 2, 3, 4) % 5) + 1
    line = np.array([-1.3, -1.0, -0.8, -0.2, 0.4, 0.9, 1.0, 1.4], np.float32)
    grid = np.stack(np.meshgrid(line, line[::-1][1:6]), -1)[None].astype(np.float32)  # (1, 5, 8, 2)
    nodes = [
        helper.make_node("GridSample", ["x", "g"], [f"{m}_{p}"], mode=m, padding_mode=p)
        for m, p in (("bilinear", "zeros"), ("nearest", "border"), ("bilinear", "border"))
    ]
    check_nodes(nodes, {"x": x, "g": grid}, opset=16, atol=1e-5)


def test_roi_align_10_max_mode_scaled_second_image():
    """RoiAlign-10 (the default ``output_half_pixel`` before opset 16), ``max`` mode, a
    ``spatial_scale`` of 0.5, one sample per bin (``sampling_ratio=1``) and ROIs of the second
    image of the batch (``batch_indices``)."""
    r = np.random.default_rng(10)
    inputs = {
        "x": r.standard_normal((2, 2, 5, 6)).astype(np.float32),
        "rois": np.array([[1.0, 2.0, 9.0, 7.0], [0.0, 0.0, 4.0, 3.0]], np.float32),
        "batch_indices": np.array([1, 0], np.int64),
    }
    attrs = {"output_height": 2, "output_width": 2, "sampling_ratio": 1, "mode": "max", "spatial_scale": 0.5}
    check_node("RoiAlign", inputs, attrs, opset=10, atol=1e-5)
