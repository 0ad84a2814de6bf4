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


def test_ldl_factor_rule_first_zero_pivot_and_pivot_test_at_its_bound():
    """``info`` names the first zero pivot (later ones leave it); Bunch–Kaufman's test
    ``|A[imax, imax]| >= alpha * rowmax`` is inclusive: a diagonal entry exactly ``alpha``
    (rowmax 1) takes a 1x1 pivot with an interchange, one ulp less a 2x2 pivot. Both as eager
    torch's LAPACK decides (the rule called directly)."""
    import jax
    from converter.frontends.torch.ops.linalg_ldl import ALPHA, linalg_ldl_factor_ex

    at = np.float32(ALPHA)
    a = torch.eye(4).repeat(3, 1, 1)
    a[0] = torch.diag(torch.tensor([1.0, 0.0, 0.0, 3.0]))
    a[1, :2, :2] = torch.tensor([[0.1, 1.0], [1.0, at]])
    a[2, :2, :2] = torch.tensor([[0.1, 1.0], [1.0, np.nextafter(at, np.float32(0))]])
    want = torch.linalg.ldl_factor_ex(a)
    assert want.info.tolist() == [2, 0, 0]
    assert want.pivots[1:, :2].tolist() == [[2, 2], [-2, -2]]
    rule = jax.jit(linalg_ldl_factor_ex)  # one compilation: the matrices one by one, no vmap
    ld, pivots, info = (np.stack(o) for o in zip(*(rule(m.numpy()) for m in a), strict=True))
    np.testing.assert_array_equal(pivots, want.pivots.numpy())
    np.testing.assert_array_equal(info, want.info.numpy())
    np.testing.assert_allclose(ld, want.LD.numpy(), **TOL)
