"""What a training loop sees of a converted model's parameters: tied weights (one parameter,
every name in ``state_dict``, gradients summed as autograd sums them), frozen parameters
(``requires_grad=False``: no gradient, not trained), non-persistent buffers (not in
``state_dict``), buffers and statistics (never ``nn.Parameter``s), from torch, Flax variable
dicts and ONNX BatchNormalization. Compared with torch autograd and ``torch.optim``; the full
programs are in ``tests/sweeps/train_sweep.py`` (``SWEEP=train``)."""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import converter


class _Net(torch.nn.Module):
    """Embedding with a tied output head, a frozen Linear, BatchNorm (eval mode) and a
    non-persistent buffer."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.frozen = torch.nn.Linear(4, 4)
        self.frozen.weight.requires_grad_(False)
        self.bn = torch.nn.BatchNorm1d(4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight
        self.register_buffer("scale", torch.tensor(0.5), persistent=False)

    def forward(self, ids):
        return self.head(self.bn(self.frozen(self.emb(ids)) * self.scale)).logsumexp(-1).mean()


IDS = torch.tensor([1, 2, 3, 7])


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    model = _Net().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
    return model, converter.from_torch(model, (IDS,))


def test_jax_tied_frozen_gradients_and_state_dict(net):
    model, m = net
    f = m.to_jax()
    trainable, state = f.partition()
    assert set(trainable) == {n for n, p in model.named_parameters() if p.requires_grad}
    diff = {**trainable, "frozen.weight": state["frozen.weight"]}  # the frozen one too: zero
    grads = jax.jit(jax.grad(lambda p: f.apply({**state, **p}, IDS.numpy())))(diff)
    ref = copy.deepcopy(model)
    ref(IDS).backward()
    for name, p in ref.named_parameters():  # the tied weight's gradient sums both uses
        want = np.zeros(p.shape, np.float32) if p.grad is None else p.grad.numpy()
        np.testing.assert_allclose(np.asarray(grads[name]), want, rtol=1e-5, atol=1e-6)
    assert not np.any(np.asarray(grads["frozen.weight"]))  # requires_grad=False: no gradient
    fresh = _Net()
    fresh.load_state_dict(f.state_dict())  # strict: head.weight present, scale absent
    assert fresh.head.weight is fresh.emb.weight
    torch.testing.assert_close(fresh.eval()(IDS), model(IDS))


def test_torch_module_trains_what_torch_trains(net):
    model, m = net
    tm, ref = m.to_torch(), copy.deepcopy(model)
    grad = {tm.param_names[a]: p.requires_grad for a, p in tm.named_parameters()}
    assert grad == {n: p.requires_grad for n, p in model.named_parameters()}  # bn stats are buffers
    assert "scale" not in tm.state_dict() and "scale" in dict(tm.named_buffers())
    assert m.signature.training is False and not tm.training  # BatchNorm: mode-dependent
    tm.eval()
    parent = torch.nn.Sequential(tm).train()  # a parent's mode switch reaches it: allowed
    with pytest.raises(converter.ConversionError, match="convert the model in training mode"):
        parent(IDS)  # would silently keep using the running statistics
    parent.eval()
    opts = [torch.optim.SGD([p for p in x.parameters() if p.requires_grad], lr=0.5) for x in (tm, ref)]
    for _ in range(2):
        for x, opt in zip((tm, ref), opts, strict=True):
            opt.zero_grad()
            x(IDS).backward()
            opt.step()
    got = tm.source_state_dict()
    assert got["head.weight"] is got["emb.weight"]  # every name of the tied weight
    for name, value in ref.state_dict().items():
        torch.testing.assert_close(got[name], value)


def test_flax_collections_are_state():
    variables = {"params": {"w": jnp.ones((3, 2))}, "batch_stats": {"mean": jnp.zeros(2)}}

    def fn(v, x):
        return x @ v["params"]["w"] - v["batch_stats"]["mean"]

    m = converter.from_jax(fn, np.ones((1, 3), np.float32), params=variables)
    kinds = {p.name: p.kind for p in m.signature.params}
    assert kinds == {"params['params']['w']": "parameter", "params['batch_stats']['mean']": "buffer"}
    tm = m.to_torch()
    assert [tm.param_names[a] for a, _ in tm.named_parameters()] == ["params['params']['w']"]
    trainable, state = m.to_jax().partition()
    assert list(trainable) == ["params['params']['w']"] and list(state) == ["params['batch_stats']['mean']"]


def test_onnx_batchnorm_statistics_are_state():
    c = 3
    inits = [numpy_helper.from_array(np.full(c, v, np.float32), n) for n, v in
             (("s", 1.0), ("b", 0.1), ("mean", 0.2), ("var", 2.0))]  # fmt: skip
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["y"])
    graph = helper.make_graph(
        [node], "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c])], inits,
    )  # fmt: skip
    m = converter.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]))
    assert {p.name: p.kind for p in m.signature.params} == {
        "s": "parameter", "b": "parameter", "mean": "buffer", "var": "buffer",
    }  # fmt: skip
