"""StableHLO → JAX: interpret a :class:`converter.Module` op by op into ``jax.lax``.

The result is an ordinary traceable JAX function, so ``jax.jit``, ``jax.grad`` and
``jax.vmap`` apply to it.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from converter import dtypes, mlir
from converter.errors import (
    ClosedOverParamsWarning,
    ConversionError,
    EmbeddedParamsWarning,
    SignatureMismatchError,
    UnsupportedOpError,
)
from converter.interpreter import Interpreter
from converter.module import Module
from converter.passes import CANONICAL_PLACEMENT, Pass, prepare
from converter.passes.markers import without_stop_gradient_markers
from converter.passes.shapes import SHAPE_OPS, check_dims, dimension_values, module_is_dynamic, refine
from converter.placement import HOST_KINDS, is_host
from converter.sharding import auto_mesh, check_mesh, jax_mesh, partition_spec
from converter.signature import check_leaf, flatten, input_path, unflatten

from . import ops  # noqa: F401 - registers the rules
from .registry import JAX_RULES

#: parameter bytes from which a staged program closing over them warns
#: (:class:`converter.errors.EmbeddedParamsWarning`)
EMBED_WARN_BYTES = 16 * 2**20


class JaxInterpreter(Interpreter):
    """Evaluates StableHLO ops with :data:`converter.backends.jax.registry.JAX_RULES`.

    Args:
        module: the ``ir.Module`` to run.
        mesh: the ``jax.sharding.Mesh`` a partitioned module (``signature.mesh``) runs on:
            its sharding constraints, manual computations and collectives use it
            (:mod:`converter.backends.jax.ops.sharding`); None for a one-device module.
    """

    registry = JAX_RULES
    direction = "JAX backend"

    def __init__(self, module: Any, mesh: Any = None):
        super().__init__(module)
        self.mesh = mesh
        self.manual_axes: tuple[str, ...] = ()  # inside sdy.manual_computation: its axes

    def dispatch_key(self, op) -> str:
        """The op's key; ``<key>[float6_e2m3fn]`` (no rule has it, so ``check_supported``
        refuses it by name) for an op on a float6 type: XLA's CPU compiler has no arithmetic
        on float6 and aborts the process on a float6 constant."""
        key = super().dispatch_key(op)
        for v in (*op.operands, *op.results):
            text = str(v.type)
            for mlir_name, name in _XLA_CPU_LACKS.items():
                if mlir_name in text:
                    return f"{key}[{name}]"
        return key

    def run_op(self, op, operands, env):
        """Host-placed calls (``_xla_compute_type = "host"``, see
        :mod:`converter.passes.placement`) run under ``compute_on("device_host")`` so the
        placement survives ``jit``, ``jax.export`` and ``lower().compile()``; inside a
        ``while`` body or an ``if``/``case`` branch too (the compiled loop body or branch
        computation keeps the host call)."""
        if op.name == "func.call" and is_host(op.mlir):
            from jax.experimental.compute_on import compute_on

            self.env = env
            callee = self.functions[op.attr("callee")]
            body = jax.jit(lambda *xs: tuple(self.call_function(callee, list(xs))))
            return list(compute_on("device_host")(body)(*operands))
        return super().run_op(op, operands, env)


_Tracer = jax.core.Tracer

#: element types XLA's CPU backend cannot compile (StableHLO spelling -> canonical name)
_XLA_CPU_LACKS = {"f6E2M3FN": "float6_e2m3fn", "f6E3M2FN": "float6_e3m2fn"}

#: the passes this backend runs on the module it is given, at its entry points
#: (:func:`converter.passes.prepare`): host computation outlined into the canonical form its
#: placement rules read (a no-op on what the frontends produce)
PREPARE: list[Pass] = [CANONICAL_PLACEMENT]
#: the passes run on the module before XLA compiles it as it stands (the ``jax.export`` path
#: of a shape-polymorphic module): XLA knows no ``@converter.stop_gradient`` marker
EXPORT_PREPARE: list[Pass] = [Pass("without_stop_gradient_markers", without_stop_gradient_markers)]

WIDE_DTYPES = {"int64", "uint64", "float64", "complex128"}
_WIDE_MLIR = {"i64", "ui64", "f64", "complex<f64>"}


#: the 32-bit type JAX narrows each 64-bit type to while ``jax_enable_x64`` is off
_NARROWED = {"int64": "int32", "uint64": "uint32", "float64": "float32", "complex128": "complex64"}


def x64_scope(module: Module) -> Any:
    """``jax.enable_x64(True)`` when the module computes with 64-bit types anywhere (its
    signature, or any op's result: an ``i64`` constant inside an f32 model counts) and x64
    is off where it runs, else a no-op context. Without it JAX would silently narrow them
    to 32 bits (INT64_MAX becomes -1); the scope is thread-local and part of ``jax.jit``'s
    trace context, so the process's ``jax_enable_x64`` is never changed."""
    return _x64_on(not jax.config.jax_enable_x64 and needs_x64(module))


def _x64_on(needed: bool) -> Any:
    """``jax.enable_x64(True)`` when ``needed`` and x64 is off, else a no-op context."""
    if needed and not jax.config.jax_enable_x64:
        return jax.enable_x64(True)
    return contextlib.nullcontext()


def needs_x64(module: Module) -> bool:
    """Whether the module has 64-bit types in its signature or computes with them anywhere
    (the condition under which :func:`x64_scope` scopes ``jax_enable_x64`` on)."""
    sig = module.signature
    return any(leaf.dtype in WIDE_DTYPES for leaf in sig.all_args + sig.outputs) or _computes_64bit(module)


def _computes_64bit(module: Module) -> bool:
    """Whether an op computes a 64-bit value other than a dimension size (``jax.export``
    computes those in i64; 32 bits hold any size: :func:`converter.passes.shapes.dimension_values`)."""
    for fn in mlir.functions(module.mlir).values():
        dims = None
        for op in mlir.walk_ops(fn):
            for result in op.results:
                element = getattr(result.type, "element_type", None)
                if element is not None and str(element) in _WIDE_MLIR:
                    dims = dimension_values(fn) if dims is None else dims
                    if result not in dims:
                        return True
    return False


def _check_supported(module: Any, ignore: frozenset = frozenset()) -> bool:
    """:meth:`JaxInterpreter.check_supported`, leaving out the op kinds in ``ignore`` (the
    shape computations that shape refinement removes, for a shape-polymorphic module).
    Returns whether every op has a rule and none is of a kind in ``ignore`` (the rules of the
    shape computations need static result shapes: a module with them is specialized per
    call rather than traced with symbolic shapes)."""
    interp = JaxInterpreter(module)
    try:
        interp.check_supported()
    except UnsupportedOpError as e:
        missing = [m for m in e.missing if m.name not in ignore]
        if missing:
            raise UnsupportedOpError(missing, e.direction) from None
        return False
    if ignore:
        ops = (op for fn in interp.functions.values() for op in mlir.walk_ops(fn))
        return not any(op.name in ignore for op in ops)
    return True


def _to_memory(value: Any, spec, space) -> Any:
    """Host-memory arguments (``memory_kind`` pinned/unpinned host) are computed on in
    device memory; host-memory results are put back in host memory, as the source did."""
    if value is None or spec.memory_kind not in HOST_KINDS:
        return value
    return jax.device_put(value, space)


def _is_key(x: Any) -> bool:
    """A typed PRNG key array (``jax.random.key``)."""
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


class JaxFunction:
    """A converted module as a JAX callable.

    ``fn(*args, **kwargs)`` takes the same user inputs as the source model (arrays with the
    signature's shapes and dtypes) and returns its outputs with the source's pytree
    structure (custom output classes come back as dicts). Parameters are bound from
    :attr:`params`; :meth:`apply` is the pure form ``apply(params, *args, **kwargs)`` for
    ``jax.grad`` and training.

    A module with random ops (``signature.rng``) takes its key as ``rng=`` (a ``jax.random``
    key or an int seed). Outside a JAX transform ``rng`` may be left out: each call then
    takes the next key of the function's own stream (seeded by ``to_jax(seed=...)``).

    A module that updates state in place (``signature.mutations``, e.g. BatchNorm in training
    mode) updates :attr:`params` on each call, as torch updates its buffers;
    ``apply(params, ..., mutable=True)`` returns ``(outputs, updates)`` instead.

    A JaxFunction is a pytree whose leaves are its parameters: passed as an argument to a
    transform (``jax.jit(lambda f, x: f(x))(f, x)``, ``jax.grad(loss)(f)``, which returns a
    JaxFunction of gradients) its weights are arguments of the program. ``jax.jit(f)`` itself
    closes over them: JAX traces the callable it is given as opaque, embeds closed-over arrays
    in the program as constants unless ``JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=True`` was set
    before JAX was imported (then they are arguments too; ``docs/limitations.md``),
    and caches that trace, so the jitted function keeps the weights of its first call. Prefer
    the argument form or :meth:`apply`. Embedding at least :data:`EMBED_WARN_BYTES` of
    parameters warns once (:class:`converter.errors.EmbeddedParamsWarning`); reassigning
    :attr:`params` after ``f`` was traced that way warns
    (:class:`converter.errors.ClosedOverParamsWarning`).

    With x64 off, :func:`to_jax` gives by default the module's 32-bit form when it has an
    exact one (``to_jax(x64=...)``; :mod:`converter.passes.narrow`): int64 inputs are then
    int32 in :attr:`signature` (``signature.narrowed`` keeps the source dtypes),
    int64 arrays passed in are checked to fit (:class:`converter.errors.InputRangeError`)
    and no x64 scope is needed; int64 tracers (a transform traced with x64 on) run the
    source's 64-bit module instead, whose values need no check. Otherwise (the 64-bit form):

    A module that computes with 64-bit types (int64 token ids, float64, an i64 constant
    inside an f32 model) runs each call, and its trace, under ``jax.enable_x64(True)`` when
    x64 is off (``enable_x64=False``: as the caller's setting is; ``call_torch`` checks it
    instead): the process's ``jax_enable_x64`` is never changed, and the scope holds inside
    an enclosing ``jax.jit``/``grad``/``vmap`` too. With x64 off, a 64-bit input or parameter
    that JAX has already narrowed to 32 bits (an argument of an enclosing transform traced
    with x64 off, an array made by ``jnp``) raises :class:`SignatureMismatchError` naming it
    and how to enable x64; NumPy 64-bit arrays passed directly keep their type.

    A shape-polymorphic module (dynamic dimensions in its signature) takes inputs of any
    size its shape constraints allow: each call's shapes specialize it
    (:func:`converter.passes.shapes.refine`, once per shape); one dimension name must be one
    size across the inputs (else :class:`SignatureMismatchError`).

    Attributes:
        params: parameters and buffers by name (torch names for torch models), as jax Arrays.
        signature: the module's :class:`converter.signature.Signature`.

    Raises:
        SignatureMismatchError: on call, for inputs of the wrong structure, shape or dtype
            (names the argument path, e.g. ``args[1]['mask']``), or 64-bit values JAX
            narrowed while x64 is off; for the 32-bit form, a traced 64-bit value (its values
            cannot be checked).
        InputRangeError: for the 32-bit form, a 64-bit input value outside the 32-bit range.
    """

    def __init__(
        self,
        module: Module,
        device: jax.Device | None = None,
        seed: int = 0,
        *,
        enable_x64: bool = True,
        mesh: Any = None,
    ):
        module = prepare(module, PREPARE)
        self.module = module
        self.signature = module.signature
        # call_torch passes enable_x64=False: it raises instead (converter.tools.embed._check_x64)
        self._x64 = enable_x64 and needs_x64(module)
        self._wide_params = [p for p in self.signature.params if p.dtype in _NARROWED]
        # the 32-bit form (converter.passes.narrow): input names -> their source dtype
        narrowed = self.signature.narrowed
        self._narrowed_inputs = {
            s.name: narrowed[s.name] for s in self.signature.inputs if s.name in narrowed
        }
        self._why_64bit: str | None = None  # to_jax's default kept the 64-bit form: why
        self._source: Module | None = None  # the 32-bit form: the module it was narrowed from
        self._wide_fn: JaxFunction | None = None
        self._frozen = frozenset(self.signature.frozen)  # requires_grad=False
        self._dynamic = module_is_dynamic(module)
        self._refined: dict[tuple, Any] = {}  # argument shapes -> static ir.Module
        # A shape-polymorphic module whose every op has a rule also traces under symbolic shapes.
        self._traces_symbolically = _check_supported(
            module.mlir, ignore=SHAPE_OPS if self._dynamic else frozenset()
        )
        self.device = device
        self.mesh = self._mesh(mesh)
        self._closed_over = False  # a staged program (jax.jit(f)...) captured the params
        self._warned_embedding = False  # EmbeddedParamsWarning given
        with self._scope():  # 64-bit parameters keep their type
            self.params = {
                p.name: jax.device_put(np.asarray(module.params[p.name]), self._placement(p, device))
                for p in self.signature.params
            }
        self._jitted = jax.jit(self._run)
        self._key = jax.random.PRNGKey(seed) if self.signature.rng is not None else None
        if self.signature.rng is not None and _has_kwarg(self.signature.in_tree, "rng"):
            raise ConversionError("the model has a keyword input named 'rng', the name of the PRNG key here")

    @property
    def params(self) -> dict[str, Any]:
        """Parameters and buffers by name, as jax Arrays."""
        return self._params

    @params.setter
    def params(self, value: dict[str, Any]) -> None:
        if self._closed_over:
            self._closed_over = False  # once per capture
            warnings.warn(
                "f.params is reassigned after a staged JAX program (jax.jit(f), or a jitted function "
                "that calls f) captured the previous parameters as constants: that program keeps "
                "computing with them. Pass f as an argument instead, jax.jit(lambda f, x: f(x))(f, x), "
                "or use jax.jit(f.apply)(f.params, x)",
                ClosedOverParamsWarning,
                stacklevel=2,
            )
        self._params = value

    def _note_capture(self, inputs: list[Any]) -> None:
        """Remember that a staged program (``jit``, ``jax.export``, a ``scan`` body...) is
        closing over the concrete :attr:`params` (the inputs are tracers, the params are not),
        so that reassigning them later warns."""
        for v in inputs:  # a loop, not any(<generator>): this runs on every eager call
            if isinstance(v, _Tracer):
                break
        else:
            return
        if self._closed_over or any(isinstance(v, _Tracer) for v in self._params.values()):
            return  # already noted, or f passed as an argument: its params are the program's
        from converter import _jax_internal

        self._closed_over = _jax_internal.under_staging_trace()
        if self._closed_over and not self._warned_embedding and not _jax_internal.constants_hoisted():
            size = sum(getattr(v, "nbytes", 0) for v in self._params.values())
            if size >= EMBED_WARN_BYTES:
                self._warned_embedding = True
                warnings.warn(
                    f"a staged JAX program (jax.jit(f), or a jitted function that calls f) closes over "
                    f"f's {size / 2**20:.0f} MiB of parameters, and JAX embeds them in the program as "
                    "constants (slow first call, twice the memory). Pass f as an argument, "
                    "jax.jit(lambda f, x: f(x))(f, x), or use jax.jit(f.apply)(f.params, x); or set "
                    "JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=True before JAX is imported, so that JAX passes "
                    "them to the program as arguments",
                    EmbeddedParamsWarning,
                    stacklevel=3,
                )

    def _mesh(self, mesh: Any) -> Any:
        """The ``jax.sharding.Mesh`` of a partitioned module: ``mesh`` (checked against
        ``signature.mesh``) or one over the first devices of ``jax.devices()``; None for a
        one-device module."""
        axes = self.signature.mesh
        if axes is None:
            return None
        if mesh is None:
            return jax_mesh(axes)
        check_mesh(mesh, axes)
        return auto_mesh(mesh)

    def _placement(self, spec: Any, device: Any) -> Any:
        """Where a parameter goes: its ``NamedSharding`` on the mesh, or ``device``."""
        if self.mesh is None:
            return device
        return jax.sharding.NamedSharding(self.mesh, partition_spec(spec.sharding))

    def _scope(self) -> Any:
        """``jax.enable_x64(True)`` around a call (and its trace) of a module that computes
        with 64-bit types while x64 is off, else a no-op: the process's ``jax_enable_x64``
        is never changed, and a call under the scope traces and compiles with 64-bit types
        (the scope is part of ``jax.jit``'s trace context, so an enclosing x64-off
        ``jax.jit`` keeps them inside the function too)."""
        return _x64_on(self._x64)

    def _check_params(self, params: Any) -> None:
        """Refuse ``params`` that are not a mapping holding every parameter of the signature.

        Raises:
            SignatureMismatchError: names the missing parameters (and how many there are).
        """
        if not isinstance(params, Mapping):
            raise SignatureMismatchError(
                f"params must be a mapping of parameter names to arrays (as f.params), not a "
                f"{type(params).__name__}"
            )
        missing = [p.name for p in self.signature.params if p.name not in params]
        if missing:
            shown = ", ".join(repr(n) for n in missing[:10]) + (", ..." if len(missing) > 10 else "")
            raise SignatureMismatchError(
                f"params lacks {len(missing)} of the module's {len(self.signature.params)} parameters: "
                f"{shown} (pass every parameter, e.g. {{**f.params, **updated}})"
            )

    def _check_not_narrowed(self, params: dict[str, Any], inputs: list[Any]) -> None:
        """With x64 off, a 64-bit input or parameter that arrives as its 32-bit narrowing
        (an argument of an enclosing ``jax.jit``/``grad``/``vmap`` traced with x64 off, or an
        array made by ``jnp`` while x64 is off) has already lost its upper bits: refuse it.

        Raises:
            SignatureMismatchError: naming the argument paths or parameter names, their
                types, and how to enable x64.
        """
        if not self._x64 or jax.config.jax_enable_x64:
            return
        bad = [
            (spec.name, spec.dtype, _dtype_name(v))
            for spec, v in zip(self.signature.inputs, inputs, strict=False)
            if spec.dtype in _NARROWED and _dtype_name(v) == _NARROWED[spec.dtype]
        ] + [
            (f"params[{p.name!r}]", p.dtype, _dtype_name(params[p.name]))
            for p in self._wide_params
            if p.name in params and _dtype_name(params[p.name]) == _NARROWED[p.dtype]
        ]
        if bad:
            what = ", ".join(f"{name} (expected {want}, got {got})" for name, want, got in bad)
            why = getattr(self, "_why_64bit", None)
            raise SignatureMismatchError(
                f"{what}: jax_enable_x64 is off, so JAX narrowed these 64-bit values to 32 bits "
                "before the converted function saw them (arguments of an enclosing jax.jit/grad/vmap, "
                "or arrays made with jnp while x64 is off); the function does not change that setting "
                "for you. Enable it: jax.config.update('jax_enable_x64', True), JAX_ENABLE_X64=1, or "
                "`with jax.enable_x64(True):` around the transform; or, calling the function "
                "directly, pass NumPy arrays of the 64-bit type"
                + (
                    f". The module has no exact 32-bit form (to_jax(x64=False)): {why}"
                    if why
                    else ". Or convert it with to_jax(x64=False), JAX's 32-bit form"
                )
            )

    def _constrain(self, values: list[Any], specs: Any) -> list[Any]:
        """Each value of a partitioned module laid out as its spec says (leaves without a
        sharding, None values and one-device modules are left alone)."""
        if self.mesh is None:
            return values
        named = lambda s: jax.sharding.NamedSharding(self.mesh, partition_spec(s.sharding))  # noqa: E731
        return [
            v if v is None or s.sharding is None else jax.lax.with_sharding_constraint(v, named(s))
            for v, s in zip(values, specs, strict=True)
        ]

    def _inputs(self, args: tuple, kwargs: dict) -> list[Any]:
        """The input leaves of ``(args, kwargs)``, checked against the signature."""
        sig = self.signature
        leaves = flatten((args, kwargs), sig.in_tree)
        if len(leaves) != len(sig.inputs):
            raise ValueError(f"expected {len(sig.inputs)} input leaves, got {len(leaves)}")
        for path, value in leaves:  # as jax.jit refuses them: not a JAX type
            if type(value).__module__.partition(".")[0] == "torch":
                raise SignatureMismatchError(
                    f"{input_path(path)}: a {type(value).__name__}; the JAX function takes NumPy or JAX "
                    "arrays (pass t.numpy(), or call the to_torch() module)"
                )
        # a typed PRNG key (jax.random.key) enters as its key data, as the module holds it
        leaves = [(p, jax.random.key_data(v) if _is_key(v) else v) for p, v in leaves]
        values = [v for _, v in leaves]
        if self._narrowed_inputs:
            values = [
                _to_32bit(input_path(p), v, spec) if spec.name in self._narrowed_inputs else v
                for (p, _), v, spec in zip(leaves, values, sig.inputs, strict=False)
            ]
            leaves = [(p, v) for (p, _), v in zip(leaves, values, strict=True)]
        self._check_not_narrowed({}, values)  # before check_leaf: the message says why
        for (path, value), spec in zip(leaves, sig.inputs, strict=True):
            check_leaf(input_path(path), value, spec)
        return values

    def _run(self, params: dict[str, Any], inputs: list[Any], rng: Any = None) -> tuple[Any, dict]:
        """``(outputs, updates)``: the user outputs with ``out_tree``'s structure and the new
        values of the mutated state by target name (``signature.mutations``)."""
        sig = self.signature  # params: complete (apply checks them; the others pass self.params)
        frozen = self._frozen
        flat = [
            jax.lax.stop_gradient(params[p.name]) if p.name in frozen else params[p.name] for p in sig.params
        ]
        flat += list(inputs)
        if sig.rng is not None:
            flat.append(rng)
        device = jax.memory.Space.Device
        flat = [_to_memory(v, spec, device) for v, spec in zip(flat, sig.all_args, strict=True)]
        flat = self._constrain(flat, sig.all_args)
        if sig.kept_var_idx is not None:
            flat = [flat[i] for i in sig.kept_var_idx]
        if self._dynamic and not self._traces_symbolically and _symbolic_args(flat):
            outs = list(self._exported().call(*flat))  # under jax.export with symbolic shapes
        else:
            outs = JaxInterpreter(self._static_module(flat), self.mesh).run(*flat)
        outs = self._constrain(list(outs), sig.outputs)
        outs = [_to_memory(v, spec, jax.memory.Space.Host) for v, spec in zip(outs, sig.outputs, strict=True)]
        user, new = sig.split_outputs(outs)
        updates = {m.target: v for m, v in zip(sig.mutations, new, strict=True)}
        return unflatten(sig.out_tree, user), updates

    def _static_module(self, flat: list[Any]) -> Any:
        """The module to interpret for arguments ``flat``: a shape-polymorphic module is
        specialized to their shapes (:func:`converter.passes.shapes.refine`), once per shape."""
        if not self._dynamic:
            return self.module.mlir
        key = tuple(tuple(np.shape(v)) for v in flat)
        if any(not isinstance(d, int) for shape in key for d in shape):
            return self._symbolic_module(key)
        if key not in self._refined:
            check_dims(self.module, key)
            refined = refine(self.module.mlir, key)
            _check_supported(refined)
            self._refined[key] = refined
        return self._refined[key]

    def _exported(self) -> Any:
        """The module as a ``jax.export.Exported`` of its kept ``@main`` arguments, shapes
        symbolic with the signature's dimension ranges as constraints: a shape-polymorphic
        module whose shape computations the interpreter cannot trace symbolically runs this
        way under symbolic shapes (``jax.export`` of this function: the ``.jax``
        artifact), JAX refining its shapes at each concrete call."""
        if getattr(self, "_exported_cache", None) is None:
            from converter import _jax_internal
            from converter.passes.shapes import symbolic_shapes

            sig = self.signature
            kept = range(len(sig.all_args)) if sig.kept_var_idx is None else sig.kept_var_idx
            args = [sig.all_args[i] for i in kept]
            ranges = sig.dim_ranges
            shapes = symbolic_shapes([a.shape for a in args] + [o.shape for o in sig.outputs], ranges)
            specs = [*args, *sig.outputs]
            avals = [(shp, np.dtype(dtypes.to_numpy(s.dtype))) for shp, s in zip(shapes, specs, strict=True)]
            self._exported_cache = _jax_internal.exported_from_stablehlo(
                "converted",
                # XLA knows no stop_gradient marker; this Exported has no VJP (grad refuses)
                prepare(self.module, EXPORT_PREPARE).bytecode(),
                avals[: len(args)],
                avals[len(args) :],
                jax.default_backend(),
            )
        return self._exported_cache

    def _symbolic_module(self, key: tuple) -> Any:
        """The module to interpret under symbolic shapes (``jax.export`` with
        ``symbolic_shape``): the module as it is, when every op of it has a rule that
        works on symbolic dimensions (elementwise ops do; the shape computations in
        ``SHAPE_OPS`` do not)."""
        if not self._traces_symbolically:
            raise ConversionError(
                "a shape-polymorphic module with shape computations runs on concrete shapes in "
                "the JAX backend (it is specialized per call); it cannot be traced with symbolic "
                f"shapes {list(key)}"
            )
        return self.module.mlir

    def apply(
        self, params: dict[str, Any], *args: Any, rng: Any = None, mutable: bool = False, **kwargs: Any
    ) -> Any:
        """Run the module with explicit ``params`` (pure; differentiable in ``params``).

        Parameters the module does not use get zero gradients of their shape, as with
        ``jax.grad`` of the source; so do the parameters the source froze
        (``requires_grad=False``, ``signature.frozen``): autograd gives them none.
        :meth:`partition` splits ``params`` into what to train and the rest. A module with
        random ops (``signature.rng``) needs ``rng``: a ``jax.random`` key (raw
        ``uint32[2]`` or typed) or an int seed.

        With ``mutable=True`` it returns ``(outputs, updates)`` (Flax's convention):
        ``updates`` maps each buffer the source updates in place (``signature.mutations``,
        e.g. BatchNorm's running statistics in training mode) to its new value, and each
        user input it updates in place to its new value under the input's path
        (``args[1]``); ``{**params, **updates}`` is the next step's state. Without it only
        the outputs are returned and the new state is not kept.

        Raises:
            SignatureMismatchError: ``rng`` is missing for a module with random ops.
        """
        if self._traced_64bit(args, kwargs):  # 64-bit tracers (x64 on): the source's own types
            return self._wide().apply(self._widen(params), *args, rng=rng, mutable=mutable, **kwargs)
        if _has_kwarg(self.signature.in_tree, "mutable"):  # the model's own keyword argument
            kwargs, mutable = {**kwargs, "mutable": mutable}, False
        inputs = self._inputs(args, kwargs)
        self._check_params(params)
        self._check_not_narrowed(params, [])  # the inputs: checked by _inputs
        with self._scope():
            outputs, updates = self._run(params, inputs, self._key_arg(rng, required=True))
        return (outputs, updates) if mutable else outputs

    def _key_arg(self, rng: Any, required: bool) -> Any:
        """``rng`` as a raw ``uint32[2]`` key, or None when the module takes none."""
        if self.signature.rng is None:
            return None
        if rng is None:
            if required:
                raise SignatureMismatchError(
                    "this module draws random numbers (signature.rng): pass rng=<jax.random key or int seed>"
                )
            return None
        return raw_key(rng)

    def _next_key(self, inputs: list[Any]) -> jax.Array:
        """The next key of this function's own stream (``to_jax(seed=...)``), for calls
        without ``rng=``; refused under a JAX transform, where it would be baked in as a
        constant and every call of the compiled function would repeat the same numbers."""
        if any(isinstance(v, jax.core.Tracer) for v in inputs):
            raise SignatureMismatchError(
                "this module draws random numbers: under jit/grad/vmap pass the key explicitly, "
                "f(*args, rng=key) or f.apply(params, *args, rng=key)"
            )
        self._key, key = jax.random.split(self._key)
        return key

    def _check_devices(self, inputs: list[Any]) -> None:
        """Committed jax Arrays must already be on the parameters' device (a partitioned
        module: spread over its mesh's devices): nothing moves between devices implicitly."""
        want = {self.device or jax.devices()[0]} if self.mesh is None else set(self.mesh.devices.flat)
        for spec, value in zip(self.signature.inputs, inputs, strict=False):
            if isinstance(value, jax.core.Tracer) or not isinstance(value, jax.Array):
                continue  # under jit/grad/vmap placement is the caller's transform's business
            if value.committed:
                devs = value.devices()
                if devs != want:  # on a mesh: jit lays it out as the module's spec says
                    raise SignatureMismatchError(
                        f"{spec.name}: input is on {sorted(map(str, devs))}, but the function runs on "
                        f"{_where(want)}; move it with jax.device_put first"
                    )

    def __call__(self, *args: Any, rng: Any = None, **kwargs: Any) -> Any:
        """Run the module on the user inputs with :attr:`params`. State the source updates
        in place (``signature.mutations``) is updated here too: :attr:`params` gets the new
        buffer values (as torch's buffers do), and a mutated user input, which must then be
        a writable NumPy array, gets its new value written into it.

        Raises:
            SignatureMismatchError: inputs that do not match the signature; a module that
                updates state called under a JAX transform (use ``apply(..., mutable=True)``)
                or with an immutable array where it updates an input.
        """
        if not self.signature.mutations and self._traced_64bit(args, kwargs):
            return self._wide().apply(self._widen(self.params), *args, rng=rng, **kwargs)
        inputs = self._inputs(args, kwargs)
        self._check_not_narrowed(self.params, [])  # the inputs: checked by _inputs
        with self._scope():
            return self._call(inputs, rng)

    def _traced_64bit(self, args: tuple, kwargs: dict) -> bool:
        """For the 32-bit form: whether x64 is on where it is called and a 64-bit integer
        tracer arrives for a narrowed input (a transform traced under ``jax.enable_x64``),
        whose values cannot be checked to fit; such calls run the source's 64-bit module."""
        if self._source is None or not jax.config.jax_enable_x64:
            return False
        return any(
            isinstance(v, _Tracer) and _dtype_name(v) in _NARROWED
            for v in jax.tree_util.tree_leaves((args, kwargs))
        )

    def _wide(self) -> JaxFunction:
        """The source's 64-bit module as a function sharing this one's state (no second copy
        of the parameters: :meth:`_widen` passes them)."""
        if self._wide_fn is None:
            g = copy.copy(self)
            g.module, g.signature, g._source = self._source, self._source.signature, None
            g._x64 = needs_x64(self._source)
            g._wide_params = [p for p in g.signature.params if p.dtype in _NARROWED]
            g._narrowed_inputs, g._refined, g._exported_cache = {}, {}, None
            g._jitted = jax.jit(g._run)
            self._wide_fn = g
        return self._wide_fn

    def _widen(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with the narrowed ones back in their source dtype (exact: widening)."""
        narrowed = self.signature.narrowed
        return {
            k: v.astype(dtypes.to_numpy(narrowed[k])) if k in narrowed and hasattr(v, "astype") else v
            for k, v in params.items()
        }

    def _call(self, inputs: list[Any], rng: Any) -> Any:
        written = self._check_mutable_inputs(inputs)
        self._check_devices(inputs)
        self._note_capture(inputs)
        key = self._key_arg(rng, required=False)
        if self.signature.rng is not None and key is None:
            key = self._next_key(inputs)
        kept = self.signature.kept_var_idx
        if kept is not None:  # dropped inputs are never transferred to the device
            n_p, keep = len(self.signature.params), set(kept)
            inputs = [v if n_p + i in keep else None for i, v in enumerate(inputs)]
        outputs, updates = self._jitted(self._params, inputs, key)
        for m in self.signature.mutations:
            if m.kind == "buffer":
                self.params[m.target] = updates[m.target]
            else:
                np.copyto(written[m.target], np.asarray(updates[m.target]))
        return outputs

    def _check_mutable_inputs(self, inputs: list[Any]) -> dict[str, np.ndarray]:
        """For a module that updates state: the call is outside JAX transforms (the new
        values would otherwise be tracers), and each user input it updates is a writable
        NumPy array (returned by path, to write the new value into)."""
        sig = self.signature
        if not sig.mutations:
            return {}
        if any(isinstance(v, jax.core.Tracer) for v in (*inputs, *self.params.values())):
            raise SignatureMismatchError(
                f"this module updates state in place ({_targets(sig)}): under jit/grad/vmap call "
                "f.apply(params, *args, mutable=True), which returns (outputs, updates)"
            )
        by_path = {spec.name: v for spec, v in zip(sig.inputs, inputs, strict=True)}
        written = {}
        for m in sig.mutations:
            if m.kind != "input":
                continue
            value = by_path[m.target]
            if not (isinstance(value, np.ndarray) and value.flags.writeable):
                raise SignatureMismatchError(
                    f"{m.target}: the model updates this input in place, but a {type(value).__name__} "
                    "cannot be written to: pass a writable NumPy array, or call "
                    "f.apply(f.params, *args, mutable=True), which returns its new value"
                )
            written[m.target] = value
        return written

    def state_dict(self, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Parameters and buffers (``params``, default :attr:`params`) as CPU torch tensors
        by name, for ``torch_model.load_state_dict(f.state_dict(trained))`` on a module
        converted from that torch model: a tied weight (``signature.tied``) under
        each of its names, as torch's ``state_dict()`` lists it. Lifted constants and
        non-persistent buffers (``signature.non_persistent``) are left out, as
        torch's ``state_dict()`` leaves them out."""
        import torch

        params = self.params if params is None else params
        transient = set(self.signature.non_persistent)  # not in torch's state_dict()
        keep = {p.name for p in self.signature.params if p.kind in ("parameter", "buffer")} - transient
        with self._scope():  # int64 buffers stay int64
            out = {
                name: torch.from_dlpack(jax.device_get(jax.numpy.asarray(v))).clone()
                for name, v in params.items()
                if name in keep
            }
        for name, dtype in self.signature.narrowed.items():  # the 32-bit form
            if name in out:  # back to the source's dtype (the values fit: narrow_64bit checked them)
                out[name] = out[name].to(dtypes.torch_dtype(dtype))
        for alias, name in self.signature.tied.items():  # one tensor, every name
            if name in out:
                out[alias] = out[name]
        return out

    def partition(self, params: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """``params`` (default :attr:`params`) split as ``(trainable, state)``, ``{**trainable,
        **state}`` being all of them: ``trainable`` holds what the source's optimizer trains
        (floating parameters, ``kind == "parameter"``, less those the source froze:
        ``requires_grad=False`` in torch, ``signature.frozen``), ``state`` the
        buffers (BatchNorm statistics, Flax collections other than ``params``), lifted
        constants, integer parameters and frozen parameters. Differentiate and update
        ``trainable`` only::

            trainable, state = f.partition()
            grads = jax.grad(lambda p: loss(f.apply({**p, **state}, x)))(trainable)
        """
        params = self.params if params is None else params
        train = {
            p.name
            for p in self.signature.params
            if p.kind == "parameter"
            and p.name not in self._frozen
            and (dtypes.is_floating(p.dtype) or dtypes.is_complex(p.dtype))
        }
        return (
            {k: v for k, v in params.items() if k in train},
            {k: v for k, v in params.items() if k not in train},
        )

    def __repr__(self) -> str:
        return f"<JaxFunction of {self.module!r}>"


def _where(devices: set) -> str:
    if len(devices) == 1:
        return str(next(iter(devices)))
    return f"the {len(devices)} devices of its mesh (jax.device_put it with a NamedSharding on f.mesh)"


def _dtype_name(value: Any) -> str | None:
    dtype = getattr(value, "dtype", None)
    return None if dtype is None else dtypes.name_of(dtype)


def _to_32bit(path: str, value: Any, spec) -> Any:
    """An input of a function in JAX's 32-bit form (``to_jax(x64=False)``) whose source
    dtype is 64-bit: a 64-bit value is checked to fit the 32-bit spec and cast; anything
    else (int32 arrays and tracers) is left to :func:`check_leaf`.

    Raises:
        InputRangeError: a value outside the 32-bit range (never wrapped).
        SignatureMismatchError: a traced 64-bit value, whose values cannot be checked.
    """
    from converter.errors import InputRangeError

    name = _dtype_name(value)
    if name not in _NARROWED or _NARROWED[name] != spec.dtype:
        return value
    if isinstance(value, _Tracer):  # a mutating module under a transform (else run 64-bit)
        raise SignatureMismatchError(
            f"{path}: a traced {name} value reaches a function converted for JAX's 32-bit mode "
            f"(it takes {spec.dtype}), where its values cannot be checked: cast it to {spec.dtype} "
            "where they are known to fit, or convert with to_jax(x64=True)"
        )
    arr = np.asarray(jax.device_get(value) if isinstance(value, jax.Array) else value)
    if arr.size:
        info = np.iinfo(dtypes.to_numpy(spec.dtype))
        lo, hi = arr.min(), arr.max()
        if lo < info.min or hi > info.max:
            bad = int(lo) if lo < info.min else int(hi)
            raise InputRangeError(
                f"{path}: holds {bad}, outside the {spec.dtype} range [{info.min}, {info.max}] of "
                "this function's 32-bit form (to_jax with x64 off): it is not wrapped. Convert with "
                "to_jax(x64=True) and call under jax.enable_x64(True) for such values"
            )
    return arr.astype(dtypes.to_numpy(spec.dtype))


def _symbolic_args(flat: list[Any]) -> bool:
    return any(not isinstance(d, int) for v in flat for d in np.shape(v))


def _flatten_function(f: JaxFunction) -> tuple[list[Any], tuple]:
    names = tuple(f.params)
    return [f.params[n] for n in names], (_Template(f), names)


def _unflatten_function(aux: tuple, leaves: Any) -> JaxFunction:
    template, names = aux
    g = copy.copy(template.f)  # shares the module and its compiled state; not re-converted
    g._closed_over = g._warned_embedding = False  # a new object: no program has captured its params
    g._params = dict(zip(names, leaves, strict=True))
    return g


class _Template:
    """The static part of a flattened :class:`JaxFunction`: equal for copies of one
    converted function, so ``jax.jit`` reuses its compilation across parameter values."""

    def __init__(self, f: JaxFunction):
        self.f = f
        self.key = id(f.module)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Template) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)


# A JaxFunction is a pytree whose leaves are its parameters (by name): passed as an argument
# to jax.jit / grad / vmap (``jax.jit(lambda f, x: f(x))(f, x)``, ``jax.grad(loss)(f)``)
# its weights are arguments of the program, not constants baked into it.
jax.tree_util.register_pytree_node(JaxFunction, _flatten_function, _unflatten_function)


def raw_key(rng: Any) -> jax.Array:
    """A raw threefry key (``uint32[2]``) from an int seed, a raw key, or a typed
    ``jax.random.key``.

    Raises:
        SignatureMismatchError: ``rng`` is none of those.
    """
    if isinstance(rng, (int, np.integer)):
        return jax.random.PRNGKey(int(rng))
    if jax.dtypes.issubdtype(getattr(rng, "dtype", None), jax.dtypes.prng_key):
        return jax.random.key_data(rng)
    if getattr(rng, "shape", None) == (2,) and str(getattr(rng, "dtype", "")) == "uint32":
        return rng
    raise SignatureMismatchError(
        f"rng: expected an int seed or a jax.random key (uint32[2] or typed), got {type(rng).__name__} "
        f"{getattr(rng, 'dtype', '')}{list(getattr(rng, 'shape', []))}"
    )


def _targets(sig) -> str:
    return ", ".join(m.target for m in sig.mutations)


def _has_kwarg(in_tree: dict, name: str) -> bool:
    kwargs = in_tree["children"][1] if in_tree.get("kind") == "tuple" else {}
    return kwargs.get("kind") == "dict" and name in kwargs.get("keys", [])


def to_jax(
    module: Module,
    *,
    device: jax.Device | None = None,
    seed: int = 0,
    mesh: Any = None,
    x64: bool | None = None,
) -> JaxFunction:
    """Convert a :class:`converter.Module` to a JAX callable.

    Args:
        module: the module; host-marked ops not yet in host calls (a Module built without
            the frontends' passes) are outlined first
            (:func:`converter.passes.placement.ensure_canonical`).
        device: where to put the parameters (default: JAX's default device).
        seed: for a module with random ops, the seed of the function's own key stream, used
            by calls that pass no ``rng=`` (each such call takes the next key).
        mesh: for a partitioned module (``signature.mesh``), the ``jax.sharding.Mesh`` to run
            on (same axis names and sizes; its axes are used as ``Auto``); default: one over
            the first devices of ``jax.devices()`` in order. Parameters are placed with their specs
            (``LeafSpec.sharding``), inputs and outputs are laid out as the source's were.
        x64: how a module with 64-bit types (torch's int64 token ids, ``iota``s, index
            arithmetic) runs. ``False``: JAX's 32-bit form, its 64-bit integers computed in
            32 bits (:func:`converter.passes.narrow.narrow_64bit`, which proves it exact or
            raises); the function then works under ``jax.jit``, ``grad``, ``vmap`` with
            x64 off, takes int32 inputs, and int64 ones whose values fit (else
            :class:`converter.errors.InputRangeError`), and returns int32 for int64
            outputs. ``True``: the 64-bit form, run under a scoped ``jax.enable_x64(True)``
            (see :class:`JaxFunction`). ``None`` (default): ``True`` when
            ``jax_enable_x64`` is on where ``to_jax`` is called, else the 32-bit form when
            the module narrows exactly and the 64-bit form otherwise (a 64-bit input that
            JAX narrowed then raises naming why). A module without 64-bit types is the same
            either way.

    Raises:
        UnsupportedOpError: listing every StableHLO op (and custom_call target) without a rule.
        ShardingError: a partitioned module and fewer devices than its mesh needs, or a
            ``mesh`` of another shape.
        NarrowingError: ``x64=False`` and the module cannot be computed in 32 bits exactly
            (every problem listed: op, source line, range; float64 values).
    """
    module = prepare(module, PREPARE)
    narrowed, why_64bit = _width(module, x64)
    f = JaxFunction(narrowed, device, seed, mesh=mesh)
    f._why_64bit = why_64bit
    if narrowed is not module:
        f._source = module
    return f


def _width(module: Module, x64: bool | None) -> tuple[Module, str | None]:
    """The module to run for the ``x64`` choice of :func:`to_jax`, and, when the default
    keeps a 64-bit module because it does not narrow exactly, why not."""
    if x64 is True or (x64 is None and jax.config.jax_enable_x64) or not needs_x64(module):
        return module, None
    from converter.errors import NarrowingError
    from converter.passes import NARROW_64BIT, run_passes

    try:
        return run_passes(module, [NARROW_64BIT]), None
    except NarrowingError as e:
        if x64 is False:
            raise
        return module, "; ".join(e.problems[:3]) + (" ..." if len(e.problems) > 3 else "")
    except Exception as e:  # noqa: BLE001 - the default keeps the exact 64-bit form, saying why
        if x64 is False:
            raise
        return module, f"the 32-bit analysis failed ({type(e).__name__}: {e})"


__all__ = ["JaxFunction", "JaxInterpreter", "PREPARE", "raw_key", "to_jax", "dtypes"]
