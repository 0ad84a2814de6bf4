"""LAPACK custom calls (``stablehlo.custom_call @lapack_<t><routine>_ffi``, ``t`` in s, d)
→ ONNX through their portable expansions.

ONNX has no matrix decomposition or triangular solve operators. Each custom call that JAX
emits for ``jnp.linalg``/``jax.scipy.linalg`` on CPU (``?getrf``, ``?trsm``, ``?potrf``,
``?geqrf``, ``?orgqr``, ``?ormqr``, ``?syevd``, ``?gesdd``, ``?gesvd``) is replaced by the
StableHLO of its LAPACK-equivalent JAX function (:mod:`converter.backends.onnx.lapack_portable`, lowered
for the op's operand types and ``mhlo.backend_config`` flags), whose ops this backend's rules
emit like any others: the loops become ONNX ``Loop`` nodes. ``?geev`` (real ``a``,
eigenvalues only: its eigenvector results are complex zeros, which travel as real pairs like
any complex value, :mod:`converter.backends.onnx.ops.complex`) expands to a Hessenberg reduction and
the Francis double-shift QR algorithm; ``?geev`` with eigenvectors and the complex routines
(``c``, ``z``) are not expanded.
"""

from __future__ import annotations

from converter import mlir

from .. import lapack_portable
from ..registry import register
from .complex import complex_key


def _config(op) -> dict:
    # only this attribute is decoded: ``operand_layouts`` holds ``index`` elements
    attrs = op.mlir.attributes
    cfg = mlir.decode_attribute(attrs["mhlo.backend_config"]) if "mhlo.backend_config" in attrs else {}
    return cfg if isinstance(cfg, dict) else {}


def expand(interp, op, *operands):
    """Emit a LAPACK custom call as its portable expansion (ONNX value names in and out).

    Raises:
        NotImplementedError: the target has no expansion, the op has dynamic shapes, or the
            expansion uses ops this backend has no rule for.
    """
    target = op.attr("call_target_name")
    types = [op.operand_type(i) for i in range(len(op.operands))]
    module, fn = lapack_portable.lower_custom_call(target, _config(op), types, op.result_types)
    functions = mlir.functions(module)
    missing = sorted(
        {
            o.name
            for f in functions.values()
            for o in mlir.walk_ops(f)
            if o.name not in ("func.return", "stablehlo.return", "func.call")
            and o.name not in interp.registry
        }
    )
    if missing:
        raise NotImplementedError(f"{target} expands to {', '.join(missing)}, which have no ONNX rule")
    saved = interp.functions
    interp.functions = functions  # the expansion's func.calls name its own functions
    try:
        return interp.call_function(fn, operands)
    finally:
        interp.functions = saved


for _target in lapack_portable.targets():
    _key = f"stablehlo.custom_call@{_target}"
    # ?geev declares complex eigenvector results (jaxlib's FFI signature, even when none are
    # computed), so its op is always dispatched as complex: that is its only key
    register(complex_key(_key) if lapack_portable.routine_of(_target) == "geev" else _key)(expand)
