"""``validate``'s subnormal policy (docs/floating_point.md): a source run by XLA (JAX) flushes
subnormal float32/float64 values to zero, a torch source keeps them, and each target is
compared with what its source computes; ``ceil`` of the smallest positive float32
subnormal is the spec's (and torch's) 1, XLA CPU's 0."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import torch

from converter.tools import validate as V

TINY = np.finfo(np.float32).smallest_subnormal
X = np.array([TINY, -TINY, 0.5, 1.0], np.float32)


class Ceil(torch.nn.Module):
    def forward(self, x):
        return torch.ceil(x)


def _rows(report):
    return {t.target: t for t in report.targets}


def test_flush_subnormals_keeps_sign_and_normal_values():
    out = V.flush_subnormals(np.array([TINY, -TINY, np.finfo(np.float32).tiny, 0.0], np.float32))
    np.testing.assert_array_equal(out, [0.0, -0.0, np.finfo(np.float32).tiny, 0.0])
    assert list(np.signbit(out)) == [False, True, False, False]
    half = np.array([np.finfo(np.float16).smallest_subnormal], np.float16)
    assert V.flush_subnormals(half)[0] == half[0]  # XLA computes float16 in float32: kept
    assert V.count_subnormals(((X, {"k": np.float64(5e-324) * np.ones(2)}), {})) == 4


def test_jax_source_is_compared_as_xla_runs_it():
    """The JAX function gives ceil(TINY) = 0 on XLA; its inputs are flushed for every target
    (XLA sees them so), so torch and ONNX, which keep subnormals, compute the same."""
    report = V.validate(
        (jnp.ceil, (X,)), from_="jax", targets=("jax", "torch", "onnx"), inputs=((X,), {}), progress=False
    )
    assert report.passed, [(t.target, t.reason, [r.note for r in t.rows]) for t in report.targets]
    assert "flushed to zero" in report.subnormals and "2 subnormal input" in report.subnormals


def test_torch_source_keeps_subnormals_and_the_jax_target_says_why_it_differs():
    report = V.validate(
        (Ceil(), (torch.from_numpy(X),)),
        from_="torch",
        targets=("jax", "torch", "onnx"),
        inputs=((X,), {}),
        progress=False,
    )
    t = _rows(report)
    assert t["torch"].status == "passed" and t["onnx"].status == "passed"
    assert t["jax"].status == "failed"  # ceil(TINY): torch 1, XLA 0 -- a real difference
    (row,) = t["jax"].rows
    assert not row.passed and row.max_abs == 1.0
    assert "the source keeps them, this target flushes them to zero (XLA)" in row.note
    assert report.subnormals.startswith("kept") and "2 subnormal value(s)" in report.subnormals


def test_subnormal_intermediate_of_a_jax_source_names_the_policy_on_torch():
    """A subnormal computed inside the function (not an input): XLA flushes it, torch keeps
    it; the mismatch stands and the row names the cause."""

    def f(x):
        return jnp.ceil(x * np.float32(1e-39))

    ones = np.ones(3, np.float32)
    report = V.validate((f, (ones,)), from_="jax", targets=("torch",), inputs=((ones,), {}), progress=False)
    (target,) = report.targets
    assert target.status == "failed"
    assert "the source flushes them to zero (XLA), this target keeps them" in target.rows[0].note


@pytest.mark.parametrize("count,expected", [(0, "flushed to zero, as XLA"), (3, "3 subnormal input")])
def test_policy_text(count, expected):
    assert expected in V.subnormal_policy("stablehlo", count)


def test_flush_subnormals_of_complex_values_flushes_each_part():
    z = np.array([complex(TINY, 2.0), complex(1.0, -TINY), complex(TINY, -TINY)], np.complex64)
    out = V.flush_subnormals(z)
    assert out.dtype == np.complex64
    np.testing.assert_array_equal(out, np.array([2j, 1.0, 0.0], np.complex64))
    assert list(np.signbit(out.imag)) == [False, True, True]
