"""Host placement and devices in the torch backend (issue 4, parts 2 and 5): host-placed calls
compute on CPU, host memory kinds live on CPU, everything else on the module's device; inputs
are never moved implicitly.

This machine has no GPU, so a copy to ``cpu`` is no copy on a CPU module. The graph structure
is tested on modules traced for ``meta`` (real tensors, no data) and, through fake tensors, for
``cuda:0``; numbers are tested on CPU.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from converter.backends.torch import TorchInterpreter, build_graph, to_torch
from converter.backends.torch.native import aten_target
from jax.experimental.compute_on import compute_on
from jax.sharding import SingleDeviceSharding
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

import converter
from converter import mlir
from converter.errors import ConversionError, SignatureMismatchError
from converter.placement import is_host

HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
W = np.full((2, 3), 0.5, np.float32)
aten = torch.ops.aten


@compute_on("device_host")
@jax.jit
def _host_fn(y):
    return jnp.sin(y) * 2 + 1


def placed(x, w):
    """``x`` arrives in pinned host memory; the sine runs on the host; result 0 goes back to
    pinned host memory."""
    x = jax.device_put(x, jax.memory.Space.Device)
    z = _host_fn(jnp.tanh(x * w))
    return jax.device_put(z * w, HOST), z.sum()


@pytest.fixture(scope="module")
def module():
    m = converter.from_jax(placed, jax.device_put(X, HOST), W)
    assert [s.memory_kind for s in m.signature.inputs] == ["pinned_host", None]
    assert m.signature.outputs[0].memory_kind == "pinned_host"
    assert m.signature.host_functions == ("_host_fn",)
    return m


def _copies(gm):
    return [n for n in gm.graph.nodes if aten_target(n) is aten._to_copy.default]


def _device(node):
    return node.meta["val"].device.type


def test_outputs_match_and_host_results_on_cpu(module):
    tm = to_torch(module)
    got = tm(torch.from_numpy(X), torch.from_numpy(W))
    want = jax.jit(placed)(jax.device_put(X, HOST), W)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=1e-6)
    assert got[0].device.type == "cpu"
    assert not _copies(tm.graph_module)  # on a CPU module nothing needs to move


def test_gradient_through_the_host_region(module):
    w = torch.from_numpy(W).requires_grad_()
    to_torch(module)(torch.from_numpy(X), w)[1].backward()
    want = jax.grad(lambda w: jax.jit(placed)(jax.device_put(X, HOST), w)[1])(W)
    np.testing.assert_allclose(w.grad.numpy(), np.asarray(want), rtol=1e-5)


def test_graph_copies_exactly_around_the_host_region(module):
    gm = build_graph(module, "meta")
    source = lambda n: n.name if n.op == "placeholder" else aten_target(n)  # noqa: E731
    copies = [(source(n.args[0]), _device(n)) for n in _copies(gm)]
    assert copies == [
        ("arg0_1", "meta"),  # pinned_host argument, computed on the device
        (aten.tanh.default, "cpu"),  # into the host call
        (aten.add.Tensor, "meta"),  # out of it
        (aten.mul.Tensor, "cpu"),  # pinned_host result
    ]
    order = list(gm.graph.nodes)
    start, end = order.index(_copies(gm)[1]), order.index(_copies(gm)[2])
    ops = [n for n in order if n.op == "call_function" and aten_target(n) is not aten._to_copy.default]
    on_cpu = {n for n in ops if _device(n) == "cpu"}
    assert on_cpu == set(ops) & set(order[start:end])  # the host region, and only it, on CPU
    assert aten.sin.default in {aten_target(n) for n in on_cpu}
    assert {aten_target(n) for n in ops if _device(n) == "meta"} >= {aten.tanh.default, aten.sum.dim_IntList}


def test_cuda_graph_structure_with_fake_tensors(module):
    with FakeTensorMode():  # no GPU here: trace for cuda:0 on fake tensors
        gm = build_graph(module, "cuda:0")
    devices = {n.name: _device(n) for n in gm.graph.nodes if "val" in n.meta}
    assert devices["arg0_1"] == "cpu" and devices["arg1_1"] == "cuda"
    assert [_device(n) for n in _copies(gm)] == ["cuda", "cpu", "cuda"]
    sin = next(n for n in gm.graph.nodes if aten_target(n) is aten.sin.default)
    assert _device(sin) == "cpu"
    factories = [n for n in gm.graph.nodes if aten_target(n) is aten.full.default]
    assert {str(n.kwargs["device"]) for n in factories} == {"cpu", "cuda:0"}  # host constants on CPU
    # the pinned_host result is copied into page-locked memory
    (pinned,) = [n for n in gm.graph.nodes if aten_target(n) is aten.empty_like.default]
    assert pinned.kwargs["pin_memory"] is True and str(pinned.kwargs["device"]) == "cpu"


def test_export_and_compile_keep_placement(module):
    args = (torch.from_numpy(X), torch.from_numpy(W))
    tm = to_torch(module)
    ep = torch.export.export(tm, args)
    for g, w in zip(ep.module()(*args), tm(*args), strict=True):
        torch.testing.assert_close(g, w)
    compiled = torch.compile(tm, backend="aot_eager")
    for g, w in zip(compiled(*args), tm(*args), strict=True):
        torch.testing.assert_close(g, w)
    meta = torch.export.export(to_torch(module, device="meta"), (args[0], args[1].to("meta")))
    got = [str(n.kwargs["device"]) for n in meta.graph.nodes if aten_target(n) is aten._to_copy.default]
    assert got == ["meta", "cpu", "meta", "cpu"]


def test_consecutive_host_calls_do_not_round_trip():
    def twice(x):
        return _host_fn(_host_fn(jnp.cos(x))) + 1

    m = converter.from_jax(twice, X)
    assert len(m.signature.host_functions) == 1
    gm = build_graph(m, "meta")
    assert [_device(n) for n in _copies(gm)] == ["cpu", "meta"]
    got = to_torch(m)(torch.from_numpy(X))
    np.testing.assert_allclose(got.numpy(), np.asarray(jax.jit(twice)(X)), rtol=1e-6)


def test_host_ops_of_a_module_read_without_passes():
    def loose(x):  # compute_on without an inner jit: the host attribute on loose ops
        with compute_on("device_host"):
            y = jnp.sin(x) * 3
        return jnp.cos(y).sum()

    raw = converter.from_stablehlo(jax.jit(loose).lower(X).as_text(), normalize=False)  # no passes run
    assert raw.signature.host_functions == ()
    gm = to_torch(raw, device="meta").graph_module
    assert [_device(n) for n in _copies(gm)] == ["cpu", "meta"]
    assert {_device(n) for n in gm.graph.nodes if aten_target(n) is aten.sin.default} == {"cpu"}
    got = to_torch(raw)(torch.from_numpy(X))
    np.testing.assert_allclose(got.numpy(), np.asarray(loose(X)), rtol=1e-6)


def test_host_ops_inside_a_loop_body():
    def loop(x):  # host-marked ops inside a while region: outlined into a host call there
        def body(c):
            with compute_on("device_host"):
                step = jnp.sin(c) + 2  # >= 1
            return c + step * 1.5  # grows: the loop ends

        return jax.lax.while_loop(lambda c: c.sum() < 50, body, x)

    m = converter.from_jax(loop, X)
    (while_op,) = [op for op in mlir.walk_ops(mlir.main_function(m.mlir)) if op.name == "stablehlo.while"]
    assert [op.name for op in mlir.walk_ops(while_op) if is_host(op)] == ["func.call"]
    gm = to_torch(m, device="meta").graph_module
    graphs = [g for g in gm.modules() if isinstance(g, torch.fx.GraphModule) and g is not gm]
    copies = [str(n.kwargs["device"]) for g in graphs for n in _copies(g) if "device" in n.kwargs]
    # in the loop body: the carried value and the hoisted constant 2 into the host call, the sum out
    assert copies == ["cpu", "cpu", "meta"]
    sin = [n for g in graphs for n in g.graph.nodes if aten_target(n) is aten.sin.default]
    assert [_device(n) for n in sin] == ["cpu"]
    got = to_torch(m)(torch.from_numpy(X))
    np.testing.assert_allclose(got.numpy(), np.asarray(jax.jit(loop)(X)), rtol=1e-6)


def test_constants_are_stored_on_the_device():
    c = np.array([1.0, 5.0, 2.0], np.float32)

    def f(x):
        return x * c + _host_fn(x * c[::-1])

    m = converter.from_jax(f, X[0])
    tm = to_torch(m, device="meta")
    constants = {name: b.device.type for name, b in tm.graph_module.named_buffers()}
    assert "meta" in constants.values()
    copied = {n.args[0].op for n in _copies(tm.graph_module)}
    assert "get_attr" not in copied and len(_copies(tm.graph_module)) == 2
    got = to_torch(m)(torch.from_numpy(X[0]))
    np.testing.assert_allclose(got.numpy(), np.asarray(jax.jit(f)(X[0])), rtol=1e-6)


def test_parameters_placed_and_host_memory_parameter_on_cpu():
    def f(params, x):
        w = jax.device_put(params["w"], jax.memory.Space.Device)
        return x @ w + params["b"]

    params = {"w": jax.device_put(np.ones((3, 2), np.float32), HOST), "b": np.arange(2, dtype=np.float32)}
    m = converter.from_jax(f, X[0], params=params)
    tm = to_torch(m, device="meta")
    assert tm.device == torch.device("meta")
    assert tm.params_w.device.type == "cpu" and tm.params_b.device.type == "meta"
    out = tm(torch.zeros(3, device="meta"))  # runs: no host call, w copied to the device
    assert out.device.type == "meta" and out.shape == (2,)
    cpu = to_torch(m)
    np.testing.assert_allclose(cpu(X[0]).detach().numpy(), X[0] @ np.ones((3, 2)) + params["b"], rtol=1e-6)


def test_inputs_are_never_moved(module):
    tm = to_torch(module)
    with pytest.raises(SignatureMismatchError, match=r"args\[1\]: input is on meta, but the module is on"):
        tm(torch.from_numpy(X), torch.from_numpy(W).to("meta"))
    on_meta = to_torch(module, device="meta")
    with pytest.raises(SignatureMismatchError, match=r"args\[0\]: input is on meta, but memory kind pinned"):
        on_meta(torch.from_numpy(X).to("meta"), torch.from_numpy(W).to("meta"))
    with pytest.raises(SignatureMismatchError, match=r"args\[1\]: input is on cpu"):
        on_meta(torch.from_numpy(X), torch.from_numpy(W))


def test_moved_module_raises_naming_the_parameter():
    m = converter.from_torch(torch.nn.Linear(3, 2), (torch.zeros(1, 3),))
    tm = m.to_torch()
    tm.to("meta")
    with pytest.raises(ConversionError, match="parameter weight is on meta, but the module was converted"):
        tm(torch.zeros(1, 3, device="meta"))


def _offload(x):
    """``x * 2`` to pinned host memory and back to the device; also returned from host memory."""
    y = jax.device_put(x * 2, jax.memory.Space.Host)
    return jax.device_put(y, jax.memory.Space.Device) + x, y


@pytest.fixture(scope="module")
def offloaded():
    """``_offload`` as exported for CUDA, where ``device_put`` inside ``jit`` is an
    ``annotate_device_placement`` custom call; both stay after normalization (the first is
    read by the second)."""
    text = jax.export.export(jax.jit(_offload), platforms=["cuda"])(X).mlir_module()
    m = converter.from_stablehlo(text)
    assert m.text().count("annotate_device_placement") == 2
    return m


def test_annotate_device_placement_numbers(offloaded):
    """Through ``to_torch`` (a placer) and through a bare interpreter (no placer: the
    placement is the identity)."""
    want = jax.jit(_offload)(X)
    got = to_torch(offloaded)(torch.from_numpy(X))
    bare = TorchInterpreter(offloaded.mlir).run(torch.from_numpy(X))
    for g, b, w in zip(got, bare, want, strict=True):
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=1e-6)
        np.testing.assert_allclose(b.numpy(), np.asarray(w), rtol=1e-6)
    assert got[1].device.type == "cpu"


def test_annotate_device_placement_copies(offloaded):
    gm = build_graph(offloaded, "meta")
    (copy,) = _copies(gm)  # to host memory; the way back reuses the device original
    assert aten_target(copy.args[0]) is aten.mul.Tensor and _device(copy) == "cpu"
    (add,) = [n for n in gm.graph.nodes if aten_target(n) is aten.add.Tensor]
    assert copy.args[0] in add.args and _device(add) == "meta"
    with FakeTensorMode():
        gm = build_graph(offloaded, "cuda:0")
    (pinned,) = [n for n in gm.graph.nodes if aten_target(n) is aten.empty_like.default]  # page-locked copy
    assert pinned.kwargs["pin_memory"] is True and str(pinned.kwargs["device"]) == "cpu"


def test_device_primitives():
    """``same_device`` reads a missing index as 0 and tells types and indices apart;
    ``home`` is CPU for both host memory kinds; ``Placer.to`` keeps tuples and lists, leaves
    values already there (and non-tensors) alone, and a value copied away and back is its
    original; inside ``Placer.on`` factory ops default to that device, ``current`` says so, and
    both are restored after."""
    from converter.backends.torch.placement import CPU, Placer, home, resolve_device, same_device

    from converter.signature import LeafSpec

    cuda0, cuda1, meta = torch.device("cuda", 0), torch.device("cuda", 1), torch.device("meta")
    assert same_device(torch.device("cuda"), cuda0) and same_device(cuda0, torch.device("cuda"))
    assert not same_device(cuda0, cuda1) and not same_device(torch.device("cuda"), cuda1)
    assert (
        not same_device(CPU, meta) and not same_device(CPU, cuda0) and same_device(CPU, torch.device("cpu"))
    )
    assert resolve_device(None) == CPU and resolve_device("meta") == meta
    for kind, want in [("pinned_host", CPU), ("unpinned_host", CPU), ("device", meta), (None, meta)]:
        assert home(LeafSpec("x", (2,), "float32", memory_kind=kind), meta) == want, kind

    placer = Placer(meta)
    x = torch.ones(2)
    assert placer.to(x, CPU) is x and placer.to(3, meta) == 3
    moved = placer.to(x, meta)
    assert moved.device == meta and placer.to(moved, CPU) is x  # the original, no second copy
    pair = placer.to((x, [x]), meta)
    assert type(pair) is tuple and type(pair[1]) is list and pair[1][0].device == meta
    assert placer.current == meta
    with placer.on(CPU):
        assert placer.current == CPU and torch.zeros(1).device == CPU
    with placer.on(meta):
        assert torch.zeros(1).device == meta
    assert placer.current == meta and torch.zeros(1).device == CPU
    with Placer(CPU).on(meta):  # a CPU module computing elsewhere
        assert torch.zeros(1).device == meta


def test_placer_main_moves_host_memory_arguments_and_results():
    """``Placer.main`` copies host-memory arguments to the module's device before running and
    host-memory results to CPU after (the others stay where they are); on CUDA a
    ``pinned_host`` result is copied into page-locked memory, an ``unpinned_host`` one not."""
    from converter.backends.torch.placement import CPU, Placer

    from converter.signature import LeafSpec

    cuda = torch.device("cuda", 0)
    specs = [LeafSpec("a", (2,), "float32", memory_kind=k) for k in ("pinned_host", None, "unpinned_host")]
    seen = []

    def run(*args):
        seen.extend(a.device for a in args)
        return [args[0] * 2, args[1] + 1, args[1] - 1]

    with FakeTensorMode():  # no GPU here: trace for cuda:0 on fake tensors
        x, y = torch.ones(2), torch.ones(2, device=cuda)
        gm = make_fx(lambda x, y: Placer(cuda).main(run, [x, y], specs[:2], specs))(x, y)
    assert seen[-2:] == [cuda, cuda]
    outs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    assert [a.meta["val"].device for a in outs] == [CPU, cuda, CPU]
    (pinned,) = [n for n in gm.graph.nodes if n.target is aten.empty_like.default]
    assert pinned.kwargs["pin_memory"] is True and pinned in outs[0].all_input_nodes  # result 0's
