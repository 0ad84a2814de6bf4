"""call_jax (JAX in torch autograd) and call_torch (torch in jax.jit/grad/vmap)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import converter
from converter import embed


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


def test_call_jax_crosses_without_copies(monkeypatch):
    seen = []
    orig_in, orig_out = embed.to_jax_array, embed.to_torch_tensor

    def spy_in(t):
        a = orig_in(t)
        seen.append(("in", t.data_ptr(), a.unsafe_buffer_pointer()))
        return a

    def spy_out(a):
        t = orig_out(a)
        seen.append(("out", a.unsafe_buffer_pointer(), t.data_ptr()))
        return t

    monkeypatch.setattr(embed, "to_jax_array", spy_in)
    monkeypatch.setattr(embed, "to_torch_tensor", spy_out)
    x, ignored = torch.randn(8), torch.randn(5)
    converter.call_jax(lambda a, b: a * 3, x, ignored)
    assert [s[0] for s in seen] == ["in", "out"]  # the ignored input is never converted
    assert all(src == dst for _, src, dst in seen)
    assert seen[0][1] == x.data_ptr()


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
    import frontends.torch

    conversions = []
    orig = frontends.torch.from_torch
    monkeypatch.setattr(frontends.torch, "from_torch", lambda *a, **k: conversions.append(1) or orig(*a, **k))
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
