"""The ``convert`` command: ``convert --from torch --to jax INPUT -o OUT``.

Conversions go through two small tables, so a new direction is one row each:

* :data:`LOADERS` (``--from``): ``name -> Loader``; a loader turns INPUT (a path, or
  ``file.py:factory``) into a :class:`converter.Module`.
* :data:`WRITERS` (``--to``): ``name -> Writer``; a writer stores a Module at OUT, atomically
  (``converter.fileio``), so a failed run never leaves an output file.

Subcommands (``convert inspect FILE``...) go in :data:`SUBCOMMANDS`: ``name -> "module"``,
where the module defines ``HELP: str``, ``add_arguments(parser)`` and ``run(args) -> int``;
it is imported only when its subcommand runs.

Exit status: 0 on success; 2 for anything about the user's inputs, outputs or environment
(bad or untrusted input, a factory that fails or exits, an output that cannot be written, a
conversion the converter cannot do): one paragraph on stderr, the traceback only with
``--verbose``; 1 only for an internal error (a bug). Third-party logs and warnings
(torch.export's, fake_tensor's, XLA's INFO lines, FutureWarnings) are held back unless
``--verbose``. See ``docs/errors.md``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _contract, progress
from ..errors import ConversionError, InternalError, OutOfMemoryError, ParseError
from ..fileio import atomic_path, atomic_write, check_writable
from ..module import Module
from .loaders import (  # noqa: F401 - the command line's inputs
    FACTORY_MODELS,
    LOADERS,
    CliError,
    Loader,
    load_factory,
    load_input,
    load_jax,
    load_module,
    load_onnx,
    load_stablehlo,
    load_torch,
    parse_dims,
    pick,
    read_exported,
    split_factory,
    torch_export,
    weights_path,
)

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT = 0, 1, 2


# --------------------------------------------------------------------------- loaders


#: What ``factory()`` must return a model of, per framework: (check, description).


# --------------------------------------------------------------------------- writers


@dataclass(frozen=True)
class Writer:
    """One ``--to`` target.

    Attributes:
        write: ``write(module, out, options)``; writes ``out`` atomically.
        output: what OUT holds (shown by ``--help``).
        suffixes: OUT suffixes that select this target when ``--to`` is omitted.
    """

    write: Callable[[Module, Path, argparse.Namespace], None]
    output: str
    suffixes: tuple[str, ...] = ()


JAX_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


def export_jax(module: Module, platforms: Sequence[str] | None = None, *, external_weights: bool = False):
    """A ``jax.export.Exported`` of the module's function of the user inputs, parameters
    closed over as constants, for ``platforms`` (a subset of :data:`JAX_PLATFORMS`; default:
    JAX's default backend here).

    Call it as ``exported.call(*args, **kwargs)`` with the source model's inputs; inputs that
    were non-tensor values at conversion time are specialized: pass ``None`` in their place.
    With ``external_weights`` the parameters are not baked in: the function takes them
    first, as a dict by parameter name (:func:`artifact_weights` gives that dict, complex
    ones as real pairs), ``exported.call(weights, *args, **kwargs)``.
    Inputs and outputs keep their host memory kinds (``mhlo.memory_kind`` on ``@main``);
    parameters are constants of the artifact, without one.
    A module with random ops takes its key as the keyword ``rng`` (``jax.random.PRNGKey(n)``).
    64-bit inputs (torch's int64 token ids) need ``jax_enable_x64`` in the calling process.

    Raises:
        UnsupportedOpError: the JAX backend lacks rules for some StableHLO ops.
        ConversionError: the module updates state in place (``signature.mutations``, e.g.
            BatchNorm in training mode): the artifact's parameters are constants, so it could
            not carry the new buffer values from one call to the next.
    """
    import jax
    import numpy as np

    from .. import dtypes
    from ..signature import unflatten

    if module.signature.mutations:
        targets = ", ".join(m.target for m in module.signature.mutations)
        raise ConversionError(
            f"the model updates state in place ({targets}; a torch model in training mode?): a "
            "jax.export artifact holds its parameters as constants and cannot carry that state; "
            "convert the model in eval mode, or use converter.to_jax(module).apply(params, ..., "
            "mutable=True), which returns the new values"
        )
    fn = module.to_jax(x64=True)  # the artifact keeps the 64-bit types (x64_scope below)
    sig = fn.signature
    params = fn.params
    complex_params = {p.name for p in sig.params if dtypes.is_complex(p.dtype)}

    def static_free(spec: dict) -> dict:
        """The input tree with specialized and None leaves turned into JAX's empty None."""
        if spec["kind"] in ("static", "none"):
            return {"kind": "none"}
        if "children" in spec:
            return {**spec, "children": [static_free(c) for c in spec["children"]]}
        return spec

    from ..passes.shapes import symbolic_shapes

    shapes = symbolic_shapes([s.shape for s in sig.inputs], sig.dim_ranges)
    structs = [
        jax.ShapeDtypeStruct(shape, np.dtype(dtypes.to_numpy(s.dtype)), sharding=_leaf_sharding(s, fn))
        for shape, s in zip(shapes, sig.inputs, strict=True)
    ]
    example_args, example_kwargs = unflatten(static_free(sig.in_tree), structs)
    example_args = list(example_args)
    if sig.rng is not None:
        example_kwargs["rng"] = jax.ShapeDtypeStruct(sig.rng.shape, np.uint32)

    def call(*args, **kwargs):
        rng = kwargs.pop("rng", None)
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        full_args, full_kwargs = unflatten(sig.in_tree, leaves)
        return fn.apply(params, *full_args, rng=rng, **full_kwargs)

    def call_with_weights(weights, *args, **kwargs):
        rng = kwargs.pop("rng", None)
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        full_args, full_kwargs = unflatten(sig.in_tree, leaves)
        weights = {
            k: jax.lax.complex(v[..., 0], v[..., 1]) if k in complex_params else v for k, v in weights.items()
        }
        return fn.apply(weights, *full_args, rng=rng, **full_kwargs)

    if external_weights:
        weight_structs = {
            p.name: jax.ShapeDtypeStruct(
                p.shape + ((2,) if p.name in complex_params else ()),
                np.dtype(dtypes.to_numpy(_pair_dtype(p.dtype) if p.name in complex_params else p.dtype)),
                sharding=None if p.name in complex_params else _leaf_sharding(p, fn),
            )
            for p in sig.params
        }
        example_args = [weight_structs, *example_args]
        call = call_with_weights
    exporter = jax.export.export(jax.jit(call, **_out_shardings(fn)), platforms=platforms)
    from converter.backends.jax.function import x64_scope

    with x64_scope(module):  # 64-bit inputs keep their type in the artifact; the flag is left alone
        return _export(exporter, sig, example_args, example_kwargs)


def _export(exporter: Callable, sig: Any, example_args: list, example_kwargs: dict) -> Any:
    """``exporter(*example_args, **example_kwargs)``; a failure with dynamic dimensions
    raised as a :class:`ConversionError` naming them."""
    if all(isinstance(d, int) for s in sig.inputs for d in s.shape):
        return exporter(*example_args, **example_kwargs)
    try:
        return exporter(*example_args, **example_kwargs)
    except ConversionError:
        raise
    except Exception as e:
        dims = {s.name: list(s.shape) for s in sig.inputs if not all(isinstance(d, int) for d in s.shape)}
        raise ConversionError(
            f"jax.export with dynamic dimensions {dims} failed: {type(e).__name__}: "
            f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        ) from e


def _out_shardings(fn: Any) -> dict:
    """``jax.jit``'s ``out_shardings`` for a partitioned module's artifact: each output leaf
    laid out by its spec (so the artifact records them); ``{}`` for other modules and for
    outputs with specialized (static) leaves."""
    sig = fn.signature
    if getattr(fn, "mesh", None) is None or _has_static(sig.out_tree):
        return {}
    from ..signature import unflatten

    leaves = [None if s.sharding is None else _leaf_sharding(s, fn) for s in sig.user_outputs]
    return {"out_shardings": unflatten(sig.out_tree, leaves)}


def _has_static(spec: dict) -> bool:
    return spec["kind"] == "static" or any(_has_static(c) for c in spec.get("children", ()))


def _leaf_sharding(spec: Any, fn: Any):
    """The sharding an argument of the ``.jax`` artifact is declared with: for a partitioned
    module (``signature.mesh``), a ``NamedSharding`` of the leaf's spec on the function's
    mesh (the artifact is then for that many devices); else its host memory kind, if any."""
    if getattr(fn, "mesh", None) is None:
        return _memory_sharding(spec.memory_kind, fn.device)
    import jax

    from ..sharding import partition_spec

    return jax.sharding.NamedSharding(fn.mesh, partition_spec(spec.sharding))


def _memory_sharding(memory_kind: str | None, device: Any):
    """For an input in host memory (``pinned_host``/``unpinned_host``), a one-device sharding
    with that memory kind: ``jax.export`` writes it as the ``@main`` argument's
    ``mhlo.memory_kind``, so the ``.jax`` artifact (and a Module read back from it) keeps the
    input's placement. None for device memory (JAX's default)."""
    if memory_kind not in ("pinned_host", "unpinned_host"):
        return None
    import jax

    return jax.sharding.SingleDeviceSharding(device or jax.devices()[0], memory_kind=memory_kind)


def _pair_dtype(name: str) -> str:
    return "float64" if name == "complex128" else "float32"


#: Parameter bytes from which ``--to jax`` and ``--to onnx`` keep the parameters in a file
#: beside the model (``$CONVERTER_EXTERNAL_THRESHOLD`` overrides; ``--external-weights``
#: forces it). Past 2 GB neither format can hold them inside.
EXTERNAL_THRESHOLD = 256 * 2**20


def artifact_weights(module: Module) -> dict[str, Any]:
    """The weights a ``.jax`` artifact with external weights takes (by parameter name, as
    stored in its ``.safetensors`` file): the module's parameters, complex ones as real
    pairs (``S + [2]``, real then imaginary; no copy).

    Raises:
        ConversionError: a parameter's dtype has no safetensors type (int4, float8 variants
            other than e4m3fn/e5m2...), naming it.
    """
    import numpy as np

    from .. import dtypes
    from ..weights import SAFETENSORS_DTYPES

    out = {}
    for p in module.signature.params:
        value = np.asarray(module.params[p.name])
        if dtypes.is_complex(p.dtype):
            value = np.ascontiguousarray(value).view(dtypes.to_numpy(_pair_dtype(p.dtype)))
            value = value.reshape(*p.shape, 2)
        elif p.dtype not in SAFETENSORS_DTYPES:
            raise ConversionError(
                f"parameter {p.name!r} has dtype {p.dtype}, which safetensors cannot store; "
                "write the .jax artifact without external weights"
            )
        out[p.name] = value
    return out


def _external(module: Module, options: argparse.Namespace) -> bool:
    from ..weights import external_threshold, nbytes

    if getattr(options, "external_weights", False):
        return True
    return nbytes(module.params) >= external_threshold(EXTERNAL_THRESHOLD)


def write_jax(module: Module, out: Path, options: argparse.Namespace) -> None:
    """``--to jax``: the bytes of ``jax.export.Exported.serialize()`` (see :func:`export_jax`),
    for the ``--platforms`` given. Parameters of :data:`EXTERNAL_THRESHOLD` bytes or more
    (or with ``--external-weights``) go to ``OUT.safetensors`` instead and the artifact
    takes them as its first argument (``export_jax(external_weights=True)``); both files
    are written atomically, the weights first."""
    from ..fileio import atomic_paths
    from ..weights import save_safetensors

    platforms = getattr(options, "platforms", None)
    names = [p.strip() for p in platforms.split(",") if p.strip()] if platforms else None
    unknown = sorted(set(names or ()) - set(JAX_PLATFORMS))
    if unknown:
        raise CliError(f"--platforms: unknown platform(s) {unknown}; choose from {', '.join(JAX_PLATFORMS)}")
    if not _external(module, options):
        atomic_write(out, bytes(export_jax(module, names).serialize()))
        return
    weights = artifact_weights(module)
    serialized = bytes(export_jax(module, names, external_weights=True).serialize())
    with atomic_paths(weights_path(out), out) as (tmp_weights, tmp_out):
        save_safetensors(tmp_weights, weights)
        tmp_out.write_bytes(serialized)


def write_stablehlo(module: Module, out: Path, options: argparse.Namespace) -> None:
    """``--to stablehlo``: portable-artifact bytecode for ``.mlirbc``, otherwise text with
    ``loc(...)`` source locations. The converter's own ``custom_call
    @converter.stop_gradient`` markers (a JAX source's ``lax.stop_gradient``) are bypassed:
    other StableHLO consumers know no such call (JAX itself writes none)."""
    from ..passes.markers import without_stop_gradient_markers

    module = without_stop_gradient_markers(module)
    data = module.bytecode() if out.suffix == ".mlirbc" else module.text()
    atomic_write(out, data)


def write_module(module: Module, out: Path, options: argparse.Namespace) -> None:
    """``--to module``: ``Module.save`` (StableHLO, signature and parameters in one file)."""
    module.save(out)  # atomic


def write_onnx(module: Module, out: Path, options: argparse.Namespace) -> None:
    """``--to onnx``: ``Module.to_onnx(opset=--opset, path=OUT)``, checked by ``onnx.checker``
    on the written file; parameters of :data:`EXTERNAL_THRESHOLD` bytes or more (or with
    ``--external-weights``) go to ``OUT.data`` beside it, written first."""
    opset = getattr(options, "opset", None)
    kwargs = {} if opset is None else {"opset": opset}
    module.to_onnx(path=out, external_data=_external(module, options), **kwargs)


def write_torch(module: Module, out: Path, options: argparse.Namespace) -> None:
    """``--to torch``: ``Module.to_torch()`` exported with ``torch.export`` on zero inputs of
    the signature's shapes and dtypes, saved with ``torch.export.save`` (``.pt2``); load it
    with ``torch.export.load(OUT).module()``. A shape-polymorphic module is exported with its
    dimensions dynamic (``TorchModule.export_dynamic_shapes()``: ``Dim``s named as the
    module's dimensions, with their ranges), on example sizes from
    :func:`converter.backends.torch.export_example`."""
    import torch

    from converter.backends.torch import export_example

    from ..passes.shapes import module_is_dynamic

    sig = module.signature
    model = module.to_torch()
    args, kwargs = export_example(sig)
    dynamic = model.export_dynamic_shapes() if module_is_dynamic(module) else None
    from converter._torch_internal import exporting

    try:
        with exporting():  # one thread at a time (docs/design.md, "Threads")
            ep = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic)
    except ConversionError:
        raise
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ConversionError(
            f"torch.export of the converted torch module failed: {type(e).__name__}: {first}"
        ) from e
    with atomic_path(out) as tmp, open(tmp, "wb") as f:  # a file object: no copy in memory
        torch.export.save(ep, f)


WRITERS: dict[str, Writer] = {
    "jax": Writer(write_jax, "jax.export serialized bytes (parameters inside)", (".jax", ".jaxexport")),
    "stablehlo": Writer(
        write_stablehlo, "StableHLO text (.mlir) or portable bytecode (.mlirbc)", (".mlir", ".mlirbc")
    ),
    "module": Writer(write_module, "a converter.Module file (.shlo) for converter.load", (".shlo",)),
    "onnx": Writer(write_onnx, "an ONNX model (.onnx), opset 18 unless --opset", (".onnx",)),
    "torch": Writer(write_torch, "a torch.export archive (.pt2) of the converted nn.Module", (".pt2",)),
}

#: Subcommands: ``name -> module path`` (module defines ``HELP``, ``add_arguments``, ``run``).
SUBCOMMANDS: dict[str, str] = {
    "validate": "converter.tools.validate",
    "inspect": "converter.tools.inspection",
}


# --------------------------------------------------------------------------- command line


def _table(rows: dict[str, Any], attr: str) -> str:
    return "\n".join(f"  {name:<10} {getattr(row, attr)}" for name, row in rows.items())


EPILOG = """\
sources (--from):
{loaders}

targets (--to):
{writers}

--from and --to default to what the INPUT and OUT suffixes imply.
{subcommands}
examples:
  convert --from torch --to jax examples/gpt2.py:factory -o gpt2.jax
  convert --from torch --to stablehlo model.pt2 -o model.mlir
  convert examples/mlp.py:factory -o mlp.shlo        # --from torch --to module
  convert --from module --to jax mlp.shlo -o mlp.jax --platforms cpu,cuda
  convert model.onnx -o model.pt2 --dim batch=1      # size the dim_param "batch"

  # run a .jax file with JAX alone (JAX_ENABLE_X64=1 for int64 inputs such as token ids):
  import jax
  f = jax.export.deserialize(bytearray(open("gpt2.jax", "rb").read()))
  out = f.call(input_ids)

exit status: 0 ok; 2 for anything about the inputs, outputs or environment (bad or untrusted
input, unsupported conversion, unwritable output); 1 only for a bug in the converter.
Missing output directories are created. .pt2 files with pickled payloads are refused unless
--trust-pickle (docs/security.md); every error case: docs/errors.md.
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the main form ``convert [--from F] [--to T] INPUT -o OUT``."""
    subs = "".join(f"\n       convert {name} ..." for name in SUBCOMMANDS)
    sub_help = f"\nsubcommands: {', '.join(SUBCOMMANDS)} (convert NAME --help)\n" if SUBCOMMANDS else ""
    parser = argparse.ArgumentParser(
        prog="convert",
        usage="convert [--from SOURCE] [--to TARGET] INPUT -o OUT [--platforms P,Q] [--opset N] "
        f"[--dim NAME=SIZE] [--trust-pickle] [--verbose]\n       convert --version{subs}",
        description="Convert a model between PyTorch, JAX, ONNX and StableHLO through one StableHLO module.",
        epilog=EPILOG.format(
            loaders=_table(LOADERS, "inputs"),
            writers=_table(WRITERS, "output"),
            subcommands=sub_help,
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "input",
        metavar="INPUT",
        help="the model: a .pt2 file, path/to/file.py:factory (factory() returns (model, example_args)), "
        "an .onnx model, a .jax artifact, a .mlir/.mlirbc file or a .shlo Module file",
    )
    parser.add_argument(
        "-o", "--output", metavar="OUT", required=True, help="output file (written atomically)"
    )
    parser.add_argument(
        "--from",
        dest="source",
        metavar="SOURCE",
        help=f"input framework, one of {', '.join(LOADERS)} (default: from INPUT's suffix)",
    )
    parser.add_argument(
        "--to",
        dest="target",
        metavar="TARGET",
        help=f"output format, one of {', '.join(WRITERS)} (default: from OUT's suffix)",
    )
    parser.add_argument(
        "--platforms",
        metavar="P,Q",
        help=f"--to jax only: platforms the artifact runs on, comma-separated from "
        f"{', '.join(JAX_PLATFORMS)} (default: this machine's JAX backend), e.g. cpu,cuda",
    )
    parser.add_argument(
        "--opset",
        type=int,
        metavar="N",
        help="--to onnx only: the default-domain opset, 18 (default) to 26; bit casts "
        "(jax.random's key bits, lax.bitcast_convert_type) need 26 (ONNX BitCast)",
    )
    parser.add_argument(
        "--external-weights",
        action="store_true",
        help="--to jax/onnx: keep the parameters in a file beside OUT (OUT.safetensors, "
        "OUT.data), as is done from 256 MiB of parameters on",
    )
    parser.add_argument(
        "--dim",
        dest="dims",
        metavar="NAME=SIZE",
        action="append",
        help="--from onnx only: give the symbolic dimension (dim_param) NAME of the graph inputs "
        "the size SIZE (repeatable, e.g. --dim batch=1 --dim seq=128); dimensions without one "
        "stay dynamic",
    )
    add_trust_pickle(parser)
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print timings, tracebacks on errors, and the logs and warnings of torch, JAX and XLA",
    )
    parser.add_argument("--version", action="version", version=version_string())
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress display (shown on a terminal only)"
    )
    return parser


def add_trust_pickle(parser: argparse.ArgumentParser) -> None:
    """The ``--trust-pickle`` option (shared by ``convert``, ``validate`` and ``inspect``)."""
    parser.add_argument(
        "--trust-pickle",
        action="store_true",
        help="load .pt2 files even when they hold pickled payloads (which can run arbitrary code); "
        "only for files you trust (docs/security.md)",
    )


def version_string() -> str:
    """``convert X.Y.Z`` with the framework versions it finds (without importing them)."""
    from importlib import metadata

    from .. import __version__

    found = []
    for dist in ("torch", "jax", "jaxlib", "onnx", "onnxruntime"):
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return f"convert {__version__} ({', '.join(found)})"


def _check_opset(opset: int | None, target: str) -> None:
    """``--opset`` goes with ``--to onnx`` and names an opset the ONNX backend emits."""
    if opset is None:
        return
    if target != "onnx":
        raise CliError(f"--opset applies to --to onnx only, not --to {target}")
    from converter.backends.onnx import DEFAULT_OPSET, MAX_OPSET

    if not DEFAULT_OPSET <= opset <= MAX_OPSET:
        raise CliError(f"--opset {opset}: the ONNX backend emits opsets {DEFAULT_OPSET} to {MAX_OPSET}")


def convert(options: argparse.Namespace) -> float:
    """Run one conversion; returns the seconds taken. Raises :class:`ConversionError`s."""
    target = pick(options.target, WRITERS, options.output, "output", "--to")
    if options.platforms and target != "jax":
        raise CliError(f"--platforms applies to --to jax only, not --to {target}")
    _check_opset(getattr(options, "opset", None), target)
    source = pick(options.source, LOADERS, options.input, "input", "--from")
    if getattr(options, "dims", None) and source != "onnx":
        raise CliError(f"--dim applies to --from onnx only, not --from {source}")
    parse_dims(getattr(options, "dims", None))  # a malformed --dim fails before loading
    _check_not_input(Path(options.input), Path(options.output))
    check_writable(options.output)  # an unwritable OUT fails before a long conversion
    start = time.perf_counter()
    with progress.reporting(not getattr(options, "quiet", False) and not options.verbose):
        if source == "torch":  # the torch frontend reports its own stages
            module = load_input(options.input, source, options)
        else:
            with progress.stage(f"reading {Path(options.input).name}"):
                module = load_input(options.input, source, options)
        if options.verbose:
            print(f"convert: loaded {module!r} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        out = Path(options.output)
        if getattr(module, "value_inputs", None) and target != "onnx":
            # an ONNX model whose shapes come from input values: no one StableHLO module
            raise ConversionError(
                f"{options.input}: the model computes shapes from the values of inputs "
                f"{module.value_inputs}, so it has no single {target} form: convert it in Python with "
                "from_onnx(..., static_inputs={name: array}), or use to_jax()/to_torch(), which "
                "specialize on those values at call time"
            )
        with progress.stage(f"writing {out.name} ({target})") as info:
            WRITERS[target].write(module, out, options)
            info["detail"] = progress.size_text(sum(f.stat().st_size for f in written_files(out)))
    return time.perf_counter() - start


def _check_not_input(source: Path, out: Path) -> None:
    """Refuse an OUT (or a file written beside it) that is the input file itself, or its
    external weights, by path, symbolic link or hard link: the conversion would replace the
    file it reads.

    Raises:
        CliError: names both paths.
    """
    factory = split_factory(str(source))
    inputs = [factory[0]] if factory else [source, weights_path(source)]
    outputs = [out, weights_path(out), out.with_name(out.name + ".data")]
    for o in outputs:
        for i in inputs:
            try:
                same = o.exists() and i.exists() and os.path.samefile(o, i)
            except OSError:
                same = False
            if same:
                raise CliError(
                    f"{o} is the input file {i}: writing it would replace the file being converted; "
                    "choose another output path"
                )


def written_files(out: Path) -> list[Path]:
    """OUT and the files written beside it (external weights: ``OUT.safetensors``, ``OUT.data``)."""
    return [p for p in (out, weights_path(out), out.with_name(out.name + ".data")) if p.exists()]


def _run_subcommand(name: str, argv: Sequence[str]) -> int:
    mod = importlib.import_module(SUBCOMMANDS[name])
    parser = argparse.ArgumentParser(prog=f"convert {name}", description=mod.HELP)
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="tracebacks on errors, third-party logs and warnings"
    )
    add_trust_pickle(parser)
    mod.add_arguments(parser)
    args = parser.parse_args(argv)
    return _guarded(lambda: mod.run(args), args.verbose)


def _guarded(body: Callable[[], int], verbose: bool) -> int:
    """Run ``body()`` under the CLI's error contract (see the module docstring): third-party
    logs and warnings held back unless ``verbose``, every failure one paragraph on stderr,
    exit status 2 for the user's inputs, outputs and environment, 1 for a bug."""
    try:
        with _contract.verbose_mode(verbose), _contract.quiet(not verbose, capture_stderr=False):
            return body()
    except ConversionError as e:
        if _out_of_memory(e) and not isinstance(e, OutOfMemoryError):
            _report(ParseError(f"out of memory: {_OOM}"), verbose, "error")
            return EXIT_BAD_INPUT
        if isinstance(e, InternalError):
            _report(e, verbose, "internal error")
            return EXIT_INTERNAL
        _report(e, verbose, "error")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("convert: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:  # the user's code (a model, a JAX function) exited while traced
        _report(ParseError(f"the model's code called sys.exit({e.code!r})"), verbose, "error")
        return EXIT_BAD_INPUT
    except MemoryError:
        _report(ParseError(f"out of memory: {_OOM}"), False, "error")
        return EXIT_BAD_INPUT
    except OSError as e:  # the environment: unreadable input, full disk, missing permissions
        where = f" ({e.filename})" if e.filename else ""
        _report(ParseError(f"{e.strerror or e}{where}"), verbose, "error")
        return EXIT_BAD_INPUT
    except Exception as e:  # noqa: BLE001 - the top level: any other failure is our bug
        _report(e, verbose, "internal error (a bug in the converter; please report it)")
        return EXIT_INTERNAL


_OOM = "the model or its inputs do not fit this machine"


def _out_of_memory(e: BaseException) -> bool:
    """Whether a ``MemoryError`` is in ``e``'s chain of causes (an error wrapping it)."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, MemoryError):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _report(e: BaseException, verbose: bool, kind: str) -> None:
    if verbose:
        traceback.print_exception(e, file=sys.stderr)
    message = str(e).strip() or type(e).__name__
    if not isinstance(e, ConversionError):
        message = f"{type(e).__name__}: {message}"
    hint = "" if verbose else "\n(run with --verbose for the traceback)"
    print(f"convert: {kind}: {message}{hint}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``convert`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return _run_subcommand(argv[0], argv[1:])
        options = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) and usage errors (2)
        return e.code if isinstance(e.code, int) else EXIT_BAD_INPUT

    def body() -> int:
        seconds = convert(options)
        files = written_files(Path(options.output))
        size = sum(f.stat().st_size for f in files)
        names = " and ".join([options.output, *(f.name for f in files[1:])])
        print(f"convert: wrote {names} ({size:,} bytes) in {seconds:.1f} s")
        return EXIT_OK

    return _guarded(body, options.verbose)


if __name__ == "__main__":
    sys.exit(main())
