"""A small MLP: ``Linear → ReLU → Linear → GELU → Linear``.

``factory()`` follows the CLI's ``path/to/file.py:factory`` contract and returns
``(model, example_args)``: a model in eval mode and a ``(x,)`` tuple with ``x`` of shape
``(4, 16)``, float32.
"""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """``(B, d_in) float32 → (B, d_out) float32``."""

    def __init__(self, d_in: int = 16, d_hidden: int = 32, d_out: int = 8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x))
        x = nn.functional.gelu(self.fc2(x))
        return self.fc3(x)


def factory() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The MLP with seeded random weights, and an example input of shape ``(4, 16)``."""
    torch.manual_seed(0)
    model = MLP().eval()
    return model, (torch.randn(4, 16),)
