"""Model-level behaviour of the ONNX backend: inputs, initializers, errors, external data."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from converter.backends.onnx import save_onnx

import converter
from converter.errors import UnsupportedOpError


def _torch_module():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh()).eval()
    x = torch.randn(2, 6)
    return model, x, converter.from_torch(model, (x,))


def test_parameters_are_initializers_and_inputs_are_named_by_path():
    _, _, module = _torch_module()
    model = module.to_onnx()
    assert {i.name for i in model.graph.initializer} >= {"0.weight", "0.bias"}
    assert [i.name for i in model.graph.input] == ["args[0]"]
    assert model.opset_import[0].version == 18
    onnx.checker.check_model(model, full_check=True)


def test_dropped_inputs_stay_in_the_signature():
    module = converter.from_jax(
        lambda x, unused, y: x * 2 + y, np.ones(3, np.float32), np.ones(4, np.float32), np.ones(3, np.float32)
    )
    assert module.signature.kept_var_idx is not None
    model = module.to_onnx()
    assert len(model.graph.input) == 3
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x, u, y = np.arange(3, dtype=np.float32), np.zeros(4, np.float32), np.ones(3, np.float32)
    feeds = {i.name: v for i, v in zip(sess.get_inputs(), (x, u, y), strict=True)}
    np.testing.assert_allclose(sess.run(None, feeds)[0], x * 2 + y)


def test_every_unsupported_op_in_one_error():
    def fn(x):
        f = jnp.fft.fft(x)
        return (jnp.tanh(f) + f**f).real

    module = converter.from_stablehlo(jax.jit(fn).lower(np.ones(8, np.float32)).as_text())
    with pytest.raises(UnsupportedOpError) as e:
        module.to_onnx()
    names = {m.name for m in e.value.missing}
    assert {"stablehlo.tanh[complex]", "stablehlo.power[complex]"} <= names, names


def test_opset_range():
    _, _, module = _torch_module()
    with pytest.raises(ValueError, match="opset 12"):
        module.to_onnx(opset=12)
    assert module.to_onnx(opset=21).opset_import[0].version == 21


def test_external_data_for_large_models(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Tanh()).eval()  # 8 KiB weight: external
    x = torch.randn(2, 64)
    proto = converter.from_torch(model, (x,)).to_onnx()
    before = proto.SerializeToString()
    path = tmp_path / "m.onnx"
    save_onnx(proto, path, external_threshold=1)  # as if over 2 GB
    assert proto.SerializeToString() == before  # the caller's model is untouched
    assert (tmp_path / "m.onnx.data").stat().st_size >= 64 * 32 * 4 and path.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx.data"]
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"args[0]": x.numpy()})[0]
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_save_onnx_external_puts_small_initializers_out_too(tmp_path):
    """Past ``external_threshold``, every initializer goes to ``<name>.data``, those under
    onnx's own 1 KB default too (a model of small weights only wrote no data file, and the
    save failed); a model with no initializer writes no data file."""
    model = torch.nn.Linear(2, 2).eval()  # 24 bytes of weights
    x = torch.randn(1, 2)
    proto = converter.from_torch(model, (x,)).to_onnx()
    save_onnx(proto, tmp_path / "m.onnx", external_threshold=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx.data"]
    loaded = onnx.load(tmp_path / "m.onnx", load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in loaded.graph.initializer)
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(
        sess.run(None, {"args[0]": x.numpy()})[0], model(x).detach().numpy(), rtol=1e-6
    )
    bare = converter.from_torch(torch.nn.Tanh(), (x,)).to_onnx()
    save_onnx(bare, tmp_path / "t.onnx", external_threshold=1)
    assert not (tmp_path / "t.onnx.data").exists() and (tmp_path / "t.onnx").exists()


def test_external_data_written_by_to_onnx_is_64_byte_aligned(tmp_path):
    """``to_onnx(path=..., external_data=True)`` starts each parameter at a multiple of 64
    bytes of ``<path>.data`` (its docstring), whatever the sizes before it (60 and 20 bytes
    here), and the offsets it records read them back."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Linear(5, 1)).eval()
    x = torch.randn(2, 3)
    path = tmp_path / "m.onnx"
    converter.from_torch(model, (x,)).to_onnx(path=path, external_data=True, check=False)
    inits = onnx.load(path, load_external_data=False).graph.initializer
    offsets = [int(next(e.value for e in t.external_data if e.key == "offset")) for t in inits]
    assert len(offsets) == 4 and all(o % 64 == 0 for o in offsets), offsets
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"args[0]": x.numpy()})[0]
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-6, atol=1e-6)


def _dead_parts(graph: onnx.GraphProto, outputs) -> list[str]:
    """Nodes of ``graph`` whose results nothing reads and initializers nothing reads, in it
    and (recursively) in its subgraphs."""
    read = {name for node in graph.node for name in node.input} | set(outputs)
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                read |= {name for n in attr.g.node for name in n.input}  # outer-scope reads
    dead = [f"node {n.op_type} {n.name}" for n in graph.node if not any(o in read for o in n.output if o)]
    dead += [f"initializer {t.name}" for t in graph.initializer if t.name not in read]
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                dead += _dead_parts(attr.g, [o.name for o in attr.g.output])
    return dead


def test_large_repeating_constants_are_stored_once_and_expanded():
    """A constant over 16 elements that repeats along axes is stored as its core and
    expanded in the graph; a small one, or one of a type ``ConstantOfShape``/``Expand`` do
    not take from opset 9 on (bfloat16), is stored as it is; so is one whose core is over a
    quarter of it."""
    from converter.backends.onnx.graph import compressed

    row = np.arange(4, dtype=np.float32)
    assert compressed(np.broadcast_to(row, (2, 4)).copy()) is None  # 8 elements: small
    core = compressed(np.broadcast_to(row, (8, 4)).copy())
    assert core.shape == (1, 4) and core.dtype == np.float32 and core.tolist() == [row.tolist()]
    assert compressed(np.ones((8, 4), ml_dtypes.bfloat16)) is None
    assert compressed(np.ones((3, 8), bool)).shape == (1, 1)
    assert compressed(np.broadcast_to(np.arange(8.0), (3, 8)).copy()) is None  # core 8 of 24


def test_no_dead_nodes_or_initializers():
    # torch's matrix_exp squares in a while loop whose body lowering leaves a constant it
    # does not read: neither the graph nor the Loop body keeps anything its outputs don't need
    class Expm(torch.nn.Module):
        def forward(self, a):
            return torch.linalg.matrix_exp(a)

    a = torch.randn(2, 3, 3) * torch.tensor([0.1, 8.0])[:, None, None]
    model = converter.from_torch(Expm(), (a,)).to_onnx()
    assert _dead_parts(model.graph, [o.name for o in model.graph.output]) == []
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {model.graph.input[0].name: a.numpy()})[0]
    np.testing.assert_allclose(got, Expm()(a).numpy(), rtol=2e-5, atol=1e-5)


def test_external_data_from_the_threshold_on(tmp_path, monkeypatch):
    """``to_onnx(path=...)`` keeps the parameters in ``<path>.data`` from
    ``$CONVERTER_EXTERNAL_THRESHOLD`` bytes on (1088 here: exactly the Linear(16, 16)'s weight
    and bias), inline below it; ``save_onnx`` likewise from ``external_threshold`` (the model's
    serialized size) on. ``external_data=True`` without a path, and an opset past 26, are
    refused. (The graph is left unoptimized: only the files matter.)"""
    torch.manual_seed(0)
    module = converter.from_torch(torch.nn.Linear(16, 16).eval(), (torch.randn(1, 16),))
    for threshold, external in ((1088, True), (1089, False)):
        monkeypatch.setenv("CONVERTER_EXTERNAL_THRESHOLD", str(threshold))
        path = tmp_path / f"t{threshold}.onnx"
        model = module.to_onnx(path=path, check=False, optimize=False)
        assert (tmp_path / f"t{threshold}.onnx.data").exists() == external
        params = {p.name for p in module.signature.params}
        locations = {t.data_location for t in model.graph.initializer if t.name in params}
        assert locations == {onnx.TensorProto.EXTERNAL if external else onnx.TensorProto.DEFAULT}
    model = module.to_onnx(check=False, optimize=False)
    for extra, external in ((0, True), (1, False)):
        save_onnx(model, tmp_path / f"s{extra}.onnx", external_threshold=model.ByteSize() + extra)
        assert (tmp_path / f"s{extra}.onnx.data").exists() == external
    with pytest.raises(ValueError, match="needs the path"):
        module.to_onnx(external_data=True)
    with pytest.raises(ValueError, match=r"opset 27 is outside the supported 18\.\.26"):
        module.to_onnx(opset=27)


def _graph_values(g, outputs, feeds=None):
    """The values of ``outputs`` of GraphBuilder ``g``'s nodes and initializers, run by
    onnxruntime (opset 18) on ``feeds`` (name -> array)."""
    feeds = feeds or {}
    inputs = [
        onnx.helper.make_tensor_value_info(k, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for k, v in feeds.items()
    ]
    outs = [onnx.helper.make_empty_tensor_value_info(o) for o in outputs]
    graph = onnx.helper.make_graph(g.nodes, "g", inputs, outs, g.initializers)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)], ir_version=10)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_graph_builder_names_nodes_and_constants():
    """``fresh`` skips the reserved names; a Transpose by the identity is no node; None
    attributes are left out; ``n_out`` names each output; a small constant is stored once
    per distinct value (dtype, shape and bytes), a large one per call."""
    import itertools

    from converter.backends.onnx.graph import GraphBuilder

    g = GraphBuilder(itertools.count(), prefix="p/", reserved={"p/v_0", "p/v_1"})
    assert g.fresh() == "p/v_2" and g.fresh("w") == "p/w_3"
    assert g.op("Transpose", ["x"], perm=[0, 1]) == "x" and g.nodes == []
    t = g.op("Transpose", ["x"], perm=[1, 0])
    assert g.nodes[-1].op_type == "Transpose" and list(g.nodes[-1].output) == [t]
    a, b = g.op("Split", ["x"], 2, axis=0, split=None)
    assert a != b and list(g.nodes[-1].output) == [a, b]
    assert [x.name for x in g.nodes[-1].attribute] == ["axis"]
    one = g.const(np.int64(1))
    assert g.const(np.int64(1)) == one and g.const(np.int32(1)) != one and g.ints([1]) != one
    assert g.const(np.arange(16.0)) == g.const(np.arange(16.0))
    big = np.arange(17, dtype=np.float32)
    assert g.const(big) != g.const(big) and len(g.initializers) == 6
    child = g.child()
    n = int(child.fresh().removeprefix("p/v_"))  # one name counter
    assert g.fresh() == f"p/v_{n + 1}" and child.nodes == [] and child.reserved is g.reserved


def test_graph_builder_widens_for_onnxruntime_and_computes_shapes():
    """``op_as`` casts the data inputs of an operator onnxruntime lacks the type for and the
    chosen outputs back; ``shape_vector``, ``product``, ``dim``, ``sizes`` and ``iota`` give
    the values they document (NumPy's), static and at run time."""
    import itertools

    from converter.backends.onnx.graph import GraphBuilder

    g = GraphBuilder(itertools.count())
    x = np.array([[-3, 7, 2], [5, -1, 0]], np.int16)
    pad = g.op_as("Pad", ["x", g.ints([0, 1, 0, 0]), g.const(np.int16(9))], "int16", data=(0, 2))
    assert [n.op_type for n in g.nodes] == ["Cast", "Cast", "Pad", "Cast"]
    other = GraphBuilder(itertools.count())
    other.op_as("Pad", ["y", other.ints([0, 0, 0, 0])], "int32")
    vals, idx = other.op_as("TopK", ["y", other.ints([2])], "uint16", n_out=2, axis=1)
    assert [n.op_type for n in other.nodes] == ["Pad", "Cast", "TopK", "Cast"]
    assert vals == other.nodes[-1].output[0] and idx == other.nodes[-2].output[1]
    sizes = g.sizes("x", [None, 3])
    assert sizes[1] == 3 and g.nodes[-1].op_type == "Shape"
    assert g.product([2, 3]) == 6 and g.product([sizes[0], 1]) == sizes[0]
    prod = g.product([4, sizes[0], 3, g.dim("x", 1)])
    vec = g.shape_vector([5, 6, sizes[0], 7])
    assert g.shape_vector([]) != g.shape_vector([2]) and g.nodes[-1].op_type == "Concat"
    assert g.shape_vector([1, 2]) in {t.name for t in g.initializers}
    iotas = [
        g.iota([2, 3], 1, "uint8"),
        g.iota([4], 0, "float16"),
        g.iota([3, 1], 0, "int32"),
        g.iota([sizes[0], 3], 0, "int64"),
        g.iota([3, sizes[0]], 1, "float32"),
    ]
    got = _graph_values(g, [pad, prod, vec, *iotas], {"x": x})
    np.testing.assert_array_equal(got[0], np.pad(x, [(0, 0), (1, 0)], constant_values=9))
    assert got[0].dtype == np.int16
    assert got[1].tolist() == [2 * 4 * 3 * 3] and got[2].tolist() == [5, 6, 2, 7]
    want = [
        np.broadcast_to(np.arange(3, dtype=np.uint8), (2, 3)),
        np.arange(4, dtype=np.float16),
        np.arange(3, dtype=np.int32).reshape(3, 1),
        np.broadcast_to(np.arange(2)[:, None], (2, 3)),
        np.broadcast_to(np.arange(2, dtype=np.float32), (3, 2)),
    ]
    for a, b in zip(got[3:], want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_constants_at_the_size_and_core_limits():
    """16 elements are stored as they are, 17 compressed; a core of exactly a quarter is
    compressed; a splat becomes one ``ConstantOfShape``, a repeating row an ``Expand`` of
    its core, and ``whole`` stores it as it is; the values read back are the constant's."""
    import itertools

    from converter.backends.onnx.graph import GraphBuilder, compressed

    assert compressed(np.ones(16, np.float32)) is None
    assert compressed(np.ones(17, np.int8)).shape == (1,)
    quarter = np.broadcast_to(np.arange(5, dtype=np.int32), (4, 5)).copy()  # core 5 of 20
    assert compressed(quarter).tolist() == [list(range(5))]
    g = GraphBuilder(itertools.count())
    splat = np.full((3, 6), -2.5, np.float64)
    names = [
        g.const(splat),
        g.const(quarter),
        g.const(quarter, whole=True),
        g.const(np.full(16, 3, np.uint8)),
    ]
    assert [n.op_type for n in g.nodes] == ["ConstantOfShape", "Expand"]
    assert names[2] in {t.name for t in g.initializers} and names[3] in {t.name for t in g.initializers}
    for got, want in zip(
        _graph_values(g, names), [splat, quarter, quarter, np.full(16, 3, np.uint8)], strict=True
    ):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_live_keeps_what_a_subgraph_reads():
    """``live`` drops nodes whose results nothing reads (transitively) and initializers no
    live node reads, and keeps a value read only inside a kept node's subgraph, and a node
    one of whose results is read."""
    from converter.backends.onnx.graph import live, used_names

    make = onnx.helper.make_node
    body = onnx.helper.make_graph([make("Add", ["inner", "k"], ["o"])], "b", [], [])
    nodes = [
        make("Neg", ["x"], ["k"]),
        make("Abs", ["x"], ["dead1"]),
        make("Neg", ["dead1"], ["dead2"]),
        make("If", ["c"], ["y"], then_branch=body, else_branch=body),
        make("Relu", ["w"], ["", "z"]),
        make("Split", ["w"], ["s1", "s2"], num_outputs=2),
    ]
    inits = [onnx.numpy_helper.from_array(np.zeros(1, np.float32), n) for n in ("c", "w", "u")]
    assert used_names(nodes[3:4]) == {"c", "inner", "k"}
    kept, kept_inits = live(nodes, inits, ["y", "z", "s1"])
    assert [n.output[-1] for n in kept] == ["k", "y", "z", "s2"]
    assert [t.name for t in kept_inits] == ["c", "w"]
