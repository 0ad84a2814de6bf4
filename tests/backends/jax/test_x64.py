"""``to_jax`` never changes the process's ``jax_enable_x64``: a module that computes with
64-bit types runs (and traces, under an enclosing ``jax.jit``) under a scoped
``jax.enable_x64(True)``, and 64-bit inputs JAX has already narrowed to 32 bits are refused
naming the argument. (Regression: an f32 model with an internal i64 constant used to have it
narrowed to 32 bits, so INT64_MAX became -1; here 2**32 would become 0.)"""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import converter
from converter.errors import SignatureMismatchError

MODULE = """
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %big = stablehlo.constant dense<4294967296> : tensor<i64>
  %f = stablehlo.convert %big : (tensor<i64>) -> tensor<f32>
  %b = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<3xf32>
  %y = stablehlo.add %x, %b : tensor<3xf32>
  return %y : tensor<3xf32>
}
"""

F64_MODULE = """
func.func @main(%x: tensor<3xf64>) -> tensor<3xf64> {
  %c = stablehlo.constant dense<1.0000000000001> : tensor<f64>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %y = stablehlo.multiply %x, %b : tensor<3xf64>
  return %y : tensor<3xf64>
}
"""


@pytest.fixture
def x64_off():
    """The process default, x64 off, set process-wide (conftest turns it on for the suite),
    so that a conversion or call switching it on globally is seen."""
    jax.config.update("jax_enable_x64", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", True)


def test_internal_int64_without_global_x64():
    code = "\n".join(
        [
            "import jax, numpy as np, converter",
            "assert not jax.config.jax_enable_x64",
            f"fn = converter.from_stablehlo({MODULE!r}).to_jax()",
            "print(np.asarray(fn(np.zeros(3, np.float32))).tolist())",
            "assert not jax.config.jax_enable_x64",
        ]
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == str([float(2**32)] * 3)


def test_internal_int64_under_an_x64_off_jit(x64_off):
    """The scope is part of jit's trace context: inside an enclosing jax.jit / grad traced
    with x64 off, the function's own 64-bit values keep their type."""
    fn = converter.from_stablehlo(MODULE).to_jax()
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda a: fn(a) * 2)(x)), (x + 2.0**32) * 2)
    np.testing.assert_array_equal(np.asarray(jax.grad(lambda a: fn(a).sum())(x)), np.ones(3))
    assert not jax.config.jax_enable_x64


class _Tokens(torch.nn.Module):
    """GPT-2-style: int64 token ids through an embedding, and an int64 output past 2**32."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)

    def forward(self, ids):
        return self.emb(ids), ids * 2**33


@pytest.fixture(scope="module")
def tokens():
    torch.manual_seed(0)
    model = _Tokens().eval()
    ids = torch.tensor([[1, 2, 3, 9]])
    return model, ids, converter.from_torch(model, (ids,))


def test_int64_ids_without_x64(tokens, x64_off):
    model, ids, module = tokens
    f = module.to_jax()
    assert not jax.config.jax_enable_x64
    emb, big = f(ids.numpy())  # NumPy int64: nothing narrowed, the call runs under the scope
    assert not jax.config.jax_enable_x64
    want_emb, want_big = model(ids)
    np.testing.assert_allclose(np.asarray(emb), want_emb.detach().numpy(), rtol=1e-6)
    assert big.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(big), want_big.numpy())
    # an enclosing jit traced with x64 off (or jnp) has narrowed the ids before f sees them
    narrowed = r"args\[0\] \(expected int64, got int32\).*jax_enable_x64"
    for call in (lambda: jax.jit(lambda i: f(i))(ids.numpy()), lambda: f(jnp.asarray(ids.numpy()))):
        with pytest.raises(SignatureMismatchError, match=narrowed):
            call()
    with jax.enable_x64(True):  # what the message says to do
        _, big = jax.jit(lambda i: f(i))(ids.numpy())
        np.testing.assert_array_equal(np.asarray(big), want_big.numpy())
    assert not jax.config.jax_enable_x64


def test_int64_ids_with_x64(tokens):
    model, ids, module = tokens
    f = module.to_jax()
    _, big = jax.jit(lambda i: f(i))(ids.numpy())
    np.testing.assert_array_equal(np.asarray(big), model(ids)[1].numpy())
    assert jax.config.jax_enable_x64


def test_float64_module_without_x64(x64_off):
    f = converter.from_stablehlo(F64_MODULE).to_jax()
    x = np.array([1.0, 3.0, 1e8])
    y = f(x)
    assert y.dtype == np.float64 and not jax.config.jax_enable_x64
    np.testing.assert_array_equal(np.asarray(y), x * 1.0000000000001)
    with pytest.raises(SignatureMismatchError, match=r"args\[0\] \(expected float64, got float32\)"):
        jax.jit(lambda a: f(a))(x)
