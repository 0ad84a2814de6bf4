"""Shared test set-up: 64-bit JAX (torch models take int64 inputs) and seeded RNGs."""

import jax
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
