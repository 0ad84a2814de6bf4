"""StableHLO → ONNX rules, one module per op family; importing this package registers all."""

from . import (  # noqa: F401
    chlo,
    complex,
    control_flow,
    dynamic,
    elementwise,
    indexing,
    lapack,
    linalg,
    normalization,
    reductions,
    shape,
)
