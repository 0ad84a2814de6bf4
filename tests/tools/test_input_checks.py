"""Every refusal condition of the input checkers, one test each, at the API level (issue 27).

``.pt2`` (``converter.load_pt2``), ``.shlo`` (``converter.load``, files ``Module.save``
writes) and ``.onnx`` (``converter.from_onnx``): each test makes a file that breaks exactly
one rule from a good one and asserts the typed error and the words naming what is at
fault, so removing that check (or letting it pass the wrong thing) fails the test. Each
good file is also shown to load, so a test cannot pass by refusing everything.
(``tests/tools/test_security.py`` has the pickled-payload, shape-expression, graph-target and
size refusals.)
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import converter
from converter.errors import ConversionError, ModuleFormatError, ParseError, UntrustedInputError


class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.lin(x)


def _rewrite(src: Path, dst: Path, edit=lambda name, data: data, add: dict | None = None, drop=()) -> Path:
    """A copy of the zip ``src``: members edited by ``edit(name, data) -> data``, those whose
    name ends with one of ``drop`` left out, ``add`` ({name: bytes}) added."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            if any(info.filename.endswith(d) for d in drop):
                continue
            zout.writestr(info, edit(info.filename, zin.read(info)))
        for name, data in (add or {}).items():
            zout.writestr(name, data)
    return dst


def _prefix(path: Path) -> str:
    with zipfile.ZipFile(path) as zf:
        return zf.namelist()[0].partition("/")[0]


# --------------------------------------------------------------------------------------- .pt2


@pytest.fixture(scope="module")
def pt2(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pt2") / "good.pt2"
    torch.export.save(torch.export.export(_Tiny(), (torch.randn(3, 4),)), path)
    return path


def _weights_config(name: str, data: bytes, change) -> bytes:
    if name.endswith("_weights_config.json"):
        config = json.loads(data)
        change(config)
        return json.dumps(config).encode()
    return data


def test_good_pt2_loads(pt2):
    ep = converter.load_pt2(pt2)
    assert converter.from_torch(ep).signature.inputs[0].shape == (3, 4)


def test_pt2_missing_file(tmp_path):
    with pytest.raises(ParseError, match="no such file"):
        converter.load_pt2(tmp_path / "absent.pt2")


def test_pt2_empty_file(tmp_path):
    (tmp_path / "e.pt2").write_bytes(b"")
    with pytest.raises(ParseError, match="empty file"):
        converter.load_pt2(tmp_path / "e.pt2")


def test_pt2_not_a_zip(tmp_path):
    (tmp_path / "z.pt2").write_bytes(b"not a zip archive at all")
    with pytest.raises(ParseError, match="not a zip file"):
        converter.load_pt2(tmp_path / "z.pt2")


def test_pt2_without_a_program(pt2, tmp_path):
    bad = _rewrite(pt2, tmp_path / "noprog.pt2", drop=(".json",))
    with pytest.raises(ParseError, match="no exported program"):
        converter.load_pt2(bad)


@pytest.mark.parametrize("trust", [False, True])
def test_pt2_member_not_json(pt2, tmp_path, trust):
    bad = _rewrite(
        pt2, tmp_path / "json.pt2", lambda n, d: b"{not json" if n.endswith("_weights_config.json") else d
    )
    with pytest.raises(ParseError, match=r"_weights_config\.json is not valid JSON"):
        converter.load_pt2(bad, trust_pickle=trust)


def test_pt2_aotinductor_library_refused_unless_trusted(pt2, tmp_path):
    bad = _rewrite(
        pt2, tmp_path / "aoti.pt2", add={f"{_prefix(pt2)}/data/aotinductor/model/m.so": b"\x7fELF"}
    )
    with pytest.raises(UntrustedInputError, match="aotinductor"):
        converter.load_pt2(bad)
    converter.tools.pt2.check_pt2(bad, trust_pickle=True)  # structure only: the opt-in passes it


def test_pt2_payload_config_not_a_mapping(pt2, tmp_path):
    bad = _rewrite(
        pt2, tmp_path / "cfg.pt2", lambda n, d: _weights_config(n, d, lambda c: c.update(config=[1]))
    )
    with pytest.raises(ParseError, match="is not a payload config"):
        converter.load_pt2(bad)


def test_pt2_payload_entry_without_path_name(pt2, tmp_path):
    def change(config):
        del config["config"]["lin.weight"]["path_name"]

    bad = _rewrite(pt2, tmp_path / "path.pt2", lambda n, d: _weights_config(n, d, change))
    with pytest.raises(ParseError, match=r"entry 'lin\.weight' has no path_name"):
        converter.load_pt2(bad)


def test_pt2_payload_entry_with_malformed_sizes(pt2, tmp_path):
    def change(config):
        config["config"]["lin.weight"]["tensor_meta"]["sizes"] = [{"as_int": "two"}]

    bad = _rewrite(pt2, tmp_path / "sizes.pt2", lambda n, d: _weights_config(n, d, change))
    with pytest.raises(ParseError, match=r"entry 'lin\.weight' has malformed sizes"):
        converter.load_pt2(bad)


@pytest.mark.parametrize("prefix", ["custom_obj_", "opaque_obj_"])
def test_pt2_custom_and_opaque_objects_are_pickles(pt2, tmp_path, prefix):
    """An entry whose payload is a custom or opaque object is unpickled by torch: refused
    even without ``use_pickle``."""

    def change(config):
        config["config"]["lin.weight"]["path_name"] = prefix + "0"

    bad = _rewrite(pt2, tmp_path / "obj.pt2", lambda n, d: _weights_config(n, d, change))
    with pytest.raises(UntrustedInputError, match=prefix):
        converter.load_pt2(bad)


def test_pt2_stray_pickle_member_refused(pt2, tmp_path):
    """Any ``.pt``/``.pkl`` member must load with torch's restricted unpickler."""
    import pickle

    bad = _rewrite(pt2, tmp_path / "pkl.pt2", add={f"{_prefix(pt2)}/extra/x.pkl": pickle.dumps(print)})
    with pytest.raises(UntrustedInputError, match=r"extra/x\.pkl"):
        converter.load_pt2(bad)


def test_pt2_shape_expression_refused_even_when_trusted(pt2, tmp_path):
    def edit(name, data):
        if name.endswith(".json") and "/models/" in f"/{name}":
            tree = json.loads(data)
            tree.setdefault("extra", {})["expr_str"] = "__import__('os').getcwd()"
            return json.dumps(tree).encode()
        return data

    bad = _rewrite(pt2, tmp_path / "expr.pt2", edit)
    with pytest.raises(UntrustedInputError, match="sympy.sympify"):
        converter.load_pt2(bad, trust_pickle=True)


# --------------------------------------------------------------------------------------- .shlo


@pytest.fixture(scope="module")
def shlo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("shlo") / "good.shlo"
    converter.from_torch(_Tiny(), (torch.randn(3, 4),)).save(path)
    return path


def test_good_shlo_loads(shlo):
    x = np.ones((3, 4), np.float32)
    assert np.asarray(converter.load(shlo).to_jax()(x)).shape == (3, 2)


def test_shlo_missing_file(tmp_path):
    with pytest.raises(ModuleFormatError, match="no such file"):
        converter.load(tmp_path / "absent.shlo")


def test_shlo_not_a_zip(tmp_path):
    (tmp_path / "z.shlo").write_bytes(b"plain bytes")
    with pytest.raises(ModuleFormatError, match="corrupt"):
        converter.load(tmp_path / "z.shlo")


@pytest.mark.parametrize("member", ["manifest.json", "module.mlirbc", "params.safetensors"])
def test_shlo_missing_member(shlo, tmp_path, member):
    bad = _rewrite(shlo, tmp_path / "m.shlo", drop=(member,))
    with pytest.raises(ModuleFormatError, match="corrupt"):
        converter.load(bad)


def _manifest(shlo: Path, tmp: Path, change) -> Path:
    def edit(name, data):
        if name == "manifest.json":
            manifest = json.loads(data)
            change(manifest)
            return json.dumps(manifest).encode()
        return data

    return _rewrite(shlo, tmp / "man.shlo", edit)


def test_shlo_manifest_not_json(shlo, tmp_path):
    bad = _rewrite(shlo, tmp_path / "j.shlo", lambda n, d: b"{oops" if n == "manifest.json" else d)
    with pytest.raises(ModuleFormatError, match="corrupt"):
        converter.load(bad)


def test_shlo_other_format(shlo, tmp_path):
    bad = _manifest(shlo, tmp_path, lambda m: m.update(format="something-else"))
    with pytest.raises(ModuleFormatError, match="not a"):
        converter.load(bad)


def test_shlo_newer_version(shlo, tmp_path):
    from converter.module import FORMAT_VERSION

    converter.load(_manifest(shlo, tmp_path, lambda m: m.update(version=FORMAT_VERSION)))
    bad = _manifest(shlo, tmp_path, lambda m: m.update(version=FORMAT_VERSION + 1))
    with pytest.raises(ModuleFormatError, match="is newer than"):
        converter.load(bad)


def test_shlo_manifest_signature_corrupt(shlo, tmp_path):
    bad = _manifest(shlo, tmp_path, lambda m: m.update(signature={"params": "nonsense"}))
    with pytest.raises(ModuleFormatError, match="corrupt .* manifest"):
        converter.load(bad)


def test_shlo_params_missing_a_parameter(shlo, tmp_path):
    def change(m):
        m["signature"]["params"].append({**m["signature"]["params"][0], "name": "ghost"})

    bad = _manifest(shlo, tmp_path, change)
    with pytest.raises(ModuleFormatError, match="ghost"):
        converter.load(bad)


def test_shlo_module_bytes_corrupt(shlo, tmp_path):
    bad = _rewrite(shlo, tmp_path / "b.shlo", lambda n, d: b"MLIR garbage" if n == "module.mlirbc" else d)
    with pytest.raises(ConversionError):
        converter.load(bad)


# --------------------------------------------------------------------------------------- .onnx


def _onnx_model(weight: np.ndarray | None = None) -> onnx.ModelProto:
    w = np.arange(6, dtype=np.float32).reshape(3, 2) if weight is None else weight
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_good_onnx_loads(tmp_path):
    path = tmp_path / "good.onnx"
    onnx.save(_onnx_model(), path)
    m = converter.from_onnx(str(path), dims={"n": 2})
    (y,) = m.to_jax()(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(np.asarray(y), [[6, 9], [6, 9]])


def test_onnx_missing_file(tmp_path):
    with pytest.raises(ParseError, match="absent.onnx"):
        converter.from_onnx(str(tmp_path / "absent.onnx"))


def test_onnx_not_a_model(tmp_path):
    (tmp_path / "x.onnx").write_bytes(b"\xff\xfe not protobuf")
    with pytest.raises(ParseError):
        converter.from_onnx(str(tmp_path / "x.onnx"))


def test_onnx_checker_refusal(tmp_path):
    model = _onnx_model()
    model.graph.node[0].input[1] = "undefined_name"
    with pytest.raises(ParseError, match="invalid ONNX model"):
        converter.from_onnx(model)


@pytest.mark.parametrize("columns", [2, 6000])
def test_onnx_initializer_not_fitting_its_dims(columns):
    """A small initializer is the checker's to refuse; a big one (left out of the skeleton
    the checker sees) is checked when its array is made."""
    model = _onnx_model(np.zeros((3, columns), np.float32))
    model.graph.initializer[0].dims[:] = [4, columns]  # a row more than it holds
    words = "initializer 'w' does not fit dims" if columns > 100 else r"tensor name: w\) raw_data size"
    with pytest.raises(ParseError, match=f"invalid ONNX model.*{words}"):
        converter.from_onnx(model)


def test_onnx_external_data_outside_the_model_directory(tmp_path):
    """External data whose location leaves the model's directory is refused (never read)."""
    (tmp_path / "secret.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    model = _onnx_model()
    t = model.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "../secret.bin"), ("offset", "0"), ("length", "24")):
        t.external_data.add(key=k, value=v)
    (tmp_path / "m").mkdir()
    path = tmp_path / "m" / "model.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ParseError):
        converter.from_onnx(str(path))


@pytest.mark.parametrize("size", [True, -1, 2.0, "2"])
def test_onnx_dims_sizes_must_be_non_negative_integers(size):
    """``True == 1`` in Python, but a bool is not a size: refused like the others."""
    with pytest.raises(ConversionError, match="non-negative integers"):
        converter.from_onnx(_onnx_model(), dims={"n": size})


def test_onnx_dims_unknown_name():
    with pytest.raises(ConversionError, match=r"unknown symbolic dimension\(s\) \['m'\].*\['n'\]"):
        converter.from_onnx(_onnx_model(), dims={"m": 2})
