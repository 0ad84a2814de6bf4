"""StableHLO → JAX rules, one module per op family; importing this package registers all."""

from . import (  # noqa: F401
    control_flow,
    dynamic,
    elementwise,
    fft,
    indexing,
    lapack,
    linalg,
    normalization,
    placement,
    random,
    reductions,
    shape,
    sharding,
)
