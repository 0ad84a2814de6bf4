"""The converter's error hierarchy.

Every error the converter raises on purpose derives from :class:`ConversionError`, so callers
can catch one type. Errors raised while lowering or interpreting one op are wrapped in
:class:`OpConversionError`, which names the op and its source location (the StableHLO
``loc(...)`` or the torch FX node's stack trace), the way ``torch.fx.Interpreter`` reports
``While executing {node}``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


class ConversionError(Exception):
    """Base class of every error the converter raises on purpose."""


@dataclass(frozen=True)
class MissingOp:
    """One op kind that a registry has no rule for.

    Attributes:
        name: the source op's canonical name (``aten.addmm.default``, ``stablehlo.fft``,
            ``ai.onnx::Col2Im-18``).
        count: how many times it occurs in the model.
        location: source location of its first occurrence (``file.py:42``), or ``""``.
    """

    name: str
    count: int
    location: str = ""


class UnsupportedOpError(ConversionError):
    """The model uses ops that the registry of the conversion direction lacks.

    Raised once per model with *every* missing op, never one at a time.

    Attributes:
        missing: the missing ops, sorted by name.
        direction: what was being converted (``"torch frontend"``, ``"jax backend"``).
    """

    def __init__(self, missing: Iterable[MissingOp], direction: str):
        self.missing = sorted(missing, key=lambda m: m.name)
        self.direction = direction
        lines = [f"{len(self.missing)} op(s) have no lowering in the {direction}:"]
        for m in self.missing:
            where = f", first at {m.location}" if m.location else ""
            lines.append(f"  {m.name} (x{m.count}{where})")
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class DataDependentOp:
    """One op whose output size depends on the input values.

    Attributes:
        name: the source op (``aten.nonzero.default``).
        location: its source line (``model.py:42``), or ``""``.
        sizes: the symbolic sizes the exporter gave it (``u0``).
        reason: why the size depends on the values.
        fix: how to give it a static size.
    """

    name: str
    location: str
    sizes: str
    reason: str
    fix: str


class DataDependentShapeError(ConversionError):
    """The model has ops whose output size depends on the input values (``nonzero``,
    ``x[mask]``, ``masked_select``, ``unique``...), which a StableHLO module with static shapes
    cannot hold. Raised once per model with *every* such op, each with its source line, the
    reason and the static-size fix.

    Attributes:
        ops: the :class:`DataDependentOp` entries, in graph order.
    """

    def __init__(self, ops: Iterable[DataDependentOp]):
        self.ops = list(ops)
        names = ", ".join(dict.fromkeys(o.name for o in self.ops))
        lines = [
            f"{len(self.ops)} op(s) have an output size that depends on the input values "
            f"({names}); a converted module needs static shapes:"
        ]
        for o in self.ops:
            where = f" at {o.location}" if o.location else ""
            lines.append(f"  {o.name}{where}: size {o.sizes}: {o.reason}.\n    Fix: {o.fix}.")
        super().__init__("\n".join(lines))


class OpConversionError(ConversionError):
    """Lowering or interpreting one op failed.

    Attributes:
        op_name: the op (``aten.convolution.default``, ``stablehlo.gather``).
        location: its source location, possibly empty.
    """

    def __init__(self, op_name: str, location: str, cause: BaseException):
        self.op_name = op_name
        self.location = location
        where = f" at {location}" if location else ""
        super().__init__(f"While converting {op_name}{where}: {type(cause).__name__}: {cause}")


class DynamicDimensionError(OpConversionError):
    """A dynamic dimension cannot stay symbolic: an op's rule needs its concrete value
    (a comparison of sizes that depends on it, a size expression without a symbolic form).
    Raised instead of silently specializing to the example size.

    Attributes:
        dims: the dynamic dimensions involved (names as in the signature).
    """

    def __init__(self, op_name: str, location: str, cause: BaseException, dims: Iterable[str] = ()):
        super().__init__(op_name, location, cause)
        self.dims = tuple(dims)
        names = ", ".join(repr(d) for d in self.dims) or "a dynamic dimension"
        self.args = (
            f"{self.args[0]}\n{names} cannot stay symbolic here: the op needs a concrete size "
            "(make the dimension static, or relate dimensions with derived Dims such as 2 * seq)",
        )


class SignatureMismatchError(ConversionError, ValueError):
    """A converted function was called with inputs that do not match its signature.

    The message names the argument path (``args[1]['mask']``) and the expected and actual
    shape and dtype.
    """


class NarrowingError(ConversionError):
    """A module's 64-bit types cannot be computed in 32 bits exactly
    (:func:`converter.passes.narrow.narrow_64bit`, ``to_jax(x64=False)``): a constant or a
    parameter value outside the 32-bit range, a declared dimension range above it, an integer
    op whose result may leave it, a float64/complex128 value (float32 is not within float64's
    tolerance), or an op without a narrowing rule that takes or makes 64-bit values.

    Attributes:
        problems: one line per offending op (op name, source location, why), or per
            signature leaf (its name).
    """

    def __init__(self, problems: Iterable[str]):
        self.problems = list(problems)
        lines = [
            f"this module cannot run in JAX's 32-bit mode without changing its numbers "
            f"({len(self.problems)} problem(s)):"
        ]
        lines += [f"  {p}" for p in self.problems[:20]]
        if len(self.problems) > 20:
            lines.append(f"  ... and {len(self.problems) - 20} more")
        lines.append(
            "Use to_jax(x64=True), which runs the module with 64-bit types under a scoped "
            "jax.enable_x64(True) (call it with NumPy arrays, or inside `with jax.enable_x64(True):`)"
        )
        super().__init__("\n".join(lines))


class InputRangeError(SignatureMismatchError):
    """A 64-bit integer input of a function converted to JAX's 32-bit form
    (``to_jax(x64=False)``) holds a value outside the 32-bit range: it is refused, never
    wrapped. The message names the argument path and the offending value."""


class ParseError(ConversionError):
    """An input file or IR text could not be read (malformed StableHLO, corrupt archive)."""


class ModuleFormatError(ParseError):
    """A saved :class:`converter.Module` file is missing, corrupt, or of an unknown version."""


class UntrustedInputError(ParseError):
    """Loading an input file would run code from it (a pickled payload in a ``.pt2``, a
    shape expression torch would ``eval``); refused unless the caller opts in
    (``trust_pickle=True``, ``convert --trust-pickle``). See ``docs/security.md``."""


class ExportError(ConversionError):
    """``torch.export`` could not export the model (data-dependent control flow, outputs
    of types it cannot flatten...). The message names the model and torch's error; the
    original exception is the ``__cause__``."""


class InputError(ConversionError):
    """User-supplied values do not fit the model: an ``--inputs`` file with the wrong
    arrays, shapes or dtypes, object arrays."""


class InputTypeError(InputError, TypeError):
    """An argument of a type the call cannot take (``call_jax`` given a NumPy array where
    it takes torch tensors); names its argument path. Also a ``TypeError``."""


class InputValueError(InputError, ValueError):
    """An argument value the call refuses (``to_onnx(opset=12)``). Also a ``ValueError``."""


class OutOfMemoryError(ConversionError, MemoryError):
    """The machine ran out of memory (a ``MemoryError`` anywhere in the conversion): the model
    or its inputs are too large for it. Also a ``MemoryError``. The CLI's exit status 2."""


class OutputError(ConversionError):
    """An output cannot be written: its directory is read-only, not a directory, or on a
    file system that takes no new files. Names the path and the system's reason."""


class DistributedError(ConversionError):
    """A partitioned (multi-device) module cannot run as asked: an op outside its
    ``shard_map`` manual computation, shards of unequal size, a sharding form not supported,
    or ``torch.distributed``'s default process group missing or of another world size than
    the module's partitions. Names the op, argument or sizes at fault."""


class MissingDependencyError(ConversionError, ImportError):
    """An optional dependency the call needs is not installed (``onnx``/``onnxruntime`` for
    ``from_onnx``, ``to_onnx``, ONNX validation). The message names the package and the extra
    that installs it (``pip install converter[onnx]``). Also an ``ImportError``.

    Attributes:
        package: the missing distribution (``"onnxruntime"``).
        extra: the project extra that provides it (``"onnx"``).
    """

    def __init__(self, package: str, extra: str, purpose: str):
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs {package}, which is not installed: pip install 'converter[{extra}]'",
            name=package,
        )


class InternalError(ConversionError):
    """An unexpected failure inside the converter (a bug): the public API raises it, wrapping
    the original exception (the ``__cause__``), so callers can catch
    :class:`ConversionError` alone; the ``convert`` command exits with status 1 for it."""


class ShardingError(ConversionError):
    """A sharded module or sharding request that cannot be honoured: fewer devices than the
    module's mesh needs, a mesh of another shape, a partition spec that does not fit a
    parameter, a collective whose device groups match no mesh axes. Names the mesh, the
    parameter or the op."""


class DimensionsUnifiedWarning(UserWarning):
    """``from_onnx`` assumed that symbolic dimensions the graph inputs name apart are one size
    (the graph relates them where JAX could not prove the relation: a mask reshaped to the
    batch of the token ids); the module's signature checks the equality at each call."""


class ClosedOverParamsWarning(UserWarning):
    """``JaxFunction.params`` was reassigned after a staged JAX program (``jax.jit(f)``, or a
    jitted function that calls ``f``) captured the previous parameters as constants: JAX
    cached that trace, so the program still computes with the old ones."""


class EmbeddedParamsWarning(UserWarning):
    """A staged JAX program (``jax.jit(f)``, or a jitted function that calls ``f``) is
    closing over a converted function's parameters, and this JAX embeds closed-over arrays
    in the program as constants: the first call lowers and compiles every weight into the
    program (slow, about twice the weights' memory). Raised once per function, for at least
    :data:`converter.backends.jax.function.EMBED_WARN_BYTES` of parameters, unless JAX hoists such constants
    into arguments (``JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=True`` set before JAX is imported)."""
