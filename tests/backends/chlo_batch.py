"""One hand-written StableHLO module per backend holding the CHLO ops and the rarer
StableHLO ops JAX does not emit on CPU (or emits only from functions the backends' tests do
not otherwise run), checked against XLA compiling the same text
(:func:`converter.tools.validate.xla_runner`): each backend converts and runs one module instead
of one per op. :func:`module_text` assembles the snippets a backend supports.
"""

from __future__ import annotations

import numpy as np

F = "tensor<2x3xf32>"
C = "tensor<2x3xcomplex<f32>>"
I = "tensor<2x3xi32>"  # noqa: E741
B = "tensor<2x3xi1>"
ROW_F, ROW_I, ROW_B = "tensor<3xf32>", "tensor<3xi32>", "tensor<3xi1>"

#: The module's inputs: name → (type, value).
INPUTS = {
    "x": (F, np.array([[1.5, 2.25, 3.0], [1.25, 4.0, 2.5]], np.float32)),
    "y": (F, np.array([[0.5, -1.75, 2.0], [3.0, -0.25, 1.0]], np.float32)),
    "s": (F, np.array([[np.inf, -np.inf, np.nan], [1.0, 0.0, -2.0]], np.float32)),
    "r": (ROW_F, np.array([0.75, -2.0, 1.5], np.float32)),
    "u": (ROW_F, np.array([1.25, 2.0, 0.5], np.float32)),  # zeta's q: away from its poles
    "i": (I, np.array([[7, -7, 123456789], [-1, 0, 2147483647]], np.int32)),
    "k": (ROW_I, np.array([1, 3, 31], np.int32)),
    "p": (B, np.array([[True, False, True], [False, True, False]])),
    "q": (ROW_B, np.array([True, False, True])),
    "c": (
        C,
        (np.array([[1, -2, 3], [0.5, 0, -1]]) + 1j * np.array([[2, 0.5, -1], [0, 3, -2]])).astype(
            np.complex64
        ),
    ),
    "t": ("tensor<i1>", np.array(True)),
    "m": ("tensor<3x3xf32>", np.array([[2.0, 0, 0], [0.5, 3.0, 0], [-1.0, 0.25, 4.0]], np.float32)),
}

_BD = "{broadcast_dimensions = array<i64: 1>}"


def _bin(op: str, lhs: str, rhs: str, lt: str, rt: str, out: str) -> tuple[str, str]:
    return f'"chlo.broadcast_{op}"(%{lhs}, %{rhs}) {_BD} : ({lt}, {rt}) -> {out}', out


def _un(op: str, arg: str, at: str, out: str) -> tuple[str, str]:
    return f'"{op}"(%{arg}) : ({at}) -> {out}', out


#: Snippet name (the registry key it reaches) → (one op producing one value, its type).
SNIPPETS: dict[str, tuple[str, str]] = {
    "chlo.tan": _un("chlo.tan", "y", F, F),
    "chlo.bessel_i1e": _un("chlo.bessel_i1e", "y", F, F),
    "chlo.conj": _un("chlo.conj", "c", C, C),
    "chlo.is_inf": _un("chlo.is_inf", "s", F, B),
    "chlo.is_neg_inf": _un("chlo.is_neg_inf", "s", F, B),
    "chlo.is_pos_inf": _un("chlo.is_pos_inf", "s", F, B),
    "chlo.zeta": ('"chlo.zeta"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>', F),
    "chlo.constant": (
        '"chlo.constant"() {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>}'
        " : () -> tensor<2x3xf32>",
        F,
    ),
    "chlo.broadcast_and": _bin("and", "p", "q", B, ROW_B, B),
    "chlo.broadcast_or": _bin("or", "p", "q", B, ROW_B, B),
    "chlo.broadcast_xor": _bin("xor", "i", "k", I, ROW_I, I),
    "chlo.broadcast_atan2": _bin("atan2", "y", "r", F, ROW_F, F),
    "chlo.broadcast_complex": _bin("complex", "y", "r", F, ROW_F, C),
    "chlo.broadcast_divide": _bin("divide", "y", "r", F, ROW_F, F),
    "chlo.broadcast_maximum": _bin("maximum", "y", "r", F, ROW_F, F),
    "chlo.broadcast_minimum": _bin("minimum", "y", "r", F, ROW_F, F),
    "chlo.broadcast_multiply": _bin("multiply", "y", "r", F, ROW_F, F),
    "chlo.broadcast_subtract": _bin("subtract", "y", "r", F, ROW_F, F),
    "chlo.broadcast_power": _bin("power", "x", "r", F, ROW_F, F),
    "chlo.broadcast_next_after": _bin("next_after", "y", "r", F, ROW_F, F),
    "chlo.broadcast_zeta": _bin("zeta", "x", "u", F, ROW_F, F),
    "chlo.broadcast_polygamma": (
        f'"chlo.broadcast_polygamma"(%order, %x) {_BD} : ({ROW_F}, {F}) -> {F}',
        F,
    ),
    "chlo.mulhi": ('"chlo.mulhi"(%i, %i) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>', I),
    "stablehlo.custom_call@Sharding": (
        '"stablehlo.custom_call"(%y) {call_target_name = "Sharding", mhlo.sharding = "{replicated}"}'
        " : (tensor<2x3xf32>) -> tensor<2x3xf32>",
        F,
    ),
    "stablehlo.custom_call@SPMDFullToShardShape": (
        '"stablehlo.custom_call"(%y) {call_target_name = "SPMDFullToShardShape", mhlo.sharding = "{manual}"}'
        " : (tensor<2x3xf32>) -> tensor<2x3xf32>",
        F,
    ),
    "stablehlo.custom_call@SPMDShardToFullShape": (
        '"stablehlo.custom_call"(%y) {call_target_name = "SPMDShardToFullShape",'
        ' mhlo.sharding = "{replicated}"}'
        " : (tensor<2x3xf32>) -> tensor<2x3xf32>",
        F,
    ),
    "chlo.broadcast_shift_left": _bin("shift_left", "i", "k", I, ROW_I, I),
    "chlo.broadcast_shift_right_arithmetic": _bin("shift_right_arithmetic", "i", "k", I, ROW_I, I),
    "chlo.broadcast_shift_right_logical": _bin("shift_right_logical", "i", "k", I, ROW_I, I),
    "chlo.broadcast_select": (f'"chlo.broadcast_select"(%p, %x, %y) : ({B}, {F}, {F}) -> {F}', F),
    "stablehlo.dot": ('"stablehlo.dot"(%x, %m) : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>', F),
    "stablehlo.logistic": _un("stablehlo.logistic", "y", F, F),
    "stablehlo.negate[complex]": _un("stablehlo.negate", "c", C, C),
    "stablehlo.optimization_barrier": _un("stablehlo.optimization_barrier", "y", F, F),
    "stablehlo.optimization_barrier[complex]": _un("stablehlo.optimization_barrier", "c", C, C),
    "stablehlo.triangular_solve": (
        '"stablehlo.triangular_solve"(%m, %m) {left_side = true, lower = true, unit_diagonal = false,'
        " transpose_a = #stablehlo<transpose TRANSPOSE>}"
        " : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>",
        "tensor<3x3xf32>",
    ),
    "stablehlo.if": (
        '"stablehlo.if"(%t) ({\n    "stablehlo.return"(%x) : (tensor<2x3xf32>) -> ()\n  }, {\n'
        '    "stablehlo.return"(%y) : (tensor<2x3xf32>) -> ()\n  }) : (tensor<i1>) -> tensor<2x3xf32>',
        F,
    ),
    "stablehlo.composite": (
        '"stablehlo.composite"(%y) {name = "test.twice", decomposition = @twice, version = 0 : i32,'
        " composite_attributes = {}} : (tensor<2x3xf32>) -> tensor<2x3xf32>",
        F,
    ),
    "stablehlo.dynamic_iota": (
        '"stablehlo.dynamic_iota"(%shape) {iota_dimension = 1 : i64} : (tensor<2xi64>) -> tensor<2x3xf32>',
        F,
    ),
    "stablehlo.dynamic_reshape": (
        '"stablehlo.dynamic_reshape"(%y, %shape_t) : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<3x2xf32>',
        "tensor<3x2xf32>",
    ),
    "stablehlo.unary_einsum": (
        '"stablehlo.unary_einsum"(%y) {einsum_config = "ab->ba"} : (tensor<2x3xf32>) -> tensor<3x2xf32>',
        "tensor<3x2xf32>",
    ),
}

_TWICE = """
func.func private @twice(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %a : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}"""


def module_text(names: list[str]) -> str:
    """A ``@main`` taking every :data:`INPUTS` and returning the snippets ``names``."""
    params = ", ".join(f"%{n}: {t}" for n, (t, _) in INPUTS.items())
    body = [
        "  %shape = stablehlo.constant dense<[2, 3]> : tensor<2xi64>",
        "  %shape_t = stablehlo.constant dense<[3, 2]> : tensor<2xi64>",
        "  %order = stablehlo.constant dense<1.0> : tensor<3xf32>",  # one order: torch's polygamma
    ]
    types = []
    for n, name in enumerate(names):
        op, out = SNIPPETS[name]
        body.append(f"  %v{n} = {op}")
        types.append(out)
    values = ", ".join(f"%v{n}" for n in range(len(names)))
    body.append(f"  return {values} : {', '.join(types)}")
    main = f"func.func @main({params}) -> ({', '.join(types)}) {{\n" + "\n".join(body) + "\n}"
    return main + (_TWICE if "stablehlo.composite" in names else "")


def args() -> list[np.ndarray]:
    """The inputs in :data:`INPUTS` order."""
    return [v for _, v in INPUTS.values()]


def xla_outputs(text: str) -> list[np.ndarray]:
    """XLA's results of the module ``text`` on :func:`args` (the reference)."""
    import converter
    from converter.tools.validate import xla_runner

    return xla_runner(converter.from_stablehlo(text, normalize=False), text)(tuple(args()), {})


#: The snippets each backend runs (those it has rules for; the others it refuses by name).
JAX_BACKEND = [
    "chlo.tan", "chlo.bessel_i1e", "chlo.conj", "chlo.is_inf", "chlo.is_neg_inf", "chlo.is_pos_inf",
    "chlo.zeta", "stablehlo.dot", "stablehlo.logistic", "stablehlo.negate[complex]",
    "stablehlo.optimization_barrier", "stablehlo.optimization_barrier[complex]",
    "stablehlo.triangular_solve", "stablehlo.if", "stablehlo.composite",
]  # fmt: skip
TORCH_BACKEND = [n for n in SNIPPETS if n != "stablehlo.unary_einsum"]  # XLA cannot compile it
ONNX_BACKEND = [
    "chlo.tan", "chlo.bessel_i1e", "chlo.is_inf", "chlo.zeta", "stablehlo.logistic",
    "stablehlo.negate[complex]", "stablehlo.optimization_barrier", "stablehlo.optimization_barrier[complex]",
    "stablehlo.if", "stablehlo.composite",
]  # fmt: skip
