"""``converter.frontends.torch.export``: torch.export then the Core ATen decompositions, skipped for a
program already in Core ATen, with the CompositeImplicitAutograd op set cached per op
registration state (:mod:`converter._torch_internal`)."""

from __future__ import annotations

import torch
from converter.frontends.torch import export
from converter.frontends.torch.convert import _is_core_aten

from converter._torch_internal import _CACHE, cached_cia_ops


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.nn.functional.layer_norm(self.lin(x), (3,)).softmax(-1)


def _targets(ep) -> set[str]:
    return {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}


def test_training_ir_is_decomposed_and_a_decomposed_program_is_kept_as_is():
    x = torch.randn(2, 4)
    raw = torch.export.export(_Net(), (x,))
    assert not _is_core_aten(raw.graph_module)  # aten.linear, aten.layer_norm are not core
    ep = export(raw)
    assert ep is not raw
    assert "aten.linear.default" not in _targets(ep)
    assert _is_core_aten(ep.graph_module)
    assert export(ep) is ep
    torch.testing.assert_close(ep.module()(x), raw.module()(x))


def test_same_program_as_torch_own_decomposition():
    x = torch.randn(2, 4)
    net = _Net()
    ours = export(net, (x,))
    theirs = torch.export.export(net, (x,)).run_decompositions()
    assert sorted(map(str, _targets(ours))) == sorted(map(str, _targets(theirs)))


def test_mutating_op_is_not_core():
    class AddInPlace(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(()))

        def forward(self, x):
            self.count.add_(1)
            return x + self.count

    raw = torch.export.export(AddInPlace(), (torch.ones(2),))
    assert not _is_core_aten(raw.graph_module)
    ep = export(raw)
    assert "aten.add_.Tensor" not in _targets(ep)


def test_cia_cache_follows_new_op_registrations():
    from torch._export import utils

    with cached_cia_ops():
        first = utils._collect_all_valid_cia_ops  # unpatched: the collector lives elsewhere
        import torch.export.exported_program as epm

        before = epm._collect_all_valid_cia_ops()
        assert epm._collect_all_valid_cia_ops() == before
        assert len(_CACHE) == 1
        key = next(iter(_CACHE))
        lib = torch.library.Library("converter_test_cia", "DEF")  # noqa: TOR901 - a fresh namespace
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
        after = epm._collect_all_valid_cia_ops()
        assert next(iter(_CACHE)) != key
        assert torch.ops.converter_test_cia.twice.default in after
        assert first is utils._collect_all_valid_cia_ops
    assert epm._collect_all_valid_cia_ops is utils._collect_all_valid_cia_ops


def test_lowering_refuses_what_a_rule_cannot_express():
    """``interpret``: a node kind no rule serves (a tensor ``get_attr``: not a subgraph) is
    an OpConversionError naming it; a graph without an output node a ValueError; ``conform``
    refuses a rule's result of another shape than torch's; a rule's error in a dynamic graph
    names the dynamic dimensions among its arguments, none when they have none."""
    import jax
    import jax.numpy as jnp
    import pytest
    from converter.frontends.torch.lowering import _symbolic_cause, conform, interpret, symbolic_dims

    from converter.errors import OpConversionError

    root = torch.nn.Module()
    root.table = torch.ones(2)
    g = torch.fx.Graph(root)
    g.output(g.get_attr("table"))
    with pytest.raises(OpConversionError, match="get_attr.*table"):
        interpret(g, [])
    g = torch.fx.Graph()
    g.placeholder("x")
    with pytest.raises(ValueError, match="graph has no output node"):
        interpret(g, [1])
    fake = torch._subclasses.FakeTensorMode().from_tensor(torch.zeros(2, 3))
    assert conform(jnp.zeros((2, 3), jnp.int32), fake).dtype == jnp.float32  # cast to torch's
    with pytest.raises(ValueError, match=r"rule returned shape \(3, 2\), torch gives \(2, 3\)"):
        conform(jnp.zeros((3, 2)), fake)
    with pytest.raises(ValueError, match=r"rule returned shape \(6,\)"):
        conform(jnp.zeros(6), fake)
    (n,) = jax.export.symbolic_shape("n")
    with symbolic_dims({"s0": n}):  # a rule's error in a dynamic graph: which dims it names
        assert _symbolic_cause(ValueError("x"), ((jnp.zeros(2), 3), {})) is None
        assert _symbolic_cause(ValueError("x"), ((jnp.zeros(2), n), {})) == ["n"]


def test_treespec_to_json_kinds_and_keys():
    """Tensor and static leaves, namedtuples (their field names: torch's node type is the
    ``namedtuple`` function, its context the class; this crashed ``from_torch`` on any
    namedtuple input or output), and the key spellings of custom nodes' contexts: keys,
    ``(keys, extra)``, one string, none."""
    from collections import namedtuple
    from types import SimpleNamespace

    from converter.frontends.torch.pytree import _keys_of, treespec_to_json
    from torch.utils._pytree import tree_flatten

    Pair = namedtuple("Pair", "a b")
    t = torch.zeros(1)
    leaves, spec = tree_flatten((t, None, Pair(t, 3)))
    assert treespec_to_json(spec, leaves) == {
        "kind": "tuple",
        "children": [
            {"kind": "leaf"},
            {"kind": "static", "value": None},  # a leaf in torch's pytree
            {
                "kind": "dict",
                "keys": ["a", "b"],
                "children": [{"kind": "leaf"}, {"kind": "static", "value": 3}],
                "type": "Pair",
            },
        ],
    }

    assert treespec_to_json(tree_flatten([t, 3])[1]) == {  # without the leaves: all "leaf"
        "kind": "list",
        "children": [{"kind": "leaf"}, {"kind": "leaf"}],
    }

    def keys(context, n=2):
        return _keys_of(SimpleNamespace(type=object, context=context, num_children=n))

    assert keys(["x", 1]) == ["x", 1]
    assert keys((["p", "q"], "more")) == ["p", "q"]
    assert keys("only", 1) == ["only"]
    assert keys({"opaque": 1}, 3) == ["0", "1", "2"]
