"""The registry coverage check (tests/registry_coverage.py) itself."""

from converter.registry import Registry
from tests import registry_coverage


def test_get_records_found_keys_only():
    reg = Registry("test registry")
    reg.add("a", lambda: 1)
    registry_coverage.HITS.discard(("test registry", "a"))
    assert reg.get("missing") is None and ("test registry", "missing") not in registry_coverage.HITS
    assert "a" in reg and ("test registry", "a") not in registry_coverage.HITS  # `in` is no use
    assert reg.get("a")() == 1 and ("test registry", "a") in registry_coverage.HITS


def test_missing_names_unreached_rules_of_every_direction():
    gaps = registry_coverage.missing(set())
    assert set(gaps) == {r.name for r in registry_coverage.registries()}
    assert "stablehlo.add" in gaps["StableHLO → torch"]
    from backends.torch.registry import TORCH_RULES

    assert "stablehlo.add" not in registry_coverage.missing({(TORCH_RULES.name, "stablehlo.add")}).get(
        TORCH_RULES.name, []
    )


def test_onnx_frontend_unit_is_an_op_types_rule():
    from frontends.onnx.registry import ONNX_RULES

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
