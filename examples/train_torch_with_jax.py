"""Train a PyTorch model with ``jax.grad`` and optax, then load the result back into torch.

The torch model is converted once (:func:`converter.from_torch` → ``to_jax``); training is
pure JAX: ``f.apply(params, x)`` is differentiable in ``params`` (a dict keyed by the torch
parameter names), and the trained parameters go back with
``model.load_state_dict(f.state_dict(params))``.

Run ``python examples/train_torch_with_jax.py`` to train with SGD and Adam for 50 steps
each, side by side with the same training in torch (same initialisation, data and
optimizer), and print the largest relative difference of the per-step losses.
"""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch
from torch import nn

import converter

STEPS = 50
LR = {"sgd": 0.05, "adam": 0.01}


class Regressor(nn.Module):
    """``(B, 6) float32 → (B, 2) float32``: Linear → Tanh → Linear → GELU → Linear."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 32)
        self.fc2 = nn.Linear(32, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(nn.functional.gelu(self.fc2(torch.tanh(self.fc1(x)))))


def data(seed: int = 0, n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """A fixed regression problem: ``x`` (n, 6) and ``y`` (n, 2), float32."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = np.stack([np.sin(x[:, 0]) + x[:, 1] * x[:, 2], np.cos(x[:, 3]) - x[:, 4]], axis=1).astype(np.float32)
    return x, y


def train_torch(model: nn.Module, opt: str, x: np.ndarray, y: np.ndarray, steps: int = STEPS) -> list[float]:
    """Reference: the same training in torch. Returns the loss before each step."""
    optim = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}[opt](model.parameters(), lr=LR[opt])
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    losses = []
    for _ in range(steps):
        optim.zero_grad()
        loss = ((model(xt) - yt) ** 2).mean()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    return losses


def train_jax(model: nn.Module, opt: str, x: np.ndarray, y: np.ndarray, steps: int = STEPS):
    """Convert ``model`` once and train it with ``jax.grad`` + optax.

    Returns:
        ``(losses, f, params)``: the loss before each step, the converted
        :class:`converter.backends.jax.JaxFunction`, and the trained parameters by torch name.
    """
    f = converter.from_torch(model, (torch.from_numpy(x),)).to_jax()
    tx = {"sgd": optax.sgd, "adam": optax.adam}[opt](LR[opt])

    def loss_fn(params, x, y):
        return jnp.mean((f.apply(params, x) - y) ** 2)

    @jax.jit
    def step(params, state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    params = dict(f.params)
    state = tx.init(params)
    losses = []
    for _ in range(steps):
        params, state, loss = step(params, state, x, y)
        losses.append(float(loss))
    return losses, f, params


def compare(opt: str, seed: int = 0) -> dict:
    """Train the same initial model both ways; load the JAX-trained parameters back into
    torch. Returns the losses, the worst relative loss difference and the torch model."""
    torch.manual_seed(seed)
    model = Regressor()
    twin = copy.deepcopy(model)
    x, y = data(seed)
    torch_losses = train_torch(twin, opt, x, y)
    jax_losses, f, params = train_jax(model, opt, x, y)
    model.load_state_dict(f.state_dict(params))  # the documented way back to torch
    rel = np.abs(np.array(jax_losses) - np.array(torch_losses)) / np.abs(np.array(torch_losses))
    return {
        "torch": torch_losses,
        "jax": jax_losses,
        "max_rel": float(rel.max()),
        "model": model,
        "reference": twin,
        "x": x,
    }


def main() -> None:
    for opt in ("sgd", "adam"):
        r = compare(opt)
        print(
            f"{opt}: loss {r['jax'][0]:.4f} → {r['jax'][-1]:.4f} in {STEPS} steps; "
            f"max relative difference to torch {r['max_rel']:.2e}"
        )


if __name__ == "__main__":
    main()
