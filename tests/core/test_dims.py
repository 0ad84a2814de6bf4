"""converter.dims: jax.export dimension expressions parsed and evaluated."""

from __future__ import annotations

import pytest

from converter.dims import dim_names, eval_dim, parse_dim


@pytest.mark.parametrize(
    "text, env, value",
    [
        ("2*seq", {"seq": 5}, 10),
        ("floordiv(n, 2) + 1", {"n": 7}, 4),
        ("max(a, b) - mod(a, 3)", {"a": 4, "b": 9}, 8),
        ("-n + 3", {"n": 1}, 2),
    ],
)
def test_expressions_evaluate(text, env, value):
    tree = parse_dim(text)
    assert tree is not None
    assert dim_names(tree) == set(env)
    assert eval_dim(tree, env) == value


@pytest.mark.parametrize("text", ["batch-size", "x.y", "f(n)", "n ** 2", "1.5*n", "import os", "\x00"])
def test_non_expressions_are_none(text):
    assert parse_dim(text) is None


def test_calls_override_functions():
    tree = parse_dim("max(a, b)")
    assert eval_dim(tree, {"a": 1, "b": 2}, calls={"max": lambda a, b: ("max", a, b)}) == ("max", 1, 2)
    with pytest.raises(KeyError):
        eval_dim(tree, {"a": 1})


def test_floor_division_and_modulo_operators_and_min():
    """``//`` and ``%`` floor (Python's and jax.export's semantics, here on negative values
    too); ``min``; a subtraction of a constant or a call is an expression, of a name is not."""
    tree = parse_dim("n // 4 - n % 4")
    assert eval_dim(tree, {"n": 7}) == 7 // 4 - 7 % 4 == -2
    assert eval_dim(tree, {"n": -7}) == -7 // 4 - (-7 % 4) == -3
    assert eval_dim(parse_dim("min(a, b) * 3"), {"a": 4, "b": 2}) == 6
    assert eval_dim(parse_dim("n - 1"), {"n": 5}) == 4
    assert eval_dim(parse_dim("n - min(n, 2)"), {"n": 5}) == 3
    assert parse_dim("n - m") is None
    assert dim_names(parse_dim("floordiv(k, 2)")) == {"k"}
