"""The converter's one window onto MLIR: parsing, serialization and a decoded view of ops.

Everything here goes through jaxlib's bundled MLIR Python bindings (``jaxlib.mlir.ir`` and
``jaxlib.mlir.dialects.stablehlo``); nothing parses MLIR text by hand. The one exception is
decoding the *value literal* of a dense constant whose element type (bf16, complex) the
bindings' buffer protocol does not export; see :func:`dense_to_numpy`.
"""

from __future__ import annotations

import functools
import io
import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any

import jax.extend.mlir as jax_mlir
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from . import _jax_internal, dtypes
from .errors import MissingOp, ParseError, UnsupportedOpError

_BYTECODE_MAGIC = b"ML\xefR"


@functools.cache
def context() -> ir.Context:
    """The process-wide MLIR context the converter parses into (all JAX dialects loaded)."""
    return _jax_internal.make_ir_context()


def parse_module(source: str | bytes, *, filename: str = "<input>", verified: bool = False) -> ir.Module:
    """Parse StableHLO text, MLIR bytecode or a StableHLO portable artifact.

    Args:
        source: ``str`` text (``jax.jit(f).lower(x).as_text()``) or ``bytes`` (bytecode or the
            VHLO portable artifact written by ``serialize_portable_artifact``).
        filename: used in error messages.
        verified: ``source`` was written in this process from a module its MLIR already
            verified (``jax.export``'s serialization): the checks for ops that crash the
            verifier are skipped (for bytes they read the source in a child process first).

    Raises:
        ParseError: with the MLIR parser's line and column for malformed text; an op that
            jaxlib's MLIR verifier would crash the process on (a ``stablehlo.all_to_all``
            with no replica group: the verifier divides by the number of groups), found
            before the verifier runs (see :func:`_refuse_verifier_crash_text`), with its
            location.
        UnsupportedOpError: text with uniform quantized types (``!quant.uniform``) when
            jaxlib's MLIR cannot load the ``quant`` dialect: every op on such a line, with
            its location.
    """
    if not verified and isinstance(source, (bytes, bytearray)):
        _refuse_verifier_crash_bytes(bytes(source), filename)
    elif not verified:
        _refuse_verifier_crash_text(source, filename)
    return _read(source, filename)


def _read(source: str | bytes, filename: str) -> ir.Module:
    """:func:`parse_module` after its pre-verification checks: the parse (and the dialects'
    verifiers) proper."""
    ctx = context()
    with ctx, ir.Location.unknown():
        if isinstance(source, (bytes, bytearray)):
            data = bytes(source)
            if data.startswith(_BYTECODE_MAGIC):
                # the deserializer reports through the context's diagnostics (printed on
                # stderr by MLIR's default handler): held here, in the error if parsing fails
                held: list[str] = []
                handler = ctx.attach_diagnostic_handler(lambda d: held.append(str(d.message)) or True)
                try:
                    return jax_mlir.deserialize_portable_artifact(data)
                except Exception:  # noqa: BLE001 - plain (non-VHLO) bytecode, parsed below
                    pass
                finally:
                    handler.detach()
            try:
                return ir.Module.parse(data)
            except ir.MLIRError as e:
                raise ParseError(f"{filename}: not StableHLO bytecode: {_mlir_diag(e)}") from None
        try:
            return ir.Module.parse(source)
        except ir.MLIRError as e:
            if _QUANT_DIALECT not in _mlir_diag(e):
                raise ParseError(f"{filename}: malformed StableHLO: {_mlir_diag(e)}") from None
        if _load_quant_dialect(ctx):  # uniform quantized types: parse again with the dialect
            try:
                return ir.Module.parse(source)
            except ir.MLIRError as e:
                if _QUANT_DIALECT not in _mlir_diag(e):
                    raise ParseError(f"{filename}: malformed StableHLO: {_mlir_diag(e)}") from None
        raise UnsupportedOpError(_quantized_ops(source, filename), _QUANT_DIRECTION)


# Ops whose jaxlib verifier divides by an attribute's size (StableHLO's verifyReplicaGroups
# divides the number of replica ids by the number of groups for all_to_all): a crafted
# module with such an attribute kills the process with SIGFPE inside ``Module.parse``, so
# they are checked before the verifier runs.
_UNVERIFIABLE_OPS = ("stablehlo.all_to_all",)
_MLIR_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_MLIR_ESCAPE = re.compile(r"\\([0-9a-fA-F]{2}|.)")
_SIDE_LOCK = threading.Lock()


def _decode_mlir_string(body: str) -> str:
    """The value of an MLIR string literal's body (``\\XX`` hex bytes, ``\\n``, ``\\t``,
    ``\\"``, ``\\\\``), as the MLIR lexer reads it: a generic op's name may be escaped."""

    def one(m: re.Match) -> str:
        e = m.group(1)
        if len(e) == 2:
            return chr(int(e, 16))
        return {"n": "\n", "t": "\t"}.get(e, e)

    return _MLIR_ESCAPE.sub(one, body)


@functools.cache
def _side_context() -> ir.Context:
    """A second context (all JAX dialects, unregistered dialects allowed) for the
    pre-verification read of :func:`_refuse_verifier_crash_text`."""
    ctx = _jax_internal.make_ir_context()
    ctx.allow_unregistered_dialects = True
    return ctx


def _refuse_verifier_crash_text(source: str, filename: str) -> None:
    """Raise ParseError for an op of ``source`` that jaxlib's verifier would crash on.

    Such ops have no custom assembly form: each is spelled as a quoted (possibly escaped)
    generic op name. Those names are replaced, at the same length (line and column stay
    exact), by a name of an unregistered dialect whose ops no verifier runs on, the text is
    read in a side context, and the renamed ops' attributes are checked; the text is then
    read normally by the caller. Text without such an op costs one substring test.

    Raises:
        ParseError: a ``stablehlo.all_to_all`` whose ``replica_groups`` has no group
            (shape ``0xN``), with its location; or the text is malformed (the same
            diagnostics as the normal read).
    """
    if "all_to_all" not in source and "\\" not in source:
        return
    renamed, found = [], False

    def rename(m: re.Match) -> str:
        nonlocal found
        name = _decode_mlir_string(m.group(1))
        if name not in _UNVERIFIABLE_OPS:
            return m.group(0)
        found = True
        op = name.split(".", 1)[1]
        dialect = "unchecked".ljust(len(m.group(1)) - len(op) - 1, "_")
        renamed.append(f"{dialect}.{op}")
        return f'"{dialect}.{op}"'

    text = _MLIR_STRING.sub(rename, source)
    if not found:
        return
    side = _side_context()
    with _SIDE_LOCK, side, ir.Location.unknown():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as e:
            diag = _mlir_diag(e)
            if _QUANT_DIALECT not in diag:
                raise ParseError(f"{filename}: malformed StableHLO: {diag}") from None
            if not _load_quant_dialect(side):
                return  # the normal read refuses the quantized types before any verifier
            try:
                module = ir.Module.parse(text)
            except ir.MLIRError as e2:
                raise ParseError(f"{filename}: malformed StableHLO: {_mlir_diag(e2)}") from None
        for op in walk_ops(module.operation):
            if op.name not in renamed:
                continue
            groups = op.attributes["replica_groups"] if "replica_groups" in op.attributes else None
            shape = _attr_shape(groups)
            if shape is not None and len(shape) == 2 and shape[0] == 0:
                raise ParseError(
                    f"{_where(op.location, filename)}: stablehlo.all_to_all with replica_groups of "
                    f"shape {shape[0]}x{shape[1]} (no group): the spec requires "
                    f"split_count ({_attr_int(op, 'split_count')}) processes in each group, and "
                    "jaxlib's verifier would crash the process on it"
                )


def _where(loc: ir.Location, filename: str) -> str:
    """``file:line:column`` of an op read from text (``filename`` for the parser's ``-``)."""
    m = _LOC_FILE.search(str(loc))
    if m is None:
        return filename
    return f"{filename if m.group(1) == '-' else m.group(1)}:{m.group(2)}:{m.group(3)}"


def _attr_shape(attr: ir.Attribute | None) -> tuple[int, ...] | None:
    """The shape of an elements attribute's type, None for anything else."""
    try:
        return tuple(ir.RankedTensorType(attr.type).shape)
    except Exception:  # noqa: BLE001 - not a ranked elements attribute: the verifier refuses it
        return None


def _attr_int(op: ir.Operation, key: str):
    try:
        return ir.IntegerAttr(op.attributes[key]).value
    except Exception:  # noqa: BLE001 - missing or not an integer: shown as such
        return "?"


_CHILD_READ = (
    "import sys\n"
    "from converter import mlir\n"
    "try:\n"
    "    mlir._read(sys.stdin.buffer.read(), '<child>')\n"
    "except Exception:\n"
    "    pass\n"
)


def _refuse_verifier_crash_bytes(data: bytes, filename: str) -> None:
    """Raise ParseError when reading ``data`` would crash the process in jaxlib's verifier.

    Bytecode (plain or a VHLO portable artifact) cannot be read without the verifiers
    running, nor renamed like text (:func:`_refuse_verifier_crash_text`). Bytes that spell
    the name of an op of ``_UNVERIFIABLE_OPS`` (bytecode stores op names as plain strings)
    are read first in a child Python process: if it dies on a signal, the bytes are refused.
    Other bytes cost one substring test.

    Raises:
        ParseError: the child process died (naming the signal), or could not be started.
    """
    if not any(name.split(".", 1)[1].encode() in data for name in _UNVERIFIABLE_OPS):
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD_READ], input=data, capture_output=True, env=env, timeout=600
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise ParseError(
            f"{filename}: bytecode with {'/'.join(_UNVERIFIABLE_OPS)} is read first in a child "
            f"process (jaxlib's verifier crashes on some of their attributes), which failed: {e}"
        ) from None
    if proc.returncode < 0:
        try:
            sig = signal.Signals(-proc.returncode).name
        except ValueError:
            sig = f"signal {-proc.returncode}"
        raise ParseError(
            f"{filename}: jaxlib's MLIR verifier crashes ({sig}) reading this bytecode; a "
            f"{'/'.join(_UNVERIFIABLE_OPS)} with no replica group (replica_groups of shape 0xN) "
            "does that"
        )


_QUANT_DIALECT = '`!"quant"<'  # how MLIR spells a type of the (unregistered) quant dialect
_QUANT_LOCK = threading.Lock()


def _load_quant_dialect(ctx: ir.Context) -> bool:
    """Load the ``quant`` dialect (uniform quantized types) into ``ctx``; whether it is
    loaded. jaxlib's bindings do not register it, but its portable-artifact reader loads it
    (VHLO has quantized types), so reading a trivial artifact once loads it."""
    with _QUANT_LOCK:
        try:
            ctx.dialects["quant"]
            return True
        except Exception:  # noqa: BLE001 - not loaded yet
            pass
        try:
            with ctx, ir.Location.unknown():
                empty = ir.Module.parse("func.func @main() {\n  return\n}")
                jax_mlir.deserialize_portable_artifact(serialize_portable(empty))
            ctx.dialects["quant"]
        except Exception:  # noqa: BLE001 - a jaxlib without it: the caller reports the ops
            return False
        return True


_QUANT_DIRECTION = "StableHLO reader (uniform quantized types: jaxlib's MLIR has no quant dialect)"
_OP_NAME = re.compile(r'(?:^|=)\s*"?([a-z_][\w]*\.[\w.-]+)"?')


def _quantized_ops(source: str, filename: str) -> list[MissingOp]:
    """Every op of ``source`` whose line spells a ``!quant.`` type, with its count and first
    ``file:line:column``, for the error when the ``quant`` dialect cannot be loaded (a
    module with uniform quantized types cannot be read then). A scan of the lines for the
    error message only, not a parse."""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for number, line in enumerate(source.splitlines(), 1):
        column = line.find("!quant.")
        if column < 0:
            continue
        m = _OP_NAME.search(line)
        name = m.group(1) if m else "!quant type"
        counts[name] = counts.get(name, 0) + 1
        first.setdefault(name, f"{filename}:{number}:{(m.start(1) if m else column) + 1}")
    return [MissingOp(name, n, first[name]) for name, n in counts.items()]


def _mlir_diag(e: ir.MLIRError) -> str:
    """The MLIR diagnostics of a parse failure, with their ``line:column`` positions."""
    diags = getattr(e, "error_diagnostics", None) or []
    if not diags:
        return str(e)
    return "; ".join(f"{d.location}: {d.message}" for d in diags)


def serialize_portable(module: ir.Module) -> bytes:
    """Serialize to a StableHLO portable artifact (VHLO bytecode, the spec's compatibility
    format) at the current StableHLO version. A partitioned module (an ``sdy.mesh``) is
    written in the mixed form ``jax.export`` uses, which keeps the Shardy ops (meshes,
    shardings, manual computations) as they are; others as pure VHLO."""
    with module.context:
        version = stablehlo.get_current_version()
        if any(op.operation.name == "sdy.mesh" for op in module.body.operations):
            return jax_mlir.serialize_portable_artifact(module, version, True)
        return jax_mlir.serialize_portable_artifact(module, version)


def module_text(module: ir.Module, *, debug_info: bool = True) -> str:
    """StableHLO text of ``module``, with ``loc(...)`` provenance when ``debug_info``."""
    return module.operation.get_asm(enable_debug_info=debug_info)


def clone_module(module: ir.Module) -> ir.Module:
    """A deep copy of ``module`` in the converter's context (``module`` may live in another
    one, as JAX's lowering output does). A module already there is copied op by op
    (``Operation.clone``: a seventh of the time of the bytecode round trip on BERT, and no
    attribute is made again); one from another context is written as MLIR bytecode and read
    back, a fifth of the time of printing and parsing its text, or through the text when the
    bytecode does not read back (the same module in every case, locations included)."""
    ctx = context()
    if module.context is ctx:
        return _clone_in_context(module)
    with ctx:
        data = io.BytesIO()
        try:
            module.operation.write_bytecode(data)
            return ir.Module.parse(data.getvalue())
        except Exception:  # noqa: BLE001 - any failure to write or read the bytecode: the text
            pass
        return ir.Module.parse(module_text(module))


def _clone_in_context(module: ir.Module) -> ir.Module:
    """A deep copy of ``module`` in its own context: its ``builtin.module`` op cloned, the
    clone's ops moved into a new ``ir.Module`` of the same location and attributes (the
    bindings make an ``ir.Module`` only by creating or parsing one)."""
    with module.context:
        copy = module.operation.clone(ip=False)  # detached, whatever insertion point is current
        out = ir.Module.create(loc=copy.location)
        attrs = copy.attributes
        for i in range(len(attrs)):
            out.operation.attributes[attrs[i].name] = attrs[i].attr
        at_end = ir.InsertionPoint(out.body)
        for op in list(copy.regions[0].blocks[0].operations):
            op = op.operation
            op.detach_from_parent()
            at_end.insert(op)
        copy.erase()
        return out


# --------------------------------------------------------------------------- types


@dataclass(frozen=True)
class TensorType:
    """A ranked tensor type: ``shape`` (None for a dynamic dimension) and a canonical dtype."""

    shape: tuple[int | None, ...]
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.shape)


def tensor_type(t: ir.Type) -> TensorType:
    """Decode ``tensor<2x?xf32>`` into ``TensorType((2, None), "float32")``.

    Raises:
        TypeError: a non-tensor type (tokens, tuples).
    """
    if not isinstance(t, ir.RankedTensorType):
        raise TypeError(f"expected a ranked tensor type, got {t}")
    dynamic = _DYNAMIC_SIZE  # what ``shape`` holds for a dynamic dimension (is_dynamic_dim)
    shape = tuple(None if d == dynamic else d for d in t.shape)  # one bindings call, not one per dim
    return TensorType(shape, dtypes.from_mlir(str(t.element_type)))


_DYNAMIC_SIZE = ir.ShapedType.get_dynamic_size()


# --------------------------------------------------------------------------- attributes


def _stablehlo_attr_classes() -> list[type]:
    out = []
    for name in dir(stablehlo):
        cls = getattr(stablehlo, name)
        if isinstance(cls, type) and hasattr(cls, "isinstance") and not name.endswith(("Op", "Type")):
            out.append(cls)
    return out


_SHLO_ATTRS = _stablehlo_attr_classes()
_SKIP_PROPS = {"context", "type", "typeid", "static_typeid"}


# attribute TypeID -> (its StableHLO view class, the fields to read; None: its ``value``),
# learned on first decode (TypeIDs are the process's, not a context's)
_SHLO_BY_TYPEID: dict[Any, tuple[type, tuple[str, ...] | None] | None] = {}


def _shlo_view(attr: ir.Attribute) -> tuple[type, tuple[str, ...] | None] | None:
    try:
        typeid = attr.typeid
    except Exception:  # noqa: BLE001 - an attribute without a TypeID: search every class
        typeid = None
    if typeid is not None and typeid in _SHLO_BY_TYPEID:
        return _SHLO_BY_TYPEID[typeid]  # None: no StableHLO attribute
    for cls in _SHLO_ATTRS:
        try:
            if not cls.isinstance(attr):
                continue
        except TypeError:
            continue
        fields = None
        if not hasattr(cls(attr), "value"):
            fields = tuple(
                k
                for k, v in vars(cls).items()
                if isinstance(v, property) and k not in _SKIP_PROPS and not k.startswith("_")
            )
        if typeid is not None:
            _SHLO_BY_TYPEID[typeid] = (cls, fields)
        return cls, fields
    if typeid is not None:
        _SHLO_BY_TYPEID[typeid] = None
    return None


def _decode_shlo_attr(attr: ir.Attribute) -> Any:
    found = _shlo_view(attr)
    if found is None:
        return None
    cls, fields = found
    view = cls(attr)
    if fields is None:
        return view.value
    props = {k: getattr(view, k) for k in fields}
    return {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in props.items()}


def decode_attribute(attr: ir.Attribute) -> Any:
    """A plain Python value for an MLIR attribute.

    Integers, floats, strings, bools, arrays and dictionaries become their Python kin; dense
    elements become NumPy arrays; StableHLO attributes become their enum string
    (``"LT"``) or a dict of their fields (``dot_dimension_numbers`` →
    ``{"lhs_batching_dimensions": [...], ...}``); unknown attributes stay as their text.
    """
    if isinstance(attr, ir.BoolAttr):
        return bool(attr.value)
    if isinstance(attr, ir.IntegerAttr):
        return int(attr.value)
    if isinstance(attr, ir.FloatAttr):
        return float(attr.value)
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.FlatSymbolRefAttr):
        return attr.value
    if isinstance(attr, ir.UnitAttr):
        return True
    if isinstance(attr, (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr, ir.DenseBoolArrayAttr)):
        return [v for v in attr]
    if isinstance(attr, ir.DenseElementsAttr):
        return dense_to_numpy(attr)
    if isinstance(attr, ir.ArrayAttr):
        return [decode_attribute(a) for a in attr]
    if isinstance(attr, ir.DictAttr):
        return {attr[i].name: decode_attribute(attr[i].attr) for i in range(len(attr))}
    if isinstance(attr, ir.TypeAttr):
        return attr.value
    decoded = _decode_shlo_attr(attr)
    return str(attr) if decoded is None else decoded


_TOKEN = re.compile(r"0x[0-9A-Fa-f]+|[-+]?(?:inf|nan|\d+\.?\d*(?:[eE][-+]?\d+)?)|true|false")


def dense_to_numpy(attr: ir.DenseElementsAttr) -> np.ndarray:
    """The value of a dense elements attribute as a NumPy array of its exact dtype.

    Uses the bindings' buffer protocol where it exists; for element types it lacks (bf16,
    f16 on some builds, complex) reads the attribute's value literal, either the hex blob
    ``"0x..."`` (little-endian raw bytes) or the element list, where MLIR spells NaN and
    infinities as their hex bit patterns.
    """
    if isinstance(ir.ShapedType(attr.type).element_type, ir.IndexType):  # custom_call layouts
        return np.array([int(v) for v in ir.DenseIntElementsAttr(attr)], dtype=np.int64)
    ttype = tensor_type(attr.type)
    dtype = dtypes.to_numpy(ttype.dtype)
    shape = tuple(ttype.shape)
    if attr.is_splat:
        return np.full(shape, _splat_value(attr, dtype), dtype=dtype)
    try:
        arr = np.array(attr, copy=True)
        if arr.dtype == dtype or (dtype == np.bool_ and arr.dtype.kind in "biu"):
            return arr.astype(dtype).reshape(shape)
    except (TypeError, ValueError, RuntimeError):
        pass
    return _dense_from_literal(str(attr), shape, dtype)


def _splat_value(attr: ir.DenseElementsAttr, dtype: np.dtype):
    if dtype.kind == "c":
        flat = _dense_from_literal(str(attr), (1,), dtype)
        return flat[0]
    value = attr.get_splat_value()
    if isinstance(value, ir.BoolAttr):
        return bool(value.value)
    return value.value


def _component_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype({"c": {8: np.float32, 16: np.float64}}.get(dtype.kind, {}).get(dtype.itemsize, dtype))


def _dense_from_literal(text: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    body = text[text.index("<") + 1 : text.rindex(" : ")].rstrip()
    body = body[:-1] if body.endswith(">") else body
    if body.startswith('"0x'):
        raw = bytes.fromhex(body[3:-1])
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    comp = _component_dtype(dtype)
    bits = np.dtype(f"uint{comp.itemsize * 8}")
    values = []
    for tok in _TOKEN.findall(body):
        if tok.startswith("0x"):
            values.append(np.array(int(tok, 16), dtype=bits).view(comp).item())
        elif tok in ("true", "false"):
            values.append(tok == "true")
        else:
            values.append(float(tok))
    arr = np.array(values, dtype=np.float64 if comp.kind == "f" else comp)
    if dtype.kind == "c":
        arr = arr[0::2] + 1j * arr[1::2]
    if arr.size == 1:  # a splat
        return np.full(shape, arr[0], dtype=dtype)
    return arr.astype(dtype).reshape(shape)


# --------------------------------------------------------------------------- ops

_LOC_NAME = re.compile(r'loc\("([^"]*)"')
_LOC_FILE = re.compile(r'"([^"]+)":(\d+):(\d+)')


def format_location(loc: ir.Location) -> str:
    """A one-line rendering of an op's ``loc(...)``: its name path (which carries the source
    op, e.g. ``aten.addmm.default[model.py:42]``) and the first file position, if any."""
    text = str(loc)
    parts = []
    name = _LOC_NAME.search(text)
    pos = _LOC_FILE.search(text)
    if name and pos and pos.start() == name.start(1) - 1:  # loc("file":line:col) has no name
        name = None
    if name and name.group(1) not in ("", "-"):
        parts.append(name.group(1))
    if pos and pos.group(1) != "-":
        parts.append(f"{pos.group(1)}:{pos.group(2)}")
    return " @ ".join(parts)


class Op:
    """A read-only view of one MLIR operation with decoded attributes.

    Attributes:
        name: the op name (``stablehlo.add``, ``func.call``).
        mlir: the underlying ``ir.Operation``.
    """

    __slots__ = ("mlir", "name", "_attrs", "_some")

    def __init__(self, operation: ir.Operation):
        self.mlir = operation
        self.name: str = operation.name
        self._attrs: dict[str, Any] | None = None
        self._some = False  # _attrs holds only the attributes attr() was asked for

    @property
    def attrs(self) -> dict[str, Any]:
        """Every attribute, decoded by :func:`decode_attribute`."""
        if self._attrs is None or self._some:
            done = self._attrs or {}
            named = self.mlir.attributes
            attrs = {}
            for i in range(len(named)):
                key = named[i].name
                if key in done:
                    attrs[key] = done[key]
                    continue
                try:
                    attrs[key] = decode_attribute(named[key])
                except TypeError:
                    # the bindings cannot hand out dense attributes of some element types
                    # (complex); read the value literal from the op's own printed form.
                    attrs[key] = self._literal_attr(key)
            self._attrs, self._some = attrs, False
        return self._attrs

    def _literal_attr(self, key: str) -> np.ndarray:
        text = self.mlir.get_asm(enable_debug_info=False)
        start = text.find("dense<")
        if key != "value" or start < 0:
            raise TypeError(f"{self.name}: cannot decode attribute {key!r}")
        ttype = self.result_type
        return _dense_from_literal(text[start:].splitlines()[0], ttype.shape, dtypes.to_numpy(ttype.dtype))

    def attr(self, key: str, default: Any = None) -> Any:
        """One decoded attribute, or ``default`` when absent (decodes that one only, as
        :attr:`attrs` would)."""
        attrs = self._attrs
        if attrs is None:
            attrs = self._attrs = {}
            self._some = True  # decoded one by one: attrs decodes the rest
        elif key in attrs or not self._some:
            return attrs.get(key, default)
        named = self.mlir.attributes
        if key not in named:
            return default
        try:
            value = decode_attribute(named[key])
        except TypeError:  # see attrs
            value = self._literal_attr(key)
        attrs[key] = value
        return value

    @property
    def operands(self) -> list[ir.Value]:
        return list(self.mlir.operands)

    @property
    def results(self) -> list[ir.Value]:
        return list(self.mlir.results)

    @property
    def result_types(self) -> list[TensorType]:
        """Decoded result types (tensors only)."""
        return [tensor_type(r.type) for r in self.mlir.results]

    @property
    def result_type(self) -> TensorType:
        """The decoded type of a single-result op."""
        return tensor_type(self.mlir.results[0].type)

    def operand_type(self, i: int) -> TensorType:
        """The decoded type of operand ``i``."""
        return tensor_type(self.mlir.operands[i].type)

    @property
    def regions(self) -> list[ir.Region]:
        return list(self.mlir.regions)

    @property
    def location(self) -> str:
        """The op's source location, formatted by :func:`format_location`."""
        return format_location(self.mlir.location)

    def __repr__(self) -> str:
        return f"Op({self.name} @ {self.location})"


def functions(module: ir.Module) -> dict[str, ir.Operation]:
    """The module's ``func.func`` ops by symbol name."""
    out = {}
    for op in module.body.operations:
        if op.operation.name == "func.func":
            out[ir.StringAttr(op.attributes["sym_name"]).value] = op.operation
    return out


def main_function(module: ir.Module) -> ir.Operation:
    """The public entry point: ``@main``, else the only public function.

    Raises:
        ParseError: no such function.
    """
    funcs = functions(module)
    if "main" in funcs:
        return funcs["main"]
    public = [
        f
        for f in funcs.values()
        if "sym_visibility" not in f.attributes
        or ir.StringAttr(f.attributes["sym_visibility"]).value == "public"
    ]
    if len(public) == 1:
        return public[0]
    raise ParseError(f"module has no @main and {len(public)} public functions")


def walk_ops(region_holder: ir.Operation):
    """Every op nested in ``region_holder``'s regions, depth first."""
    for region in region_holder.regions:
        for block in region.blocks:
            for op in block.operations:
                yield op.operation
                yield from walk_ops(op.operation)


class OpWithAttrs:
    """``op`` (an :class:`Op`) with some attributes replaced: a rule of one op reused for a
    variant that carries an attribute as a constant operand (``dynamic_gather`` read as
    ``gather`` with its ``slice_sizes``). Everything else is ``op``'s."""

    def __init__(self, op: Op, overrides: dict[str, Any]):
        self._op, self._overrides = op, dict(overrides)

    def attr(self, key: str, default: Any = None) -> Any:
        """The overriding value for ``key``, else ``op.attr(key, default)``."""
        return self._overrides[key] if key in self._overrides else self._op.attr(key, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._op, name)
