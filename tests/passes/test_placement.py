"""Host/device placement normalization: host regions outlined, memory kinds on the
signature, placement surviving the JAX path and stripped with a warning elsewhere."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.compute_on import compute_on
from jax.sharding import SingleDeviceSharding

import converter
from converter import mlir
from converter.passes.placement import (
    PlacementStrippedWarning,
    host_functions,
    is_host,
    normalize_placement,
    strip_placement,
)

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
    assert m.signature.extra["host_functions"] == ["host_computation_0"]
    calls = [op for op in _main_ops(m) if op.name == "func.call"]
    assert len(calls) == 1 and is_host(calls[0])
    assert not any(is_host(op) for op in _main_ops(m) if op.name != "func.call")
    np.testing.assert_allclose(m.to_jax()(X), loose(X), rtol=1e-6)


def test_placement_needs_the_pass_and_survives_compile():
    raw = converter.from_stablehlo(jax.jit(loose).lower(X).as_text())  # no passes run
    assert HOST not in _compiled_text(raw.to_jax())  # the JAX backend cannot see loose ops
    m = normalize_placement(raw)
    f = m.to_jax()
    assert HOST in _compiled_text(f)
    np.testing.assert_allclose(f(X), loose(X), rtol=1e-6)


def test_host_calls_survive_jit_export_and_compile():
    m = converter.from_jax(called, X)
    assert len(m.signature.extra["host_functions"]) == 2  # forward and backward host calls
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
    assert "host_functions" not in s.signature.extra
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
    assert loaded.signature.extra["host_functions"] == ["host_computation_0"]
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
    pytest.importorskip("backends.onnx", reason="ONNX backend not available")
    ort = pytest.importorskip("onnxruntime")
    from backends.onnx import WARNINGS_KEY, to_onnx

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
    from converter import cli

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
