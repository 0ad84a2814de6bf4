"""StableHLO → JAX rules, one module per op family; importing this package registers all."""

from . import control_flow, elementwise, fft, indexing, lapack, linalg, random, reductions, shape  # noqa: F401
