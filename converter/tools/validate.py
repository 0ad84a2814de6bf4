"""``convert validate``: prove a conversion matches its source, or show where it breaks.

:func:`validate` converts a source (anything ``convert`` reads: a torch or JAX factory
``file.py:factory``, a ``.pt2``, a ``.jax`` artifact, an ``.onnx`` file, StableHLO text or
bytecode, a ``.shlo`` Module file) to every requested target, runs source and targets on the same
seeded inputs and compares every output leaf with the tolerance of its dtype
(:data:`TOLERANCES`). On a mismatch it bisects (:mod:`converter.tools.bisect`) to the first
StableHLO op whose value diverges. :func:`main` is the command line.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from .. import dtypes
from .._contract import quiet, verbose
from ..arrays import to_torch_tree
from ..arrays import tree_map as _tree_map
from ..errors import ConversionError, ExportError, InputError
from ..fileio import atomic_write, check_size
from ..signature import flatten
from .bisect import bisect

# --------------------------------------------------------------------------- tolerances


@dataclass(frozen=True)
class Tolerance:
    """``|actual - expected| <= atol + rtol * |expected|``, elementwise (as ``numpy.isclose``)."""

    rtol: float
    atol: float


#: Tolerance per canonical dtype name. Floats follow the precision of the type (torch's
#: ``assert_close`` defaults, loosened for the half types because a model accumulates
#: rounding over many ops); integers and bool must match exactly.
TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(1e-7, 1e-7),
    "float32": Tolerance(1e-5, 1e-5),
    "float16": Tolerance(1e-3, 1e-3),
    "bfloat16": Tolerance(1.6e-2, 1e-2),
    "float8_e4m3fn": Tolerance(1.25e-1, 1e-1),
    "float8_e5m2": Tolerance(2.5e-1, 1e-1),
    "complex128": Tolerance(1e-7, 1e-7),
    "complex64": Tolerance(1e-5, 1e-5),
}
_EXACT = Tolerance(0.0, 0.0)


def tolerance(dtype: Any) -> Tolerance:
    """The tolerance for ``dtype`` (any spelling :func:`converter.dtypes.name_of` accepts);
    exact for integers and bool."""
    return TOLERANCES.get(dtypes.name_of(dtype), _EXACT)


def as_numpy(value: Any) -> np.ndarray:
    """A NumPy array of a torch tensor, JAX array, NumPy array or Python scalar (bfloat16
    torch tensors become ml_dtypes bfloat16)."""
    mod = type(value).__module__
    if mod.startswith("torch"):
        import torch

        t = value.detach().cpu().resolve_conj().resolve_neg().contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.uint16).numpy().view(dtypes.to_numpy("bfloat16"))
        return t.numpy()
    return np.asarray(value)


@dataclass
class Comparison:
    """The outcome of comparing one output leaf.

    Attributes:
        max_abs: largest ``|actual - expected|`` over finite elements (0 for empty tensors).
        max_rel: largest ``|actual - expected| / |expected|`` (``inf`` where expected is 0
            and actual is not).
        rtol, atol: the tolerance used.
        passed: every element within tolerance, same NaN/inf positions, same shape and dtype.
        note: why it failed when not for the values (shape, dtype, NaN positions).
    """

    max_abs: float
    max_rel: float
    rtol: float
    atol: float
    passed: bool
    note: str = ""


def compare(
    expected: Any, actual: Any, tol: Tolerance | None = None, *, check_dtype: bool = True
) -> Comparison:
    """Compare ``actual`` with ``expected`` (arrays or tensors of any framework).

    Finite values pass when ``|actual - expected| <= atol + rtol * |expected|``; non-finite
    values must match exactly, per real component of a complex value: NaN only with NaN,
    ``inf`` only with ``inf`` and ``-inf`` only with ``-inf`` (no tolerance applies to them).

    Args:
        expected: the reference value.
        actual: the value under test.
        tol: the tolerance; default :func:`tolerance` of ``expected``'s dtype.
        check_dtype: fail when the dtypes' canonical names differ.
    """
    e, a = as_numpy(expected), as_numpy(actual)
    tol = tol or tolerance(e.dtype)
    if e.shape != a.shape:
        return Comparison(math.inf, math.inf, tol.rtol, tol.atol, False, f"shape {a.shape} != {e.shape}")
    note = ""
    if check_dtype and dtypes.name_of(e.dtype) != dtypes.name_of(a.dtype):
        note = f"dtype {dtypes.name_of(a.dtype)} != {dtypes.name_of(e.dtype)}"
    if e.size == 0:
        return Comparison(0.0, 0.0, tol.rtol, tol.atol, not note, note)
    wide = np.complex128 if np.iscomplexobj(e) or np.iscomplexobj(a) else np.float64
    e64, a64 = e.astype(wide), a.astype(wide)
    # Non-finite values match exactly, per real component (a complex value's real and
    # imaginary parts each): NaN only with NaN, an infinity only with the same infinity.
    # The tolerance test below would pass any actual value against an infinite expected
    # one (``atol + rtol * inf`` is inf), so it sees finite pairs only.
    parts = (e64.real, e64.imag, a64.real, a64.imag) if wide is np.complex128 else (e64, e64, a64, a64)
    er, ei, ar, ai = parts
    nan_diff = (np.isnan(er) != np.isnan(ar)) | (np.isnan(ei) != np.isnan(ai))
    inf_diff = ((np.isinf(er) | np.isinf(ar)) & (er != ar)) | ((np.isinf(ei) | np.isinf(ai)) & (ei != ai))
    finite = np.isfinite(e64) & np.isfinite(a64)
    diff = np.abs(a64 - e64)
    mag = np.abs(e64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(mag > 0, diff / mag, np.where(diff == 0, 0.0, np.inf))
    max_abs = float(np.max(diff[finite], initial=0.0))
    max_rel = float(np.max(rel[finite], initial=0.0))
    ok = bool(np.all(diff[finite] <= tol.atol + tol.rtol * mag[finite]))
    if wide is np.complex128:  # a finite component beside a matching non-finite one
        for x, y in ((er, ar), (ei, ai)):
            both = ~finite & np.isfinite(x) & np.isfinite(y)
            ok = ok and bool(np.all(np.abs(y[both] - x[both]) <= tol.atol + tol.rtol * np.abs(x[both])))
    if nan_diff.any():
        ok, note = False, note or f"NaN at {int(nan_diff.sum())} position(s) where the other has none"
    elif inf_diff.any():
        i = tuple(int(j) for j in np.argwhere(inf_diff)[0])
        note = note or (
            f"infinities differ at {int(inf_diff.sum())} position(s), first {list(i)}: {a64[i]} != {e64[i]}"
        )
        ok = False
        max_abs = max_rel = math.inf
    return Comparison(max_abs, max_rel, tol.rtol, tol.atol, ok and not note, note)


def close_scaled(ref: Any, got: Any) -> tuple[bool, Comparison]:
    """Compare one intermediate value for bisection: :func:`compare` with the dtype's
    tolerance, the absolute part scaled by the reference's largest finite magnitude (values
    inside a model are not normalized); dtypes are not checked."""
    r = as_numpy(ref)
    tol = tolerance(r.dtype)
    finite = r[np.isfinite(r)] if r.dtype.kind in "fc" else r
    scale = float(np.max(np.abs(finite), initial=1.0)) if finite.size else 1.0
    c = compare(r, got, Tolerance(tol.rtol, tol.atol * max(1.0, scale)), check_dtype=False)
    return c.passed, c


# --------------------------------------------------------------------------- subnormals

#: Sources whose reference runs on XLA's CPU client (JAX functions and ``.jax`` artifacts,
#: StableHLO, ``.shlo`` Modules), and the targets that do (the JAX backend): XLA CPU flushes
#: subnormal operands and results of these dtypes to zero (float16 it computes in float32,
#: where its subnormals are normal, so they stay). docs/floating_point.md has the policy.
XLA_FLUSHING = frozenset({"jax", "stablehlo", "module"})
XLA_TARGETS = frozenset({"jax"})
FLUSHED_DTYPES = frozenset({"float32", "float64", "bfloat16", "complex64", "complex128"})


def _subnormal_mask(x: np.ndarray) -> np.ndarray | None:
    """Where ``x`` (a NumPy array) is subnormal in its dtype, per real component; None for
    a dtype XLA does not flush."""
    if not isinstance(x, np.ndarray) or dtypes.name_of(x.dtype) not in FLUSHED_DTYPES:
        return None
    real = x.real if np.iscomplexobj(x) else x
    tiny = float(ml_dtypes.finfo(real.dtype).tiny)
    parts = (x.real, x.imag) if np.iscomplexobj(x) else (x,)
    masks = [(p != 0) & (np.abs(p.astype(np.float64)) < tiny) for p in parts]
    return masks[0] | masks[1] if len(masks) == 2 else masks[0]


def flush_subnormals(x: Any) -> Any:
    """``x`` with every subnormal value of a float32/float64/bfloat16 (or complex) array
    replaced by a zero of the same sign, as XLA's CPU client treats it; other values and
    leaves unchanged."""
    mask = _subnormal_mask(x)
    if mask is None or not mask.any():
        return x
    if np.iscomplexobj(x):
        out = np.empty_like(x)  # parts set one by one: re + 1j * im would lose a -0.0 imaginary part
        out.real, out.imag = (flush_subnormals(np.ascontiguousarray(p)) for p in (x.real, x.imag))
        return out
    return np.where(mask, np.copysign(np.zeros((), x.dtype), x), x).astype(x.dtype)


def count_subnormals(tree: Any) -> int:
    """How many subnormal values (of the dtypes XLA flushes) the arrays of ``tree`` hold."""
    total = 0

    def visit(x):
        nonlocal total
        mask = _subnormal_mask(x)
        total += 0 if mask is None else int(mask.sum())
        return x

    _tree_map(visit, tree)
    return total


# --------------------------------------------------------------------------- inputs


def random_leaf(
    shape: Sequence[int], dtype: str, rng: np.random.Generator, example: Any = None
) -> np.ndarray:
    """One seeded random input of ``shape`` and canonical ``dtype``.

    Floats are standard normal (absolute values when the example is non-negative, e.g. a
    variance); integers are uniform in ``[min(0, example.min()), example.max() + 1)`` when an
    example with values is given (token ids stay below the vocabulary), else ``[0, 10)``;
    bools are fair coin flips.
    """
    shape = tuple(d if isinstance(d, int) else 1 for d in shape)
    np_dtype = dtypes.to_numpy(dtype)
    ex = None if example is None else as_numpy(example)
    if ex is not None and ex.size == 0:
        ex = None
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtypes.is_floating(dtype) or dtypes.is_complex(dtype):
        x = rng.standard_normal(shape)
        if dtypes.is_complex(dtype):
            x = x + 1j * rng.standard_normal(shape)
        elif ex is not None and float(np.min(ex.astype(np.float64))) >= 0:
            x = np.abs(x)
        return x.astype(np_dtype)
    low, high = 0, 10
    if ex is not None:
        low, high = min(0, int(ex.min())), int(ex.max()) + 1
    if dtypes.is_unsigned(dtype):
        low = max(low, 0)
    return rng.integers(low, max(high, low + 1), size=shape).astype(np_dtype)


def make_inputs(signature, example: tuple | None = None, seed: int = 0) -> tuple[tuple, dict]:
    """Seeded random user inputs ``(args, kwargs)`` for ``signature`` (NumPy arrays; static
    leaves keep the value they were specialized to).

    Args:
        signature: the module's :class:`converter.signature.Signature`.
        example: the example ``(args, kwargs)`` the module was converted with; its values
            set the ranges of integer inputs (see :func:`random_leaf`).
        seed: NumPy ``default_rng`` seed.

    Raises:
        InputError: the inputs' shapes claim more memory than the budget
            (:func:`converter.fileio.check_size`), e.g. a dimension of ``INT64_MAX``.
    """
    from ..signature import unflatten

    rng = np.random.default_rng(seed)
    examples: list[Any] = [None] * len(signature.inputs)
    if example is not None:
        examples = [v for _, v in flatten(example, signature.in_tree)]
    total = 0
    for s, ex in zip(signature.inputs, examples, strict=True):
        numel = math.prod(d if isinstance(d, int) else 1 for d in _concrete(s.shape, ex))
        total += numel * 16  # the float64 (complex128) draw, then the cast
        check_size(total, f"random input {s.name} ({s.dtype}{list(s.shape)})", InputError)
    leaves = [
        random_leaf(_concrete(s.shape, ex), s.dtype, rng, ex)
        for s, ex in zip(signature.inputs, examples, strict=True)
    ]
    args, kwargs = unflatten(signature.in_tree, leaves)
    return tuple(args), dict(kwargs)


def _concrete(shape: Sequence, example: Any) -> Sequence:
    """``shape``, its dynamic dimensions (``from_torch(dynamic_shapes=)``) sized as the
    example's."""
    if all(isinstance(d, int) for d in shape) or example is None:
        return shape
    return tuple(d if isinstance(d, int) else int(n) for d, n in zip(shape, np.shape(example), strict=True))


def load_inputs(path: str | os.PathLike, signature) -> tuple[tuple, dict]:
    """User inputs from an ``.npz``: keyed by input path (``args[0]``, ``kwargs['mask']``) as
    the signature names them, or positionally (``arr_0``, ``arr_1``...) in signature order.
    Each array must have its input's shape (dynamic dimensions: any size) and dtype.

    Raises:
        InputError: the file is missing or not an ``.npz`` of numeric arrays (object arrays
            are refused: loading them would unpickle), has the wrong number of arrays or
            unknown keys, or an array's shape or dtype differs from its input's; names the
            file and the input.
    """
    from .. import ziparchive
    from ..errors import ParseError
    from ..signature import unflatten

    try:
        with open(path, "rb") as f:
            if ziparchive.is_zip(f.read(4)):  # the layout and sizes numpy's zip reader will read
                try:
                    ziparchive.open_checked(f, f"--inputs {path}").close()
                except ParseError as e:
                    raise InputError(str(e)) from e
            f.seek(0)
            data = np.load(f, allow_pickle=False)
            if not hasattr(data, "files"):  # an .npy: one array (not a context manager)
                raise InputError(f"--inputs {path}: a single array, not an .npz archive of the inputs")
            with data:
                arrays = {k: data[k] for k in data.files}
    except InputError:
        raise
    except MemoryError:
        raise
    except FileNotFoundError as e:
        raise InputError(f"--inputs {path}: no such file") from e
    except ValueError as e:  # object arrays (allow_pickle=False), not an npy/npz file
        raise InputError(f"--inputs {path}: not an .npz of numeric arrays ({e})") from e
    except Exception as e:  # noqa: BLE001 - zipfile/format errors of a corrupt file
        raise InputError(f"--inputs {path}: unreadable ({type(e).__name__}: {e})") from e
    names = [s.name for s in signature.inputs]
    if set(arrays) == set(names):
        leaves = [arrays[n] for n in names]
    elif len(arrays) == len(names):
        leaves = list(arrays.values())
    else:
        raise InputError(
            f"--inputs {path}: has arrays {sorted(arrays)}, the model takes {len(names)} inputs {names}"
        )
    for spec, leaf in zip(signature.inputs, leaves, strict=True):
        shape_ok = len(leaf.shape) == len(spec.shape) and all(
            not isinstance(d, int) or d == n for d, n in zip(spec.shape, leaf.shape, strict=True)
        )
        dtype = dtypes.name_of(leaf.dtype)  # never raises: NumPy names every dtype
        if not shape_ok or dtype != spec.dtype:
            raise InputError(
                f"--inputs {path}: input {spec.name} is {dtype}{list(leaf.shape)}, "
                f"the model takes {spec.dtype}{list(spec.shape)}"
            )
    args, kwargs = unflatten(signature.in_tree, leaves)
    return tuple(args), dict(kwargs)


# --------------------------------------------------------------------------- sources

TARGETS = ("jax", "torch", "onnx")
SOURCES = ("torch", "jax", "onnx", "stablehlo", "module")

#: INPUT suffixes that select the source when ``--from`` is omitted (as ``convert`` does).
SOURCE_SUFFIXES: dict[str, tuple[str, ...]] = {
    "torch": (".pt2", ".py"),
    "jax": (".jax", ".jaxexport"),
    "onnx": (".onnx",),
    "stablehlo": (".mlir", ".mlirbc"),
    "module": (".shlo",),
}


def infer_source(source: str) -> str:
    """The ``--from`` framework ``source``'s suffix implies (``x.py:factory`` means torch).

    Raises:
        ConversionError: the suffix says nothing; names the choices.
    """
    base = source.rpartition(":")[0] if ".py:" in source else source
    for name, suffixes in SOURCE_SUFFIXES.items():
        if base.endswith(suffixes):
            return name
    raise ConversionError(
        f"cannot tell the source format of {source!r} from its suffix; pass --from ({', '.join(SOURCES)})"
    )


@dataclass
class Source:
    """A loaded source model.

    Attributes:
        framework: one of :data:`SOURCES`.
        module: its conversion.
        run: ``run(args, kwargs) -> outputs``: the reference, NumPy user inputs in, flat NumPy
            output leaves (in ``module.signature.outputs`` order) out.
        reference: what ``run`` executes (``eager torch``, ``onnxruntime``...).
        example: the example ``(args, kwargs)`` as the framework takes them, or None.
        native: the source object (torch: the decomposed ``ExportedProgram``), for bisection.
    """

    framework: str
    module: Any
    run: Callable[[tuple, dict], list[np.ndarray]]
    reference: str
    example: tuple[tuple, dict] | None = None
    native: Any = None


def flat_outputs(out: Any, signature) -> list[np.ndarray]:
    """The tensor leaves of a model's output in signature order, as NumPy arrays."""
    return [as_numpy(v) for _, v in flatten(out, signature.out_tree)]


def _factory(spec: str, framework: str = "torch") -> tuple:
    """Import ``file.py:factory`` and call it (:func:`converter.tools.cli.load_factory`: the same
    rules and errors as ``convert``); returns ``(obj, args, kwargs, dynamic_shapes)``
    (``dynamic_shapes`` None unless a torch factory returned torch.export's ``dynamic_shapes``
    fourth)."""
    from .loaders import load_factory, split_factory

    where = split_factory(spec) or (Path(spec), "factory")
    if framework == "torch":
        return load_factory(*where, framework=framework, dynamic=True)
    return (*load_factory(*where, framework=framework), None)


def torch_source(model: Any, args: tuple, kwargs: dict | None = None, dynamic_shapes: Any = None) -> Source:
    """A torch ``nn.Module`` (or ``ExportedProgram``) with example inputs (and
    ``torch.export`` ``dynamic_shapes``); the reference is eager torch."""
    import torch

    import converter
    from converter.frontends.torch import export

    kwargs = kwargs or {}
    try:
        with quiet(not verbose()):  # torch.export's graph dumps and pytree FutureWarnings
            ep = export(model, args, kwargs, dynamic_shapes)
    except ConversionError:
        raise
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        name = type(model).__name__
        raise ExportError(f"torch.export could not export {name}: {type(e).__name__}: {first}") from e
    module = converter.from_torch(ep)
    call = model.module() if isinstance(model, torch.export.ExportedProgram) else model

    def run(a: tuple, k: dict) -> list[np.ndarray]:
        with torch.no_grad():
            return flat_outputs(call(*to_torch_tree(a), **to_torch_tree(k)), module.signature)

    return Source("torch", module, run, "eager torch", (args, kwargs), ep)


def jax_source(fn: Callable, args: tuple, kwargs: dict | None = None) -> Source:
    """A JAX function with example inputs; the reference is ``fn`` itself (eager JAX)."""
    import converter

    kwargs = kwargs or {}
    module = converter.from_jax(fn, *args, **kwargs)

    def run(a: tuple, k: dict) -> list[np.ndarray]:
        return flat_outputs(fn(*a, **k), module.signature)

    return Source("jax", module, run, "the JAX function", (args, kwargs), fn)


def onnx_source(path: str | os.PathLike, dims: dict[str, int] | None = None) -> Source:
    """An ``.onnx`` file; the reference is onnxruntime (CPU). ``dims`` sizes symbolic
    dimensions (``from_onnx(dims=)``)."""
    from .._optional import require

    ort = require("onnxruntime", "validating an ONNX model (its reference run)")

    import converter

    module = converter.from_onnx(str(path), dims=dims or None)
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - onnxruntime's own error types; the reference is unusable
        raise ConversionError(f"{path}: onnxruntime cannot load it: {e}") from e
    return Source("onnx", module, _ort_runner(session, module.signature), "onnxruntime", None, session)


def stablehlo_source(path: str | os.PathLike) -> Source:
    """StableHLO text or bytecode; the reference is XLA: the file's module compiled as it
    stands by JAX's CPU client (:func:`xla_runner`), not the project's own interpreter."""
    import converter

    data = Path(path).read_bytes()
    try:
        text: str | bytes = data.decode()
    except UnicodeDecodeError:
        text = data
    module = converter.from_stablehlo(text, filename=str(path))
    as_read = converter.from_stablehlo(text, filename=str(path), normalize=False)
    return Source("stablehlo", module, xla_runner(as_read, text), "XLA (the module compiled by JAX)")


def xla_runner(module, source: str | bytes | None = None) -> Callable[[tuple, dict], list[np.ndarray]]:
    """A runner of ``module`` compiled by XLA through JAX's public client API
    (``jax.extend.backend``): StableHLO text, MLIR bytecode or a portable artifact go to the
    CPU client's ``compile_and_load`` as they are; nothing of the converter's backends runs.

    ``source`` is the module's own text or bytes (default: ``module``'s text). The module's
    parameters (``module.params``) are passed before the inputs, a zero PRNG key after them
    (a random module is compared by shape), ``kept_var_idx`` applied; results are the user
    outputs (new values of ``signature.mutations`` left out). A module
    with dynamic dimensions is specialized to each call's input shapes first
    (:meth:`converter.Module.specialize`, the converter's shape pass: XLA compiles static
    shapes only), one executable per distinct set of shapes.

    Raises:
        ConversionError: XLA rejects the module (its message attached).
    """
    import jax
    from jax.extend import backend as jex_backend

    from ..passes.shapes import module_is_dynamic

    sig = module.signature
    client = jex_backend.get_backend("cpu")
    device = client.local_devices()[0]
    dynamic = module_is_dynamic(module)
    compiled: dict[tuple, Any] = {}

    def executable(shapes: tuple):
        if shapes not in compiled:
            m = module.specialize(list(shapes)) if dynamic else module
            code = source if source is not None and not dynamic else m.text(debug_info=False)
            opts = jex_backend.get_compile_options(num_replicas=1, num_partitions=1)
            try:
                compiled[shapes] = client.compile_and_load(code, [device], opts)
            except Exception as e:  # noqa: BLE001 - XLA's own error types
                raise ConversionError(f"XLA cannot compile the StableHLO module: {_first_line(e)}") from e
        return compiled[shapes]

    params = [np.asarray(module.params[p.name]) for p in sig.params]
    key = [np.zeros(sig.rng.shape, np.uint32)] if sig.rng is not None else []  # compared by shape

    def run(a: tuple, k: dict) -> list[np.ndarray]:
        leaves = [np.asarray(v) for _, v in flatten((a, k), sig.in_tree)]
        exe = executable(tuple(v.shape for v in leaves))
        args = [*params, *leaves, *key]
        if sig.kept_var_idx is not None:
            args = [args[i] for i in sig.kept_var_idx]
        outs = exe.execute([jax.device_put(v, device) for v in args])
        return sig.split_outputs([np.asarray(o) for o in outs])[0]

    return run


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def pt2_source(path: str | os.PathLike, trust_pickle: bool = False) -> Source:
    """A ``.pt2`` file (``torch.export.save``), read without running pickled payloads unless
    ``trust_pickle`` (:func:`converter.load_pt2`); the reference is the program's own module
    (``ExportedProgram.module()``, eager torch), the example inputs those saved with it."""
    import converter

    ep = converter.load_pt2(path, trust_pickle=trust_pickle)
    args, kwargs = ep.example_inputs if ep.example_inputs is not None else ((), {})
    return torch_source(ep, tuple(args), dict(kwargs))


def jax_export_source(path: str | os.PathLike) -> Source:
    """A serialized ``jax.export.Exported`` (``.jax``, what ``convert --to jax`` writes);
    the reference is ``Exported.call`` (XLA)."""
    import converter

    from .loaders import read_exported

    exported = read_exported(Path(path))
    module = converter.from_jax(exported)

    def run(a: tuple, k: dict) -> list[np.ndarray]:
        return flat_outputs(exported.call(*a, **k), module.signature)

    return Source("jax", module, run, "jax.export artifact (Exported.call)", None, exported)


def module_source(path: str | os.PathLike) -> Source:
    """A ``.shlo`` file (``Module.save``); the reference is XLA: the saved module compiled as
    it stands by JAX's CPU client with its saved parameters (:func:`xla_runner`), not the
    project's own interpreter."""
    import converter

    module = converter.load(path)
    return Source("module", module, xla_runner(module), "XLA (the saved module compiled by JAX)")


def load_source(
    source: Any, from_: str | None = None, dims: dict[str, int] | None = None, *, trust_pickle: bool = False
) -> Source:
    """Load ``source`` as a :class:`Source`: a ``file.py:factory`` spec (torch, jax), an
    ``(obj, args[, kwargs])`` tuple (torch, jax), a ``.pt2`` (torch), a ``.jax`` artifact, an
    ``.onnx`` path (its symbolic dimensions sized by ``dims``), a StableHLO file or a ``.shlo``
    Module file. ``from_`` defaults to what the suffix implies (:func:`infer_source`).

    Raises:
        ConversionError: unknown ``from_``, unreadable input, ``dims`` with a source other
            than ONNX, or the conversion failed.
    """
    if from_ is None:
        if not isinstance(source, str):
            raise ConversionError("from_ is required for an (obj, args) source")
        from_ = infer_source(source)
    if from_ not in SOURCES:
        raise ConversionError(f"unknown source framework {from_!r}; one of {', '.join(SOURCES)}")
    if dims and from_ != "onnx":
        raise ConversionError(f"dims (--dim) apply to ONNX sources only, not {from_}")
    if from_ in ("torch", "jax") and not isinstance(source, str):
        obj, args, kwargs, dyn = (*source, {}, None)[:4] if len(source) == 2 else (*source, None)[:4]
    else:
        from .loaders import split_factory

        if from_ in ("torch", "jax") and split_factory(source) is not None:
            obj, args, kwargs, dyn = _factory(source, from_)
        else:
            obj = None
    if obj is not None:
        if from_ == "jax" and dyn is not None:
            raise ConversionError("dynamic_shapes (a factory's fourth result) apply to torch sources only")
        if from_ == "jax":
            return jax_source(obj, tuple(args), dict(kwargs or {}))
        return torch_source(obj, tuple(args), dict(kwargs or {}), dyn)
    if not Path(source).is_file():
        raise ConversionError(f"{source}: no such file")
    if from_ == "torch":
        return pt2_source(source, trust_pickle)
    if from_ == "jax":
        return jax_export_source(source)
    if from_ == "module":
        return module_source(source)
    return onnx_source(source, dims) if from_ == "onnx" else stablehlo_source(source)


# --------------------------------------------------------------------------- targets


def _ort_runner(session, signature) -> Callable[[tuple, dict], list[np.ndarray]]:
    """Run ``session`` on flattened user inputs; complex values go in and come out as the
    model carries them (real pairs, :mod:`converter.backends.onnx.realpairs`)."""
    from converter.backends.onnx import realpairs

    def run(a: tuple, k: dict) -> list[np.ndarray]:
        leaves = [np.asarray(v) for _, v in flatten((a, k), signature.in_tree)]
        if signature.rng is not None:  # the model's PRNG key input
            leaves.append(np.random.default_rng().integers(0, 2**32, 2, dtype=np.uint32))
        outs = session.run(None, realpairs.session_feeds(session, leaves))
        outs = realpairs.session_outputs(session, outs)[: len(signature.user_outputs)]  # not updates
        return [np.asarray(o) for o in outs]

    return run


def target_runner(target: str, module) -> Callable[[tuple, dict], list[np.ndarray]]:
    """Convert ``module`` to ``target`` and return its runner (NumPy inputs → flat NumPy
    outputs). Raises ``ImportError`` when the target's backend is not available."""
    sig = module.signature
    if target == "jax":
        fn = module.to_jax(x64=True)  # the module's own types, compared with the source's
        return lambda a, k: flat_outputs(fn(*a, **k), sig)
    if target == "torch":
        import torch

        model = module.to_torch()

        def run(a: tuple, k: dict) -> list[np.ndarray]:
            with torch.no_grad():
                return flat_outputs(model(*to_torch_tree(a), **to_torch_tree(k)), sig)

        return run
    if target == "onnx":
        from .._optional import require

        ort = require("onnxruntime", "the onnx target")

        proto, narrow = float32_boundary(module.to_onnx())
        session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        run_ort = _ort_runner(session, sig)

        def run_widened(a: tuple, k: dict) -> list[np.ndarray]:
            widen = lambda x: x.astype(np.float32) if _narrow_float(x) else x  # noqa: E731
            outs = run_ort(_tree_map(widen, a), _tree_map(widen, k))
            return [o.astype(dtypes.to_numpy(narrow[i])) if i in narrow else o for i, o in enumerate(outs)]

        return run_widened if narrow or _has_narrow(sig) else run_ort
    raise ConversionError(f"unknown target {target!r}; one of {', '.join(TARGETS)}")


#: Float dtypes onnxruntime's NumPy bridge cannot exchange, by ONNX TensorProto elem_type.
_NARROW_ONNX = {
    16: "bfloat16",
    17: "float8_e4m3fn",
    18: "float8_e4m3fnuz",
    19: "float8_e5m2",
    20: "float8_e5m2fnuz",
}


def _narrow_float(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype.kind == "V" and str(x.dtype) in _NARROW_ONNX.values()


def _has_narrow(signature) -> bool:
    return any(s.dtype in _NARROW_ONNX.values() for s in signature.inputs)


def float32_boundary(proto):
    """``proto`` with its bfloat16/float8 graph inputs and outputs exchanged as float32
    (``Cast`` nodes at the boundary; exact: every such value is a float32 value), since
    onnxruntime's NumPy bridge has no such dtypes. Returns ``(model, narrowed)``,
    ``narrowed`` mapping each changed output's position to its dtype name, to cast the
    float32 results back (exactly) before comparing."""
    import onnx
    from onnx import TensorProto, helper

    graph = proto.graph
    changed_in = [i for i in graph.input if i.type.tensor_type.elem_type in _NARROW_ONNX]
    changed_out = {n: o for n, o in enumerate(graph.output) if o.type.tensor_type.elem_type in _NARROW_ONNX}
    if not changed_in and not changed_out:
        return proto, {}
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    graph = model.graph
    casts = []
    for value in graph.input:
        elem = value.type.tensor_type.elem_type
        if elem in _NARROW_ONNX:
            wide = f"{value.name}__float32"
            casts.append(helper.make_node("Cast", [wide], [value.name], to=elem))
            value.name = wide
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    nodes = casts + list(graph.node)
    narrowed = {}
    for n, value in enumerate(graph.output):
        elem = value.type.tensor_type.elem_type
        if elem in _NARROW_ONNX:
            wide = f"{value.name}__float32"
            nodes.append(helper.make_node("Cast", [value.name], [wide], to=TensorProto.FLOAT))
            value.name = wide
            value.type.tensor_type.elem_type = TensorProto.FLOAT
            narrowed[n] = _NARROW_ONNX[elem]
    del graph.node[:]
    graph.node.extend(nodes)
    return model, narrowed


def reimport(via: str, module, example: tuple[tuple, dict]):
    """The round trip's middle step: ``module`` → ``via`` → back to a Module (``from_jax`` of
    the JAX function, ``from_torch`` of the torch module, ``from_onnx`` of the ONNX model)."""
    import converter

    args, kwargs = example
    if via == "jax":
        fn = module.to_jax(x64=True)  # traced under x64_scope below: the 64-bit types kept
        from converter.backends.jax.function import x64_scope

        with x64_scope(module):  # the trace keeps 64-bit inputs; the process flag is left alone
            if module.signature.mutations:
                return _reimport_stateful_jax(fn, args, kwargs)
            return converter.from_jax(fn.apply, *args, params=fn.params, **kwargs)
    if via == "torch":
        return converter.from_torch(module.to_torch(), to_torch_tree(args), to_torch_tree(kwargs))
    if via == "onnx":
        return converter.from_onnx(module.to_onnx())
    raise ConversionError(f"unknown round-trip step {via!r}")


def _reimport_stateful_jax(fn, args: tuple, kwargs: dict):
    """``from_jax`` of a JAX function whose module updates state: the function is pure, so
    it is ``apply(params, ..., mutable=True)``, returning ``(outputs, updates)``; the
    updates become the new Module's mutation outputs again (buffer ``b`` is the parameter
    ``params['b']`` there), so state survives the round trip instead of being dropped."""
    from dataclasses import replace as dc_replace

    import converter
    from converter.signature import UPDATE_PREFIX, Mutation

    def pure(params, *a, **k):
        return fn.apply(params, *a, mutable=True, **k)

    m = converter.from_jax(pure, *args, params=fn.params, **kwargs)
    sig = m.signature
    user_tree, updates_tree = sig.out_tree["children"]
    by_target = {mu.target: mu for mu in fn.signature.mutations}
    mutations = []
    for key in updates_tree["keys"]:  # JAX's (sorted) order of the updates dict
        kind = by_target[key].kind
        mutations.append(Mutation(kind, f"params[{key!r}]" if kind == "buffer" else key))
    n = len(sig.outputs) - len(mutations)
    renamed = [
        dc_replace(o, name=UPDATE_PREFIX + mu.target, kind="update")
        for o, mu in zip(sig.outputs[n:], mutations, strict=True)
    ]
    sig = sig.replace(out_tree=user_tree, outputs=(*sig.outputs[:n], *renamed), mutations=tuple(mutations))
    return converter.Module(m.mlir, sig, m.params, source=m.source, meta=m.meta)


def roundtrips(from_: str, targets: Sequence[str]) -> list[str]:
    """The round trips of ``--roundtrip``: ``X → T → X`` for each target ``T`` other than the
    source framework ``X``, written ``"T>X"`` (StableHLO sources come back to JAX)."""
    home = from_ if from_ in TARGETS else "jax"
    return [f"{t}>{home}" for t in targets if t != home]


def backend_available(target: str) -> str | None:
    """None when ``target``'s backend (and, for round trips, frontend) imports; else why not."""
    mods = {
        "jax": ["converter.backends.jax"],
        "torch": ["converter.backends.torch"],
        "onnx": ["converter.backends.onnx", "onnxruntime"],
    }
    back = {
        "jax": "converter.frontends.jax",
        "torch": "converter.frontends.torch",
        "onnx": "converter.frontends.onnx",
    }
    via, _, final = target.rpartition(">")
    needed = mods.get(final, []) + (mods.get(via, []) + [back.get(via, "")] if via else [])
    for name in filter(None, needed):
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - any import failure means "not available"
            fix = "; pip install 'converter[onnx]'" if final == "onnx" or via == "onnx" else ""
            return f"{name} is not importable ({type(e).__name__}: {e}){fix}"
    return None


# --------------------------------------------------------------------------- report


@dataclass
class Row:
    """One output leaf of one target: the errors against the source and the verdict."""

    target: str
    output: str
    dtype: str
    shape: list
    max_abs: float
    max_rel: float
    rtol: float
    atol: float
    passed: bool
    note: str = ""


@dataclass
class TargetResult:
    """One target: ``status`` is ``passed``, ``failed`` (a mismatch, or the conversion raised),
    or ``skipped`` (backend not available); ``bisect`` locates the first diverging op."""

    target: str
    status: str
    reason: str = ""
    rows: list[Row] = field(default_factory=list)
    bisect: dict | None = None
    seconds: float = 0.0


@dataclass
class Report:
    """The outcome of :func:`validate`; :attr:`passed` decides the exit status."""

    source: str
    from_: str
    reference: str
    seed: int
    inputs: list[dict]
    targets: list[TargetResult] = field(default_factory=list)
    #: the subnormal policy applied (see :func:`subnormal_policy`)
    subnormals: str = ""

    @property
    def passed(self) -> bool:
        """Every target that ran passed, and at least one ran."""
        ran = [t for t in self.targets if t.status != "skipped"]
        return bool(ran) and all(t.status == "passed" for t in ran)

    def to_json(self) -> dict:
        d = asdict(self)
        d["from"] = d.pop("from_")
        d["passed"] = self.passed
        return _json_safe(d)


def _json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def compare_outputs(target: str, signature, expected: list, actual: list) -> list[Row]:
    """One :class:`Row` per output leaf of ``signature``. A module with random ops
    (``signature.rng``) cannot reproduce its source's random stream: its outputs are compared
    by shape and dtype only, and the row says so."""
    if len(actual) != len(expected):
        return [
            Row(
                target,
                "outputs",
                "",
                [],
                math.inf,
                math.inf,
                0,
                0,
                False,
                f"{len(actual)} outputs, the source gives {len(expected)}",
            )
        ]
    rows = []
    for spec, e, a in zip(signature.user_outputs, expected, actual, strict=True):
        c = compare(e, a) if signature.rng is None else _compare_layout(e, a)
        rows.append(
            Row(
                target,
                spec.name,
                dtypes.name_of(e.dtype),
                list(e.shape),
                c.max_abs,
                c.max_rel,
                c.rtol,
                c.atol,
                c.passed,
                c.note,
            )
        )
    return rows


def _compare_layout(expected: Any, actual: Any) -> Comparison:
    """Shape and dtype only, for outputs drawn from random streams that differ by design."""
    e, a = as_numpy(expected), as_numpy(actual)
    tol = tolerance(e.dtype)
    same = e.shape == a.shape and dtypes.name_of(e.dtype) == dtypes.name_of(a.dtype)
    note = "(random ops: shape, dtype only)"
    if not same:
        note = f"{dtypes.name_of(a.dtype)}{list(a.shape)} != {dtypes.name_of(e.dtype)}{list(e.shape)}"
    return Comparison(math.nan, math.nan, tol.rtol, tol.atol, same, note)


# --------------------------------------------------------------------------- validate


def validate(
    source: Any,
    *,
    from_: str | None = None,
    targets: Sequence[str] = ("jax",),
    inputs: str | os.PathLike | tuple | None = None,
    seed: int = 0,
    roundtrip: bool = False,
    progress: bool = True,
    dims: dict[str, int] | None = None,
    trust_pickle: bool = False,
) -> Report:
    """Convert ``source`` to each target, run source and targets on the same inputs, compare.

    Args:
        source: ``file.py:factory`` (torch: ``factory() -> (model, example_args)``; jax:
            ``(fn, example_args)``), an ``(obj, args[, kwargs])`` tuple, an ``.onnx`` path, or
            a StableHLO ``.mlir``/``.mlirbc`` path.
        from_: the source framework, one of :data:`SOURCES`; default: what a path's suffix
            implies (:func:`infer_source`).
        targets: any of :data:`TARGETS`; a target whose backend does not import is skipped.
        inputs: an ``.npz`` (see :func:`load_inputs`) or ``(args, kwargs)`` of NumPy arrays;
            default: seeded random inputs (:func:`make_inputs`).
        seed: the random inputs' seed.
        roundtrip: also run ``X → T → X`` for each target ``T`` (see :func:`roundtrips`).
        progress: show a rich progress bar on stderr.
        dims: ONNX sources: sizes of symbolic dimensions (``from_onnx(dims=)``).
        trust_pickle: ``.pt2`` sources: load pickled payloads (:func:`converter.load_pt2`).

    Returns:
        A :class:`Report`: one :class:`TargetResult` per target (and round trip), with one
        :class:`Row` per output leaf. On a mismatch, ``TargetResult.bisect`` names the first
        StableHLO op whose value diverges (:func:`converter.tools.bisect.bisect`).

    Raises:
        ConversionError: the source cannot be loaded or converted.
        InputError: ``inputs`` do not fit the model (names the input).
    """
    if from_ is None:
        if not isinstance(source, str):
            raise ConversionError("from_ is required for an (obj, args) source")
        from_ = infer_source(source)
    for t in targets:
        if t not in TARGETS:
            raise ConversionError(f"unknown target {t!r}; one of {', '.join(TARGETS)}")
    steps = list(targets) + (roundtrips(from_, targets) if roundtrip else [])
    with _Progress(progress, 2 + len(steps)) as bar:
        bar.step(f"converting {source if isinstance(source, str) else type(source[0]).__name__}")
        src = load_source(source, from_, dims, trust_pickle=trust_pickle)
        sig = src.module.signature
        if inputs is None:
            try:
                args, kwargs = make_inputs(sig, _numpy_example(src.example), seed)
            except InputError as e:
                where = f"{source}: " if isinstance(source, str) else ""
                raise InputError(f"{where}{e}") from e
        elif isinstance(inputs, tuple):
            args, kwargs = inputs
        else:
            args, kwargs = load_inputs(inputs, sig)
        subnormal = count_subnormals((args, kwargs))
        if from_ in XLA_FLUSHING:  # the inputs as the source sees them, for every target
            args, kwargs = _tree_map(flush_subnormals, (args, kwargs))
        bar.step(f"running the source ({src.reference})")
        expected = src.run(args, kwargs)
        report = Report(
            str(source) if isinstance(source, str) else repr(type(source[0]).__name__),
            from_,
            src.reference,
            seed,
            [{"name": s.name, "shape": list(s.shape), "dtype": s.dtype} for s in sig.inputs],
            subnormals=subnormal_policy(from_, subnormal),
        )
        for target in steps:
            bar.step(f"target {target}")
            report.targets.append(_run_target(src, target, (args, kwargs), expected))
    return report


def subnormal_policy(from_: str, count: int) -> str:
    """What :func:`validate` does with subnormal floats for a ``from_`` source whose inputs
    hold ``count`` subnormal values (docs/floating_point.md).

    A source compared as XLA runs it (:data:`XLA_FLUSHING`) flushes subnormal float32,
    float64 and bfloat16 values to zero: its inputs are flushed before the source and every
    target run (the source computes the same on either), and each target's outputs are
    flushed before comparing. Any other source keeps subnormals, as torch and onnxruntime
    do; a JAX target, which runs on XLA, then flushes what the source keeps, and a
    mismatch of that target says so.
    """
    if from_ in XLA_FLUSHING:
        flushed = f"; {count} subnormal input value(s) flushed to zero" if count else ""
        return f"flushed to zero, as XLA's CPU client does (the source runs on XLA){flushed}"
    held = f"; the inputs hold {count} subnormal value(s)" if count else ""
    return f"kept, as the {from_} source does (a JAX target flushes them: XLA){held}"


def _numpy_example(example):
    if example is None:
        return None
    return _tree_map(lambda x: as_numpy(x) if hasattr(x, "shape") else x, example)


def _run_target(src: Source, target: str, inputs: tuple[tuple, dict], expected: list) -> TargetResult:
    start = time.perf_counter()
    why = backend_available(target)
    if why is not None:
        return TargetResult(target, "skipped", why)
    via, _, final = target.rpartition(">")
    try:
        module = reimport(via, src.module, inputs) if via else src.module
        actual = target_runner(final, module)(*inputs)
    except ImportError as e:  # an optional dependency of the backend is missing
        return TargetResult(target, "skipped", f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - reported as this target's failure, others still run
        return TargetResult(target, "failed", f"{type(e).__name__}: {e}", seconds=time.perf_counter() - start)
    source_flushes = src.framework in XLA_FLUSHING
    if source_flushes:  # compared as XLA would hold the target's values
        actual = [flush_subnormals(as_numpy(a)) for a in actual]
    rows = compare_outputs(target, src.module.signature, expected, actual)
    if source_flushes != (final in XLA_TARGETS):
        why = (
            "subnormals: the source flushes them to zero (XLA), this target keeps them"
            if source_flushes
            else "subnormals: the source keeps them, this target flushes them to zero (XLA)"
        )
        for r in rows:
            if not r.passed:
                r.note = f"{r.note}; {why}" if r.note else why
    result = TargetResult(target, "passed" if all(r.passed for r in rows) else "failed", rows=rows)
    if result.status == "failed" and not via:
        try:
            result.bisect = bisect(src, final, inputs, close=close_scaled)
        except Exception as e:  # noqa: BLE001 - bisection is a diagnosis; its failure is reported
            result.bisect = {"error": f"bisection failed: {type(e).__name__}: {e}"}
    result.seconds = time.perf_counter() - start
    return result


class _Progress:
    """A rich progress bar on stderr (a no-op when disabled)."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total, self.bar, self.task, self.done = enabled, total, None, None, 0

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self.bar.__enter__()
            self.task = self.bar.add_task("validate", total=self.total)
        return self

    def step(self, description: str) -> None:
        if self.bar is not None:
            self.done += 1
            self.bar.update(self.task, description=description, completed=self.done - 1)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


# --------------------------------------------------------------------------- output


def print_report(report: Report, console=None) -> None:
    """A rich table: one row per target and output, then each bisection's finding."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 120)
    title = f"validate {report.source} (--from {report.from_}; reference: {report.reference})"
    table = Table(title=escape(title))
    for col in ("target", "output", "dtype", "shape", "max abs err", "max rel err", "rtol / atol", "result"):
        table.add_column(col, justify="right" if "err" in col else "left", no_wrap=col != "output")
    for t in report.targets:
        if not t.rows:
            style = "yellow" if t.status == "skipped" else "red"
            table.add_row(t.target, "", "", "", "", "", "", f"[{style}]{t.status}[/]")
        for r in t.rows:
            verdict = "[green]pass[/]" if r.passed else "[red]FAIL[/]"
            verdict = f"{verdict} {escape(r.note)}".rstrip()
            unmeasured = math.isnan(r.max_abs)  # random outputs: no error is measured
            table.add_row(
                r.target,
                r.output,
                r.dtype,
                str(tuple(r.shape)),
                "-" if unmeasured else f"{r.max_abs:.3g}",
                "-" if unmeasured else f"{r.max_rel:.3g}",
                f"{r.rtol:g} / {r.atol:g}",
                verdict,
            )
    console.print(table)
    if report.subnormals:
        console.print(f"subnormals: {escape(report.subnormals)}", highlight=False)
    for t in report.targets:
        if t.reason:
            console.print(f"[bold]{escape(t.target)}[/] {t.status}: {escape(t.reason)}", highlight=False)
        if t.bisect:
            console.print(f"[bold]{escape(t.target)}[/]: {escape(format_bisect(t.bisect))}", highlight=False)
    ok = "[green]all passed[/]" if report.passed else "[red]mismatch or failure[/]"
    console.print(f"{ok} (seed {report.seed})")


def format_bisect(b: dict) -> str:
    """One paragraph from a bisection result."""
    if "error" in b:
        return b["error"]
    if not b.get("found"):
        return b.get("message", "no diverging op found")
    return (
        f"first divergence at StableHLO op #{b['index']} {b['op']} (loc: {b['location']}), "
        f"source op {b.get('source_op') or '?'}: max abs err {b['max_abs']:.3g}, max rel err "
        f"{b['max_rel']:.3g} (rtol {b['rtol']:g}, atol {b['atol']:g})"
    )


# --------------------------------------------------------------------------- command line

HELP = "Convert a model to each target, run source and targets on the same inputs, compare."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``convert validate`` options (for :mod:`converter.tools.cli`'s subcommand table)."""
    parser.add_argument(
        "input",
        metavar="INPUT",
        help="what convert reads: file.py:factory, .pt2, .jax, .onnx, .mlir/.mlirbc or .shlo",
    )
    parser.add_argument(
        "--from",
        dest="from_",
        choices=SOURCES,
        help="source framework (default: from INPUT's suffix; x.py:factory means torch)",
    )
    parser.add_argument(
        "--to", default=",".join(TARGETS), help=f"comma-separated targets (default: {','.join(TARGETS)})"
    )
    parser.add_argument("--inputs", metavar="FILE.npz", help="inputs to use instead of seeded random ones")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument("--roundtrip", action="store_true", help="also run X → target → X round trips")
    parser.add_argument("--json", metavar="OUT.json", help="write the report as JSON (atomically)")
    parser.add_argument("--quiet", action="store_true", help="no table, no progress bar: exit status only")
    parser.add_argument(
        "--dim",
        dest="dims",
        metavar="NAME=SIZE",
        action="append",
        help="--from onnx only: size the symbolic dimension NAME (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``convert validate`` from parsed arguments; 0 only if every target passed."""
    from .loaders import parse_dims

    targets = [t.strip() for t in args.to.split(",") if t.strip()]
    report = validate(
        args.input,
        from_=args.from_,
        targets=targets,
        inputs=args.inputs,
        seed=args.seed,
        roundtrip=args.roundtrip,
        progress=not args.quiet and sys.stderr.isatty(),
        dims=parse_dims(getattr(args, "dims", None)),
        trust_pickle=getattr(args, "trust_pickle", False),
    )
    if args.json:
        atomic_write(args.json, json.dumps(report.to_json(), indent=1))
    if not args.quiet:
        print_report(report)
    return 0 if report.passed else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``convert validate INPUT --from X [--to jax,torch,onnx] [--inputs f.npz] [--roundtrip]
    [--json out.json] [--quiet]``. Exit status 0 if every target passed, 1 on a mismatch or a
    failed target, 2 when the source cannot be loaded or converted."""
    parser = argparse.ArgumentParser(prog="convert validate", description=HELP)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ConversionError as e:
        print(f"convert validate: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
