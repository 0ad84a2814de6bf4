"""Rules of frontends/onnx/ops/resize.py against onnxruntime (edge cases ONNX's node tests miss)."""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from converter.frontends.onnx import from_onnx
from onnx import helper, numpy_helper

import converter

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node  # noqa: E402

X = np.random.default_rng(0).standard_normal((1, 1, 4, 5)).astype(np.float32)


def _resize_model(roi: np.ndarray, scales: np.ndarray, attrs: dict) -> onnx.ModelProto:
    """``Resize(x, roi, scales)`` with ``roi`` and ``scales`` as Constant nodes."""
    consts = [
        helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))
        for name, value in (("roi", roi), ("scales", scales))
    ]
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], **attrs)
    graph = helper.make_graph(
        [*consts, node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, X.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (1, 1, 1, 3))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_tf_crop_and_resize_to_length_one(mode):
    """An output length of 1 samples the roi's centre, ``0.5 * (start + end) * (L - 1)`` (the
    ``length_resized == 1`` branch of the Resize page's ``tf_crop_and_resize``)."""
    roi = np.array([0, 0, 0.2, 0.1, 1, 1, 0.7, 0.9], np.float32)
    scales = np.array([1, 1, 0.25, 0.6], np.float32)  # heights 4 -> 1, widths 5 -> 3
    model = _resize_model(roi, scales, {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize"})
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": X}
    )
    (got,) = from_onnx(model).to_jax()(X)
    assert want.shape == (1, 1, 1, 3)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


def test_sizes_keeping_the_aspect_ratio():
    """Resize-18 of the last two axes to ``sizes`` with ``keep_aspect_ratio_policy``
    ``not_smaller``: 4x5 into 7x7 takes the larger scale, 7/4, for both axes, so the output
    is 7x9 (the policy also decides the output shape)."""
    empty = np.zeros(0, np.float32)
    check_node(
        "Resize",
        {"x": X, "roi": empty, "scales": empty, "sizes": np.array([7, 7], np.int64)},
        {"mode": "linear", "keep_aspect_ratio_policy": "not_smaller", "axes": [2, 3]},
        static=("roi", "scales", "sizes"),
    )


def _symbolic_resizes() -> onnx.ModelProto:
    """``x: [N, 2, H, W]`` through what exporters write for ``Upsample``/``interpolate``:
    nearest ``scale_factor=2`` (asymmetric, floor), bilinear ``scale_factor=2`` (half_pixel),
    bicubic by 0.5 with ``exclude_outside`` (pytorch_half_pixel), and linear to ``sizes``
    computed from ``Shape`` (align_corners): every resized dimension symbolic."""
    n = helper.make_node

    def const(name, value):
        return n("Constant", [], [name], value=numpy_helper.from_array(value, name))

    up = np.array([1, 1, 2, 2], np.float32)
    nodes = [
        const("up", up),
        const("down", np.array([1, 1, 0.5, 0.5], np.float32)),
        const("plus", np.array([3, 1], np.int64)),
        n("Resize", ["x", "", "up"], ["a"], mode="nearest", coordinate_transformation_mode="asymmetric",
          nearest_mode="floor"),
        n("Resize", ["a", "", "up"], ["b"], mode="linear", coordinate_transformation_mode="half_pixel"),
        n("Resize", ["b", "", "down"], ["c"], mode="cubic", exclude_outside=1,
          coordinate_transformation_mode="pytorch_half_pixel"),
        n("Shape", ["x"], ["s"], start=2),
        n("Add", ["s", "plus"], ["hw"]),
        n("Resize", ["x", "", "", "hw"], ["d"], mode="linear", coordinate_transformation_mode="align_corners",
          axes=[2, 3]),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 2, "H", "W"])],
        [
            helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, ["N", 2, None, None]),
            helper.make_tensor_value_info("d", onnx.TensorProto.FLOAT, ["N", 2, None, None]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_symbolic_dimensions_stay_dynamic():
    """The resized sizes stay symbolic (``2 * H``, ``H + 3``...); ``to_jax`` and the
    ``to_onnx`` model (a ``Gather`` per tap on dynamic shapes) match onnxruntime (the
    sweep, ``tests/sweeps/onnx_sweep.py``, runs ``to_torch`` on exported convnets)."""
    model = _symbolic_resizes()
    m = from_onnx(model)
    assert m.signature.inputs[0].shape == ("N", 2, "H", "W")
    want_session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    back = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    f = m.to_jax()
    rng = np.random.default_rng(1)
    for shape in ((1, 2, 3, 5), (2, 2, 6, 4)):
        x = rng.standard_normal(shape).astype(np.float32)
        want = want_session.run(None, {"x": x})
        for got in [back.run(None, {"x": x})] + ([f(x)] if shape[0] == 2 else []):
            for g, e in zip(got, want, strict=True):
                assert np.asarray(g).shape == e.shape
                np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-5)


def test_symbolic_half_pixel_symmetric():
    """Resize-19 ``half_pixel_symmetric`` of symbolic ``H``, ``W`` by 0.5 and 1.5: odd sizes
    round the output down (5 * 0.5 -> 2, 3 * 1.5 -> 4), where the mode's centring term
    ``L / 2 * (1 - O / (scale * L))`` is not 0 and the coordinates differ from
    ``half_pixel``'s."""
    scales = numpy_helper.from_array(np.array([1, 1, 0.5, 1.5], np.float32), "scales")
    nodes = [
        helper.make_node("Constant", [], ["scales"], value=scales),
        helper.make_node(
            "Resize",
            ["x", "", "scales"],
            ["y"],
            mode="linear",
            coordinate_transformation_mode="half_pixel_symmetric",
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, "H", "W"])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 1, None, None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    x = np.random.default_rng(2).standard_normal((1, 1, 5, 3)).astype(np.float32)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    (got,) = from_onnx(model).to_jax()(x)
    assert want.shape == (1, 1, 2, 4)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


_SYMBOLIC_REFUSALS = {
    "scale not a small ratio": (
        {"mode": "linear"},
        [1, 1, 0.37, 1],
        None,
        r"by the scale 0.37.* not a ratio",
    ),
    "tf_crop_and_resize": (
        {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"},
        [1, 1, 2, 1],
        None,
        r"coordinate_transformation_mode=tf_crop_and_resize on a symbolic dimension",
    ),
    "antialias down": (
        {"mode": "linear", "antialias": 1},
        [1, 1, 0.5, 1],
        None,
        r"antialias when downsampling",
    ),
    "aspect ratio": (
        {"mode": "linear", "keep_aspect_ratio_policy": "not_larger"},
        None,
        [1, 1, 3, 3],
        r"keep_aspect_ratio_policy=not_larger on symbolic sizes",
    ),
}


@pytest.mark.parametrize("case", list(_SYMBOLIC_REFUSALS))
def test_resizes_of_symbolic_sizes_it_cannot_compute_are_refused(case):
    """What the symbolic-size path cannot compute is refused with the way out (sizes through
    ``dims``), and converts once the sizes are given."""
    attrs, scales, sizes, match = _SYMBOLIC_REFUSALS[case]
    n = helper.make_node
    consts = [("roi", np.zeros(0, np.float32))]
    consts += [("scales", np.array(scales, np.float32))] if scales else [("scales", np.zeros(0, np.float32))]
    consts += [("sizes", np.array(sizes, np.int64))] if sizes else []
    nodes = [n("Constant", [], [k], value=numpy_helper.from_array(v, k)) for k, v in consts]
    nodes.append(n("Resize", ["x", *(k for k, _ in consts)], ["y"], **attrs))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, "H", 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 1, None, None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(converter.ConversionError, match=match) as e:
        from_onnx(model)
    assert "give the dimensions sizes with from_onnx(..., dims=...)" in str(e.value)
    assert from_onnx(model, dims={"H": 6}).signature.inputs[0].shape == (1, 1, 6, 4)


def test_integer_linear_resize_truncates_like_onnxruntime():
    """uint8/int8 bilinear resize (a QOperator-quantized model resizes its uint8 activations):
    interpolated in float and truncated toward zero once, as onnxruntime does (the weights
    were cast to the integer type: garbage). Half-pixel quarter weights are exact in float,
    so the results are too."""
    rng = np.random.default_rng(0)
    scales = np.array([1, 1, 2, 2], np.float32)
    roi = np.zeros(0, np.float32)
    for x in (
        rng.integers(0, 256, (1, 2, 4, 5)).astype(np.uint8),
        rng.integers(-128, 128, (1, 1, 3, 4)).astype(np.int8),
    ):
        check_node(
            "Resize",
            {"x": x, "roi": roi, "scales": scales},
            {"mode": "linear"},
            static=("roi", "scales"),
            rtol=0,
            atol=0,
        )


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias_up_and_down(mode):
    """Resize-18 ``linear`` and ``cubic`` with ``antialias=1``: the kernel is stretched only
    when downsampling (an upsampling scale leaves it as is)."""
    x = np.arange(2 * 6 * 6, dtype=np.float32).reshape(1, 2, 6, 6) % 7
    for scales in ([1, 1, 1.5, 1.75], [1, 1, 0.5, 0.75]):
        consts = [
            helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))
            for name, value in (("roi", np.array([], np.float32)), ("scales", np.array(scales, np.float32)))
        ]
        node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode=mode, antialias=1)
        graph = helper.make_graph(
            [*consts, node],
            "g",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
            [
                helper.make_tensor_value_info(
                    "y", onnx.TensorProto.FLOAT, [int(d * f) for d, f in zip(x.shape, scales, strict=True)]
                )
            ],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        model.ir_version = 8
        (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": x}
        )
        (got,) = converter.from_onnx(model).to_jax()(x)
        assert np.asarray(got).shape == want.shape
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5, err_msg=str(scales))


def test_static_modes_onnxs_node_tests_miss():
    """Static sizes, one graph: half_pixel_symmetric, pytorch_half_pixel to length 1, the
    nearest modes round_prefer_ceil and ceil (at .5 coordinates), tf_crop_and_resize with a
    roi reaching outside (the extrapolation value there), cubic with exclude_outside,
    align_corners (to length 1: the first element), and a
    scale other than 1 that keeps a length (``floor(4 * 1.2) = 4``): still resampled, as the
    Resize page's coordinate formulas and ONNX's reference say (onnxruntime 1.32 agrees while
    another dimension changes size; it copies the input when the whole shape stays)."""
    from onnx_oracle import check_nodes

    n = helper.make_node
    inputs = {
        "x": X,
        "up": np.array([1, 1, 2, 1.5], np.float32),
        "sym": np.array([1, 1, 1.5, 0.75], np.float32),
        "one": np.array([1, 1, 1, 5], np.int64),
        "roi": np.array([0, 0, -0.25, 0.1, 1, 1, 1.2, 0.9], np.float32),
        "crop": np.array([1, 1, 3, 4], np.int64),
        "near": np.array([1, 1, 1.2, 1.25], np.float32),  # 4x5 -> 4x6: the height resampled at 1.2
    }
    e = ""
    nodes = [
        n("Resize", ["x", e, "sym"], ["sym_"], mode="linear",
          coordinate_transformation_mode="half_pixel_symmetric"),
        n("Resize", ["x", e, e, "one"], ["one_"], mode="linear",
          coordinate_transformation_mode="pytorch_half_pixel"),
        n("Resize", ["x", e, "up"], ["ceil_"], mode="nearest", coordinate_transformation_mode="asymmetric",
          nearest_mode="ceil"),
        n("Resize", ["x", e, "up"], ["rpc_"], mode="nearest", coordinate_transformation_mode="asymmetric",
          nearest_mode="round_prefer_ceil"),
        n("Resize", ["x", "roi", e, "crop"], ["crop_"], mode="linear",
          coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.0),
        n("Resize", ["x", e, "sym"], ["cubic_"], mode="cubic", exclude_outside=1),
        n("Resize", ["x", e, "near"], ["same_size_"], mode="linear"),
        n("Resize", ["x", e, e, "crop"], ["corners_"], mode="linear",
          coordinate_transformation_mode="align_corners"),
        n("Resize", ["x", e, e, "one"], ["corners_one_"], mode="linear",
          coordinate_transformation_mode="align_corners"),
    ]  # fmt: skip
    check_nodes(nodes, inputs, opset=19, static=tuple(k for k in inputs if k != "x"), rtol=1e-5, atol=1e-5)


def _symbolic_resize(attrs, scales=None, sizes=None) -> onnx.ModelProto:
    """``Resize`` of ``x: [1, 1, H, W]`` with each of ``attrs`` (a dict, or a list of dicts: one
    node each, outputs ``y0, y1...``) and constant ``scales`` or ``sizes``."""
    const = []
    names = ["x", "", "", ""]
    for i, (name, value) in ((2, ("scales", scales)), (3, ("sizes", sizes))):
        if value is not None:
            const.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name)))
            names[i] = name
    nodes = [
        helper.make_node("Resize", names, [f"y{i}"], name=f"rs{i}", **a)
        for i, a in enumerate(attrs if isinstance(attrs, list) else [attrs])
    ]
    graph = helper.make_graph(
        [*const, *nodes],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, "H", "W"])],
        [helper.make_tensor_value_info(f"y{i}", onnx.TensorProto.FLOAT, None) for i in range(len(nodes))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def test_symbolic_nearest_modes_and_half_pixel_symmetric():
    """Symbolic H, W: nearest round_prefer_ceil, round_prefer_floor (the default) and ceil
    (at .5 coordinates), and linear half_pixel_symmetric, against onnxruntime."""
    nearest = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric"}
    attrs = [
        {**nearest, "nearest_mode": "round_prefer_ceil"},
        nearest,
        {**nearest, "nearest_mode": "ceil"},
        {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"},
    ]
    model = _symbolic_resize(attrs, np.array([1, 1, 2, 2], np.float32))
    m = from_onnx(model, check=False)
    assert m.signature.inputs[0].shape == (1, 1, "H", "W")
    x = np.random.default_rng(2).standard_normal((1, 1, 3, 2)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    for got, e in zip(m.to_jax()(x), want, strict=True):
        np.testing.assert_allclose(np.asarray(got), e, rtol=1e-5, atol=1e-6)


def _jax_and_onnxruntime(model, m, x):
    """``m.to_jax()`` and onnxruntime on ``model``, each run on input ``x``: (ours, theirs)."""
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    (got,) = m.to_jax()(x)
    return np.asarray(got), want


def test_sizes_on_a_symbolic_height_scale_the_static_width_by_its_ratio():
    """``sizes`` given, H symbolic and W static: the static axis scales by ``8 / 4`` in
    half_pixel (linear), the symbolic one by ``6 / H`` at run time, against onnxruntime."""
    sizes = numpy_helper.from_array(np.array([1, 1, 6, 8], np.int64), "sizes")
    graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["sizes"], value=sizes),
            helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear"),
        ],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, "H", 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    m = from_onnx(model, check=False)
    assert m.signature.inputs[0].shape == (1, 1, "H", 4)
    x = np.random.default_rng(3).standard_normal((1, 1, 3, 4)).astype(np.float32)
    got, want = _jax_and_onnxruntime(model, m, x)
    assert want.shape == (1, 1, 6, 8)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("attrs", "scales", "sizes", "words"),
    [
        ({"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}, [1, 1, 2, 2], None,
         "coordinate_transformation_mode=tf_crop_and_resize on a symbolic dimension"),
        ({"mode": "linear", "antialias": 1}, [1, 1, 0.5, 0.5], None,
         "antialias when downsampling a symbolic"),
        ({"mode": "linear", "keep_aspect_ratio_policy": "not_larger"}, None, [1, 1, 4, 4],
         "keep_aspect_ratio_policy=not_larger on symbolic sizes"),
        ({"mode": "linear"}, [1, 1, 1.3, 1.3], None, "by the scale 1.29.*not a ratio of small integers"),
        ({"mode": "nearest", "nearest_mode": "bogus"}, [1, 1, 2, 2], None, "nearest_mode=bogus"),
    ],
)  # fmt: skip
def test_symbolic_resizes_refused_name_what_needs_sizes(attrs, scales, sizes, words):
    from converter.errors import OpConversionError

    scales = None if scales is None else np.array(scales, np.float32)
    sizes = None if sizes is None else np.array(sizes, np.int64)
    with pytest.raises(OpConversionError, match=words):
        from_onnx(_symbolic_resize(attrs, scales, sizes), check=False)


def test_unknown_modes_are_refused_on_static_shapes():
    from converter.errors import OpConversionError

    for attrs, words in (
        ({"coordinate_transformation_mode": "bogus"}, "coordinate_transformation_mode=bogus"),
        ({"mode": "nearest", "nearest_mode": "bogus"}, "nearest_mode=bogus"),
    ):
        model = _resize_model(np.zeros(0, np.float32), np.array([1, 1, 0.5, 0.6], np.float32), attrs)
        with pytest.raises(OpConversionError, match=words):
            from_onnx(model, check=False)


def test_symbolic_align_corners_to_length_one_samples_the_first_element():
    """align_corners to an output length of 1 on a symbolic axis samples coordinate 0 (the
    Resize page's ``length_resized == 1`` case): with cubic ``exclude_outside`` the taps at
    -1 and below carry no weight, so a coordinate other than 0 changes the value. Against
    onnxruntime."""
    attrs = {"mode": "cubic", "coordinate_transformation_mode": "align_corners", "exclude_outside": 1}
    model = _symbolic_resize(attrs, sizes=np.array([1, 1, 1, 3], np.int64))
    m = from_onnx(model, check=False)
    x = np.random.default_rng(4).standard_normal((1, 1, 3, 5)).astype(np.float32)
    got, want = _jax_and_onnxruntime(model, m, x)
    assert want.shape == (1, 1, 1, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_axes_subset_with_a_full_rank_roi_and_not_larger_sizes():
    """Resize-18 with ``axes`` (negative, ``[-2, -1]``) and a ``roi`` given for every input
    axis (``2 * rank`` values): the roi entries of the listed axes apply (the reference is
    onnxruntime on the same resize with the roi of those axes only), and ``sizes`` with
    ``keep_aspect_ratio_policy=not_larger`` (4x5 into 6x6: the smaller scale, 6/5, for both)."""
    roi_axes = np.array([-0.25, 0.1, 1.2, 0.9], np.float32)  # starts, ends of axes 2, 3
    full = np.array([0.3, 0.6, -0.25, 0.1, 0.9, 0.4, 1.2, 0.9], np.float32)  # axes 0..3

    def model(roi):
        consts = {"roi": roi, "crop": np.array([3, 4], np.int64), "six": np.array([6, 6], np.int64)}
        nodes = [
            helper.make_node("Constant", [], [k], value=numpy_helper.from_array(v, k))
            for k, v in consts.items()
        ]
        nodes += [
            helper.make_node("Resize", ["x", "roi", "", "crop"], ["crop_"], mode="linear", axes=[-2, -1],
                             coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.0),
            helper.make_node("Resize", ["x", "", "", "six"], ["fit_"], mode="nearest", axes=[2, 3],
                             keep_aspect_ratio_policy="not_larger"),
        ]  # fmt: skip
        outs = [
            helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, [None] * 4) for o in ("crop_", "fit_")
        ]
        x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, X.shape)
        m = helper.make_model(
            helper.make_graph(nodes, "g", [x], outs), opset_imports=[helper.make_opsetid("", 18)]
        )
        m.ir_version = 8
        return m

    want = ort.InferenceSession(model(roi_axes).SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": X}
    )
    got = from_onnx(model(full)).to_jax()(X)
    assert [np.shape(g) for g in got] == [w.shape for w in want] == [(1, 1, 3, 4), (1, 1, 5, 6)]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)
