"""Rules of frontends/onnx/ops/nn.py against onnxruntime."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from converter.frontends.onnx import from_onnx  # noqa: E402
from onnx import helper  # noqa: E402
from onnx_oracle import check_node, check_nodes, single_node_model  # noqa: E402

from converter.errors import ConversionError  # noqa: E402

R = np.random.default_rng(0)
X = R.standard_normal((1, 4, 9, 9)).astype(np.float32)


def test_grouped_strided_conv_same_upper():
    w = R.standard_normal((6, 2, 3, 3)).astype(np.float32)
    check_node(
        "Conv",
        {"x": X, "w": w},
        {"group": 2, "strides": [2, 2], "auto_pad": "SAME_UPPER"},
        static=("w",),
        rtol=1e-4,
        atol=1e-5,
    )


def test_conv_transpose_output_padding():
    w = R.standard_normal((4, 3, 3, 3)).astype(np.float32)
    check_node(
        "ConvTranspose",
        {"x": X, "w": w},
        {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
        static=("w",),
        rtol=1e-4,
        atol=1e-5,
    )


def test_pools_ceil_mode():
    check_node("MaxPool", {"x": X}, {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1})
    # 8 wide: the last window starts inside and ends past the input (ceil 4 windows, floor 3)
    check_node("MaxPool", {"x": X[:, :, :8, :8]}, {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1})
    # stride 1: ceil_mode adds no window (no end padding)
    check_node("MaxPool", {"x": X}, {"kernel_shape": [2, 2], "strides": [1, 1], "ceil_mode": 1})
    check_node(
        "AveragePool",
        {"x": X},
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    )


def test_batch_norm_inference():
    c = X.shape[1]
    stats = {n: (R.random(c) + 0.5).astype(np.float32) for n in ("s", "b", "m", "v")}
    check_node("BatchNormalization", {"x": X, **stats}, static=("s", "b", "m", "v"))


def test_batch_norm_training_mode():
    """BatchNormalization-15 with ``training_mode=1``: normalized by the batch's statistics,
    with the running mean and variance updated by ``momentum`` (0.8, and the default 0.9)."""
    c = X.shape[1]
    stats = {n: (R.random(c) + 0.5).astype(np.float32) for n in ("s", "b", "m", "v")}
    for attrs in ({"training_mode": 1, "momentum": 0.8}, {"training_mode": 1}):
        check_node(
            "BatchNormalization", {"x": X, **stats}, attrs, n_out=3, opset=15, static=("s", "b", "m", "v")
        )


def test_lp_pools_and_group_norm_18():
    """GlobalLpPool (p = 3), LpPool of a batch of two (the window strides only the spatial
    dims) and GroupNormalization-18 (scale and bias per group)."""
    x = np.random.default_rng(3).standard_normal((2, 4, 3, 5)).astype(np.float32)
    check_node("GlobalLpPool", {"x": np.abs(x)}, {"p": 3}, rtol=1e-5, atol=1e-5)
    check_node("LpPool", {"x": x}, {"kernel_shape": [2, 2], "strides": [2, 1]}, rtol=1e-5, atol=1e-5)
    scale, bias = np.array([0.5, 2.0], np.float32), np.array([1.0, -1.0], np.float32)
    # onnxruntime has no GroupNormalization-18 (scale and bias per group; -21 has them per
    # channel) and onnx's checker refuses it as deprecated: unchecked, against its formula
    model = single_node_model(
        "GroupNormalization", {"x": x, "s": scale, "b": bias}, {"num_groups": 2}, opset=18
    )
    model.graph.output[0].CopyFrom(onnx.helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, x.shape))
    (got,) = from_onnx(model, check=False).to_jax()(x, scale, bias)
    g = x.astype(np.float64).reshape(2, 2, -1)
    norm = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)
    want = norm * scale[:, None] + bias[:, None]
    np.testing.assert_allclose(np.asarray(got), want.reshape(x.shape), rtol=1e-5, atol=1e-5)


def test_resize_10_and_upsample_7():
    """Resize-10 (scales only, nearest/linear) and Upsample-7 (scales an attribute)."""
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    scales = np.array([1, 1, 2, 1.5], np.float32)
    model = single_node_model("Resize", {"x": x, "sc": scales}, {"mode": "nearest"}, opset=10)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "sc": scales}
    )  # float scales: a graph input folded in by static_inputs (an initializer would be a weight)
    (got,) = from_onnx(model, static_inputs={"sc": scales}).to_jax()(x)
    np.testing.assert_array_equal(np.asarray(got), want)
    check_node("Upsample", {"x": x}, {"scales": [1.0, 1.0, 2.0, 2.0], "mode": "nearest"}, opset=7)


def test_conv_transpose_3d_with_explicit_asymmetric_pads():
    """ConvTranspose over 3 spatial dims with ``pads`` given (begin then end of each dim): the
    end pad of dim ``i`` is ``pads[i + 3]``."""
    r = np.random.default_rng(2)
    inputs = {
        "x": r.standard_normal((1, 2, 3, 4, 3)).astype(np.float32),
        "w": r.standard_normal((2, 2, 2, 3, 2)).astype(np.float32),
    }
    check_node("ConvTranspose", inputs, {"pads": [1, 0, 1, 0, 2, 1], "strides": [2, 1, 2]}, static=("w",))


def test_conv_transpose_output_shape_and_same_pads_with_bias():
    """ConvTranspose's padding from ``output_shape`` (SAME_UPPER puts the odd pad at the end,
    otherwise at the start) and from ``auto_pad`` SAME_* alone (output = input * stride)."""
    r = np.random.default_rng(4)
    inputs = {
        "x": r.standard_normal((1, 2, 3, 4)).astype(np.float32),
        "w": r.standard_normal((2, 3, 3, 3)).astype(np.float32),
        "b": r.standard_normal(3).astype(np.float32),
    }
    variants = [
        {"output_shape": [6, 7]},
        {"output_shape": [6, 7], "auto_pad": "SAME_UPPER"},
        {"auto_pad": "SAME_UPPER"},
        {"auto_pad": "SAME_LOWER"},
    ]
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w", "b"], [f"y{i}"], strides=[2, 2], **a)
        for i, a in enumerate(variants)
    ]
    check_nodes(nodes, inputs, static=("w", "b"), rtol=1e-4, atol=1e-5)


def test_conv_valid_and_lp_normalization_p2():
    w = R.standard_normal((3, 4, 2, 2)).astype(np.float32)
    x = X.copy()
    x[0, :, 0, 0] = 0  # a zero vector stays zero
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["conv"], auto_pad="VALID"),
        helper.make_node("LpNormalization", ["x"], ["lp"], axis=1, p=2),
    ]
    check_nodes(nodes, {"x": x, "w": w}, static=("w",), rtol=1e-4, atol=1e-5)


def test_max_pool_indices_in_both_storage_orders():
    """MaxPool's second output: flat indices into N*C*H*W (storage_order 1: column-major
    spatial dims), ties resolved to the first; ceil_mode with a last window starting past
    the input drops it."""
    x = np.round(R.standard_normal((1, 2, 5, 4)) * 2).astype(np.float32)  # rounding makes ties
    nodes = [
        helper.make_node(
            "MaxPool", ["x"], [f"y{o}", f"i{o}"], kernel_shape=[2, 2], strides=[2, 1], storage_order=o
        )
        for o in (0, 1)
    ]
    nodes.append(
        helper.make_node(
            "MaxPool", ["x"], ["c"], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1], ceil_mode=1
        )
    )
    # opset 22: ONNX's shape inference before it counts the dropped window (onnxruntime and
    # the ONNX reference do not), and from_onnx checks shapes against that inference
    check_nodes(nodes, {"x": x}, opset=22)


def test_deform_conv_with_strides_differing_per_dim_and_with_mask_and_bias():
    """DeformConv-19 with strides (2, 1) beside dilations (1, 2) and asymmetric pads, and with
    dilations (2, 1): each output dim from its own stride / dilation / pads; another with a
    modulation mask and a bias; one with two offset groups over a batch of two (the groups'
    channels joined per sample: with one sample, joining along the batch is the same memory
    order)."""
    r = np.random.default_rng(3)
    inputs = {
        "x": r.standard_normal((1, 2, 5, 6)).astype(np.float32),
        "w": r.standard_normal((3, 2, 2, 2)).astype(np.float32),
        # out: height (5 + 0 + 1 - 2) // 2 + 1 = 3, width (6 + 1 + 1 - 3) // 1 + 1 = 6
        "offset": (r.standard_normal((1, 8, 3, 6)) * 0.5).astype(np.float32),
        "offset2": (r.standard_normal((1, 8, 4, 5)) * 0.5).astype(np.float32),
        "offset3": (r.standard_normal((1, 8, 3, 5)) * 0.5).astype(np.float32),
        "b": r.standard_normal(3).astype(np.float32),
        "mask": r.random((1, 4, 4, 5)).astype(np.float32),
        "x2": r.standard_normal((2, 2, 3, 3)).astype(np.float32),
        "offset4": (r.standard_normal((2, 16, 2, 2)) * 0.5).astype(np.float32),
    }
    nodes = [
        helper.make_node(
            "DeformConv",
            ["x", "w", "offset"],
            ["strided"],
            strides=[2, 1],
            dilations=[1, 2],
            pads=[0, 1, 1, 1],
        ),
        helper.make_node("DeformConv", ["x", "w", "offset2", "b", "mask"], ["masked"]),
        helper.make_node("DeformConv", ["x", "w", "offset3"], ["dilated"], dilations=[2, 1]),
        helper.make_node("DeformConv", ["x2", "w", "offset4"], ["grouped"], offset_group=2),
    ]
    check_nodes(nodes, inputs, opset=19, static=("w", "b"), rtol=1e-4, atol=1e-5)


def test_conv_transpose_same_pads_count_the_output_padding():
    """ConvTranspose with ``auto_pad`` SAME_UPPER and ``output_padding``: the output is still
    input * stride (the ONNX operator page; onnxruntime and the reference agree), the
    ``output_padding`` only enters the total padding. The height is dynamic here; static sizes
    are in :func:`test_conv_transpose_same_pads_static_sizes`."""
    r = np.random.default_rng(4)
    x = r.standard_normal((1, 2, 3, 4)).astype(np.float32)
    w = r.standard_normal((2, 3, 3, 3)).astype(np.float32)
    node = helper.make_node(
        "ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], auto_pad="SAME_UPPER", output_padding=[1, 0]
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, "H", 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=[onnx.numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    assert want.shape == (1, 3, 6, 8)
    (got,) = from_onnx(model).to_jax()(x)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


def _same_pads_model(declare=None):
    """ConvTranspose nodes with auto_pad SAME_* and output_padding on a static input: k_eff >=
    stride (onnx 1.23's inference adds output_padding), k_eff < stride (it adds
    output_padding + k_eff - stride), dilated, and one followed by a Relu whose input
    ``value_info`` is the one onnx 1.23 infers (as in a model saved after its inference).
    Outputs are declared with symbolic sizes unless ``declare`` gives a shape to one."""
    r = np.random.default_rng(5)
    w3 = onnx.numpy_helper.from_array(r.standard_normal((2, 3, 3, 3)).astype(np.float32), "w3")
    w2 = onnx.numpy_helper.from_array(r.standard_normal((2, 3, 2, 2)).astype(np.float32), "w2")
    nodes = [
        helper.make_node(
            "ConvTranspose",
            ["x", "w3"],
            ["upper"],
            "ct_upper",
            strides=[2, 2],
            auto_pad="SAME_UPPER",
            output_padding=[1, 0],
        ),
        helper.make_node(
            "ConvTranspose",
            ["x", "w3"],
            ["lower"],
            "ct_lower",
            strides=[2, 2],
            auto_pad="SAME_LOWER",
            output_padding=[1, 1],
        ),
        helper.make_node(
            "ConvTranspose",
            ["x", "w2"],
            ["short"],
            "ct_short",
            strides=[3, 3],
            auto_pad="SAME_LOWER",
            output_padding=[1, 2],
        ),
        helper.make_node(
            "ConvTranspose",
            ["x", "w2"],
            ["dilated"],
            "ct_dilated",
            strides=[3, 2],
            dilations=[2, 1],
            auto_pad="SAME_UPPER",
            output_padding=[1, 1],
        ),
        helper.make_node("Relu", ["upper"], ["relu"], "relu"),
    ]
    names = ["relu", "lower", "short", "dilated"]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 3, 4])],
        [
            helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [f"{n}{i}" for i in range(4)])
            for n in names
        ],
        initializer=[w3, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model).graph.value_info
    model.graph.value_info.extend(v for v in inferred if v.name == "upper")  # as onnx 1.23 infers it
    if declare:
        name, shape = declare
        out = next(o for o in model.graph.output if o.name == name)
        out.CopyFrom(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape))
    return model


def test_conv_transpose_same_pads_static_sizes():
    """On static sizes too, SAME_* with output_padding gives input * stride (the operator page,
    onnxruntime), though onnx 1.23's shape inference says otherwise (and its ``value_info``
    in the file): the values match onnxruntime's."""
    model = _same_pads_model()
    assert [d.dim_value for d in model.graph.value_info[0].type.tensor_type.shape.dim] == [1, 3, 7, 8]
    x = np.random.default_rng(6).standard_normal((1, 2, 3, 4)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    assert [w.shape[2:] for w in want] == [(6, 8), (6, 8), (9, 12), (9, 8)]
    got = from_onnx(model).to_jax()(x)
    for g, e in zip(got, want, strict=True):
        assert np.asarray(g).shape == e.shape
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-4, atol=1e-5)


def test_conv_transpose_same_pads_as_the_only_node():
    """A graph whose only node is such a ConvTranspose (static sizes, output_padding): it is
    still corrected to the operator page's input * stride, as onnxruntime computes."""
    r = np.random.default_rng(7)
    x = r.standard_normal((1, 2, 3, 4)).astype(np.float32)
    w = onnx.numpy_helper.from_array(r.standard_normal((2, 3, 3, 3)).astype(np.float32), "w")
    node = helper.make_node(
        "ConvTranspose", ["x", "w"], ["y"], "ct", strides=[2, 2], auto_pad="SAME_UPPER", output_padding=[1, 0]
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 3, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", "c", "h", "w"])],
        initializer=[w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    assert want.shape == (1, 3, 6, 8)
    (got,) = from_onnx(model).to_jax()(x)
    assert np.asarray(got).shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("declare", "node", "shapes"),
    [
        (("lower", [1, 3, 7, 9]), "ct_lower", "(1, 3, 7, 9), the operator page gives (1, 3, 6, 8)"),
        (("relu", [1, 3, 7, "w"]), "ct_upper", "(1, 3, 7, 'w'), the operator page gives (1, 3, 6, 8)"),
    ],
)
def test_conv_transpose_same_pads_wrong_declared_output(declare, node, shapes):
    """A graph output declared with onnx 1.23's size of such a node (or of a value computed
    from it) is refused, naming the node and both shapes, before anything is traced."""
    with pytest.raises(
        ConversionError, match=rf"at node '{node}'.*declares output '{declare[0]}' with shape "
    ) as e:
        from_onnx(_same_pads_model(declare))
    assert shapes in str(e.value)


def test_conv_transpose_same_pads_shorter_than_stride_refused():
    """SAME_* where the dilated kernel plus output_padding is shorter than the stride: the
    page's input * stride needs negative padding, onnxruntime clamps it (a smaller output)
    and onnx.reference does not; refused rather than match one of them (here a dynamic
    height, which no shape inference check covers)."""
    w = onnx.numpy_helper.from_array(np.ones((2, 3, 1, 1), np.float32), "w")
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], "ct", strides=[2, 2], auto_pad="SAME_UPPER")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, "H", 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", "c", "h", "w"])],
        initializer=[w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    with pytest.raises(ConversionError, match=r"at node 'ct'.*axes \[0, 1\].*shorter than the stride"):
        from_onnx(model)


def test_lrn_even_size_and_average_pool_ceil_mode_with_counted_pads():
    """LRN with an even ``size`` (4): the window spans ``floor(3/2) = 1`` channel below and
    ``ceil(3/2) = 2`` above (the operator page's formula, by hand: onnxruntime refuses an even
    size); AveragePool with ``count_include_pad`` and ``ceil_mode``: the explicit pads count
    toward the divisor, the extra ceil-mode tail does not; GlobalLpPool's default ``p`` (2)."""
    x = np.random.default_rng(6).standard_normal((1, 5, 3, 8)).astype(np.float32)
    attrs = {
        "kernel_shape": [3, 3],
        "strides": [2, 2],
        "pads": [1, 1, 1, 1],
        "count_include_pad": 1,
        "ceil_mode": 1,
    }
    nodes = [
        helper.make_node("AveragePool", ["x"], ["avg"], **attrs),
        helper.make_node("GlobalLpPool", ["x"], ["glp"]),
    ]
    check_nodes(nodes, {"x": x}, opset=19, rtol=1e-5, atol=1e-5)
    model = single_node_model("LRN", {"x": x}, {"size": 4, "alpha": 0.5, "beta": 0.6, "bias": 2.0}, opset=13)
    (got,) = from_onnx(model).to_jax()(x)
    x64 = x.astype(np.float64)
    sq = np.stack([(x64[:, max(0, c - 1) : min(5, c + 3)] ** 2).sum(1) for c in range(5)], axis=1)
    np.testing.assert_allclose(np.asarray(got), x64 / (2.0 + 0.5 / 4 * sq) ** 0.6, rtol=1e-5, atol=1e-6)


def test_lrn_before_opset_13():
    """LRN-1 (opsets 1 to 12) is LRN-13's formula with the same defaults."""
    x = np.random.default_rng(7).standard_normal((1, 4, 2, 3)).astype(np.float32)
    check_node("LRN", {"x": x}, {"size": 3, "alpha": 0.5}, opset=12)


def test_normalizations_along_other_axes_and_without_bias():
    """LayerNormalization from axis -2 and 1 (the last two axes) without a bias, with and
    without its Mean and InvStdDev outputs; MeanVarianceNormalization over given axes; LpNormalization with
    ``p=1`` along axis 0 (a zero column stays zero); InstanceNormalization with its default
    epsilon; GlobalMaxPool."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x[:, 1, 2] = 0  # a zero vector along axis 0
    nodes = [
        helper.make_node(
            "LayerNormalization", ["x", "sc"], ["ln", "ln_mean", "ln_inv"], axis=-2, epsilon=1e-3
        ),
        helper.make_node("LayerNormalization", ["x", "sc"], ["ln1"], axis=1),
        helper.make_node("MeanVarianceNormalization", ["x"], ["mvn"], axes=[0, 2]),
        helper.make_node("LpNormalization", ["x"], ["lp1"], axis=0, p=1),
        helper.make_node("InstanceNormalization", ["x", "c", "cb"], ["inorm"]),
        helper.make_node("GlobalMaxPool", ["x"], ["gmax"]),
    ]
    inputs = {
        "x": x,
        "sc": rng.standard_normal((3, 4)).astype(np.float32),
        "c": rng.standard_normal(3).astype(np.float32),
        "cb": rng.standard_normal(3).astype(np.float32),
    }
    check_nodes(nodes, inputs, opset=18, static=("sc", "c", "cb"), rtol=1e-4, atol=1e-5)
