"""``from_torch``'s parameters are a snapshot of the torch model: bit-exact for every dtype,
contiguous or not, 64-byte aligned; the torch tensors' own memory (made copy-on-write) where
torch allocated it, else one copy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from converter.frontends.torch.convert import _to_numpy

import converter

DTYPES = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int64,
    torch.int8,
    torch.uint8,
    torch.bool,
    torch.complex64,
    torch.float8_e4m3fn,
]


def _bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "scalar", "empty"])
def test_copy_is_bit_exact_aligned_and_independent(dtype, layout):
    torch.manual_seed(0)
    source = {
        "contiguous": torch.randn(5, 7) * 10,
        "transposed": (torch.randn(7, 5) * 10).t(),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 3),
    }[layout]
    t = source.to(dtype) if layout != "transposed" else source.t().to(dtype).t()
    assert t.is_contiguous() == (layout != "transposed")
    want = _bytes(t)
    out = _to_numpy(t)
    assert out.shape == tuple(t.shape) and out.flags.c_contiguous
    assert out.size == 0 or out.ctypes.data % 64 == 0
    assert out.tobytes() == want
    t.copy_(torch.zeros_like(source).to(dtype))  # the torch model changes afterwards
    assert out.tobytes() == want  # a copy, not a view


class _TiedLM(torch.nn.Module):
    """Embedding tied to the output projection, a layer norm, a linear layer and a buffer."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.proj = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 50, bias=False)
        self.head.weight = self.emb.weight
        self.register_buffer("scale", torch.full((16,), 0.5))

    def forward(self, ids):
        return self.head(torch.tanh(self.proj(self.norm(self.emb(ids)) * self.scale)))


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {**dict(model.named_parameters()), **dict(model.named_buffers())}


def test_snapshot_shares_the_torch_memory_until_the_torch_model_changes():
    """``from_torch`` (copy=True) copies no weight: the Module's arrays and the JAX function's
    buffers are the torch tensors' memory. An optimizer step on the torch model afterwards
    leaves the Module and the JAX function as they were (torch copies what it writes)."""
    torch.manual_seed(0)
    model = _TiedLM().eval()
    ids = torch.randint(0, 50, (2, 5))
    before = model(ids).detach().numpy()
    kept = {n: t.detach().clone() for n, t in _state(model).items()}  # a real copy, to compare
    module = converter.from_torch(model, (ids,))
    assert sorted(module.params) == sorted(_state(model))  # the tied head weight is emb.weight
    assert len(module.params) == 6
    for name, arr in module.params.items():
        assert arr.ctypes.data == _state(model)[name].const_data_ptr()  # no copy
        assert not arr.flags.writeable
    f = module.to_jax()
    for name, arr in module.params.items():
        assert f.params[name].unsafe_buffer_pointer() == arr.ctypes.data  # JAX uses it in place
    model(ids).sum().backward()  # reading the weights (forward and backward) copies nothing
    assert all(module.params[n].ctypes.data == t.const_data_ptr() for n, t in _state(model).items())

    torch.optim.SGD(model.parameters(), lr=1.0).step()
    with torch.no_grad():
        model.scale.mul_(3.0)
    for name, t in _state(model).items():
        assert module.params[name].ctypes.data != t.const_data_ptr()  # torch copied on write
        np.testing.assert_array_equal(module.params[name], kept[name].numpy())  # the snapshot did not
        np.testing.assert_array_equal(np.asarray(f.params[name]), kept[name].numpy())
    np.testing.assert_allclose(np.asarray(f(ids.numpy())), before, rtol=1e-5, atol=1e-6)
    assert not np.allclose(model(ids).detach().numpy(), before, atol=1e-3)


def test_converting_twice_shares_one_memory():
    """A second conversion of the same (now copy-on-write) model shares the same memory, and
    does not make torch copy its tensors (``data_ptr()`` would)."""
    model = torch.nn.Linear(64, 32)
    x = torch.randn(2, 64)
    first = converter.from_torch(model, (x,))
    second = converter.from_torch(model, (x,))
    shared = converter.from_torch(model, (x,), copy=False)
    ptr = model.weight.const_data_ptr()
    assert first.params["weight"].ctypes.data == second.params["weight"].ctypes.data == ptr
    assert shared.params["weight"].ctypes.data == ptr
    with torch.no_grad():
        model.weight.zero_()
    assert model.weight.const_data_ptr() != ptr
    assert np.abs(first.params["weight"]).sum() > 0 and np.abs(second.params["weight"]).sum() > 0


def test_a_weight_with_live_views_is_copied_and_its_views_keep_following_it():
    """A weight another tensor or a NumPy array views (which copy-on-write would leave behind
    on the next write, pointing to memory the snapshot frees) is copied; the view keeps
    seeing the model's updates and the snapshot does not."""
    model = torch.nn.Linear(8, 4)
    view = model.weight.detach().numpy()
    want = view.copy()
    module = converter.from_torch(model, (torch.randn(1, 8),))
    assert not np.shares_memory(module.params["weight"], view)
    assert not torch._C._is_cow_tensor(model.weight) and torch._C._is_cow_tensor(model.bias)
    with torch.no_grad():
        model.weight.add_(1.0)
    np.testing.assert_array_equal(view, want + 1.0)
    np.testing.assert_array_equal(module.params["weight"], want)
    shared = converter.from_torch(model, (torch.randn(1, 8),), copy=False)
    assert np.shares_memory(shared.params["weight"], view)  # copy=False never copies


def test_memory_torch_did_not_allocate_is_copied():
    """A parameter over a NumPy array (``torch.from_numpy``: torch cannot make it
    copy-on-write) is copied once, aligned; writing the array afterwards leaves the copy."""
    model = torch.nn.Linear(8, 4, bias=False)
    arr = np.arange(32, dtype=np.float32).reshape(4, 8)
    model.weight = torch.nn.Parameter(torch.from_numpy(arr))
    module = converter.from_torch(model, (torch.randn(1, 8),))
    out = module.params["weight"]
    assert not np.shares_memory(out, arr) and out.ctypes.data % 64 == 0
    arr[:] = -1.0
    np.testing.assert_array_equal(out, np.arange(32, dtype=np.float32).reshape(4, 8))


def test_unaligned_view_is_copied_aligned():
    """A parameter at an offset of its storage that is not 64-byte aligned is copied into an
    aligned array (JAX would copy it otherwise), and the torch tensor stays as it was."""
    storage = torch.randn(8 * 5 + 3)
    model = torch.nn.Linear(8, 5, bias=False)
    model.weight = torch.nn.Parameter(storage[3:].view(5, 8))
    assert model.weight.const_data_ptr() % 64
    module = converter.from_torch(model, (torch.randn(1, 8),))
    out = module.params["weight"]
    assert out.ctypes.data % 64 == 0 and not torch._C._is_cow_tensor(model.weight)
    np.testing.assert_array_equal(out, storage[3:].view(5, 8).numpy())


def _kernel_figure(field: str) -> int:
    """A ``/proc/self/status`` figure in bytes (``VmRSS``, ``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux peak-RSS reset")
def test_from_torch_to_jax_and_a_call_stay_far_below_a_copy_of_the_weights():
    """Peak resident memory of ``from_torch`` + ``to_jax`` + one call on a 256 MiB weight,
    beyond the torch model (the kernel's ``VmHWM``, reset first): a copy of the weight would
    be 1.0x (and so would the transposed weight XLA's matrix-vector product makes unless the
    JAX backend folds the transpose); what remains is torch.export and XLA compilation."""
    small = torch.nn.Linear(4, 4)  # the first conversion of a process imports and sets up more
    converter.from_torch(small, (torch.randn(4, 4),)).to_jax()(np.zeros((4, 4), np.float32))
    model = torch.nn.Linear(8192, 8192, bias=False).eval()
    x = torch.randn(1, 8192)  # one row: XLA's CPU dot would copy W.T (see test_linalg.py)
    nbytes = model.weight.numel() * model.weight.element_size()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM starts again from VmRSS
    base = _kernel_figure("VmRSS")
    f = converter.from_torch(model, (x,)).to_jax()
    out = np.asarray(f(x.numpy()))
    extra = _kernel_figure("VmHWM") - base
    assert extra < 0.25 * nbytes, f"peak {extra / nbytes:.2f}x the weight beyond the model"
    np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=1e-4, atol=1e-4)


def test_lazy_views_and_unaligned_memory_are_copied_as_values():
    """A conjugate or negative view holds the values torch computes from it (its memory holds
    them before the lazy bit); a contiguous tensor starting off a 64-byte boundary is copied
    to an aligned array (a view would make JAX copy it); without ``copy`` a read-only view of
    the tensor's own memory."""
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    conj, neg = z.conj(), z.conj().imag
    assert conj.is_conj() and neg.is_neg()
    np.testing.assert_array_equal(_to_numpy(conj), conj.resolve_conj().numpy())
    np.testing.assert_array_equal(_to_numpy(neg), np.array([-2.0, 4.0], np.float32))
    t = torch.arange(17, dtype=torch.float32)[1:]  # the only tensor of its storage
    assert t.is_contiguous() and t.const_data_ptr() % 64 != 0
    out = _to_numpy(t)
    assert out.ctypes.data % 64 == 0 and out.tolist() == list(range(1, 17))
    t.zero_()
    assert out.tolist() == list(range(1, 17))  # a copy
    view = _to_numpy(t, copy=False)
    assert view.ctypes.data == t.data_ptr() and not view.flags.writeable


def test_training_mode_matters_only_for_dropout_batch_norm_random_or_buffer_updates():
    """``signature.training`` is recorded when the other mode would compute differently:
    dropout with p > 0, batch norm tracking running statistics, a random op, a buffer the
    model updates; not for dropout with p = 0, batch norm without running statistics, an
    ExportedProgram (its mode is unknown)."""
    from converter.frontends.torch.convert import _mode_dependent

    from converter.signature import Mutation

    nn = torch.nn
    assert _mode_dependent(nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1)), None, [])
    assert not _mode_dependent(nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.0)), None, [])
    assert _mode_dependent(nn.BatchNorm1d(2), None, [])
    assert not _mode_dependent(nn.BatchNorm1d(2, track_running_stats=False), None, [])
    assert _mode_dependent(nn.Linear(2, 2), object(), [])
    assert _mode_dependent(nn.Linear(2, 2), None, [Mutation("input", "args[0]"), Mutation("buffer", "b")])
    assert not _mode_dependent(nn.Linear(2, 2), None, [Mutation("input", "args[0]")])
    assert not _mode_dependent(object(), object(), [Mutation("buffer", "b")])
