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
