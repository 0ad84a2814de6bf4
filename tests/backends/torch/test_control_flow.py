"""while / if / case / map through torch's while_loop and cond higher-order ops."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .helpers import assert_same

X = np.linspace(-1, 1, 6, dtype=np.float32)


def test_while_fori_and_scan():
    assert_same(lambda x: lax.fori_loop(0, 5, lambda i, c: c * 1.5 + i, x), X)
    assert_same(
        lambda x: lax.while_loop(lambda c: c[0].sum() < 10.0, lambda c: (c[0] + 1.0, c[1] + 1), (x, 0)), X
    )
    assert_same(lambda x: lax.scan(lambda c, v: (c + v, c * v), 0.0, x), X)


def test_cond_and_switch():
    f = lambda p, x: lax.cond(p, lambda v: v * 2.0, lambda v: v - x.sum(), x)  # noqa: E731
    assert_same(f, np.bool_(True), X)
    assert_same(f, np.bool_(False), X)
    g = lambda i, x: lax.switch(i, [lambda v: v + 1.0, lambda v: v * 3.0, lambda v: -v], x)  # noqa: E731
    for i in (-1, 0, 1, 2, 7):
        assert_same(g, np.int32(i), X)


def test_nested_loops_capture_outer_values():
    def f(x):
        def outer(i, c):
            return lax.fori_loop(0, 3, lambda j, d: d + x * j, c) * 0.5

        return lax.fori_loop(0, 4, outer, x)

    assert_same(f, X)


def test_vmap_of_cond_becomes_select():
    assert_same(jax.vmap(lambda v: lax.cond(v > 0, jnp.sin, jnp.cos, v)), X)


def test_composite_and_map_and_unique_scatter_apply():
    comp = lax.composite(lambda x: jnp.sin(x) * 2, name="my.op")
    assert_same(comp, X)
    apply = lambda x, i: x.at[i].apply(jnp.sin, unique_indices=True)  # noqa: E731
    assert_same(apply, X, np.array([1, 4], np.int32))


_MAP = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "stablehlo.map"(%a, %b) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %m = stablehlo.multiply %x, %y : tensor<f32>
      %s = stablehlo.add %m, %x : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {dimensions = array<i64: 0, 1>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
"""


def test_map_op():
    import torch

    import converter

    a, b = torch.randn(2, 3), torch.randn(2, 3)
    out = converter.from_stablehlo(_MAP).to_torch()(a, b)
    torch.testing.assert_close(out, a * b + a)


def test_data_dependent_while_warns_about_gradients():
    import pytest

    from backends.torch.ops.control_flow import WhileLoopGradientWarning

    from .helpers import to_torch_module

    with pytest.warns(WhileLoopGradientWarning, match="while_loop"):
        to_torch_module(lambda x: lax.while_loop(lambda c: c.sum() < 10.0, lambda c: c * 2.0, x), X + 2)


def test_counted_loop_gradient_is_exact():
    import torch

    from .helpers import to_torch_module

    f = lambda h: lax.fori_loop(0, 3, lambda i, c: c * 0.5 + h, jnp.zeros_like(h)).sum()  # noqa: E731
    h = torch.tensor(X, requires_grad=True)
    to_torch_module(f, X)(h).backward()
    np.testing.assert_allclose(h.grad.numpy(), jax.grad(f)(X), rtol=1e-6)
