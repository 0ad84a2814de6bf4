"""call_jax (JAX in torch autograd) and call_torch (torch in jax.jit/grad/vmap)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import converter
from converter.tools import embed


def test_call_jax_pytree_statics_and_gradients():
    calls = []

    def f(x, d, scale, act):
        calls.append(act)
        y = jnp.sin(x) * d["w"] * scale
        return {"y": jnp.tanh(y) if act == "tanh" else y, "idx": (d["idx"] + 1,)}

    torch.manual_seed(0)
    x = torch.randn(4, requires_grad=True)
    w = torch.randn(4, requires_grad=True)
    d = {"w": w, "idx": torch.arange(3), "unused": torch.ones(2), "none": None}
    out = converter.call_jax(f, x, d, 2.0, "tanh")
    ref = torch.tanh(torch.sin(x) * w * 2.0)
    torch.testing.assert_close(out["y"], ref)
    torch.testing.assert_close(out["idx"][0], torch.arange(3) + 1)
    assert isinstance(out["idx"], tuple) and out["idx"][0].dtype == torch.int64
    out["y"].sum().backward()
    gx, gw = torch.autograd.grad(ref.sum(), (x, w))
    torch.testing.assert_close(x.grad, gx)
    torch.testing.assert_close(w.grad, gw)
    # statics are part of the cache key; each signature is traced once
    for _ in range(3):
        converter.call_jax(f, x, d, 2.0, "tanh")
    converter.call_jax(f, x, d, 2.0, "none")
    converter.call_jax(f, x, d, 3.0, "none")
    converter.call_jax(f, x[:2], {**d, "w": w[:2]}, 3.0, "none")  # new shapes
    assert calls == ["tanh", "none", "none", "none"]


def test_call_jax_leaves_the_users_own_warnings_alone():
    """``call_jax`` runs per step and holds nothing back itself (``api(hush=False)``): a
    FutureWarning the user's function raises as it is traced reaches the caller."""

    def f(x):
        warnings.warn("user future warning", FutureWarning, stacklevel=1)
        return x * 2

    with pytest.warns(FutureWarning, match="^user future warning$"):
        out = converter.call_jax(f, torch.ones(2))
    torch.testing.assert_close(out, torch.full((2,), 2.0))


def test_call_jax_backward_compiles_once():
    traces = []

    def f(x):
        traces.append(1)
        return (x**2).sum()

    x = torch.ones(3, requires_grad=True)
    for _ in range(4):
        converter.call_jax(f, x).backward()
    assert len(traces) == 1
    torch.testing.assert_close(x.grad, torch.full((3,), 8.0))


def test_call_jax_unsupported_leaf_names_path():
    with pytest.raises(TypeError, match=r"args\[1\]\['mask'\]"):
        converter.call_jax(lambda a, b: a, torch.ones(2), {"mask": np.ones(2)})
    with pytest.raises(TypeError, match=r"kwargs\['k'\]\[0\]"):
        converter.call_jax(lambda a, k: a, torch.ones(2), k=[object()])


def test_dlpack_shares_memory_both_ways():
    t = torch.arange(6, dtype=torch.float32)
    a = embed.to_jax_array(t)
    assert a.unsafe_buffer_pointer() == t.data_ptr()
    back = embed.to_torch_tensor(a)
    assert back.data_ptr() == t.data_ptr()
    j = jnp.arange(4.0, dtype=jnp.float32) * 2
    assert embed.to_torch_tensor(j).data_ptr() == j.unsafe_buffer_pointer()


def _spy_dlpack(monkeypatch):
    """Record every crossing of call_jax's per-call path: ("in", pointer) for an input taken
    by DLPack or as a NumPy view, ("out", pointer) for an output given back by DLPack."""
    from converter import _jax_internal

    if not _jax_internal.FAST_DLPACK:
        pytest.skip("this jaxlib has no direct DLPack entry points")
    seen = []
    orig_in, orig_out = _jax_internal.cpu_array_from_dlpack, _jax_internal.cpu_array_to_dlpack
    orig_numpy = torch.Tensor.numpy

    def spy_numpy(t, *args, **kwargs):
        seen.append(("in", t.data_ptr()))
        return orig_numpy(t, *args, **kwargs)

    def spy_in(capsule, device):
        a = orig_in(capsule, device)
        seen.append(("in", a.unsafe_buffer_pointer()))
        return a

    def spy_out(a):
        seen.append(("out", a.unsafe_buffer_pointer()))
        return orig_out(a)

    monkeypatch.setattr(_jax_internal, "cpu_array_from_dlpack", spy_in)
    monkeypatch.setattr(_jax_internal, "cpu_array_to_dlpack", spy_out)
    monkeypatch.setattr(torch.Tensor, "numpy", spy_numpy)
    return seen


def test_call_jax_inputs_share_the_tensors_memory():
    """Every way an input crosses (a NumPy view on first sight, a DLPack import when the same
    unchanged tensor comes again, the kept import after that; bfloat16 by DLPack) shares the
    tensor's memory: a write to the tensor while ``fn`` runs (from a host callback ordered
    before the read) is what ``fn`` reads."""
    target = []

    def poke():
        target[0].fill_(7)
        return np.float32(0)

    def f(x):
        return x + jax.pure_callback(poke, jax.ShapeDtypeStruct((), np.float32)).astype(x.dtype)

    for dtype in (torch.float32, torch.bfloat16):
        for x in [torch.zeros(16, dtype=dtype), torch.zeros(16, dtype=dtype)]:
            for _ in range(3):  # first sight, second sight, kept
                target[:] = [x]
                x.zero_()
                y = converter.call_jax(f, x)
                torch.testing.assert_close(y, torch.full((16,), 7, dtype=dtype))


def test_call_jax_crosses_without_copies(monkeypatch):
    seen = _spy_dlpack(monkeypatch)
    f = lambda a, b: a * 3  # noqa: E731
    for _ in range(3):  # the first call (which picks the path) and the per-call path
        seen.clear()
        x, ignored = torch.randn(8), torch.randn(5)
        y = converter.call_jax(f, x, ignored)
        # one exchange per kept input and per output; the ignored input is never converted
        assert seen == [("in", x.data_ptr()), ("out", y.data_ptr())]
        torch.testing.assert_close(y, x * 3)


def test_call_jax_imports_an_unchanged_tensor_once(monkeypatch):
    """A weight passed call after call crosses once; writing to it (its version counter) or
    giving it new storage makes the next call import it again, so results stay right."""
    seen = _spy_dlpack(monkeypatch)
    f = lambda x, w: x @ w  # noqa: E731
    w = torch.nn.Parameter(torch.randn(4, 4))
    for _ in range(3):
        x = torch.randn(2, 4)
        seen.clear()
        torch.testing.assert_close(converter.call_jax(f, x, w), x @ w)
    assert [k for k, _ in seen] == ["in", "out"]  # x only: w was kept from an earlier call
    with torch.no_grad():
        w.mul_(2.0)
    torch.testing.assert_close(converter.call_jax(f, x, w), x @ w)
    w.data = torch.randn(4, 4)
    torch.testing.assert_close(converter.call_jax(f, x, w), x @ w)
    buf = torch.randn(32)  # storage moved below, then above, the memory it was imported from
    for lo, hi in ((16, 32), (0, 16), (16, 32)):
        w.data = buf[lo:hi].view(4, 4)
        for _ in range(2):  # seen, then imported
            torch.testing.assert_close(converter.call_jax(f, x, w), x @ w)
    other = torch.randn(4, 4)  # another tensor of the same signature
    torch.testing.assert_close(converter.call_jax(f, x, other), x @ other)
    other.t_()  # same storage and shape, other strides
    torch.testing.assert_close(converter.call_jax(f, x, other), x @ other)


def test_call_jax_public_dlpack_path(monkeypatch):
    """Without jaxlib's direct DLPack entry points (another jaxlib, or not a CPU tensor),
    call_jax crosses by the public jax.dlpack / torch.from_dlpack, still without copies."""
    from converter import _jax_internal

    monkeypatch.setattr(_jax_internal, "FAST_DLPACK", False)
    f = lambda x, w: jnp.tanh(x @ w)  # noqa: E731
    x, w = torch.randn(2, 3), torch.randn(3, 3, requires_grad=True)
    for _ in range(2):
        w.grad = None
        y = converter.call_jax(f, x, w)
        ref = torch.tanh(x @ w)
        torch.testing.assert_close(y, ref)
        y.sum().backward()
        torch.testing.assert_close(w.grad, torch.autograd.grad(ref.sum(), w)[0])
    assert embed.to_jax_array(x).unsafe_buffer_pointer() == x.data_ptr()


def test_call_jax_passes_jax_arrays_through(monkeypatch):
    seen = _spy_dlpack(monkeypatch)
    f = lambda x, d: jnp.sin(x) * d["scale"] + d["shift"]  # noqa: E731
    x = torch.randn(5, requires_grad=True)
    d = {"scale": jnp.arange(5.0, dtype=jnp.float32), "shift": jnp.float32(1.0)}
    for _ in range(2):
        seen.clear()
        x.grad = None
        y = converter.call_jax(f, x, d)
        assert [k for k, _ in seen] == ["in", "out"]  # only the torch tensor crosses
        ref = torch.sin(x) * torch.arange(5.0) + 1.0
        torch.testing.assert_close(y, ref)
        y.sum().backward()
        torch.testing.assert_close(x.grad, torch.cos(x.detach()) * torch.arange(5.0))
    with pytest.raises(TypeError, match=r"args\[1\]\['m'\]: unsupported type ndarray"):
        converter.call_jax(f, x, {"m": np.ones(2)})


def _second_derivative_case():
    def f(x, w):
        return jnp.sum(jnp.sin(x * w) ** 2 * x)

    torch.manual_seed(0)
    x = torch.randn(4, dtype=torch.float64)
    w = torch.randn(4, dtype=torch.float64)
    xj, wj = jnp.asarray(x.numpy()), jnp.asarray(w.numpy())
    grad = jax.grad(f)(xj, wj)
    hess_x = jax.grad(lambda a: jnp.sum(jax.grad(f)(a, wj)))(xj)  # d/dx sum(df/dx)
    return f, x, w, grad, hess_x


def test_call_jax_double_backward_matches_jax():
    f, x, w, grad, hess_x = _second_derivative_case()
    x.requires_grad_()
    w.requires_grad_()
    (gx,) = torch.autograd.grad(converter.call_jax(f, x, w), x, create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), grad, rtol=1e-12)
    assert gx.requires_grad  # the backward recorded a graph (a call_jax of the VJP)
    hx, hw = torch.autograd.grad(gx.sum(), (x, w))
    np.testing.assert_allclose(hx.numpy(), hess_x, rtol=1e-12)
    hw_jax = jax.grad(lambda b: jnp.sum(jax.grad(f)(jnp.asarray(x.detach().numpy()), b)))(
        jnp.asarray(w.detach().numpy())
    )
    np.testing.assert_allclose(hw.numpy(), hw_jax, rtol=1e-12)


def test_call_jax_under_torch_func():
    f, x, w, grad, hess_x = _second_derivative_case()
    g = torch.func.grad(lambda a: converter.call_jax(f, a, w))(x)
    np.testing.assert_allclose(g.numpy(), grad, rtol=1e-12)
    gg = torch.func.grad(lambda a: torch.func.grad(lambda b: converter.call_jax(f, b, w))(a).sum())(x)
    np.testing.assert_allclose(gg.numpy(), hess_x, rtol=1e-12)
    out, vjp_fn = torch.func.vjp(lambda a: converter.call_jax(jnp.sin, a), x)
    torch.testing.assert_close(vjp_fn(torch.full_like(x, 2.0))[0], 2 * torch.cos(x))
    jac = torch.func.jacrev(lambda a: converter.call_jax(jnp.sin, a))(x)  # vmap of the vjp
    torch.testing.assert_close(jac, torch.diag(torch.cos(x)))
    xs = torch.randn(3, 4, dtype=torch.float64)
    traces = []

    def traced(a, b):
        traces.append(a.shape)
        return f(a, b)

    batched = torch.func.vmap(lambda a: converter.call_jax(traced, a, w))(xs)
    fj = jax.vmap(lambda a: f(a, jnp.asarray(w.numpy())))
    np.testing.assert_allclose(batched.numpy(), fj(jnp.asarray(xs.numpy())), rtol=1e-12)
    assert all(s == (4,) for s in traces)  # jax.vmap of the per-example function, not a loop
    per_example = torch.func.vmap(torch.func.grad(lambda a: converter.call_jax(f, a, w)))(xs)
    want = jax.vmap(jax.grad(f), in_axes=(0, None))(jnp.asarray(xs.numpy()), jnp.asarray(w.numpy()))
    np.testing.assert_allclose(per_example.numpy(), want, rtol=1e-12)
    # in_dims other than 0 and an unbatched argument
    cols = torch.func.vmap(lambda a, b: converter.call_jax(lambda p, q: p * q, a, b), in_dims=(1, None))(
        xs, w[:3]
    )
    torch.testing.assert_close(cols, xs.T * w[:3])


class _CallsJax(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.w = torch.nn.Parameter(torch.randn(4, 4) * 0.3)

    def forward(self, x):
        out = converter.call_jax(
            lambda h, p: {"y": jnp.tanh(h @ p["w"]), "n": jnp.sum(h > 0)}, self.lin(x), {"w": self.w}
        )
        return out["y"].sum() * 2 + out["n"]


def _compile_check(backend: str):
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model, x = _CallsJax(), torch.randn(3, 4)
    ref = model(x)
    ref.backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=False)
    out = compiled(x)  # fullgraph: call_jax is one op in Dynamo's graph, no graph break
    out.backward()
    torch.testing.assert_close(out, ref)
    for p, g in zip(model.parameters(), want, strict=True):
        torch.testing.assert_close(p.grad, g)
    compiled(x)
    assert counters["stats"]["unique_graphs"] == 1


def test_call_jax_under_torch_compile():
    _compile_check("aot_eager")


def _sizes_fn(x, y):
    z = jnp.concatenate([x, y], 0)  # x.shape[0] + y.shape[0] rows
    return jnp.tanh(z[: z.shape[0] // 2]) * 2, jnp.float32(x.shape[0]) + y.sum()


def test_call_jax_under_torch_compile_with_symbolic_sizes():
    """``dynamic=True`` (as automatic dynamic shapes after a size changes): one graph serves
    every size, the op's output sizes are expressions of the input sizes (``(n + m) // 2``
    rows), values and gradients as ``jax.jit``/``jax.grad`` of the function give them; a
    function with Python control flow on a size specializes (a guard) and stays right."""
    from torch._dynamo.utils import counters

    def loss(x, y):
        a, b = converter.call_jax(_sizes_fn, x, y)
        return a.sum() * b + a.shape[0]

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True, dynamic=True)
    rng = np.random.default_rng(0)
    for n, m in ((3, 4), (6, 9)):
        x, y = (rng.standard_normal((k, 5)).astype(np.float32) for k in (n, m))  # 5: no duck size
        xt = torch.tensor(x, requires_grad=True)
        out = compiled(xt, torch.tensor(y))
        (grad,) = torch.autograd.grad(out, xt)

        def ref(x, y):
            a, b = _sizes_fn(x, y)
            return a.sum() * b + a.shape[0]

        np.testing.assert_allclose(out.item(), float(jax.jit(ref)(x, y)), rtol=1e-5)
        np.testing.assert_allclose(grad.numpy(), jax.grad(ref)(x, y), rtol=1e-5, atol=1e-6)
    assert counters["stats"]["unique_graphs"] == 1

    def branchy(x):
        return x * 2 if x.shape[0] > 4 else x - 1

    compiled = torch.compile(lambda x: converter.call_jax(branchy, x), backend="aot_eager", dynamic=True)
    for n in (3, 6):
        assert compiled(torch.ones(n)).tolist() == [2.0 if n > 4 else 0.0] * n


def test_call_jax_under_torch_compile_compiles_once_in_a_fresh_thread():
    """The converter's per-thread state exists with all its attributes in every thread: a
    function calling ``call_jax`` under ``torch.compile`` in a thread that never called the
    converter compiles once, not again on its second call (a guard on an attribute the
    first call created failed)."""
    import threading

    from torch._dynamo.utils import counters

    def f(x):
        return converter.call_jax(jnp.sin, x) * 2

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(f, backend="eager", fullgraph=True)
    x = torch.arange(4.0)
    outs: list = []
    worker = threading.Thread(target=lambda: outs.extend(compiled(x) for _ in range(2)))
    worker.start()
    worker.join()
    assert len(outs) == 2 and all(torch.allclose(o, torch.sin(x) * 2) for o in outs)
    assert counters["stats"]["unique_graphs"] == 1


def test_call_jax_op_refuses_another_process_handle():
    """A graph kept by torch.compile's on-disk caches from another process names entries by
    that process's handles: never served by a wrong entry here."""
    from converter.errors import ConversionError

    with pytest.raises(ConversionError, match="not a call_jax signature traced by this process"):
        embed._call_jax_op([torch.ones(2)], "0123456789ab:0")


@pytest.mark.slow
def test_call_jax_under_torch_compile_inductor():
    _compile_check("inductor")  # ~20 s on 2 busy cores


@pytest.fixture
def x64_off():
    """The process default, x64 off, set process-wide (conftest turns it on for the suite),
    so that a call switching it on globally is seen."""
    jax.config.update("jax_enable_x64", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", True)


def test_call_jax_scopes_x64_without_changing_the_process_flag(x64_off):
    """Without jax_enable_x64, 64-bit tensors keep their precision (their signature runs
    under jax.enable_x64(True)) and the flag stays off around the call."""
    assert not jax.config.jax_enable_x64
    x = torch.tensor([1.0 + 1e-12, 2.0], dtype=torch.float64, requires_grad=True)
    big = torch.tensor([2**40], dtype=torch.int64)
    y, n = converter.call_jax(lambda a, b: (a**3, b + 1), x, big)
    assert not jax.config.jax_enable_x64
    assert y.dtype == torch.float64 and float(y[0].detach() - 1) > 2e-12  # 3e-12 in float64, 0 in float32
    assert n.dtype == torch.int64 and int(n) == 2**40 + 1
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x)
    assert h.dtype == torch.float64 and h.tolist() == [6.0 * x[0].item(), 12.0]
    assert converter.call_jax(lambda a: a * 2, torch.ones(2)).dtype == torch.float32
    assert not jax.config.jax_enable_x64 and jnp.ones(1).dtype == jnp.float32


def test_call_jax_cache_key_of_static_values():
    traces = []

    def f(x, s):
        traces.append(s)
        return x * (2 if s is True else 3)

    x = torch.ones(2)
    assert float(converter.call_jax(f, x, True)[0]) == 2
    assert float(converter.call_jax(f, x, 1)[0]) == 3  # 1 == True, but another signature
    converter.call_jax(f, x, float("nan"))
    converter.call_jax(f, x, float("nan"))  # nan != nan, still one signature
    assert len(traces) == 3


def test_call_jax_cache_of_a_function_goes_with_it():
    """``call_jax``'s per-function cache is dropped when the function is collected (its
    entry would otherwise stay for the process)."""
    import gc

    def f(x):
        return x * 2

    converter.call_jax(f, torch.ones(2))
    ident = id(f)
    assert ident in embed._JAX_BY_ID
    del f
    gc.collect()
    assert ident not in embed._JAX_BY_ID


def test_call_jax_ignored_inputs_get_no_gradient():
    a = torch.ones(3, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    converter.call_jax(lambda a, b: (a * 2).sum(), a, b).backward()
    torch.testing.assert_close(a.grad, torch.full((3,), 2.0))
    assert b.grad is None


def test_call_jax_float64_and_int_outputs():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    y, n = converter.call_jax(lambda x: (x * 2, (x > 0).astype(jnp.int64).sum()), x)
    assert y.dtype == torch.float64 and n.dtype == torch.int64 and not n.requires_grad
    assert int(n) == int((x > 0).sum())
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0, dtype=torch.float64))


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x, scale=1.0):
        return torch.tanh(self.lin(x)) * scale


def test_call_torch_under_jit_grad_vmap(monkeypatch):
    import converter.frontends.torch

    conversions = []
    orig = converter.frontends.torch.from_torch
    monkeypatch.setattr(
        converter.frontends.torch, "from_torch", lambda *a, **k: conversions.append(1) or orig(*a, **k)
    )
    torch.manual_seed(0)
    m = Small()
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    want = m(torch.from_numpy(x), 2.0).detach().numpy()
    got = jax.jit(lambda a: converter.call_torch(m, a, 2.0))(x)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # grad wrt the input matches torch autograd
    xt = torch.from_numpy(x).requires_grad_()
    m(xt, 2.0).sum().backward()
    g = jax.grad(lambda a: converter.call_torch(m, a, 2.0).sum())(x)
    np.testing.assert_allclose(g, xt.grad.numpy(), rtol=1e-5)
    # vmap over a batch of inputs: same per-example signature
    xs = np.stack([x, 2 * x])
    out = jax.vmap(lambda a: converter.call_torch(m, a, 2.0))(xs)
    np.testing.assert_allclose(out[1], m(torch.from_numpy(2 * x), 2.0).detach().numpy(), rtol=1e-5)
    assert len(conversions) == 1  # one signature → one conversion
    converter.call_torch(m, x, 3.0)
    assert len(conversions) == 2  # a new static value is a new signature
    # parameters are read at call time
    with torch.no_grad():
        m.lin.bias.add_(1.0)
    np.testing.assert_allclose(
        converter.call_torch(m, x, 2.0), m(torch.from_numpy(x), 2.0).detach().numpy(), rtol=1e-6
    )
    assert len(conversions) == 2


def test_call_torch_plain_function():
    def f(a, b):
        return torch.relu(a) @ b

    a = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3) - 2
    b = jnp.ones((3, 4), jnp.float32)
    np.testing.assert_allclose(converter.call_torch(f, a, b), jax.nn.relu(a) @ b)


def test_call_torch_under_jax_export_symbolic_shapes():
    """``jax.export`` of a function calling torch code with symbolic dimensions: the torch
    code is exported with a ``torch.export.Dim`` per dimension variable (its constraints'
    bounds), so one exported program runs every size, as eager torch computes it; the
    shape-only i64 arithmetic of the dynamic module does not count as 64-bit data (x64 off)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3)

    def f(x, mask):  # two inputs sharing the dimension b
        return converter.call_torch(lambda a, m: lin(a) * m[:, None], x, mask)

    b, s = jax.export.symbolic_shape("b, s", constraints=["b <= 64"])
    with jax.enable_x64(False):
        exp = jax.export.export(jax.jit(f))(
            jax.ShapeDtypeStruct((b, 4), jnp.float32), jax.ShapeDtypeStruct((b,), jnp.float32)
        )
        assert str(exp.out_avals[0]) == "float32[b,3]"
        rng = np.random.default_rng(0)
        for n in (1, 7):
            x, m = rng.standard_normal((n, 4), np.float32), rng.standard_normal(n).astype(np.float32)
            want = (lin(torch.from_numpy(x)) * torch.from_numpy(m)[:, None]).detach().numpy()
            np.testing.assert_allclose(exp.call(x, m), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(converter.InputValueError, match="2\\*s is an expression"):
        jax.jit(lambda x: converter.call_torch(torch.relu, x)).trace(
            jax.ShapeDtypeStruct((2 * s, 4), jnp.float32)
        )


def test_call_jax_honours_custom_vjp_and_compiles_backward_once():
    bwd_traces = []

    @jax.custom_vjp
    def clip_grad(x):
        return x

    def bwd(_, g):
        bwd_traces.append(1)
        return (jnp.clip(g, -0.1, 0.1),)

    clip_grad.defvjp(lambda x: (x, None), bwd)

    def f(x):
        return (clip_grad(x) * 5.0).sum()

    for _ in range(3):
        x = torch.ones(3, requires_grad=True)
        converter.call_jax(f, x).backward()
        torch.testing.assert_close(x.grad, torch.full((3,), 0.1))  # jax.grad's answer, not 5
    assert len(bwd_traces) == 1
    np.testing.assert_allclose(jax.grad(f)(jnp.ones(3)), 0.1)


def test_call_jax_without_grad_and_none_outputs():
    with torch.no_grad():
        out = converter.call_jax(lambda x: {"y": x * 2, "none": None}, torch.ones(2, requires_grad=True))
    assert out["none"] is None and not out["y"].requires_grad
    torch.testing.assert_close(out["y"], torch.full((2,), 2.0))


def test_call_jax_bfloat16_gradients():
    b = torch.randn(4, dtype=torch.bfloat16, requires_grad=True)
    out = converter.call_jax(lambda a: a * a, b)
    assert out.dtype == torch.bfloat16 and out.requires_grad
    out.sum().backward()
    torch.testing.assert_close(b.grad, 2 * b.detach())


def test_call_jax_complex_gradients_follow_torch_convention():
    torch.manual_seed(0)
    c = torch.randn(3, dtype=torch.complex64, requires_grad=True)
    w = torch.randn(3, dtype=torch.complex64, requires_grad=True)
    out = converter.call_jax(lambda a, b: jnp.sin(a) * b, c, w)
    (out.abs() ** 2).sum().backward()
    got = (c.grad.clone(), w.grad.clone())
    c.grad = w.grad = None
    ((torch.sin(c) * w).abs() ** 2).sum().backward()
    torch.testing.assert_close(got[0], c.grad)
    torch.testing.assert_close(got[1], w.grad)


def test_call_torch_follows_eager_dtype_rules():
    """torch.export's meta kernels accept a float64 input into a float32 Linear; eager torch
    refuses it, and so does call_torch, naming the argument, without running the model's
    state forward or touching the process's x64 flag or torch's RNG."""
    from converter.errors import SignatureMismatchError

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)).train()
    x64 = np.ones((5, 3), np.float64)
    with pytest.raises(RuntimeError, match="same dtype"):
        model(torch.from_numpy(x64))  # eager torch
    model[1].reset_running_stats()
    flag, rng = jax.config.jax_enable_x64, torch.get_rng_state()
    with pytest.raises(
        SignatureMismatchError, match=r"args\[0\] \(float64\): the module's parameters are float32"
    ):
        converter.call_torch(model, x64)
    assert jax.config.jax_enable_x64 == flag
    assert torch.equal(torch.get_rng_state(), rng)
    assert int(model[1].num_batches_tracked) == 0 and float(model[1].running_mean.abs().max()) == 0


class _CastsInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.lin(x.float())


@jax.enable_x64(True)  # float64 inputs: call_torch never switches x64 on itself
def test_call_torch_accepts_what_eager_torch_accepts():
    model = _CastsInput()
    x = np.random.default_rng(0).standard_normal((2, 3))  # float64, cast inside the model
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(np.asarray(converter.call_torch(model, x)), want, rtol=1e-6, atol=1e-6)


def test_call_jax_applies_lazy_conjugate_and_negative_bits():
    """A conjugate or negative view (torch keeps the bit, not the values) crosses with its
    values on every path: the trace, a first sight, a second sight, the kept import."""
    z = torch.randn(3, dtype=torch.complex64)
    f = lambda a: a * 2  # noqa: E731
    conj, neg = z.conj(), z.conj().imag
    assert conj.is_conj() and neg.is_neg()
    for view in (conj, neg):
        for _ in range(4):
            torch.testing.assert_close(converter.call_jax(f, view), view.resolve_conj().resolve_neg() * 2)


def test_call_jax_new_strided_tensors_cross_with_their_values():
    """Tensors new to each call cross as NumPy views even when strided (transposed, sliced
    with an offset, expanded with stride 0: jit copies those), conjugate or negative views
    (resolved first), or requiring grad under ``no_grad``: each call computes on its own
    tensor's values, whatever the previous call passed."""
    f = lambda a: a * 2  # noqa: E731
    base = torch.randn(8, 8)
    views = [base.t()[:4, :4], base[1:5, 2:6], base[::2, 1::2], base[0, :4].expand(4, 4)]
    views.append(torch.randn(4, 4, requires_grad=True))
    with torch.no_grad():
        for view in views * 2:
            torch.testing.assert_close(converter.call_jax(f, view), view.detach() * 2)
    z = torch.randn(3, 3, dtype=torch.complex64)
    for view in (z.conj(), z.t().conj(), z.conj().imag, torch.randn(3, 3, dtype=torch.complex64).conj()):
        torch.testing.assert_close(converter.call_jax(f, view), view.resolve_conj().resolve_neg() * 2)


def test_call_jax_bound_method_traces_once():
    """``self.f`` is a new method object at each access: the cache lives as long as the
    object, so a module calling ``call_jax(self.f, x)`` in its forward traces once."""
    traces = []

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 3.0

        def jax_fn(self, x):
            traces.append(1)
            return jnp.sin(x) * self.scale

        def forward(self, x):
            return converter.call_jax(self.jax_fn, x)

    model, x = Scaled(), torch.randn(4)
    for _ in range(3):
        torch.testing.assert_close(model(x), torch.sin(x) * 3.0)
    assert len(traces) == 1
    other = Scaled()
    other.scale = 5.0  # another object: its own cache, its own trace
    torch.testing.assert_close(other(x), torch.sin(x) * 5.0)
    assert len(traces) == 2


# --------------------------------------------------------------------------- hardening: helpers


def test_unaliased_clones_only_outputs_sharing_memory():
    """A custom op must not return views: an output sharing an input's memory, or an earlier
    output's, is cloned (same values); others and empty tensors are returned as they are."""
    a, b, c = torch.arange(4.0), torch.arange(3.0), torch.ones(2)
    empty1, empty2 = torch.empty(0), torch.empty(0)
    outs = embed.unaliased([a, torch.empty(0)], [a, c, c, a[:2], empty1, empty2, b])
    assert outs[1] is c and outs[4] is empty1 and outs[5] is empty2 and outs[6] is b
    for i, src in ((0, a), (2, c), (3, a[:2])):
        assert outs[i] is not src and outs[i].data_ptr() != src.data_ptr()
        torch.testing.assert_close(outs[i], src)


def test_example_sizes_are_distinct_at_least_two_and_within_bounds():
    """The example sizes torch.export traces a call_torch with: distinct, at least 2 (torch
    specializes 0 and 1), at least the lower bound and at most the upper one."""
    dims = {"a": (0, None), "b": (1, None), "c": (0, None), "d": (10, None), "e": (0, 2), "f": (0, 3)}
    sizes = embed._example_sizes(dims)
    assert list(sizes) == list(dims)
    for name, (lo, hi) in dims.items():
        assert sizes[name] >= max(lo, 2) and (hi is None or sizes[name] <= hi), (name, sizes)
    unbounded = [sizes[n] for n in "abcd"]
    assert len(set(unbounded)) == 4
    assert sizes["e"] == 2 and sizes["f"] == 3  # clamped to the upper bound


def test_symbol_names_of_torch_size_expressions():
    assert embed._symbol_name("s0") == "s0"  # a symbol keeps its name
    name = embed._symbol_name("2*s0 + 1")
    assert name.startswith("_e") and name.isidentifier() and len(name) == 14
    assert embed._symbol_name("2*s0 + 1") == name != embed._symbol_name("2*s0 + 2")


def test_positional_key_flags_a_tensor_that_requires_grad():
    x, w = torch.ones(2), torch.ones(3, dtype=torch.float64, requires_grad=True)
    key, needs_grad = embed._positional_key((x, w))
    assert key == ((torch.Size([2]), torch.float32, True), (torch.Size([3]), torch.float64, True))
    assert needs_grad is True
    assert embed._positional_key((x,))[1] is False
    assert embed._positional_key((x, 2.0)) is None  # not all tensors: the general path


def test_call_torch_refuses_64_bit_types_when_x64_is_off(x64_off):
    """call_torch never turns jax_enable_x64 on: torch code computing in float64 with it off
    is refused, naming the 64-bit arguments, where JAX would narrow them to 32 bits."""
    x = np.ones(2, np.float64)
    with pytest.raises(
        converter.ConversionError, match=r"64-bit types \(args\[0\] \(float64\), .*jax_enable_x64"
    ):
        converter.call_torch(lambda a: a * 2, x)
    y = np.array([1.5, -2.0], np.float32)  # 32-bit code runs as it is
    np.testing.assert_array_equal(converter.call_torch(lambda a: a * 2, y), y * 2)
    assert not jax.config.jax_enable_x64


def test_call_jax_first_order_backward_uses_the_forward_residuals():
    """A plain ``backward()`` (no graph recorded, no ``torch.func``) takes the gradients from
    the residuals the forward pass kept in JAX: the VJP is not traced again as an entry of
    its own (which double backward needs)."""

    def f(x):
        return (x**3).sum()

    x = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    converter.call_jax(f, x).backward()
    (entry,) = embed._JAX_BY_ID[id(f)][1].values()
    assert entry._vjp is None
    torch.testing.assert_close(x.grad, 3 * x.detach() ** 2)


def test_live_inputs_keep_what_effects_and_outputs_read():
    """The inputs a jaxpr still reads: those its outputs depend on, and those an equation
    with an effect (``jax.debug.callback``) reads even when no output does; a literal
    output reads none."""

    def f(x, y, z, w):
        jax.debug.callback(lambda v: None, y)
        return x * 2, 3.0

    closed = jax.make_jaxpr(f)(*(np.float32(1),) * 4)
    assert embed._live_inputs(closed.jaxpr) == [0, 1]
    assert embed._live_inputs(jax.make_jaxpr(lambda x, y: (y + 1, 2.0))(1.0, 2.0).jaxpr) == [1]


def test_call_jax_never_serves_another_functions_entries_under_a_reused_id(monkeypatch):
    """``call_jax``'s cache is keyed by ``id(fn)`` and checked against its owner: entries left
    under the id by another function (an id reused before the old owner's entry was dropped)
    are not served; the function is traced for itself."""

    def double(x):
        return x * 2

    def triple(x):
        return x * 3

    x = torch.tensor([1.0, -2.0])
    converter.call_jax(double, x)
    stale = embed._JAX_BY_ID[id(double)]
    monkeypatch.setitem(embed._JAX_BY_ID, id(triple), (lambda: double, dict(stale[1])))
    for _ in range(2):  # the general path, then the per-call one
        torch.testing.assert_close(converter.call_jax(triple, x), x * 3)
    assert embed._JAX_BY_ID[id(triple)][0]() is triple
