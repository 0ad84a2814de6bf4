"""The registry coverage check (tests/registry_coverage.py) itself."""

import pytest
import torch
from converter.frontends.torch import export
from converter.frontends.torch.registry import ATEN_RULES

import converter
from converter.registry import Registry
from tests import registry_coverage
from tests.frontends.torch.conftest import Fn, graph_ops

aten = torch.ops.aten


def test_a_key_is_recorded_when_its_registered_rule_runs():
    """Only a registered rule that ran counts (raising or not): not a lookup (``get`` or
    ``in``), not a missing key, not a stand-in a test put in the table."""
    reg = Registry("test registry")
    reg.add("a", lambda: 1)
    reg.add("boom", lambda: 1 / 0)
    reg.add("swapped", lambda: "real")
    for key in ("a", "boom", "swapped", "missing"):
        registry_coverage.HITS.discard(("test registry", key))
    rule = reg.get("a")
    assert reg.get("missing") is None and "a" in reg
    assert ("test registry", "a") not in registry_coverage.HITS  # looked up, not run
    assert rule() == 1 and ("test registry", "a") in registry_coverage.HITS
    boom = reg.get("boom")
    assert ("test registry", "boom") not in registry_coverage.HITS
    with pytest.raises(ZeroDivisionError):
        boom()
    assert ("test registry", "boom") in registry_coverage.HITS
    reg._rules["swapped"] = lambda: "fake"  # what monkeypatch.setitem(REG._rules, ...) does
    assert reg.get("swapped")() == "fake" and ("test registry", "swapped") not in registry_coverage.HITS
    assert not any(name == "test registry" and key == "missing" for name, key in registry_coverage.HITS)


def test_onnx_op_check_alone_records_nothing():
    """The ONNX frontend looks every node's rule up before converting; a model refused for
    another op (one without a rule) runs no rule, so records none."""
    import onnx
    from converter.frontends.onnx import check_supported
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Acosh", ["x"], ["y"]), helper.make_node("NoSuchOp", ["y"], ["z"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    from converter.frontends.onnx.registry import ONNX_RULES

    acosh = {h for h in registry_coverage.HITS if h[0] == ONNX_RULES.name and h[1][1] == "Acosh"}
    registry_coverage.HITS.difference_update(acosh)  # whatever other tests of this process ran
    try:
        with pytest.raises(converter.UnsupportedOpError, match="NoSuchOp"):
            check_supported(model)
        assert onnx.defs.has("Acosh") and ONNX_RULES.get(("ai.onnx", "Acosh", 9)) is not None
        assert not any(h[0] == ONNX_RULES.name and h[1][1] == "Acosh" for h in registry_coverage.HITS)
    finally:
        registry_coverage.HITS.update(acosh)


def test_missing_names_unreached_rules_of_every_direction():
    gaps = registry_coverage.missing(set())
    assert set(gaps) == {r.name for r in registry_coverage.registries()}
    assert "stablehlo.add" in gaps["StableHLO → torch"]
    from converter.backends.torch.registry import TORCH_RULES

    assert "stablehlo.add" not in registry_coverage.missing({(TORCH_RULES.name, "stablehlo.add")}).get(
        TORCH_RULES.name, []
    )


def test_onnx_frontend_unit_is_an_op_types_rule():
    from converter.frontends.onnx.registry import ONNX_RULES

    units = registry_coverage.units(ONNX_RULES)
    relu = [u for u in units if u.startswith("ai.onnx::Relu ")]
    assert relu and len(units[relu[0]]) >= 2  # one rule, several schema versions
    key = units[relu[0]][0]
    assert not any(
        u.startswith("ai.onnx::Relu ")
        for u in registry_coverage.missing([(ONNX_RULES.name, list(key))])[ONNX_RULES.name]
    )


def test_problems_are_new_gaps_and_stale_known_gaps(monkeypatch):
    monkeypatch.setattr(registry_coverage, "KNOWN_GAPS", {"R": ["a", "b"]})
    assert registry_coverage.problems({"R": ["a", "b"]}) == {}
    assert registry_coverage.problems({"R": ["a", "b", "c"]}) == {"R": ["no case: c"]}
    assert registry_coverage.problems({"R": ["a"]}) == {"R": ["listed in KNOWN_GAPS but now has a case: b"]}


def test_known_gaps_name_real_rules():
    real = {r.name: set(registry_coverage.units(r)) for r in registry_coverage.registries()}
    for name, listed in registry_coverage.KNOWN_GAPS.items():
        assert name in real and set(listed) <= real[name], sorted(set(listed) - real.get(name, set()))


def test_rules_the_decompositions_always_replace():
    """The keys listed as replaced before lowering really are: each is in the Core ATen
    decomposition table (``_DECOMPOSED_BEFORE_LOWERING``), or has a CompositeImplicitAutograd
    kernel or mutates its arguments, or is dropped as unused (``_REPLACED_BEFORE_LOWERING``:
    decomposed, functionalized or eliminated whatever the table), so no ``from_torch``
    conversion reaches their rules -- and each still has a rule."""
    table = {str(op) for op in torch.export.default_decompositions()}
    keys = {str(k) for k in ATEN_RULES.keys()}
    for name in registry_coverage._DECOMPOSED_BEFORE_LOWERING:
        assert name in table and name in keys, name
    for name in registry_coverage._REPLACED_BEFORE_LOWERING:
        packet, overload = name.removeprefix("aten.").split(".")
        op = getattr(getattr(aten, packet), overload)
        implicit = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
        assert name in keys, name
        if name == "aten._assert_async.default":  # no result, and FX does not keep it for its effect
            asserting = Fn(lambda x: (torch._assert_async(x.sum() != 1e9), x + 1)[-1])
            raw = torch.export.export(asserting, (torch.ones(2),))
            assert name in graph_ops(raw) and name not in graph_ops(export(raw)), name
        else:
            assert implicit or op._schema.is_mutable, name


def test_a_key_registered_twice_is_refused():
    from converter.registry import RegistryCollisionError

    reg = Registry("test → nothing")

    @reg.register("a", "b")
    def rule():
        pass

    assert len(reg) == 2 and list(reg.keys()) == ["a", "b"] and "b" in reg and reg.get("c") is None
    with pytest.raises(RegistryCollisionError, match=r"test → nothing: 'b' is already registered to .*rule"):
        reg.register("b")(lambda: None)
    assert len(reg) == 2 and reg._rules["b"] is rule  # the first rule kept
