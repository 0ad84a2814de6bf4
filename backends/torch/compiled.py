"""A shape-polymorphic :class:`~converter.backends.torch.TorchModule` under ``torch.compile``.

Such a module builds one graph per input shape from its StableHLO (``refine``, then
:func:`~converter.backends.torch.build_graph`), Python that Dynamo cannot trace (MLIR objects). Under
Dynamo its call is one function Dynamo writes into its graph without tracing into it
(``torch.compiler.allow_in_graph``); AOTAutograd then traces that function's body as it
traces any ATen code, on fake inputs (sizes that are ``SymInt``s or ints): the module
interpreted with symbolic sizes (:meth:`TorchModule._run_symbolic`; building the per-shape
graph needs real tensors).
The compiled graph thus holds the module's ATen ops with sizes that are expressions of the
input sizes: one graph serves every size (``dynamic=True`` or torch's automatic dynamic
shapes), inductor fuses its kernels, and autograd (the backward AOTAutograd derives) works as
for torch-written code. Any assumption the symbolic trace makes about the sizes is a guard
of the compiled graph (a new size that breaks it recompiles).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from converter._torch_internal import is_fake


def traceable(module: Any) -> Callable[..., tuple[torch.Tensor, ...]]:
    """The function ``module``'s ``forward`` calls under Dynamo on its ``@main`` arguments
    (parameters first): the outputs as a tuple, computed by symbolic interpretation on fake
    tensors (tracing) and by the per-shape graph on real ones. Registered with
    ``torch.compiler.allow_in_graph`` (a function per module: Dynamo keys it by identity and
    forgets it when it is collected)."""

    def run(*flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if any(is_fake(t) for t in flat):  # traced (Dynamo's fake run, AOTAutograd)
            return tuple(module._run_symbolic(list(flat)))
        return tuple(module._graph(list(flat))(*flat))  # run (backend="eager")

    run.__qualname__ = run.__name__ = "converter_run_module"
    return torch.compiler.allow_in_graph(run)


__all__ = ["traceable"]
