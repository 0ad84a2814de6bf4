"""ATen → JAX rules, one module per op family; importing this package registers all."""

from . import (  # noqa: F401
    control_flow,
    convolution,
    creation,
    elementwise,
    fft,
    fused,
    indexing,
    linalg,
    linalg_decomp,
    linalg_expm,
    linalg_ldl,
    linalg_solve,
    normalization,
    pooling,
    random,
    reductions,
    sampling,
    shape,
    special,
    symbolic,
)
