"""Every write-back path x every input kind x every backend (issue 27).

A module converted from torch that updates state in place (``signature.mutations``: a
buffer and a user input here) is called with each kind of array the backends take: NumPy
(contiguous, a strided view, read-only), torch (contiguous, a strided view, a negative view,
a conjugate view) and JAX arrays. On every backend each combination either updates the
state exactly as eager torch does (the input's own memory, the view's elements only) or
raises ``SignatureMismatchError`` naming the input and leaves every state untouched. Never a
call that returns and silently drops or misplaces the update.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest
import torch

import converter
from converter.errors import SignatureMismatchError
from converter.tools.embed import call_torch

X = np.array([1.0, -2.0, 3.0], np.float32)
START = np.array([5.0, 6.0, -7.0], np.float32)


class AddInto(torch.nn.Module):
    """Updates a buffer and its second input in place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(3))

    def forward(self, x, acc):
        acc.add_(x * 2)
        self.count.add_(x)
        return acc.sum() + x.sum()


class MulInto(torch.nn.Module):
    """Complex in-place update (a conjugate view's write-back must conjugate back)."""

    def forward(self, x, acc):
        acc.mul_(x)
        return acc.abs().sum()


@pytest.fixture(scope="module")
def add_into():
    return converter.from_torch(AddInto(), (torch.ones(3), torch.zeros(3)))


def _kinds():
    """name -> (make the mutated input, whether the backend can write into it per backend)."""

    def strided_np():
        base = np.zeros(6, np.float32)
        base[::2] = START
        return base[::2]

    def readonly_np():
        a = START.copy()
        a.flags.writeable = False
        return a

    def strided_torch():
        base = torch.zeros(6)
        base[::2] = torch.from_numpy(START)
        return base[::2]

    return {
        "numpy": (lambda: START.copy(), {"jax", "torch"}),
        "numpy-strided": (strided_np, {"jax", "torch"}),
        "numpy-readonly": (readonly_np, set()),
        "torch": (lambda: torch.from_numpy(START.copy()), {"torch"}),
        "torch-strided": (strided_torch, {"torch"}),
        "torch-negative-view": (lambda: torch._neg_view(torch.from_numpy(-START)), {"torch"}),
        "jax": (lambda: jnp.asarray(START), set()),
    }


KINDS = _kinds()


def _x_for(kind: str, backend: str):
    """The other input: of the same kind where the backend takes it."""
    return torch.from_numpy(X.copy()) if kind.startswith("torch") and backend == "torch" else X.copy()


def _values(a) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        return a.resolve_neg().resolve_conj().numpy()
    return np.asarray(a)


@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_call_writes_back_or_refuses(add_into, backend, kind):
    make, writable = KINDS[kind]
    fn = add_into.to_jax() if backend == "jax" else add_into.to_torch()
    acc = make()
    base = None
    if kind.endswith("strided"):
        base = acc.base if isinstance(acc, np.ndarray) else acc._base
    base_before = None if base is None else _values(base).copy()

    def count():
        return np.asarray(fn.params["count"]) if backend == "jax" else fn.count.numpy().copy()

    if backend in writable:
        out = fn(_x_for(kind, backend), acc)
        want_acc = START + 2 * X
        np.testing.assert_array_equal(_values(acc), want_acc)
        np.testing.assert_allclose(float(np.asarray(out)), want_acc.sum() + X.sum(), rtol=1e-6)
        np.testing.assert_array_equal(count(), X)
        if base is not None:  # a view: its elements only; the others as they were
            other = np.ones(base_before.shape, bool)
            other[::2] = False
            np.testing.assert_array_equal(_values(base)[other], base_before[other])
        if kind == "torch-negative-view":  # the memory holds the negation, as eager torch leaves it
            np.testing.assert_array_equal(acc.resolve_neg().numpy(), want_acc)
            assert acc.is_neg()
    else:
        before = _values(acc).copy()
        with pytest.raises(SignatureMismatchError, match=r"args\[1\]"):
            fn(_x_for(kind, backend), acc)
        np.testing.assert_array_equal(_values(acc), before)
        np.testing.assert_array_equal(count(), np.zeros(3, np.float32))


def test_eager_torch_agrees_on_the_views():
    """What the matrix asserts is what eager torch does with the same views."""
    for kind in ("torch", "torch-strided", "torch-negative-view"):
        acc = KINDS[kind][0]()
        AddInto()(torch.from_numpy(X.copy()), acc)
        np.testing.assert_array_equal(_values(acc), START + 2 * X)


@pytest.mark.parametrize("kind", ["numpy", "numpy-readonly", "jax"])
def test_jax_apply_mutable_returns_updates_and_writes_nothing(add_into, kind):
    f = add_into.to_jax()
    acc = KINDS[kind][0]()
    out, updates = f.apply(f.params, X.copy(), acc, mutable=True)
    np.testing.assert_array_equal(np.asarray(updates["args[1]"]), START + 2 * X)
    np.testing.assert_array_equal(np.asarray(updates["count"]), X)
    np.testing.assert_array_equal(np.asarray(acc), START)  # pure
    np.testing.assert_array_equal(np.asarray(f.params["count"]), np.zeros(3))


def test_jax_apply_refuses_torch_tensors(add_into):
    f = add_into.to_jax()
    with pytest.raises(SignatureMismatchError, match=r"args\[0\]: a Tensor"):
        f.apply(f.params, torch.from_numpy(X.copy()), START.copy(), mutable=True)


def test_onnx_returns_every_update_as_an_output(add_into):
    session = ort.InferenceSession(add_into.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    acc = START.copy()
    got = dict(zip(names, session.run(None, {"args[0]": X.copy(), "args[1]": acc}), strict=True))
    np.testing.assert_array_equal(got["updated:args[1]"], START + 2 * X)
    np.testing.assert_array_equal(got["updated:count"], X)
    np.testing.assert_array_equal(acc, START)  # onnxruntime never writes its inputs


@pytest.mark.parametrize("kind", ["torch-conj", "numpy"])
def test_complex_update_through_a_conjugate_view(kind):
    """A conjugate view's elements are the conjugates of its memory: the write-back stores
    the conjugate of the new value there, as eager torch's ``mul_`` does."""
    module = converter.from_torch(
        MulInto(), (torch.ones(3, dtype=torch.complex64), torch.ones(3, dtype=torch.complex64))
    )
    x = torch.tensor([1 + 1j, 2, 1j], dtype=torch.complex64)
    base = torch.tensor([1 + 2j, 3 - 1j, 2j], dtype=torch.complex64)
    want = base.clone().conj()
    MulInto()(x, want)
    if kind == "torch-conj":
        acc = base.clone().conj()
        module.to_torch()(x, acc)
        assert acc.is_conj()
        torch.testing.assert_close(acc.resolve_conj(), want.resolve_conj())
        torch.testing.assert_close(acc._base if acc._base is not None else acc.conj(), want.conj())
    else:
        acc = base.clone().conj().resolve_conj().numpy()
        module.to_jax()(x.numpy(), acc)
        np.testing.assert_allclose(acc, want.resolve_conj().numpy(), rtol=1e-6)


def test_call_torch_writes_the_buffer_back_and_refuses_the_input_it_cannot_write():
    """``converter.tools.embed.call_torch`` (torch from JAX): the buffer goes back into the torch
    model; a mutated input must be writable."""
    import jax

    with jax.enable_x64(True):
        model = AddInto()
        acc = START.copy()
        call_torch(model, X.copy(), acc)
        np.testing.assert_array_equal(model.count.numpy(), X)
        np.testing.assert_array_equal(acc, START + 2 * X)
        with pytest.raises(SignatureMismatchError):
            call_torch(model, X.copy(), jnp.asarray(START))
        np.testing.assert_array_equal(model.count.numpy(), X)
