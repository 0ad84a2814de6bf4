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


def test_data_offsets_longer_or_shorter_than_the_shape_are_refused(tmp_path):
    """A tensor's byte span must be exactly its shape's size: 20 or 12 bytes for a ``[4]``
    float32 tensor are refused by name, whether or not the file holds them."""
    import json
    import struct

    for span in (20, 12):
        header = json.dumps({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, span]}}).encode()
        (tmp_path / "w.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(24))
        with pytest.raises(ModuleFormatError, match=rf"tensor 'a': data offsets \[0, {span}\] do not fit"):
            read_safetensors(tmp_path / "w.safetensors")


def test_writing_at_an_offset_aligns_the_data_there_and_keeps_the_callers_metadata(tmp_path):
    """``offset`` is where the writer's first byte lands in the file on disk: the data starts
    at a multiple of ALIGN counted from the file's start, not the writer's. The byte count
    returned is what was written; the caller's metadata comes back, the reader's own
    bookkeeping (``dtypes``, ``raw``) does not."""
    import io

    from converter.weights import parse_safetensors, write_safetensors

    params = {"c": np.array([1 + 2j, -3j], np.complex64), "x": np.arange(6, dtype=np.int16)}
    for offset in (0, 10, 63):
        f = io.BytesIO()
        written = write_safetensors(f, params, metadata={"origin": "test"}, offset=offset)
        data = f.getvalue()
        assert written == len(data) == 8 + int.from_bytes(data[:8], "little") + 16 + 12
        start = 8 + int.from_bytes(data[:8], "little")
        assert (offset + start) % ALIGN == 0, offset
        back, meta = parse_safetensors(np.frombuffer(data, np.uint8))
        assert meta == {"origin": "test"}
        assert back["c"].dtype == np.complex64 and back["c"].shape == (2,)
        np.testing.assert_array_equal(back["c"], params["c"])
        np.testing.assert_array_equal(back["x"], params["x"])


def test_a_negative_data_offset_is_refused(tmp_path):
    """``data_offsets`` count from the end of the header: a negative begin would read the
    header's own bytes as the tensor, even when its length matches the shape."""
    import struct

    header = json.dumps({"a": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}}).encode()
    (tmp_path / "w.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(8))
    with pytest.raises(ModuleFormatError, match=r"tensor 'a': invalid shape \[1\] or offsets \[-1, 0\]"):
        read_safetensors(tmp_path / "w.safetensors")


def test_an_empty_file_and_an_open_file_are_read(tmp_path):
    """An empty file is refused as corrupt data naming it (there is nothing to map); an open
    binary file is mapped through its descriptor and named by its path."""
    (tmp_path / "empty.safetensors").write_bytes(b"")
    with pytest.raises(ModuleFormatError, match=r"empty\.safetensors: corrupt safetensors data"):
        read_safetensors(tmp_path / "empty.safetensors")
    with open(tmp_path / "empty.safetensors", "rb") as f, pytest.raises(ModuleFormatError, match="empty"):
        read_safetensors(f)
    save_safetensors(tmp_path / "w.safetensors", {"a": np.arange(3, dtype=np.float32)})
    with open(tmp_path / "w.safetensors", "rb") as f:
        back, _ = read_safetensors(f)
    np.testing.assert_array_equal(back["a"], np.arange(3, dtype=np.float32))


def test_zip_member_offset_of_stored_deflated_and_corrupt_members(tmp_path):
    """A stored member's bytes start after its local header (30 bytes, its name and extra
    field): reading there gives the member, one with an extra field too; a deflated member
    has no mappable offset; a local header without its signature is refused naming the
    member."""
    from converter.weights import zip_member_offset

    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("first.bin", b"0123456789")
        second = zipfile.ZipInfo("second/member.bin")
        second.extra = b"\xfe\xca\x04\x00abcd"  # an extra field of 8 bytes (id, size, data)
        zf.writestr(second, b"abcdef")
        zf.writestr("packed.txt", b"x" * 100, compress_type=zipfile.ZIP_DEFLATED)
    data = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        for name, want in (("first.bin", b"0123456789"), ("second/member.bin", b"abcdef")):
            offset, length = zip_member_offset(path, zf, name)
            assert data[offset : offset + length] == want, name
        assert zip_member_offset(path, zf, "packed.txt") is None
        header = zf.getinfo("second/member.bin").header_offset
    broken = tmp_path / "broken.zip"
    broken.write_bytes(data[:header] + b"XX" + data[header + 2 :])
    with zipfile.ZipFile(broken) as zf:
        with pytest.raises(ModuleFormatError, match=r"bad zip local header for second/member\.bin"):
            zip_member_offset(broken, zf, "second/member.bin")
