"""StableHLO → torch cases written for mutants that survived the mutation run (CONTRIBUTING.md,
*Mutation testing*; ``tools/mutation/survivors.toml`` names the mutant each one kills),
compared with ``jax.jit`` of the source function."""

import jax.numpy as jnp
import numpy as np
from jax import lax

from .helpers import assert_same

A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_pad_by_one_on_the_high_side():
    """High padding of exactly one element (and a low one of one) on each dim."""
    assert_same(lambda a: lax.pad(a, jnp.float32(-2), [(0, 1, 0), (1, 1, 0), (1, 0, 0)]), A)
