"""onnxruntime's ``com.microsoft`` contrib ops (``frontends/onnx/ops/contrib.py``) against
onnxruntime: the quantized ops ``quantize_static(QOperator)`` writes and the transformer
fusions of ``onnxruntime.transformers.optimizer``. Each group is one model (one conversion,
one session)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from converter.frontends.onnx import from_onnx
from onnx import helper, numpy_helper

MS = "com.microsoft"


def _run_both(nodes, inputs: dict, outputs: dict, inits: dict):
    """(onnxruntime's outputs, the converted function's) of a graph of ``nodes``; ``outputs``
    maps each output's name to its NumPy dtype."""
    vis = [
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for k, v in inputs.items()
    ]
    tensors = [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()]
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = None
    for _ in range(2):  # the second model declares the output shapes onnxruntime gave
        outs = [
            helper.make_tensor_value_info(
                o, helper.np_dtype_to_tensor_dtype(np.dtype(t)), None if want is None else want[i].shape
            )
            for i, (o, t) in enumerate(outputs.items())
        ]
        model = helper.make_model(helper.make_graph(nodes, "g", vis, outs, tensors), opset_imports=opsets)
        model.ir_version = 8
        want = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
            None, inputs
        )
    got = from_onnx(model).to_jax()(*inputs.values())
    return want, [np.asarray(g) for g in got]


# onnxruntime's uint8 x int8 GEMM kernels on x86 CPUs without VNNI (AVX2 only) add pairs of
# products in int16 with saturation (``vpmaddubsw``): with full 8-bit weights a pair can pass
# 32767, and onnxruntime's result depends on the CPU it runs on. Weights within 7 bits keep
# every pair in range (255 * 64 * 2 < 32768), so onnxruntime is an exact reference on every
# CPU (what ``quantize_dynamic(reduce_range=True)`` does for the same reason).


def test_quantized_contrib_ops_within_one_step_of_onnxruntime():
    rng = np.random.default_rng(0)
    u8 = lambda *s: rng.integers(0, 256, s).astype(np.uint8)  # noqa: E731
    i8 = lambda *s: rng.integers(-128, 128, s).astype(np.int8)  # noqa: E731
    # the GEMM weights within 7 bits: see the note on 8-bit GEMMs above
    i7 = lambda *s: rng.integers(-64, 64, s).astype(np.int8)  # noqa: E731
    f = np.float32
    inits = {
        "sa": f(0.031), "za": np.uint8(121), "sb": f(0.017), "zb": np.uint8(133),
        "sc": f(0.043), "zc": np.uint8(118),
        "s8": f(0.021), "z8": np.int8(-7), "sm": f(1 / 256), "zm": np.uint8(0),
        "w": i7(6, 5), "sw": rng.uniform(0.005, 0.02, 5).astype(f), "zw": np.zeros(5, np.int8),
        "bias": rng.integers(-3000, 3000, 5).astype(np.int32),
    }  # fmt: skip
    inputs = {"a": u8(2, 3, 4, 6), "b": u8(2, 3, 4, 6), "c": i8(4, 6), "m": u8(4, 6)}
    q = lambda op, ins, out, **kw: helper.make_node(op, ins, [out], domain=MS, **kw)  # noqa: E731
    nodes = [
        q("QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], "add"),
        q("QLinearMul", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], "mul"),
        q("QLinearAdd", ["c", "s8", "z8", "c", "s8", "z8", "sc", "z8"], "add8"),
        q("QLinearSigmoid", ["a", "sa", "za", "sm", "zm"], "sig"),
        q("QLinearLeakyRelu", ["c", "s8", "z8", "s8", "z8"], "leaky", alpha=0.1),
        q("QLinearSoftmax", ["a", "sa", "za", "sm", "zm"], "softmax", axis=-1, opset=13),
        q("QLinearGlobalAveragePool", ["a", "sa", "za", "sc", "zc"], "gap"),
        q("QLinearAveragePool", ["a", "sa", "za", "sc", "zc"], "avg", kernel_shape=[2, 3], strides=[2, 2]),
        q("QLinearConcat", ["sc", "zc", "a", "sa", "za", "b", "sb", "zb"], "cat", axis=1),
        q("QGemm", ["m", "sa", "za", "w", "sw", "zw", "bias", "sc", "zc"], "gemm", alpha=0.5),
        q("QGemm", ["m", "sa", "za", "w", "sw", "zw", "bias"], "gemmf"),
    ]
    names = [n.output[0] for n in nodes]
    types = dict.fromkeys(names, np.uint8) | {"add8": np.int8, "leaky": np.int8, "gemmf": np.float32}
    want, got = _run_both(nodes, inputs, types, inits)
    for name, w, g in zip(names, want, got, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        if name == "gemmf":
            np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=name)
            continue
        d = np.abs(g.astype(np.int64) - w.astype(np.int64))
        # onnxruntime's kernels use fixed-point multipliers / an exp table: a half may round apart
        assert d.max() <= 1 and d.mean() < 0.05, (name, d.max(), d.mean())


def test_transformer_fusions_match_onnxruntime():
    """float32 here; the float16 forms run in the quantization sweep (``opt-fp16`` rows).
    The optional inputs left out or given: SkipLayerNormalization without beta and bias,
    SkipSimplifiedLayerNormalization with a bias (added before the RMS norm),
    EmbedLayerNormalization without segment inputs and with explicit ``position_ids``,
    Attention without its bias."""
    dtype = np.float32
    rng = np.random.default_rng(1)
    b, s, h, n = 2, 5, 8, 2
    r = lambda *shape: rng.standard_normal(shape).astype(dtype)  # noqa: E731
    ids = rng.integers(0, 11, (b, s)).astype(np.int32)
    mask = np.ones((b, s), np.int32)
    mask[0, 3:] = 0
    inputs = {
        "x": r(b, s, h),
        "skip": r(b, s, h),
        "ids": ids,
        "seg": (ids % 2).astype(np.int32),
        "mask": mask,
        "pids": rng.integers(0, 7, (b, s)).astype(np.int32),
    }
    inits = {
        "word": r(11, h), "pos": r(7, h), "segw": r(2, h), "gamma": r(h) + 1, "beta": r(h), "bias": r(h),
        "w": r(h, 3 * h) * 0.5, "wb": r(3 * h),
    }  # fmt: skip
    ms = lambda op, ins, outs, **kw: helper.make_node(op, ins, outs, domain=MS, **kw)  # noqa: E731
    nodes = [
        ms(
            "SkipLayerNormalization",
            ["x", "skip", "gamma", "beta", "bias"],
            ["sln", "", "", "sum"],
            epsilon=1e-5,
        ),
        ms("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma"], ["rms"], epsilon=1e-5),
        ms("BiasGelu", ["x", "bias"], ["bgelu"]),
        ms("FastGelu", ["x", "bias"], ["fgelu"]),
        ms("Gelu", ["x"], ["gelu"]),
        ms("QuickGelu", ["x"], ["qgelu"], alpha=1.5),
        ms(
            "EmbedLayerNormalization",
            ["ids", "seg", "word", "pos", "segw", "gamma", "beta", "mask"],
            ["emb", "mask_index", "emb_sum"],
            epsilon=1e-5,
        ),
        ms("Attention", ["x", "w", "wb", "mask_index"], ["att_end"], num_heads=n),
        ms("Attention", ["x", "w", "wb", "mask"], ["att_causal"], num_heads=n, unidirectional=1, scale=0.3),
        ms("SkipLayerNormalization", ["x", "skip", "gamma"], ["sln_plain"], epsilon=1e-5),
        ms("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma", "bias"], ["rms_bias"], epsilon=1e-5),
        ms(
            "EmbedLayerNormalization",
            ["ids", "", "word", "pos", "", "gamma", "beta", "", "pids"],
            ["emb_plain", "plain_mask_index"],
            epsilon=1e-5,
        ),
        ms("Attention", ["x", "w"], ["att_no_bias"], num_heads=n),
    ]
    types = {o: np.int32 if o.endswith("mask_index") else dtype for n in nodes for o in n.output if o}
    want, got = _run_both(nodes, inputs, types, inits)
    tol = 1e-5
    for name, w, g in zip(types, want, got, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(
            g.astype(np.float32), w.astype(np.float32), rtol=tol, atol=tol, err_msg=name
        )


def test_embed_layer_normalization_without_a_mask_gives_a_zero_mask_index_per_row():
    """Without ``mask`` the ``mask_index`` output is ``[B]`` zeros (one per row, not per token)."""
    rng = np.random.default_rng(2)
    b, s, h = 2, 3, 4
    r = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    ids = rng.integers(0, 7, (b, s)).astype(np.int32)
    inputs = {"ids": ids, "seg": (ids % 2).astype(np.int32)}
    inits = {"word": r(7, h), "pos": r(5, h), "segw": r(2, h), "gamma": r(h) + 1, "beta": r(h)}
    node = helper.make_node(
        "EmbedLayerNormalization",
        ["ids", "seg", "word", "pos", "segw", "gamma", "beta"],
        ["emb", "mask_index"],
        domain=MS,
        epsilon=1e-5,
    )
    want, got = _run_both([node], inputs, {"emb": np.float32, "mask_index": np.int32}, inits)
    assert want[1].shape == (b,)
    for name, w, g in zip(["emb", "mask_index"], want, got, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)


def test_unsupported_contrib_inputs_raise_naming_the_node():
    from converter.errors import OpConversionError

    node = helper.make_node(
        "Attention", ["x", "w", "", "", "past"], ["y", "present"], domain=MS, name="att0", num_heads=2
    )
    f = 1  # TensorProto.FLOAT
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", f, [1, 2, 4]),
            helper.make_tensor_value_info("past", f, [2, 1, 2, 3, 2]),
        ],
        [
            helper.make_tensor_value_info("y", f, [1, 2, 4]),
            helper.make_tensor_value_info("present", f, None),
        ],
        [numpy_helper.from_array(np.zeros((4, 12), np.float32), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    with pytest.raises(OpConversionError, match="(?s)att0.*past"):
        from_onnx(model, check=False)


def test_dynamic_quantize_lstm_within_activation_quantization_of_onnxruntime():
    """quantize_dynamic's LSTM: int8 weights ``[D, I, 4H]`` per direction and column; the
    converter dequantizes them, onnxruntime also quantizes the activations (uint8) for each
    product: equal to that rounding."""
    rng = np.random.default_rng(2)
    d, i, h, s, b = 2, 3, 4, 5, 2
    inits = {
        # within 7 bits: see the note on 8-bit GEMMs above
        "w": rng.integers(-64, 64, (d, i, 4 * h)).astype(np.int8),
        "r": rng.integers(-64, 64, (d, h, 4 * h)).astype(np.int8),
        "bias": rng.standard_normal((d, 8 * h)).astype(np.float32) * 0.1,
        "ws": rng.uniform(0.002, 0.01, (d, 4 * h)).astype(np.float32),
        "wz": np.zeros((d, 4 * h), np.int8),
        "rs": rng.uniform(0.002, 0.01, (d,)).astype(np.float32),
        "rz": np.zeros((d,), np.int8),
    }
    node = helper.make_node(
        "DynamicQuantizeLSTM",
        ["x", "w", "r", "bias", "", "", "", "", "ws", "wz", "rs", "rz"],
        ["y", "yh", "yc"],
        domain=MS,
        hidden_size=h,
        direction="bidirectional",
    )
    x = rng.standard_normal((s, b, i)).astype(np.float32)
    want, got = _run_both([node], {"x": x}, dict.fromkeys(["y", "yh", "yc"], np.float32), inits)
    for w, g in zip(want, got, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, atol=2e-2 * (1 + np.abs(w).max()))


def test_attention_with_end_and_start_mask_index_matches_onnxruntime():
    """A 1-D ``mask_index`` of ``2 * batch`` entries holds the end then the start position of
    each row's valid keys: keys before the start are masked too."""
    rng = np.random.default_rng(2)
    b, s, h = 2, 5, 8
    inputs = {
        "x": rng.standard_normal((b, s, h)).astype(np.float32),
        "mask_index": np.array([4, 5, 1, 2], np.int32),
    }
    inits = {
        "w": (rng.standard_normal((h, 3 * h)) * 0.5).astype(np.float32),
        "wb": rng.standard_normal(3 * h).astype(np.float32),
    }
    node = helper.make_node("Attention", ["x", "w", "wb", "mask_index"], ["y"], domain=MS, num_heads=2)
    (want,), (got,) = _run_both([node], inputs, {"y": np.float32}, inits)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_attention_with_attention_bias_and_smaller_v_matches_onnxruntime():
    """Attention's ``attention_bias`` input ``[1, N, S, T]`` is added to the scaled scores
    (broadcast over the batch), and ``qkv_hidden_sizes`` gives V a width (4) other than Q's
    and K's (8): the output has V's width; scale defaults to ``1/sqrt(head_size)``."""
    rng = np.random.default_rng(3)
    b, s, h, n = 2, 3, 8, 2
    inputs = {
        "x": rng.standard_normal((b, s, h)).astype(np.float32),
        "ab": (rng.standard_normal((1, n, s, s)) * 2).astype(np.float32),
    }
    inits = {
        "w": (rng.standard_normal((h, 20)) * 0.5).astype(np.float32),
        "wb": rng.standard_normal(20).astype(np.float32),
    }
    node = helper.make_node(
        "Attention", ["x", "w", "wb", "", "", "ab"], ["y"], domain=MS, num_heads=n, qkv_hidden_sizes=[8, 8, 4]
    )
    (want,), (got,) = _run_both([node], inputs, {"y": np.float32}, inits)
    assert got.shape == want.shape == (b, s, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_attention_asked_for_present_without_past_raises_naming_the_node():
    """A ``present`` output (key-value state) is refused also when no ``past`` input is given."""
    from converter.errors import OpConversionError

    node = helper.make_node("Attention", ["x", "w"], ["y", "present"], domain=MS, name="att1", num_heads=2)
    f = 1  # TensorProto.FLOAT
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", f, [1, 2, 4])],
        [helper.make_tensor_value_info("y", f, [1, 2, 4]), helper.make_tensor_value_info("present", f, None)],
        [numpy_helper.from_array(np.zeros((4, 12), np.float32), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    with pytest.raises(OpConversionError, match="(?s)att1.*present"):
        from_onnx(model, check=False)


def test_contrib_op_defaults_and_layouts_match_onnxruntime():
    """The modes the first tests leave out: QLinearSoftmax of an opset-11 Softmax (2-D
    coercion at ``axis=1``: softmax over all trailing axes), QLinearGlobalAveragePool with
    ``channels_last``, QLinearLeakyRelu's default alpha (0.01), QGemm with ``transA`` and
    ``transB`` and per-tensor weight scale, QuickGelu's default alpha (1.702), FastGelu
    without bias."""
    rng = np.random.default_rng(4)
    f = np.float32
    inits = {
        "sa": f(0.031), "za": np.uint8(121), "sc": f(0.043), "zc": np.uint8(118),
        "s8": f(0.5), "z8": np.int8(3), "sm": f(1 / 256), "zm": np.uint8(0),
        "wt": rng.integers(-64, 64, (5, 6)).astype(np.int8), "sw": f(0.011), "zw": np.int8(0),
    }  # fmt: skip
    inputs = {
        "a": rng.integers(0, 256, (2, 3, 2, 2)).astype(np.uint8),
        "c": rng.integers(-128, 128, (4, 6)).astype(np.int8),
        "mt": rng.integers(0, 256, (6, 4)).astype(np.uint8),
        "x": (rng.standard_normal((2, 5)) * 2).astype(np.float32),
    }
    q = lambda op, ins, out, **kw: helper.make_node(op, ins, [out], domain=MS, **kw)  # noqa: E731
    nodes = [
        q("QLinearSoftmax", ["a", "sa", "za", "sm", "zm"], "softmax11", axis=1, opset=11),
        q("QLinearGlobalAveragePool", ["a", "sa", "za", "sc", "zc"], "gap_nhwc", channels_last=1),
        q("QLinearLeakyRelu", ["c", "s8", "z8", "s8", "z8"], "leaky"),
        q("QGemm", ["mt", "sa", "za", "wt", "sw", "zw"], "gemm_t", transA=1, transB=1),
        q("QuickGelu", ["x"], "qgelu"),
        q("FastGelu", ["x"], "fgelu"),
    ]
    names = [n.output[0] for n in nodes]
    types = dict.fromkeys(names, np.uint8) | {"leaky": np.int8, "gemm_t": f, "qgelu": f, "fgelu": f}
    want, got = _run_both(nodes, inputs, types, inits)
    for name, w, g in zip(names, want, got, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        if w.dtype == f:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=name)
            continue
        d = np.abs(g.astype(np.int64) - w.astype(np.int64))
        assert d.max() <= 1 and d.mean() < 0.1, (name, d.max(), d.mean())


_REFUSED = {
    "attention-rotary": (
        helper.make_node("Attention", ["x3", "w"], ["y"], domain=MS, name="n", num_heads=2, do_rotary=1),
        "rotary",
    ),
    "attention-3d-mask-index": (
        helper.make_node("Attention", ["x3", "w", "", "m3"], ["y"], domain=MS, name="n", num_heads=2),
        "3-D",
    ),
    "qlinear-average-pool-channels-last": (
        helper.make_node(
            "QLinearAveragePool",
            ["x4", "s", "z", "s", "z"],
            ["y"],
            domain=MS,
            name="n",
            kernel_shape=[2, 2],
            channels_last=1,
        ),
        "channels_last",
    ),
}


@pytest.mark.parametrize(("node", "what"), list(_REFUSED.values()), ids=list(_REFUSED))
def test_contrib_modes_outside_the_rules_are_refused_naming_the_node(node, what):
    """Attention with rotary embeddings or a 3-D mask_index, QLinearAveragePool with
    ``channels_last``: refused at conversion, naming the node and what is missing."""
    from converter.errors import OpConversionError

    f = 1  # TensorProto.FLOAT
    vis = {
        "x3": helper.make_tensor_value_info("x3", f, [1, 2, 4]),
        "m3": helper.make_tensor_value_info("m3", 6, [1, 2, 2]),
        "x4": helper.make_tensor_value_info("x4", 2, [1, 2, 2, 2]),
    }
    inits = {"w": np.zeros((4, 12), np.float32), "s": np.float32(0.1), "z": np.uint8(0)}
    graph = helper.make_graph(
        [node],
        "g",
        [vis[i] for i in node.input if i in vis],
        [helper.make_tensor_value_info("y", 0, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items() if k in node.input],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    with pytest.raises(OpConversionError, match=f"(?s)'n'.*{what}"):
        from_onnx(model, check=False)
