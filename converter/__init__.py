"""Move models and functions between PyTorch, JAX and ONNX through one StableHLO module.

Public API::

    m = converter.from_torch(model, args)        # or from_stablehlo(text)
    f = m.to_jax()                               # f(*inputs), f.apply(params, *inputs)
    m.save("model.shlo"); converter.load("model.shlo")
"""

from __future__ import annotations

from .errors import (
    ConversionError,
    DynamicDimensionError,
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


def from_jax(fn, *example_args, params=None, **example_kwargs) -> Module:
    """See :func:`frontends.jax.from_jax`."""
    from frontends.jax import from_jax as _from_jax

    return _from_jax(fn, *example_args, params=params, **example_kwargs)


def from_onnx(model, **options) -> Module:
    """See :func:`frontends.onnx.from_onnx`."""
    from frontends.onnx import from_onnx as _from_onnx

    return _from_onnx(model, **options)


def call_jax(fn, *args, **kwargs):
    """See :func:`converter.embed.call_jax`."""
    from .embed import call_jax as _call_jax

    return _call_jax(fn, *args, **kwargs)


def call_torch(module_or_fn, *args, **kwargs):
    """See :func:`converter.embed.call_torch`."""
    from .embed import call_torch as _call_torch

    return _call_torch(module_or_fn, *args, **kwargs)


def from_stablehlo(source, **options) -> Module:
    """See :func:`frontends.stablehlo.from_stablehlo`."""
    from frontends.stablehlo import from_stablehlo as _from_stablehlo

    return _from_stablehlo(source, **options)


__all__ = [
    "ConversionError",
    "DynamicDimensionError",
    "LeafSpec",
    "Module",
    "ModuleFormatError",
    "OpConversionError",
    "ParseError",
    "Signature",
    "SignatureMismatchError",
    "UnsupportedOpError",
    "call_jax",
    "call_torch",
    "from_jax",
    "from_onnx",
    "from_stablehlo",
    "from_torch",
    "load",
]
