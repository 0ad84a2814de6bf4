"""examples/train_torch_with_jax.py: torch model trained by jax.grad + optax matches torch."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

_PATH = Path(__file__).parents[2] / "examples" / "train_torch_with_jax.py"
_spec = importlib.util.spec_from_file_location("train_torch_with_jax", _PATH)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_losses_match_torch_and_params_load_back(opt):
    r = example.compare(opt)
    assert len(r["jax"]) == example.STEPS == 50
    assert r["jax"][-1] < 0.6 * r["jax"][0]  # it actually trains
    assert r["max_rel"] < 1e-4, r["max_rel"]
    # the JAX-trained parameters, loaded into torch, equal the torch-trained ones
    for (name, p), (_, q) in zip(
        r["model"].state_dict().items(), r["reference"].state_dict().items(), strict=True
    ):
        torch.testing.assert_close(p, q, rtol=1e-3, atol=1e-5, msg=name)
    x = torch.from_numpy(r["x"])
    np.testing.assert_allclose(
        r["model"](x).detach().numpy(), r["reference"](x).detach().numpy(), rtol=1e-3, atol=1e-5
    )
