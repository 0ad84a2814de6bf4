"""CHLO special functions → ONNX through their StableHLO decompositions.

ONNX has no operator for ``lgamma``, ``digamma``, ``polygamma``, ``zeta``, ``erf_inv``,
``bessel_i1e``, ``next_after``, ``top_k`` (it becomes a sort and two slices) or ``erfc``
(``1 - erf(x)`` loses every digit for large ``x``), and onnxruntime's CPU kernels for
``Erf``, ``Sinh``, ``Cosh``, ``Asinh``, ``Acosh`` and ``Atanh`` take no float64. Such an op
is expanded by StableHLO's own ``chlo-legalize-to-stablehlo`` pass (the CHLO spec's
reference decompositions, the ones XLA compiles, so the model computes what JAX does) into
a one-op function, whose StableHLO ops are then emitted by this backend's rules like any
others. Everything else (float32/float16 ``erf``, ``sinh``...) maps to the ONNX operator
directly.
"""

from __future__ import annotations

import functools

from jaxlib.mlir import ir, passmanager
from jaxlib.mlir.dialects import stablehlo

from converter import dtypes, mlir

from ..registry import register

#: CHLO ops always emitted through their decomposition.
DECOMPOSED = (
    "lgamma",
    "digamma",
    "polygamma",
    "zeta",
    "erf_inv",
    "erfc",
    "bessel_i1e",
    "next_after",
    "top_k",
)
#: CHLO ops mapped to an ONNX operator, decomposed on the dtypes listed (no onnxruntime kernel).
DIRECT = {
    "erf": ("Erf", ("float64",)),
    "sinh": ("Sinh", ("float64",)),
    "cosh": ("Cosh", ("float64",)),
    "asinh": ("Asinh", ("float64",)),
    "acosh": ("Acosh", ("float64",)),
    "atanh": ("Atanh", ("float64",)),
}
# (asin, acos and atan are in ops/elementwise.py: float64 as a rational approximation)


def _type_text(t: mlir.TensorType) -> str:
    dims = "".join(f"{'?' if d is None else d}x" for d in t.shape)
    return f"tensor<{dims}{dtypes.NAME_TO_MLIR[t.dtype]}>"


def _one_op_function(op) -> str:
    """``func.func @decomposition`` holding ``op`` alone (generic form), on the operand and
    result types the rule sees (float32 for a bfloat16 op: see converter.backends.onnx.widen)."""
    n_in, n_out = len(op.operands), len(op.results)
    ins = [_type_text(op.operand_type(i)) for i in range(n_in)]
    outs = [_type_text(t) for t in op.result_types]
    attrs = op.mlir.attributes
    attr_text = ", ".join(f"{attrs[i].name} = {attrs[i].attr}" for i in range(len(attrs)))
    attr_text = f" {{{attr_text}}}" if attr_text else ""
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(ins))
    operands = ", ".join(f"%a{i}" for i in range(n_in))
    result = "%r" if n_out == 1 else f"%r:{n_out}"
    returned = "%r" if n_out == 1 else ", ".join(f"%r#{i}" for i in range(n_out))
    return (
        f"func.func @decomposition({args}) -> ({', '.join(outs)}) {{\n"
        f'  {result} = "{op.name}"({operands}){attr_text} : ({", ".join(ins)}) -> ({", ".join(outs)})\n'
        f"  func.return {returned} : {', '.join(outs)}\n}}"
    )


@functools.cache
def _decomposition(text: str) -> tuple[ir.Module, ir.Operation]:
    """The module (kept alive by the cache) and function of ``text`` after
    ``chlo-legalize-to-stablehlo``."""
    module = mlir.parse_module(text, filename="<chlo decomposition>")
    with module.context:
        stablehlo.register_stablehlo_passes()
        passmanager.PassManager.parse("builtin.module(func.func(chlo-legalize-to-stablehlo))").run(
            module.operation
        )
    return module, mlir.functions(module)["decomposition"]


def decompose(interp, op, *operands):
    """Emit ``op`` as its StableHLO decomposition.

    Raises:
        NotImplementedError: the decomposition uses ops this backend has no rule for
            (``next_after`` bit-casts floats to integers, which ONNX cannot express), or
            the op has dynamic dimensions.
    """
    if any(None in t.shape for t in op.result_types):
        raise NotImplementedError(f"{op.name} on dynamic shapes (specialize the module first)")
    _, fn = _decomposition(_one_op_function(op))
    missing = sorted(
        {
            o.name
            for o in mlir.walk_ops(fn)
            if o.name not in ("func.return", "stablehlo.return") and o.name not in interp.registry
        }
    )
    if missing:
        raise NotImplementedError(f"{op.name} decomposes to {', '.join(missing)}, which have no ONNX rule")
    return interp.call_function(fn, operands)


for _name in DECOMPOSED:
    register(f"chlo.{_name}")(decompose)


def _direct(op_type, decomposed_dtypes):
    def rule(interp, op, x):
        if op.result_type.dtype in decomposed_dtypes:
            return decompose(interp, op, x)
        return interp.graph.op(op_type, [x])

    return rule


for _name, (_op_type, _dtypes) in DIRECT.items():
    register(f"chlo.{_name}", dynamic=True)(_direct(_op_type, _dtypes))
