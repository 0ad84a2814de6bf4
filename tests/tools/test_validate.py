"""``convert validate``: tolerances, inputs, the report, the command line and bisection."""

from __future__ import annotations

import dataclasses
import json
import math
import time
import types

import jax.numpy as jnp
import numpy as np
import pytest
import torch

from converter.signature import LEAF, LeafSpec, Signature, args_tree
from converter.tools import validate as V


class Net(torch.nn.Module):
    """``tanh(fc1(x)) → gelu → fc2``, plus the token embedding of ``ids``."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 8)
        self.fc2 = torch.nn.Linear(8, 3)
        self.emb = torch.nn.Embedding(50, 8)

    def forward(self, x, ids):
        h = torch.tanh(self.fc1(x))
        h = torch.nn.functional.gelu(h) + self.emb(ids).mean(1)
        return self.fc2(h)


def _net():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(2, 6), torch.tensor([[3, 49, 0], [7, 1, 2]]))


# --------------------------------------------------------------------------- compare


def test_compare_within_and_beyond_tolerance():
    e = np.array([1.0, 100.0, 0.0], np.float32)
    assert V.compare(e, e + np.float32(5e-6)).passed
    c = V.compare(e, e + np.array([0, 0, 1e-3], np.float32))
    assert not c.passed and c.max_abs == pytest.approx(1e-3, rel=1e-3) and c.max_rel == np.inf


def test_compare_integers_are_exact_and_nans_must_match():
    assert V.tolerance("int64") == V.Tolerance(0.0, 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):  # the shared table cannot be loosened by accident
        V.TOLERANCES["float32"].rtol = 1.0
    assert not V.compare(np.array([1, 2]), np.array([1, 3])).passed
    assert V.compare(np.array([np.nan, 1.0]), np.array([np.nan, 1.0])).passed
    c = V.compare(np.array([np.nan, 1.0]), np.array([0.0, 1.0]))
    assert not c.passed and "NaN" in c.note


INF, NAN = np.inf, np.nan


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        ([INF, 1.0], [0.0, 1.0]),  # atol + rtol * |inf| is inf: no tolerance may apply
        ([INF], [-INF]),
        ([-INF], [5.0]),
        ([5.0], [INF]),
        ([-INF], [INF]),
        ([NAN], [INF]),
        ([INF], [NAN]),
        ([1.0], [NAN]),
        ([NAN], [1.0]),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_compare_non_finite_values_match_exactly(expected, actual, dtype):
    c = V.compare(np.array(expected, dtype), np.array(actual, dtype))
    assert not c.passed and c.note


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compare_equal_infinities_and_nans_pass_and_finite_values_keep_their_tolerance(dtype):
    e = np.array([INF, -INF, NAN, 1.0], dtype)
    assert V.compare(e, e.copy()).passed
    c = V.compare(e, np.array([INF, -INF, NAN, 1.0 + 1e-3], dtype))
    assert not c.passed and not c.note and c.max_abs == pytest.approx(1e-3, rel=1e-3)
    c = V.compare(np.float64(-INF), np.float64(-INF))  # 0-d, no finite pair: no error measured
    assert c.passed and c.max_abs == 0 and c.max_rel == 0
    assert not V.compare(np.float64(-INF), np.float64(INF)).passed


@pytest.mark.parametrize(
    ("expected", "actual", "passed"),
    [
        (complex(INF, 1), complex(INF, 1), True),
        (complex(INF, 1), complex(INF, 1 + 1e-9), True),  # the finite part within tolerance
        (complex(INF, 1), complex(INF, 2), False),  # the finite part beyond it
        (complex(INF, 0), complex(-INF, 0), False),
        (complex(0, INF), complex(0, -INF), False),
        (complex(0, -INF), complex(0, INF), False),  # each order of the two infinities
        (complex(1, -INF), complex(1, 0), False),
        (complex(INF, 0), complex(0, 0), False),
        (complex(0, 1), complex(INF, 1), False),  # an infinity where the source is finite
        (complex(-INF, 1), complex(INF, 1), False),
        (complex(1, NAN), complex(NAN, 1), False),  # NaN in another component
        (complex(NAN, NAN), complex(NAN, NAN), True),
        (complex(1, 2), complex(1, 2 + 1e-3), False),
    ],
)
def test_compare_complex_components_separately(expected, actual, passed):
    c = V.compare(np.array([expected], np.complex128), np.array([actual], np.complex128))
    assert c.passed is passed


def test_compare_reports_shape_and_dtype():
    assert "shape" in V.compare(np.zeros((2, 3)), np.zeros((3, 2))).note
    assert "dtype" in V.compare(np.zeros(2, np.float32), np.zeros(2, np.float64)).note


def test_bfloat16_is_looser_than_float32():
    assert V.tolerance(torch.bfloat16).rtol > V.tolerance(torch.float32).rtol
    assert V.tolerance(jnp.float16).rtol > V.tolerance(np.float32).rtol


# --------------------------------------------------------------------------- inputs


def test_random_inputs_respect_dtype_and_example_range():
    sig = Signature(
        params=(),
        inputs=(
            LeafSpec("args[0]", (4, 5), "float32"),
            LeafSpec("args[1]", (64,), "int64"),
            LeafSpec("args[2]", (3,), "bool"),
        ),
        outputs=(),
        in_tree=args_tree(
            {"kind": "tuple", "children": [LEAF] * 3}, {"kind": "dict", "keys": [], "children": []}
        ),
        out_tree=LEAF,
    )
    example = ((np.zeros((4, 5), np.float32) - 1, np.array([0, 3]), np.array([True, False, True])), {})
    (x, ids, mask), _ = V.make_inputs(sig, example, seed=1)
    assert x.dtype == np.float32 and x.shape == (4, 5) and x.std() > 0.3
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() <= 3 and len(set(ids.tolist())) == 4
    assert mask.dtype == np.bool_
    (x2, _, _), _ = V.make_inputs(sig, example, seed=1)
    np.testing.assert_array_equal(x, x2)
    (_, ids_default, _), _ = V.make_inputs(sig, None, seed=1)
    assert ids_default.max() <= 9


def test_npz_inputs_by_name(tmp_path):
    model, args = _net()
    src = V.load_source((model, args), "torch")
    path = tmp_path / "in.npz"
    np.savez(path, **{"args[0]": np.ones((2, 6), np.float32), "args[1]": np.zeros((2, 3), np.int64)})
    (x, ids), _ = V.load_inputs(path, src.module.signature)
    assert x.sum() == 12 and ids.dtype == np.int64


# --------------------------------------------------------------------------- validate


def test_validate_torch_model_passes_on_jax():
    start = time.perf_counter()
    report = V.validate(_net(), from_="torch", targets=("jax",), progress=False)
    assert report.passed
    (target,) = report.targets
    assert 0 < target.seconds <= time.perf_counter() - start  # the target's own time
    (row,) = target.rows
    assert row.target == "jax" and row.dtype == "float32" and row.shape == [2, 3]
    assert row.max_abs < 1e-5 and row.rtol == 1e-5


def test_random_model_is_compared_by_shape_and_dtype_and_says_so():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Dropout(0.5)).train()
    report = V.validate(
        (model, (torch.randn(2, 6),)), from_="torch", targets=("jax", "torch", "onnx"), progress=False
    )
    assert report.passed
    for target in report.targets:
        (row,) = target.rows
        assert row.shape == [2, 4] and row.dtype == "float32"
        assert "random ops" in row.note


def test_sources_and_targets_that_cannot_be_run_are_refused_by_name():
    """Each refusal of ``validate``/``load_source``/``target_runner`` before any conversion,
    with its message: an ``(obj, args)`` source without ``from_``, an unknown framework or
    target, ``dims`` for a source other than ONNX, ``dynamic_shapes`` for a JAX source."""
    from converter.errors import ConversionError

    net = _net()
    refusals = [
        (
            lambda: V.validate(net, targets=("jax",), progress=False),
            r"from_ is required for an \(obj, args\)",
        ),
        (
            lambda: V.validate(net, from_="torch", targets=("tpu",)),
            r"unknown target 'tpu'; one of jax, torch, onnx",
        ),
        (lambda: V.load_source(net), r"from_ is required for an \(obj, args\) source"),
        (lambda: V.load_source(net, from_="tf"), r"unknown source framework 'tf'; one of torch, jax, onnx"),
        (
            lambda: V.load_source(net, from_="torch", dims={"N": 2}),
            r"dims \(--dim\) apply to ONNX sources only, not torch",
        ),
        (
            lambda: V.load_source((jnp.sin, (np.ones(2),), {}, {"x": 0}), from_="jax"),
            r"dynamic_shapes \(a factory's fourth result\) apply to torch sources only",
        ),
        (lambda: V.target_runner("tpu", types.SimpleNamespace(signature=None)), r"unknown target 'tpu'"),
    ]
    for call, match in refusals:
        with pytest.raises(ConversionError, match=match):
            call()


def test_unavailable_target_is_skipped_with_a_reason(monkeypatch):
    monkeypatch.setattr(
        V, "backend_available", lambda t: "converter.backends.onnx is not importable" if t == "onnx" else None
    )
    report = V.validate(_net(), from_="torch", targets=("jax", "onnx"), progress=False)
    assert [t.status for t in report.targets] == ["passed", "skipped"]
    assert "not importable" in report.targets[1].reason
    assert report.passed


def test_cli_json_report_and_exit_status(tmp_path):
    out = tmp_path / "report.json"
    model_file = tmp_path / "model.py"
    model_file.write_text(
        "import torch\n"
        "def factory():\n"
        "    torch.manual_seed(0)\n"
        "    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()\n"
        "    return model, (torch.randn(3, 4),)\n"
    )
    rc = V.main([f"{model_file}:factory", "--from", "torch", "--to", "jax", "--json", str(out), "--quiet"])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["passed"] is True and data["from"] == "torch"
    assert data["targets"][0]["rows"][0]["output"] == "outputs"
    assert V.main([f"{tmp_path}/missing.py:factory", "--from", "torch", "--quiet"]) == 2


@pytest.mark.filterwarnings("ignore:'converter.tools.validate' found in sys.modules:RuntimeWarning")
def test_module_runs_as_a_script(tmp_path, monkeypatch, capsys):
    import runpy
    import sys

    monkeypatch.setattr(sys, "argv", ["validate", str(tmp_path / "missing.mlir"), "--quiet"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("converter.tools.validate", run_name="__main__")
    assert exit_.value.code == 2
    assert "missing.mlir: no such file" in capsys.readouterr().err


# --------------------------------------------------------------------------- bisection


def test_bisect_names_a_broken_aten_rule(monkeypatch):
    """A deliberately wrong ``aten.tanh`` rule (sin instead of tanh): the report names the
    StableHLO op it emitted and the ATen op in its loc."""
    from converter.frontends.torch.registry import ATEN_RULES

    monkeypatch.setitem(ATEN_RULES._rules, "aten.tanh.default", lambda x: jnp.sin(x))
    report = V.validate(_net(), from_="torch", targets=("jax",), progress=False)
    (target,) = report.targets
    assert target.status == "failed"
    b = target.bisect
    assert b["found"], b
    assert b["op"] == "stablehlo.sine"
    assert "aten.tanh.default[test_validate.py:" in b["location"]
    assert b["source_op"] == "aten.tanh.default"


def test_bisect_names_a_broken_jax_backend_rule(monkeypatch):
    """A wrong JAX-backend rule for ``stablehlo.tanh``: the bisection names that op."""
    from converter.backends.jax.registry import JAX_RULES

    monkeypatch.setitem(JAX_RULES._rules, "stablehlo.tanh", lambda interp, op, x: x * 0.5)
    report = V.validate(_net(), from_="torch", targets=("jax",), progress=False)
    b = report.targets[0].bisect
    assert report.targets[0].status == "failed" and b["found"], b
    assert b["op"] == "stablehlo.tanh" and "aten.tanh.default" in b["location"]


def _jax_fn():
    w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)

    def f(x, ids):
        return jnp.tanh(x) @ w + ids.sum().astype(jnp.float32)

    return f, (np.ones((2, 4), np.float32), np.arange(5, dtype=np.int32))


def test_validate_jax_function_and_roundtrip():
    report = V.validate(_jax_fn(), from_="jax", targets=("jax", "torch"), roundtrip=True, progress=False)
    assert [t.target for t in report.targets] == ["jax", "torch", "torch>jax"]
    ran = [t for t in report.targets if t.status != "skipped"]
    assert ran and all(t.status == "passed" for t in ran), [(t.target, t.reason) for t in report.targets]


def test_validate_stablehlo_text(tmp_path):
    import jax

    fn, args = _jax_fn()
    path = tmp_path / "f.mlir"
    path.write_text(jax.jit(fn).lower(*args).as_text())
    report = V.validate(str(path), from_="stablehlo", targets=("jax",), progress=False)
    assert report.passed and report.targets[0].rows[0].shape == [2, 3]


def test_validate_stablehlo_reference_is_xla_not_the_jax_backend(tmp_path, monkeypatch):
    """With a wrong JAX-backend ``stablehlo.tanh`` rule, the jax target fails: the reference
    is the module compiled by XLA, not the project's interpreter (which would agree with
    itself)."""
    import jax
    from converter.backends.jax.registry import JAX_RULES

    fn, args = _jax_fn()
    path = tmp_path / "f.mlir"
    path.write_text(jax.jit(fn).lower(*args).as_text())
    monkeypatch.setitem(JAX_RULES._rules, "stablehlo.tanh", lambda interp, op, x: x * 0.5)
    report = V.validate(str(path), from_="stablehlo", targets=("jax",), progress=False)
    assert report.reference.startswith("XLA")
    assert report.targets[0].status == "failed", report.targets[0].reason


def test_validate_shlo_reference_is_xla_not_the_jax_backend(tmp_path, monkeypatch):
    """A ``.shlo`` Module file (with parameters) is validated against XLA running the saved
    module with its saved parameters: a wrong JAX-backend rule fails the jax target, and
    with the rule intact every target passes."""
    from converter.backends.jax.registry import JAX_RULES

    import converter

    path = tmp_path / "net.shlo"
    converter.from_torch(*_net()).save(path)
    report = V.validate(str(path), targets=("jax", "torch"), progress=False)
    assert report.reference.startswith("XLA")
    assert [t.status for t in report.targets] == ["passed", "passed"], [t.reason for t in report.targets]
    monkeypatch.setitem(JAX_RULES._rules, "stablehlo.tanh", lambda interp, op, x: x * 0.5)
    report = V.validate(str(path), targets=("jax",), progress=False)
    assert report.targets[0].status == "failed", report.targets[0].reason


@pytest.mark.parametrize("fmt", ["text", "portable artifact"])
def test_xla_runner_matches_jax_jit_and_specializes_dynamic_shapes(tmp_path, fmt):
    import jax

    import converter

    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(4, 3)
    text = jax.jit(lambda x: (jnp.sin(x) * 2, x.sum(0))).lower(x).as_text()
    module = converter.from_stablehlo(text)
    data = text if fmt == "text" else module.bytecode()
    got = V.xla_runner(module, data)((x,), {})
    np.testing.assert_array_equal(got[0], np.asarray(jnp.sin(x) * 2))
    np.testing.assert_array_equal(got[1], np.asarray(x.sum(0)))
    dyn = converter.from_stablehlo(
        "func.func public @main(%x: tensor<?x3xf32>) -> tensor<?x3xf32> {\n"
        "  %0 = stablehlo.sine %x : tensor<?x3xf32>\n"
        "  return %0 : tensor<?x3xf32>\n}\n"
    )
    # a dynamic module is compiled specialized to each call's shapes, its source text or not
    for run in (V.xla_runner(dyn), V.xla_runner(dyn, dyn.text())):
        for n in (1, 5):
            y = np.linspace(0, 1, 3 * n, dtype=np.float32).reshape(n, 3)
            np.testing.assert_array_equal(run((y,), {})[0], np.asarray(jax.jit(jnp.sin)(y)))


def test_bisect_between_backends_names_the_op(monkeypatch):
    """A JAX source checked on the torch target: with a wrong torch-backend ``stablehlo.tanh``
    rule, the op-by-op comparison against the JAX backend names that op."""
    from converter.backends.torch.registry import TORCH_RULES

    monkeypatch.setitem(TORCH_RULES._rules, "stablehlo.tanh", lambda interp, op, x: x)
    report = V.validate(_jax_fn(), from_="jax", targets=("torch",), progress=False)
    (target,) = report.targets
    assert target.status == "failed", target.reason
    assert target.bisect["found"] and target.bisect["op"] == "stablehlo.tanh", target.bisect


def _break_onnx_tanh(monkeypatch):
    """An ONNX-backend ``stablehlo.tanh`` rule that emits Sin instead of Tanh."""
    from converter.backends.onnx.registry import ONNX_RULES

    monkeypatch.setitem(
        ONNX_RULES._rules, "stablehlo.tanh", lambda interp, op, x: interp.graph.op("Sin", [x])
    )


def test_bisect_names_a_broken_onnx_backend_rule_for_a_torch_source(monkeypatch):
    _break_onnx_tanh(monkeypatch)
    report = V.validate(_net(), from_="torch", targets=("onnx",), progress=False)
    (target,) = report.targets
    assert target.status == "failed"
    b = target.bisect
    assert b["found"] and b["op"] == "stablehlo.tanh", b
    assert b["source_op"] == "aten.tanh.default"


def test_bisect_names_a_broken_onnx_backend_rule_between_backends(monkeypatch):
    _break_onnx_tanh(monkeypatch)
    report = V.validate(_jax_fn(), from_="jax", targets=("onnx",), progress=False)
    (target,) = report.targets
    assert target.status == "failed", target.reason
    assert target.bisect["found"] and target.bisect["op"] == "stablehlo.tanh", target.bisect
    assert target.bisect["reference"] == "jax backend"


def test_bisect_points_at_onnx_fused_patterns(monkeypatch):
    """A wrong fused pattern (Relu emitted as Sigmoid) fails validation of the default
    optimized ONNX graph; the op-by-op bisection cannot see it and says where to look."""
    import dataclasses

    from converter.backends.onnx import patterns

    def broken_relu(m, operation, dtype, opset):
        found = patterns._relu(m, operation, dtype, opset)
        return found and dataclasses.replace(found, op_type="Sigmoid")

    monkeypatch.setattr(patterns, "_MATCHERS", (broken_relu,))
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    report = V.validate(
        (lambda x: jnp.maximum(x, 0.0) * 3, (x,)), from_="jax", targets=("onnx",), progress=False
    )
    (target,) = report.targets
    assert target.status == "failed", target.reason
    assert not target.bisect["found"] and "fused patterns" in target.bisect["message"], target.bisect


def test_validate_onnx_file_against_onnxruntime(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    w = np.random.default_rng(0).standard_normal(12).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("w", TensorProto.FLOAT, [4, 3], w)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9  # what onnxruntime 1.31 reads
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    report = V.validate(str(path), from_="onnx", targets=("jax",), progress=False)
    assert report.reference == "onnxruntime" and report.passed
    assert report.targets[0].rows[0].output == "z"


# --------------------------------------------------------------------------- edge cases


def test_random_leaf_ignores_an_empty_example_and_keeps_unsigned_draws_non_negative():
    rng = np.random.default_rng(0)
    ids = V.random_leaf((200,), "int32", rng, example=np.zeros((0,), np.int32))  # no range to take
    assert ids.dtype == np.int32 and set(ids.tolist()) == set(range(10))
    z = V.random_leaf((50,), "complex64", rng)
    assert z.dtype == np.complex64 and np.abs(z.imag).min() > 0 and z.real.std() > 0.5
    u = V.random_leaf((200,), "uint8", rng, example=np.array([-5, 3]))  # a signed example's range
    assert u.dtype == np.uint8 and set(u.tolist()) == {0, 1, 2, 3}
    neg = V.random_leaf((5,), "uint16", rng, example=np.array([-5, -2]))  # no value of it left: zeros
    assert neg.dtype == np.uint16 and neg.tolist() == [0] * 5
    var = V.random_leaf((100,), "float32", rng, example=np.array([0.0, 2.0]))  # a variance: >= 0
    signed = V.random_leaf((100,), "float32", rng, example=np.array([-1.0, 2.0]))
    assert var.min() >= 0 and var.std() > 0.3 and signed.min() < 0 < signed.max()


def _one_input_signature(shape=(2,), dtype="float32") -> Signature:
    return Signature(
        params=(),
        inputs=(LeafSpec("args[0]", shape, dtype),),
        outputs=(LeafSpec("out", shape, dtype),),
        in_tree=args_tree(
            {"kind": "tuple", "children": [LEAF]}, {"kind": "dict", "keys": [], "children": []}
        ),
        out_tree=LEAF,
    )


def test_load_inputs_refusals_name_the_file_and_the_cause(tmp_path, monkeypatch):
    sig = _one_input_signature()
    npy = tmp_path / "x.npy"
    np.save(npy, np.ones(2, np.float32))
    with pytest.raises(V.InputError, match=r"x\.npy: a single array, not an \.npz archive"):
        V.load_inputs(npy, sig)
    with pytest.raises(V.InputError, match=r"--inputs .*: unreadable \(IsADirectoryError"):
        V.load_inputs(tmp_path, sig)
    two = tmp_path / "two.npz"
    np.savez(two, a=np.ones(2, np.float32), b=np.ones(2, np.float32))
    with pytest.raises(V.InputError, match=r"arrays \['a', 'b'\], the model takes 1 inputs \['args\[0\]'\]"):
        V.load_inputs(two, sig)
    when = tmp_path / "when.npz"
    np.savez(when, np.array(["2020-01-01", "2021-01-01"], "datetime64[s]"))
    with pytest.raises(
        V.InputError, match=r"args\[0\] is datetime64\[s\]\[2\], the model takes float32\[2\]"
    ):
        V.load_inputs(when, sig)

    def no_memory(*a, **k):
        raise MemoryError

    monkeypatch.setattr(V.np, "load", no_memory)  # an injected allocation failure is not an input error
    with pytest.raises(MemoryError):
        V.load_inputs(two, sig)


def test_load_source_refusals():
    fn, args = _jax_fn()
    with pytest.raises(V.ConversionError, match="from_ is required for an"):
        V.load_source((fn, args))
    with pytest.raises(V.ConversionError, match="unknown source framework 'tf'; one of torch, jax"):
        V.load_source((fn, args), "tf")
    with pytest.raises(V.ConversionError, match=r"dims \(--dim\) apply to ONNX sources only, not jax"):
        V.load_source((fn, args), "jax", {"B": 2})
    with pytest.raises(V.ConversionError, match=r"dynamic_shapes .* apply to torch sources only"):
        V.load_source((fn, args, {}, {"x": None}), "jax")
    with pytest.raises(V.ConversionError, match="nowhere.mlir: no such file"):
        V.load_source("nowhere.mlir")
    with pytest.raises(V.ConversionError, match="from_ is required for an"):
        V.validate((fn, args), progress=False)
    with pytest.raises(V.ConversionError, match="unknown target 'tf'; one of jax, torch, onnx"):
        V.validate((fn, args), from_="jax", targets=("jax", "tf"), progress=False)
    with pytest.raises(V.ConversionError, match="unknown target 'tf'"):
        V.target_runner("tf", types.SimpleNamespace(signature=_one_input_signature()))
    with pytest.raises(V.ConversionError, match="unknown round-trip step 'tf'"):
        V.reimport("tf", None, ((), {}))


def test_jax_factory_source(tmp_path):
    path = tmp_path / "jf.py"
    path.write_text(
        "import jax.numpy as jnp, numpy as np\n"
        "def factory():\n"
        "    return (lambda x: jnp.tanh(x) * 2), (np.linspace(-1, 1, 4, dtype=np.float32),)\n"
    )
    src = V.load_source(f"{path}:factory", "jax")
    x = np.linspace(0, 1, 4, dtype=np.float32)
    assert src.framework == "jax" and src.reference == "the JAX function"
    np.testing.assert_array_equal(src.run((x,), {})[0], np.asarray(jnp.tanh(x) * 2))


def test_torch_export_failure_is_an_export_error():
    class Branchy(torch.nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(V.ExportError, match="torch.export could not export Branchy: GuardOnDataDependent"):
        V.torch_source(Branchy(), (torch.ones(2),))


def test_torch_source_passes_the_converters_own_errors_through(monkeypatch):
    import converter.frontends.torch as frontend

    def refuse(*a, **k):
        raise V.ConversionError("the frontend's own refusal")

    monkeypatch.setattr(frontend, "export", refuse)
    with pytest.raises(V.ConversionError, match="^the frontend's own refusal$"):
        V.torch_source(torch.nn.ReLU(), (torch.ones(2),))


def test_onnxruntime_refusing_the_reference_is_a_conversion_error(tmp_path, monkeypatch):
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["z"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)

    def refuse(*a, **k):
        raise RuntimeError("[ONNXRuntimeError] : 10 : INVALID_GRAPH")

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    with pytest.raises(V.ConversionError, match=r"m\.onnx: onnxruntime cannot load it: \[ONNXRuntimeError\]"):
        V.onnx_source(path)


def test_validate_stablehlo_bytecode(tmp_path):
    import converter

    text = (
        "func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n"
        "  %0 = stablehlo.sine %x : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n"
    )
    path = tmp_path / "f.mlirbc"
    path.write_bytes(converter.from_stablehlo(text).bytecode())
    x = np.linspace(-1, 1, 3, dtype=np.float32)
    src = V.load_source(str(path))
    assert src.framework == "stablehlo"
    np.testing.assert_array_equal(src.run((x,), {})[0], np.asarray(jnp.sin(x)))


def test_xla_runner_refusal_and_kept_arguments():
    import jax

    import converter

    bad = converter.from_stablehlo(
        "func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n"
        "  %0 = stablehlo.custom_call @no_such_target(%x) : (tensor<3xf32>) -> tensor<3xf32>\n"
        "  return %0 : tensor<3xf32>\n}\n"
    )
    with pytest.raises(V.ConversionError, match="XLA cannot compile the StableHLO module: NOT_FOUND"):
        V.xla_runner(bad)((np.ones(3, np.float32),), {})
    assert V._first_line(ValueError()) == "ValueError" and V._first_line(ValueError(" a\nb")) == "a"
    x, unused = np.arange(2, dtype=np.float32), np.ones(3, np.float32)
    kept = converter.from_jax(jax.export.export(jax.jit(lambda x, y: x * 2))(x, unused))
    assert kept.signature.kept_var_idx == (0,)  # the unused argument is not an argument of @main
    np.testing.assert_array_equal(V.xla_runner(kept)((x, unused), {})[0], x * 2)


def test_reimport_through_jax_reproduces_the_module():
    import converter

    fn, args = _jax_fn()
    module = converter.from_jax(fn, *args)
    again = V.reimport("jax", module, (args, {}))
    assert again.source == "jax"
    np.testing.assert_allclose(np.asarray(again.to_jax()(*args)), np.asarray(fn(*args)), rtol=1e-6)


def test_backend_available_names_the_missing_module(monkeypatch):
    real = V.importlib.import_module

    def without(missing):
        def imp(name, *rest, **kw):
            if name == missing:
                raise ImportError(f"No module named {name!r}")
            return real(name, *rest, **kw)

        return imp

    monkeypatch.setattr(V.importlib, "import_module", without("onnxruntime"))
    assert V.backend_available("jax") is None
    assert V.backend_available("onnx") == (
        "onnxruntime is not importable (ImportError: No module named 'onnxruntime'); "
        "pip install 'converter[onnx]'"
    )
    assert V.backend_available("onnx>torch").startswith("onnxruntime is not importable")
    monkeypatch.setattr(V.importlib, "import_module", without("converter.frontends.torch"))
    assert V.backend_available("jax>torch") is None  # through JAX: no torch frontend needed
    assert V.backend_available("torch>jax") == (
        "converter.frontends.torch is not importable "
        "(ImportError: No module named 'converter.frontends.torch')"
    )


def test_compare_outputs_count_and_layout_mismatches():
    sig = _one_input_signature()
    (row,) = V.compare_outputs("jax", sig, [np.ones(2), np.ones(2)], [np.ones(2)])
    assert not row.passed and row.output == "outputs" and row.note == "1 outputs, the source gives 2"
    c = V._compare_layout(np.ones(2, np.float32), np.ones(3, np.float64))
    assert not c.passed and c.note == "float64[3] != float32[2]"
    c = V._compare_layout(np.ones(2, np.float32), np.ones((2, 1), np.float32))  # the shape alone
    assert not c.passed and c.note == "float32[2, 1] != float32[2]"
    assert V._compare_layout(np.ones(2, np.float32), np.zeros(2, np.float32)).passed


def test_report_json_spells_non_finite_errors_as_strings():
    row = V.Row("jax", "out", "float32", [2], math.inf, math.nan, 1e-5, 1e-5, False)
    report = V.Report("m", "jax", "ref", 0, [], [V.TargetResult("jax", "failed", rows=[row])])
    got = report.to_json()["targets"][0]["rows"][0]
    assert got["max_abs"] == "inf" and got["max_rel"] == "nan" and got["rtol"] == 1e-5
    json.dumps(report.to_json(), allow_nan=False)


def test_target_failures_skips_and_failed_bisection_are_reported(monkeypatch):
    from rich.console import Console

    def runner(target, module):
        if target == "jax":
            raise ImportError("no jaxlib here")
        if target == "torch":
            raise RuntimeError("boom")
        return lambda a, k: [np.zeros((2, 3), np.float32)]  # onnx: wrong values

    def broken_bisect(*a, **k):
        raise ValueError("no ops")

    monkeypatch.setattr(V, "target_runner", runner)
    monkeypatch.setattr(V, "bisect", broken_bisect)
    report = V.validate(_jax_fn(), from_="jax", targets=("jax", "torch", "onnx"), progress=False)
    jx, th, ox = report.targets
    assert (jx.status, jx.reason) == ("skipped", "ImportError: no jaxlib here")
    assert (th.status, th.reason) == ("failed", "RuntimeError: boom")
    assert ox.status == "failed" and ox.bisect == {"error": "bisection failed: ValueError: no ops"}
    console = Console(record=True, width=200)
    V.print_report(report, console)
    text = console.export_text()
    rows = [[c.strip() for c in ln.split("│")[1:-1]] for ln in text.splitlines() if ln.startswith("│")]
    assert rows[0] == ["jax", "", "", "", "", "", "", "skipped"]
    assert rows[1] == ["torch", "", "", "", "", "", "", "failed"]
    assert rows[2][:7] == ["onnx", "outputs", "float32", "(2, 3)", "12.6", "1", "1e-05 / 1e-05"]
    assert rows[2][7].startswith("FAIL")
    assert "jax skipped: ImportError: no jaxlib here" in text
    assert "torch failed: RuntimeError: boom" in text
    assert "onnx: bisection failed: ValueError: no ops" in text
    assert "mismatch or failure (seed 0)" in text


def test_format_bisect():
    assert V.format_bisect({"error": "bisection failed: X"}) == "bisection failed: X"
    assert V.format_bisect({"found": False}) == "no diverging op found"
    assert V.format_bisect({"found": False, "message": "look at fused patterns"}) == "look at fused patterns"
    found = {"found": True, "index": 3, "op": "stablehlo.tanh", "location": "loc", "max_abs": 0.5}
    found |= {"max_rel": 0.25, "rtol": 1e-5, "atol": 1e-6}
    assert V.format_bisect(found) == (
        "first divergence at StableHLO op #3 stablehlo.tanh (loc: loc), source op ?: max abs err 0.5, "
        "max rel err 0.25 (rtol 1e-05, atol 1e-06)"
    )
    assert "source op aten.tanh.default:" in V.format_bisect(found | {"source_op": "aten.tanh.default"})


def test_progress_bar_counts_the_steps_done():
    with V._Progress(True, 3) as bar:
        bar.step("converting")
        bar.step("running")
        (task,) = bar.bar.tasks
        assert (task.total, task.completed, task.description) == (3, 1, "running")
    assert not bar.bar.live.is_started
    with V._Progress(False, 3) as off:
        off.step("x")
        assert off.bar is None and off.done == 0


# --------------------------------------------------------------------------- bisection: edge cases


def test_bisect_helpers_leaves_matching_and_unknown_targets():
    import converter.tools.bisect as B

    a, b = torch.zeros(2, 3), torch.ones(4)
    assert B._tensor_leaves((a, [b, 3], "x")) == [a, b] and B._tensor_leaves(3) == []
    rec = object()
    outs = [(rec, np.zeros((4,))), (rec, np.zeros((2, 3))), (rec, np.ones((2, 3)))]
    assert B._match([a], outs) == [(a, outs[2])]  # one leaf: the last output of its shape
    assert B._match([a, a], outs) == [(a, outs[1]), (a, outs[2])]  # several: in order
    # more leaves than outputs of their shape: the extra ones pair with the last output
    assert B._match([a, a, a], outs) == [(a, outs[1]), (a, outs[2]), (a, outs[2])]
    assert B._match([a, torch.zeros(5)], outs) is None  # a leaf no output has the shape of
    assert B._match([], outs) is None
    with pytest.raises(NotImplementedError, match="op-by-op evaluation is not available for the tf target"):
        B.run_backend(
            "tf", types.SimpleNamespace(signature=_one_input_signature(), params={}), (np.ones(2),), {}
        )


def test_bisect_backends_skips_ops_the_reference_lacks_and_values_without_shape(monkeypatch):
    import converter.tools.bisect as B

    def rec(i, name, *values):
        return B.Recorded(i, types.SimpleNamespace(name=name, location=f"loc{i}"), list(values))

    got = [rec(0, "token", object()), rec(1, "only_here", np.ones(2)), rec(2, "same", np.ones(2))]
    got.append(rec(3, "differs", object(), np.array([2.0])))  # a value without shape, then one that differs
    want = [
        rec(0, "token", object()),
        rec(2, "same", np.ones(2)),
        rec(3, "differs", object(), np.array([1.0])),
    ]
    monkeypatch.setattr(B, "run_backend", lambda t, m, a, k: got if t == "torch" else want)
    found = B.bisect_backends(None, "torch", "jax", (), {}, V.close_scaled)
    assert found["found"] and (found["index"], found["op"], found["reference"]) == (
        3,
        "differs",
        "jax backend",
    )
    got.pop()
    assert B.bisect_backends(None, "torch", "jax", (), {}, V.close_scaled) == {
        "found": False,
        "message": "the torch and jax backends agree on every op",
    }


def test_main_args_keep_only_the_kept_arguments():
    import jax

    import converter
    import converter.tools.bisect as B

    x, unused = np.arange(2, dtype=np.float32), np.ones(3, np.float32)
    kept = converter.from_jax(jax.export.export(jax.jit(lambda x, y: x * 2))(x, unused))
    (only,) = B.main_args(kept, (x, unused), {})
    assert only is x


def test_bisect_of_a_matching_torch_source_finds_nothing():
    import converter.tools.bisect as B

    torch.manual_seed(0)
    src = V.load_source((torch.nn.LayerNorm(4).eval(), (torch.randn(2, 4),)), "torch")
    inputs = V.make_inputs(src.module.signature, V._numpy_example(src.example))
    out = B.bisect(src, "jax", inputs, V.close_scaled)
    assert not out["found"]  # native_layer_norm's (out, mean, rstd): no group output has mean's shape
    assert out["message"].startswith("no ATen node's value diverges (0 values checked, ")


class _Noisy(torch.nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)


@pytest.fixture(scope="module")
def noisy():
    """A module drawing random numbers: its ONNX graph takes a PRNG key input."""
    import converter

    return converter.from_torch(_Noisy(), (torch.ones(3),))


def test_run_onnx_records_complex_values_and_feeds_the_rng_key(noisy):
    import converter
    import converter.tools.bisect as B

    x = np.linspace(0, 1, 3, dtype=np.float32)
    module = converter.from_jax(lambda x: jnp.abs(jnp.exp(1j * x) * 2), x)
    recs = {r.op.name: r.values[0] for r in B.run_onnx(module, (x,), {})}
    assert recs["stablehlo.complex"].dtype == np.complex64  # back from its real pair
    np.testing.assert_allclose(recs["stablehlo.complex"], np.exp(1j * x), rtol=1e-6)
    last = B.run_onnx(noisy, (np.zeros(3, np.float32),), {})[-1].values[0]  # the key fed
    assert last.shape == (3,) and ((last >= 0) & (last < 1)).all()


def test_onnx_target_of_a_random_module_feeds_its_key(noisy):
    (out,) = V.target_runner("onnx", noisy)((np.full(3, 5, np.float32),), {})
    assert out.shape == (3,) and ((out >= 5) & (out < 6)).all() and len(set(out.tolist())) == 3


# --------------------------------------------------------------------------- hardening: compare


def test_compare_bound_is_inclusive_and_a_given_tolerance_is_used():
    """``|a - e| <= atol + rtol * |e|`` with the tolerance passed (not the dtype's), at the
    bound exactly (binary fractions: no rounding), for a real value and for the finite part
    of a complex value beside an infinite one; equal integers pass with the exact tolerance."""
    tol = V.Tolerance(0.5, 0.25)  # bound at |e| = 2: 0.25 + 0.5 * 2 = 1.25
    e = np.array([2.0])
    assert V.compare(e, np.array([3.25]), tol).passed
    assert not V.compare(e, np.array([3.5]), tol).passed
    assert not V.compare(e, np.array([3.25])).passed  # float64's own tolerance is far tighter
    z = np.array([complex(INF, 2.0)])
    assert V.compare(z, np.array([complex(INF, 3.25)]), tol).passed
    assert not V.compare(z, np.array([complex(INF, 3.5)]), tol).passed
    assert V.compare(np.array([1, -2], np.int32), np.array([1, -2], np.int32)).passed


def test_compare_measures_errors_relative_to_the_expected_magnitude():
    c = V.compare(np.array([0.0, 0.5, 4.0]), np.array([0.0, 0.75, 4.0]))
    assert (c.max_abs, c.max_rel) == (0.25, 0.5)  # 0.25 / |0.5|; an exact 0 against 0 counts 0
    c = V.compare(np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    assert c.passed and (c.max_abs, c.max_rel) == (0.0, 0.0)


def test_compare_fails_on_shape_or_dtype_even_with_equal_values():
    c = V.compare(np.zeros((2, 3)), np.zeros((3, 2)))
    assert not c.passed and c.max_abs == math.inf and c.note == "shape (3, 2) != (2, 3)"
    c = V.compare(np.ones(2, np.float32), np.ones(2, np.float64))
    assert not c.passed and c.note == "dtype float64 != float32"
    assert V.compare(np.ones(2, np.float32), np.ones(2, np.float64), check_dtype=False).passed
    empty = V.compare(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32))
    assert empty.passed is True and (empty.max_abs, empty.max_rel) == (0.0, 0.0)
    c = V.compare(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int32))
    assert not c.passed and c.note == "dtype int32 != float32"


def test_compare_complex_against_real_keeps_the_imaginary_part():
    """A complex value compared with a real one (dtypes not checked, as bisection does):
    both go to complex128, so a nonzero imaginary part is a difference, on either side."""
    assert not V.compare(np.array([1 + 1j]), np.array([1.0]), check_dtype=False).passed
    assert not V.compare(np.array([1.0]), np.array([1 + 1j]), check_dtype=False).passed
    assert V.compare(np.array([1 + 0j]), np.array([1.0]), check_dtype=False).passed


def test_compare_notes_count_the_positions_and_name_the_first_infinity():
    c = V.compare(np.array([1.0, INF, 2.0, INF]), np.array([1.0, -INF, 2.0, 5.0]))
    assert not c.passed and c.note == "infinities differ at 2 position(s), first [1]: -inf != inf"
    assert c.max_abs == math.inf and c.max_rel == math.inf
    c = V.compare(np.array([NAN, 1.0, NAN]), np.array([0.0, 1.0, 2.0]))
    assert not c.passed and c.note == "NaN at 2 position(s) where the other has none"


def test_close_scaled_scales_atol_by_the_largest_finite_reference_value():
    """float64: rtol = atol = 1e-7, atol times max(1, largest finite |ref|)."""
    ok, c = V.close_scaled(np.array([1000.0, 0.0]), np.array([1000.0, 5e-5]))  # bound 1e-4
    assert ok and c.passed and c.atol == pytest.approx(1e-4)
    assert not V.close_scaled(np.array([1000.0, 0.0]), np.array([1000.0, 2e-4]))[0]
    # below 1 the scale stays 1: atol 1e-7
    assert V.close_scaled(np.array([0.5, 0.0]), np.array([0.5, 0.75e-7]))[0]
    assert not V.close_scaled(np.array([0.5, 0.0]), np.array([0.5, 1.5e-7]))[0]
    # an infinity does not scale the tolerance: only finite values do
    assert not V.close_scaled(np.array([INF, 1.0]), np.array([INF, 1.5]))[0]
    # dtypes are not checked
    assert V.close_scaled(np.ones(2, np.float32), np.ones(2, np.float64))[0]


# --------------------------------------------------------------------------- hardening: inputs


def test_random_leaf_bools_symbolic_dims_and_a_positive_integer_example():
    rng = np.random.default_rng(0)
    mask = V.random_leaf((64,), "bool", rng)
    assert mask.dtype == np.bool_ and 10 < mask.sum() < 54  # fair coin flips
    assert V.random_leaf(("n", 3), "float32", rng).shape == (1, 3)  # unsized: 1
    ids = V.random_leaf((300,), "int32", rng, example=np.array([3, 5]))  # from 0, not the example's min
    assert set(ids.tolist()) == set(range(6))


def test_load_inputs_by_name_in_any_order_and_any_size_of_a_dynamic_dimension(tmp_path):
    sig = Signature(
        params=(),
        inputs=(LeafSpec("args[0]", (2,), "float32"), LeafSpec("args[1]", ("n",), "int64")),
        outputs=(),
        in_tree=args_tree(
            {"kind": "tuple", "children": [LEAF] * 2}, {"kind": "dict", "keys": [], "children": []}
        ),
        out_tree=LEAF,
    )
    path = tmp_path / "in.npz"
    np.savez(path, **{"args[1]": np.arange(5), "args[0]": np.ones(2, np.float32)})  # not signature order
    (x, ids), _ = V.load_inputs(path, sig)
    assert x.dtype == np.float32 and ids.tolist() == [0, 1, 2, 3, 4]
    positional = tmp_path / "pos.npz"
    np.savez(positional, np.ones(2, np.float32), np.arange(7))  # arr_0, arr_1: signature order
    (x, ids), _ = V.load_inputs(positional, sig)
    assert x.dtype == np.float32 and len(ids) == 7
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, np.ones(3, np.float32), np.arange(2))
    with pytest.raises(V.InputError, match=r"input args\[0\] is float32\[3\], the model takes float32\[2\]"):
        V.load_inputs(wrong, sig)


# --------------------------------------------------------------------------- hardening: sources


@pytest.mark.parametrize(
    ("source", "framework"),
    [
        ("dir/model.py:make", "torch"),
        ("m.pt2", "torch"),
        ("m.jaxexport", "jax"),
        ("m.jax", "jax"),
        ("m.onnx", "onnx"),
        ("m.mlirbc", "stablehlo"),
        ("m.shlo", "module"),
    ],
)
def test_infer_source_from_the_suffix(source, framework):
    assert V.infer_source(source) == framework


def test_infer_source_refuses_a_silent_suffix():
    with pytest.raises(
        V.ConversionError, match=r"'m\.txt' from its suffix; pass --from \(torch, jax, onnx, stablehlo"
    ):
        V.infer_source("m.txt")


def test_load_source_of_a_jax_function_with_example_kwargs():
    x = np.linspace(-1, 1, 3, dtype=np.float32)
    src = V.load_source((lambda x, scale: x * scale, (x,), {"scale": np.float32(3)}), "jax")
    assert src.framework == "jax" and src.example == ((x,), {"scale": np.float32(3)})
    np.testing.assert_array_equal(src.run((x,), {"scale": np.float32(2)})[0], x * 2)


def test_roundtrips_come_back_to_the_source_framework():
    assert V.roundtrips("torch", V.TARGETS) == ["jax>torch", "onnx>torch"]
    assert V.roundtrips("onnx", V.TARGETS) == ["jax>onnx", "torch>onnx"]
    assert V.roundtrips("jax", ("torch",)) == ["torch>jax"]
    assert V.roundtrips("stablehlo", V.TARGETS) == ["torch>jax", "onnx>jax"]  # StableHLO comes back to JAX


# --------------------------------------------------------------------------- hardening: report


def test_report_passes_only_when_a_target_ran_and_none_failed():
    def report(*statuses):
        return V.Report(
            "m", "jax", "ref", 0, [], [V.TargetResult(f"t{i}", s) for i, s in enumerate(statuses)]
        )

    assert not report("skipped", "skipped").passed  # nothing ran: nothing was shown
    assert report("skipped", "skipped").to_json()["passed"] is False
    assert not report().passed
    assert not report("failed", "skipped").passed
    assert not report("passed", "failed").passed
    assert report("passed", "skipped").passed and report("passed").to_json()["passed"] is True


def test_subnormal_policy_texts_without_subnormal_inputs():
    assert V.subnormal_policy("stablehlo", 0) == (
        "flushed to zero, as XLA's CPU client does (the source runs on XLA)"
    )
    assert V.subnormal_policy("torch", 0) == "kept, as the torch source does (a JAX target flushes them: XLA)"
    assert V.subnormal_policy("onnx", 2).endswith("XLA); the inputs hold 2 subnormal value(s)")


def _fake_source(framework):
    sig = _one_input_signature()
    return V.Source(framework, types.SimpleNamespace(signature=sig), lambda a, k: None, "ref")


def test_run_target_flushes_notes_subnormals_and_bisects_only_a_failed_direct_target(monkeypatch):
    """``_run_target`` with stand-in runners: a flushing source's target outputs are flushed
    before comparing; a mismatch between a flushing and a keeping side says which flushes;
    only a failed direct target (not a round trip) is bisected."""
    tiny = np.finfo(np.float32).smallest_subnormal
    actual = {}
    monkeypatch.setattr(V, "target_runner", lambda target, module: lambda a, k: [actual[target]])
    monkeypatch.setattr(V, "reimport", lambda via, module, inputs: module)
    monkeypatch.setattr(V, "backend_available", lambda target: None)
    bisected = []
    monkeypatch.setattr(
        V, "bisect", lambda src, final, inputs, close: bisected.append(final) or {"found": False}
    )
    inputs = ((np.zeros(2, np.float32),), {})
    expected = [np.array([0.0, 2.0], np.float32)]

    actual["torch"] = np.array([tiny, 2.0], np.float32)  # a flushing (JAX) source: flushed, passes
    r = V._run_target(_fake_source("jax"), "torch", inputs, expected)
    assert r.status == "passed" and r.bisect is None and r.rows[0].note == "" and bisected == []
    assert r.rows[0].max_abs == 0.0 and r.seconds > 0
    r = V._run_target(_fake_source("torch"), "torch", inputs, expected)  # a keeping source: kept
    assert r.status == "passed" and r.rows[0].max_abs == tiny
    actual["torch"] = np.array([1.0, 2.0], np.float32)
    r = V._run_target(_fake_source("torch"), "torch", inputs, expected)  # both keep: nothing to say
    assert r.status == "failed" and r.rows[0].note == "" and bisected == ["torch"]
    assert r.bisect == {"found": False}
    actual["jax"] = np.array([1.0, 2.0], np.float32)
    r = V._run_target(_fake_source("torch"), "jax", inputs, expected)
    assert r.rows[0].note == "subnormals: the source keeps them, this target flushes them to zero (XLA)"
    r = V._run_target(_fake_source("jax"), "jax", inputs, expected)  # both flush: nothing to say
    assert r.status == "failed" and r.rows[0].note == ""
    actual["torch"] = np.array([1.0, 2.0], np.float64)
    r = V._run_target(_fake_source("jax"), "torch", inputs, expected)
    assert r.rows[0].note == (
        "dtype float64 != float32; subnormals: the source flushes them to zero (XLA), this target keeps them"
    )
    bisected.clear()
    r = V._run_target(_fake_source("torch"), "torch>jax", inputs, expected)  # a round trip: no bisection
    assert r.status == "failed" and r.bisect is None and bisected == []


def test_print_report_shows_unmeasured_errors_the_policy_and_the_verdict():
    from rich.console import Console

    row = V.Row(
        "jax", "out", "float32", [2], math.nan, math.nan, 1e-5, 1e-5, True, "(random ops: shape, dtype only)"
    )
    report = V.Report("m.py", "torch", "eager torch", 3, [], [V.TargetResult("jax", "passed", rows=[row])])
    console = Console(record=True, width=200)
    V.print_report(report, console)
    text = console.export_text()
    (cells,) = [
        [c.strip() for c in ln.split("│")[1:-1]] for ln in text.splitlines() if ln.startswith("│ jax")
    ]
    assert cells[4:7] == ["-", "-", "1e-05 / 1e-05"]
    assert "subnormals:" not in text and "all passed (seed 3)" in text
    report.subnormals = "kept, as the torch source does"
    console = Console(record=True, width=200)
    V.print_report(report, console)
    assert "subnormals: kept, as the torch source does" in console.export_text()


# --------------------------------------------------------------------------- hardening: command line


def test_cli_defaults_progress_and_exit_status(monkeypatch, tmp_path, capsys):
    calls = []
    status = {"value": "passed"}

    def fake_validate(source, **kw):
        calls.append(kw)
        return V.Report(source, "torch", "ref", kw["seed"], [], [V.TargetResult("jax", status["value"])])

    monkeypatch.setattr(V, "validate", fake_validate)
    monkeypatch.setattr(V.sys.stderr, "isatty", lambda: True, raising=False)
    assert V.main(["m.pt2", "--quiet"]) == 0
    kw = calls[-1]
    assert kw["targets"] == ["jax", "torch", "onnx"] and kw["seed"] == 0 and kw["from_"] is None
    assert kw["trust_pickle"] is False and kw["roundtrip"] is False and not kw["dims"]
    assert kw["progress"] is False  # --quiet: no bar, even on a terminal
    assert capsys.readouterr().out == ""  # --quiet: no table
    V.main(["m.pt2", "--to", " jax,,torch ", "--seed", "4"])
    assert (
        calls[-1]["targets"] == ["jax", "torch"] and calls[-1]["seed"] == 4 and calls[-1]["progress"] is True
    )
    assert "all passed (seed 4)" in capsys.readouterr().out
    monkeypatch.setattr(V.sys.stderr, "isatty", lambda: False, raising=False)
    status["value"] = "failed"
    out = tmp_path / "r.json"
    assert V.main(["m.pt2", "--json", str(out)]) == 1
    assert calls[-1]["progress"] is False  # not a terminal: no bar
    assert json.loads(out.read_text())["passed"] is False


def test_validate_progress_total_matches_its_steps_and_names_a_tuple_source(monkeypatch):
    bars = []

    class Recording(V._Progress):
        def __init__(self, enabled, total):
            super().__init__(enabled, total)
            self.steps = []
            bars.append(self)

        def step(self, description):
            self.steps.append(description)

    monkeypatch.setattr(V, "_Progress", Recording)
    monkeypatch.setattr(V, "backend_available", lambda target: None)
    monkeypatch.setattr(
        V, "target_runner", lambda target, module: lambda a, k: [np.zeros((2, 3), np.float32)]
    )
    monkeypatch.setattr(V, "bisect", lambda *a, **k: {"found": False})
    monkeypatch.setattr(V, "reimport", lambda via, module, inputs: module)
    report = V.validate(_jax_fn(), from_="jax", targets=("jax", "torch"), roundtrip=True, progress=False)
    (bar,) = bars
    assert bar.total == len(bar.steps) == 5  # converting, the source, jax, torch, torch>jax
    assert report.source == "'function'" and report.from_ == "jax" and report.seed == 0
    assert report.inputs == [
        {"name": "args[0]", "shape": [2, 4], "dtype": "float32"},
        {"name": "args[1]", "shape": [5], "dtype": "int32"},
    ]


# --------------------------------------------------------------------------- hardening: onnx target


@pytest.mark.parametrize("way", ["bfloat16 output", "bfloat16 input"])
def test_onnx_target_exchanges_bfloat16_at_one_boundary_as_float32(way):
    """onnxruntime's NumPy bridge has no bfloat16: a graph with bfloat16 only at its output
    (or only at its input) is run with float32 there, and a bfloat16 output comes back as
    bfloat16 with the same values."""
    import ml_dtypes

    import converter

    bf16 = np.dtype(ml_dtypes.bfloat16)
    if way == "bfloat16 output":
        x = np.array([1.5, -2.0, 3.0], np.float32)
        module = converter.from_jax(lambda x: (x * 2).astype(jnp.bfloat16), x)
        want = (x * 2).astype(bf16)
    else:
        x = np.array([1.5, -2.0, 3.0], bf16)
        module = converter.from_jax(lambda x: x.astype(jnp.float32) * 2, x)
        want = x.astype(np.float32) * 2
    (out,) = V.target_runner("onnx", module)((x,), {})
    assert out.dtype == want.dtype
    np.testing.assert_array_equal(out.astype(np.float32), want.astype(np.float32))


def test_bisect_groups_runs_of_one_aten_scope_and_keeps_outputs_used_outside():
    """Consecutive ops of one ``aten.op[file:line]`` scope form one group; an unscoped op
    (a hoisted constant) neither joins nor breaks a run; the same scope later starts a new
    group. A group's outputs are the results some op outside it (or the return, -1) uses."""
    import converter.tools.bisect as B

    def rec(i, location, results=()):
        return B.Recorded(i, types.SimpleNamespace(location=location, results=list(results)), list(results))

    add, mul = "aten.add.Tensor[m.py:3] @ m.py:3", "outer/aten.mul.Tensor[m.py:4] @ m.py:4"
    recs = [rec(0, add), rec(1, "m.py:3"), rec(2, add), rec(3, mul), rec(4, add)]
    groups = B._groups(recs)
    assert [(scope, [r.index for r in group]) for scope, group in groups] == [
        ("aten.add.Tensor[m.py:3]", [0, 2]),
        ("aten.mul.Tensor[m.py:4]", [3]),
        ("aten.add.Tensor[m.py:3]", [4]),
    ]
    group = [rec(5, add, ["inner", "used_later"]), rec(6, add, ["returned"])]
    uses = {"inner": {6}, "used_later": {6, 9}, "returned": {-1}}
    assert [(r.index, v) for r, v in B._group_outputs(group, uses)] == [(5, "used_later"), (6, "returned")]


def test_a_framework_name_read_at_run_time_selects_the_same_source():
    """``--from jax`` arrives as a string built at run time (argparse's, a JSON config's),
    not the interned literal: it is compared by value, so a JAX function is loaded as one,
    and a JAX source with dynamic shapes is refused as such."""
    x = np.linspace(-1, 1, 3, dtype=np.float32)
    jax_name = "".join(["ja", "x"])
    src = V.load_source((lambda v, scale: v * scale, (x,), {"scale": np.float32(3)}), jax_name)
    assert src.framework == "jax" and src.reference == "the JAX function"
    np.testing.assert_array_equal(src.run((x,), {"scale": np.float32(2)})[0], x * 2)
    with pytest.raises(V.ConversionError, match=r"dynamic_shapes .* apply to torch sources only"):
        V.load_source((lambda v: v, (x,), {}, {"v": None}), jax_name)


def test_random_inputs_of_a_dynamic_dimension_take_the_examples_size():
    """A dynamic dimension (``from_torch(dynamic_shapes=)``) is drawn at the example's size;
    without an example, at size 1; static dimensions as declared."""
    sig = Signature(
        params=(),
        inputs=(LeafSpec("args[0]", ("b", 3), "float32"), LeafSpec("args[1]", (2,), "int64")),
        outputs=(),
        in_tree=args_tree(
            {"kind": "tuple", "children": [LEAF] * 2}, {"kind": "dict", "keys": [], "children": []}
        ),
        out_tree=LEAF,
    )
    example = ((np.zeros((5, 3), np.float32), np.array([0, 4])), {})
    (x, ids), _ = V.make_inputs(sig, example, seed=0)
    assert x.shape == (5, 3) and ids.shape == (2,) and ids.max() <= 4
    (x, ids), _ = V.make_inputs(sig, None, seed=0)
    assert x.shape == (1, 3) and ids.shape == (2,)
