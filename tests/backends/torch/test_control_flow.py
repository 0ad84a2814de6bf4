"""while / if / case / map through torch's while_loop and cond higher-order ops."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .helpers import assert_close, assert_same, leaves, numpy_of, to_torch_module, torch_of

X = np.linspace(-1, 1, 6, dtype=np.float32)


def test_while_fori_and_scan():
    """A counted loop (unrolled), a data-dependent one and a counted one whose unrolled body
    would pass ``MAX_UNROLLED_OPS`` (4000 trips of 8 ops): both stay loops, ``while_loop``
    HOPs with their exact gradient, not a graph of 4000 copies of the body; a scan."""
    from converter.backends.torch.ops.control_flow import while_loop_exact_grad

    assert_same(lambda x: lax.fori_loop(0, 5, lambda i, c: c * 1.5 + i, x), X)
    f = lambda x: (  # noqa: E731
        lax.while_loop(lambda c: c[0].sum() < 10.0, lambda c: (c[0] + 1.0, c[1] + 1), (x, 0)),
        lax.fori_loop(0, 4000, lambda i, c: c * 0.999 + 0.001, x),
    )
    module = to_torch_module(f, X)
    nodes = list(module.graph_module.graph.nodes)
    assert [n.target for n in nodes].count(while_loop_exact_grad) == 2 and len(nodes) < 30
    assert_close([numpy_of(t) for t in module(torch_of(X))], leaves(jax.jit(f)(X)), rtol=1e-4)
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


def _decay(h):
    """``c = 0.5 * c + h`` from ``c = 0`` while ``i < 3 * (number of positive h)``: the trip
    count depends on data, and gradient flows from ``h`` into the carried ``c`` (torch 2.13's
    own ``while_loop`` autograd gives d/dh = 1 here instead of 1.75)."""
    trips = 3 * jnp.sum(h > 0)
    c, _ = lax.while_loop(
        lambda s: s[1] < trips, lambda s: (s[0] * 0.5 + h, s[1] + 1), (jnp.zeros_like(h), 0)
    )
    return c.sum()


def _nested(params, x):
    """A data-dependent loop whose body holds another one and a cond, all reading ``w``."""
    w = params["w"]

    def body(s):
        i, y = s
        z = lax.while_loop(lambda z: jnp.sum(z) < 3.0, lambda z: z * 1.5 + w * 0.1, y * 0.5 + 0.1)
        return i + 1, lax.cond(jnp.sum(z) > 4.0, lambda: y * w + z * 0.1, lambda: y + z * w)

    i, y = lax.while_loop(lambda s: jnp.sum(s[1]) < 20.0, body, (0, x))
    return jnp.sum(jnp.sin(y)), i


_W = {"w": np.float32(1.3)}
_Y = np.array([0.5, 0.7, 1.1], np.float32)


def test_data_dependent_while_gradient_is_exact():
    """Reference: forward-mode JAX (``jax.grad`` refuses ``while_loop``) and the closed form."""
    import torch

    import converter

    h = np.array([0.5, -0.7, 1.1], np.float32)
    module = converter.from_jax(_decay, h).to_torch()
    ht = torch.tensor(h, requires_grad=True)
    out = module(ht)
    out.backward()
    np.testing.assert_allclose(out.item(), float(_decay(h)), rtol=1e-6)  # forward unchanged
    np.testing.assert_allclose(ht.grad.numpy(), jax.jacfwd(_decay)(h), rtol=1e-6)
    np.testing.assert_allclose(ht.grad.numpy(), np.full(3, 2 * (1 - 0.5**6)), rtol=1e-6)  # 6 trips

    module = converter.from_jax(_nested, _Y, params=_W).to_torch()
    yt = torch.tensor(_Y, requires_grad=True)
    out, trips = module(yt)
    out.backward()
    want, want_trips = _nested(_W, _Y)
    np.testing.assert_allclose(out.item(), float(want), rtol=1e-5)
    assert int(trips) == int(want_trips) > 1
    np.testing.assert_allclose(yt.grad.numpy(), jax.jacfwd(lambda y: _nested(_W, y)[0])(_Y), rtol=1e-5)
    dw = jax.jacfwd(lambda w: _nested({"w": w}, _Y)[0])(_W["w"])
    np.testing.assert_allclose(module.params_w.grad.numpy(), dw, rtol=1e-5)


def test_data_dependent_while_second_derivative_is_exact():
    """A Hessian-vector product through nested data-dependent loops (create_graph=True)."""
    import torch

    import converter

    module = converter.from_jax(_nested, _Y, params=_W).to_torch()
    yt = torch.tensor(_Y, requires_grad=True)
    v = np.array([1.0, -2.0, 0.5], np.float32)
    (g,) = torch.autograd.grad(module(yt)[0], yt, create_graph=True)
    (g * torch.tensor(v)).sum().backward()
    hessian = jax.jacfwd(jax.jacfwd(lambda y: _nested(_W, y)[0]))(_Y)
    np.testing.assert_allclose(yt.grad.numpy(), hessian @ v, rtol=1e-4)


def test_while_backward_failure_names_the_loop():
    """An error in the loop's backward (here torch's own check of a saved input modified in
    place) is re-raised naming the loop's StableHLO location."""
    import pytest
    import torch
    from converter.backends.torch.ops.control_flow import WhileLoopGradientError

    import converter

    module = converter.from_jax(_decay, _Y).to_torch()
    h = torch.tensor(_Y, requires_grad=True) * 1.0
    out = module(h)
    with torch.no_grad():
        h.add_(1.0)
    with pytest.raises(
        WhileLoopGradientError, match=r"stablehlo.while at .*test_control_flow.py:\d+.*inplace"
    ):
        out.backward()


def test_data_dependent_while_exports_and_compiles():
    """torch.export keeps the while_loop HOP; torch.compile runs it (inference) and, for
    training, runs the loop eagerly with exact gradients. Dynamo and AOTAutograd with the
    ``aot_eager`` backend: what the converted module meets there is the same as under inductor,
    whose C++ code generation (seconds of gcc) is torch's own (inductor itself:
    tests/tools/test_embed.py::test_call_jax_under_torch_compile_inductor)."""
    import torch

    import converter

    module = converter.from_jax(_nested, _Y, params=_W).to_torch()
    y = torch.tensor(_Y)
    want = [np.asarray(v) for v in _nested(_W, _Y)]
    exported = torch.export.export(module, (y,))
    assert any(n.target is torch.ops.higher_order.while_loop for n in exported.graph.nodes)
    compiled = torch.compile(module, backend="aot_eager")
    for run in (exported.module(), compiled):
        with torch.no_grad():
            out, trips = run(y)
        np.testing.assert_allclose(out.item(), want[0], rtol=1e-5)
        assert int(trips) == int(want[1])
    yt = torch.tensor(_Y, requires_grad=True)
    compiled(yt)[0].backward()
    np.testing.assert_allclose(yt.grad.numpy(), jax.jacfwd(lambda v: _nested(_W, v)[0])(_Y), rtol=1e-5)


def test_counted_loop_gradient_is_exact():
    import torch

    from .helpers import to_torch_module

    f = lambda h: lax.fori_loop(0, 3, lambda i, c: c * 0.5 + h, jnp.zeros_like(h)).sum()  # noqa: E731
    h = torch.tensor(X, requires_grad=True)
    to_torch_module(f, X)(h).backward()
    np.testing.assert_allclose(h.grad.numpy(), jax.grad(f)(X), rtol=1e-6)


_DENSE_IN_BODY = """
func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.while(%c = %arg0) : tensor<3xf32>
  cond {
    %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%c init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
    %t = stablehlo.constant dense<1.000000e+01> : tensor<f32>
    %2 = stablehlo.compare LT, %1, %t, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %2 : tensor<i1>
  } do {
    %k = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
    %1 = stablehlo.add %c, %k : tensor<3xf32>
    stablehlo.return %1 : tensor<3xf32>
  }
  return %0 : tensor<3xf32>
}
"""


def test_dense_constant_in_a_loop_body_is_hoisted():
    """A non-splat constant inside a data-dependent loop's body (JAX hoists its own; other
    producers do not) is created once outside the ``while_loop`` and passed in."""
    from converter.backends.torch.ops.control_flow import while_loop_exact_grad

    import converter

    t = converter.from_stablehlo(_DENSE_IN_BODY).to_torch()
    (loop,) = [n for n in t.graph_module.graph.nodes if n.target is while_loop_exact_grad]
    assert len(loop.args[2]) == 2  # the carried value and the hoisted constant
    np.testing.assert_array_equal(numpy_of(t(torch_of(np.zeros(3, np.float32)))), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(numpy_of(t(torch_of(np.array([9.0, 0, 0], np.float32)))), [10.0, 2.0, 3.0])


def test_while_gradient_through_a_carried_value_independent_of_the_input():
    """Differentiating a loop output that does not depend on the input requiring grad (the
    replayed output needs no gradient) gives no (zero) gradient, as a Python loop under
    autograd does; the dependent output still gets ``2**trips``."""
    import torch
    from converter.backends.torch.ops.control_flow import while_loop_exact_grad

    a = torch.tensor([1.0, -2.0], requires_grad=True)
    b, k = torch.tensor([3.0, 4.0]), torch.tensor(0)
    out_a, out_b, trips = while_loop_exact_grad(
        lambda a, b, k: k < 3, lambda a, b, k: (a * 2.0, b + 1.0, k + 1), (a, b, k), ()
    )
    assert int(trips) == 3 and out_b.tolist() == [6.0, 7.0]
    (got,) = torch.autograd.grad(out_b.sum(), a, allow_unused=True, retain_graph=True)
    assert got is None or not got.any()
    (got,) = torch.autograd.grad(out_a.sum(), a)
    assert got.tolist() == [8.0, 8.0]


_CASE = """
func.func @main(%i: tensor<i32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.case"(%i) ({
    %a = stablehlo.add %x, %x : tensor<2xf32>
    stablehlo.return %a : tensor<2xf32>
  }, {
    %b = stablehlo.multiply %x, %x : tensor<2xf32>
    stablehlo.return %b : tensor<2xf32>
  }, {
    %c = stablehlo.negate %x : tensor<2xf32>
    stablehlo.return %c : tensor<2xf32>
  }) : (tensor<i32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""


def test_case_with_an_index_out_of_range_runs_the_last_branch():
    """StableHLO spec (case): an index ``< 0`` or ``>= N`` selects branch ``N - 1`` (JAX
    clamps its own index first, so only a hand-written module reaches this)."""
    import torch

    import converter

    t = converter.from_stablehlo(_CASE).to_torch()
    x = torch.tensor([3.0, -2.0])
    branches = [x + x, x * x, -x]
    for i in (-1, 0, 1, 2, 3):
        want = branches[i if 0 <= i < 3 else 2]
        assert torch.equal(t(torch.tensor(i, dtype=torch.int32), x), want), i


def test_branch_outputs_never_alias_their_inputs():
    """HOP branch/loop outputs: an input returned as is or a view of one is a fresh
    contiguous copy, a fresh output stays itself; a tensor entering twice is cloned the
    second time only."""
    import torch
    from converter.backends.torch.ops.control_flow import _distinct, _no_alias

    x, fresh = torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]), torch.ones(3)
    same, view, kept = _no_alias((x, x.t(), fresh), (x,))
    assert same is not x and torch.equal(same, x)
    assert not view._is_view() and view.is_contiguous() and torch.equal(view, x.t())
    assert kept is fresh
    first, second, other = _distinct((x, x, fresh))
    assert first is x and second is not x and torch.equal(second, x) and other is fresh


_MAP_CONSTANT_AND_CASE_OF_ONE = """
func.func @main(%a: tensor<2x3xf32>, %i: tensor<i32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = "stablehlo.map"(%a) ({
    ^bb0(%x: tensor<f32>):
      %c = stablehlo.constant dense<2.5> : tensor<f32>
      stablehlo.return %c : tensor<f32>
  }) {dimensions = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "stablehlo.case"(%i) ({
    %n = stablehlo.negate %a : tensor<2x3xf32>
    stablehlo.return %n : tensor<2x3xf32>
  }) : (tensor<i32>) -> tensor<2x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}
"""


def test_map_of_a_constant_body_and_a_case_of_one_branch():
    """StableHLO spec: a ``map`` whose body ignores its operands gives that value at every
    index (the result's shape, not a scalar); a ``case`` with one branch runs it for every
    index (out of range ones select branch ``N - 1 = 0``)."""
    import torch

    import converter

    t = converter.from_stablehlo(_MAP_CONSTANT_AND_CASE_OF_ONE).to_torch()
    a = torch.arange(6.0).reshape(2, 3)
    for i in (0, 5, -1):
        const, neg = t(a, torch.tensor(i, dtype=torch.int32))
        assert const.shape == (2, 3) and torch.equal(const, torch.full((2, 3), 2.5))
        assert torch.equal(neg, -a)


_MAP_OF_A_REDUCTION = """
func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = "stablehlo.map"(%a) ({
    ^bb0(%x: tensor<f32>):
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %r = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = []
          : (tensor<f32>, tensor<f32>) -> tensor<f32>
      stablehlo.return %r : tensor<f32>
  }) {dimensions = array<i64: 0>} : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""


def test_map_with_a_body_that_is_not_elementwise_is_refused():
    """A ``map`` body is applied to whole operands at once, valid only for elementwise ops:
    another op in it is refused, naming that op."""
    import pytest

    import converter

    with pytest.raises(
        converter.ConversionError, match=r"a map body with stablehlo.reduce: only elementwise"
    ):
        converter.from_stablehlo(_MAP_OF_A_REDUCTION).to_torch()
