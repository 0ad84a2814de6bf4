"""Data-dependent output sizes: one :class:`DataDependentShapeError` names every such op with
its source line, the reason and the static-size fix; a ``nonzero`` bounded by
``torch._check`` and ``nonzero_static`` convert to the padded form and match torch."""

from __future__ import annotations

import inspect
import re

import numpy as np
import onnxruntime as ort
import pytest
import torch
from converter.frontends.torch.registry import ATEN_RULES

import converter
from converter.errors import ConversionError, DataDependentShapeError
from tests.frontends.torch.both_targets import check_targets
from tests.frontends.torch.conftest import Fn


class Dynamic(torch.nn.Module):
    def forward(self, x):
        a = torch.nonzero(x)  # nonzero here
        b = x[x > 0] * 2  # mask index here
        c = torch.masked_select(x, x < 0).sum()  # masked_select here
        d = torch.unique(x)  # unique here
        return a, b, c, d


def _line(cls, text: str) -> str:
    lines, start = inspect.getsourcelines(cls.forward)
    return f"{__file__}:{start + next(i for i, line in enumerate(lines) if text in line)}"


def test_every_data_dependent_op_is_named_in_one_error():
    with pytest.raises(DataDependentShapeError) as info:
        converter.from_torch(Dynamic(), (torch.tensor([1.0, -2.0, 0.0, 3.0, 1.0]),))
    err = info.value
    assert isinstance(err, ConversionError)
    got = [(o.name, o.location) for o in err.ops]
    assert got == [
        ("aten.nonzero.default", _line(Dynamic, "nonzero here")),
        ("aten.index.Tensor (boolean mask)", _line(Dynamic, "mask index here")),
        ("aten.masked_select.default", _line(Dynamic, "masked_select here")),
        ("aten._unique2.default", _line(Dynamic, "unique here")),
    ]
    msg = str(err)
    assert msg.startswith(
        "4 op(s) have an output size that depends on the input values (aten.nonzero.default, "
        "aten.index.Tensor (boolean mask), aten.masked_select.default, aten._unique2.default)"
    )
    assert "number of nonzero elements" in msg and "torch.nonzero_static(x, size=N" in msg
    assert "jnp.nonzero(x, size=N" in msg and "torch._check(n <= N)" in msg
    # the symptoms torch.export leaves behind are not what is reported
    assert "sym_size" not in msg and "built-in function" not in msg and "no lowering" not in msg


class Bounded(torch.nn.Module):
    def forward(self, x):
        idx = torch.nonzero(x)
        torch._check(idx.shape[0] <= 4)
        return idx, x * 2


@pytest.fixture(scope="module")
def bounded():
    """The converted module and its three backends, built once."""
    x = torch.tensor([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0]])
    m = converter.from_torch(Bounded(), (x,))
    session = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    f_jax, f_torch = m.to_jax(), m.to_torch()
    return m, {
        "to_jax": lambda x: [np.asarray(o) for o in f_jax(x.numpy())],
        "to_torch": lambda x: [t.numpy() for t in f_torch(x)],
        "to_onnx": lambda x: session.run(None, {name: x.numpy()}),
    }


@pytest.mark.parametrize(
    "x",
    [
        torch.tensor([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0]]),
        torch.tensor([[5.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
        torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
        torch.tensor([[0.0, -1.0, 0.0], [7.0, 8.0, 0.0]]),
    ],
    ids=["3_of_6", "1_of_6", "none", "4_of_6"],
)
def test_nonzero_bounded_by_torch_check_converts_padded(bounded, x):
    m, backends = bounded
    assert m.signature.outputs[0].shape == (4, 2)
    want = torch.nonzero_static(x, size=4, fill_value=-1).numpy()
    n = int(torch.count_nonzero(x))
    np.testing.assert_array_equal(want[:n], torch.nonzero(x).numpy())  # torch's own rows first
    for target, run in backends.items():
        idx, doubled = run(x)
        assert idx.dtype == np.int64, target
        np.testing.assert_array_equal(idx, want, err_msg=target)
        np.testing.assert_array_equal(doubled, (x * 2).numpy(), err_msg=target)


class Gathered(torch.nn.Module):
    """A bounded ``nonzero`` used inside the graph: indexing by it, pointwise ops, reductions
    over its rows (sum, mean, amax, all-element sum of the indices, a mean over every dim)
    and padded outputs (one a product with a reduction over the rows)."""

    def forward(self, x, v):
        idx = torch.nonzero(x > 0)
        torch._check(idx.shape[0] <= 4)
        rows = v[idx[:, 0]] * 2 + 1
        return rows.sum(0), rows.mean(0), rows.amax(0), idx.sum(), rows.mean(), rows, rows * rows.sum(0)


@pytest.fixture(scope="module")
def gathered():
    torch.manual_seed(0)
    v = torch.randn(6, 3)
    m = converter.from_torch(Gathered(), (torch.tensor([1.0, -1, 2, 0, 3, -2]), v))
    session = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    f_jax, f_torch = m.to_jax(), m.to_torch()
    return (
        m,
        v,
        {
            "to_jax": lambda x: [np.asarray(o) for o in f_jax(x.numpy(), v.numpy())],
            "to_torch": lambda x: [t.detach().numpy() for t in f_torch(x, v)],
            "to_onnx": lambda x: session.run(None, dict(zip(names, (x.numpy(), v.numpy()), strict=True))),
        },
    )


@pytest.mark.parametrize(
    "x",
    [
        torch.tensor([1.0, -1, 2, 0, 3, -2]),
        torch.tensor([1.0, -1, -2, 0, -3, -2]),
        torch.tensor([1.0, 1, 2, 0, 3, -2]),
    ],
    ids=["3_rows", "1_row", "4_rows"],
)
def test_bounded_nonzero_inside_the_graph_matches_torch(gathered, x):
    m, v, backends = gathered
    assert [o.shape for o in m.signature.outputs[-2:]] == [(4, 3), (4, 3)]  # the padded rows
    with torch.no_grad():
        want = [t.numpy() for t in Gathered()(x, v)]
    n = want[-1].shape[0]
    for target, run in backends.items():
        got = run(x)
        for w, g in zip(want[:-2], got[:-2], strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=target)
        for w, g in zip(want[-2:], got[-2:], strict=True):
            np.testing.assert_allclose(g[:n], w, rtol=1e-6, atol=1e-6, err_msg=target)
            np.testing.assert_array_equal(g[n:], 0, err_msg=target)  # padding rows are 0


def test_bounded_nonzero_use_that_padding_would_change_is_refused():
    class Cumulative(torch.nn.Module):
        def forward(self, x):
            idx = torch.nonzero(x)
            torch._check(idx.shape[0] <= 2)
            return idx.cumsum(0)

    with pytest.raises(
        DataDependentShapeError,
        match=r"at most 2 rows.*feeds aten\.cumsum\.default at .*test_data_dependent\.py:\d+, which mixes",
    ):
        converter.from_torch(Cumulative(), (torch.tensor([0.0, 1.0, 0.0, 2.0]),))

    class Sized(torch.nn.Module):
        def forward(self, x):
            idx = torch.nonzero(x)
            torch._check(idx.shape[0] <= 2)
            return idx * idx.shape[0]

    with pytest.raises(DataDependentShapeError, match=r"at most 2 rows.*its size feeds a computation"):
        converter.from_torch(Sized(), (torch.tensor([0.0, 1.0, 0.0, 2.0]),))


class Refused(torch.nn.Module):
    """Bounded ``nonzero`` results each used in one way the padding cannot be carried
    through (one line each: the error names it), and a bounded nonzero of a padded value."""

    def forward(self, x, w):
        out = []
        for _ in range(9):
            a = torch.nonzero(x)
            torch._check(a.shape[0] <= 3)
            out.append(a)
        out += [torch.cat(out[:2])]  # a size computed from the padded one: 2 * u0
        out += [out[2].max()]  # a reduction the masking does not know
        out += [out[3].sum(0).sum()]  # a reduction of a reduction over the rows
        out += [(out[4] * 1.0)[out[4][:, 0]]]  # indexing into the padded rows
        out += [w @ (out[5] * 1.0).T]  # the padded rows as a product's right operand
        out += [(out[6] * 1.0).T.reshape(-1, 2)]  # a reshape that moves the rows
        out += [torch.sort(out[7], 1)]  # a tuple result (its sizes not per axis)
        out += [torch.nonzero(out[7])]  # a nonzero of the padded value: converts padded
        out += [out[8].shape[0]]  # its size an output
        return out


def test_each_use_a_padded_nonzero_cannot_serve_is_named():
    x = torch.tensor([[0.0, 1.0], [2.0, 0.0], [3.0, 0.0], [0.0, 0.0]])
    with pytest.raises(DataDependentShapeError) as info:
        converter.from_torch(Refused(), (x, torch.ones(2, 2)))
    lines, start = inspect.getsourcelines(Refused.forward)
    refusals = {}
    for op in info.value.ops:
        line = int(op.location.rsplit(":", 1)[1]) - start
        comment = lines[line].partition("#")[2].strip()  # "" for the loop's nonzero
        refusals.setdefault(comment, []).append(op.reason)
    expected = {  # the use → the op named and why
        "a size computed from the padded one: 2 * u0": "cat.default at .*, which merges the padded rows",
        "a reduction the masking does not know": "max.default at .*, whose result the padding rows would",
        "a reduction of a reduction over the rows": "sum.dim_IntList at .*, a reduction that keeps the",
        "indexing into the padded rows": "index.Tensor at .*, indexing into the padded rows",
        "the padded rows as a product's right operand": "mm.default at .*, a product over the padded",
        "a reshape that moves the rows": "view.default at .*, a view that moves the padded rows",
        "a tuple result (its sizes not per axis)": "sort.default at .*, which merges the padded rows",
    }
    a_nonzero = [r for r in refusals.pop("") if "at most 3 rows" in r]
    assert len(a_nonzero) == 8  # one reason each (the first error met)
    assert sum("its size feeds a computation" in r for r in a_nonzero) == 1  # the size output
    for use, why in expected.items():
        assert any(re.search(why, r) for r in a_nonzero), (use, a_nonzero)
    # the inner nonzero: its input's size is symbolic, so any bound of it is the program's
    # the inner nonzero is not refused: its input's size (2 * u0) is symbolic, and the bound
    # the program gives it (6 elements) pads it
    assert not refusals


def test_size_check_users_visit_a_shared_node_once():
    """``sym_size`` → two size expressions → one sum → one assertion: the sum is found once."""
    import operator

    from converter.frontends.torch.data_dependent import _size_check_users

    g = torch.fx.Graph()
    nz = g.call_function(torch.ops.aten.nonzero.default, (g.placeholder("x"),))
    n = g.call_function(torch.ops.aten.sym_size.int, (nz, 0))
    both = g.call_function(
        operator.add, (g.call_function(operator.mul, (n, 2)), g.call_function(operator.add, (n, 1)))
    )
    check = g.call_function(
        torch.ops.aten._assert_scalar.default, (g.call_function(operator.le, (both, 9)), "m")
    )
    found = _size_check_users(nz)
    assert len(found) == len(set(found)) == 6 and found[0] is n and check in found


def test_a_reshape_keeps_rows_only_with_static_sizes_before_them():
    from types import SimpleNamespace

    from converter.frontends.torch.data_dependent import _Padding

    def node(*shape):
        return SimpleNamespace(meta={"val": SimpleNamespace(shape=shape)})

    u, s = "u0", "s0"  # the padded size, another symbolic size
    assert _Padding._keeps_rows(node(2, 3, u), 2, node(6, u), 1)
    assert not _Padding._keeps_rows(node(2, 3, u), 2, node(3, u, 2), 1)
    assert not _Padding._keeps_rows(node(s, u), 1, node(s, u, 1), 1)  # s0 may differ


def test_nonzero_static_with_fill_value_matches_torch():
    x = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    check_targets(
        lambda x: torch.nonzero_static(x, size=5, fill_value=7), x, ops="aten.nonzero_static.default"
    )
    check_targets(lambda x: torch.nonzero_static(x, size=2), x, ops="aten.nonzero_static.default")


def test_while_loop_carrying_a_python_int_is_named():
    from torch._higher_order_ops.while_loop import while_loop

    class Counter(torch.nn.Module):
        def forward(self, x):
            return while_loop(lambda i, x: x.sum() < 10, lambda i, x: (i + 1, x * 2), (0, x))

    with pytest.raises(
        DataDependentShapeError, match=r"higher_order\.while_loop at .*carries a Python int"
    ) as info:
        converter.from_torch(Counter(), (torch.rand(3),))
    assert "torch.tensor(0)" in str(info.value)


def test_data_dependent_size_checks_are_refused_first():
    """``sym_constrain_range_for_size`` (``torch._check_is_size``) has no rule: it only
    constrains a data-dependent size, which conversion refuses before any rule runs."""

    def fn(x):
        v = x.sum().int().item()
        torch._check_is_size(v)
        torch._check(v < 100)
        return x * v

    with pytest.raises(converter.DataDependentShapeError, match="_local_scalar_dense"):
        converter.from_torch(Fn(fn), (torch.ones(4, 2),))
    for key in ("aten.sym_constrain_range_for_size.default", "aten.sym_numel.default", "torch.sym_int"):
        assert key not in ATEN_RULES, key


def test_reduced_axes_of_each_dim_spelling():
    """The axes a reduction of a rank-3 value folds, as ``sum``'s ``dim`` spells them: one
    axis, negative axes, a list, by keyword, none or ``[]`` (every axis). Only a reduction
    over the padded axis may take a padded input."""
    from types import SimpleNamespace

    from converter.frontends.torch.data_dependent import _Padding

    x = SimpleNamespace(meta={"val": torch.empty(2, 3, 4)})

    def axes(*args, **kwargs):
        return _Padding._reduced_axes(None, SimpleNamespace(args=(x, *args), kwargs=kwargs), x)

    assert axes(1) == {1} and axes(-1) == {2} and axes([-3, 1]) == {0, 1}
    assert axes(dim=[-2]) == {1} and axes(dim=2) == {2}
    assert axes() == axes(None) == axes([]) == axes(dim=None) == {0, 1, 2}
