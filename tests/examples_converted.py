"""The torch example models (:mod:`examples.models`) converted once per test process:
``tests/models/test_models.py`` and ``tests/models/test_roundtrip.py`` start from the same conversions."""

from __future__ import annotations

import functools

import converter
from examples import models as example_models


@functools.cache
def torch_example(name: str):
    """``(model, example args, converter.from_torch(model, args))`` of the example ``name``;
    shared, so callers must not change the model's weights or the Module."""
    model, args = example_models.load(name)
    return model, args, converter.from_torch(model, args)
