"""A small CNN: conv, batch norm (eval mode), ReLU, max and average pooling, linear.

``factory()`` returns ``(model, (x,))`` with ``x`` an image batch of shape ``(2, 3, 32, 32)``,
float32 (the CLI's ``path/to/file.py:factory`` contract).
"""

from __future__ import annotations

import torch
from torch import nn


class CNN(nn.Module):
    """``(B, 3, 32, 32) float32 → (B, num_classes) float32`` logits."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, kernel_size=3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, stride=1, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AvgPool2d(2),
            nn.Conv2d(16, 16, kernel_size=3, padding=1, groups=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def _randomize_batch_norm(model: nn.Module) -> None:
    """Give batch-norm layers non-trivial running statistics and affine parameters, so a
    conversion that ignored them would not match."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


def factory() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The CNN in eval mode with seeded weights and batch-norm statistics, and an example
    input of shape ``(2, 3, 32, 32)``."""
    torch.manual_seed(0)
    model = CNN()
    _randomize_batch_norm(model)
    return model.eval(), (torch.randn(2, 3, 32, 32),)
