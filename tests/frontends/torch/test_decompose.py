"""``from_torch`` decomposes a static, functional ``torch.export`` graph node by node
(``frontends/torch/decompose.py``) instead of re-tracing it with ``run_decompositions()``:
the result is the module ``run_decompositions()`` gives (same StableHLO ops, outputs of eager
torch), each (op, argument signature) is traced once, and graphs outside that case take the
``run_decompositions()`` path."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from converter.frontends.torch import decompose
from converter.frontends.torch.decompose import decompose_graph
from torch.export import Dim

import converter


class Block(torch.nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.proj = torch.nn.Linear(d, d)
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x):
        h = torch.softmax(self.norm(x) @ x.transpose(-1, -2), dim=-1) @ x
        return x + self.drop(torch.nn.functional.gelu(self.proj(h)))


class Stack(torch.nn.Module):
    """Identical layers of non-core ATen ops (layer_norm, linear, matmul, softmax, dropout)."""

    def __init__(self, d: int = 16, n: int = 4):
        super().__init__()
        self.blocks = torch.nn.Sequential(*(Block(d) for _ in range(n)))

    def forward(self, x):
        return self.blocks(x).reshape(x.shape[0], -1)


@pytest.fixture(scope="module")
def stack():
    torch.manual_seed(0)
    model = Stack().eval()
    x = torch.randn(2, 5, 16)
    return model, x, torch.export.export(model, (x,))


def _ops(graph: torch.fx.Graph) -> set[str]:
    return {str(n.target) for n in graph.nodes if n.op == "call_function"}


def test_node_by_node_matches_run_decompositions(stack):
    model, x, ep = stack
    graph = decompose_graph(ep)
    assert graph is not None
    decomposed = ep.run_decompositions()
    assert "aten.layer_norm.default" in _ops(ep.graph)  # the training IR has non-core ops
    assert _ops(graph) - {"aten.clone.default"} == _ops(decomposed.graph) - {"aten.clone.default"}
    fast, slow = converter.from_torch(ep), converter.from_torch(decomposed)
    assert fast.op_histogram() == slow.op_histogram()
    with torch.no_grad():
        want = model(x).numpy()
    got = np.asarray(fast.to_jax()(x.numpy()))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, np.asarray(slow.to_jax()(x.numpy())))


def test_each_signature_is_traced_once(stack):
    _, _, ep = stack
    decompose._CACHE.clear()
    decompose_graph(ep)
    traced = len(decompose._CACHE)
    per_layer = sum(1 for n in ep.graph.nodes if str(n.target) == "aten.layer_norm.default")
    assert per_layer == 4 and 0 < traced < 12  # 4 identical layers share their traces
    before = dict(decompose._CACHE)
    decompose_graph(ep)
    assert decompose._CACHE == before


def test_the_exported_program_is_left_alone(stack):
    _, _, ep = stack
    before = [(n.name, str(n.target)) for n in ep.graph.nodes]
    converter.from_torch(ep)
    assert [(n.name, str(n.target)) for n in ep.graph.nodes] == before


class _BatchNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(3)

    def forward(self, x):
        return self.bn(x)


class _InPlace(torch.nn.Module):
    def forward(self, x):
        x.add_(1)
        return x * 2


@pytest.mark.parametrize(
    "model, args, dynamic",
    [
        (_BatchNorm().eval(), (torch.randn(4, 3),), None),  # native_batch_norm: functionalized
        (_BatchNorm().train(), (torch.randn(4, 3),), None),  # running stats updated in place
        (_InPlace(), (torch.randn(4, 3),), None),
        (torch.nn.Linear(3, 2), (torch.randn(4, 3),), ({0: Dim("batch", min=2, max=64)},)),
    ],
    ids=["batchnorm-eval", "batchnorm-train", "in-place", "dynamic"],
)
def test_other_graphs_take_run_decompositions(model, args, dynamic):
    ep = torch.export.export(model, args, dynamic_shapes=dynamic)
    assert decompose_graph(ep) is None
    module = converter.from_torch(ep)
    x = args[0].clone()
    with torch.no_grad():
        want = model(x.clone()).numpy()
    if module.signature.mutations:
        got = module.to_jax().apply(module.params, x.numpy())
    else:
        got = module.to_jax()(x.numpy())
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def _node(target, *args):
    """A graph of placeholders for the FakeTensors or values of ``args`` and one call."""
    g = torch.fx.Graph()
    mode = torch._subclasses.FakeTensorMode()
    nodes = []
    for i, a in enumerate(args):
        p = g.placeholder(f"a{i}")
        p.meta["val"] = mode.from_tensor(a) if isinstance(a, torch.Tensor) else a
        nodes.append(p)
    return g.call_function(target, tuple(nodes))


def test_nodes_it_cannot_trace_fall_back(monkeypatch):
    """A size argument (no tensor), an op whose trace fails: the node-by-node path gives up
    (``_Unsupported``, then ``run_decompositions()``); the signature cache is cleared when
    full; a decomposition without an output node is refused."""
    aten = torch.ops.aten
    with pytest.raises(decompose._Unsupported, match="argument a1 of .* is no tensor"):
        decompose._signature(_node(aten.view.default, torch.zeros(4), 4))
    with pytest.raises(decompose._Unsupported, match="tracing aten.mm.default"):
        decompose._traced(_node(aten.mm.default, torch.zeros(2, 3), torch.zeros(2, 3)), {})
    monkeypatch.setattr(decompose, "_CACHE", {("old",): None})
    monkeypatch.setattr(decompose, "_CACHE_LIMIT", 1)
    node = _node(aten.addmm.default, torch.zeros(2), torch.zeros(2, 3), torch.zeros(3, 2))
    gm = decompose._traced(node, decompose.decomposition_table())
    assert (
        list(decompose._CACHE) == [decompose._signature(node)]
        and decompose._CACHE[decompose._signature(node)] is gm
    )
    with pytest.raises(ValueError, match="decomposition graph without output"):
        decompose._inline(torch.fx.Graph(), torch.fx.GraphModule({}, torch.fx.Graph()), node, {})
