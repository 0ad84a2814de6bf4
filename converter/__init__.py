"""Move models and functions between PyTorch, JAX and ONNX through one StableHLO module.

Public API::

    m = converter.from_torch(model, args)        # or from_stablehlo(text)
    f = m.to_jax()                               # f(*inputs), f.apply(params, *inputs)
    m.save("model.shlo"); converter.load("model.shlo")
"""

from __future__ import annotations

from .errors import (
    ConversionError,
    ModuleFormatError,
    OpConversionError,
    ParseError,
    SignatureMismatchError,
    UnsupportedOpError,
)
from .module import Module, load
from .signature import LeafSpec, Signature

__version__ = "0.1.0"


def from_torch(model, args=(), kwargs=None, **options) -> Module:
    """See :func:`frontends.torch.from_torch`."""
    from frontends.torch import from_torch as _from_torch

    return _from_torch(model, args, kwargs, **options)


def from_stablehlo(source, **options) -> Module:
    """See :func:`frontends.stablehlo.from_stablehlo`."""
    from frontends.stablehlo import from_stablehlo as _from_stablehlo

    return _from_stablehlo(source, **options)


__all__ = [
    "ConversionError",
    "LeafSpec",
    "Module",
    "ModuleFormatError",
    "OpConversionError",
    "ParseError",
    "Signature",
    "SignatureMismatchError",
    "UnsupportedOpError",
    "from_stablehlo",
    "from_torch",
    "load",
]
