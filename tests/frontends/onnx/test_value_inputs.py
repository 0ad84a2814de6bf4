"""ONNX models whose shapes, axes or counts come from graph input *values* (``Reshape`` with
a shape input, ``Expand``, ``ConstantOfShape``, ``Slice`` with starts/ends inputs, ``TopK``
with a ``k`` input, ``Resize`` with ``sizes``) convert to a ``ValueSpecializedModel``; its
``to_jax``/``to_torch`` specialize on those values at call time (one conversion per value),
compared with onnxruntime on the same inputs."""

from __future__ import annotations

import os

import jax
import numpy as np
import onnxruntime as ort
import pytest
import torch
from converter.frontends.onnx import StaticValueRequired, ValueDependentModule, from_onnx
from converter.frontends.onnx.convert import ValueSpecializedModel
from onnx import TensorProto, helper, numpy_helper

import converter
from converter.errors import ConversionError, SignatureMismatchError

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def _out(name, dtype, rank):
    """An output whose dimensions ONNX cannot tell before the values are known."""
    return helper.make_tensor_value_info(name, dtype, [f"{name}_{i}" for i in range(rank)])


def _check(model, feeds_list):
    """``to_jax`` and ``to_torch`` equal onnxruntime for each feed (dict by input name)."""
    m = from_onnx(model)
    assert isinstance(m, ValueSpecializedModel)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [s.name for s in m.signature.inputs]
    f, t = m.to_jax(), m.to_torch()
    for feeds in feeds_list:
        want = session.run(None, feeds)
        args = [feeds[n] for n in names]
        got_jax = f(*args)
        with torch.no_grad():
            got_torch = t(*[torch.from_numpy(a) for a in args])
        for w, gj, gt in zip(want, got_jax, got_torch, strict=True):
            assert np.asarray(gj).shape == w.shape and tuple(gt.shape) == w.shape
            np.testing.assert_allclose(np.asarray(gj), w, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(gt.numpy(), w, rtol=1e-5, atol=1e-6)
    return m, f, t


def test_reshape_with_a_shape_input_specializes_per_value():
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(6), "w")
    model = _model(
        [helper.make_node("Add", ["x", "w"], ["xw"]), helper.make_node("Reshape", ["xw", "s"], ["y"])],
        [_vi("x", F, [6]), _vi("s", I64, [2])],
        [_out("y", F, 2)],
        [w],
    )
    x = np.arange(6, dtype=np.float32)
    feeds = [{"x": x, "s": np.array(s, np.int64)} for s in ([2, 3], [3, 2], [2, 3], [6, -1])]
    m, f, t = _check(model, feeds)
    assert m.value_inputs == ["s"]
    assert len(m._cache) == 3 and len(f.functions) == 3  # cached per value, as jit's static args
    params = list(t.parameters())
    assert len(params) == 1 and params[0].shape == (6,)  # the initializer, shared by every specialization


def test_expand_constant_of_shape_and_slice_inputs():
    model = _model(
        [
            helper.make_node("Expand", ["x", "shape"], ["e"]),
            helper.make_node(
                "ConstantOfShape", ["shape"], ["c"], value=helper.make_tensor("v", F, [1], [2.5])
            ),
            helper.make_node("Add", ["e", "c"], ["ec"]),
            helper.make_node("Slice", ["ec", "starts", "ends", "axes"], ["y"]),
        ],
        [
            _vi("x", F, [1, 4]),
            _vi("shape", I64, [2]),
            _vi("starts", I64, [1]),
            _vi("ends", I64, [1]),
            _vi("axes", I64, [1]),
        ],  # fmt: skip
        [_out("y", F, 2)],
    )
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    i = lambda *v: np.array(v, np.int64)  # noqa: E731
    _check(
        model,
        [
            {"x": x, "shape": i(3, 4), "starts": i(1), "ends": i(3), "axes": i(0)},
            {"x": x, "shape": i(5, 4), "starts": i(-2), "ends": i(100), "axes": i(1)},
        ],
    )


def test_topk_with_a_k_input_and_resize_with_sizes():
    model = _model(
        [
            helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=1),
            helper.make_node("Resize", ["img", "", "", "sizes"], ["r"], mode="nearest"),
        ],
        [_vi("x", F, [2, 6]), _vi("k", I64, [1]), _vi("img", F, [1, 1, 4, 4]), _vi("sizes", I64, [4])],
        [_out("values", F, 2), _out("indices", I64, 2), _out("r", F, 4)],
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 6)).astype(np.float32)
    img = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    _check(
        model,
        [
            {"x": x, "k": np.array([2], np.int64), "img": img, "sizes": np.array([1, 1, 8, 8], np.int64)},
            {"x": x, "k": np.array([5], np.int64), "img": img, "sizes": np.array([1, 1, 2, 6], np.int64)},
        ],
    )


def test_traced_value_input_is_refused_naming_it():
    model = _model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [_vi("x", F, [6]), _vi("s", I64, [2])],
        [_out("y", F, 2)],
    )
    f = from_onnx(model).to_jax()
    x = np.arange(6, dtype=np.float32)
    with pytest.raises(SignatureMismatchError, match=r"args\[1\] \('s'\).*static argument"):
        jax.jit(f)(x, np.array([2, 3]))
    y = jax.jit(lambda v: f(v, np.array([3, 2]))[0])(x)  # a concrete value under jit: converts
    np.testing.assert_array_equal(np.asarray(y), x.reshape(3, 2))
    with pytest.raises(SignatureMismatchError, match="expected 2 positional inputs"):
        f(x)
    with pytest.raises(SignatureMismatchError, match="expected 2 positional inputs, got 3"):
        f(x, np.array([3, 2]), x)  # one too many


def test_meta_tensor_value_input_is_refused_naming_it():
    """A value input on the meta device has no value to specialize on: refused naming it."""
    model = _model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [_vi("x", F, [6]), _vi("s", I64, [2])],
        [_out("y", F, 2)],
    )
    t = from_onnx(model).to_torch()
    s = torch.tensor([2, 3], device="meta")
    with pytest.raises(SignatureMismatchError, match=r"args\[1\] \('s'\).*must be a concrete tensor"):
        t(torch.arange(6.0), s)


def test_old_behaviour_and_no_single_stablehlo():
    model = _model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [_vi("x", F, [6]), _vi("s", I64, [2])],
        [_out("y", F, 2)],
    )
    with pytest.raises(StaticValueRequired, match="'s'"):
        from_onnx(model, values_at_call=False)
    m = converter.from_onnx(model)
    # value specialization is a type of its own, not a Module whose StableHLO methods raise
    assert isinstance(m, ValueSpecializedModel) and not isinstance(m, converter.Module)
    assert not any(hasattr(m, a) for a in ("mlir", "text", "save", "specialize"))
    assert ValueDependentModule is ValueSpecializedModel  # the former name
    with pytest.raises(ConversionError, match=r"values of inputs \['s'\].*static_inputs"):
        m.to_torch(input_shapes={"x": (6,)})
    with pytest.raises(ConversionError, match=r"\['s'\]> has no single StableHLO program to inspect"):
        from converter.tools import inspection

        inspection.report(m)
    spec = m.specialize_values({"s": np.array([3, 2])})
    assert [s.name for s in spec.signature.inputs] == ["x"] and spec.signature.outputs[0].shape == (3, 2)
    assert m.to_onnx().graph.node[0].op_type == "Reshape"  # the source model


def test_cli_names_the_value_inputs(tmp_path, capsys):
    from converter.tools import cli

    model = _model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [_vi("x", F, [6]), _vi("s", I64, [2])],
        [_out("y", F, 2)],
    )
    src = tmp_path / "m.onnx"
    src.write_bytes(model.SerializeToString())
    assert cli.main([str(src), "-o", str(tmp_path / "m.jax")]) == 2
    assert "values of inputs ['s']" in capsys.readouterr().err
    assert cli.main([str(src), "-o", str(tmp_path / "m2.onnx")]) == 0
    session = ort.InferenceSession(str(tmp_path / "m2.onnx"), providers=["CPUExecutionProvider"])
    feeds = {"x": np.arange(6, dtype=np.float32), "s": np.array([3, 2], np.int64)}
    assert session.run(None, feeds)[0].shape == (3, 2)


#: op types whose ONNX node test cases take shapes, axes, counts or sizes as graph inputs
NODE_OPS = (
    "reshape", "expand", "constantofshape", "slice", "top_k", "resize", "tile", "pad", "range",
    "onehot", "split", "unsqueeze", "squeeze", "reduce_sum",
)  # fmt: skip


@pytest.mark.skipif(
    os.environ.get("VALUE_INPUT_CASES") != "all",
    reason="slow (generating ONNX's node cases takes ~20 s): set VALUE_INPUT_CASES=all",
)
def test_onnx_node_cases_with_value_inputs():
    """Every ONNX node test case of :data:`NODE_OPS` whose conversion needs input values
    (119 with onnx 1.20) through ``to_jax`` and ``to_torch``, against the case's outputs."""
    from tests.frontends.onnx.onnx_node_cases import _value, node_cases

    ran, failed = 0, []
    for name, case in sorted(node_cases().items()):
        if not name.startswith(tuple(f"test_{o}" for o in NODE_OPS)) or "expanded" in name:
            continue
        inputs, expected = case.data_sets[0]
        feed = [_value(v) for v in inputs]
        if any(v is None or isinstance(v, list) for v in feed):
            continue
        try:
            m = from_onnx(case.model)
        except StaticValueRequired:  # sequence outputs (SplitToSequence): not specialized
            continue
        if not isinstance(m, ValueSpecializedModel):
            continue
        ran += 1
        try:
            got_jax = m.to_jax()(*feed)
            with torch.no_grad():
                got_torch = m.to_torch()(*[np.asarray(v) for v in feed])  # NumPy in: bfloat16 too
            for gj, gt, e in zip(got_jax, got_torch, expected, strict=True):
                want = _value(e)
                bf16 = gt.dtype == torch.bfloat16  # no NumPy bfloat16 in torch: compare through f32
                gt = gt.float().numpy().astype(want.dtype) if bf16 else gt.numpy()
                for got in (np.asarray(gj), gt):
                    assert got.dtype == want.dtype
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        except Exception as e:  # noqa: BLE001 - collected, reported together
            failed.append(f"{name}: {type(e).__name__}: {str(e)[:200]}")
    assert ran >= 100 and not failed, "\n".join(failed)


def test_graph_input_sources_follows_every_branch_and_subgraph():
    """The graph inputs a value is computed from: through each input of each node (one read
    twice, an initializer with no producer beside them), through the values a subgraph
    captures, in graph input order (not the order they were found)."""
    from converter.frontends.onnx.values import graph_input_sources

    then = helper.make_graph([helper.make_node("Identity", ["d"], ["t"])], "then", [], [_vi("t", I64, [1])])
    other = helper.make_graph([helper.make_node("Identity", ["e"], ["o"])], "else", [], [_vi("o", I64, [1])])
    model = _model(
        [
            helper.make_node("If", ["cond"], ["de"], then_branch=then, else_branch=other),
            helper.make_node("Concat", ["b", "a", "a", "de", "w"], ["s"], axis=0),
            helper.make_node("Reshape", ["x", "s"], ["y"]),
        ],
        [_vi(n, I64, [1]) for n in ("a", "b", "c", "d", "e")]
        + [_vi("cond", TensorProto.BOOL, []), _vi("x", F, [6])],
        [_out("y", F, 2)],
        [numpy_helper.from_array(np.array([1], np.int64), "w")],
    )
    graph = model.graph
    everything = {i.name for i in graph.input}
    assert graph_input_sources(graph, ["s"], everything) == ["a", "b", "d", "e", "cond"]
    assert graph_input_sources(graph, ["y"], everything - {"x"}) == ["a", "b", "d", "e", "cond"]
    assert graph_input_sources(graph, ["y"], everything) == ["a", "b", "d", "e", "cond", "x"]
    assert graph_input_sources(graph, ["s"], {"a", "c"}) == ["a"]


def test_value_model_refuses_missing_values_keywords_and_another_opset(tmp_path):
    model = _model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [_vi("x", F, [6]), _vi("s", I64, [2])],
        [_out("y", F, 2)],
    )
    m = from_onnx(model)
    with pytest.raises(SignatureMismatchError, match=r"no values for the inputs \['s'\]"):
        m.specialize_values({"x": np.zeros(6, np.float32)})
    f = m.to_jax()
    x = np.arange(6, dtype=np.float32)
    with pytest.raises(SignatureMismatchError, match=r"unexpected keyword arguments \['s'\]"):
        f(x, s=np.array([3, 2]))
    with pytest.raises(ConversionError, match=r"is not converted to opset 17 \(it is opset 18\)"):
        m.to_onnx(opset=17)
    path = tmp_path / "same.onnx"
    out = m.to_onnx(opset=18, path=path)
    assert out is not m.onnx_model and out == m.onnx_model
    assert path.read_bytes() == model.SerializeToString()
    # one conversion per distinct value: the dtype and the shape of a value are part of it
    a = m.specialize_values({"s": np.array([3, 2], np.int64)})
    assert m.specialize_values({"s": np.array([3, 2], np.int64)}) is a
    assert m.specialize_values({"s": np.array([2, 3], np.int64)}) is not a
    assert m.specialize_values({"s": np.array([3, 2], np.int32)}) is not a
    assert (
        repr(m)
        == "<converter.ValueSpecializedModel from onnx: 0 params, 2 inputs, shapes from the values of ['s']>"
    )
