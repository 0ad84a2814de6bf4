"""Memos and caches keyed on a tensor's identity, with in-place updates on non-contiguous,
conjugate and negative views (issue 27).

* ``converter.call_jax`` remembers the array a torch input crossed as while the tensor is
  unchanged (same object, version counter, storage, strides). A view that crosses as a copy
  (non-contiguous, a conjugate or negative view) was remembered as that copy: a write the
  version counter does not see (through ``.data``, a NumPy view) left the next call
  computing with the old values.
* ``from_torch`` ties parameters and buffers with the same memory, shape, strides and dtype
  (tied weights): a negative or conjugate view of a buffer was tied to the buffer (its
  values taken without the negation/conjugation), and its values were read without its
  lazy bit.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import torch

import converter


def _views():
    """name -> () -> (base tensor, the view passed to the function)."""

    def strided():
        b = torch.arange(12.0).reshape(3, 4)
        return b, b[:, ::2]

    def transposed():
        b = torch.arange(12.0).reshape(3, 4)
        return b, b.T

    def negative():
        b = torch.arange(6.0)
        return b, torch._neg_view(b)

    def conjugate():
        b = torch.arange(6.0).to(torch.complex64) * (1 + 1j)
        return b, b.conj()

    def contiguous():
        b = torch.arange(6.0)
        return b, b

    return {
        "strided": strided,
        "transposed": transposed,
        "negative": negative,
        "conjugate": conjugate,
        "contiguous": contiguous,
    }


VIEWS = _views()


def _add_one_through_data(base, view):
    base.data.add_(1)  # torch's version counter does not see it


def _add_one_through_numpy(base, view):
    if base.is_complex():
        base.numpy()[...] += 1 + 1j  # NumPy writes: not seen either
    else:
        base.numpy()[...] += 1


def _add_one_in_place(base, view):
    with torch.no_grad():
        base.add_(1)


def _add_one_to_the_view(base, view):
    with torch.no_grad():
        view.add_(1)


UPDATES = {
    "data": _add_one_through_data,
    "numpy": _add_one_through_numpy,
    "in_place": _add_one_in_place,
    "view_in_place": _add_one_to_the_view,
}


@pytest.mark.parametrize("update", list(UPDATES))
@pytest.mark.parametrize("view", list(VIEWS))
def test_call_jax_sees_every_update_of_a_view(view, update):
    base, w = VIEWS[view]()

    def fn(w, x):
        return jnp.sum(w * x)

    x = torch.ones(w.shape, dtype=w.dtype)
    for step in range(4):  # first sight, then the memo's import, then its reuse
        got = converter.call_jax(fn, w, x)
        want = (w.resolve_conj().resolve_neg() * x).sum()
        torch.testing.assert_close(got, want, msg=f"call {step}")
        UPDATES[update](base, w)


class TwoViews(torch.nn.Module):
    """Buffers that share memory: a negative view, a conjugate view, a transposed view."""

    def __init__(self):
        super().__init__()
        t = torch.arange(1.0, 5.0).reshape(2, 2)
        c = torch.tensor([[1 + 2j, 3 - 1j], [2j, -1.0]], dtype=torch.complex64)
        self.register_buffer("a", t)
        self.register_buffer("neg", torch._neg_view(t))
        self.register_buffer("tr", t.T)
        self.register_buffer("c", c)
        self.register_buffer("conj", c.conj())

    def forward(self, x):
        return x @ self.a + x @ self.neg * 10 + x @ self.tr * 100, self.c * self.conj + self.conj


def test_views_of_one_buffer_are_not_tied_weights():
    model = TwoViews()
    x = torch.tensor([[1.0, 2.0], [3.0, -1.0]])
    want = model(x)
    module = converter.from_torch(model, (x,))
    assert not module.signature.tied
    for got in (module.to_jax()(x.numpy()), module.to_torch()(x)):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-6)


def test_tied_weights_still_tie():
    """The same tensor under two names (GPT-2's embedding and LM head) stays one parameter."""
    lin = torch.nn.Linear(3, 3, bias=False)
    model = torch.nn.Sequential(lin, torch.nn.ReLU(), lin)
    module = converter.from_torch(model, (torch.randn(2, 3),))
    assert module.signature.tied == {"2.weight": "0.weight"}


def test_snapshot_of_a_view_parameter_ignores_later_updates():
    """``copy=True`` (the default): a view buffer is copied, and in-place updates of its
    base after the conversion leave the module alone."""
    model = TwoViews()
    x = torch.tensor([[1.0, 2.0], [3.0, -1.0]])
    want = [w.clone() for w in model(x)]
    module = converter.from_torch(model, (x,))
    with torch.no_grad():
        model.a.mul_(3)
        model.c.mul_(2)
        model.a.numpy()[...] += 1  # unseen by torch's version counter as well
    for g, w in zip(module.to_jax()(x.numpy()), want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-6)
