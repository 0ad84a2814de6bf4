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
