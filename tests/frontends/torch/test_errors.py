"""Bad input to the torch frontend and to converted functions: unsupported ops are reported
all at once with counts and source lines; wrong call shapes/dtypes name the argument."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
from converter.frontends.torch.registry import ATEN_RULES

import converter
from converter.errors import SignatureMismatchError, UnsupportedOpError


class TwoMissingOps(torch.nn.Module):
    def forward(self, x):
        a = torch.sin(x)  # first sin
        b = torch.cos(a)  # the only cos
        return torch.sin(b) + 1  # second sin


def _line_of(text: str) -> int:
    lines, start = inspect.getsourcelines(TwoMissingOps.forward)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_unsupported_ops_are_all_named_with_counts_and_lines(monkeypatch):
    for op in ("aten.sin.default", "aten.cos.default"):
        monkeypatch.delitem(ATEN_RULES._rules, op)
    with pytest.raises(UnsupportedOpError) as info:
        converter.from_torch(TwoMissingOps(), (torch.randn(3),))
    err = info.value
    assert {m.name: m.count for m in err.missing} == {"aten.cos.default": 1, "aten.sin.default": 2}
    here = __file__
    locations = {m.name: m.location for m in err.missing}
    assert locations["aten.sin.default"] == f"{here}:{_line_of('first sin')}"
    assert locations["aten.cos.default"] == f"{here}:{_line_of('the only cos')}"
    msg = str(err)
    assert "aten.sin.default (x2, first at" in msg and "aten.cos.default (x1, first at" in msg
    assert "aten.add.Tensor" not in msg  # supported ops are not listed


def test_supported_after_restoring_rules():
    fn = converter.from_torch(TwoMissingOps(), (torch.randn(3),)).to_jax()
    x = torch.randn(3)
    np.testing.assert_allclose(np.asarray(fn(x.numpy())), TwoMissingOps()(x).numpy(), rtol=1e-6, atol=1e-6)


@pytest.fixture(scope="module")
def linear_fn():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    return converter.from_torch(model, (torch.randn(3, 4),)).to_jax()


def test_wrong_shape_names_argument_and_shapes(linear_fn):
    with pytest.raises(SignatureMismatchError) as info:
        linear_fn(np.zeros((3, 5), np.float32))
    msg = str(info.value)
    assert "args[0]" in msg
    assert "expected shape [3, 4] dtype float32" in msg
    assert "got shape [3, 5] dtype float32" in msg


def test_wrong_dtype_names_argument_and_dtypes(linear_fn):
    with pytest.raises(SignatureMismatchError) as info:
        linear_fn(np.zeros((3, 4), np.int32))
    msg = str(info.value)
    assert "args[0]" in msg
    assert "expected shape [3, 4] dtype float32" in msg and "dtype int32" in msg


def test_wrong_shape_in_nested_input_names_the_path():
    class Masked(torch.nn.Module):
        def forward(self, x, extras):
            return x * extras["mask"]

    x = torch.randn(2, 3)
    fn = converter.from_torch(Masked(), (x, {"mask": torch.ones(2, 3)})).to_jax()
    ok = fn(x.numpy(), {"mask": np.ones((2, 3), np.float32)})
    np.testing.assert_allclose(np.asarray(ok), x.numpy())
    with pytest.raises(SignatureMismatchError, match=r"args\[1\]\['mask'\]"):
        fn(x.numpy(), {"mask": np.ones((2, 4), np.float32)})
