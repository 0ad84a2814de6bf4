"""Rules of frontends/onnx/ops/control_flow.py: Scan and Loop lowerings against onnxruntime."""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(__file__))
from converter.frontends.onnx import from_onnx  # noqa: E402

F = TensorProto.FLOAT


def _run_both(model, *inputs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    expected = sess.run(None, dict(zip(names, inputs, strict=True)))
    got = from_onnx(model).to_jax()(*inputs)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-6)
    return from_onnx(model).text()


def test_scan_cumulative_sum_reverse():
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["s2"], ["y"])],
        "body",
        [helper.make_tensor_value_info("s", F, [2]), helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("s2", F, [2]), helper.make_tensor_value_info("y", F, [2])],
    )
    node = helper.make_node(
        "Scan", ["s0", "xs"], ["sf", "ys"], body=body, num_scan_inputs=1, scan_input_directions=[1]
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("s0", F, [2]), helper.make_tensor_value_info("xs", F, [5, 2])],
        [helper.make_tensor_value_info("sf", F, [2]), helper.make_tensor_value_info("ys", F, [5, 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    text = _run_both(model, np.zeros(2, np.float32), np.arange(10, dtype=np.float32).reshape(5, 2))
    assert "stablehlo.while" in text  # lax.scan lowers to a while loop


def test_scan_along_given_axes_and_directions():
    """Scan's ``scan_input_axes`` (1 and -1, counted from the end), ``scan_input_directions``
    (the second input read backwards) and ``scan_output_axes`` (1 and -1) with
    ``scan_output_directions`` (the first output written backwards): each input is sliced
    along its own axis, each output stacked along its own (the Scan page's semantics)."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            helper.make_node("Add", ["s", "a"], ["t"]),
            helper.make_node("Add", ["t", "b"], ["s2"]),
            helper.make_node("Identity", ["s2"], ["y1"]),
            helper.make_node("Mul", ["s2", "a"], ["y2"]),
        ],
        "body",
        [vi("s", F, [2]), vi("a", F, [2]), vi("b", F, [2])],
        [vi("s2", F, [2]), vi("y1", F, [2]), vi("y2", F, [2])],
    )
    node = helper.make_node(
        "Scan",
        ["s0", "xa", "xb"],
        ["sf", "ys1", "ys2"],
        body=body,
        num_scan_inputs=2,
        scan_input_axes=[1, -1],
        scan_input_directions=[0, 1],
        scan_output_axes=[1, -1],
        scan_output_directions=[1, 0],
    )
    graph = helper.make_graph(
        [node],
        "g",
        [vi("s0", F, [2]), vi("xa", F, [2, 3]), vi("xb", F, [2, 3])],
        [vi("sf", F, [2]), vi("ys1", F, [2, 3]), vi("ys2", F, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    xa = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    xb = np.array([[10, 20, 40], [-1, -2, -4]], np.float32)
    feeds = {"s0": np.array([0.5, -0.5], np.float32), "xa": xa, "xb": xb}
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    got = from_onnx(model).to_jax()(*feeds.values())
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).shape == w.shape
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6)


def test_loop_static_trip_count_scan_output():
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["v", "v"], ["sq"]),
            helper.make_node("Add", ["v", "one"], ["v2"]),
            helper.make_node("Identity", ["c"], ["c2"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", F, []),
        ],
        [
            helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v2", F, []),
            helper.make_tensor_value_info("sq", F, []),
        ],
    )
    node = helper.make_node("Loop", ["m", "", "v0"], ["vf", "sqs"], body=body)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("v0", F, [])],
        [helper.make_tensor_value_info("vf", F, []), helper.make_tensor_value_info("sqs", F, [4])],
        initializer=[
            onnx.numpy_helper.from_array(np.array(4, np.int64), "m"),
            onnx.numpy_helper.from_array(np.array(1, np.float32), "one"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    _run_both(model, np.array(1.5, np.float32))


def test_loop_with_a_runtime_trip_count_and_condition():
    """Loop whose trip count and first condition are graph inputs (a ``while_loop``): the
    body doubles ``v`` while it stays below 10; it stops at the trip count or the condition,
    whichever comes first."""
    body = helper.make_graph(
        [helper.make_node("Add", ["v", "v"], ["v2"]), helper.make_node("Less", ["v2", "ten"], ["c2"])],
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
    node = helper.make_node("Loop", ["m", "c0", "v0"], ["vf"], body=body)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("m", TensorProto.INT64, []),
            helper.make_tensor_value_info("c0", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v0", F, []),
        ],
        [helper.make_tensor_value_info("vf", F, [])],
        initializer=[onnx.numpy_helper.from_array(np.array(10, np.float32), "ten")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    for m, c0 in ((100, True), (2, True), (100, False)):  # the condition, the count, no pass
        _run_both(model, np.array(m, np.int64), np.array(c0), np.array(1.5, np.float32))


def _counting_loop(m: int, cond_input: bool, body_cond: str, scan: bool):
    """Loop(M=m) adding 0.5 to ``v`` (shape [2]); the first condition a graph input ``go``
    or absent; the body's condition ``Identity`` of its input or ``sum(v) < 3``; with or
    without the scan output ``v``."""
    i64, b = TensorProto.INT64, TensorProto.BOOL
    cond_node = (
        helper.make_node("Identity", ["c"], ["c2"])
        if body_cond == "identity"
        else helper.make_node("Less", ["s", "three"], ["c2"])
    )
    outs = [helper.make_tensor_value_info("c2", b, []), helper.make_tensor_value_info("v2", F, [2])]
    if scan:
        outs.append(helper.make_tensor_value_info("y", F, [2]))
    body = helper.make_graph(
        [
            helper.make_node("Add", ["v", "half"], ["v2"]),
            helper.make_node("ReduceSum", ["v2"], ["s"], keepdims=0),
            cond_node,
            helper.make_node("Identity", ["v2"], ["y"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", i64, []),
            helper.make_tensor_value_info("c", b, []),
            helper.make_tensor_value_info("v", F, [2]),
        ],
        outs,
    )
    inputs = [helper.make_tensor_value_info("v0", F, [2])]
    if cond_input:
        inputs.append(helper.make_tensor_value_info("go", b, []))
    graph_outs = [helper.make_tensor_value_info("vf", F, [2])]
    if scan:
        graph_outs.append(helper.make_tensor_value_info("ys", F, ["n", 2]))
    graph = helper.make_graph(
        [
            helper.make_node(
                "Loop", ["m", "go" if cond_input else "", "v0"], ["vf", "ys"] if scan else ["vf"], body=body
            )
        ],
        "g",
        inputs,
        graph_outs,
        initializer=[
            onnx.numpy_helper.from_array(np.array(m, np.int64), "m"),
            onnx.numpy_helper.from_array(np.array(0.5, np.float32), "half"),
            onnx.numpy_helper.from_array(np.array(3, np.float32), "three"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def test_loop_with_scan_outputs_and_a_condition_input():
    """The first condition (a graph input, passed through by the body) decides between no
    trip and M trips: the converted loop ran M trips whatever its value (wrong ``vf``, a scan
    output of M rows where onnxruntime gives none); it now specializes on its value."""
    model = _counting_loop(4, cond_input=True, body_cond="identity", scan=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    f = from_onnx(model).to_jax()  # specialized on go's value at each call
    for go in (False,):  # no trip: M trips ran (True, all M trips, was right)
        v0 = np.array([0.1, 0.2], np.float32)
        for g, e in zip(f(v0, np.array(go)), sess.run(None, {"v0": v0, "go": np.array(go)}), strict=True):
            np.testing.assert_allclose(np.asarray(g), e, rtol=1e-6)


def test_loop_past_the_unroll_limit_with_scan_outputs_and_a_false_first_condition():
    """M = 300 (past the unroll limit) with a scan output and the first condition a graph
    input: false, no trip (``vf`` is ``v0`` and the scan output has no rows, as onnxruntime
    gives); true, all 300 trips (a ``lax.scan``)."""
    model = _counting_loop(300, cond_input=True, body_cond="identity", scan=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    f = from_onnx(model).to_jax()  # specialized on go's value at each call
    v0 = np.array([0.1, 0.2], np.float32)
    for go in (False, True):
        got = f(v0, np.array(go))
        want = sess.run(None, {"v0": v0, "go": np.array(go)})
        assert len(got) == len(want) == 2 and want[1].shape == ((300, 2) if go else (0, 2))
        for g, e in zip(got, want, strict=True):
            assert np.asarray(g).shape == e.shape
            np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5)


def test_loop_whose_body_ends_it():
    """The body computes its condition from the data: without scan outputs an unrolled loop
    continues as a ``while`` (it raised); with scan outputs past the unroll limit the loop
    ran all M trips (wrong ``vf``); their length depends on the data, so it raises."""
    import converter

    _run_both(_counting_loop(6, False, "data", scan=False), np.array([0.1, 0.2], np.float32))
    with pytest.raises(converter.ConversionError, match="length depends on the data"):
        converter.from_onnx(_counting_loop(300, False, "data", scan=True))


def test_unrolled_loop_whose_body_ends_it_continues_as_a_while():
    """A known trip count (6) and a known first condition (a true initializer): the loop is
    unrolled, and once the body computes its condition from the data (``sum(v) < 3``, false
    after the third trip) the other trips run as a ``while``; with a scan output their
    length would depend on the data: refused."""
    import converter

    def constant_go(model):
        go = next(i for i in model.graph.input if i.name == "go")
        model.graph.input.remove(go)
        model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(True), "go"))
        return model

    v0 = np.array([0.1, 0.2], np.float32)
    model = constant_go(_counting_loop(6, True, "data", scan=False))
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"v0": v0}
    )
    (got,) = from_onnx(model).to_jax()(v0)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    np.testing.assert_allclose(want, [1.6, 1.7], rtol=1e-6)  # three trips of six
    with pytest.raises(converter.ConversionError, match="length depends on the data"):
        converter.from_onnx(constant_go(_counting_loop(6, True, "data", scan=True)))


def test_loops_without_a_trip_count_are_refused_where_shapes_need_one():
    """Without M, a Loop whose carried value grows (a Concat) or that has a scan output
    cannot be a StableHLO while (its shapes would depend on the number of trips): refused,
    saying why, also when the first condition is a graph input."""
    import converter

    model = _counting_loop(4, True, "identity", scan=True)
    model.graph.node[0].input[0] = ""
    with pytest.raises(converter.ConversionError, match="scan outputs: their length is the number of trips"):
        converter.from_onnx(model)
    model = _counting_loop(4, True, "identity", scan=False)
    model.graph.node[0].input[0] = ""
    body = model.graph.node[0].attribute[0].g
    body.node[0].CopyFrom(helper.make_node("Concat", ["v", "v"], ["v2"], axis=0))
    body.output[1].CopyFrom(helper.make_tensor_value_info("v2", F, ["k"]))
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("vf", F, ["k"]))
    with pytest.raises(converter.ConversionError, match="carried values change shape"):
        converter.from_onnx(model)


def test_loop_of_runtime_count_accumulating_a_sequence():
    """TorchScript's export of ``for i in range(n): outs.append(...)`` then ``torch.stack``:
    a runtime trip count and a sequence carried through the Loop (``SequenceInsert``),
    ``ConcatFromSequence`` after it. A while loop cannot carry a growing sequence (it raised
    a JAX carry-type error); the loop is unrolled on ``n``'s value at call time. The body's
    value is also a scan output (``vs``, one row per trip)."""
    i64, seq = TensorProto.INT64, helper.make_tensor_sequence_value_info
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["fi"], to=F),
            helper.make_node("Mul", ["x", "fi"], ["v"]),
            helper.make_node("SequenceInsert", ["seq_in", "v"], ["seq_out"]),
            helper.make_node("Identity", ["c"], ["c2"]),
            helper.make_node("Identity", ["v"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", i64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            seq("seq_in", F, None),
        ],
        [
            helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
            seq("seq_out", F, None),
            helper.make_tensor_value_info("v_out", F, [3]),
        ],
    )
    graph = helper.make_graph(
        [
            helper.make_node("SequenceEmpty", [], ["s0"], dtype=F),
            helper.make_node("Loop", ["n", "", "s0"], ["s", "vs"], body=body),
            helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1),
        ],
        "g",
        [helper.make_tensor_value_info("x", F, [3]), helper.make_tensor_value_info("n", i64, [])],
        [helper.make_tensor_value_info("y", F, ["n", 3]), helper.make_tensor_value_info("vs", F, ["n", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    f = from_onnx(model).to_jax()
    x = np.array([0.5, -1.0, 2.0], np.float32)
    for n in (3,):
        want = sess.run(None, {"x": x, "n": np.array(n, np.int64)})
        got = f(x, np.array(n, np.int64))
        assert len(got) == 2 and want[1].shape == (3, 3)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(g), w)


def test_if_branches_of_different_shapes_reusing_the_output_name():
    """The spec lets the branches of an ``If`` give different shapes, and a branch output may
    be named as the ``If``'s output (the checker accepts it); shape inference's type of the
    branch's ``y`` was checked against the other's ("output 'y' has shape (2,), ONNX shape
    inference gives (4,)") and ``lax.cond`` refused unequal branches. The condition comes
    from the input: specialized on its value at call time."""
    then = helper.make_graph(
        [helper.make_node("Concat", ["x", "x"], ["y"], axis=0)],
        "then",
        [],
        [helper.make_tensor_value_info("y", F, [4])],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["z"])], "else", [], [helper.make_tensor_value_info("z", F, [2])]
    )
    graph = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["c"]),
            helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
        ],
        "g",
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("y", F, ["k"])],
        initializer=[onnx.numpy_helper.from_array(np.array(0, np.float32), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    f = from_onnx(model).to_jax()
    for x in (np.array([1.0, 2.0], np.float32), np.array([-1.0, -2.0], np.float32)):
        (got,) = f(x)
        np.testing.assert_array_equal(np.asarray(got), sess.run(None, {"x": x})[0])


def test_if_on_a_runtime_condition_returns_a_sequence_as_a_list():
    """An If whose branches give a sequence (``test_if_seq`` with the condition an input):
    the output is a list of the sequence's tensors on every backend, never one array stacking
    them (whose rows looked like the elements)."""
    seq = helper.make_tensor_sequence_value_info
    branch = [
        helper.make_graph(
            [helper.make_node("SequenceConstruct", list(order), ["s"])], name, [], [seq("s", F, [3])]
        )
        for name, order in (("then", "xy"), ("else", "yx"))
    ]
    node = helper.make_node("If", ["c"], ["out"], then_branch=branch[0], else_branch=branch[1])
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", F, [3]),
            helper.make_tensor_value_info("y", F, [3]),
        ],
        [seq("out", F, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m = from_onnx(model)
    x, y = np.arange(3, dtype=np.float32), np.arange(3, 6, dtype=np.float32)
    f, t = m.to_jax(), m.to_torch()
    for c, want in ((True, [x, y]), (False, [y, x])):
        (got,) = f(np.array(c), x, y)
        assert isinstance(got, list) and len(got) == 2, got
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(g), w)
        import torch

        (got_t,) = t(torch.tensor(c), torch.from_numpy(x), torch.from_numpy(y))
        assert isinstance(got_t, list) and len(got_t) == 2, got_t
        for g, w in zip(got_t, want, strict=True):
            np.testing.assert_array_equal(g.numpy(), w)


def test_if_branches_with_their_own_initializers():
    """A branch's initializers are values of its scope (here a different constant per branch)."""
    from onnx import numpy_helper

    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])

    def branch(name, value):
        c = numpy_helper.from_array(np.full(3, value, np.float32), f"c_{name}")
        return helper.make_graph([helper.make_node("Add", ["x", f"c_{name}"], ["y"])], name, [], [out], [c])

    node = helper.make_node(
        "If", ["cond"], ["r"], then_branch=branch("then", 10.0), else_branch=branch("else", -1.0)
    )
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    x = np.arange(3, dtype=np.float32)
    fn = from_onnx(model).to_jax()
    for cond in (True, False):
        (got,) = fn(x, np.array(cond))
        np.testing.assert_array_equal(np.asarray(got), x + (10.0 if cond else -1.0))
