"""StableHLO → torch rules, one module per op family; importing this package registers all."""

from . import chlo, control_flow, elementwise, indexing, lapack, linalg, normalization, reductions, shape  # noqa: F401
