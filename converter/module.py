"""``converter.Module``: the common currency between frontends, passes and backends."""

from __future__ import annotations

import json
import os
import zipfile
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np
from jaxlib.mlir import ir

from . import mlir, weights, ziparchive
from ._contract import api
from .errors import ModuleFormatError, ParseError
from .fileio import atomic_path, check_size
from .signature import Signature

if TYPE_CHECKING:
    from converter.backends.jax import JaxFunction

FORMAT_NAME = "converter.Module"
#: Version 2 adds ``signature.mutations`` (state the module updates in place). A module
#: without mutations is still written as version 1, so older readers keep reading it; one
#: with mutations is version 2, which they refuse rather than drop the state. Version 3 adds
#: ``signature.mesh`` and the leaves' ``sharding`` (a partitioned module): older readers
#: refuse it rather than run it on one device.
FORMAT_VERSION = 3


class Module:
    """A StableHLO module with its signature and parameters.

    ``@main`` takes the parameters first (in ``signature.params`` order), then the flattened
    user inputs; see :class:`converter.signature.Signature`.

    Args:
        module: the StableHLO ``ir.Module`` (jaxlib MLIR bindings).
        signature: input/output pytree structure, leaf specs and parameter specs.
        params: parameter values by name (NumPy arrays; the names of ``signature.params``).
        source: the framework it came from (``torch``, ``jax``, ``onnx``, ``stablehlo``).
        meta: free-form JSON-serializable provenance (model class, framework versions).
    """

    def __init__(
        self,
        module: ir.Module,
        signature: Signature,
        params: dict[str, np.ndarray] | None = None,
        *,
        source: str = "stablehlo",
        meta: dict[str, Any] | None = None,
    ):
        self.mlir = module
        self.signature = signature
        self.params = dict(params or {})
        self.source = source
        self.meta = dict(meta or {})
        missing = [p.name for p in signature.params if p.name not in self.params]
        if missing:
            raise ValueError(f"no values for parameters {missing}")

    def __getstate__(self) -> dict[str, Any]:
        """Pickling and ``copy.deepcopy`` (a ``to_torch()`` module of dynamic shapes holds its
        Module): the MLIR module travels as its text, ``loc(...)`` provenance included."""
        state = dict(self.__dict__)
        state["mlir"] = mlir.module_text(self.mlir)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        state["mlir"] = mlir.parse_module(state["mlir"])
        self.__dict__.update(state)

    # ------------------------------------------------------------------ text

    def text(self, *, debug_info: bool = True) -> str:
        """StableHLO text; with ``debug_info`` every op keeps its ``loc(...)`` provenance."""
        return mlir.module_text(self.mlir, debug_info=debug_info)

    def __str__(self) -> str:
        return self.text(debug_info=False)

    def __repr__(self) -> str:
        s = self.signature
        return (
            f"<converter.Module from {self.source}: {len(s.params)} params, "
            f"{len(s.inputs)} inputs, {len(s.outputs)} outputs>"
        )

    def op_histogram(self) -> Counter[str]:
        """How often each op name occurs in the module (every function, nested regions too)."""
        counts: Counter[str] = Counter()
        for fn in mlir.functions(self.mlir).values():
            counts.update(op.name for op in mlir.walk_ops(fn))
        return counts

    def bytecode(self) -> bytes:
        """The module as a StableHLO portable artifact (VHLO bytecode)."""
        return mlir.serialize_portable(self.mlir)

    # ------------------------------------------------------------------ backends

    @api
    def to_jax(self, *, x64: bool | None = None, **kwargs) -> JaxFunction:
        """A JAX callable of the user inputs; see :func:`converter.backends.jax.to_jax`.

        ``x64`` chooses how 64-bit types run: ``False`` computes the module's 64-bit
        integers in 32 bits where that is exact (JAX's default mode, ``jax_enable_x64``
        off; :func:`converter.passes.narrow.narrow_64bit`), ``True`` keeps them (run under
        a scoped ``jax.enable_x64(True)``), ``None`` follows ``jax_enable_x64`` where this
        is called (off: the 32-bit form when the module narrows exactly).

        Raises:
            NarrowingError: ``x64=False`` and the module has no exact 32-bit form.
        """
        from converter.backends.jax import to_jax

        return to_jax(self, x64=x64, **kwargs)

    @api
    def to_torch(self, *, input_shapes: dict[str, tuple] | list[tuple] | None = None, **kwargs):
        """A native ``torch.nn.Module``; see :func:`converter.backends.torch.to_torch`.

        A module with dynamic dimensions runs any size its dimension names and ranges allow
        (specialized per call shape, once per shape); with ``input_shapes`` (concrete shapes
        by input name or in input order; :meth:`specialize`) it is specialized once, first.

        Raises:
            ConversionError: ``input_shapes`` contradict the module's dimensions.
        """
        from converter.backends.torch import to_torch

        if input_shapes is not None:
            return to_torch(self.specialize(input_shapes), **kwargs)
        return to_torch(self, **kwargs)

    @api
    def specialize(self, input_shapes: dict[str, tuple] | list[tuple]) -> Module:
        """This module with its dynamic dimensions fixed to ``input_shapes`` (by input name,
        or in input order); see :func:`converter.passes.shapes.specialize`.

        Raises:
            ConversionError: a shape contradicts the module's static dimensions or its
                shape constraints, or an input with dynamic dimensions has no shape.
        """
        from .passes.shapes import specialize

        return specialize(self, input_shapes)

    @api
    def to_onnx(self, **kwargs):
        """An ``onnx.ModelProto``; see :func:`converter.backends.onnx.to_onnx`. ONNX has no host
        placement: it is stripped with a recorded warning
        (:func:`converter.passes.placement.strip_placement`).

        Raises:
            MissingDependencyError: ``onnx`` is not installed, or ``onnxruntime`` (which
                the default ``optimize=True`` folds constants with) is not: ``pip install
                'converter[onnx]'``, or ``optimize=False`` for the unfolded graph.
        """
        from ._optional import require

        require("onnx", "to_onnx")
        from converter.backends.onnx import to_onnx

        return to_onnx(self, **kwargs)  # it strips the placement

    # ------------------------------------------------------------------ storage

    @api
    def save(self, path: str | os.PathLike) -> None:
        """Write the module to one versioned file, atomically.

        The file is a zip archive: ``manifest.json`` (format name and version, source,
        signature, meta), ``module.mlirbc`` (portable artifact) and ``params.safetensors``.
        Nothing is pickled; :func:`load` needs neither torch nor the original code. A module
        with ``signature.mutations`` is written as format version 2 (older readers refuse
        it rather than drop its state), a partitioned one (``signature.mesh``) as version 3,
        any other as version 1. The parameters are written
        from their arrays' memory (no second copy) and stored uncompressed with their data
        64-byte aligned, so :func:`load` maps them without reading; any size (zip64) is
        fine. Members carry fixed timestamps: the same module gives the same bytes.
        """
        manifest = {
            "format": FORMAT_NAME,
            "version": 3 if self.signature.mesh else 2 if self.signature.mutations else 1,
            "source": self.source,
            "signature": self.signature.to_json(),
            "meta": self.meta,
        }
        members = {
            "manifest.json": json.dumps(manifest, indent=1),
            "module.mlirbc": self.bytecode(),
        }
        with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w") as zf:
            for name, data in members.items():
                zf.writestr(_member(name), data)
            # streamed from the arrays' memory, stored (not compressed) so load can map it
            with zf.open(_member("params.safetensors"), "w", force_zip64=True) as f:
                weights.write_safetensors(f, self.params, offset=zf.fp.tell())


def _member(name: str) -> zipfile.ZipInfo:
    """A stored zip member with a fixed timestamp and mode (reproducible archives)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = 0o644 << 16  # rw-r--r-- when unzipped
    return info


@api
def load(path: str | os.PathLike) -> Module:
    """Read a file written by :meth:`Module.save`, in canonical placement form: a module
    saved without the frontends' passes gets its loose host-marked ops outlined into host
    calls (:func:`converter.passes.placement.ensure_canonical`).

    The parameters are memory-mapped from the file, not read: they are read-only NumPy
    views, paged in on first use, and ``to_jax`` on CPU uses them in place (the file must
    stay where it is while they are used).

    Raises:
        ModuleFormatError: the file is missing, not a Module archive, corrupt, or of a newer
            format version.
    """
    where = str(path)
    try:
        with open(path, "rb") as f, ziparchive.open_checked(f, where) as zf:
            for info in zf.infolist():  # a member's declared size, before reading it
                check_size(info.file_size, f"{path}: member {info.filename}")
            manifest = json.loads(ziparchive.read_member(zf, "manifest.json", where))
            if not isinstance(manifest, dict):
                kind = type(manifest).__name__
                raise ModuleFormatError(
                    f"{path}: corrupt {FORMAT_NAME} manifest (a JSON {kind}, not an object)"
                )
            if manifest.get("format") != FORMAT_NAME:
                raise ModuleFormatError(f"{path}: not a {FORMAT_NAME} file")
            version = manifest.get("version", 0)
            if not isinstance(version, int) or isinstance(version, bool):
                raise ModuleFormatError(f"{path}: corrupt {FORMAT_NAME} manifest (version {version!r})")
            if version > FORMAT_VERSION:
                raise ModuleFormatError(f"{path}: format version {version} is newer than {FORMAT_VERSION}")
            module = mlir.parse_module(ziparchive.read_member(zf, "module.mlirbc", where), filename=where)
            where_params = weights.zip_member_offset(path, zf, "params.safetensors")
            if where_params is None:  # a compressed archive: read (a copy) rather than map
                data = ziparchive.read_member(zf, "params.safetensors", where)
                params, _ = weights.parse_safetensors(np.frombuffer(data, np.uint8), where)
            # mapped while the checked file is still open: the same file, not a replacement
            else:
                params, _ = weights.read_safetensors(f, *where_params)
    except FileNotFoundError:
        raise ModuleFormatError(f"{path}: no such file") from None
    except ModuleFormatError:
        raise
    except ParseError as e:  # the zip layout, a corrupt member, a budget
        detail = str(e)
        if detail.startswith(f"{where}: not a zip file"):
            detail = f"{where}: corrupt {FORMAT_NAME} file ({detail.removeprefix(f'{where}: ')})"
        raise ModuleFormatError(detail) from e
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError, OSError, RecursionError) as e:
        raise ModuleFormatError(f"{path}: corrupt {FORMAT_NAME} file ({type(e).__name__}: {e})") from e
    from .passes.placement import ensure_canonical

    try:
        signature = Signature.from_json(manifest["signature"])
        source, meta = manifest.get("source", "stablehlo"), manifest.get("meta", {})
        loaded = Module(module, signature, params, source=source, meta=meta)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ModuleFormatError(f"{path}: corrupt {FORMAT_NAME} manifest ({type(e).__name__}: {e})") from e
    return ensure_canonical(loaded)
