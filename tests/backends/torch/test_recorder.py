"""The lean ATen recorder (backends/torch/recorder.py) that build_graph uses instead of make_fx."""

import converter.backends.torch.module as torch_backend
import jax
import numpy as np
import pytest
import torch
from converter.backends.torch import recorder
from converter.backends.torch.ops.control_flow import while_loop_exact_grad
from jax import lax
from torch.fx.experimental.proxy_tensor import make_fx

import converter

from .helpers import assert_same

X = np.linspace(-1, 1, 6, dtype=np.float32)
TABLE = np.arange(12, dtype=np.float32).reshape(3, 4)


def _program(x, y):
    """Constants (a NumPy table, a small torch.tensor read back by item()), views, an
    in-place op on a fresh tensor, a multi-output op and a dtype change."""
    table = torch.from_numpy(TABLE)
    scale = torch.tensor(2.0)
    k = int(scale.item())  # a constant's value: no node
    z = (x.reshape(3, 4) * table).t()
    acc = torch.zeros_like(z)
    acc.add_(z * k)  # in place on a fresh tensor
    first, second = torch.split(acc, [1, 3])
    return first.sum(0) + y.expand(2, 3).sum(), second.to(torch.float64).mean(), table[0]


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_records_what_make_fx_records_and_computes_as_eager():
    x, y = torch.randn(12), torch.randn(3)
    with torch.no_grad():
        gm = recorder.record(_program, [x, y])
        want = make_fx(_program, tracing_mode="fake")(x, y)
    assert _targets(gm) == _targets(want)
    consts = [n for n in gm.graph.nodes if n.op == "get_attr"]
    assert [n.target for n in consts] == ["_tensor_constant0", "_tensor_constant1"]
    assert torch.equal(gm._tensor_constant0, torch.from_numpy(TABLE))
    assert torch.ops.aten.lift_fresh_copy.default in _targets(gm)  # torch.tensor(2.0)
    assert torch.ops.aten.add_.Tensor in _targets(gm)
    for n in gm.graph.nodes:
        if n.op != "output":  # split_with_sizes: a list of values
            val = n.meta["val"]
            assert all(isinstance(v, torch.Tensor) for v in (val if isinstance(val, list) else [val]))
    for got, ref in zip(gm(x, y), _program(x, y), strict=True):  # eager torch on real tensors
        torch.testing.assert_close(got, ref)
        assert got.dtype == ref.dtype


def test_placeholders_and_values_match_the_examples():
    gm = recorder.record(lambda a, b: (a @ b,), [torch.zeros(2, 3), torch.zeros(3, 4, dtype=torch.float32)])
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert [n.name for n in ph] == ["arg0_1", "arg1_1"]
    (mm,) = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert tuple(mm.meta["val"].shape) == (2, 4) and mm.meta["val"].device.type == "cpu"


def test_higher_order_op_raises_needs_make_fx():
    def fn(x):
        if not recorder.active():
            raise AssertionError("expected to run under the recorder")
        raise recorder.NeedsMakeFx("here")

    with pytest.raises(recorder.NeedsMakeFx):
        recorder.record(fn, [torch.zeros(2)])
    assert not recorder.active()


@pytest.fixture
def no_make_fx(monkeypatch):
    """build_graph may not fall back to make_fx."""

    def refuse(*a, **k):
        raise AssertionError("make_fx used")

    monkeypatch.setattr(torch_backend, "make_fx", refuse)


def test_straight_line_and_counted_loop_use_the_recorder(no_make_fx):
    assert_same(lambda x: jax.nn.softmax(x * 2.0) + X.sum(), X)
    assert_same(lambda x: lax.fori_loop(0, 5, lambda i, c: c * 1.5 + i, x), X)  # unrolled


def test_data_dependent_loop_falls_back_to_make_fx():
    f = lambda x: lax.while_loop(lambda c: c.sum() < 10.0, lambda c: c + 1.0, x)  # noqa: E731
    tm = converter.from_jax(f, X).to_torch()
    targets = _targets(tm.graph_module)
    assert while_loop_exact_grad in targets
    np.testing.assert_allclose(tm(torch.from_numpy(X)).numpy(), np.asarray(jax.jit(f)(X)), rtol=1e-6)


def test_outer_fake_mode_uses_make_fx():
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert recorder.can_record()
    with FakeTensorMode():
        assert not recorder.can_record()


def test_branches_go_to_make_fx_before_tracing(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("recorder used")

    monkeypatch.setattr(recorder, "record", refuse)
    f = lambda p, x: lax.cond(p, lambda v: v * 2.0, lambda v: v - 1.0, x)  # noqa: E731
    assert_same(f, np.bool_(False), X)


def _views_and_fresh(x, y):
    """Views (transpose, expand, slice, select, a view of a view), fresh results (a
    constructor, broadcasting, a tuple result, a dtype change) and an in-place op."""
    t = x.reshape(3, 4).t()[1:3]  # view, permute, slice: a strided view with an offset
    s = t.select(1, 2).expand(4, 2)
    values, indices = torch.max(t + y[None, :].double(), dim=1)
    z = torch.full((2, 3), 1.5, dtype=torch.float64)
    z.mul_(2)
    return s.contiguous(), values, indices, z, x.unsqueeze(0)[:, 2:].sum(1, keepdim=True)


def _meta_of(gm):
    out = []
    for n in gm.graph.nodes:
        vals = n.meta.get("val")
        for v in vals if isinstance(vals, (list, tuple)) else [vals]:
            if isinstance(v, torch.Tensor):
                out.append((n.op, tuple(v.shape), v.stride(), v.storage_offset(), v.dtype, v.device))
    return out


def test_remembered_fake_results_are_the_fake_modes(monkeypatch):
    """The recorder's remembered fake results (views rebuilt with as_strided, fresh tensors
    of the remembered metadata) carry the metadata make_fx's fake mode computes: on a first
    trace (results computed by the mode and remembered) and a second (rebuilt)."""
    x, y = torch.randn(12, dtype=torch.float64), torch.randn(3)
    with torch.no_grad():
        want = make_fx(_views_and_fresh, tracing_mode="fake")(x, y)
    monkeypatch.setattr(recorder, "_RESULTS", {})
    with torch.no_grad():
        first = recorder.record(_views_and_fresh, [x, y])
        remembered = len(recorder._RESULTS)
        second = recorder.record(_views_and_fresh, [x, y])
    assert remembered >= 10 and len(recorder._RESULTS) == remembered  # the second trace only rebuilt
    assert _targets(first) == _targets(second) == _targets(want)
    assert _meta_of(first) == _meta_of(second) == _meta_of(want)
    strided = [m for m in _meta_of(second) if m[3] != 0]
    assert strided  # a view with a storage offset was rebuilt
    for got, ref in zip(second(x, y), _views_and_fresh(x, y), strict=True):
        torch.testing.assert_close(got, ref)


def _indexed(x, i, m):
    """``aten.index.Tensor`` with integer indices (a None among them) and with a mask."""
    return x[i], x[:, i[:2]], x[m]


def test_index_results_are_remembered_unless_a_mask_indexes(monkeypatch):
    """``aten.index.Tensor`` with integer indices has a result shape known from the
    arguments' metadata: remembered and rebuilt on a second trace with make_fx's metadata;
    a boolean mask's result shape depends on its values: never remembered."""
    x, i, m = torch.randn(3, 4), torch.tensor([2, 0, 1]), torch.tensor([True, False, True])
    with torch.no_grad():
        want = make_fx(_indexed, tracing_mode="fake")(x, i, m)
    monkeypatch.setattr(recorder, "_RESULTS", {})
    with torch.no_grad():
        first = recorder.record(_indexed, [x, i, m])
        keys = [k[1][0][1] for k in recorder._RESULTS]  # each key's op
        second = recorder.record(_indexed, [x, i, m])
    assert keys.count(torch.ops.aten.index.Tensor) == 2  # the two integer indexings, not the mask
    assert _targets(first) == _targets(second) == _targets(want)
    assert _meta_of(first) == _meta_of(second) == _meta_of(want)
    for got, ref in zip(second(x, i, m), _indexed(x, i, m), strict=True):
        torch.testing.assert_close(got, ref)


def test_a_constant_is_a_buffer_and_raises_no_warning(recwarn):
    # a get_attr of a plain attribute warns "no underlying reference" in the owning GraphModule
    c = torch.arange(3.0)
    gm = recorder.record(lambda x: (x * c,), [torch.ones(3)])
    assert [str(w.message) for w in recwarn] == []
    assert dict(gm.named_buffers()) == {"_tensor_constant0": c} and "_tensor_constant0" not in gm.state_dict()
    torch.testing.assert_close(gm(torch.full((3,), 2.0))[0], 2 * c)


def _layers(x, w):
    """Two identical layers (the same ops on the same metadata twice): broadcasts,
    elementwise ops, a matmul, a transpose, a reduction and a splat constant."""
    for _ in range(2):
        x = jax.numpy.tanh(x @ w + 1.0).T.T * 2.0 - x.sum(1, keepdims=True)
    return x


def test_replayed_ops_give_the_graph_their_rules_record(monkeypatch):
    """The calls the rules of REPLAYED_OPS record are remembered per op and operand
    metadata, then replayed: a conversion replaying (the second layer, and every op of a
    second conversion) gives the graph, node values and results of one running every rule."""
    x, w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), np.eye(4, dtype=np.float32)
    module = converter.from_jax(_layers, x, w)
    replays = []
    replay = recorder.Recorder._replay
    monkeypatch.setattr(recorder.Recorder, "_replay", lambda *a: replays.append(1) or replay(*a))
    monkeypatch.setattr(recorder, "_TEMPLATES", {})
    monkeypatch.setattr(recorder, "REPLAYED_OPS", frozenset())
    want = module.to_torch().graph_module
    assert not recorder._TEMPLATES and not replays
    monkeypatch.undo()
    monkeypatch.setattr(recorder.Recorder, "_replay", lambda *a: replays.append(1) or replay(*a))
    monkeypatch.setattr(recorder, "_TEMPLATES", {})
    first = module.to_torch()
    within = len(replays)
    second = module.to_torch()
    templates = [t for t in recorder._TEMPLATES.values() if t is not None]
    assert within >= 4 and len(templates) >= 5  # the second layer replayed the first's ops
    assert len(replays) - within >= within + len(templates)  # every op of the second conversion
    for got in (first.graph_module, second.graph_module):
        assert got.code == want.code
        assert _meta_of(got) == _meta_of(want)
    args = [torch.from_numpy(x), torch.from_numpy(w)]
    assert torch.equal(second(*args), module.to_torch()(*args))
    np.testing.assert_allclose(second(*args).numpy(), np.asarray(jax.jit(_layers)(x, w)), rtol=1e-5)


def test_a_rule_registered_in_place_of_another_is_run_not_replayed(monkeypatch):
    """The replayed ATen calls of an op belong to the rule that recorded them: after a
    conversion recorded ``stablehlo.tanh``, a rule put in its place (a test's broken one, a
    user's) runs on the next conversion instead of the remembered calls."""
    from converter.backends.torch.registry import TORCH_RULES

    x = np.linspace(-1, 1, 6, dtype=np.float32)
    m = converter.from_jax(lambda v: jax.numpy.tanh(v) * 2, x)
    np.testing.assert_allclose(m.to_torch()(torch.from_numpy(x)).numpy(), np.tanh(x) * 2, rtol=1e-6)
    monkeypatch.setitem(TORCH_RULES._rules, "stablehlo.tanh", lambda interp, op, v: torch.sin(v))
    np.testing.assert_allclose(m.to_torch()(torch.from_numpy(x)).numpy(), np.sin(x) * 2, rtol=1e-6)


def test_fake_tensors_are_built_lean_where_that_equals_the_constructor(monkeypatch):
    """The recorder's fake tensors skip ``FakeTensor``'s constructor exactly when a tensor
    built without it equals the constructor's (type, attributes, dispatch keys, metadata):
    on the pinned torch they do, and the lean build is taken; else the constructor is."""
    from converter import _torch_internal as ti

    monkeypatch.setattr(ti, "_LEAN_FAKE", [None, {}])  # the first use checks again
    cpu = torch.device("cpu")
    with ti.FakeTensorMode() as mode:
        got = ti.new_fake_tensor(mode, ti.meta_empty_strided((2, 3), (3, 1), torch.float32), cpu)
        want = ti.FakeTensor(mode, ti.meta_empty_strided((2, 3), (3, 1), torch.float32), cpu)
    same = type(got) is type(want) and got.__dict__ == want.__dict__
    same = same and torch._C._dispatch_keys(got) == torch._C._dispatch_keys(want)
    meta = lambda t: (t.shape, t.stride(), t.dtype, t.device, t.requires_grad)  # noqa: E731
    assert meta(got) == meta(want)
    assert ti._LEAN_FAKE[0] is same


def test_fake_tensors_off_the_cpu_keep_their_device(monkeypatch):
    """The lean build is checked for CPU only: a fake tensor for another device (meta here)
    comes from ``FakeTensor``'s constructor and reports that device, as one rebuilt from a
    meta tensor does (``fake_from_meta``); a CPU one reports the CPU."""
    from converter import _torch_internal as ti

    monkeypatch.setattr(ti, "_LEAN_FAKE", [None, {}])
    cpu, meta = torch.device("cpu"), torch.device("meta")
    with ti.FakeTensorMode() as mode:
        on_cpu = ti.new_fake_tensor(mode, ti.meta_empty_strided((2, 3), (3, 1), torch.float32), cpu)
        on_meta = ti.new_fake_tensor(mode, ti.meta_empty_strided((2, 3), (3, 1), torch.float32), meta)
        rebuilt = ti.fake_from_meta(mode, ti.meta_empty_strided((3,), (1,), torch.int64), meta)
        rebuilt_cpu = ti.fake_from_meta(mode, ti.meta_empty_strided((3,), (1,), torch.int64), cpu)
    assert (on_cpu.device, on_meta.device, rebuilt.device, rebuilt_cpu.device) == (cpu, meta, meta, cpu)
    assert all(ti.is_fake(t) for t in (on_cpu, on_meta, rebuilt, rebuilt_cpu))
    assert (rebuilt.shape, rebuilt.dtype) == ((3,), torch.int64)
