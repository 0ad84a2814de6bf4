"""ONNX op-rule cases written for mutants that survived the mutation run (CONTRIBUTING.md, *Mutation
testing*; ``tools/mutation/survivors.toml`` names the mutant each one kills), against
onnxruntime."""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from converter import from_onnx

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node  # noqa: E402

X = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)


def test_elu_without_alpha_takes_the_default():
    """Elu's ``alpha`` attribute omitted: the schema's default 1.0 (the node suite's default
    run has only the case with an explicit alpha)."""
    check_node("Elu", {"x": X})


def test_bidirectional_gru_takes_each_directions_activations():
    """A bidirectional GRU with its activations named per direction (forward: the defaults,
    reverse: HardSigmoid and Tanh): each direction's activation functions come from its own
    part of the list. Then an RNN's (LeakyRelu and Elu, of negative values too)."""
    r = np.random.default_rng(1)
    seq, batch, inp, hid = 3, 2, 4, 3
    inputs = {
        "x": r.standard_normal((seq, batch, inp)).astype(np.float32),
        "w": r.standard_normal((2, 3 * hid, inp)).astype(np.float32) * 0.5,
        "r": r.standard_normal((2, 3 * hid, hid)).astype(np.float32) * 0.5,
    }
    attrs = {
        "hidden_size": hid,
        "direction": "bidirectional",
        "activations": ["Sigmoid", "Tanh", "HardSigmoid", "Tanh"],
    }
    check_node("GRU", inputs, attrs, n_out=2, static=("w", "r"))
    # a bidirectional RNN: LeakyRelu forward, Elu in reverse, each with its own alpha
    inputs = {**inputs, "w": inputs["w"][:, :hid], "r": inputs["r"][:, :hid]}
    attrs = {**attrs, "activations": ["LeakyRelu", "Elu"], "activation_alpha": [0.1, 0.7]}
    check_node("RNN", inputs, attrs, n_out=2, static=("w", "r"))


def test_conv_transpose_3d_with_explicit_asymmetric_pads():
    """ConvTranspose over 3 spatial dims with ``pads`` given (begin then end of each dim): the
    end pad of dim ``i`` is ``pads[i + 3]``."""
    r = np.random.default_rng(2)
    inputs = {
        "x": r.standard_normal((1, 2, 3, 4, 3)).astype(np.float32),
        "w": r.standard_normal((2, 2, 2, 3, 2)).astype(np.float32),
    }
    check_node("ConvTranspose", inputs, {"pads": [1, 0, 1, 0, 2, 1], "strides": [2, 1, 2]}, static=("w",))


def test_depth_to_space_with_blocksize_3():
    """DepthToSpace in both modes with a block of 3 (the output depth is ``C // 9``)."""
    x = np.arange(1 * 18 * 2 * 3, dtype=np.float32).reshape(1, 18, 2, 3)
    for mode in ("DCR", "CRD"):
        check_node("DepthToSpace", {"x": x}, {"blocksize": 3, "mode": mode})


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
        (got,) = from_onnx(model).to_jax()(x)
        assert np.asarray(got).shape == want.shape
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5, err_msg=str(scales))


def test_deform_conv_with_strides_differing_per_dim():
    """DeformConv-19 with strides (2, 1): each output dim from its own stride."""
    r = np.random.default_rng(3)
    inputs = {
        "x": r.standard_normal((1, 2, 5, 6)).astype(np.float32),
        "w": r.standard_normal((3, 2, 2, 2)).astype(np.float32),
        "offset": (r.standard_normal((1, 8, 2, 5)) * 0.5).astype(np.float32),
    }
    check_node("DeformConv", inputs, {"strides": [2, 1]}, opset=19, static=("w",))


def test_qlinear_conv_with_per_channel_weight_scales():
    """QLinearConv with one weight scale per output channel (3 of them, the output 4 wide):
    each scale multiplies its own channel."""
    r = np.random.default_rng(4)
    inputs = {
        "x": r.integers(0, 255, (1, 2, 4, 5)).astype(np.uint8),
        "xs": np.array(0.05, np.float32),
        "xz": np.array(128, np.uint8),
        "w": r.integers(-100, 100, (3, 2, 2, 2)).astype(np.int8),
        "ws": np.array([0.01, 0.02, 0.005], np.float32),
        "wz": np.zeros(3, np.int8),
        "ys": np.array(0.2, np.float32),
        "yz": np.array(100, np.uint8),
    }
    check_node("QLinearConv", inputs, static=("xs", "xz", "w", "ws", "wz", "ys", "yz"), atol=1)


def test_lstm_with_peepholes():
    """LSTM with peephole weights ``P`` (input, output, forget: ``H`` columns each)."""
    r = np.random.default_rng(5)
    seq, batch, inp, hid = 3, 2, 4, 3
    inputs = {
        "x": r.standard_normal((seq, batch, inp)).astype(np.float32),
        "w": (r.standard_normal((1, 4 * hid, inp)) * 0.5).astype(np.float32),
        "r": (r.standard_normal((1, 4 * hid, hid)) * 0.5).astype(np.float32),
        "b": (r.standard_normal((1, 8 * hid)) * 0.1).astype(np.float32),
        "lens": np.full(batch, seq, np.int32),
        "h0": np.zeros((1, batch, hid), np.float32),
        "c0": (r.standard_normal((1, batch, hid)) * 0.5).astype(np.float32),
        "p": r.standard_normal((1, 3 * hid)).astype(np.float32),
    }
    check_node("LSTM", inputs, {"hidden_size": hid}, n_out=3, static=("w", "r", "b", "lens", "p"))


def test_lstm_with_coupled_input_and_forget_gates():
    """``input_forget=1``: the forget gate is ``1 - i`` (the input gate), not its own gate."""
    r = np.random.default_rng(6)
    seq, batch, inp, hid = 3, 2, 4, 3
    inputs = {
        "x": r.standard_normal((seq, batch, inp)).astype(np.float32),
        "w": (r.standard_normal((1, 4 * hid, inp)) * 0.5).astype(np.float32),
        "r": (r.standard_normal((1, 4 * hid, hid)) * 0.5).astype(np.float32),
    }
    attrs = {"hidden_size": hid, "input_forget": 1}
    check_node("LSTM", inputs, attrs, n_out=3, static=("w", "r"))


def test_grid_sample_align_corners():
    """GridSample-16 with ``align_corners=1`` (-1 and 1 are the centres of the corner pixels),
    bilinear, nearest and bicubic, some samples outside [-1, 1]."""
    r = np.random.default_rng(6)
    x = r.standard_normal((1, 2, 4, 5)).astype(np.float32)
    grid = (r.random((1, 3, 2, 2)) * 2.4 - 1.2).astype(np.float32)
    for mode in ("bilinear", "nearest", "bicubic"):
        attrs = {"align_corners": 1, "mode": mode}
        check_node("GridSample", {"x": x, "grid": grid}, attrs, opset=16, atol=1e-5)


def test_adam_bias_correction_of_a_small_beta_power():
    """Adam (ai.onnx.preview.training) at step 5 with ``beta = 0.8``: the bias correction
    ``sqrt(1 - beta^t)`` of ``beta^t = 0.33``; against ONNX's reference implementation
    (onnxruntime has no training ops)."""
    from onnx.reference import ReferenceEvaluator

    r = np.random.default_rng(7)
    inputs = {"r": np.array(0.1, np.float32), "t": np.array(5, np.int64)}
    inputs.update({n: r.standard_normal(4).astype(np.float32) for n in ("x", "g", "v")})
    inputs["h"] = r.random(4).astype(np.float32)
    node = helper.make_node(
        "Adam", list(inputs), ["x_new", "v_new", "h_new"], domain="ai.onnx.preview.training", beta=0.8
    )
    vis = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in inputs.items()
    ]
    outs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, (4,)) for n in node.output]
    model = helper.make_model(
        helper.make_graph([node], "g", vis, outs),
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.preview.training", 1)],
    )
    model.ir_version = 8
    want = ReferenceEvaluator(model).run(None, inputs)
    got = from_onnx(model).to_jax()(*inputs.values())
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6)


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


def test_optional_get_element():
    """Optional then OptionalGetElement (and OptionalHasElement) on a tensor."""
    x = X[0]
    nodes = [
        helper.make_node("Optional", ["x"], ["o"]),
        helper.make_node("OptionalGetElement", ["o"], ["y"]),
        helper.make_node("OptionalHasElement", ["o"], ["h"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [
            helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, x.shape),
            helper.make_tensor_value_info("h", onnx.TensorProto.BOOL, []),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    got = from_onnx(model).to_jax()(x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w)
