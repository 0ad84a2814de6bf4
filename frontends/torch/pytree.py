"""``torch.utils._pytree.TreeSpec`` → the converter's JSON tree spec."""

from __future__ import annotations

from typing import Any

from converter.signature import LEAF, TreeSpec

_STATIC_TYPES = (bool, int, float, str, type(None))


def treespec_to_json(spec: Any, leaves: list[Any] | None = None) -> TreeSpec:
    """Convert a torch TreeSpec. ``leaves`` (consumed in order) marks non-tensor leaves as
    ``static`` with their value; tensor leaves stay ``leaf``.

    Tuples, lists, dicts (and OrderedDict) map directly; namedtuples, dataclasses and
    ModelOutput-like custom nodes become dicts keyed by their field names, with their class
    name kept under ``type``.
    """
    it = iter(leaves) if leaves is not None else None
    return _convert(spec, it)


def _convert(spec: Any, it) -> TreeSpec:
    if spec.is_leaf():
        if it is None:
            return LEAF
        value = next(it)
        if isinstance(value, _STATIC_TYPES):
            return {"kind": "static", "value": value}
        return LEAF
    t = _node_class(spec)
    children = [_convert(c, it) for c in spec.children()]
    if t is tuple:
        return {"kind": "tuple", "children": children}
    if t is list:
        return {"kind": "list", "children": children}
    if t is type(None):
        return {"kind": "none"}
    keys = _keys_of(spec)
    if t is dict:
        return {"kind": "dict", "keys": keys, "children": children}
    return {"kind": "dict", "keys": keys, "children": children, "type": t.__name__}


def _node_class(spec: Any) -> type:
    """The class of a TreeSpec node: its ``type``, except for a namedtuple, whose node type
    is the ``namedtuple`` function and whose context the class (torch 2.13)."""
    t = spec.type
    return spec.context if not isinstance(t, type) and isinstance(spec.context, type) else t


def _keys_of(spec: Any) -> list:
    t, ctx = _node_class(spec), spec.context
    if hasattr(t, "_fields"):
        return list(t._fields)
    if isinstance(ctx, (list, tuple)) and all(isinstance(k, (str, int)) for k in ctx):
        return list(ctx)
    if isinstance(ctx, (list, tuple)) and ctx and isinstance(ctx[0], (list, tuple)):
        return list(ctx[0])
    if isinstance(ctx, str):
        return [ctx]
    return [str(i) for i in range(spec.num_children)]
