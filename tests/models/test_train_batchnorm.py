"""examples/train_batchnorm.py: a BatchNorm CNN trained by jax.grad + optax matches torch's
training, running statistics included."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

_PATH = Path(__file__).parents[2] / "examples" / "train_batchnorm.py"
_spec = importlib.util.spec_from_file_location("train_batchnorm", _PATH)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


@pytest.fixture(scope="module")
def result():
    return example.compare(example.STEPS)


def test_losses_and_running_stats_match_torch(result):
    r = result
    assert len(r["jax"]) == example.STEPS == 50
    assert r["jax"][-1] < 0.1 * r["jax"][0]  # it actually trains
    assert r["loss_max_rel"] < 1e-5, r["loss_max_rel"]
    assert r["stats_max_rel"] < 1e-5, r["stats_max_rel"]
    assert int(r["state"]["bn2.num_batches_tracked"]) == 50


def test_trained_state_loads_back_into_torch(result):
    model, ref = result["model"], result["reference"]
    for (name, p), (_, q) in zip(model.state_dict().items(), ref.state_dict().items(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)
    x = torch.from_numpy(example.data(1)[0][:8])
    model.eval(), ref.eval()
    with torch.no_grad():  # eval mode uses the running statistics the training produced
        np.testing.assert_allclose(model(x).numpy(), ref(x).numpy(), rtol=1e-4, atol=1e-5)
