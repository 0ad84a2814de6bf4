"""ONNX op-rule cases written for mutants that survived the mutation run (README, *Mutation
testing*; ``tools/mutation/survivors.toml`` names the mutant each one kills), against
onnxruntime."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node  # noqa: E402

X = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)


def test_elu_without_alpha_takes_the_default():
    """Elu's ``alpha`` attribute omitted: the schema's default 1.0 (the node suite's default
    run has only the case with an explicit alpha)."""
    check_node("Elu", {"x": X})
