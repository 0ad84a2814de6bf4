"""``convert validate``: tolerances, inputs, the report, the command line and bisection."""

from __future__ import annotations

import json
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
    assert V.compare(np.float64(-INF), np.float64(-INF)).passed  # 0-d
    assert not V.compare(np.float64(-INF), np.float64(INF)).passed


@pytest.mark.parametrize(
    ("expected", "actual", "passed"),
    [
        (complex(INF, 1), complex(INF, 1), True),
        (complex(INF, 1), complex(INF, 1 + 1e-9), True),  # the finite part within tolerance
        (complex(INF, 1), complex(INF, 2), False),  # the finite part beyond it
        (complex(INF, 0), complex(-INF, 0), False),
        (complex(0, INF), complex(0, -INF), False),
        (complex(INF, 0), complex(0, 0), False),
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
    report = V.validate(_net(), from_="torch", targets=("jax",), progress=False)
    assert report.passed
    (target,) = report.targets
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
    run = V.xla_runner(dyn)
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
