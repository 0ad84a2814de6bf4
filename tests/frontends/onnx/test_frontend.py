"""``from_onnx`` itself: parameters, symbolic dims, external data, version dispatch, control
flow lowering, provenance, and the one-error-for-every-bad-node rule."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from converter.frontends.onnx import StaticValueRequired, from_onnx
from converter.frontends.onnx.registry import lookup
from onnx import TensorProto, helper, numpy_helper

from converter.errors import ParseError, UnsupportedOpError

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _linear(opset=18):
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 10, "w")
    b = numpy_helper.from_array(np.ones(4, np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Add", ["h", "b"], ["y"]),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", F, ["N", 3])],
        [helper.make_tensor_value_info("y", F, ["N", 4])],
        [w, b],
        opset,
    )


def test_initializers_are_parameters_and_dims_specialize():
    m = from_onnx(_linear(), dims={"N": 2})
    assert [(p.name, p.kind, p.shape) for p in m.signature.params] == [
        ("w", "parameter", (3, 4)),
        ("b", "parameter", (4,)),
    ]
    assert m.signature.inputs[0].shape == (2, 3)
    assert m.meta["specialized_dims"] == {"N": 2}
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    (y,) = m.to_jax()(x)
    np.testing.assert_allclose(np.asarray(y), x @ m.params["w"] + 1, rtol=1e-6, atol=1e-6)


def test_symbolic_dim_without_size_stays_dynamic():
    m = from_onnx(_linear())
    assert m.signature.inputs[0].shape == ("N", 3) and m.signature.outputs[0].shape == ("N", 4)
    assert m.meta["dynamic_dims"] == ["N"] and "tensor<?x3xf32>" in m.text()
    f = m.to_jax()
    for n in (1, 4):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        (y,) = f(x)
        np.testing.assert_allclose(np.asarray(y), x @ m.params["w"] + 1, rtol=1e-6, atol=1e-6)


def test_provenance_names_node():
    text = from_onnx(_linear(), dims={"N": 1}).text()
    assert "MatMul[mm]" in text


def test_external_data_loads(tmp_path):
    model = _linear()
    path = tmp_path / "m.onnx"
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    assert (tmp_path / "weights.bin").exists()
    m = from_onnx(str(path), dims={"N": 1})
    np.testing.assert_array_equal(m.params["w"], np.arange(12, dtype=np.float32).reshape(3, 4) / 10)


def test_dispatch_picks_schema_version_at_opset():
    assert lookup("Add", "", 12)[0] == 7
    assert lookup("Add", "", 23)[0] == 14
    assert lookup("ReduceSum", "", 12)[0] == 11 and lookup("ReduceSum", "", 13)[0] == 13


def test_every_unsupported_node_in_one_error():
    nodes = [
        helper.make_node("StringNormalizer", ["s"], ["t"], name="norm1"),
        helper.make_node("Frobnicate", ["i"], ["v"], name="frob", domain="com.example"),
        helper.make_node("StringNormalizer", ["s"], ["u"], name="norm2"),
    ]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("s", TensorProto.STRING, [2]),
            helper.make_tensor_value_info("i", F, [2]),
        ],
        [
            helper.make_tensor_value_info(n, t, [2])
            for n, t in (("t", TensorProto.STRING), ("v", F), ("u", TensorProto.STRING))
        ],
    )
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedOpError) as info:
        from_onnx(model)
    msg = str(info.value)
    assert "ai.onnx::StringNormalizer-10 (x2" in msg and "'norm1'" in msg and "'norm2'" in msg
    assert "com.example::Frobnicate-1" in msg and "'frob'" in msg


def test_opset_too_new_names_nodes():
    model = _linear(opset=18)
    model.opset_import[0].version = 99
    with pytest.raises((UnsupportedOpError, ParseError)) as info:
        from_onnx(model, dims={"N": 1})
    assert "99" in str(info.value)


def test_invalid_graph_is_parse_error():
    model = _model(
        [helper.make_node("Add", ["x", "missing"], ["y"], name="bad")],
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("y", F, [2])],
    )
    with pytest.raises(ParseError, match="missing"):
        from_onnx(model)


def _big_weight_model(w):
    """``y = MatMul(x, w) + 1`` with ``w`` a (256, 128) float32 initializer (128 KiB: above the
    size the checker and shape inference are spared)."""
    return _model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "one"], ["y"])],
        [helper.make_tensor_value_info("x", F, [2, 256])],
        [helper.make_tensor_value_info("y", F, [2, 128])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.ones((1,), np.float32), "one")],
    )


def test_big_weights_skip_the_checker_but_not_their_checks():
    """The checker and shape inference read a skeleton without the big weights: shapes are
    still inferred from their types, results match onnxruntime, and a weight whose data does
    not fit its dims is still a ParseError naming it."""
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 128), dtype=np.float32)
    x = rng.standard_normal((2, 256), dtype=np.float32)
    model = _big_weight_model(w)
    module = from_onnx(model)
    assert [tuple(o.shape) for o in module.signature.outputs] == [(2, 128)]
    (got,) = module.to_jax()(x)
    (want,) = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    bad = _big_weight_model(w)
    bad.graph.initializer[0].raw_data = w.tobytes()[:-4]
    with pytest.raises(ParseError, match="initializer 'w' does not fit dims"):
        from_onnx(bad)


def test_shape_input_from_graph_input_needs_static_value():
    model = _model(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
        [
            helper.make_tensor_value_info("x", F, [2, 3]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", F, [3, 2])],
    )
    with pytest.raises(StaticValueRequired, match="'s'"):
        from_onnx(model, values_at_call=False)
    m = from_onnx(model, static_inputs={"s": np.array([3, 2])})
    (y,) = m.to_jax()(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert y.shape == (3, 2)


def _resize(scales_from_input: bool):
    """Resize whose float scales are an initializer (times a graph input ``k`` when
    ``scales_from_input``): a rule needs the scales' value at conversion time."""
    scales = numpy_helper.from_array(np.array([1, 1, 2, 1.5], np.float32), "scales")
    nodes = [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest")]
    inputs = [helper.make_tensor_value_info("x", F, [1, 2, 3, 4])]
    if scales_from_input:
        nodes.insert(0, helper.make_node("Mul", ["scales", "k"], ["sc"]))
        inputs.append(helper.make_tensor_value_info("k", F, [4]))
    else:
        nodes.insert(0, helper.make_node("Identity", ["scales"], ["sc"]))
    return _model(nodes, inputs, [helper.make_tensor_value_info("y", F, None)], [scales])


def test_float_initializer_a_rule_needs_is_folded():
    """Float Resize scales held in an initializer convert (their value is folded into the
    program; the initializer stays a parameter); the result matches onnxruntime."""
    import onnxruntime as ort

    model = _resize(scales_from_input=False)
    x = np.random.default_rng(0).random((1, 2, 3, 4), dtype=np.float32)
    (want,) = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    m = from_onnx(model, check=False)
    assert [p.name for p in m.signature.params] == ["scales"]
    (y,) = m.to_jax()(x)
    np.testing.assert_array_equal(np.asarray(y), want)
    assert want.shape == (1, 2, 6, 6)


def test_value_from_initializer_and_input_still_needs_the_input():
    """Folding initializers cannot make scales that also come from graph input ``k``
    static: the error names the node's input, as before."""
    with pytest.raises(StaticValueRequired, match="'sc'"):
        from_onnx(_resize(scales_from_input=True), check=False, values_at_call=False)


def _body(op):
    return helper.make_graph(
        [helper.make_node(op, ["a"], ["o"])], "b", [], [helper.make_tensor_value_info("o", F, [2])]
    )


def test_if_lowers_to_stablehlo_control_flow():
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node(
            "If",
            ["c"],
            ["y"],
            then_branch=helper.make_graph(
                [helper.make_node("Neg", ["x"], ["o"])], "t", [], [helper.make_tensor_value_info("o", F, [2])]
            ),
            else_branch=helper.make_graph(
                [helper.make_node("Abs", ["x"], ["o2"])],
                "e",
                [],
                [helper.make_tensor_value_info("o2", F, [2])],
            ),
        ),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("y", F, [2])],
        [numpy_helper.from_array(np.array(0, np.float32), "zero")],
    )
    m = from_onnx(model)
    assert "stablehlo.case" in m.text() or "stablehlo.if" in m.text()
    f = m.to_jax()
    np.testing.assert_array_equal(np.asarray(f(np.array([1.0, 2.0], np.float32))[0]), [-1.0, -2.0])
    np.testing.assert_array_equal(np.asarray(f(np.array([-1.0, -2.0], np.float32))[0]), [1.0, 2.0])


def test_loop_with_dynamic_condition_is_a_while():
    body = helper.make_graph(
        [helper.make_node("Add", ["v", "one"], ["v2"]), helper.make_node("Less", ["v2", "lim"], ["c2"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", F, []),
        ],
        [
            helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v2", F, []),
        ],
    )
    nodes = [helper.make_node("Loop", ["", "cond", "v0"], ["vout"], body=body)]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("v0", F, []),
            helper.make_tensor_value_info("lim", F, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("vout", F, [])],
        [numpy_helper.from_array(np.array(1, np.float32), "one")],
    )
    m = from_onnx(model)
    assert "stablehlo.while" in m.text()
    (out,) = m.to_jax()(np.float32(0.5), np.float32(4.0), np.bool_(True))
    assert float(out) == 4.5


def _fill_weights() -> onnx.ModelProto:
    """``y = x @ W`` with ``W = ConstantOfShape([64, 32], 0.02)`` (2,048 elements, as the
    light models build their weights), and ``Upsample`` by scales from a ``Constant``."""
    nodes = [
        helper.make_node(
            "ConstantOfShape",
            ["wshape"],
            ["W"],
            value=numpy_helper.from_array(np.array([0.02], np.float32)),
        ),
        helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
        helper.make_node(
            "Constant", [], ["scales"], value=numpy_helper.from_array(np.array([1, 2], np.float32))
        ),
        helper.make_node("Upsample", ["h", "scales"], ["y"], name="up"),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [3, 64])],
        [helper.make_tensor_value_info("y", F, [3, 64])],
        [numpy_helper.from_array(np.array([64, 32], np.int64), "wshape")],
        opset=9,
    )


def test_large_folded_tensors_are_constant_parameters(monkeypatch):
    m = from_onnx(_fill_weights())
    # the baked shape initializer and the lifted fill are constants; only W is an argument
    assert [(p.name, p.kind, p.shape) for p in m.signature.params] == [
        ("wshape", "constant", (2,)),
        ("W", "constant", (64, 32)),
    ]
    assert m.signature.kept_var_idx == (1, 2)
    assert "dense<2.000000e-02>" not in m.text(debug_info=False)  # not a splat literal
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    want = np.repeat(x @ np.full((64, 32), 0.02, np.float32), 2, axis=1)
    np.testing.assert_allclose(np.asarray(m.to_jax()(x)[0]), want, rtol=1e-5)
    # a rule that needs a lifted value at conversion time (Upsample's scales) still gets it
    monkeypatch.setattr("converter.frontends.onnx.convert.LIFT_MIN_ELEMENTS", 2)
    m = from_onnx(_fill_weights())
    assert {p.name for p in m.signature.params if p.kind == "constant"} == {"wshape", "W", "scales"}
    np.testing.assert_allclose(np.asarray(m.to_jax()(x)[0]), want, rtol=1e-5)


def test_sequence_erase_and_concat_from_sequence():
    """SequenceErase (position given, and default: the last) then ConcatFromSequence (an
    existing axis, and ``new_axis``), against onnxruntime."""
    import onnxruntime as ort

    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
        helper.make_node("SequenceErase", ["s", "pos"], ["s1"]),
        helper.make_node("SequenceErase", ["s1"], ["s2"]),
        helper.make_node("ConcatFromSequence", ["s1"], ["y0"], axis=1),
        helper.make_node("ConcatFromSequence", ["s1"], ["y1"], axis=-1, new_axis=1),
        helper.make_node("ConcatFromSequence", ["s2"], ["y2"], axis=0),
    ]
    ins = [helper.make_tensor_value_info(n, F, [2, 3]) for n in "abc"]
    outs = [helper.make_tensor_value_info(f"y{i}", F, None) for i in range(3)]
    pos = numpy_helper.from_array(np.array(-3, np.int64), "pos")
    model = onnx.shape_inference.infer_shapes(_model(nodes, ins, outs, [pos], opset=18))
    model.ir_version = 8
    rng = np.random.default_rng(5)
    feeds = {n: rng.standard_normal((2, 3)).astype(np.float32) for n in "abc"}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )
    got = from_onnx(model).to_jax()(*feeds.values())
    assert len(got) == len(want) == 3
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_unsorted_nodes_are_sorted_like_onnxruntime():
    """``onnxruntime.transformers.float16`` writes its input/output Casts after the nodes
    reading them; onnxruntime sorts such a file, so does from_onnx (the If branch reads an
    outer value computed after it in the file)."""
    import onnxruntime as ort

    then = helper.make_graph(
        [helper.make_node("Identity", ["h16"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", F, None)],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["h16"], ["e"])], "else", [], [helper.make_tensor_value_info("e", F, None)]
    )
    nodes = [
        helper.make_node("If", ["c"], ["y32"], then_branch=then, else_branch=other),
        helper.make_node("Cast", ["y32"], ["y"], to=TensorProto.FLOAT16),
        helper.make_node("Relu", ["x16"], ["h16"]),
        helper.make_node("Cast", ["x"], ["x16"], to=F),
    ]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("x", F, [3]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [3])],
    )
    x = np.array([-1.5, 0.25, 2.0], np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    f = from_onnx(model).to_jax()
    for c in (True, False):
        (want,) = sess.run(None, {"x": x, "c": np.array(c)})
        (got,) = f(x, np.array(c))
        np.testing.assert_array_equal(np.asarray(got), want)
    assert [n.op_type for n in model.graph.node][0] == "If"  # the caller's model is not reordered


def test_a_cycle_of_nodes_is_refused_by_the_checker_not_looped_on():
    """Two nodes reading each other's outputs can never be ordered: the sort leaves them where
    the order ends and the checker's error names the graph's problem, a ParseError (no endless
    sort, no conversion)."""
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"]),
        helper.make_node("Neg", ["a"], ["b"]),
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    model = _model(
        nodes, [helper.make_tensor_value_info("x", F, [3])], [helper.make_tensor_value_info("y", F, [3])]
    )
    with pytest.raises(ParseError, match="invalid ONNX model: Nodes in a graph must be topologically sorted"):
        from_onnx(model)


def test_unsorted_nodes_read_in_a_nested_subgraph_are_sorted_first():
    """A value computed after an If in the file that only an If nested in its branch reads
    (a subgraph's subgraph): sorted before the outer If, as onnxruntime does."""
    import onnxruntime as ort

    def branch(name, op, src):
        return helper.make_graph(
            [helper.make_node(op, [src], [name])], name, [], [helper.make_tensor_value_info(name, F, None)]
        )

    nested = helper.make_node(
        "If", ["c"], ["t"], then_branch=branch("t1", "Identity", "h"), else_branch=branch("t2", "Neg", "h")
    )
    then = helper.make_graph([nested], "then", [], [helper.make_tensor_value_info("t", F, None)])
    nodes = [
        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=branch("e", "Neg", "x")),
        helper.make_node("Relu", ["x"], ["h"]),
    ]
    ins = [
        helper.make_tensor_value_info("x", F, [3]),
        helper.make_tensor_value_info("c", TensorProto.BOOL, []),
    ]
    model = _model(nodes, ins, [helper.make_tensor_value_info("y", F, [3])])
    x = np.array([-1.5, 0.25, 2.0], np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    f = from_onnx(model).to_jax()
    for c in (True, False):
        (want,) = sess.run(None, {"x": x, "c": np.array(c)})
        np.testing.assert_array_equal(np.asarray(f(x, np.array(c))[0]), want)


def test_supported_ops_lists_each_op_once_with_its_rule_versions_sorted():
    from converter.frontends.onnx import supported_ops
    from converter.frontends.onnx.registry import ONNX_RULES

    ops = supported_ops()
    assert list(ops) == sorted(ops)
    add = sorted(v for d, op, v in ONNX_RULES.keys() if (d, op) == ("ai.onnx", "Add"))
    assert ops[("ai.onnx", "Add")] == add
    assert ops[("ai.onnx", "Abs")] == [6, 13]
    assert sum(map(len, ops.values())) == len(ONNX_RULES)


def test_each_rule_takes_every_attribute_of_each_version_it_serves():
    """A rule registered for a schema version takes each attribute that version defines: an
    attribute it does not know means the version is not the one the rule was written for
    (Gemm-6's ``broadcast``, were Gemm's rule to start at 6, not 7) or one that added an
    attribute the rule ignores (Range-27's ``stash_type``)."""
    import inspect

    from converter.frontends.onnx.registry import ONNX_RULES

    unknown = []
    for domain, op, version in ONNX_RULES.keys():
        params = inspect.signature(ONNX_RULES.get((domain, op, version))).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            continue
        if not onnx.defs.has(op, "" if domain == "ai.onnx" else domain):
            continue  # a contrib op onnx has no schema of (com.microsoft)
        schema = onnx.defs.get_schema(op, version, "" if domain == "ai.onnx" else domain)
        assert schema.since_version == version, (domain, op, version)
        unknown += [f"{domain}::{op}-{version}.{a}" for a in schema.attributes if a not in params]
    assert not unknown


def _three_dims_named_apart():
    return _model(
        [helper.make_node("Sum", ["a", "b", "c"], ["y"], name="sum")],
        [helper.make_tensor_value_info(n, F, [d]) for n, d in zip("abc", ["s0", "s1", "s2"], strict=True)],
        [helper.make_tensor_value_info("y", F, ["s0"])],
    )


def test_bytes_model_and_three_dims_unified_into_the_first():
    """A serialized model converts; Sum relates s0, s1, s2 pairwise: the third pair is already
    one dimension once the first two are unified (no self-alias ``s0 == s0``)."""
    from converter.errors import DimensionsUnifiedWarning

    with pytest.warns(DimensionsUnifiedWarning, match=r"assumed s1 == s0, s2 == s0 \("):
        m = from_onnx(_three_dims_named_apart().SerializeToString())
    assert m.meta["unified_dims"] == {"s1": "s0", "s2": "s0"}
    a, b, c = (np.arange(3, dtype=np.float32) * k for k in (1, 2, 4))
    np.testing.assert_array_equal(np.asarray(m.to_jax()(a, b, c)[0]), a + b + c)


def _local_function(name, nodes, domain="local"):
    return helper.make_function(
        domain, name, ["fx"], ["fy"], nodes, [helper.make_opsetid("", 18), helper.make_opsetid(domain, 1)]
    )


def test_check_supported_reads_local_function_bodies_and_graphs_attributes():
    """Nodes inside local functions and inside a GRAPHS attribute are checked too; a call of
    another local function is not an op to look up."""
    from converter.frontends.onnx import check_supported

    inner = helper.make_graph(
        [helper.make_node("NoSuchOpA", ["x"], ["z"], name="in_graphs")],
        "inner",
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("z", F, [2])],
    )
    f = _local_function(
        "f",
        [
            helper.make_node("g", ["fx"], ["t"], domain="local", name="call_g"),
            helper.make_node("NoSuchOpB", ["t"], ["fy"], name="bad_in_f"),
        ],
    )
    g = _local_function("g", [helper.make_node("Relu", ["fx"], ["fy"], name="relu")])
    model = _model(
        [
            helper.make_node("f", ["x"], ["h"], domain="local", name="call_f"),
            helper.make_node("Custom", ["h"], ["y"], domain="x.custom", name="holder", bodies=[inner]),
        ],
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("y", F, [2])],
    )
    model.opset_import.extend([helper.make_opsetid("local", 1), helper.make_opsetid("x.custom", 1)])
    model.functions.extend([f, g])
    with pytest.raises(UnsupportedOpError) as info:
        check_supported(model)
    text = str(info.value)
    assert "'f/bad_in_f'" in text and "NoSuchOpB" in text
    assert "'in_graphs'" in text and "NoSuchOpA" in text
    assert "'holder'" in text and "x.custom::Custom" in text
    assert "call_f" not in text and "call_g" not in text and "relu" not in text


def test_inputs_of_types_stablehlo_cannot_hold_are_conversion_errors():
    from converter.errors import ConversionError

    strings = _model(
        [helper.make_node("Identity", ["s"], ["y"])],
        [helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, [2])],
    )
    with pytest.raises(ConversionError, match="'s' has dtype object, which StableHLO cannot hold"):
        from_onnx(strings)
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, [2]))
    sequence = _model(
        [helper.make_node("SequenceLength", ["s"], ["y"])],
        [helper.make_value_info("s", seq), helper.make_value_info("t", seq)],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [])],
    )
    with pytest.raises(ConversionError, match="input 's' is a sequence_type, not a tensor\n  input 't'"):
        from_onnx(sequence)


def test_empty_optional_output_and_none_static_input():
    """An empty optional graph output is None; a static input given as None is an omitted
    optional input (Clip without its min)."""
    opt = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2]))
    empty = _model(
        [helper.make_node("Optional", [], ["o"], type=helper.make_tensor_type_proto(F, [2]))],
        [],
        [helper.make_value_info("o", opt)],
    )
    m = from_onnx(empty)
    assert m.to_jax()() == (None,) and m.signature.out_tree["children"] == [{"kind": "none"}]
    clip = _model(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
        [helper.make_tensor_value_info(n, F, s) for n, s in (("x", [3]), ("lo", []), ("hi", []))],
        [helper.make_tensor_value_info("y", F, [3])],
    )
    m = from_onnx(clip, static_inputs={"lo": None, "hi": np.float32(0.5)})
    assert [s.name for s in m.signature.inputs] == ["x"]
    x = np.array([-3, 0.25, 2], np.float32)
    np.testing.assert_array_equal(np.asarray(m.to_jax()(x)[0]), np.minimum(x, 0.5))


def test_shape_inference_failure_is_not_fatal(monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("inference broke")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", fail)
    m = from_onnx(_linear(), dims={"N": 1})
    x = np.ones((1, 3), np.float32)
    np.testing.assert_allclose(np.asarray(m.to_jax()(x)[0]), x @ m.params["w"] + 1, rtol=1e-6)


def test_value_dependent_graph_with_a_sequence_output_raises_static_value_required():
    """A shape read from a graph input makes a value-specialized model, except when a graph
    output is a sequence (which that model does not return): then StaticValueRequired."""
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))
    model = _model(
        [
            helper.make_node("Reshape", ["x", "shape"], ["y"], name="view"),
            helper.make_node("SequenceConstruct", ["y"], ["s"], name="seq"),
        ],
        [
            helper.make_tensor_value_info("x", F, [4]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_value_info("s", seq)],
    )
    with pytest.raises(StaticValueRequired, match="shape"):
        from_onnx(model)
    m = from_onnx(model, static_inputs={"shape": np.array([2, 2])})
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(m.to_jax()(x)[0][0]), x.reshape(2, 2))


def test_a_node_failing_at_fold_time_is_reported_naming_it():
    from converter.errors import OpConversionError

    c = numpy_helper.from_array(np.arange(6, dtype=np.int64), "c")
    shape = numpy_helper.from_array(np.array([4], np.int64), "shape")
    model = _model(
        [helper.make_node("Reshape", ["c", "shape"], ["y"], name="bad_view")],
        [],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [4])],
        [c, shape],
    )
    with pytest.raises(OpConversionError, match="'bad_view'"):
        from_onnx(model, check=False)


def test_a_value_info_of_an_unknown_element_type_is_ignored():
    model = _linear()
    model.graph.value_info.append(helper.make_tensor_value_info("h", F, ["N", 4]))
    model.graph.value_info[-1].type.tensor_type.elem_type = 99  # no TensorProto.DataType
    m = from_onnx(model, dims={"N": 1}, check=False)
    x = np.ones((1, 3), np.float32)
    np.testing.assert_allclose(np.asarray(m.to_jax()(x)[0]), x @ m.params["w"] + 1, rtol=1e-6)


def test_attribute_values_decode_to_python_and_numpy():
    """Strings (one or a list) as str, tensors (one or a list) as arrays, an empty list as an
    empty list, graphs as GraphProto (ONNX's AttributeProto types)."""
    from converter.frontends.onnx.graph import decode_attribute

    t = numpy_helper.from_array(np.array([1.5, 2.5], np.float32))
    g = helper.make_graph([], "sub", [], [])
    assert decode_attribute(helper.make_attribute("s", "nearest")) == "nearest"
    assert decode_attribute(helper.make_attribute("ss", ["a", "bc"])) == ["a", "bc"]
    assert decode_attribute(helper.make_attribute("s1", ["a"])) == ["a"]
    np.testing.assert_array_equal(decode_attribute(helper.make_attribute("t", t)), [1.5, 2.5])
    assert decode_attribute(helper.make_attribute("t1", [t]))[0].tolist() == [1.5, 2.5]
    got = decode_attribute(helper.make_attribute("ts", [t, t]))
    assert isinstance(got, list) and [a.tolist() for a in got] == [[1.5, 2.5], [1.5, 2.5]]
    assert decode_attribute(helper.make_attribute("e", [], attr_type=onnx.AttributeProto.STRINGS)) == []
    assert decode_attribute(helper.make_attribute("is", [3, -1])) == [3, -1]
    assert decode_attribute(helper.make_attribute("g", g)) == g


def test_node_context_defaults_past_the_last_input_and_output():
    """``static(i)`` of an input the node omits (past the end, or an empty name) gives the
    default; ``out_dtype``/``out_shape`` of an output past the end give None; of one shape
    inference typed, its dtype and shape."""
    from converter.frontends.onnx.graph import GraphRunner, NodeContext

    runner = GraphRunner({"ai.onnx": 18}, {"y": (np.dtype(np.int32), (2, "N"))})
    node = helper.make_node("TopK", ["x", "k"], ["y"])
    ctx = NodeContext(runner, node, 11, 18, [np.zeros(3, np.float32), np.array([2])])
    assert ctx.static(1).tolist() == [2] and ctx.static(2, "dflt") == "dflt"
    assert NodeContext(runner, node, 11, 18, [np.zeros(3), None]).static(1, 7) == 7
    assert ctx.out_dtype(0) == np.int32 and ctx.out_shape(0) == (2, "N")
    assert ctx.out_dtype(1) is None and ctx.out_shape(1) is None and ctx.num_outputs == 1


def test_type_protos_of_runtime_values():
    """What a context-dependent function body is expanded for: a tensor's element type and
    shape, a sequence's element type (none for an empty sequence), nothing for None."""
    from converter.frontends.onnx.graph import _type_proto

    t = _type_proto(np.zeros((2, 0, 3), np.int8))
    assert t.tensor_type.elem_type == TensorProto.INT8
    assert [d.dim_value for d in t.tensor_type.shape.dim] == [2, 0, 3]
    s = _type_proto([np.zeros((), np.float16)])
    assert s.sequence_type.elem_type.tensor_type.elem_type == TensorProto.FLOAT16
    assert len(s.sequence_type.elem_type.tensor_type.shape.dim) == 0
    assert _type_proto([]).HasField("sequence_type") is False and _type_proto(None) == onnx.TypeProto()


def test_a_subgraph_given_the_wrong_number_of_inputs_names_it():
    """A graph's initializers are not among the inputs it takes (ONNX IR: an input with an
    initializer has a default); a call with more values is refused naming the graph."""
    from converter.frontends.onnx import ops  # noqa: F401 - registers the rules
    from converter.frontends.onnx.graph import GraphRunner

    g = helper.make_graph(
        [helper.make_node("Neg", ["a"], ["b"])],
        "body",
        [helper.make_tensor_value_info("a", F, [1]), helper.make_tensor_value_info("w", F, [1])],
        [helper.make_tensor_value_info("b", F, [1])],
        initializer=[numpy_helper.from_array(np.ones(1, np.float32), "w")],
    )
    runner = GraphRunner({"ai.onnx": 18}, {})
    assert runner.run_graph(g, [np.array([2.0], np.float32)], {})[0].tolist() == [-2.0]
    with pytest.raises(Exception, match=r"graph 'body' takes 1 inputs, got 2"):
        runner.run_graph(g, [np.ones(1, np.float32)] * 2, {})


def test_opsets_at_the_ends_of_the_supported_range():
    """The default domain's opsets 7 to ``onnx.defs.onnx_opset_version()`` convert; 6 (and
    one past the newest) are refused naming the opset, the supported range and the node."""
    from converter.frontends.onnx.convert import MAX_OPSET

    assert MAX_OPSET == onnx.defs.onnx_opset_version()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = x @ (np.arange(12, dtype=np.float32).reshape(3, 4) / 10) + 1
    for opset in (7, MAX_OPSET):
        model = _linear(opset=18)
        model.opset_import[0].version = opset
        np.testing.assert_allclose(np.asarray(from_onnx(model).to_jax()(x)[0]), want, rtol=1e-6)
    for opset in (6, MAX_OPSET + 1):
        model = _linear(opset=18)
        model.opset_import[0].version = opset
        with pytest.raises(UnsupportedOpError) as info:
            from_onnx(model)
        assert f"ai.onnx::MatMul at opset {opset} (supported: 7..{MAX_OPSET})" in str(info.value)
        assert "'mm'" in str(info.value)


def test_function_body_attributes_bind_to_the_call_and_known_values():
    """A body node's attribute referring to a function attribute (``ref_attr_name``) takes
    the call's value, the last one given winning (the schema default, then the node's own);
    one the call does not give is dropped; the node's other attributes stay. Values known at
    conversion time: NumPy arrays and scalars, None, lists of them; not Python numbers or
    JAX arrays."""
    import jax.numpy as jnp
    from converter.frontends.onnx.graph import _bind_attrs, is_known

    ref = onnx.AttributeProto()
    ref.name, ref.ref_attr_name, ref.type = "alpha", "a", onnx.AttributeProto.FLOAT
    gone = onnx.AttributeProto()
    gone.name, gone.ref_attr_name, gone.type = "beta", "b", onnx.AttributeProto.FLOAT
    node = helper.make_node("LeakyRelu", ["x"], ["y"])
    node.attribute.extend([ref, gone, helper.make_attribute("keep", 3)])
    bound = _bind_attrs(node, [helper.make_attribute("a", 0.5), helper.make_attribute("a", 0.25)])
    assert {a.name: helper.get_attribute_value(a) for a in bound.attribute} == {"alpha": 0.25, "keep": 3}
    assert [a.name for a in node.attribute] == ["alpha", "beta", "keep"]  # the body is not changed
    plain = helper.make_node("Relu", ["x"], ["y"], keep=1)
    assert _bind_attrs(plain, [helper.make_attribute("keep", 2)]) is plain
    assert is_known(None) and is_known(np.float32(1)) and is_known([np.ones(2), None, []])
    assert not is_known(3) and not is_known([np.ones(2), jnp.ones(2)])
