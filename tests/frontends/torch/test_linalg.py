"""Matrix-product ATen rules (``frontends/torch/ops/linalg.py``) against eager torch,
float32 within 1e-5 thanks to ``Precision.HIGHEST``."""

from __future__ import annotations

import pytest
import torch

torch.manual_seed(0)


def test_mm_bmm_addmm(check):
    a, b, bias = torch.randn(8, 32), torch.randn(32, 16), torch.randn(16)
    ba, bb = torch.randn(3, 8, 32), torch.randn(3, 32, 16)

    def fn(a, b, bias, ba, bb):
        return (
            a @ b,
            torch.bmm(ba, bb),
            torch.addmm(bias, a, b),
            torch.addmm(bias, a, b, beta=0.5, alpha=2.0),
            torch.nn.functional.linear(a, b.t(), bias),
            torch.matmul(ba, b),
        )

    check(
        fn,
        a,
        b,
        bias,
        ba,
        bb,
        ops=["aten.mm.default", "aten.bmm.default", "aten.addmm.default"],
        rtol=1e-5,
        atol=1e-5,
    )  # atol: outputs of size ~30 from 32-term sums carry float32 rounding of ~2e-6


def test_addmm_beta_zero_ignores_nan_bias(check):
    a, b = torch.randn(4, 5), torch.randn(5, 3)
    bias = torch.full((4, 3), float("nan"))
    check(lambda a, b, c: torch.addmm(c, a, b, beta=0.0), a, b, bias, ops="aten.addmm.default", rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16, torch.int64])
def test_mm_dtypes(check, dtype):
    a = (torch.randn(6, 7) * 4).to(dtype)
    b = (torch.randn(7, 5) * 4).to(dtype)
    tol = {torch.float16: 2e-3, torch.bfloat16: 1e-2}.get(dtype, 1e-6)
    check(lambda a, b: a @ b, a, b, ops="aten.mm.default", rtol=tol, atol=tol)


def test_integer_products_truncate_float_scalars(check):
    """ATen converts ``alpha``/``beta`` to the integer dtype first: 0.6 → 0, 2.6 → 2."""
    bias, m, v = torch.randint(-9, 9, (5,)), torch.randint(-9, 9, (5, 10)), torch.randint(-9, 9, (10,))

    def fn(c, m, v):
        return torch.addmv(c, m, v, beta=0.2, alpha=0.6), torch.addmv(c, m, v, beta=1.7, alpha=2.6)

    check(fn, bias, m, v, ops="aten.addmv.default")


def test_vector_products(check):
    m, v, w = torch.randn(4, 6), torch.randn(6), torch.randn(6)
    check(lambda m, v, w: (m @ v, v @ w, torch.einsum("ij,j->i", m, v)), m, v, w, rtol=1e-5)


def test_addbmm(check):
    bias, a, b = torch.randn(4, 5), torch.randn(3, 4, 6), torch.randn(3, 6, 5)
    fn = lambda c, a, b: (torch.addbmm(c, a, b), torch.addbmm(c, a, b, beta=0.5, alpha=-2))  # noqa: E731
    check(fn, bias, a, b, ops="aten.addbmm.default", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
def test_cdist(check, p):
    a, b = torch.randn(2, 5, 3), torch.randn(2, 4, 3)
    a[0, 0] = b[0, 0]  # a zero distance
    check(lambda a, b: torch.cdist(a, b, p=p), a, b, ops="aten._cdist_forward.default", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("p", [1.0, 2.0, float("inf")])
def test_pdist(check, p):
    check(
        lambda a: torch.nn.functional.pdist(a, p),
        torch.randn(5, 3),
        ops="aten._pdist_forward.default",
        rtol=1e-5,
    )


def test_grouped_mm_of_experts(check):
    """Mixture-of-experts grouped products: ATen's ``_grouped_mm`` and transformers' custom
    ``grouped_mm_fallback`` (what Mixtral-style models export with on CPU): rows in groups of
    ``offs``, an empty group, rows past the last group 0 (the fallback's zeros)."""
    from transformers.integrations import moe  # noqa: F401 - registers transformers::grouped_mm_fallback

    x, w = torch.randint(-3, 4, (7, 8)).float(), torch.randint(-3, 4, (3, 8, 8)).float()  # exact sums
    offs = torch.tensor([2, 2, 6], dtype=torch.int32)

    def fn(x, w, offs):  # torch.export takes ATen's float _grouped_mm only in bfloat16
        aten_mm = torch._grouped_mm(x[:6].bfloat16(), w.bfloat16(), offs=offs)
        return aten_mm, torch.ops.transformers.grouped_mm_fallback(x, w, offs)

    check(
        fn,
        x,
        w,
        offs,
        ops=["aten._grouped_mm.default", "transformers.grouped_mm_fallback.default"],
        rtol=1e-5,
        atol=1e-5,
    )


def test_int_mm_accumulates_in_int32(check):
    """``torch._int_mm``: int8 x int8 summed exactly in int32 (sums far past int8's range)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (16, 32), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (32, 8), dtype=torch.int8, generator=g)
    check(torch._int_mm, a, b, ops="aten._int_mm.default", rtol=0, atol=0)


def test_grouped_mm_bias_and_refused_forms_and_decomposed_products():
    """``grouped_mm`` called directly: a per-expert ``bias`` (torch's CPU kernel has none yet:
    against the products of each group), the forms it does not serve raise; ``mv``, ``dot``
    and ``baddbmm`` (replaced by the Core ATen decompositions) against eager torch."""
    import jax.numpy as jnp
    import numpy as np
    from converter.frontends.torch.ops import linalg as la

    from tests.frontends.torch.conftest import check_rule

    x, w = np.arange(12.0).reshape(4, 3) - 5, np.arange(18.0).reshape(2, 3, 3) / 4
    offs, bias = np.array([1, 3], np.int32), np.array([[1.0, 2, 3], [-1, -2, -3]])
    want = np.concatenate([x[:1] @ w[0] + bias[0], x[1:3] @ w[1] + bias[1], np.zeros((1, 3))])
    np.testing.assert_allclose(la.grouped_mm(jnp.asarray(x), w, offs, bias), want, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="2-D input and 3-D weights without offsets"):
        la.grouped_mm(jnp.asarray(x), w)
    with pytest.raises(NotImplementedError, match="3-D input and 3-D weights with offsets"):
        la.grouped_mm(jnp.asarray(w), w, offs)
    aten = torch.ops.aten
    a, v = torch.randn(3, 4), torch.randn(4)
    check_rule(la.mv, aten.mv.default, a, v, rtol=1e-5)
    check_rule(la.dot, aten.dot.default, v, v * 2, rtol=1e-5)
    b = torch.randn(2, 3, 4)
    check_rule(la.baddbmm, aten.baddbmm.default, a[None, :, :1], b, b.mT, beta=0.5, alpha=2, rtol=1e-5)
