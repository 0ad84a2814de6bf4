"""Move models and functions between PyTorch, JAX and ONNX through one StableHLO module.

Public API::

    m = converter.from_torch(model, args)        # or from_stablehlo(text)
    f = m.to_jax()                               # f(*inputs), f.apply(params, *inputs)
    m.save("model.shlo"); converter.load("model.shlo")
"""

from __future__ import annotations

import os as _os
import sys as _sys
import typing as _typing


def _quiet_xla_for_cli() -> None:
    """In a ``convert`` process (not ``--verbose``), keep XLA's INFO lines off stderr: the
    variable is read once, when jaxlib loads, which importing this package does."""
    argv = list(getattr(_sys, "orig_argv", _sys.argv))
    cli = _os.path.basename(_sys.argv[0]) == "convert" or any(
        a == "-m" and b in ("converter", "converter.tools.cli") for a, b in zip(argv, argv[1:], strict=False)
    )
    if cli and not {"-v", "--verbose"} & set(argv):
        _os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


_quiet_xla_for_cli()

from ._contract import api  # noqa: E402
from ._version import __version__  # noqa: E402, F401
from .errors import (  # noqa: E402
    ClosedOverParamsWarning,
    ConversionError,
    DataDependentShapeError,
    DistributedError,
    DynamicDimensionError,
    EmbeddedParamsWarning,
    ExportError,
    InputError,
    InputRangeError,
    InputTypeError,
    InputValueError,
    InternalError,
    MissingDependencyError,
    ModuleFormatError,
    NarrowingError,
    OpConversionError,
    OutOfMemoryError,
    OutputError,
    ParseError,
    ShardingError,
    SignatureMismatchError,
    UnsupportedOpError,
    UntrustedInputError,
)
from .module import Module, load  # noqa: E402
from .signature import LeafSpec, Signature  # noqa: E402

if _typing.TYPE_CHECKING:  # for type checkers and the API reference; loaded on first use below
    from converter.frontends.onnx.values import ValueSpecializedModel

    from .tools.embed import call_jax


@api
def from_torch(model, args=(), kwargs=None, *, trust_pickle: bool = False, **options) -> Module:
    """See :func:`converter.frontends.torch.from_torch`. ``model`` may also be the path of a ``.pt2``
    file (``torch.export.save``), read by :func:`load_pt2` (``trust_pickle`` as there).

    Raises:
        ConversionError: every failure; :class:`ExportError` when ``torch.export`` cannot
            export the model (the torch error is the ``__cause__``).
    """
    from converter.frontends.torch import from_torch as _from_torch

    if isinstance(model, (str, _os.PathLike)):
        model = load_pt2(model, trust_pickle=trust_pickle)
    return _from_torch(model, args, kwargs, **options)


@api
def load_pt2(path, *, trust_pickle: bool = False):
    """A ``.pt2`` file's ``torch.export.ExportedProgram``, refusing pickled payloads and
    other content that would run code unless ``trust_pickle`` (see
    :func:`converter.tools.pt2.load_pt2` and ``docs/security.md``).

    Raises:
        UntrustedInputError: the file would run code when loaded and ``trust_pickle`` is False.
        ParseError: not a readable ``.pt2`` archive.
    """
    from .tools.pt2 import load_pt2 as _load_pt2

    return _load_pt2(path, trust_pickle=trust_pickle)


@api
def from_jax(fn, *example_args, params=None, **example_kwargs) -> Module:
    """See :func:`converter.frontends.jax.from_jax`."""
    from converter.frontends.jax import from_jax as _from_jax

    return _from_jax(fn, *example_args, params=params, **example_kwargs)


@api
def from_onnx(model, **options) -> Module | ValueSpecializedModel:
    """See :func:`converter.frontends.onnx.from_onnx`: a :class:`Module`, or a
    :class:`converter.frontends.onnx.values.ValueSpecializedModel` for a model whose shapes are computed
    from the values of graph inputs (specialized per value at call time, as ``jax.jit``'s
    static arguments).

    Raises:
        MissingDependencyError: ``onnx`` is not installed (``pip install 'converter[onnx]'``).
    """
    from ._optional import require

    require("onnx", "from_onnx")
    from converter.frontends.onnx import from_onnx as _from_onnx

    return _from_onnx(model, **options)


def __getattr__(name: str):
    """``converter.call_jax`` is :func:`converter.tools.embed.call_jax` itself (which applies the
    error contract itself), imported on first use: importing ``converter`` loads no torch,
    and no forwarding function sits in its per-call path (~0.5 µs of a ~9 µs overhead)."""
    if name == "call_jax":
        from .tools.embed import call_jax

        globals()["call_jax"] = call_jax  # later lookups find it without this hook
        return call_jax
    if name == "ValueSpecializedModel":  # the onnx frontend needs the optional onnx package
        from converter.frontends.onnx.values import ValueSpecializedModel

        globals()["ValueSpecializedModel"] = ValueSpecializedModel
        return ValueSpecializedModel
    raise AttributeError(f"module 'converter' has no attribute {name!r}")


@api(hush=False)
def call_torch(module_or_fn, *args, **kwargs):
    """See :func:`converter.tools.embed.call_torch`."""
    from .tools.embed import call_torch as _call_torch

    return _call_torch(module_or_fn, *args, **kwargs)


@api
def shard_params(params, mesh, rules="fsdp"):
    """See :func:`converter.sharding.shard_params`."""
    from .sharding import shard_params as _shard_params

    return _shard_params(params, mesh, rules)


@api
def from_stablehlo(source, **options) -> Module:
    """See :func:`converter.frontends.stablehlo.from_stablehlo`."""
    from converter.frontends.stablehlo import from_stablehlo as _from_stablehlo

    return _from_stablehlo(source, **options)


__all__ = [
    "ClosedOverParamsWarning",
    "ConversionError",
    "DataDependentShapeError",
    "DistributedError",
    "DynamicDimensionError",
    "EmbeddedParamsWarning",
    "ExportError",
    "InputError",
    "InputRangeError",
    "InputTypeError",
    "InputValueError",
    "InternalError",
    "MissingDependencyError",
    "OutOfMemoryError",
    "OutputError",
    "UntrustedInputError",
    "ValueSpecializedModel",
    "load_pt2",
    "LeafSpec",
    "Module",
    "ModuleFormatError",
    "NarrowingError",
    "OpConversionError",
    "ParseError",
    "ShardingError",
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
    "shard_params",
]
