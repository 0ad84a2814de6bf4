"""``annotate_device_placement`` in the middle of a function through the JAX backend.

``jax.device_put(x, <memory kind>)`` inside ``jit`` is an ``annotate_device_placement``
custom call when lowered for GPU/TPU (on CPU JAX drops it); normalization removes only one
that feeds ``@main``'s return alone, so activation-offloading patterns keep theirs.
"""

import jax
import numpy as np
import pytest

import converter
from converter.errors import OpConversionError

X = np.linspace(-1, 1, 6, dtype=np.float32)
ANNOTATE = "annotate_device_placement"


def offload(x):
    """``x * 2`` goes to pinned host memory and comes back to the device; also returned from
    host memory."""
    y = jax.device_put(x * 2, jax.memory.Space.Host)
    z = jax.device_put(y, jax.memory.Space.Device)
    return z + x, y


def offload_only(x):
    y = jax.device_put(x * 2, jax.memory.Space.Host)
    return jax.device_put(y, jax.memory.Space.Device) + x


def _gpu_module(fn):
    """``fn`` as exported for CUDA (the lowering with the custom calls), read back."""
    return converter.from_stablehlo(jax.export.export(jax.jit(fn), platforms=["cuda"])(X).mlir_module())


def _device_puts(jaxpr):
    """The memory spaces of the ``device_put`` equations of ``jaxpr``, nested jaxprs too."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "device_put":
            out += [str(d) for d in eqn.params["devices"]]
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            out += _device_puts(sub)
    return out


def test_annotations_survive_normalization_and_run():
    m = _gpu_module(offload)
    assert m.text().count(ANNOTATE) == 2  # the first is read by the second: it stays
    assert [s.memory_kind for s in m.signature.outputs] == ["device", "pinned_host"]
    f = m.to_jax()
    got = f(X)
    for g, w in zip(got, jax.jit(offload)(X), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    assert got[1].sharding.memory_kind == "pinned_host"
    assert got[0].sharding.memory_kind == "device"


def test_annotation_moves_to_host_memory_and_back():
    m = _gpu_module(offload_only)
    assert m.text().count(ANNOTATE) == 2 and m.signature.outputs[0].memory_kind in (None, "device")
    f = m.to_jax()
    np.testing.assert_allclose(f(X), offload_only(X), rtol=1e-6)
    # the host round trip is in the traced function (not the result's memory kind: device)
    assert _device_puts(jax.make_jaxpr(lambda x: f(x))(X).jaxpr) == ["MemorySpace.Host", "MemorySpace.Device"]


_HOST_READ = """
func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.custom_call @annotate_device_placement(%x) {has_side_effect = true,
      mhlo.frontend_attributes = {_xla_buffer_placement = "KIND"}} : (tensor<3xf32>) -> tensor<3xf32>
  %1 = stablehlo.add %0, %x : tensor<3xf32>
  return %1 : tensor<3xf32>
}
"""


def test_host_and_device_memory_mixed_raises():
    # jax.jit of the source refuses an op whose operands are in different memory spaces
    f = converter.from_stablehlo(_HOST_READ.replace("KIND", "pinned_host")).to_jax()
    with pytest.raises(OpConversionError, match="memory_space"):
        f(X[:3])


def test_device_annotation_is_the_identity_and_unknown_kinds_raise():
    f = converter.from_stablehlo(_HOST_READ.replace("KIND", "device")).to_jax()
    np.testing.assert_allclose(f(X[:3]), 2 * X[:3])
    g = converter.from_stablehlo(_HOST_READ.replace("KIND", "hbm")).to_jax()
    with pytest.raises(OpConversionError, match="_xla_buffer_placement='hbm'"):
        g(X[:3])
