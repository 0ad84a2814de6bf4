"""Host/device placement normalization: host regions outlined, memory kinds on the
signature, placement surviving the JAX path and stripped with a warning elsewhere."""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from converter.backends.jax import JaxInterpreter
from jax.experimental.compute_on import compute_on
from jax.sharding import SingleDeviceSharding

import converter
from converter import mlir
from converter.passes.placement import (
    PlacementStrippedWarning,
    loose_host_ops,
    normalize_placement,
    strip_placement,
)
from converter.placement import host_functions, is_host

HOST = '_xla_compute_type="host"'
X = np.arange(3, dtype=np.float32)


def loose(x):  # compute_on without an inner jit: the host attribute only on loose ops
    with compute_on("device_host"):
        y = x * 3 + 1
    return y.sum() + x[0]


@compute_on("device_host")
@jax.jit
def _host_fn(x):
    return jnp.sin(x) * 2


def called(x):  # compute_on over jit: a call to a private function
    return jax.grad(lambda x: _host_fn(x).sum())(x) + 1


def _compiled_text(f):
    return jax.jit(lambda x: f(x)).lower(X).compile().as_text()


def _main_ops(m):
    return [op.operation for op in mlir.main_function(m.mlir).regions[0].blocks[0].operations]


def test_loose_host_ops_are_outlined():
    m = converter.from_jax(loose, X)
    assert m.signature.host_functions == ("host_computation_0",)
    calls = [op for op in _main_ops(m) if op.name == "func.call"]
    assert len(calls) == 1 and is_host(calls[0])
    assert not any(is_host(op) for op in _main_ops(m) if op.name != "func.call")
    np.testing.assert_allclose(m.to_jax()(X), loose(X), rtol=1e-6)


def test_placement_needs_the_pass_and_survives_compile():
    raw = converter.from_stablehlo(jax.jit(loose).lower(X).as_text(), normalize=False)  # no passes run
    assert loose_host_ops(raw.mlir)
    interp = lambda x: JaxInterpreter(raw.mlir).run(x)[0]  # noqa: E731
    assert HOST not in jax.jit(interp).lower(X).compile().as_text()  # the interpreter cannot see loose ops
    m = normalize_placement(raw)
    assert not loose_host_ops(m.mlir)
    f = m.to_jax()
    assert HOST in _compiled_text(f)
    np.testing.assert_allclose(f(X), loose(X), rtol=1e-6)
    assert HOST in _compiled_text(raw.to_jax())  # to_jax normalizes what it is given


def test_host_calls_survive_jit_export_and_compile():
    m = converter.from_jax(called, X)
    assert len(m.signature.host_functions) == 2  # forward and backward host calls
    f = m.to_jax()
    np.testing.assert_allclose(f(X), called(X), rtol=1e-6)
    assert HOST in _compiled_text(f)
    exported = jax.export.export(jax.jit(lambda x: f(x)))(X)
    assert 'compute_type = "host"' in exported.mlir_module()
    # and again through a converted-then-exported round trip
    again = converter.from_jax(exported)
    assert host_functions(again.mlir)
    assert HOST in _compiled_text(again.to_jax())


def test_memory_kinds_on_signature_and_main():
    host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")

    def f(x, y):
        return jax.device_put(x * 2 + y, host)

    x = jax.device_put(X, host)
    m = converter.from_jax(f, x, X)
    assert [s.memory_kind for s in m.signature.inputs] == ["pinned_host", None]
    assert m.signature.outputs[0].memory_kind == "pinned_host"
    main = mlir.main_function(m.mlir)
    assert mlir.decode_attribute(main.attributes["arg_attrs"])[0]["mhlo.memory_kind"] == "pinned_host"
    out = m.to_jax()(x, X)
    np.testing.assert_allclose(out, 2 * X + X)
    assert out.sharding.memory_kind == "pinned_host"


def test_annotated_result_gets_memory_kind():
    text = """
    func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
      %0 = stablehlo.add %a, %a : tensor<3xf32>
      %1 = stablehlo.custom_call @annotate_device_placement(%0) {has_side_effect = true,
          mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}}
          : (tensor<3xf32>) -> tensor<3xf32>
      return %1 : tensor<3xf32>
    }
    """
    m = normalize_placement(converter.from_stablehlo(text))
    assert m.signature.outputs[0].memory_kind == "pinned_host"
    main = mlir.main_function(m.mlir)
    assert mlir.decode_attribute(main.attributes["res_attrs"])[0]["mhlo.memory_kind"] == "pinned_host"


def test_strip_placement_warns_and_records():
    m = converter.from_jax(loose, X)
    with pytest.warns(PlacementStrippedWarning, match="onnx has no host placement"):
        s = strip_placement(m, "onnx")
    assert s.meta["warnings"] and "host" in s.meta["warnings"][0]
    assert s.signature.host_functions == ()
    assert not host_functions(s.mlir)
    f = s.to_jax()
    np.testing.assert_allclose(f(X), loose(X), rtol=1e-6)
    assert HOST not in _compiled_text(f)


def test_normalize_is_idempotent_and_saved(tmp_path):
    m = converter.from_jax(loose, X)
    again = normalize_placement(m)
    assert str(again) == str(m)
    m.save(tmp_path / "m.shlo")
    loaded = converter.load(tmp_path / "m.shlo")
    assert loaded.signature.host_functions == ("host_computation_0",)
    assert HOST in _compiled_text(loaded.to_jax())


def test_jitted_function_out_shardings_memory_kind():
    d = jax.devices()[0]
    host = SingleDeviceSharding(d, memory_kind="pinned_host")
    dev = SingleDeviceSharding(d, memory_kind="device")
    f = jax.jit(lambda x, y: x * 2 + y, in_shardings=(dev, dev), out_shardings=host)
    m = converter.from_jax(f, X, X)
    assert m.signature.outputs[0].memory_kind == "pinned_host"
    assert "annotate_device_placement" not in m.text()  # now carried by the result attribute
    out = m.to_jax()(X, X)
    np.testing.assert_allclose(out, 3 * X)
    assert out.sharding.memory_kind == "pinned_host"


def test_single_device_sharding_constraints_removed():
    dev = SingleDeviceSharding(jax.devices()[0], memory_kind="device")
    inner = jax.jit(lambda x, k: x * k, in_shardings=(dev,), out_shardings=dev, static_argnums=1)
    m = converter.from_jax(lambda x, k: inner(x, k) + 1, X, 3)  # static leaf: traced through a wrapper
    assert "sdy.sharding_constraint" not in m.text()
    np.testing.assert_allclose(m.to_jax()(X, 3), 3 * X + 1)


def test_onnx_target_strips_placement_with_warning():
    pytest.importorskip("converter.backends.onnx", reason="ONNX backend not available")
    ort = pytest.importorskip("onnxruntime")
    from converter.backends.onnx import WARNINGS_KEY, to_onnx

    m = converter.from_jax(loose, X)
    for convert in (m.to_onnx, lambda: to_onnx(m)):  # the Module method and the backend itself
        with pytest.warns(PlacementStrippedWarning, match="onnx has no host placement") as record:
            proto = convert()
        assert len(record) == 1
        (note,) = [p.value for p in proto.metadata_props if p.key == WARNINGS_KEY]
        assert "onnx has no host placement" in note
    sess = ort.InferenceSession(proto.SerializeToString())
    (out,) = sess.run(None, {sess.get_inputs()[0].name: X})
    np.testing.assert_allclose(out, loose(X), rtol=1e-6)
    # a module without placement converts silently
    import warnings

    plain = converter.from_jax(lambda x: x * 2, X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not plain.to_onnx().metadata_props


def _placed(x, w):  # host call, host-memory argument and result
    x = jax.device_put(x, jax.memory.Space.Device)
    z = _host_fn(jnp.tanh(x * w))
    return jax.device_put(z * w, SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")), z.sum()


def test_inspect_reports_host_functions_and_memory_kinds(tmp_path, capsys):
    from converter.tools import cli

    host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
    x = jax.device_put(X.reshape(1, 3), host)
    w = X.reshape(1, 3)
    converter.from_jax(_placed, x, w).save(tmp_path / "p.shlo")
    (tmp_path / "p.mlir").write_text(jax.jit(_placed).lower(x, w).as_text())
    for name in ("p.shlo", "p.mlir"):
        assert cli.main(["inspect", str(tmp_path / name)]) == 0
        out = capsys.readouterr().out
        assert "host-placed functions: _host_fn" in out
        assert "args[0]: float32[1, 3]  @pinned_host" in out
        assert "[1, 3]  @pinned_host" in out.split("outputs:")[1]


# ---------------------------------------------------------------- StableHLO files are normalized


def _loose_placed(x):  # a pinned_host argument, host ops loose in @main (no outlined call)
    x = jax.device_put(x, jax.memory.Space.Device)
    with compute_on("device_host"):
        y = x * 3 + 1
    return y.sum() + x[0]


def _check_canonical(m, want):
    assert not loose_host_ops(m.mlir)
    assert m.signature.host_functions == ("host_computation_0",)
    assert [s.memory_kind for s in m.signature.inputs] == ["pinned_host"]
    main = mlir.main_function(m.mlir)
    assert mlir.decode_attribute(main.attributes["arg_attrs"])[0]["mhlo.memory_kind"] == "pinned_host"
    f = m.to_jax()
    x = jax.device_put(X, SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host"))
    np.testing.assert_allclose(f(x), want, rtol=1e-6)
    assert HOST in jax.jit(lambda x: f(x)).lower(x).compile().as_text()


def test_stablehlo_files_load_in_canonical_form(tmp_path, capsys):
    from converter.tools import cli

    x = jax.device_put(X, SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host"))
    want = jax.jit(_loose_placed)(x)
    text = jax.jit(_loose_placed).lower(x).as_text()
    raw = converter.from_stablehlo(text, normalize=False)
    assert loose_host_ops(raw.mlir) and not host_functions(raw.mlir)
    _check_canonical(converter.from_stablehlo(text), want)
    (tmp_path / "p.mlir").write_text(text)
    (tmp_path / "p.mlirbc").write_bytes(raw.bytecode())
    raw.save(tmp_path / "p.shlo")  # a Module saved without the passes
    _check_canonical(converter.load(tmp_path / "p.shlo"), want)
    for name in ("p.mlir", "p.mlirbc", "p.shlo"):
        _check_canonical(cli.load_input(str(tmp_path / name), None, argparse.Namespace(verbose=False)), want)
        assert cli.main(["inspect", str(tmp_path / name)]) == 0
        out = capsys.readouterr().out
        assert "host-placed functions: host_computation_0" in out
        assert "args[0]: float32[3]  @pinned_host" in out


# ---------------------------------------------------------------- host ops inside regions


def _while_host(x):
    def body(c):
        with compute_on("device_host"):
            step = jnp.sin(c) + 2  # >= 1: the loop ends
        return c + step * 1.5

    return jax.lax.while_loop(lambda c: c.sum() < 50, body, x)


def _cond_host(p, x):  # lax.cond: a stablehlo.case
    def then(x):
        with compute_on("device_host"):
            y = jnp.sin(x) * 2
        return y + 1

    return jax.lax.cond(p, then, lambda x: x - 1, x)


_IF_TEXT = """
func.func public @main(%p: tensor<i1>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = "stablehlo.if"(%p) ({
    %1 = stablehlo.sine %x {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : tensor<3xf32>
    %2 = stablehlo.add %1, %x {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : tensor<3xf32>
    %3 = stablehlo.multiply %2, %x : tensor<3xf32>
    stablehlo.return %3 : tensor<3xf32>
  }, {
    stablehlo.return %x : tensor<3xf32>
  }) : (tensor<i1>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""


def _region_calls(m):
    """(region op, host call) pairs: the host calls nested in a while/if/case of @main."""
    out = []
    for op in mlir.walk_ops(mlir.main_function(m.mlir)):
        if op.name in ("stablehlo.while", "stablehlo.if", "stablehlo.case"):
            out += [(op.name, c) for c in mlir.walk_ops(op) if c.name == "func.call" and is_host(c)]
    return out


def _host_sine_compiled(text):
    """The compiled HLO has a host-placed sine (inside the loop body / branch computation)."""
    return any("sine(" in line and HOST in line for line in text.splitlines())


@pytest.mark.parametrize("case", ["while", "case", "if"])
def test_host_ops_in_regions_stay_on_host(case):
    p = np.array(True)
    if case == "while":
        m, args, want = converter.from_jax(_while_host, X), (X,), jax.jit(_while_host)(X)
    elif case == "case":
        m, args, want = converter.from_jax(_cond_host, p, X), (p, X), jax.jit(_cond_host)(p, X)
    else:
        m, args, want = converter.from_stablehlo(_IF_TEXT), (p, X), (np.sin(X) + X) * X
    ((region, call),) = _region_calls(m)
    assert region == f"stablehlo.{case}"
    assert not loose_host_ops(m.mlir)
    assert m.signature.host_functions == (mlir.Op(call).attr("callee"),)
    f = m.to_jax()
    np.testing.assert_allclose(f(*args), want, rtol=1e-6)
    assert _host_sine_compiled(jax.jit(lambda *a: f(*a)).lower(*args).compile().as_text())
    exported = jax.export.export(jax.jit(lambda *a: f(*a)))(*args)
    assert 'compute_type = "host"' in exported.mlir_module()
    if case != "while":
        np.testing.assert_allclose(f(np.array(False), X), X - 1 if case == "case" else X, rtol=1e-6)


def test_region_outlining_is_idempotent():
    m = converter.from_jax(_while_host, X)
    assert str(normalize_placement(m)) == str(m)


# ---------------------------------------------------------------- .jax artifacts keep memory kinds


def test_jax_artifact_keeps_input_memory_kinds(tmp_path):
    from converter.tools import cli

    host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
    x, w = jax.device_put(X.reshape(1, 3), host), X.reshape(1, 3)
    converter.from_jax(_placed, x, w).save(tmp_path / "p.shlo")
    assert cli.main([str(tmp_path / "p.shlo"), "-o", str(tmp_path / "p.jax")]) == 0
    exported = jax.export.deserialize(bytearray((tmp_path / "p.jax").read_bytes()))
    got = exported.call(x, w)
    for g, want in zip(got, jax.jit(_placed)(x, w), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-6)
    assert got[0].sharding.memory_kind == "pinned_host"
    back = cli.load_input(str(tmp_path / "p.jax"), None, argparse.Namespace(verbose=False))
    assert [s.memory_kind for s in back.signature.inputs] == ["pinned_host", None]
    assert [s.memory_kind for s in back.signature.outputs] == ["pinned_host", "device"]  # jax.jit names it
    assert back.signature.host_functions
    out = back.to_jax()(x, w)
    assert out[0].sharding.memory_kind == "pinned_host"
