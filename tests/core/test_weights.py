"""converter.weights: the streaming safetensors writer, the memory-mapping reader, alignment."""

from __future__ import annotations

import json
import zipfile

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy

import converter
from converter.errors import ModuleFormatError
from converter.weights import ALIGN, aligned_copy, read_safetensors, save_safetensors


def test_round_trip_of_every_kind_of_dtype(tmp_path):
    rng = np.random.default_rng(0)
    params = {
        "f32": rng.normal(size=(3, 5)).astype(np.float32),
        "bf16": rng.normal(size=(7,)).astype(ml_dtypes.bfloat16),
        "c64": (rng.normal(size=(2, 3)) + 1j * rng.normal(size=(2, 3))).astype(np.complex64),
        "i4": np.arange(-3, 3).astype(ml_dtypes.int4),
        "scalar": np.array(True),
        "empty": np.zeros((0, 4), np.int64),
    }
    save_safetensors(tmp_path / "w.safetensors", params)
    back, _ = read_safetensors(tmp_path / "w.safetensors")
    assert set(back) == set(params)
    for name, value in params.items():
        assert back[name].dtype == value.dtype and back[name].shape == value.shape, name
        np.testing.assert_array_equal(back[name], value)
    # safetensors itself reads the file (types it has are stored under their own codes)
    plain = safetensors.numpy.load_file(tmp_path / "w.safetensors")
    np.testing.assert_array_equal(plain["f32"], params["f32"])


def test_data_is_aligned_in_the_file_so_mapped_arrays_are_aligned(tmp_path):
    params = {"odd": np.arange(3, dtype=np.int8), "big": np.ones((64, 64), np.float32), "b2": np.ones(48)}
    save_safetensors(tmp_path / "w.safetensors", params)
    back, _ = read_safetensors(tmp_path / "w.safetensors")
    assert back["big"].ctypes.data % ALIGN == 0 and back["b2"].ctypes.data % ALIGN == 0
    assert not back["big"].flags.writeable
    assert aligned_copy(np.arange(10.0)).ctypes.data % ALIGN == 0


def test_module_files_of_the_previous_writer_still_load(tmp_path):
    """Files whose params.safetensors came from safetensors.numpy (bfloat16 stored as U16,
    the canonical dtypes in the metadata), deflated or not aligned, load as before."""
    m = converter.from_stablehlo(
        "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  return %x : tensor<2xf32>\n}\n"
    )
    m.save(tmp_path / "new.shlo")
    with zipfile.ZipFile(tmp_path / "new.shlo") as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    weights = {"p": np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)}
    files["params.safetensors"] = safetensors.numpy.save(
        weights, metadata={"dtypes": json.dumps({"p": "bfloat16"})}
    )
    with zipfile.ZipFile(tmp_path / "old.shlo", "w") as zf:
        zf.writestr("manifest.json", files["manifest.json"])
        zf.writestr("module.mlirbc", files["module.mlirbc"])
        zf.writestr("params.safetensors", files["params.safetensors"])
    back = converter.load(tmp_path / "old.shlo")
    assert back.params["p"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(back.params["p"].astype(np.float32), np.arange(4, dtype=np.float32))
    with zipfile.ZipFile(tmp_path / "deflated.shlo", "w", zipfile.ZIP_DEFLATED) as zf:
        for n, data in files.items():
            zf.writestr(n, data)
    deflated = converter.load(tmp_path / "deflated.shlo")  # read, not mapped
    np.testing.assert_array_equal(deflated.params["p"].astype(np.float32), np.arange(4, dtype=np.float32))


def test_truncated_data_is_a_format_error(tmp_path):
    save_safetensors(tmp_path / "w.safetensors", {"a": np.ones(100, np.float32)})
    data = (tmp_path / "w.safetensors").read_bytes()
    (tmp_path / "w.safetensors").write_bytes(data[:-8])
    # the error names the file, the tensor and its offsets (the data's end is checked first)
    fault = r"w\.safetensors.*tensor 'a': data offsets \[0, 400\] do not fit"
    with pytest.raises(ModuleFormatError, match=fault):
        read_safetensors(tmp_path / "w.safetensors")


def test_a_header_past_the_end_is_named(tmp_path):
    """A file cut inside its JSON header: refused for the header's claimed length, before
    any JSON is read."""
    save_safetensors(tmp_path / "w.safetensors", {"a": np.ones(4, np.float32)})
    data = (tmp_path / "w.safetensors").read_bytes()
    (tmp_path / "w.safetensors").write_bytes(data[:20])
    with pytest.raises(
        ModuleFormatError, match=r"w\.safetensors: corrupt safetensors data \(header past the end\)"
    ):
        read_safetensors(tmp_path / "w.safetensors")


def test_from_torch_shares_the_weights_and_to_jax_uses_them_in_place():
    """Default (a copy-on-write snapshot, see tests/frontends/torch/test_param_copy.py) and
    ``copy=False``: read-only views of the torch tensors' memory, which is aligned, and the
    JAX function uses that memory in place (jaxlib's CPU client aliases aligned host arrays)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(64, 32).eval()
    x = torch.randn(2, 64)
    snap = converter.from_torch(model, (x,))
    shared = converter.from_torch(model, (x,), copy=False)
    ptr = model.weight.const_data_ptr()
    for module in (snap, shared):
        weight = module.params["weight"]
        assert weight.ctypes.data == ptr and weight.ctypes.data % ALIGN == 0
        assert not weight.flags.writeable
        f = module.to_jax()
        assert f.params["weight"].unsafe_buffer_pointer() == ptr
        np.testing.assert_allclose(np.asarray(f(x.numpy())), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_negative_dimension_is_refused_by_name(tmp_path):
    """A header whose shape has a negative size is refused for its shape (``[4, -1]``), not
    later for data that does not fit it."""
    import json
    import struct

    header = json.dumps({"a": {"dtype": "F32", "shape": [4, -1], "data_offsets": [0, 16]}}).encode()
    (tmp_path / "w.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))
    with pytest.raises(ModuleFormatError, match=r"tensor 'a': invalid shape \[4, -1\]"):
        read_safetensors(tmp_path / "w.safetensors")
