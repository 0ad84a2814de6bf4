"""ONNX's own node tests (``onnx.backend.test.loader.load_model_tests(kind="node")``) through
``from_onnx`` and each backend, at each case's rtol/atol.

Every failing case is listed with its reason in :mod:`onnx_node_xfails`. A listed case must
fail the way its reason says (:func:`gen_onnx_node_xfails.same_failure` of the reason derived
from the error): one that passes, or fails differently, fails the run. Pass rate::

    ONNX_CONFORMANCE_BACKENDS=jax,torch pytest tests/frontends/onnx/test_node_conformance.py -n 2 -q

The default (CI) run (:func:`default_slice`) checks ``to_jax`` on one case of every ONNX
frontend rule (the first case, in name order, of every op type's rule at the case's opset;
a passing one where there is one; ``_expanded`` variants, which never call the op's own
rule, only when the op has no rule), the first passing case of every node form
(:func:`onnx_node_cases.node_forms`: each mode, flag and optional input a case sets), one
case of every distinct xfail reason, and every :data:`SAMPLE`-th case besides; ``to_torch``
on every listed reason's first case and every :data:`SAMPLE`-th ``to_torch`` case. Each
case is converted once for both backends. ``ONNX_CONFORMANCE_BACKENDS=jax,torch`` runs the
listed backends on every case (the full conformance run whose counts docs/coverage.md
gives), and checks the node index (``onnx_node_index.json``) against the loader's cases. A
backend's own failures go in ``BACKEND_XFAILS``: one list whether it runs sliced or in full.
"""

from __future__ import annotations

import os
import re
import sys

import onnx
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from gen_onnx_node_xfails import failure_reason, same_failure  # noqa: E402
from onnx_node_cases import case_forms, case_names, case_ops, node_cases, node_forms, node_ops, run_case  # noqa: E402
from onnx_node_xfails import BACKEND_XFAILS, XFAILS  # noqa: E402

_CHOSEN = [b for b in os.environ.get("ONNX_CONFORMANCE_BACKENDS", "").split(",") if b]
#: Backend -> every how many cases (in name order) the default run adds to its
#: per-rule and per-reason cases. The same step for both: a sampled case is converted once
#: for the two backends. (``to_jax`` every 12th ran 110 more cases, ~10 CPU s, whose rules
#: the others already reach.)
SAMPLE = {"jax": 24, "torch": 24}


def expected_reason(name: str, backend: str) -> str:
    """The listed reason ``name`` fails on ``backend`` ("" when it passes there)."""
    return BACKEND_XFAILS.get(backend, {}).get(name, XFAILS.get(name, ""))


def rule_units(name: str) -> set[tuple]:
    """The ONNX → JAX rules case ``name``'s top-level nodes use: ``(domain, op_type, rule)``
    at the model's opset for the node's domain (nodes with no rule: none)."""
    from converter.frontends.onnx.registry import ONNX_RULES

    out = set()
    for key in case_ops(name):
        if key in ONNX_RULES:  # `in`, not `get`: collection must not count as coverage
            out.add((key[0], key[1], ONNX_RULES._rules[key]))
    return out


def default_slice(backend: str) -> set[str]:
    """The cases ``backend`` runs on by default (see the module docstring)."""
    names = case_names()
    chosen = set(names[:: SAMPLE[backend]])
    first_reason: dict[str, str] = {}
    for name in names:
        reason = expected_reason(name, backend)
        if reason:
            first_reason.setdefault(reason, name)
    chosen |= set(first_reason.values())
    if backend == "jax":
        best: dict[tuple, str] = {}
        for name in names:
            expanded = "_expanded" in name
            for unit in rule_units(name):
                have = best.get(unit)
                rank = (expanded, bool(expected_reason(name, backend)))
                if have is None or rank < (("_expanded" in have), bool(expected_reason(have, backend))):
                    best[unit] = name
        chosen |= set(best.values())
        forms: dict[str, str] = {}
        for name in names:
            if "_expanded" not in name and not expected_reason(name, backend):
                for form in case_forms(name):
                    forms.setdefault(form, name)
        chosen |= set(forms.values())
    return chosen


def _params():
    names = case_names()
    chosen = {b: set(names) for b in _CHOSEN} or {b: default_slice(b) for b in SAMPLE}
    for name in names:  # a case's backends in a row: it is converted once
        marks = [pytest.mark.xla_defaults] if _needs_xla_defaults(name) else []
        for backend in (b for b, cases in chosen.items() if name in cases):
            yield pytest.param(name, backend, id=f"{backend}-{name}", marks=marks)


def _needs_xla_defaults(name: str) -> bool:
    """Cases compiled at XLA's default settings rather than the suite's fast ones
    (:mod:`tests.xla_fast`): casts to the FNUZ float8 types, which the classic elemental
    emitters of the fast settings convert -0.0 to NaN (the types' only NaN pattern, 0x80)
    where XLA's default emitters give 0, as the ONNX reference does."""
    return "FNUZ" in name


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("name", "backend"), list(_params()))
def test_node(name: str, backend: str) -> None:
    reason = expected_reason(name, backend)
    if not reason:
        run_case(name, backend)
        return
    try:
        run_case(name, backend)
    except Exception as e:  # noqa: BLE001 - compared with the listed reason below
        actual = failure_reason(name, e)
        if not same_failure(reason, actual):
            pytest.fail(
                f"{name} on {backend} fails differently from its listed reason:\n"
                f"  listed: {reason}\n  now: {actual}"
            )
        pytest.xfail(reason)
    pytest.fail(f"{name} on {backend} passes but is listed in onnx_node_xfails.py ({reason!r}): remove it")


def test_xfail_list_names_real_cases() -> None:
    """Every xfail entry names an existing case (no stale entries)."""
    names = set(case_names())
    stale = sorted(
        n for backend in ({"": XFAILS} | BACKEND_XFAILS).values() for n in backend if n not in names
    )
    assert not stale, stale


def test_default_slice_runs_every_rule_and_every_reason() -> None:
    """The default slice has a case of every rule the node tests reach, a non-expanded one
    where there is one, and of every listed reason on each backend; the same cases in every
    run."""
    names = case_names()
    jax_slice = default_slice("jax")
    assert jax_slice == default_slice("jax")
    reachable = set().union(*(rule_units(n) for n in names))
    covered = set().union(*(rule_units(n) for n in jax_slice))
    assert covered == reachable, sorted(u[:2] for u in reachable - covered)
    for backend in SAMPLE:
        sliced = default_slice(backend)
        reasons = {expected_reason(n, backend) for n in names} - {""}
        assert reasons <= {expected_reason(n, backend) for n in sliced}
    assert {"test_leakyrelu", "test_selu", "test_prelu_broadcast"} <= jax_slice  # not only `_expanded`
    passing = [n for n in names if "_expanded" not in n and not expected_reason(n, "jax")]
    forms = set().union(*(case_forms(n) for n in passing))
    assert forms == set().union(*(case_forms(n) for n in jax_slice if n in passing))
    assert "ai.onnx.preview.training::Momentum[alpha,beta,mode=nesterov,norm_coefficient](11111)" in forms


def test_index_matches_the_loader() -> None:
    """``onnx_node_index.json`` (what collection reads instead of making every case) names
    exactly the loader's cases, with each case's operators (a case its indexed module does not
    make fails its own test: :func:`onnx_node_cases.load_case` raises)."""
    import onnx_node_cases

    if not _CHOSEN:  # making every case takes ~20 s; a case its index entry misnames fails anyway
        pytest.skip("checked in the full run (ONNX_CONFORMANCE_BACKENDS=...) and by regenerating the index")
    index = onnx_node_cases._index()
    if index is None:
        pytest.skip(
            f"onnx_node_index.json is not for onnx {onnx.__version__}: regenerate it (see onnx_node_cases)"
        )
    cases = node_cases()
    assert sorted(index) == sorted(cases)
    wrong = [n for n, c in cases.items() if [[list(op) for op in node_ops(c)], node_forms(c)] != index[n][1:]]
    assert not wrong, wrong[:10]


def test_failure_reasons_carry_no_machine_paths() -> None:
    for listed in (XFAILS, *BACKEND_XFAILS.values()):
        bad = sorted(n for n, r in listed.items() if re.search(r"[\\/]\S*\.py|\.py:\d", r))
        assert not bad, bad
