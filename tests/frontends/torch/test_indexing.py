"""Gather/scatter ATen rules (``frontends/torch/ops/indexing.py``) against eager torch."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.frontends.torch.both_targets import check_targets, check_targets_batch

torch.manual_seed(0)
X = torch.randn(4, 5, 6)
IDX = torch.tensor([[0, 2], [3, -1]])


def test_embedding(check):
    w = torch.randn(10, 3)
    ids = torch.tensor([[1, 9, 0], [4, 4, 2]])
    check(
        lambda w, i: (F.embedding(i, w), F.embedding(i, w, padding_idx=0)),
        w,
        ids,
        ops="aten.embedding.default",
    )


def test_advanced_index(check):
    i = torch.tensor([0, 3, -1])
    j = torch.tensor([[1], [3]])

    def fn(v, i, j):
        return (
            v[i],  # leading
            v[:, i],  # after a slice
            v[i, :, i],  # separated: result dims first
            v[j, i],  # broadcast index tensors
            v[:, j, i],  # adjacent after a slice
            v[..., IDX],
        )

    check(fn, X, i, j, ops="aten.index.Tensor")


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(check, accumulate):
    i = torch.tensor([0, 3, 1])

    def fn(v, vals):
        a = v.index_put((i,), vals[:3, 0:1], accumulate=accumulate)
        b = v.clone()
        b.index_put_((i, torch.tensor([1, 1, 2])), vals[:3, 0], accumulate=accumulate)
        c = v.clone()
        c[:, i] = 0.5  # broadcast scalar value
        return a, b, c

    check(fn, X, X * 3, ops="aten.index_put.default")


def test_index_put_with_mask(check):
    def fn(v):
        out = v.clone()
        out[v > 0.5] = -1.0
        out[:, v[0, :, 0] > 0] = 7.0  # a mask over a later dim
        return out

    check(fn, X)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_full_rank_mask_takes_values_in_order(check, accumulate):
    """A boolean mask over every dim takes one value per True element, in row-major order."""
    mask = torch.zeros(X.shape, dtype=torch.bool)
    mask.view(-1)[torch.tensor([1, 6, 7, 30, 71])] = True
    vals = torch.tensor([10.0, 20.0, 30.0, 40.0, 50.0])

    def fn(v, m, s):
        return torch.index_put(v, (m,), s, accumulate=accumulate)

    check(fn, X, mask, vals, ops="aten.index_put.default")


def test_index_select_gather(check):
    def fn(v, idx):
        g = torch.gather(v, 2, idx.abs().reshape(1, 2, 2).expand(4, 2, 2))
        g_small = torch.gather(v, 0, torch.tensor([[[3, 0, 1]]]))  # index smaller than v elsewhere
        return torch.index_select(v, 1, torch.tensor([4, 0, 0])), g, g_small

    check(fn, X, IDX, ops=["aten.index_select.default", "aten.gather.default"])


def test_scatter_family(check):
    index = torch.tensor([[0, 1, 2, 0], [2, 0, 1, 1]])

    def fn(v, src):
        return (
            torch.scatter(v, 0, index, src),
            torch.scatter(v, 1, index[:, :2], 9.0),
            torch.scatter_add(v, 0, index, src),
            torch.scatter(v, 0, index, src, reduce="add"),
            torch.scatter(v, 0, index, src, reduce="multiply"),
        )

    v = torch.zeros(3, 5)
    src = torch.arange(1.0, 11.0).reshape(2, 5)
    check(fn, v, src, ops=["aten.scatter.src", "aten.scatter.value", "aten.scatter_add.default"])


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(check, reduce, include_self):
    index = torch.tensor([0, 1, 0, 1, 2, 1])
    base = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    src = torch.tensor([1.0, 2.0, 3.0, 4.0, -5.0, 6.0])
    fn = lambda b, s: b.scatter_reduce(0, index, s, reduce, include_self=include_self)  # noqa: E731
    check(fn, base, src, ops="aten.scatter_reduce.two")
    check(fn, base.long() * 3, src.long(), ops="aten.scatter_reduce.two")


def test_bool_accumulations_are_or_and(check):
    # bool += bool is or, *= is and; XLA has no add/multiply/max/min on pred
    index = torch.tensor([0, 1, 0, 1, 2, 1])
    base = torch.tensor([False, True, False, False, True])
    src = torch.tensor([True, False, False, True, False, False])

    def fn(b, s):
        return (
            b.scatter_add(0, index, s),
            b.scatter_reduce(0, index, s, "prod"),
            b.scatter_reduce(0, index, s, "amax", include_self=False),
            b.scatter_reduce(0, index, s, "amin", include_self=False),
            b.index_put((index,), s, accumulate=True),
            b.index_add(0, index, s),
            b.put(index, s, accumulate=True),
        )

    ops = ["aten.scatter_add.default", "aten.scatter_reduce.two", "aten.index_put.default"]
    check(fn, base, src, ops=ops)


def test_index_add_masked_scatter(check):
    def fn(v, m):
        return v.index_add(1, torch.tensor([0, 2, 0]), torch.ones(4, 3, 6), alpha=2.0), v.masked_scatter(
            m, v * 10
        )

    check(fn, X, X > 0, ops="aten.masked_scatter.default")


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce(check, reduce):
    src = torch.randn(4, 3, 6)
    idx = torch.tensor([0, 2, 0])
    fn = lambda v, s: (
        v.index_reduce(1, idx, s, reduce),
        v.index_reduce(1, idx, s, reduce, include_self=False),
    )  # noqa: E731
    check(fn, X, src, ops="aten.index_reduce.default", rtol=1e-5)


def test_put_and_mask_assignment(check):
    def fn(v, s):
        out = v.clone()
        m = v[:, :, 0] > 0
        out[m] = s[0, 0]  # one (6,) row broadcast to every selected (i, j)
        return (
            v.put(torch.tensor([0, -1, 7]), s[0, 0, :3]),
            v.put(torch.tensor([1, 1]), s[0, 0, :2], True),
            out,
        )

    check(fn, X, X * 5, ops="aten.put.default")


# ------------------------------------------------ embedding_bag, nonzero_static (both targets)

W = torch.randn(6, 3)
W[2] = W[3]  # equal rows: max keeps the first
BAG_IDS = torch.tensor([1, 2, 3, 5, 2, 0, 4, 4])
BAG_OFFS = torch.tensor([0, 3, 3, 6])  # an empty bag


def test_embedding_bag():
    """Every mode with and without ``padding_idx``, in one program."""
    cases = {}
    for mode in ("sum", "mean", "max"):
        for padding_idx in (None, 2):
            psw = torch.randn(8) if mode == "sum" else None

            def fn(w, i, o, mode=mode, padding_idx=padding_idx, psw=psw):
                return (
                    F.embedding_bag(i, w, o, mode=mode, padding_idx=padding_idx, per_sample_weights=psw),
                    F.embedding_bag(i.view(2, 4), w, mode=mode, padding_idx=padding_idx),  # 2-D: fixed bags
                    F.embedding_bag(
                        i, w, torch.cat([o, o.new_tensor([8])]), mode=mode, include_last_offset=True
                    ),
                )

            cases[f"{mode}, padding_idx={padding_idx}"] = (fn, (W, BAG_IDS, BAG_OFFS))
    check_targets_batch(cases, ops="aten._embedding_bag_forward_only.default", rtol=1e-6)


def test_embedding_bag_bfloat16_accumulates_in_float32():
    # 42.66 - 4.12 - 37.65 = 0.887: each product rounded to bfloat16 (ulp 0.25 at 42) would
    # give 0.75; ATen sums in float32 and rounds once
    w = torch.tensor([[8.375, 1.0], [-3.6406, 2.0], [-7.625, 3.0]]).bfloat16()
    psw = torch.tensor([5.0938, 1.1328, 4.9375]).bfloat16()

    def fn(w, i, o, p):
        summed = F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p)
        return summed, F.embedding_bag(i, w * 7, o, mode="mean")

    ids, offs = torch.tensor([0, 1, 2]), torch.tensor([0])
    ops = "aten._embedding_bag_forward_only.default"
    check_targets(fn, w, ids, offs, psw, ops=ops, rtol=1.6e-2, atol=1e-2)


def test_embedding_bag_max_norm_renormalises_the_rows_used():
    def fn(w, i, o):
        return (
            F.embedding_bag(i, w, o, max_norm=1.0, mode="sum"),
            F.embedding_bag(i, w, o, max_norm=0.5, norm_type=1.0, mode="max"),
        )

    check_targets(fn, W * 3, BAG_IDS, BAG_OFFS, ops="aten.embedding_renorm.default", rtol=1e-5)


def test_embedding_bag_all_outputs():
    """Modes 0, 1, 2 (sum, mean, max), in one program."""
    w = W.clone()
    w[0, 1] = float("nan")  # a NaN first row sticks in max mode; later NaN rows are skipped
    w[4, 0] = float("nan")

    def fn(w, i, o, mode):
        a = torch.ops.aten._embedding_bag_forward_only(w, i, o, False, mode, False, None, False, 3)
        last = torch.cat([o, o.new_tensor([8])])
        b = torch.ops.aten._embedding_bag_forward_only(w, i, last, False, mode, False, None, True, -1)
        # with include_last_offset torch's meta function (which export records) and its CPU
        # kernel disagree on the shapes of bag_size and max_indices: compare the others
        c = torch.ops.aten._embedding_bag(w, i, o, False, mode, False, None, False, -1)
        return *a, b[0], b[1], *(b[3:] if mode == 2 else ()), *c

    cases = {f"mode={m}": (functools.partial(fn, mode=m), (w, BAG_IDS, BAG_OFFS)) for m in (0, 1, 2)}
    ops = ["aten._embedding_bag_forward_only.default", "aten._embedding_bag.default"]
    check_targets_batch(cases, ops=ops, rtol=1e-6)


def test_nonzero_static():
    x = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])

    def fn(v):
        return (
            torch.nonzero_static(v, size=2),  # truncated
            torch.nonzero_static(v, size=1),  # exactly one row
            torch.nonzero_static(v, size=6, fill_value=-7),  # padded
            torch.nonzero_static(v[0, 0], size=2),  # 0-d
            torch.nonzero_static(v > 0, size=0),
        )

    check_targets(fn, x, ops="aten.nonzero_static.default")


def test_boolean_mask_index_is_refused():
    """``x[mask]`` keeps as many rows as the mask has True values: from_torch refuses it as a
    data-dependent shape before lowering, and the ``aten.index`` rule itself refuses a
    boolean index rather than index with its 0/1 values."""
    import jax.numpy as jnp
    from converter.frontends.torch import export
    from converter.frontends.torch.ops.indexing import index

    import converter
    from converter.errors import DataDependentShapeError

    class Masked(torch.nn.Module):
        def forward(self, x, m):
            return x[m]

    mask = torch.tensor([True, False, True, True])
    with pytest.raises(DataDependentShapeError, match="boolean mask"):
        converter.from_torch(export(Masked(), (torch.randn(4, 3), mask)))
    with pytest.raises(NotImplementedError, match="boolean-mask"):
        index(jnp.zeros((4, 3)), [jnp.asarray(mask.numpy())])


def test_zero_dim_and_empty_index_edges():
    """A 0-dim ``gather``/``index_reduce`` input, empty ``scatter``/``scatter_reduce``
    indices (the input unchanged), a max ``embedding_bag`` of no indices: one program."""
    from tests.frontends.torch.conftest import run_check_batch

    s, x, none = torch.tensor(2.5), X[0], torch.zeros(0, 6, dtype=torch.long)
    w, empty, offsets = torch.randn(5, 3), torch.zeros(0, dtype=torch.long), torch.tensor([0, 0])
    cases = {
        "gather of a 0-dim tensor": (lambda a, i: torch.gather(a, 0, i), (s, torch.tensor(0))),
        "scatter of no index": (lambda a, i: torch.scatter(a, 0, i, a * 2), (x, none)),
        "scatter_reduce of no index": (lambda a, i: torch.scatter_reduce(a, 1, i, a, "amax"), (x, none)),
        "index_reduce of a 0-dim tensor": (
            lambda a, i, b: a.index_reduce(0, i, b, "prod"),
            (s, torch.tensor([0]), torch.tensor(3.0)),
        ),
        "max embedding_bag of no index": (
            lambda w_, i, o: F.embedding_bag(i, w_, o, mode="max"),
            (w, empty, offsets),
        ),
    }
    ops = ["aten.gather.default", "aten.scatter.src", "aten.scatter_reduce.two", "aten.index_reduce.default"]
    run_check_batch(cases, ops=ops + ["aten._embedding_bag_forward_only.default"])


def test_index_add_rule_and_2d_embedding_bag_refusal():
    """``index_add`` (the Core ATen decompositions replace it) called directly, with ``alpha``
    and on a 0-dim input; ``_embedding_bag`` with 2-D indices (``F.embedding_bag`` always
    passes 1-D ones) raises naming them."""
    import jax.numpy as jnp
    from converter.frontends.torch.ops.indexing import _embedding_bag, index_add

    from tests.frontends.torch.conftest import check_rule

    aten = torch.ops.aten
    check_rule(index_add, aten.index_add.default, X, 1, torch.tensor([4, 0, 4]), X[:, :3], alpha=2)
    check_rule(index_add, aten.index_add.default, torch.tensor(1.0), 0, torch.tensor([0]), torch.tensor(2.0))
    # alpha below 1 (a fraction, zero, negative) scales the source too
    for alpha in (0.5, 0.0, -1.5):
        check_rule(index_add, aten.index_add.default, X, 1, torch.tensor([4, 0, 4]), X[:, :3], alpha=alpha)
    with pytest.raises(NotImplementedError, match="2-D indices"):
        _embedding_bag(jnp.ones((5, 3)), jnp.zeros((2, 2), int), jnp.zeros(1, int), 0, None, False, -1)


def test_index_put_rule_mask_accumulate_and_per_row_values():
    """A boolean mask with one value and ``accumulate`` adds it; a mask over the leading dims
    with one row of values per True position puts them in row-major order (rule called
    directly: a value count that matches the mask is data-dependent in an export)."""
    from converter.frontends.torch.ops import indexing as ix

    from tests.frontends.torch.conftest import check_rule

    op = torch.ops.aten.index_put.default
    check_rule(ix.index_put, op, X, [X > 0.5], torch.tensor(2.0), True)
    mask = torch.zeros(4, 5, dtype=torch.bool)
    mask[0, 3] = mask[2, 1] = mask[3, 4] = True
    rows = torch.arange(18.0).reshape(3, 6)
    for accumulate in (False, True):
        check_rule(ix.index_put, op, X, [mask], rows, accumulate)


def test_scatter_reduce_rule_without_self_keeps_infinite_sources():
    """With ``include_self=False`` the targets start from -inf (amax) / +inf (amin), not the
    dtype's finite extremes: an all -inf (+inf) source reduces to -inf (+inf)."""
    from converter.frontends.torch.ops import indexing as ix

    from tests.frontends.torch.conftest import check_rule

    op = torch.ops.aten.scatter_reduce.two
    index, base = torch.tensor([0, 2]), torch.tensor([1.0, 2.0, 3.0])
    inf = float("inf")
    check_rule(ix.scatter_reduce, op, base, 0, index, torch.tensor([-inf, 5.0]), "amax", include_self=False)
    check_rule(ix.scatter_reduce, op, base, 0, index, torch.tensor([inf, -5.0]), "amin", include_self=False)


def test_embedding_renorm_rule_leaves_rows_not_named():
    """Only the rows named in ``indices`` whose norm exceeds ``max_norm`` are scaled, as
    ``torch.embedding_renorm_`` does in place."""
    from converter.frontends.torch.ops import indexing as ix

    from tests.frontends.torch.conftest import check_rule

    w = torch.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0], [1.0, 0.0]])
    renorm = lambda w_, i, m, p: torch.embedding_renorm_(w_.clone(), i, m, p)  # noqa: E731
    check_rule(ix.embedding_renorm, renorm, w, torch.tensor([0, 1, 3]), 1.0, 2.0, rtol=1e-5)


def test_embedding_bag_rule_sum_with_padding_index_0_keeps_offset2bag():
    """torch's fast sum path (empty ``offset2bag``) is taken only without a padding index:
    ``padding_idx=0`` (a real index) keeps each index's bag."""
    from converter.frontends.torch.ops import indexing as ix

    from tests.frontends.torch.conftest import check_rule

    op = torch.ops.aten._embedding_bag_forward_only.default
    check_rule(ix.embedding_bag_forward_only, op, W, BAG_IDS, BAG_OFFS, False, 0, False, None, False, 0)


def test_embedding_bag_rule_include_last_offset_bag_size_has_the_offsets_shape():
    """With ``include_last_offset`` ``bag_size`` has ``offsets``' shape (torch's meta
    function), the closing offset's entry 0: sum mode equals the CPU kernel's outputs; mean
    mode's first ``B`` counts equal the kernel's (``(B,)`` there)."""
    import jax
    from converter.frontends.torch.ops import indexing as ix

    offs = torch.cat([BAG_OFFS, BAG_OFFS.new_tensor([8])])
    args = (W, BAG_IDS, offs)
    rule = jax.jit(
        lambda w, i, o: [ix.embedding_bag_forward_only(w, i, o, False, m, False, None, True) for m in (0, 1)]
    )
    for mode, got in enumerate(rule(*(a.numpy() for a in args))):
        want = torch.ops.aten._embedding_bag_forward_only(*args, False, mode, False, None, True, -1)
        np.testing.assert_allclose(np.asarray(got[0]), want[0].numpy(), rtol=1e-6)
        bag_size = np.asarray(got[2])
        assert bag_size.shape == tuple(offs.shape)
        np.testing.assert_array_equal(bag_size, np.append(want[2].numpy()[:4], 0))
