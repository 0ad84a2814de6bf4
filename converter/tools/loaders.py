"""The ``convert`` command's inputs: one :class:`Loader` per ``--from`` source
(:data:`LOADERS`), ``file.py:factory`` specs, and the error a bad command line raises.
Used by the command line and by its subcommands (``validate``, ``inspect``)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _contract, progress
from ..errors import ConversionError, ExportError, ParseError
from ..module import Module

if TYPE_CHECKING:
    from converter.frontends.onnx.values import ValueSpecializedModel


class CliError(ConversionError):
    """A bad command line: unknown ``--from``/``--to``, an output suffix the target cannot
    write, options that do not fit together."""


@dataclass(frozen=True)
class Loader:
    """One ``--from`` source.

    Attributes:
        load: ``load(input, options) -> Module``; raises :class:`ConversionError` subclasses.
        inputs: what INPUT may be (shown by ``--help``).
        suffixes: INPUT suffixes that select this source when ``--from`` is omitted.
    """

    load: Callable[[str, argparse.Namespace], Module]
    inputs: str
    suffixes: tuple[str, ...] = ()


def _check_file(path: Path) -> None:
    if not path.exists():
        raise ParseError(f"{path}: no such file")
    if not path.is_file():
        raise ParseError(f"{path}: not a file")


def split_factory(spec: str) -> tuple[Path, str] | None:
    """``"dir/model.py:factory"`` → ``(Path("dir/model.py"), "factory")``; a bare ``.py``
    path names ``factory``; None when ``spec`` is not a Python file reference."""
    path, sep, name = spec.rpartition(":")
    if sep and path.endswith(".py"):
        return Path(path), name
    if spec.endswith(".py"):
        return Path(spec), "factory"
    return None


def _is_torch_model(obj: Any) -> bool:
    import torch

    return isinstance(obj, (torch.nn.Module, torch.export.ExportedProgram))


def _is_jax_function(obj: Any) -> bool:
    import jax

    return callable(obj) or isinstance(obj, jax.export.Exported)


FACTORY_MODELS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "torch": (_is_torch_model, "model an nn.Module or ExportedProgram"),
    "jax": (_is_jax_function, "model a JAX-traceable function or jax.export.Exported"),
}


def load_factory(path: Path, name: str, framework: str = "torch", dynamic: bool = False) -> tuple:
    """Import ``path`` by file path (its directory first on ``sys.path`` meanwhile) and call
    ``name()``, which must return ``(model, example_args)`` or ``(model, example_args,
    example_kwargs)``: ``model`` as :data:`FACTORY_MODELS` requires for ``framework`` (torch:
    an ``nn.Module`` or ``ExportedProgram``), ``example_args`` a tuple or list,
    ``example_kwargs`` a dict. With ``dynamic`` (torch), it may also return ``(model, args,
    kwargs, dynamic_shapes)`` (``torch.export.export``'s ``dynamic_shapes``), and the result
    is ``(model, args, kwargs, dynamic_shapes)`` (None when not given); else ``(model, args,
    kwargs)``.

    Raises:
        ParseError: the file is missing or fails to import, has no callable ``name``, the call
            fails, or it returns anything else; names the file and the function.
    """
    is_model, model_text = FACTORY_MODELS[framework]
    _check_file(path)
    where = f"{path}:{name}"
    mod_name = f"_convert_input_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ParseError(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        try:
            spec.loader.exec_module(module)
        except SystemExit as e:
            raise ParseError(f"{path}: importing it called sys.exit({e.code!r})") from e
        except Exception as e:
            raise ParseError(f"{path}: importing it failed: {type(e).__name__}: {e}") from e
        factory = getattr(module, name, None)
        if not callable(factory):
            found = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
            raise ParseError(f"{path} has no function {name!r} (callables defined there: {found})")
        try:
            result = factory()
        except SystemExit as e:
            raise ParseError(f"{where}() called sys.exit({e.code!r}) instead of returning a model") from e
        except Exception as e:
            raise ParseError(f"{where}() failed: {type(e).__name__}: {e}") from e
    finally:
        sys.path.remove(str(path.parent.resolve()))
    expected = f"(model, example_args) with {model_text} and example_args a tuple"
    lengths = (2, 3, 4) if dynamic else (2, 3)
    if not isinstance(result, (tuple, list)) or len(result) not in lengths:
        raise ParseError(f"{where}() must return {expected}; it returned {_describe(result)}")
    model, args, kwargs, dynamic_shapes = (
        (*result, {}, None, None)[:4] if len(result) == 2 else (*result, None)[:4]
    )
    if not is_model(model):
        raise ParseError(f"{where}() must return {expected}; its model is {_describe(model)}")
    if not isinstance(args, (tuple, list)) or not isinstance(kwargs, dict):
        raise ParseError(f"{where}() must return {expected}; its example_args is {_describe(args)}")
    if dynamic:
        return model, tuple(args), kwargs, dynamic_shapes
    return model, tuple(args), kwargs


def _describe(obj: Any) -> str:
    if isinstance(obj, (tuple, list)):
        return f"a {type(obj).__name__} of {len(obj)}"
    return f"a {type(obj).__module__}.{type(obj).__qualname__}"


def torch_export(model: Any, args: tuple, kwargs: dict, where: str, dynamic_shapes: Any = None):
    """``torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes)``, its
    failures wrapped in a :class:`ConversionError` that names ``where`` (an
    ``ExportedProgram`` passes through)."""
    import torch

    if isinstance(model, torch.export.ExportedProgram):
        return model
    from converter._torch_internal import exporting

    try:
        with exporting():  # one thread at a time (docs/design.md, "Threads")
            if dynamic_shapes is not None:
                return torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes)
            return torch.export.export(model, args, kwargs)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ExportError(
            f"torch.export could not export {type(model).__name__} from {where}: {type(e).__name__}: {first}"
        ) from e


def load_torch(source: str, options: argparse.Namespace) -> Module:
    """``--from torch``: a ``.pt2`` file (``torch.export.save``; pickled payloads refused
    unless ``--trust-pickle``, :func:`converter.load_pt2`) or ``file.py[:factory]``
    (``factory()`` may return ``(model, args, kwargs, dynamic_shapes)``). Dynamic dimensions
    (the factory's or the ``.pt2``'s) stay symbolic (:func:`converter.from_torch`)."""
    import converter

    factory = split_factory(source)
    if factory is not None:
        with progress.stage(f"building the model ({factory[0].name}:{factory[1]})"):
            model, args, kwargs, dynamic_shapes = load_factory(*factory, dynamic=True)
        # torch.export prints partial graphs on failure
        with _contract.quiet(not options.verbose), progress.stage("torch.export"):
            ep = torch_export(model, args, kwargs, f"{factory[0]}:{factory[1]}", dynamic_shapes)
    else:
        path = Path(source)
        _check_file(path)
        with progress.stage(f"reading {path.name}"):
            ep = converter.load_pt2(path, trust_pickle=getattr(options, "trust_pickle", False))
    return converter.from_torch(ep, copy=False)  # the model is ours alone: share its memory


def load_jax(source: str, options: argparse.Namespace) -> Module:
    """``--from jax``: ``file.py:factory`` returning ``(fn, example_args[, example_kwargs])``,
    converted by :func:`converter.from_jax` (``fn`` may be a ``jax.export.Exported``), or a
    serialized ``jax.export.Exported`` (``.jax``/``.jaxexport``, what ``--to jax`` writes;
    with ``INPUT.safetensors`` beside it, those are its external weights, memory-mapped)."""
    import converter

    factory = split_factory(source)
    if factory is None:
        path = Path(source)
        exported = read_exported(path)
        if weights_path(path).exists():  # an artifact with external weights (write_jax)
            from ..weights import read_safetensors

            weights, _ = read_safetensors(weights_path(path))
            return converter.from_jax(exported, params=weights)
        return converter.from_jax(exported)
    fn, args, kwargs = load_factory(*factory, framework="jax")
    return converter.from_jax(fn, *args, **kwargs)


def read_exported(path: Path):
    import jax

    _check_file(path)
    try:
        return jax.export.deserialize(bytearray(path.read_bytes()))
    except Exception as e:  # noqa: BLE001 - any deserialization failure means a bad file
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ParseError(f"{path}: not a serialized jax.export.Exported ({type(e).__name__}: {first})") from e


def parse_dims(values: Sequence[str] | None) -> dict[str, int]:
    """``--dim NAME=SIZE`` values (repeatable) as ``{NAME: SIZE}``, for ``from_onnx(dims=)``.

    Raises:
        CliError: a value is not ``NAME=SIZE`` with a non-negative integer SIZE, or one NAME
            is given twice with different sizes.
    """
    dims: dict[str, int] = {}
    for value in values or ():
        name, sep, size = value.partition("=")
        name, size = name.strip(), size.strip()
        if not sep or not name or not size.isdigit():
            raise CliError(f"--dim {value!r}: expected NAME=SIZE with SIZE a non-negative integer, e.g. N=1")
        if dims.get(name, int(size)) != int(size):
            raise CliError(f"--dim: dimension {name!r} given two sizes ({dims[name]} and {size})")
        dims[name] = int(size)
    return dims


def load_onnx(source: str, options: argparse.Namespace) -> Module:
    """``--from onnx``: an ``.onnx`` file (external data beside it), by :func:`converter.from_onnx`,
    with the symbolic dimensions ``--dim NAME=SIZE`` sizes (``from_onnx(dims=)``; an unknown
    NAME raises :class:`ConversionError` listing the graph inputs' ``dim_param`` names)."""
    import converter

    from .._optional import require

    onnx = require("onnx", "convert --from onnx")

    path = Path(source)
    _check_file(path)
    try:
        onnx.load(str(path), load_external_data=False)  # a corrupt file is reported as such
    except Exception as e:
        raise ParseError(f"{path}: not a readable ONNX model: {type(e).__name__}: {e}") from e
    return converter.from_onnx(str(path), dims=parse_dims(getattr(options, "dims", None)) or None)


def load_stablehlo(source: str, options: argparse.Namespace) -> Module:
    """``--from stablehlo``: StableHLO text (``.mlir``), MLIR bytecode or a portable artifact
    (``.mlirbc``); every ``@main`` argument becomes a user input. Read in canonical placement
    form (:func:`converter.from_stablehlo` runs the placement pass)."""
    import converter

    path = Path(source)
    _check_file(path)
    data = path.read_bytes()
    try:
        text: str | bytes = data.decode()
    except UnicodeDecodeError:
        text = data
    return converter.from_stablehlo(text, filename=str(path))


def load_module(source: str, options: argparse.Namespace) -> Module:
    """``--from module``: a file written by ``Module.save`` (``.shlo``)."""
    import converter

    return converter.load(source)


LOADERS: dict[str, Loader] = {
    "torch": Loader(
        load_torch, "a .pt2 file (torch.export.save) or path/to/file.py:factory", (".pt2", ".py")
    ),
    "stablehlo": Loader(load_stablehlo, "StableHLO text (.mlir) or bytecode (.mlirbc)", (".mlir", ".mlirbc")),
    "module": Loader(load_module, "a converter.Module file (.shlo, Module.save)", (".shlo",)),
    "jax": Loader(
        load_jax,
        "path/to/file.py:factory returning (fn, example_args), or a serialized jax.export.Exported",
        (".jax", ".jaxexport"),
    ),
    "onnx": Loader(load_onnx, "an ONNX model (.onnx)", (".onnx",)),
}


def weights_path(out: Path) -> Path:
    """Where a ``.jax`` artifact's external weights go: ``OUT.safetensors``."""
    return out.with_name(out.name + ".safetensors")


def pick(name: str | None, table: dict[str, Any], path: str, what: str, flag: str) -> str:
    if name is not None:
        if name not in table:
            raise CliError(f"unknown {flag} {name!r}; supported: {', '.join(table)}")
        return name
    base = path.rpartition(":")[0] if ".py:" in path else path
    for key, row in table.items():
        if any(base.endswith(s) for s in row.suffixes):
            return key
    raise CliError(
        f"cannot tell the {what} format of {path!r} from its suffix; pass {flag} ({', '.join(table)})"
    )


def load_input(path: str, source: str | None, options: argparse.Namespace) -> Module | ValueSpecializedModel:
    """A Module (or, for an ONNX model whose shapes depend on input values, a
    :class:`converter.ValueSpecializedModel`) from INPUT with the ``--from`` loader (picked
    from the suffix when ``source`` is None). Raises :class:`ConversionError` subclasses."""
    name = pick(source, LOADERS, path, "input", "--from")
    return LOADERS[name].load(path, options)
