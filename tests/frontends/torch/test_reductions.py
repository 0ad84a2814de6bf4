"""Reduction ATen rules (``frontends/torch/ops/reductions.py``) against eager torch."""

from __future__ import annotations

import functools

import pytest
import torch

from tests.frontends.torch.both_targets import check_targets, check_targets_batch
from tests.frontends.torch.conftest import check_rule, run_check_batch

torch.manual_seed(0)
X = torch.randn(3, 4, 5)
INTS = torch.randint(-5, 5, (3, 4, 5))
B = X > 0
TIES = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, float("nan"), 5.0, float("nan")]])


@pytest.mark.parametrize("x", [X, INTS, B, X.half()], ids=["f32", "i64", "bool", "f16"])
def test_sum_prod_mean(check, x):
    def fn(v):
        out = (v.sum(), v.sum(dim=(0, 2)), v.sum(dim=-1, keepdim=True), v.prod(dim=1))
        out += (v.sum(dim=1, dtype=torch.float64),)
        if v.is_floating_point():
            out += (v.mean(), v.mean(dim=(-1, 0), keepdim=True))
        return out

    check(
        fn, x, ops=["aten.sum.dim_IntList", "aten.prod.dim_int"], rtol=2e-3 if x.dtype == torch.half else 1e-6
    )


def test_max_min_family(check):
    def fn(v):
        return (
            v.amax(dim=(0, 2)),
            v.amin(dim=-1, keepdim=True),
            v.max(dim=1),
            v.min(dim=0, keepdim=True),
            v.argmax(),
            v.argmin(keepdim=True),  # no dim: the flat index, kept as a 1x1x1 tensor
            v.argmin(dim=2),
            v.max(),
            v.min(),
        )

    ops = ["amax.default", "amin.default", "max.dim", "min.dim", "argmax.default", "argmin.default"]
    check(fn, X, ops=[f"aten.{o}" for o in ops] + ["aten.max.default", "aten.min.default"])


def test_max_indices_take_first_tie_and_nan(check):
    check(lambda v: (v.max(dim=1), v.min(dim=1), v.argmax(dim=1), v.argmin(dim=-1)), TIES, ops="aten.max.dim")


def test_any_all(check):
    """Nonzero, not positive, is true: ``neg`` has rows of negatives and zeros only."""

    def fn(b, i, neg):
        return b.any(), b.any(dim=1), b.all(), b.all(dim=(0, 2)), i.any(dim=-1, keepdim=True), neg.any(dim=0)

    neg = -torch.tensor([[0, 0, 3], [0, 2, 0]])
    check(fn, B, INTS, neg, ops=["aten.any.default", "aten.any.dim", "aten.any.dims"])


def test_var_std():
    """Corrections 0, 1, 2 in one program."""

    def fn(v, correction):
        return (
            torch.var(v, dim=1, correction=correction),
            torch.var(v, correction=correction),
            torch.std(v, dim=(0, 2), correction=correction, keepdim=True),
        )

    cases = {f"correction={c}": (functools.partial(fn, correction=c), (X,)) for c in (0, 1, 2)}
    run_check_batch(cases, ops="aten.var.correction", rtol=1e-5)


@pytest.mark.parametrize("dim", [0, -1])
def test_softmax_log_softmax(check, dim):
    masked = X.masked_fill(X > 1, float("-inf"))
    fn = lambda v: (torch.softmax(v, dim), torch.log_softmax(v, dim))  # noqa: E731
    check(fn, masked * 10, ops=["aten._softmax.default", "aten._log_softmax.default"], rtol=1e-5, atol=1e-6)


def test_softmax_half_to_float(check):
    check(
        lambda v: torch.softmax(v, -1, dtype=torch.float32), X.half(), ops="aten._softmax.default", rtol=1e-5
    )


def test_logsumexp(check):
    x = torch.stack([X[0], torch.full_like(X[0], float("-inf"))])
    check(lambda v: (torch.logsumexp(v, 1), torch.logsumexp(v * 50, (0, 2), keepdim=True)), x, rtol=1e-5)


@pytest.mark.parametrize("x", [X, INTS, B], ids=["f32", "i64", "bool"])
def test_cumsum_cumprod(check, x):
    check(
        lambda v: (v.cumsum(1), v.cumsum(-1, dtype=torch.float64), v.cumprod(0), v.cumprod(-1)),
        x,
        ops=["aten.cumsum.default", "aten.cumprod.default"],
    )


def test_sort():
    """Stable and default sorts, ascending and descending: one program."""
    x = torch.tensor([[3.0, 1.0, 2.0, 1.0, float("nan"), -float("inf")], [0.0, -0.0, 5.0, 5.0, 2.0, 1.0]])
    cases = {}
    for d in (False, True):
        stable = functools.partial(torch.sort, dim=-1, descending=d, stable=True)
        cases[f"stable, descending={d}"] = (stable, (x,))
        cases[f"default, descending={d}"] = (functools.partial(torch.sort, dim=1, descending=d), (INTS[0],))
    run_check_batch(cases, ops=["aten.sort.stable", "aten.sort.default"])


def test_topk():
    """Largest and smallest along either dim: one program."""
    x = torch.randperm(40).float().reshape(4, 10)
    cases = {}
    for b in (True, False):
        cases[f"k=3, dim=1, largest={b}"] = (functools.partial(torch.topk, k=3, dim=1, largest=b), (x,))
        cases[f"k=2, dim=0, largest={b}"] = (functools.partial(torch.topk, k=2, dim=0, largest=b), (x,))
    run_check_batch(cases, ops="aten.topk.default")


def test_cummax_cummin(check):
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, 5.0, float("nan"), 7.0], [0.0, -1.0, -1.0, 4.0, 4.0, 1.0, -2.0]])

    def fn(v, i):
        return torch.cummax(v, 1), torch.cummin(v, -1), torch.cummax(i, 0), torch.cummin(i, 2)

    check(fn, x, INTS, ops=["aten.cummax.default", "aten.cummin.default"])


def test_kthvalue(check):
    x = torch.randperm(30).float().reshape(5, 6)
    fn = lambda v: (torch.kthvalue(v, 2, dim=1), torch.kthvalue(v, 5, dim=0, keepdim=True))  # noqa: E731
    check(fn, x, ops="aten.kthvalue.default")


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted(check, right):
    seq = torch.tensor([1.0, 2.0, 2.0, 4.0, 7.0])
    batched = torch.sort(torch.randn(3, 6)).values
    values = torch.tensor([[0.0, 2.0, 3.0], [7.0, 8.0, 4.0]])

    def fn(s, b, v):
        return torch.searchsorted(s, v, right=right), torch.searchsorted(b, b[:, :2] + 0.1, out_int32=True)

    check(fn, seq, batched, values, ops="aten.searchsorted.Tensor")


def test_median_nanmedian_var_mean(check):
    x = torch.tensor([[3.0, 1.0, 2.0, 5.0], [float("nan"), 1.0, 0.0, float("nan")], [4.0, 4.0, 1.0, 4.0]])

    def fn(v, w):
        return (
            torch.median(w),
            torch.median(v, 1),
            torch.nanmedian(v, 1, keepdim=True),
            torch.nanmedian(v),
            torch.median(v),
            torch.var_mean(w, 1),
            torch.var_mean(w, (0, 2), correction=0, keepdim=True),
        )

    ops = ["aten.median.default", "aten.median.dim", "aten.nanmedian.dim", "aten.var_mean.correction"]
    check(fn, x, X, ops=ops, rtol=1e-5)


def test_vector_norm():
    """Orders 2, 1, 0, 3.5, inf, -inf in one program."""

    def fn(v, ord):  # noqa: A002
        return (
            torch.linalg.vector_norm(v, ord),
            torch.linalg.vector_norm(v, ord, dim=(0, 2), keepdim=True),
        )

    ords = (2, 1, 0, 3.5, float("inf"), float("-inf"))
    cases = {f"ord={o}": (functools.partial(fn, ord=o), (X,)) for o in ords}
    # torch 2.14's Core ATen table decomposes it (abs, pow, sum, amax): the rule is then unused
    from converter.frontends.torch.decompose import decomposition_table

    kept = torch.ops.aten.linalg_vector_norm.default not in decomposition_table()
    run_check_batch(cases, ops="aten.linalg_vector_norm.default" if kept else (), rtol=1e-5)


def test_bucketize_logcumsumexp(check):
    b = torch.tensor([-1.0, 0.0, 0.5, 2.0])
    x = torch.stack([X[0, 0], torch.tensor([float("-inf"), float("-inf"), 1.0, 50.0, -3.0])])

    def fn(v, w):
        return (
            torch.bucketize(v, b),
            torch.bucketize(v, b, right=True, out_int32=True),
            torch.logcumsumexp(w, 1),
        )

    check(fn, X, x, ops=["aten.bucketize.Tensor", "aten.logcumsumexp.default"], rtol=1e-5)


# ------------------------------------------------ segment_reduce, histograms, mode, hash_tensor
# (checked on both targets: to_jax and to_torch)


def test_segment_reduce():
    """Every reduction with and without ``initial``, in one program; segments along a dim
    followed by one dim, by none (1-D) and by two (3-D along dim 0)."""
    data = torch.randn(3, 7, 2)
    data[1, 2, 0] = float("nan")
    lengths = torch.tensor([[2, 0, 3, 2], [7, 0, 0, 0], [1, 1, 1, 4]])  # empty segments too
    offsets = torch.cat([torch.zeros(3, 1, dtype=torch.long), lengths.cumsum(1)], 1)

    def fn(d, lens, offs, reduce, initial):
        return (
            torch.segment_reduce(d, reduce, lengths=lens, axis=1, initial=initial),
            torch.segment_reduce(d, reduce, offsets=offs, axis=1, initial=initial),
            torch.segment_reduce(d[0], reduce, lengths=lens[1], initial=initial),
        )

    cases = {
        f"{reduce}, initial={initial}": (
            functools.partial(fn, reduce=reduce, initial=initial),
            (data, lengths, offsets),
        )
        for reduce in ("sum", "mean", "max", "min", "prod")
        for initial in (None, 2.0)
    }
    cases["mean, 3-D along dim 0"] = (
        lambda d, lens: torch.segment_reduce(d.permute(1, 0, 2), "mean", lengths=lens[2]),
        (data, lengths),
    )
    check_targets_batch(cases, ops="aten.segment_reduce.default", rtol=1e-5)


EDGES = torch.tensor([0.0, 10, 5, 2.5, 7.5, -1, 11, float("nan"), 10, 0])  # on edges, outside, NaN


def test_histc():
    """1, 4 and 100 bins in one program."""

    def fn(x, c, e, bins):
        return (
            torch.histc(x, bins),  # range from the data
            torch.histc(x, bins, -2, 2),
            torch.histc(e, bins, 0, 10),  # the last bin is closed on the right
            torch.histc(c, bins),  # constant input: range widened by 1
            torch.histc(c, bins, 3, 3),
        )

    args = (X.reshape(-1) * 3, torch.full((5,), 3.0), EDGES)
    cases = {f"bins={b}": (functools.partial(fn, bins=b), args) for b in (1, 4, 100)}
    check_targets_batch(cases, ops="aten.histc.default")


class _Routing(torch.nn.Module):
    def forward(self, ids):
        return torch.histc(ids.float(), bins=4, min=0, max=3)


def test_histc_of_a_given_range_needs_no_bit_cast():
    """A given range never empty (a mixture-of-experts router's ``histc(ids, E, 0, E - 1)``)
    is not widened, so the module has no ``nextafter`` bit cast, which ONNX below opset 26
    cannot express: ``to_onnx()`` at the default opset equals eager torch in onnxruntime."""
    import onnxruntime as ort

    import converter

    ids = torch.tensor([3, 0, 1, 3, 2, 3, 7, -1])
    m = converter.from_torch(_Routing(), (ids,))
    assert "bitcast_convert" not in m.text(debug_info=False)
    session = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"args[0]": ids.numpy()})
    torch.testing.assert_close(torch.from_numpy(got), _Routing()(ids))


def test_histogram():
    """Counts and densities in one program."""
    w = torch.rand(X.numel())
    edges = torch.tensor([-1.0, 0.0, 0.5, 3.0, 7.5])

    def fn(x, w, c, edges, density):
        return (
            torch.histogram(x, 7, density=density),
            torch.histogram(x, 5, range=(-1.0, 1.0), weight=w, density=density),
            torch.histogram(c, 3, density=density),  # constant input: range widened by 0.5
            torch.histogram(x, edges, weight=w, density=density),
            torch.histogram(EDGES, edges, density=density),
        )

    ops = ["aten.histogram.bin_ct", "aten.histogram.bins_tensor"]
    args = (X.reshape(-1), w, torch.full((4,), -2.0), edges)
    cases = {f"density={d}": (functools.partial(fn, density=d), args) for d in (False, True)}
    check_targets_batch(cases, ops=ops, rtol=1e-5)


def test_histogramdd():
    """Counts and densities in one program."""
    pts = torch.randn(30, 3)
    w = torch.rand(30)

    def fn(p, w, density):
        h, e = torch.histogramdd(p, [2, 3, 4], weight=w, density=density)
        h2, e2 = torch.histogramdd(p, [3, 1, 2], range=[0.0, 1.0, -1.0, 1.0, 0.0, 0.0], density=density)
        h3, _ = torch.histogramdd(p, [t * 1.5 for t in e], weight=w, density=density)
        return h, *e, h2, *e2, h3

    ops = [
        "aten._histogramdd_bin_edges.default",
        "aten._histogramdd_from_bin_cts.default",
        "aten._histogramdd_from_bin_tensors.default",
    ]
    cases = {f"density={d}": (functools.partial(fn, density=d), (pts, w)) for d in (False, True)}
    check_targets_batch(cases, ops=ops, rtol=1e-5)


def test_mode_ties_and_nan_follow_the_cpu_kernel():
    torch.manual_seed(1)
    x = torch.randint(0, 4, (6, 5, 16)).float()  # many ties of counts and values
    x[0, :, ::3] = float("nan")
    x[1, 0] = 1.0

    def fn(v, b, i):
        return torch.mode(v), torch.mode(v, 1, keepdim=True), torch.mode(b, 0), torch.mode(i, -1)

    check_targets(fn, x, x[2] > 1, x[3, :, :6].long(), ops="aten.mode.default")


def test_mode_rows_longer_than_16_raise():
    from converter.frontends.torch import export

    import converter
    from converter.errors import OpConversionError
    from tests.frontends.torch.conftest import Fn

    ep = export(Fn(lambda v: torch.mode(v, 0)), (torch.zeros(17, 2),))
    with pytest.raises(OpConversionError, match="introsort"):
        converter.from_torch(ep)


def test_hash_tensor():
    def fn(x, i, b, h):
        return (
            torch.hash_tensor(x),
            torch.hash_tensor(x, 0, keepdim=True),
            torch.hash_tensor(x, (1, 2)),
            torch.hash_tensor(i, -1),
            torch.hash_tensor(b),
            torch.hash_tensor(h),
        )

    x = X.clone()
    x[0, 0, 0], x[0, 0, 1] = float("nan"), -0.0
    check_targets(fn, x, INTS.int(), B, X.half(), ops="aten.hash_tensor.default")


# ------------------------------------------------ edge cases: 0-dim inputs, dtypes, sorters

S = torch.tensor(-1.5)


def test_zero_dim_inputs_and_optional_arguments():
    """0-dim inputs of the rules with a dim (torch accepts dim 0 and -1 there: the value and
    index 0), and optional arguments (``dtype``, ``sorter``, unsigned ``hash_tensor``, an
    empty ``histogramdd``, ``segment_reduce``'s ``"amax"`` and ``"amin"``): one program."""
    pts = torch.empty(0, 2)
    cases = {
        "max.dim": (lambda s: torch.max(s, 0), (S,)),
        "min.dim keepdim": (lambda s: torch.min(s, -1, keepdim=True), (S,)),
        "softmax, log_softmax": (lambda s: (torch.softmax(s, 0), torch.log_softmax(s, -1)), (S,)),
        "cumsum, cumprod, logcumsumexp": (lambda s: (s.cumsum(0), s.cumprod(0), s.logcumsumexp(0)), (S,)),
        "sort, topk": (lambda s: (torch.sort(s, descending=True), torch.topk(s, 1)), (S,)),
        "cummax, cummin, kthvalue": (lambda s: (s.cummax(0), s.cummin(-1), s.kthvalue(1)), (S,)),
        "median, nanmedian, mode": (lambda s: (s.median(0), s.nanmedian(-1), torch.mode(s)), (S,)),
        "mean(dtype)": (lambda v: (v.mean(dtype=torch.float64), v.mean((0, 1), dtype=torch.float64)), (X,)),
        "vector_norm(dtype)": (lambda v: torch.linalg.vector_norm(v, 3, dtype=torch.float64), (X,)),
        "searchsorted(sorter)": (
            lambda s, v, o: (
                torch.searchsorted(s, v, sorter=o),
                torch.searchsorted(s, v, side="right", sorter=o),
            ),
            (
                torch.tensor([7.0, 1.0, 2.0, 4.0, 2.0]),
                torch.tensor([[0.0, 2.0, 3.0], [7.0, 8.0, 4.0]]),
                torch.tensor([1, 2, 4, 3, 0]),
            ),
        ),
        "hash_tensor(uint8)": (
            lambda u: (torch.hash_tensor(u), torch.hash_tensor(u, 1)),
            (torch.tensor([[3, 200, 7], [255, 0, 9]], dtype=torch.uint8),),
        ),
        "histogramdd of no points": (lambda p: torch.histogramdd(p, [2, 3]), (pts,)),
        "segment_reduce amax, amin": (
            lambda d, n: (
                torch.segment_reduce(d, "amax", lengths=n),
                torch.segment_reduce(d, "amin", lengths=n),
            ),
            (torch.tensor([1.0, 5.0, 2.0, 3.0, 0.0]), torch.tensor([2, 0, 3])),
        ),
    }
    ops = [
        "aten.max.dim",
        "aten.min.dim",
        "aten._softmax.default",
        "aten._log_softmax.default",
        "aten.cumsum.default",
        "aten.logcumsumexp.default",
        "aten.sort.default",
        "aten.topk.default",
        "aten.cummax.default",
        "aten.kthvalue.default",
        "aten.median.dim",
        "aten.nanmedian.dim",
        "aten.mode.default",
        "aten.mean.dim",
        "aten.searchsorted.Tensor",
        "aten.hash_tensor.default",
    ]
    run_check_batch(cases, ops=ops, rtol=1e-6)


def test_rules_of_decomposed_reductions():
    from converter.frontends.torch.ops import reductions as r

    aten = torch.ops.aten
    check_rule(r.all_, aten.all.default, INTS)
    check_rule(r.all_, aten.all.dim, B, 1, True)
    check_rule(r.all_, aten.all.dims, INTS, [0, -1])
    check_rule(r.var_dim, aten.var.dim, X, [1])
    check_rule(r.var_dim, aten.var.dim, X, [0, 2], False, True)
    check_rule(r.std_correction, aten.std.correction, X, [1], correction=0, keepdim=True)
    check_rule(r.std_correction, aten.std.correction, X)
    x = torch.stack([X[0], torch.full_like(X[0], float("-inf"))])
    check_rule(r.logsumexp, aten.logsumexp.default, x * 50, [0, 2], True, rtol=1e-5)
    check_rule(r.logsumexp, aten.logsumexp.default, x, [1], rtol=1e-5)
    check_rule(r.logsumexp, aten.logsumexp.default, INTS, [-1])  # integers: in float32


def test_refused_arguments_raise_naming_them():
    """What torch refuses when run (an unknown ``segment_reduce`` reduction, another
    ``hash_tensor`` mode, complex ``hash_tensor``) but ``torch.export`` lets through."""
    import jax.numpy as jnp
    from converter.frontends.torch.ops import reductions as r

    x = jnp.arange(4.0)
    with pytest.raises(NotImplementedError, match="reduction 'foo'"):
        r.segment_reduce(x, "foo", lengths=jnp.array([2, 2]))
    with pytest.raises(NotImplementedError, match="mode 1"):
        r.hash_tensor(x, mode=1)
    with pytest.raises(NotImplementedError, match="complex"):
        r.hash_tensor(x.astype(jnp.complex64))


def test_rule_helpers_on_scalars_bools_and_bad_dims():
    """``_util``: the result dtype of Python scalars alone (torch's), a dim out of range
    (IndexError naming it), the first maximum of a bool row (as torch's argmax)."""
    import jax.numpy as jnp
    import numpy as np
    from converter.frontends.torch.ops._util import arg_extreme, dim, result_type

    assert result_type(2, 3.5) == np.float32 and result_type(True) == np.bool_ and result_type(7) == np.int64
    with pytest.raises(IndexError, match="dim 2 out of range for a tensor of rank 2"):
        dim(2, 2)
    assert dim(-1, 0) == 0
    b = torch.tensor([[False, True, True], [False, False, False]])
    got = arg_extreme(jnp.asarray(b.numpy()), 1)
    np.testing.assert_array_equal(got, b.int().argmax(1).numpy())
    np.testing.assert_array_equal(arg_extreme(jnp.asarray(b.numpy()), 1, largest=False), [0, 0])


# ------------------------------------------------ rules called directly: boundaries of the counts


def test_var_with_a_correction_at_or_above_the_count():
    """A count at or below the correction divides by 0 (torch: ``inf``, or NaN for a zero
    sum of squares), never by 1; one element with Bessel's correction is NaN."""
    from converter.frontends.torch.ops import reductions as r

    aten = torch.ops.aten
    x = torch.tensor([[1.0, 3.0], [2.0, 2.0]])
    check_rule(r.var_correction, aten.var.correction, x, [1], correction=2)
    check_rule(r.var_correction, aten.var.correction, x, [1], correction=3, keepdim=True)
    check_rule(r.var_correction, aten.var.correction, x[:, :1], [1])


def test_var_of_complex_values_is_real():
    """The variance of complex values is the mean of ``|x - mean|^2``: a real result."""
    from converter.frontends.torch.ops import reductions as r

    z = torch.tensor([[1 + 2j, -1 + 0.5j, 3 - 1j], [0j, 2j, -2 + 1j]], dtype=torch.complex64)
    check_rule(r.var_correction, torch.ops.aten.var.correction, z, [1], rtol=1e-5)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_batched_rows_with_ties(right):
    """Values equal to elements of a batched sorted sequence: ``right`` counts them."""
    from converter.frontends.torch.ops import reductions as r

    seq = torch.tensor([[1.0, 2.0, 2.0, 4.0], [0.0, 0.0, 3.0, 3.0]])
    v = torch.tensor([[2.0, 4.0, 0.0], [0.0, 3.0, 5.0]])
    check_rule(r.searchsorted, torch.ops.aten.searchsorted.Tensor, seq, v, right=right)


def test_nanmedian_of_an_all_nan_row():
    """An all-NaN row's nanmedian is NaN at index 0 (``k`` clamped at 0); a row of one value
    among NaNs takes that value."""
    from converter.frontends.torch.ops import reductions as r

    nan = float("nan")
    x = torch.tensor([[nan, nan, nan], [nan, 2.0, nan], [3.0, 1.0, 2.0]])
    check_rule(r.nanmedian_dim, torch.ops.aten.nanmedian.dim, x, 1)


def test_histc_of_an_empty_input():
    """histc of no elements with ``min == max`` counts nothing (the range is ``[-1, 1]``)."""
    from converter.frontends.torch.ops import reductions as r

    aten = torch.ops.aten
    check_rule(r.histc, aten.histc.default, torch.empty(0), 4, 0, 0)


def test_histogram_of_its_own_bin_edges():
    """Points exactly on the edges torch computes (and one float32 step either side), where
    ``trunc((x - lo) * bins / (hi - lo))`` is one bin off: the bin found by interpolation
    is corrected against the edges, as torch's local search does; the edges themselves
    match to the bit. (Ranges without an edge at 0, whose neighbours are subnormal.)"""
    from converter.frontends.torch.ops import reductions as r

    for lo, hi, bins in ((-0.3, 0.7, 5), (0.1, 0.9, 7)):
        edges = torch.histogram(torch.zeros(1), bins, range=(lo, hi)).bin_edges
        pts = torch.cat([edges, torch.nextafter(edges, edges + 1), torch.nextafter(edges, edges - 1)])
        op = torch.ops.aten.histogram.bin_ct
        check_rule(r.histogram_bin_ct, op, pts, bins, range=(lo, hi), atol=0, rtol=0)


def test_histc_of_a_range_float32_rounds_to_one_value_is_not_widened():
    """ATen decides the widening of an empty range on ``min`` and ``max`` as doubles: 1.0 and
    1.00000001 differ, so the range stays as given although float32 rounds both to 1.0 (its
    edges then all equal 1.0, and both elements equal to 1.0 fall in the first bin)."""
    from converter.frontends.torch.ops import reductions as r

    aten = torch.ops.aten
    x = torch.tensor([0.0, 1.0, 1.0, 1.5, 2.0, 0.999])
    check_rule(r.histc, aten.histc.default, x, 4, 1.0, 1.00000001)
