"""The ONNX → JAX rule table, keyed by ``(domain, op_type, since_version)``.

A rule is registered for every ONNX schema version whose semantics it implements
(``since_version`` as ``onnx.defs`` lists them). A node of a model with opset ``N`` for its
domain is lowered with the rule of the schema that applies at opset ``N``: the highest
``since_version`` at or below ``N`` (``onnx.defs.get_schema(op_type, N, domain)``). When the
registry has only an older version than that schema, the node is unsupported rather than
converted with possibly different semantics.

A rule is called as ``rule(ctx, *inputs, **attributes)``: ``ctx`` is a
:class:`converter.frontends.onnx.graph.NodeContext`, ``inputs`` are ``jax.Array``/``np.ndarray``
values (``None`` for an omitted optional input; trailing omitted inputs are not passed), and
``attributes`` are the node's attributes decoded with ``onnx.helper.get_attribute_value``
(strings decoded to ``str``). It returns one value, or a tuple with one value per output
(a list is a sequence value).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import cache

import onnx.defs

from converter.registry import Registry

ONNX_RULES = Registry("ONNX → JAX")
DEFAULT_DOMAIN = "ai.onnx"
_DOMAIN_ALIASES = {"": DEFAULT_DOMAIN}


def canonical_domain(domain: str) -> str:
    """``""`` and ``"ai.onnx"`` are the same (default) domain."""
    return _DOMAIN_ALIASES.get(domain, domain)


@cache
def _all_schema_versions() -> dict[tuple[str, str], tuple[int, ...]]:
    """``(onnx.defs domain, op_type)`` → its ``since_version`` values, ascending: one pass over
    ``onnx.defs`` (each ``get_all_schemas_with_history()`` call builds every schema's Python
    object, ~6 ms; a pass per rule made importing the rules cost ~1 CPU s)."""
    out: dict[tuple[str, str], set[int]] = defaultdict(set)
    for s in onnx.defs.get_all_schemas_with_history():
        out[(s.domain, s.name)].add(s.since_version)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def schema_versions(op_type: str, domain: str = DEFAULT_DOMAIN) -> tuple[int, ...]:
    """Every ``since_version`` of ``op_type`` in ``onnx.defs``, ascending."""
    d = "" if domain == DEFAULT_DOMAIN else domain
    return _all_schema_versions().get((d, op_type), ())


def onnx_op(op_type: str, since: int, *, until: int | None = None, domain: str = DEFAULT_DOMAIN) -> Callable:
    """Decorator: register a rule for every schema version of ``op_type`` from ``since`` up to
    ``until`` (inclusive; default: every later version, i.e. the later versions only widened
    the types). Versions are the ``since_version`` values of ``onnx.defs``.

    Raises:
        ValueError: ``since`` is not a schema version of ``op_type``.
        converter.registry.RegistryCollisionError: a version already has a rule.
    """
    versions = schema_versions(op_type, domain)
    if since not in versions:
        raise ValueError(f"{domain}::{op_type} has no schema version {since} (has {versions})")
    keep = [v for v in versions if v >= since and (until is None or v <= until)]
    return ONNX_RULES.register(*((domain, op_type, v) for v in keep))


_BY_OP: dict[tuple[str, str], list[int]] | None = None


def implemented_versions(op_type: str, domain: str = DEFAULT_DOMAIN) -> list[int]:
    """The since_versions of ``op_type`` that have a rule, ascending."""
    by_op: dict[tuple[str, str], list[int]] = defaultdict(list)
    for d, op, v in ONNX_RULES.keys():
        by_op[(d, op)].append(v)
    return sorted(by_op.get((canonical_domain(domain), op_type), []))


def lookup(op_type: str, domain: str, opset: int) -> tuple[int, Callable | None]:
    """The schema version that applies to ``op_type`` at ``opset`` and its rule (None when the
    registry has no rule for exactly that version)."""
    domain = canonical_domain(domain)
    d = "" if domain == DEFAULT_DOMAIN else domain
    try:
        version = onnx.defs.get_schema(op_type, opset, d).since_version
    except Exception:  # noqa: BLE001 - unknown op or domain: fall back to what we implement
        have = [v for v in implemented_versions(op_type, domain) if v <= opset]
        version = have[-1] if have else opset
    return version, ONNX_RULES.get((domain, op_type, version))


def schema_function(op_type: str, domain: str, opset: int):
    """The ``OpSchema`` of ``op_type`` at ``opset`` when ONNX defines it by a function body
    (a plain or context-dependent ``FunctionProto``), else None."""
    d = "" if canonical_domain(domain) == DEFAULT_DOMAIN else domain
    try:
        schema = onnx.defs.get_schema(op_type, opset, d)
    except Exception:  # noqa: BLE001 - unknown op
        return None
    if schema.has_function or schema.has_context_dependent_function:
        return schema
    return None


def function_body(schema, opset: int, node, input_types) -> onnx.FunctionProto:
    """The function body ONNX defines for ``node`` (``OpSchema.get_function_with_opset_version``,
    or the context-dependent builder fed ``input_types``), for the highest function opset at or
    below ``opset``."""
    plain = [v for v in schema.function_opset_versions if v <= opset]
    ctxdep = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    fn = onnx.FunctionProto()
    if ctxdep and (not plain or max(ctxdep) >= max(plain)):
        data = schema.get_context_dependent_function_with_opset_version(
            max(ctxdep), node.SerializeToString(), [t.SerializeToString() for t in input_types]
        )
    elif plain:
        data = schema.get_function_with_opset_version(max(plain))
    else:
        raise NotImplementedError(f"{schema.name} has no function body at or below opset {opset}")
    fn.ParseFromString(data)
    return fn
