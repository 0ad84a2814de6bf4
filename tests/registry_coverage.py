"""Which rules of every conversion direction the test run exercised.

Every direction's rules live in one :class:`converter.registry.Registry` (the frontends'
ATen → JAX and ONNX → JAX, the backends' StableHLO → JAX / torch / ONNX), and every rule is
reached through ``Registry.get``. :func:`install` makes ``get`` hand out the rule wrapped so
that a key is recorded when its rule is *called* -- not when it is only looked up (the ONNX
frontend's op check looks up every node's rule before any runs; a shape op on symbolic
values is evaluated without its rule), and not when a test has put another function in its
place (``monkeypatch.setitem(REGISTRY._rules, key, fake)``): only the function
``Registry.add`` registered counts. The root
conftest installs it, sends each xdist worker's keys to the controller, and at the end of
the default run (``pytest`` over ``testpaths`` with no selection) fails the run when a rule
had no case (:func:`missing`). ``REGISTRY_COVERAGE=1`` checks any run, ``=0`` none.

The unit is a registry key, except for ONNX → JAX, whose keys are
``(domain, op_type, since_version)`` with one rule function usually registered for a range
of versions: there the unit is the op type's rule function (each distinct rule of an op
type runs at least once; the versions it spans share its code).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable

from converter.registry import Registry

HITS: set[tuple[str, Hashable]] = set()
_ORIGINAL_GET = Registry.get
_ORIGINAL_ADD = Registry.add
#: (registry name, key) → the rule ``Registry.add`` registered (since :func:`install`)
_REGISTERED: dict[tuple[str, Hashable], Callable] = {}
#: (registry name, key) → (rule, its recording wrapper), so ``get`` hands out one wrapper
_WRAPPERS: dict[tuple[str, Hashable], tuple[Callable, Callable]] = {}


def _recording_add(self: Registry, key: Hashable, rule: Callable) -> None:
    _ORIGINAL_ADD(self, key, rule)
    _REGISTERED[(self.name, key)] = rule


def _recording_get(self: Registry, key: Hashable):
    rule = _ORIGINAL_GET(self, key)
    if rule is None or _REGISTERED.get((self.name, key)) is not rule:
        return rule  # none, or a stand-in a test put in the table: never counted
    cached = _WRAPPERS.get((self.name, key))
    if cached is not None and cached[0] is rule:
        return cached[1]
    hit = (self.name, key)

    @functools.wraps(rule)
    def recorded(*args, **kwargs):
        HITS.add(hit)  # the rule runs (a lookup alone is no case)
        return rule(*args, **kwargs)

    _WRAPPERS[hit] = (rule, recorded)
    return recorded


def install() -> None:
    """Record in :data:`HITS` every key whose registered rule is called (see the module
    docstring). Call it before the rule modules are imported: a rule added earlier
    is never counted (its unit then shows as missing, never as falsely covered)."""
    Registry.add = _recording_add
    Registry.get = _recording_get


def registries() -> list[Registry]:
    """Every direction's registry, with all its rules imported."""
    import converter.backends.jax  # noqa: F401 - importing a package registers its rules
    import converter.backends.onnx  # noqa: F401
    import converter.backends.torch  # noqa: F401
    import converter.frontends.onnx  # noqa: F401
    import converter.frontends.torch  # noqa: F401
    from converter.backends.jax.registry import JAX_RULES
    from converter.backends.onnx.registry import ONNX_RULES as ONNX_BACKEND
    from converter.backends.torch.registry import TORCH_RULES
    from converter.frontends.onnx.registry import ONNX_RULES as ONNX_FRONTEND
    from converter.frontends.torch.registry import ATEN_RULES

    return [ATEN_RULES, ONNX_FRONTEND, JAX_RULES, TORCH_RULES, ONNX_BACKEND]


def units(registry: Registry) -> dict[str, list[Hashable]]:
    """The registry's coverage units (see the module docstring): unit name → its keys."""
    out: dict[str, list[Hashable]] = defaultdict(list)
    for key in registry.keys():
        if isinstance(key, tuple):  # ONNX → JAX: (domain, op_type, since_version)
            domain, op, _ = key
            rule = registry._rules[key]
            out[f"{domain}::{op} ({rule.__module__}.{rule.__qualname__})"].append(key)
        else:
            out[str(key)].append(key)
    return out


def missing(hits: Iterable[tuple[str, Hashable]]) -> dict[str, list[str]]:
    """Registry name → the units none of ``hits`` reached (empty when every rule ran)."""
    hit = {(name, _hashable(key)) for name, key in hits}  # keys from xdist workers: lists
    out = {}
    for registry in registries():
        gaps = sorted(
            unit
            for unit, keys in units(registry).items()
            if not any((registry.name, _hashable(k)) in hit for k in keys)
        )
        if gaps:
            out[registry.name] = gaps
    return out


def problems(gaps: dict[str, list[str]]) -> dict[str, list[str]]:
    """What fails the run: units without a case that :data:`KNOWN_GAPS` does not list, and
    listed units that now have a case (strict, like the xfail lists: remove them)."""
    out = {}
    for name in sorted(set(gaps) | set(KNOWN_GAPS)):
        have, known = set(gaps.get(name, ())), set(KNOWN_GAPS.get(name, ()))
        lines = [f"no case: {u}" for u in sorted(have - known)]
        lines += [f"listed in KNOWN_GAPS but now has a case: {u}" for u in sorted(known - have)]
        if lines:
            out[name] = lines
    return out


#: Whether a problem (:func:`problems`) fails the default run. False until
#: :data:`KNOWN_GAPS` holds the gaps of a complete default run (``python -m
#: tests.registry_coverage HITS.json`` prints them from a run with ``REGISTRY_HITS_FILE``);
#: until then the run prints the gaps and ``REGISTRY_COVERAGE=1`` makes them fail it.
STRICT = True

#: ATen rules of ops the Core ATen decomposition table (``torch.export.default_decompositions``)
#: replaces before any rule runs, so no ``from_torch`` conversion reaches them; they serve
#: programs decomposed with another table. Checked: each is a key of that table.
_DECOMPOSED_BEFORE_LOWERING = [
    "aten._unsafe_index_put.default",
    "aten._unsafe_view.default",
    "aten._upsample_nearest_exact1d.vec",
    "aten._upsample_nearest_exact2d.vec",
    "aten._upsample_nearest_exact3d.vec",
    "aten.adaptive_avg_pool1d.default",
    "aten.alias_copy.default",
    "aten.all.default",
    "aten.all.dim",
    "aten.all.dims",
    "aten.arange.start",
    "aten.baddbmm.default",
    "aten.bernoulli.default",
    "aten.clamp_max.Tensor",
    "aten.clamp_max.default",
    "aten.clamp_min.Tensor",
    "aten.clamp_min.default",
    "aten.diagonal_copy.default",
    "aten.dot.default",
    "aten.empty_like.default",
    "aten.expand_copy.default",
    "aten.eye.default",
    "aten.eye.m",
    "aten.fill.Scalar",
    "aten.fill.Tensor",
    "aten.floor_divide.Scalar",
    "aten.floor_divide.default",
    "aten.index_add.default",
    "aten.isfinite.default",
    "aten.logsumexp.default",
    "aten.mv.default",
    "aten.nan_to_num.default",
    "aten.new_empty.default",
    "aten.new_full.default",
    "aten.new_ones.default",
    "aten.new_zeros.default",
    "aten.ones.default",
    "aten.ones_like.default",
    "aten.reflection_pad1d.default",
    "aten.reflection_pad2d.default",
    "aten.reflection_pad3d.default",
    "aten.replication_pad1d.default",
    "aten.replication_pad2d.default",
    "aten.replication_pad3d.default",
    "aten.roll.default",
    "aten.rsub.Scalar",
    "aten.rsub.Tensor",
    "aten.select_scatter.default",
    "aten.sgn.default",
    "aten.silu.default",
    "aten.split.Tensor",
    "aten.split_with_sizes_copy.default",
    "aten.squeeze.default",
    "aten.squeeze.dim",
    "aten.squeeze_copy.default",
    "aten.squeeze_copy.dim",
    "aten.squeeze_copy.dims",
    "aten.stack.default",
    "aten.std.correction",
    "aten.sym_stride.int",
    "aten.t.default",
    "aten.t_copy.default",
    "aten.transpose.int",
    "aten.transpose_copy.int",
    "aten.tril.default",
    "aten.triu.default",
    "aten.unbind.int",
    "aten.unfold_copy.default",
    "aten.unsqueeze_copy.default",
    "aten.upsample_linear1d.vec",
    "aten.upsample_nearest1d.vec",
    "aten.upsample_nearest3d.vec",
    "aten.upsample_trilinear3d.vec",
    "aten.var.dim",
    "aten.where.Scalar",
    "aten.where.ScalarSelf",
    "aten.zeros.default",
    "aten.zeros_like.default",
]

#: ATen rules of ops the decompositions replace whatever the table: a CompositeImplicitAutograd
#: kernel (decomposed), or no result and no effect FX keeps (``_assert_async`` without a
#: message: eliminated as dead code). Each shares its rule function with a key a default-run
#: case reaches (``narrow_copy``, ``view``, ``_conj_physical``, ``_assert_async.msg``).
#: Checked by tests/core/test_registry_coverage.py::test_rules_the_decompositions_always_replace.
_REPLACED_BEFORE_LOWERING = [
    "aten._assert_async.default",
    "aten.conj_physical.default",
    "aten.narrow.default",
    "aten.reshape.default",
]

#: Rules with no case in the default run: registry name → units. The check fails for any
#: other rule without a case, and for a listed one that gains a case (remove it then).
KNOWN_GAPS: dict[str, list[str]] = {
    "ATen → JAX": _DECOMPOSED_BEFORE_LOWERING + _REPLACED_BEFORE_LOWERING,
}


def dump(hits: Iterable[tuple[str, Hashable]], path: str) -> None:
    """Add ``hits`` to the JSON list in ``path`` (created if missing)."""
    import json
    import os

    old = json.load(open(path)) if os.path.exists(path) else []
    new = {(n, json.dumps(k)) for n, k in old} | {(n, json.dumps(k)) for n, k in hits}
    with open(path, "w") as f:
        json.dump(sorted([n, json.loads(k)] for n, k in new), f)


def _hashable(key):
    """Keys come back from xdist workers with tuples as lists."""
    return tuple(key) if isinstance(key, list) else key


if __name__ == "__main__":  # print KNOWN_GAPS from a REGISTRY_HITS_FILE
    import json
    import sys

    gaps = missing((n, _hashable(k)) for n, k in json.load(open(sys.argv[1])))
    print("KNOWN_GAPS: dict[str, list[str]] = {")
    for name, found in gaps.items():
        print(f"    {name!r}: [")
        for unit in found:
            print(f"        {unit!r},")
        print("    ],")
    print("}")
