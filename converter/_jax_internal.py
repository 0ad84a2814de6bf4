"""The only module that touches ``jax._src``.

A JAX upgrade that moves these internals breaks this file and nothing else.
"""

from __future__ import annotations

import contextlib
import threading

import jax
from jax._src import core as _core
from jax._src.interpreters import mlir as _mlir
from jax._src.interpreters import partial_eval as _pe

from .markers import STOP_GRADIENT_TARGET


def max_dim(a, b):
    """``max(a, b)`` of ints or ``jax.export`` symbolic dimensions, as a dimension expression
    (``max(n, m)``) when the comparison is not decided."""
    return _core.max_dim(a, b)


def min_dim(a, b):
    """``min(a, b)`` of ints or ``jax.export`` symbolic dimensions (see :func:`max_dim`)."""
    return _core.min_dim(a, b)


def dim_bounds(d) -> tuple[int, int | None]:
    """The tightest ``(lower, upper)`` bounds JAX derives for the symbolic dimension ``d``
    (``jax.export.symbolic_shape`` with its ``constraints``; an unbounded upper is None)."""
    from jax._src.export import shape_poly, shape_poly_decision  # noqa: F401 (installs the solver)

    lo, hi = shape_poly._bounds_decision(d, shape_poly.BoundsPrecision.BEST)
    return int(lo), None if hi == float("inf") else int(hi)


def make_ir_context():
    """A new ``jaxlib.mlir.ir.Context`` with every dialect JAX emits (func, stablehlo, chlo,
    sdy, mhlo) registered and loaded."""
    return _mlir.make_ir_context()


def refine_polymorphic_shapes(module):
    """JAX's own shape refinement of a ``jax.export`` module whose ``@main`` arguments are
    static (what ``Exported.call`` runs): it also turns the ``stablehlo.dynamic_*`` custom
    calls (``dynamic_reduce_window`` of ``cumsum``...) into static ops, which StableHLO's
    public passes leave dynamic. Returns a new module in JAX's context.

    Raises:
        ValueError: refinement failed (JAX's message, with the module dump hint).
    """
    return _mlir.refine_polymorphic_shapes(module)


def exported_from_stablehlo(name: str, serialized: bytes, in_avals: list, out_avals: list, platform: str):
    """A ``jax.export.Exported`` of an existing ``jax.export``-style StableHLO module
    (``serialized``: its portable artifact; ``@main`` takes exactly ``in_avals``, shapes may
    be ``jax.export`` symbolic, and returns ``out_avals`` as a flat tuple), so that
    ``Exported.call`` runs it, also under symbolic shapes inside another ``jax.export``.
    ``jax.export`` has no public constructor from StableHLO: this fills the fields as
    ``jax.export.export`` does for one platform, no shardings and no effects.

    Args:
        in_avals, out_avals: ``(shape, dtype)`` pairs.
    """
    import jax
    from jax._src import core

    ins = tuple(core.ShapedArray(tuple(s), d) for s, d in in_avals)
    outs = tuple(core.ShapedArray(tuple(s), d) for s, d in out_avals)
    symbolic = any(not isinstance(x, int) for a in (*ins, *outs) for x in a.shape)
    return jax.export.Exported(
        fun_name=name,
        in_tree=jax.tree.structure((tuple(range(len(ins))), {})),
        in_avals=ins,
        out_tree=jax.tree.structure(tuple(range(len(outs)))),
        out_avals=outs,
        _has_named_shardings=False,
        _in_named_shardings=(None,) * len(ins),
        _out_named_shardings=(None,) * len(outs),
        in_shardings_hlo=(None,) * len(ins),
        out_shardings_hlo=(None,) * len(outs),
        nr_devices=1,
        platforms=(platform,),
        ordered_effects=(),
        unordered_effects=(),
        disabled_safety_checks=(),
        mlir_module_serialized=serialized,
        calling_convention_version=jax.config.jax_export_calling_convention_version,  # what export writes
        module_kept_var_idx=tuple(range(len(ins))),
        uses_global_constants=symbolic,
        _get_vjp=None,
    )


try:  # the DLPack entry points under jax.dlpack's public wrappers (jaxlib >= 0.8)
    from jax._src.lib import _jax as _xla_ext
    from jax._src.lib import jaxlib_extension_version as _ext_version

    FAST_DLPACK = _ext_version >= 467 and hasattr(_xla_ext, "dlpack_managed_tensor_to_buffer")
except ImportError:  # pragma: no cover - another jaxlib layout: callers use jax.dlpack
    FAST_DLPACK = False

_DL_CPU = 1  # DLDeviceType.kDLCPU


def cpu_array_from_dlpack(capsule, device):
    """A jax Array on the CPU ``device`` sharing the memory of a DLPack ``capsule`` (a CPU
    tensor's, e.g. ``torch.utils.dlpack.to_dlpack(t)``), without the checks of the public
    ``jax.dlpack.from_dlpack``: its stream query (which raises and catches an exception on
    CPU), its device lookup and its dtype canonicalization (a ``jnp.asarray`` dispatch) take
    ~25 µs of a ~28 µs call. The dtype is kept as is (float64 stays float64 whatever
    ``jax_enable_x64`` says), so callers use it only when x64 is on or the dtype is 32-bit.
    Only when :data:`FAST_DLPACK`."""
    return _xla_ext.dlpack_managed_tensor_to_buffer(capsule, device, None, None, _DL_CPU)


def cpu_array_to_dlpack(array):
    """A DLPack capsule sharing the memory of a single-device CPU jax ``array`` (what
    ``array.__dlpack__()`` returns, without its device lookups). Only when :data:`FAST_DLPACK`,
    and then jaxlib's function itself (below): ``call_jax`` calls it once per output per call,
    and a Python frame around it adds ~400 instructions (callgrind) to the ~4,700 of the call."""
    return _xla_ext.buffer_to_dlpack_managed_tensor(array)


if FAST_DLPACK:
    cpu_array_to_dlpack = _xla_ext.buffer_to_dlpack_managed_tensor  # noqa: F811 - the same, no frame


def under_staging_trace() -> bool:
    """Whether the current JAX trace, or one it is nested in, stages out a program (``jit``,
    ``jax.export``, ``make_jaxpr``, a ``scan``/``cond`` body; also beneath ``grad``/``vmap``
    of one): concrete arrays read here become constants of that program. Walks the trace
    stack (``parent_trace``) looking for a ``DynamicJaxprTrace``; False at top level."""
    trace = _core.trace_ctx.trace
    while trace is not None:
        if isinstance(trace, _pe.DynamicJaxprTrace):
            return True
        trace = getattr(trace, "parent_trace", None)
    return False


def constants_hoisted() -> bool:
    """Whether ``jax.jit`` passes closed-over arrays to the compiled program as arguments
    instead of embedding them in it: JAX's transitional ``jax_use_simplified_jaxpr_constants``
    mode (https://docs.jax.dev/en/latest/internals/constants.html), which only takes full
    effect when set before JAX is imported (``JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=True``):
    ``jax.Array`` is then a literal type of the tracer, and the lowering parameters
    ``jax.jit`` uses (``mlir.LoweringParameters()``) hoist literals into arguments only when
    the mode was on at import (their default is read then). The option set later, even as a
    context around the trace, makes literals that are embedded all the same."""
    from jax._src import config
    from jax._src.array import ArrayImpl

    return bool(config.use_simplified_jaxpr_constants.value) and ArrayImpl in _core.literalable_types


def embedded_constants():
    """A context in which ``jax.jit(...).lower()`` embeds closed-over arrays in the lowered
    module (JAX's default) even in the mode of :func:`constants_hoisted`, which would add them
    to ``@main``'s arguments: the frontends' StableHLO takes exactly the signature's
    arguments. ``jax.export`` never hoists them."""
    from jax._src import config

    return config.use_simplified_jaxpr_constants(False)


def shape_assertion(pred, message: str) -> None:
    """Bind ``jax.export``'s shape assertion: a ``stablehlo.custom_call @shape_assertion``
    checking at run time (at shape refinement) that ``pred``, a boolean computed from
    dimension sizes only, holds; ``message`` is the error otherwise."""
    from jax._src.export import shape_poly

    shape_poly.shape_assertion(pred, error_message=message)


#: True in a thread inside :func:`stop_gradient_marked` (other threads lower
#: ``stop_gradient`` as JAX does). A JAX user context (``jax.make_user_context``, made once,
#: at import, as JAX asks): thread-local, and part of the key of JAX's tracing, lowering and
#: compilation caches, so a marked lowering is never served to an unmarked trace (another
#: thread's ``jax.jit``, or a later one) nor the reverse, and no cache is cleared.
_MARKING = jax.make_user_context(False)
_MARK_LOCK = threading.Lock()
_mark_scopes = [0, None]  # [scopes open in any thread, JAX's own lowering rule]


def _lower_stop_gradient(ctx, x):
    if not _MARKING.value:
        return _mark_scopes[1].rule(ctx, x)
    (aval,) = ctx.avals_in
    shapes = None
    if not all(isinstance(d, int) for d in aval.shape):  # its shape as an operand: refinable
        shapes = [_mlir.eval_dynamic_shape_as_tensor(ctx, aval.shape)]
    op = _mlir.custom_call(STOP_GRADIENT_TARGET, result_types=[x.type], operands=[x], result_shapes=shapes)
    return op.results


@contextlib.contextmanager
def stop_gradient_marked():
    """Within the scope, JAX lowers ``lax.stop_gradient`` (``ad_util.stop_gradient_p``, which
    StableHLO has no op for: JAX lowers it to nothing) to
    ``stablehlo.custom_call @converter.stop_gradient(x)``, which the converter's backends read
    as ``stop_gradient``/``detach``/``Identity``. On symbolic shapes the call also takes the
    result's shape as an operand (``indices_of_shape_operands``, as JAX's own shape-polymorphic
    custom calls), which StableHLO's shape refinement reads.

    Thread-safe: the marking rule is installed while any thread has a scope open, and marks
    only in the threads inside one (others get JAX's rule); the scope is a JAX user context
    (:data:`_MARKING`), so JAX's caches keep marked and unmarked lowerings apart."""
    from jax._src import ad_util

    with _MARK_LOCK:
        if _mark_scopes[0] == 0:
            _mark_scopes[1] = _mlir._lowerings[ad_util.stop_gradient_p]
            _mlir.register_lowering(ad_util.stop_gradient_p, _lower_stop_gradient)
        _mark_scopes[0] += 1
    try:
        with _MARKING(True):
            yield
    finally:
        with _MARK_LOCK:
            _mark_scopes[0] -= 1
            if _mark_scopes[0] == 0:
                _mlir._lowerings[ad_util.stop_gradient_p] = _mark_scopes[1]


_backend_lock = threading.Lock()
_backends_ready = False


def backends_initialized() -> bool:
    """Whether JAX has created its backends (XLA clients) in this process."""
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def init_backends_quietly() -> None:
    """Create JAX's backends (``jax.devices()``, under the user's JAX configuration) with the
    XLA client's C++ log lines (``pjrt_client.cc``'s device count) held back: file
    descriptor 2 is pointed at a temporary file for that one call, under a lock, and
    everything else written meanwhile (other threads' stderr) is written back to it after.
    A no-op once the backends exist (whoever created them), and while ``torch.compile``
    traces the caller (the call is then part of a graph being captured)."""
    global _backends_ready
    if _backends_ready:
        return
    import os
    import re
    import sys
    import tempfile

    torch = sys.modules.get("torch")
    if torch is not None and torch.compiler.is_compiling():
        return
    import jax

    if backends_initialized():
        _backends_ready = True
        return
    with _backend_lock:
        if backends_initialized():
            _backends_ready = True
            return
        try:
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):
            pass
        with tempfile.TemporaryFile() as held:
            try:
                saved = os.dup(2)
            except OSError:  # no file descriptor 2: nothing to hold back
                return
            try:
                os.dup2(held.fileno(), 2)
                try:
                    jax.devices()
                except Exception:  # noqa: BLE001 - no backend: the caller's own use reports it
                    pass
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            held.seek(0)
            text = held.read()
        keep = b"".join(
            line
            for line in text.splitlines(keepends=True)
            if not re.match(rb"[IW]\d{4} [\d:.]+\s+\d+ pjrt_client\.cc:\d+\]", line)
        )
        if keep:
            os.write(2, keep)
