"""StableHLO → native PyTorch: interpret a :class:`converter.Module` op by op into torch ops.

The implementation lives in :mod:`.module`; this package re-exports its public names."""

from .module import (
    PREPARE,
    TorchInterpreter,
    TorchModule,
    build_graph,
    export_example,
    input_tensor,
    to_torch,
)

__all__ = [
    "TorchModule",
    "TorchInterpreter",
    "to_torch",
    "build_graph",
    "export_example",
    "input_tensor",
    "PREPARE",
]
