"""ONNX op rules, one module per op family; importing this package registers them all."""

from . import (  # noqa: F401
    contrib,
    control_flow,
    elementwise,
    indexing,
    linalg,
    ml,
    nn,
    quantize,
    reductions,
    resize,
    rnn,
    sampling,
    sequence,
    shape,
    signal,
    training,
)
