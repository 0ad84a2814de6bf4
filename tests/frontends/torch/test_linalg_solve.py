"""Solve, inverse, determinant, pseudo-inverse and matrix-exponential ATen rules
(``frontends/torch/ops/linalg_solve.py``) against eager torch, and ``with_effects`` (the
runtime error checks ``torch.export`` orders with effect tokens)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from converter.frontends.torch import export
from torch.export.graph_signature import InputKind, OutputKind

import converter
from converter.tools.validate import as_numpy

torch.manual_seed(0)
TOL = dict(rtol=1e-4, atol=1e-5)


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def test_with_effects_error_check_is_threaded():
    """``linalg.inv`` exports as ``linalg_inv_ex`` + ``with_effects(token,
    aten._linalg_check_errors, info)`` with a TOKEN input and output; the converted module
    takes only the user input and returns only the user output."""
    ep = export(Fn(torch.linalg.inv), (torch.randn(3, 3),))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert torch.ops.higher_order.with_effects in targets
    effect = next(n for n in ep.graph.nodes if n.target is torch.ops.higher_order.with_effects)
    assert effect.args[1] is torch.ops.aten._linalg_check_errors.default
    assert [s.kind for s in ep.graph_signature.input_specs] == [InputKind.TOKEN, InputKind.USER_INPUT]
    assert OutputKind.TOKEN in [s.kind for s in ep.graph_signature.output_specs]
    module = converter.from_torch(ep)
    assert [s.shape for s in module.signature.inputs] == [(3, 3)]
    assert len(module.signature.outputs) == 1
    a = torch.randn(2, 3, 3) + 3 * torch.eye(3)
    for sample in (a[0], a[1]):
        np.testing.assert_allclose(module.to_jax()(sample.numpy()), torch.linalg.inv(sample).numpy(), **TOL)
    with torch.no_grad():
        np.testing.assert_allclose(module.to_torch()(a[0]).numpy(), torch.linalg.inv(a[0]).numpy(), **TOL)


def test_error_checking_ops_convert(check):
    a = torch.randn(4, 4) + 4 * torch.eye(4)
    b = torch.randn(4, 2)
    spd = a @ a.T
    check(
        lambda a, b, s: (
            torch.linalg.inv(a),
            torch.linalg.solve(a, b),
            torch.linalg.cholesky(s),
            torch.linalg.lu_factor(a)[0],
        ),
        a,
        b,
        spd,
        ops=["aten.linalg_inv_ex.default", "aten._linalg_solve_ex.default"],
        **TOL,
    )


def test_inv_ex_info(check):
    a = torch.randn(3, 4, 4)
    a[2, 1] = 0.0  # singular: a zero row
    check(lambda a: torch.linalg.inv_ex(a)[1], a, ops="aten.linalg_inv_ex.default")
    check(lambda a: torch.linalg.inv_ex(a)[0][:2], a, ops="aten.linalg_inv_ex.default", **TOL)


@pytest.mark.parametrize("left", [True, False])
def test_solve_ex_shapes(check, left):
    a = torch.randn(2, 4, 4)
    for b in (
        torch.randn(4),
        torch.randn(2, 4),
        torch.randn(3, 1, 4, 2) if left else torch.randn(3, 1, 2, 4),
    ):
        if b.ndim < 3 and not left:
            continue
        check(
            lambda a, b: torch.linalg.solve_ex(a, b, left=left),
            a,
            b,
            ops="aten._linalg_solve_ex.default",
            **TOL,
        )


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(check, upper, left, unit):
    a = torch.randn(2, 4, 4) + 4 * torch.eye(4)
    b = torch.randn(4, 3) if left else torch.randn(3, 4)
    check(
        lambda a, b: torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit),
        a,
        b,
        ops="aten.linalg_solve_triangular.default",
        **TOL,
    )


@pytest.mark.parametrize("transpose", [False, True])
def test_triangular_solve(check, transpose):
    a = torch.randn(2, 4, 4) + 4 * torch.eye(4)
    b = torch.randn(4, 3)
    check(
        lambda b, a: torch.triangular_solve(b, a, upper=False, transpose=transpose),
        b,
        a,
        ops="aten.triangular_solve.default",
        **TOL,
    )


def test_det_slogdet_logdet(check):
    a = torch.randn(4, 3, 3)
    a[1] = a[1] * torch.tensor([1.0, 1.0, -1.0])  # one of each sign likely
    a[3, 2] = 0.0  # singular: a zero row gives an exactly zero pivot
    check(
        lambda a: (
            torch.linalg.det(a),
            torch.linalg.det(a[0]),  # unbatched: pivots of rank 1
            *torch.linalg.slogdet(a[:3]),
            torch.linalg.slogdet(a[:2].reshape(2, 1, 3, 3)).sign,  # two batch dims
            torch.logdet(a[:3]),
        ),
        a,
        ops=["aten._linalg_det.default", "aten._linalg_slogdet.default"],
        **TOL,
    )
    check(lambda a: torch.linalg.slogdet(a[3:]), a, ops="aten._linalg_slogdet.default", **TOL)  # (0, -inf)


@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv(check, hermitian):
    x = torch.randn(2, 5, 3)
    a = x @ x.mT if hermitian else x  # rank 3 (of 5): small singular values cut
    check(
        lambda a: torch.linalg.pinv(a, hermitian=hermitian), a, ops="aten.linalg_pinv.atol_rtol_tensor", **TOL
    )
    check(
        lambda a: torch.linalg.pinv(a, atol=0.5, hermitian=hermitian),
        a,
        ops="aten.linalg_pinv.atol_rtol_tensor",
        **TOL,
    )
    check(lambda a: torch.linalg.pinv(a, rtol=0.3, hermitian=hermitian), a, **TOL)


def test_matrix_exp_bfloat16_computes_in_float32():
    # bfloat16 is computed in float32 and rounded once. Eager torch's own
    # bfloat16 matrix_exp overflows to inf on these inputs, so the float64 result is the bar.
    a = (torch.randn(2, 4, 4) * 0.3).bfloat16()
    module = converter.from_torch(export(Fn(torch.linalg.matrix_exp), (a,)))
    ref = torch.linalg.matrix_exp(a.double()).numpy()
    for got in (module.to_jax()(as_numpy(a)), module.to_torch()(a)):
        got = np.asarray(got.float() if isinstance(got, torch.Tensor) else got, np.float64)
        np.testing.assert_allclose(got, ref, rtol=1.6e-2, atol=1e-2)


#: 1-norms inside each of ATen's buckets (degree 1, 2, 4, 8, 12, 18 and 18 with squaring) in
#: float32 and float64 (a norm of 0.04 puts float64 on the degree-8 polynomial).
_EXPM_NORMS = {
    torch.float32: [5e-8, 3e-4, 0.03, 0.4, 1.2, 2.5, 40.0],
    torch.float64: [1e-16, 1e-8, 2e-4, 0.04, 0.2, 0.9, 40.0],
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex128])
def test_matrix_exp(check, dtype):
    # every polynomial of ATen's Taylor scheme, at torch's own accuracy (float64 within 1e-13)
    norms = _EXPM_NORMS[torch.float64 if dtype == torch.complex128 else dtype]
    g = torch.Generator().manual_seed(0)
    a = torch.randn(len(norms), 4, 4, generator=g, dtype=dtype)
    a = a / a.abs().sum(-2).amax(-1)[:, None, None] * torch.tensor(norms, dtype=torch.float64)[:, None, None]
    tol = {"rtol": 2e-6, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-13, "atol": 1e-15}
    check(torch.linalg.matrix_exp, a, ops="aten.linalg_matrix_exp.default", **tol)


def test_matrix_exp_non_finite_and_1x1(check):
    # a NaN or inf entry makes the whole matrix NaN, as torch; 1 x 1 matrices are exp. And the
    # degree-2 polynomial I + A + A^2 / 2 at a norm just inside its float32 bucket: for
    # [[p, q], [0, p]] its corner is q (1 + p), and a wrong A^2 term moves it by rel ~p
    # (the random matrices of test_matrix_exp keep that term under their atol)
    p, q = 3e-4, 2.9e-4
    a = torch.tensor(
        [
            [[1.0, float("inf")], [0.0, 1.0]],
            [[1.0, float("nan")], [0.0, 1.0]],
            [[0.5, 0], [0, 1]],
            [[p, q], [0, p]],
        ]
    )
    check(
        lambda x, y: (torch.linalg.matrix_exp(x), torch.linalg.matrix_exp(y)),
        a,
        torch.tensor([[[88.0]], [[-3.0]]]),
        rtol=1e-6,
        atol=0,
    )


def test_pinv_of_an_empty_matrix():
    """The pseudo-inverse of a ``(..., m, 0)`` batch is zeros ``(..., 0, m)``, as torch's."""
    from converter.frontends.torch.ops.linalg_solve import linalg_pinv

    from tests.frontends.torch.conftest import check_rule

    check_rule(linalg_pinv, torch.ops.aten.linalg_pinv.atol_rtol_tensor, torch.zeros(2, 3, 0))


#: 1-norms just below the top of each of ATen's buckets (degree 1, 2, 4, 8, 12, 18, then 18
#: with squaring), where the next lower polynomial is far from the value: a bucket bound
#: moved up sends such a norm to a polynomial whose truncation error shows
_EXPM_BUCKET_TOPS = {
    torch.float32: [1e-7, 5.9e-4, 0.05, 0.57, 1.45, 2.4, 2.99, 6.0],
    torch.float64: [2e-16, 2.5e-8, 3.3e-4, 0.049, 0.29, 1.08, 2.0],
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matrix_exp_at_the_top_of_each_norm_bucket(dtype):
    """The rule on matrices of the dtype itself (``test_matrix_exp``'s float32 case is scaled
    by float64 norms, so it runs in float64): each norm just inside its bucket's upper bound,
    against torch's own Taylor scheme at about its rounding."""
    from converter.frontends.torch.ops.linalg_expm import linalg_matrix_exp

    from tests.frontends.torch.conftest import check_rule

    norms = _EXPM_BUCKET_TOPS[dtype]
    g = torch.Generator().manual_seed(1)
    a = torch.randn(len(norms), 3, 3, generator=g, dtype=dtype)
    a = a / a.abs().sum(-2).amax(-1)[:, None, None] * torch.tensor(norms, dtype=dtype)[:, None, None]
    if dtype == torch.float32:
        # past the last threshold (3.01) T18 is scaled: exp(-4 I) halved and squared once;
        # unscaled, its cancellation leaves a relative error of 5e-5
        a = torch.cat([a, -4 * torch.eye(3)[None]])
    assert a.dtype == dtype
    tol = {"rtol": 1e-6, "atol": 1e-7} if dtype == torch.float32 else {"rtol": 2e-15, "atol": 1e-16}
    check_rule(linalg_matrix_exp, torch.ops.aten.linalg_matrix_exp.default, a, **tol)


def test_pinv_tolerances_as_torchs_get_atol_rtol():
    """``linalg_pinv``'s ``(atol, rtol)``, as torch documents them: ``rtol`` defaults to
    ``eps * max(m, n)`` of the last two dims (``eps`` of the real dtype), or to 0 when only
    a positive ``atol`` is given (``atol=0`` keeps the default); ``atol`` defaults to 0."""
    from converter.frontends.torch.ops.linalg_solve import _pinv_tolerances

    eps32, eps64 = float(np.finfo(np.float32).eps), float(np.finfo(np.float64).eps)
    for a, atol, rtol, want in (
        (np.zeros((1, 5, 3), np.float32), None, None, (0.0, 5 * eps32)),
        (np.zeros((2, 4), np.complex64), None, None, (0.0, 4 * eps32)),
        (np.zeros((3, 6), np.float64), None, None, (0.0, 6 * eps64)),
        (np.zeros((7, 2, 3), np.float32), 0.0, None, (0.0, 3 * eps32)),
        (np.zeros((5, 3), np.float32), 0.5, None, (0.5, 0.0)),
        (np.zeros((5, 3), np.float32), None, 0.25, (0.0, 0.25)),
        (np.zeros((5, 3), np.float32), 0.5, 0.25, (0.5, 0.25)),
    ):
        got = [float(t) for t in _pinv_tolerances(a, atol, rtol)]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, err_msg=f"{a.shape} {a.dtype} {atol} {rtol}")
