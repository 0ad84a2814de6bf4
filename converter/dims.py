"""Dimension expressions: the symbolic sizes of a shape-polymorphic signature.

A dynamic dimension of a :class:`~converter.signature.LeafSpec` is ``None`` (unnamed), a
name (``"batch"``, an ONNX ``dim_param`` such as ``"batch-size"``) or a ``jax.export``
dimension expression (``"2*seq"``, ``"floordiv(n, 2)"``, ``"max(a, b)"``). This module parses
such expressions into Python :mod:`ast` trees and evaluates them: with integers (checking
concrete shapes) or with symbolic sizes (``torch.SymInt``, passing ``calls`` for ``max``/``min``).
It is pure Python: importing it loads neither MLIR nor a frontend or a backend.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

#: The functions a dimension expression may call (``jax.export``'s symbolic operations).
DIM_CALLS: Mapping[str, Callable] = {
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "max": max,
    "min": min,
}
#: The binary operators of a dimension expression.
DIM_BINOPS: Mapping[type, Callable] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


def parse_dim(text: str) -> ast.expr | None:
    """The expression tree of a ``jax.export`` dimension expression ``text`` (ints, names,
    ``+ - * // %``, unary ``-``, ``floordiv``/``mod``/``max``/``min`` calls), or None when
    ``text`` is not one. An ONNX ``dim_param`` such as ``batch-size`` is a name, not a
    subtraction: text with ``-`` directly before a name is not taken as an expression.
    Never raises."""
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        ok = (
            isinstance(node, (ast.Name, ast.Load, ast.USub, *DIM_BINOPS))
            or (isinstance(node, ast.Constant) and type(node.value) is int)
            or (isinstance(node, ast.BinOp) and type(node.op) in DIM_BINOPS)
            or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub))
            or (isinstance(node, ast.Call) and getattr(node.func, "id", None) in DIM_CALLS)
        )
        if not ok:
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and isinstance(node.right, ast.Name):
            return None  # ``batch-size``: a name with a dash
    return tree


def dim_names(tree: ast.AST) -> set[str]:
    """The dimension variables a parsed expression reads (``{"n"}`` for ``floordiv(n, 2)``;
    the called functions' names are not variables)."""
    funcs = {id(c.func) for c in ast.walk(tree) if isinstance(c, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in funcs}


def eval_dim(tree: ast.AST, env: Mapping[str, Any], calls: Mapping[str, Callable] | None = None) -> Any:
    """The value of a tree :func:`parse_dim` returned, with the variables ``env`` gives
    (ints, or symbolic sizes such as ``torch.SymInt``); ``calls`` overrides functions of
    :data:`DIM_CALLS` (``torch.sym_max`` for ``max`` of symbolic sizes).

    Raises:
        KeyError: a variable of the expression is missing from ``env``.
    """
    if isinstance(tree, ast.Constant):
        return tree.value
    if isinstance(tree, ast.Name):
        return env[tree.id]
    if isinstance(tree, ast.UnaryOp):
        return -eval_dim(tree.operand, env, calls)
    if isinstance(tree, ast.BinOp):
        return DIM_BINOPS[type(tree.op)](eval_dim(tree.left, env, calls), eval_dim(tree.right, env, calls))
    fn = (calls or {}).get(tree.func.id) or DIM_CALLS[tree.func.id]
    return fn(*(eval_dim(a, env, calls) for a in tree.args))


__all__ = ["DIM_BINOPS", "DIM_CALLS", "dim_names", "eval_dim", "parse_dim"]
