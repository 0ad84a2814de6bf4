"""Bunch–Kaufman LDL rules (``frontends/torch/ops/linalg_ldl.py``) against eager torch, which
runs LAPACK ``?sytrf``/``?sytrs``: the compact factor and pivots must match exactly (same
pivot decisions), the solutions within float32 tolerance."""

from __future__ import annotations

import numpy as np
import torch

torch.manual_seed(0)
TOL = dict(rtol=1e-4, atol=1e-5)


def sym(*shape):
    a = torch.randn(*shape)
    return a + a.mT


def _pivots(fn, *args):
    with torch.no_grad():
        return fn(*args)[1]


def test_ldl_factor_with_1x1_and_2x2_pivots(check):
    a = sym(4, 6, 6)
    a[0] = torch.tensor([[0.0, 1.0], [1.0, 0.0]]).repeat(3, 3) + torch.diag(torch.arange(6.0)) * 1e-3
    a[1].fill_diagonal_(0.0)  # zero diagonal: 2x2 pivots
    a[2] = a[2] + 20 * torch.eye(6)  # diagonally dominant: 1x1 pivots, no interchange
    pivots = _pivots(torch.linalg.ldl_factor_ex, a)
    assert (pivots < 0).any() and (pivots > 0).any(), pivots  # both block sizes are exercised
    check(lambda a: torch.linalg.ldl_factor_ex(a), a, ops="aten.linalg_ldl_factor_ex.default", **TOL)


def test_ldl_factor_reads_lower_triangle_and_info(check):
    a = sym(5, 5)
    junk = a + torch.triu(torch.full((5, 5), 5.0), 1)
    check(lambda a: torch.linalg.ldl_factor_ex(a), junk, ops="aten.linalg_ldl_factor_ex.default", **TOL)
    zero = torch.zeros(2, 3, 3)
    zero[1] = torch.diag(torch.tensor([1.0, 0.0, 2.0]))  # an exactly zero pivot: info = 2
    info = torch.linalg.ldl_factor_ex(zero)[2]
    assert info.tolist() == [1, 2]
    check(lambda a: torch.linalg.ldl_factor_ex(a)[1:], zero, ops="aten.linalg_ldl_factor_ex.default")


def test_ldl_factor_last_pivot_smaller_than_earlier_multipliers(check):
    """The last column has nothing below its diagonal: its pivot is kept however small it is
    next to the multipliers already stored in the factor (here d = 0.05 after L[1, 0] = 0.5)."""
    a = torch.tensor([[1.0, 0.5], [0.5, 0.3]])
    assert _pivots(torch.linalg.ldl_factor_ex, a).tolist() == [1, 2]
    check(lambda a: torch.linalg.ldl_factor_ex(a), a, ops="aten.linalg_ldl_factor_ex.default", **TOL)


def test_ldl_solve(check):
    a = sym(3, 6, 6)
    a[0].fill_diagonal_(0.0)
    ld, piv = torch.linalg.ldl_factor(a)
    b = torch.randn(3, 6, 2)
    check(
        lambda ld, piv, b: torch.linalg.ldl_solve(ld, piv, b),
        ld,
        piv,
        b,
        ops="aten.linalg_ldl_solve.default",
        **TOL,
    )
    x = torch.linalg.ldl_solve(ld, piv, b)
    np.testing.assert_allclose((a @ x).numpy(), b.numpy(), rtol=1e-3, atol=1e-4)  # it does solve


def test_ldl_through_to_torch_and_empty_batches():
    """The torch backend runs the while loops too; empty batches (no loop) on both targets."""
    from converter.frontends.torch import export

    import converter

    class Fn(torch.nn.Module):
        def forward(self, a, b):
            ld, piv, info = torch.linalg.ldl_factor_ex(a)
            return ld, piv, info, torch.linalg.ldl_solve(ld, piv, b)

    for shape in ((2, 4, 4), (0, 2, 2)):
        a, b = sym(*shape), torch.randn(*shape[:-1], 3)
        a.reshape(-1, *shape[-2:])[:1].diagonal(dim1=-2, dim2=-1).zero_()  # 2x2 pivots
        module = converter.from_torch(export(Fn(), (a, b)))
        want = Fn()(a, b)
        with torch.no_grad():
            outs = (module.to_torch()(a, b), module.to_jax()(a.numpy(), b.numpy()))
        for got in outs:
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(np.asarray(g), w.numpy(), **TOL)


def test_complex_ldl_raises():
    """``?sytrf``/``?hetrf`` of complex matrices are not reproduced: both rules refuse them."""
    import jax.numpy as jnp
    import pytest
    from converter.frontends.torch.ops.linalg_ldl import linalg_ldl_factor_ex, linalg_ldl_solve

    a = jnp.eye(2, dtype=jnp.complex64)
    with pytest.raises(NotImplementedError, match="LDL factorization of a complex matrix"):
        linalg_ldl_factor_ex(a)
    with pytest.raises(NotImplementedError, match="LDL solve of a complex matrix"):
        linalg_ldl_solve(a, jnp.zeros(2, jnp.int32), a)


def test_ldl_factor_rule_info_is_the_first_of_several_zero_pivots():
    """``info`` names the first zero pivot; later zero pivots leave it (rule called directly,
    against eager torch)."""
    import jax.numpy as jnp
    from converter.frontends.torch.ops.linalg_ldl import linalg_ldl_factor_ex

    for a in (torch.diag(torch.tensor([1.0, 0.0, 0.0, 3.0])), torch.diag(torch.tensor([0.0, 2.0, 0.0]))):
        got = linalg_ldl_factor_ex(jnp.asarray(a.numpy()))
        want = torch.linalg.ldl_factor_ex(a)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(g), w.numpy())
