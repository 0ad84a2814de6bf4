"""Untrusted inputs run nothing: crafted ``.pt2`` files whose pickles (or shape expressions)
would create a marker file are refused by the CLI and the API; the marker never appears.
Each crafted file is first shown to run its payload under plain ``torch.export.load``, so
the tests would fail if the refusal were missing. Sizes a file claims but cannot hold are
refused before allocating."""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from pathlib import Path

import pytest
import torch

import converter
from converter.tools import cli
from converter.tools.pt2 import _safe_expr, _safe_target, check_pt2


class _Marker:
    """Unpickling it creates ``path`` (standing in for any command)."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.lin(x)


@pytest.fixture(scope="module")
def good_pt2(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pt2") / "good.pt2"
    torch.export.save(torch.export.export(_Tiny(), (torch.randn(3, 4),)), path)
    return path


def _rewrite(src: Path, dst: Path, edit) -> Path:
    """A copy of the archive ``src`` with ``edit(name, data) -> data`` applied to members."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            zout.writestr(info, edit(info.filename, zin.read(info)))
    return dst


def _pickled_weight(good: Path, tmp: Path, marker: Path) -> Path:
    """``lin.weight`` marked ``"use_pickle": true``, its payload a pickle creating ``marker``."""
    weight = json.loads(_member(good, "_weights_config.json"))["config"]["lin.weight"]["path_name"]

    def edit(name: str, data: bytes) -> bytes:
        if name.endswith("_weights_config.json"):
            config = json.loads(data)
            config["config"]["lin.weight"]["use_pickle"] = True
            return json.dumps(config).encode()
        if name.endswith(f"data/weights/{weight}"):
            return pickle.dumps(_Marker(marker))
        return data

    return _rewrite(good, tmp / "evil.pt2", edit)


def _pickled_sample_inputs(good: Path, tmp: Path, marker: Path) -> Path:
    """Sample inputs torch's restricted loader refuses (then torch falls back to full pickle)."""

    def edit(name: str, data: bytes) -> bytes:
        if "/data/sample_inputs/" in name:
            buf = io.BytesIO()
            torch.save((_Marker(marker),), buf)
            return buf.getvalue()
        return data

    return _rewrite(good, tmp / "evil_inputs.pt2", edit)


def _member(path: Path, suffix: str) -> bytes:
    with zipfile.ZipFile(path) as zf:
        return zf.read(next(n for n in zf.namelist() if n.endswith(suffix)))


@pytest.mark.parametrize("craft", [_pickled_weight, _pickled_sample_inputs])
def test_crafted_pt2_runs_nothing(craft, good_pt2, tmp_path, capsys):
    # the payload is real: plain torch.export.load runs it
    shown = tmp_path / "shown"
    try:
        torch.export.load(craft(good_pt2, tmp_path, shown))
    except Exception:  # noqa: BLE001 - torch may fail after running the payload
        pass
    assert shown.exists(), "the crafted file does not exercise torch's pickle path"
    capsys.readouterr()  # torch's own logging of that load

    marker = tmp_path / "marker"
    evil = craft(good_pt2, tmp_path, marker)
    out = tmp_path / "x.shlo"
    assert cli.main([str(evil), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--trust-pickle" in err and "Traceback" not in err
    assert cli.main(["inspect", str(evil)]) == 2
    assert "--trust-pickle" in capsys.readouterr().err
    with pytest.raises(converter.UntrustedInputError, match="trust_pickle=True"):
        converter.from_torch(evil)
    with pytest.raises(converter.UntrustedInputError):
        converter.load_pt2(evil)
    assert not marker.exists() and not out.exists()


def test_trust_pickle_opts_in(good_pt2, tmp_path):
    marker = tmp_path / "marker"
    evil = _pickled_sample_inputs(good_pt2, tmp_path, marker)
    assert converter.load_pt2(evil, trust_pickle=True) is not None
    assert marker.exists()  # the user asked for it


def test_a_plain_pt2_loads(good_pt2):
    m = converter.from_torch(good_pt2)
    assert [p.name for p in m.signature.params] == ["lin.weight", "lin.bias"]


def test_shape_expressions_that_are_code_are_refused(good_pt2, tmp_path):
    def edit(name: str, data: bytes) -> bytes:
        if name.endswith("models/model.json"):
            program = json.loads(data)
            program["range_constraints"] = {"s0": {"min_val": 1, "max_val": 8}}
            program["graph_module"]["graph"]["sym_int_values"] = {
                "s0": {"as_expr": {"expr_str": "__import__('os').system('touch pwned')", "hint": None}}
            }
            return json.dumps(program).encode()
        return data

    evil = _rewrite(good_pt2, tmp_path / "expr.pt2", edit)
    with pytest.raises(converter.UntrustedInputError, match="sympy.sympify"):
        check_pt2(evil, trust_pickle=True)  # no option loads it


@pytest.mark.parametrize(
    "expr, safe",
    [
        ("s0", True),
        ("2*s0 + 1", True),
        ("Max(1, s0) // 2", True),
        ("Eq(Mod(s1, 4), 0)", True),
        ("TruncToInt(zuf0)", True),
        ("Add(FloorDiv(Symbol('s77', positive=True, integer=True), Integer(2)), Integer(1))", True),
        ("StrictLessThan(Symbol('u0', integer=True), Integer(5))", True),
        ("Float('1.5', precision=53)", True),
        ("OpaqueUnaryFn_sqrt(Symbol('s0', positive=True, integer=True))", True),
        ("Symbol('s0').__class__", False),
        ("getattr(Symbol, 'name')", False),
        ("Symbol('s0')[0]", False),
        ("__import__('os').system('x')", False),
        ("exit()", False),
        ("s0.__class__", False),
        ("eval", False),
        ("BitwiseFn___class__(s0)", False),  # the pattern of torch's bitwise functions, but a dunder
        ("_private(s0)", False),
    ],
)
def test_safe_expressions(expr, safe):
    assert _safe_expr(expr) is safe


def test_sizes_a_pt2_cannot_hold_are_refused(good_pt2, tmp_path):
    def edit(name: str, data: bytes) -> bytes:
        if name.endswith("_weights_config.json"):
            config = json.loads(data)
            config["config"]["lin.bias"]["tensor_meta"]["sizes"] = [{"as_int": 1 << 40}, {"as_int": 1 << 20}]
            return json.dumps(config).encode()
        if name.endswith("data/weights/weight_1"):
            return b""  # torch would allocate torch.zeros(sizes) for an empty record
        return data

    evil = _rewrite(good_pt2, tmp_path / "huge.pt2", edit)
    # 2^60 float32 elements: 2^62 bytes, refused as an allocation before the inflate check
    claim = "lin.bias .* claims 4,611,686,018,427,387,904 bytes, more than the memory budget"
    with pytest.raises(converter.ParseError, match=claim):
        check_pt2(evil)


def test_shlo_members_claiming_more_than_memory_are_refused(tmp_path, monkeypatch):
    path = tmp_path / "big.shlo"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", "{}" + " " * 4096)
    monkeypatch.setattr("converter.fileio.memory_bytes", lambda: 1024)  # a 1 KiB machine
    with pytest.raises(converter.ParseError, match="manifest.json claims 4,098 bytes, more than"):
        converter.load(path)


def test_a_pt2_with_symbolic_shapes_passes_the_check(tmp_path):
    """torch writes shape expressions with sympy.srepr (Symbol('s77', positive=True, ...)):
    they are not code, and the check lets them through."""

    class Cat(torch.nn.Module):
        def forward(self, x, y):
            return torch.cat([x, y], 0)[: x.shape[0] // 2 + 1] * 2

    dims = ({0: torch.export.Dim("b", min=2, max=64)}, {0: torch.export.Dim("c", min=2, max=64)})
    path = tmp_path / "dyn.pt2"
    torch.export.save(
        torch.export.export(Cat(), (torch.randn(4, 4), torch.randn(6, 4)), dynamic_shapes=dims), path
    )
    assert "Symbol(" in _member(path, "models/model.json").decode()
    check_pt2(path)
    assert converter.load_pt2(path).module()(torch.ones(4, 4), torch.ones(2, 4)).shape == (3, 4)


@pytest.mark.parametrize(
    "target, safe",
    [
        ("torch.ops.aten.addmm.default", True),
        ("torch.ops.higher_order.cond", True),
        ("_operator.getitem", True),
        ("_operator.floordiv", True),
        ("math.trunc", True),
        ("torch.sym_max", True),
        ("torch._C._set_grad_enabled", True),
        ("torch.hub.load", False),
        ("torch.ops.load_library", False),
        ("torch.load", False),
        ("_operator.call", False),
        ("_operator.attrgetter", False),
        ("torch.ops.aten.__class__", False),
        ("torch.ops.aten.add.__call__", False),  # an op's overload may not be a dunder
        ("#my_ns:my_op", True),
    ],
)
def test_graph_node_targets(target, safe):
    assert _safe_target(target) is safe


def test_graph_nodes_calling_python_callables_are_refused(good_pt2, tmp_path):
    """A node whose target is a Python callable (torch.hub.load downloads and runs code)
    would be called when the program runs or is re-traced (run_decompositions)."""

    def edit(name: str, data: bytes) -> bytes:
        if name.endswith("models/model.json"):
            return data.replace(b'"torch.ops.aten.linear.default"', b'"torch.hub.load"')
        return data

    assert b"torch.ops.aten.linear.default" in _member(good_pt2, "models/model.json")
    evil = _rewrite(good_pt2, tmp_path / "target.pt2", edit)
    with pytest.raises(converter.UntrustedInputError, match="graph node target torch.hub.load"):
        check_pt2(evil)


# --------------------------------------------------------------------------- bombs

_MEASURE = r"""
import contextlib, io, json, sys
import numpy as np
import converter
from converter.tools import cli

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

converter.from_jax(lambda x: x + 1, np.ones(2, np.float32))  # the API's first use of XLA
cases, warm = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for argv in warm:  # imports, XLA and torch set up before measuring
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(argv) == 0, argv
out = {}
for name, argv in cases.items():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM restarts from the current RSS
    base = status("VmRSS:")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    out[name] = {"rc": rc, "peak": status("VmHWM:") - base, "err": err.getvalue()}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def bombs(good_pt2, tmp_path_factory):
    """Each bomb (files of about 1 MB declaring 1 GiB or more) run by ``convert`` in one fresh
    process: ``{case: {"rc", "peak" (bytes of RSS above the RSS before it), "err"}}``, and
    that process's own stderr."""
    import os
    import subprocess
    import sys

    from tests.zipcraft import Member, build, deflated_zeros

    d = tmp_path_factory.mktemp("bombs")
    zeros = deflated_zeros(1024)  # 1 GiB of zeros in about 1 MB
    big = 1 << 30
    shlo = d / "good.shlo"
    converter.from_torch(_Tiny(), (torch.randn(3, 4),)).save(shlo)
    with zipfile.ZipFile(shlo) as zf:
        shlo_members = {i.filename: zf.read(i) for i in zf.infolist()}
    with zipfile.ZipFile(good_pt2) as zf:
        pt2_members = {i.filename: zf.read(i) for i in zf.infolist()}

    def with_bomb(members: dict, target: str) -> bytes:
        return build(
            [
                Member(n, zeros, method=8, crc=0, size=big) if n.endswith(target) else Member(n, data)
                for n, data in members.items()
            ]
        )

    (d / "manifest.shlo").write_bytes(with_bomb(shlo_members, "manifest.json"))
    (d / "params.shlo").write_bytes(with_bomb(shlo_members, "params.safetensors"))
    (d / "json.pt2").write_bytes(with_bomb(pt2_members, "models/model.json"))
    (d / "weight.pt2").write_bytes(with_bomb(pt2_members, "data/weights/weight_0"))
    (d / "inputs.npz").write_bytes(build([Member("arr_0.npy", zeros, method=8, crc=0, size=big)]))

    def no_data(name: str, data: bytes) -> bytes:  # a 1 GiB tensor declared without its bytes
        if name.endswith("_weights_config.json"):
            config = json.loads(data)
            config["config"]["lin.bias"]["tensor_meta"]["sizes"] = [{"as_int": 1 << 14}, {"as_int": 1 << 14}]
            return json.dumps(config).encode()
        return b"" if name.endswith("data/weights/weight_1") else data

    _rewrite(good_pt2, d / "nodata.pt2", no_data)
    cases = {
        "shlo-manifest": [str(d / "manifest.shlo"), "-o", str(d / "o.mlir")],
        "shlo-params": [str(d / "params.shlo"), "-o", str(d / "o.mlir")],
        "pt2-json": [str(d / "json.pt2"), "-o", str(d / "o.shlo")],
        "pt2-weight": [str(d / "weight.pt2"), "-o", str(d / "o.shlo")],
        "pt2-no-data": [str(d / "nodata.pt2"), "-o", str(d / "o.shlo")],
        "pt2-inspect": ["inspect", str(d / "json.pt2")],
        "npz-inputs": ["validate", str(shlo), "--to", "jax", "--inputs", str(d / "inputs.npz"), "--quiet"],
    }
    warm = [["inspect", str(good_pt2)], ["inspect", str(shlo)]]  # imports (torch), the loaders
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "CONVERTER_VERBOSE")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, json.dumps(cases), json.dumps(warm)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.parametrize(
    "case",
    ["shlo-manifest", "shlo-params", "pt2-json", "pt2-weight", "pt2-no-data", "pt2-inspect", "npz-inputs"],
)
def test_bombs_are_refused_within_300_mb(case, bombs):
    """A 1 MB file declaring 1 GiB (deflated zeros, or a tensor without data) is refused with
    exit status 2 before anything is decompressed or allocated: the peak RSS while ``convert``
    handles it stays under 300 MB above the RSS before it."""
    result = bombs[0][case]
    print(f"{case}: exit {result['rc']}, peak RSS +{result['peak'] / 2**20:.1f} MiB")
    assert result["rc"] == 2, result["err"]
    assert "$CONVERTER_MAX_INFLATE" in result["err"], result["err"]
    assert result["peak"] < 300 << 20, f"{case}: peak RSS {result['peak'] / 2**20:.0f} MiB above the start"


def test_api_use_prints_no_xla_client_lines(bombs):
    """The first API call creates XLA's client: its ``pjrt_client.cc`` lines are held back
    (in a process whose ``TF_CPP_MIN_LOG_LEVEL`` is not set)."""
    assert "pjrt_client.cc" not in bombs[1], bombs[1]


def test_a_float64_tensor_without_data_counts_eight_bytes_an_element(good_pt2, tmp_path, monkeypatch):
    """The bytes a ``.pt2`` tensor declared without data would take come from its serialized
    dtype (``DOUBLE``: 8 bytes an element): 100 float64 elements are 800 bytes."""

    def no_data(name: str, data: bytes) -> bytes:
        if name.endswith("_weights_config.json"):
            config = json.loads(data)
            meta = config["config"]["lin.bias"]["tensor_meta"]
            meta["sizes"], meta["dtype"] = [{"as_int": 100}], 8  # torch's serialized ScalarType.DOUBLE
            return json.dumps(config).encode()
        return b"" if name.endswith("data/weights/weight_1") else data

    path = _rewrite(good_pt2, tmp_path / "f64.pt2", no_data)
    monkeypatch.setenv("CONVERTER_MAX_INFLATE", "799")
    with pytest.raises(converter.ParseError, match=r"would expand to 800 bytes"):
        check_pt2(path)


def _declared_without_data(monkeypatch, budget: int, *entries: dict, held: dict | None = None) -> None:
    """:func:`converter.tools.pt2._check_payload_config` of a weights config with ``entries``
    (``{"fqn", "sizes", "dtype"?}``), members ``held`` ({path_name: bytes stored}) beside it,
    the inflate budget ``budget`` bytes."""
    from converter.tools import pt2

    monkeypatch.setenv("CONVERTER_MAX_INFLATE", str(budget))
    config = {}
    for i, e in enumerate(entries):
        meta = {"sizes": [{"as_int": d} for d in e["sizes"]]}
        if "dtype" in e:
            meta["dtype"] = e["dtype"]
        config[e["fqn"]] = {"path_name": f"w{i}", "tensor_meta": meta}
    infos = {}
    for name, size in (held or {}).items():
        infos[f"m/data/weights/{name}"] = zipfile.ZipInfo(f"m/data/weights/{name}")
        infos[f"m/data/weights/{name}"].file_size = size
    name = "m/data/weights/model_weights_config.json"
    assert pt2._check_payload_config(Path("x.pt2"), None, infos, name, {"config": config}, False) == []


def test_a_tensor_without_data_counts_the_element_size_of_its_dtype(monkeypatch):
    """Every serialized ScalarType torch writes: 100 elements declared without data are
    100 times the element size torch gives that dtype (bool, bytes and float8: 1)."""
    from torch._export.serde.serialize import _TORCH_TO_SERIALIZE_DTYPE

    for dtype, code in _TORCH_TO_SERIALIZE_DTYPE.items():
        nbytes = 100 * dtype.itemsize
        _declared_without_data(monkeypatch, nbytes, {"fqn": "t", "sizes": [10, 10], "dtype": int(code)})
        with pytest.raises(converter.ParseError, match=rf"\(t, .*would expand to {nbytes:,} bytes"):
            _declared_without_data(
                monkeypatch, nbytes - 1, {"fqn": "t", "sizes": [10, 10], "dtype": int(code)}
            )


def test_tensors_without_data_add_up_and_stored_ones_do_not_count(monkeypatch):
    """Two float32 tensors of 100 elements without data (no dtype: FLOAT, as torch's schema
    defaults it) claim 800 bytes together; one whose record holds its bytes claims none."""
    one, two = {"fqn": "a", "sizes": [100]}, {"fqn": "b", "sizes": [4, 25], "dtype": 7}
    _declared_without_data(monkeypatch, 800, one, two)
    with pytest.raises(converter.ParseError, match=r"\(b, m/data/weights/w1\) would expand to 800 bytes"):
        _declared_without_data(monkeypatch, 799, one, two)
    _declared_without_data(monkeypatch, 400, one, two, held={"w1": 400})
    _declared_without_data(
        monkeypatch, 0, {"fqn": "e", "sizes": [0, 5]}, {"fqn": "s", "sizes": [3]}, held={"w1": 12}
    )


def test_refusals_name_one_library_three_targets_a_member_and_80_characters(tmp_path):
    """The refusal names the first AOTInductor member and at most three unsafe graph-node
    targets of a member; a refused shape expression is quoted up to 80 characters."""
    nodes = [{"target": t, "inputs": [], "outputs": []} for t in ("torch.load", "os.system", "eval", "exec")]
    path = tmp_path / "crafted.pt2"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("m/models/model.json", json.dumps({"graph": {"nodes": nodes}}))
        zf.writestr("m/data/aotinductor/a/lib.so", b"\x7fELF")
        zf.writestr("m/data/aotinductor/b/lib.so", b"\x7fELF")
    with pytest.raises(converter.UntrustedInputError) as info:
        check_pt2(path)
    message = str(info.value)
    assert message.count("(graph node target ") == 3 and message.count("/data/aotinductor/") == 1, message
    check_pt2(path, trust_pickle=True)  # the structure itself is sound

    expr = "__import__('os')" + " + s0" * 40
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("m/models/model.json", json.dumps({"s": {"expr_str": expr}}))
    with pytest.raises(converter.UntrustedInputError) as info:
        check_pt2(path, trust_pickle=True)
    assert f"the shape expression {expr[:80]!r}, which" in str(info.value)
