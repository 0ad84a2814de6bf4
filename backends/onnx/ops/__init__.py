"""StableHLO → ONNX rules, one module per op family; importing this package registers all."""

from . import chlo, complex, control_flow, dynamic, elementwise, indexing, lapack, linalg, reductions, shape  # noqa: F401
