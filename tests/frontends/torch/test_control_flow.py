"""``torch.cond``, ``while_loop``, ``scan``, ``map`` and ``associative_scan`` through
``from_torch``: the exported higher-order ops become StableHLO ``case``/``while`` and every
backend (``to_jax``, ``to_torch``, ``to_onnx`` run by onnxruntime) matches eager torch;
``jax.grad`` through the converted ``cond`` and ``scan`` matches torch autograd."""

from __future__ import annotations

import operator

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest
import torch
from converter.frontends.torch import export
from converter.frontends.torch.registry import ATEN_RULES
from torch._higher_order_ops.associative_scan import associative_scan
from torch._higher_order_ops.map import map as torch_map
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_leaves

import converter
from converter.errors import UnsupportedOpError
from tests.frontends.torch.conftest import graph_ops


class Cond(torch.nn.Module):
    """A data-dependent branch with a parameter used in one branch only."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x, y):
        def true_fn(x, y):
            return (self.lin(x).sin() + y,)

        def false_fn(x, y):
            return (x.cos() * y - 1.0,)

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x, y))[0]


class WhileDoubling(torch.nn.Module):
    """A loop whose trip count depends on the data, with a ``cond`` in its body."""

    def forward(self, x):
        def cond_fn(i, x):
            return x.abs().sum() < 100.0

        def body_fn(i, x):
            y = torch.cond(i % 2 == 0, lambda x: x * 2.0, lambda x: x * 3.0 + 0.5, (x,))
            return i + 1, y

        return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x))


class Scan(torch.nn.Module):
    """``scan`` over dim 1 in reverse, with a closed-over tensor (an additional input)."""

    def forward(self, init, xs, w):
        def step(c, x):
            nc = torch.tanh(c * w + x)
            return nc, (nc * x).sum()

        return scan(step, init, xs, dim=1, reverse=True)


class Map(torch.nn.Module):
    def forward(self, xs, y):
        return torch_map(lambda x, y: (x.sin() @ y, x.max()), xs, y)


class GenericAssociativeScan(torch.nn.Module):
    def forward(self, xs):
        return associative_scan(lambda a, b: a * b + b, xs, dim=1, combine_mode="generic")


def _onnx_run(module: converter.Module, args) -> list[np.ndarray]:
    session = ort.InferenceSession(module.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = session.get_inputs()
    assert len(inputs) == len(args)
    return session.run(None, {i.name: a.numpy() for i, a in zip(inputs, args, strict=True)})


def _check_all(model, args, hop, rtol=1e-5, atol=1e-6, more=()):
    """Convert ``model`` once; compare every backend with eager torch on ``args`` and on each
    argument tuple of ``more``. Returns the Module."""
    ep = export(model, args)
    assert hop in graph_ops(ep), sorted(graph_ops(ep))
    m = converter.from_torch(ep)
    f_jax, f_torch = m.to_jax(), m.to_torch()
    for call in (args, *more):
        with torch.no_grad():
            ref = [t.numpy() for t in tree_leaves(model(*call))]
            got = {
                "to_jax": [np.asarray(o) for o in tree_leaves(f_jax(*(a.numpy() for a in call)))],
                "to_torch": [t.numpy() for t in tree_leaves(f_torch(*call))],
                "to_onnx": _onnx_run(m, call),
            }
        for target, outs in got.items():
            assert len(outs) == len(ref), target
            for i, (o, r) in enumerate(zip(outs, ref, strict=True)):
                assert o.shape == r.shape and o.dtype == r.dtype, (
                    target,
                    i,
                    o.shape,
                    o.dtype,
                    r.shape,
                    r.dtype,
                )
                np.testing.assert_allclose(o, r, rtol=rtol, atol=atol, err_msg=f"{target} output {i}")
    return m


@pytest.fixture(scope="module")
def cond_module():
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    return Cond(), converter.from_torch(Cond(), (x, y))


def test_cond_one_conversion_takes_either_branch_on_every_backend():
    torch.manual_seed(1)
    pos, neg = torch.rand(2, 3) + 0.1, -(torch.rand(2, 3) + 0.1)
    m = _check_all(Cond(), (pos, torch.randn(2, 3)), "cond", more=[(neg, torch.randn(2, 3))])
    assert "stablehlo.case" in m.text()


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["true", "false"])
def test_jax_grad_through_cond_matches_autograd(cond_module, sign):
    model, m = cond_module
    f = m.to_jax()
    x, y = sign * (torch.rand(2, 3) + 0.1), torch.randn(2, 3)

    def loss(params, x, y):
        return jnp.sum(f.apply(params, x, y) ** 2)

    gp, gx, gy = jax.grad(loss, argnums=(0, 1, 2))(f.params, x.numpy(), y.numpy())
    xt, yt = x.clone().requires_grad_(), y.clone().requires_grad_()
    model.zero_grad()
    (model(xt, yt) ** 2).sum().backward()
    np.testing.assert_allclose(np.asarray(gx), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gy), yt.grad.numpy(), rtol=1e-5, atol=1e-6)
    for name, p in model.named_parameters():
        want = np.zeros(p.shape, np.float32) if p.grad is None else p.grad.numpy()
        np.testing.assert_allclose(np.asarray(gp[name]), want, rtol=1e-5, atol=1e-6, err_msg=name)


def test_while_loop_with_data_dependent_trip_count_and_nested_cond():
    m = _check_all(WhileDoubling(), (torch.tensor([0.3, -0.2, 0.1]),), "while_loop")
    f = m.to_jax()
    for x in (
        torch.tensor([0.3, -0.2, 0.1]),
        torch.tensor([20.0, 1.0, -3.0]),
        torch.tensor([0.001, 0.0, 0.0]),
    ):
        want = WhileDoubling()(x)
        got = f(x.numpy())
        assert int(got[0]) == int(want[0])
        np.testing.assert_allclose(np.asarray(got[1]), want[1].numpy(), rtol=1e-6)


@pytest.fixture(scope="module")
def scan_case():
    torch.manual_seed(2)
    args = (torch.randn(3), torch.randn(3, 5), torch.randn(3))
    return args, _check_all(Scan(), args, "scan")


def test_scan_reverse_dim1_with_closure_on_every_backend(scan_case):
    _, m = scan_case
    assert "stablehlo.while" in m.text()


def test_jax_grad_through_scan_matches_autograd(scan_case):
    args, m = scan_case
    f = m.to_jax()

    def loss(*a):
        c, ys = f(*a)
        return jnp.sum(c**2) + jnp.sum(jnp.sin(ys))

    got = jax.grad(loss, argnums=(0, 1, 2))(*(a.numpy() for a in args))
    leaves = [a.clone().requires_grad_() for a in args]
    c, ys = Scan()(*leaves)
    ((c**2).sum() + ys.sin().sum()).backward()
    for i, (g, t) in enumerate(zip(got, leaves, strict=True)):
        np.testing.assert_allclose(
            np.asarray(g), t.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=f"d/d args[{i}]"
        )


def test_map_with_positional_args_on_every_backend():
    torch.manual_seed(3)
    _check_all(Map(), (torch.randn(4, 2, 3), torch.randn(3, 2)), "map_impl")


def test_generic_associative_scan_on_every_backend():
    # on CPU torch.export decomposes combine_mode="generic" into ATen slices and cats
    torch.manual_seed(4)
    _check_all(GenericAssociativeScan(), (torch.randn(2, 5),), "aten.cat.default")


def test_pointwise_associative_scan_hop_matches_torch():
    # torch emits the associative_scan HOP only for combine_mode="pointwise" on CUDA/XPU, so
    # the graph is built by hand here: a combine traced on single slices, as torch traces it
    from converter.frontends.torch.lowering import interpret

    def combine(a1, b1, a2, b2):  # composing affine maps x -> a x + b: associative
        return a1 * a2, b1 * a2 + b2

    a, b = torch.rand(7, 3) + 0.5, torch.randn(7, 3)
    root = torch.nn.Module()
    root.combine_graph_0 = make_fx(combine)(a[0], b[0], a[0], b[0])  # ATen ops, on slices
    g = torch.fx.Graph()
    a_in, b_in = g.placeholder("a"), g.placeholder("b")
    sub = g.get_attr("combine_graph_0")
    node = g.call_function(torch.ops.higher_order.associative_scan, (sub, [a_in, b_in], ()))
    g.output(tuple(g.call_function(operator.getitem, (node, i)) for i in range(2)))
    gm = torch.fx.GraphModule(root, g)
    want = [(a[0], b[0])]
    for t in range(1, a.shape[0]):
        want.append(combine(*want[-1], a[t], b[t]))
    got = jax.jit(lambda a, b: interpret(gm.graph, [a, b]))(a.numpy(), b.numpy())
    for i in range(2):
        np.testing.assert_allclose(
            np.asarray(got[i]), torch.stack([w[i] for w in want]).numpy(), rtol=1e-5, atol=1e-6
        )


class LinearRecurrence(torch.nn.Module):
    """``h[t] = a[t] * h[t-1] + b[t]`` as torch writes it for a parallel scan: composing
    affine maps is associative, and the combine function is pointwise."""

    def __init__(self, mode: str = "pointwise"):
        super().__init__()
        self.mode = mode

    def forward(self, a, b):
        def combine(left, right):
            (a1, b1), (a2, b2) = left, right
            return a1 * a2, b1 * a2 + b2

        _, h = associative_scan(combine, (a, b), dim=1, combine_mode=self.mode)
        return h.tanh()


def test_associative_scan_of_a_real_program_on_every_backend():
    """A real program with ``associative_scan(combine_mode="pointwise")``: torch emits the
    higher-order op only for CUDA/XPU inputs, so it is exported on fake CUDA tensors (no GPU
    needed; the graph is device-neutral) and the converted module runs on CPU in each backend,
    against eager torch running the same program with ``combine_mode="generic"`` and a
    sequential loop."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        fake = (torch.empty(2, 9, 3, device="cuda"), torch.empty(2, 9, 3, device="cuda"))
        ep = torch.export.export(LinearRecurrence(), fake)
    assert "associative_scan" in graph_ops(ep)  # the higher-order op, not a decomposition
    m = converter.from_torch(ep)
    f_jax, f_torch = m.to_jax(), m.to_torch()
    torch.manual_seed(5)
    for _ in range(2):
        a, b = torch.rand(2, 9, 3) + 0.5, torch.randn(2, 9, 3)
        with torch.no_grad():
            want = LinearRecurrence("generic")(a, b).numpy()
        h, loop = torch.zeros(2, 3), []
        for t in range(9):
            h = a[:, t] * h + b[:, t]
            loop.append(h)
        np.testing.assert_allclose(want, torch.stack(loop, 1).tanh().numpy(), rtol=1e-5, atol=1e-6)
        got = {
            "to_jax": np.asarray(f_jax(a.numpy(), b.numpy())),
            "to_torch": f_torch(a, b).detach().numpy(),
            "to_onnx": _onnx_run(m, (a, b))[0],
        }
        for target, out in got.items():
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6, err_msg=target)


def test_missing_rule_inside_a_branch_is_reported_before_lowering(monkeypatch):
    monkeypatch.delitem(ATEN_RULES._rules, "aten.cos.default")
    with pytest.raises(UnsupportedOpError) as info:
        converter.from_torch(Cond(), (torch.randn(2, 3), torch.randn(2, 3)))
    assert [m.name for m in info.value.missing] == ["aten.cos.default"]
    assert "test_control_flow.py" in info.value.missing[0].location


def test_random_op_in_a_loop_body_is_refused():
    class Noisy(torch.nn.Module):
        def forward(self, init, xs):
            return scan(lambda c, x: (c + x * torch.rand_like(x), c.clone()), init, xs)

    with pytest.raises(converter.ConversionError, match="same random numbers"):
        converter.from_torch(Noisy(), (torch.zeros(2), torch.ones(4, 2)))


def test_torch_backend_autograd_through_converted_cond_and_scan(cond_module, scan_case):
    model, m = cond_module
    converted = m.to_torch()
    for sign in (1.0, -1.0):
        x, y = sign * (torch.rand(2, 3) + 0.1), torch.randn(2, 3)
        got = [t.clone().requires_grad_() for t in (x, y)]
        (converted(*got) ** 2).sum().backward()
        want = [t.clone().requires_grad_() for t in (x, y)]
        (model(*want) ** 2).sum().backward()
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.grad.numpy(), w.grad.numpy(), rtol=1e-5, atol=1e-6)
    args, m = scan_case
    converted = m.to_torch()
    grads = []
    for fn in (converted, Scan()):
        leaves = [a.clone().requires_grad_() for a in args]
        c, ys = fn(*leaves)
        ((c**2).sum() + ys.sin().sum()).backward()
        grads.append([t.grad.numpy() for t in leaves])
    for g, w in zip(*grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_vmap_of_converted_cond_takes_each_examples_branch(cond_module):
    model, m = cond_module
    xs = torch.stack([torch.rand(2, 3) + 0.1, -(torch.rand(2, 3) + 0.1)])
    ys = torch.randn(2, 2, 3)
    got = np.asarray(jax.vmap(m.to_jax())(xs.numpy(), ys.numpy()))
    with torch.no_grad():
        want = torch.stack([model(x, y) for x, y in zip(xs, ys, strict=True)]).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("pred", [True, False])
def test_cond_with_a_python_bool_predicate_picks_the_branch_at_conversion(pred):
    # a predicate on sizes (symbolic dims the walker decides) reaches the rule as a Python bool
    from converter.frontends.torch.lowering import interpret

    root = torch.nn.Module()
    root.true_graph_0 = make_fx(lambda x: (x.sin(),))(torch.randn(3))
    root.false_graph_0 = make_fx(lambda x: (x.cos(),))(torch.randn(3))
    g = torch.fx.Graph()
    x_in, p_in = g.placeholder("x"), g.placeholder("pred")
    branches = (g.get_attr("true_graph_0"), g.get_attr("false_graph_0"))
    node = g.call_function(torch.ops.higher_order.cond, (p_in, *branches, (x_in,)))
    g.output((g.call_function(operator.getitem, (node, 0)),))
    x = torch.randn(3)
    (got,) = interpret(torch.fx.GraphModule(root, g).graph, [x.numpy(), pred])
    np.testing.assert_allclose(np.asarray(got), (x.sin() if pred else x.cos()).numpy(), rtol=1e-6)


class BranchClosures(torch.nn.Module):
    """A ``torch.cond`` branch that closes over ``self.lin.weight.T`` (``torch.export`` passes
    the view beside the weight it views as operands), and one that runs a ``while_loop``
    whose counter is ``torch.tensor(0)`` (a tensor constant inside the branch's subgraph)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        def loop(c):
            return while_loop(lambda i, y: i < 5, lambda i, y: (i + 1, y * 1.5 + 0.1), (torch.tensor(0), c))[
                1
            ]

        a = torch.cond(x.sum() > 0, lambda x: x @ self.lin.weight.T, lambda x: self.lin(x), (x,))
        return a, torch.cond(x.sum() > 0, loop, lambda c: c.cos(), (x,))


def test_branch_closures_convert():
    """``run_decompositions()`` refused both branches ("cond_true might be aliasing the input
    or the output!"; "Attempting to use FunctionalTensor on its own": ``ExportError``); the
    aliased operands are cloned and the 0-d constant rebuilt as ``scalar_tensor`` first."""
    x = torch.tensor([[0.5, -0.25, 1.0]])
    model = BranchClosures()
    got = converter.from_torch(model, (x,)).to_jax()(x.numpy())
    for g, w in zip(got, model(x), strict=True):
        np.testing.assert_allclose(np.asarray(g), w.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_branch_closures_leave_the_callers_program_as_it_was():
    """The aliased operands are cloned in a copy: an ``ExportedProgram`` passed in keeps its
    graphs (no ``clone`` nodes appear in them)."""
    x = torch.tensor([[0.5, -0.25, 1.0]])
    ep = torch.export.export(BranchClosures(), (x,))

    def codes():
        return [m.code for m in ep.graph_module.modules() if isinstance(m, torch.fx.GraphModule)]

    before = codes()
    converter.from_torch(ep)
    assert codes() == before
