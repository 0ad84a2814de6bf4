"""StableHLO → torch rules, one module per op family; importing this package registers all."""

from . import (  # noqa: F401
    chlo,
    collectives,
    control_flow,
    elementwise,
    indexing,
    lapack,
    linalg,
    normalization,
    placement,
    random,
    reductions,
    shape,
)
