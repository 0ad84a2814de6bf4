"""converter.Module: save/load round trip, bad files, text and histogram."""

import functools
import json
import zipfile

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import converter
from converter.errors import ModuleFormatError
from converter.signature import LeafSpec


def _module():
    return converter.from_stablehlo(
        jax.jit(lambda x, y: (jnp.tanh(x) * y, x.sum()))
        .lower(jnp.ones((2, 3), jnp.float32), jnp.ones((2, 3), jnp.float32))
        .as_text()
    )


def test_save_load_round_trip(tmp_path):
    m = _module()
    m.params["p"] = np.arange(4, dtype=ml_dtypes.bfloat16)
    m.signature = m.signature.replace(params=(LeafSpec("p", (4,), "bfloat16", "parameter"),))
    path = tmp_path / "m.shlo"
    m.save(path)
    m2 = converter.load(path)
    assert m2.signature == m.signature
    assert m2.params["p"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(m2.params["p"].astype(np.float32), np.arange(4, dtype=np.float32))
    assert m2.op_histogram() == m.op_histogram()
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read("manifest.json"))["version"] == 1
        # reproducible members: a fixed timestamp, and rw-r--r-- (regular file) when unzipped
        for info in zf.infolist():
            assert info.date_time == (1980, 1, 1, 0, 0, 0), info
            assert info.external_attr >> 16 == 0o644, info


def test_loaded_module_runs(tmp_path):
    m = _module()
    m.save(tmp_path / "m.shlo")
    f = converter.load(tmp_path / "m.shlo").to_jax()
    x = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    out = f(x, x)
    np.testing.assert_allclose(out[0], np.tanh(x) * x, rtol=1e-6)


def test_pickle_and_deepcopy_keep_the_program():
    """A Module pickles and deep-copies (its MLIR travels as text, locations included): the
    copies run like the original and hold an MLIR module of their own."""
    import copy
    import pickle

    m = _module()
    x = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    for clone in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        assert clone.text() == m.text() and clone.mlir is not m.mlir
        np.testing.assert_allclose(clone.to_jax()(x, x)[0], np.tanh(x) * x, rtol=1e-6)


def test_missing_file():
    with pytest.raises(ModuleFormatError, match="no such file"):
        converter.load("/nonexistent/m.shlo")


def test_corrupt_file(tmp_path):
    bad = tmp_path / "bad.shlo"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ModuleFormatError, match="corrupt"):
        converter.load(bad)


def test_newer_version_rejected(tmp_path):
    p = tmp_path / "new.shlo"
    _module().save(p)
    with zipfile.ZipFile(p) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    manifest = json.loads(files["manifest.json"])
    manifest["version"] = 99
    files["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(p, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
    with pytest.raises(ModuleFormatError, match="newer"):
        converter.load(p)


def test_failed_save_leaves_no_file(tmp_path, monkeypatch):
    m = _module()
    monkeypatch.setattr(type(m), "bytecode", lambda self: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(converter.InternalError, match="boom") as info:  # the API's error contract
        m.save(tmp_path / "m.shlo")
    assert isinstance(info.value.__cause__, RuntimeError)
    assert list(tmp_path.iterdir()) == []


def test_a_jax_failure_while_converting_onnx_is_the_converters_not_an_export_error(monkeypatch):
    """Converting an ONNX (or torch) model, JAX is the converter's own tool: a failure raised
    inside JAX there is an InternalError (a converter bug), not an ExportError blaming the
    source framework (which it would be for ``from_jax``, tracing the user's function)."""
    from converter.frontends.onnx import convert
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    # the frontend's own step after the rules fails inside jax.numpy (no user frame)
    monkeypatch.setattr(convert, "materialize", functools.partial(jnp.reshape, shape=(7,)))
    with pytest.raises(converter.InternalError, match="cannot reshape") as info:
        converter.from_onnx(model)
    assert not isinstance(info.value, converter.ExportError)
    assert isinstance(info.value.__cause__, TypeError)


def test_arguments_the_call_does_not_take_are_the_callers_error():
    """A wrong call is an InputTypeError (also a TypeError) naming the function, not an
    "internal error, please report it": too many positional arguments, and a keyword passed
    on through ``**options`` that the frontend refuses."""
    m = _module()
    with pytest.raises(converter.InputTypeError, match=r"converter\.to_onnx: .*positional"):
        m.to_onnx("m.onnx")
    with pytest.raises(TypeError, match=r"converter\.from_jax: .*'bogus'"):
        converter.from_jax(lambda x: x + 1, np.ones(2, np.float32), bogus=1)


def test_histogram_counts_nested_ops():
    hist = _module().op_histogram()
    assert hist["stablehlo.tanh"] == 1
    assert hist["stablehlo.reduce"] == 1
    assert hist["stablehlo.add"] >= 1  # inside the reduce body


def test_load_needs_neither_torch_nor_the_model_code(tmp_path):
    """A Module saved from torch loads and runs in a process where torch cannot be imported."""
    import subprocess
    import sys

    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.GELU()).eval()
    x = torch.randn(3, 5)
    converter.from_torch(model, (x,)).save(tmp_path / "m.shlo")
    np.save(tmp_path / "x.npy", x.numpy())
    code = "\n".join(
        [
            "import sys",
            "sys.modules['torch'] = None",
            "import numpy as np, converter",
            "f = converter.load('m.shlo').to_jax()",
            "np.save('y.npy', np.asarray(f(np.load('x.npy'))))",
            "assert sys.modules['torch'] is None",
        ]
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_zero_dim_parameters_survive_save_and_load(tmp_path):
    from converter.weights import read_safetensors, save_safetensors

    save_safetensors(tmp_path / "w.safetensors", {"a": np.array(2.5, np.float32), "b": np.ones((2, 3))})
    back, _ = read_safetensors(tmp_path / "w.safetensors")
    assert back["a"].shape == () and back["a"] == np.float32(2.5)
    assert back["b"].shape == (2, 3)


def test_value_specialized_model_is_public():
    """``from_onnx`` may return a ValueSpecializedModel: the top-level name is that class."""
    from converter.frontends.onnx.values import ValueSpecializedModel

    assert "ValueSpecializedModel" in converter.__all__
    assert converter.ValueSpecializedModel is ValueSpecializedModel
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        converter.NoSuchName  # noqa: B018


_TINY = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %x, %x : tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""


def _saved_with(tmp_path, name, change) -> str:
    """A tiny module saved, then its manifest rewritten by ``change(manifest)`` (returning the
    new manifest); members stored, as ``save`` writes them."""
    path = tmp_path / name
    converter.from_stablehlo(_TINY).save(path)
    with zipfile.ZipFile(path) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    files["manifest.json"] = json.dumps(change(json.loads(files["manifest.json"]))).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
    return str(path)


def test_manifest_versions_up_to_the_current_one_load(tmp_path):
    """Versions 0 (none written) to 3 load; 4 is newer; a non-integer version, another format
    name and a manifest that is no JSON object are corrupt files, each named as such."""
    for version in (3, None):
        p = _saved_with(tmp_path, f"v{version}.shlo", lambda m, v=version: {**m, "version": v} if v else {
            k: x for k, x in m.items() if k != "version"
        })  # fmt: skip
        assert converter.load(p).op_histogram()["stablehlo.add"] == 1
    p = _saved_with(tmp_path, "v4.shlo", lambda m: {**m, "version": 4})
    with pytest.raises(ModuleFormatError, match=r"format version 4 is newer than 3$"):
        converter.load(p)
    for bad in (True, "1", 1.0):
        p = _saved_with(tmp_path, "vbad.shlo", lambda m, b=bad: {**m, "version": b})
        with pytest.raises(
            ModuleFormatError, match=rf"corrupt converter.Module manifest \(version {bad!r}\)$"
        ):
            converter.load(p)
    p = _saved_with(tmp_path, "other.shlo", lambda m: {**m, "format": "other"})
    with pytest.raises(ModuleFormatError, match=r"^.*other.shlo: not a converter.Module file$"):
        converter.load(p)
    p = _saved_with(tmp_path, "list.shlo", lambda m: [m])
    with pytest.raises(
        ModuleFormatError, match=r"corrupt converter.Module manifest \(a JSON list, not an object\)$"
    ):
        converter.load(p)
    p = _saved_with(tmp_path, "nosig.shlo", lambda m: {k: x for k, x in m.items() if k != "signature"})
    with pytest.raises(
        ModuleFormatError, match=r"corrupt converter.Module manifest \(KeyError: 'signature'\)$"
    ):
        converter.load(p)


def test_source_meta_and_the_parameters_a_module_needs(tmp_path):
    from converter.signature import Signature

    m = converter.from_stablehlo(_TINY)
    assert repr(m) == "<converter.Module from stablehlo: 0 params, 1 inputs, 1 outputs>"
    m2 = converter.Module(m.mlir, m.signature, source="torch", meta={"model": "Tiny"})
    m2.save(tmp_path / "m.shlo")
    back = converter.load(tmp_path / "m.shlo")
    assert back.source == "torch" and back.meta == {"model": "Tiny"}
    p = _saved_with(
        tmp_path, "bare.shlo", lambda d: {k: x for k, x in d.items() if k not in ("source", "meta")}
    )
    bare = converter.load(p)
    assert bare.source == "stablehlo" and bare.meta == {}
    sig = Signature.from_json(
        {**m.signature.to_json(), "params": [LeafSpec("w", (2,), "float32", "parameter").to_json()]}
    )
    with pytest.raises(ValueError, match=r"^no values for parameters \['w'\]$"):
        converter.Module(m.mlir, sig)
