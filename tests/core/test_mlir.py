"""converter.mlir: parsing errors, constant decoding for every dtype, locations."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from converter import mlir
from converter.errors import ParseError

CASES = [
    ("dense<[1.5, -2.25]> : tensor<2xbf16>", np.array([1.5, -2.25], ml_dtypes.bfloat16)),
    ("dense<2.5> : tensor<2x2xbf16>", np.full((2, 2), 2.5, ml_dtypes.bfloat16)),
    ("dense<[0x7FC0, 0xFF80]> : tensor<2xbf16>", np.array([np.nan, -np.inf], ml_dtypes.bfloat16)),
    ("dense<[1.0, 0.5]> : tensor<2xf16>", np.array([1.0, 0.5], np.float16)),
    ("dense<[(1.0,2.0), (-3.0,4.5)]> : tensor<2xcomplex<f32>>", np.array([1 + 2j, -3 + 4.5j], np.complex64)),
    ("dense<(1.0,-1.0)> : tensor<3xcomplex<f64>>", np.full(3, 1 - 1j, np.complex128)),
    ("dense<[true, false]> : tensor<2xi1>", np.array([True, False])),
    ("dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>", np.array([[1, 2], [3, 4]], np.int64)),
    ("dense<[255, 1]> : tensor<2xui8>", np.array([255, 1], np.uint8)),
    ("dense<0xFF800000> : tensor<f32>", np.array(-np.inf, np.float32)),
    ("dense<> : tensor<0xf32>", np.zeros((0,), np.float32)),
]


_KEEP_ALIVE = []  # an ir.Operation does not keep its ir.Module alive


def _constant_op(text):
    module = mlir.parse_module(
        f"func.func @main() -> {text.split(' : ')[-1]} {{\n"
        f"  %0 = stablehlo.constant {text}\n  return %0 : {text.split(' : ')[-1]}\n}}"
    )
    _KEEP_ALIVE.append(module)
    return mlir.Op(next(mlir.walk_ops(mlir.main_function(module))))


@pytest.mark.parametrize("text,expected", CASES, ids=[c[0] for c in CASES])
def test_dense_constants_decode_exactly(text, expected):
    got = _constant_op(text).attr("value")
    assert got.dtype == expected.dtype and got.shape == expected.shape
    bits = lambda a: np.atleast_1d(a).view(np.uint8)  # noqa: E731 - bitwise, so NaN == NaN
    np.testing.assert_array_equal(bits(got), bits(expected))


def test_an_attribute_the_bindings_refuse_without_a_dense_literal_is_a_type_error(monkeypatch):
    """An attribute the bindings cannot hand out is read from the op's printed ``dense<``
    literal; without one (or under another key than ``value``) the refusal names the op."""
    module = mlir.parse_module(
        "func.func @main() -> f32 {\n  %0 = arith.constant 1.5 : f32\n  return %0 : f32\n}"
    )
    _KEEP_ALIVE.append(module)

    def refuse(attr):
        raise TypeError("no binding")

    monkeypatch.setattr(mlir, "decode_attribute", refuse)
    op = mlir.Op(next(mlir.walk_ops(mlir.main_function(module))))
    with pytest.raises(TypeError, match=r"arith\.constant: cannot decode attribute 'value'"):
        op.attr("value")
    with pytest.raises(TypeError, match=r"arith\.constant: cannot decode attribute 'value'"):
        op.attrs  # noqa: B018 - the property decodes every attribute
    const = _constant_op("dense<[1.5, 2.5]> : tensor<2xf32>")
    np.testing.assert_array_equal(const.attrs["value"], np.array([1.5, 2.5], np.float32))


def test_attributes_decoded_one_by_one_then_all():
    """``attr`` decodes the one attribute asked for; ``attrs`` afterwards still has every
    attribute (the decoded one reused), and ``attr`` of an absent key gives the default
    before and after."""
    module = mlir.parse_module(
        "func.func @main(%a: tensor<4xf32>) -> tensor<2xf32> {\n"
        '  %0 = "stablehlo.slice"(%a) <{start_indices = array<i64: 1>, limit_indices = array<i64: 3>,'
        " strides = array<i64: 1>}> : (tensor<4xf32>) -> tensor<2xf32>\n"
        "  return %0 : tensor<2xf32>\n}"
    )
    _KEEP_ALIVE.append(module)
    op = mlir.Op(next(mlir.walk_ops(mlir.main_function(module))))
    assert op.attr("start_indices") == [1] and op.attr("absent", 5) == 5
    assert op.attr("strides") == [1]
    assert op.attrs == {"limit_indices": [3], "start_indices": [1], "strides": [1]}
    assert op.attr("limit_indices") == [3] and op.attr("absent", 6) == 6


def test_large_bf16_constant_round_trips_through_jax():
    x = (np.arange(300, dtype=np.float32) / 7).astype(ml_dtypes.bfloat16)
    module = mlir.parse_module(jax.jit(lambda: jnp.asarray(x)).lower().as_text())
    const = next(op for op in mlir.walk_ops(mlir.main_function(module)) if op.name == "stablehlo.constant")
    np.testing.assert_array_equal(mlir.Op(const).attr("value"), x)


def test_malformed_text_reports_line_and_column():
    text = "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n  %0 = stablehlo.bogus %a\n}"
    with pytest.raises(ParseError, match=r"2:\d+"):
        mlir.parse_module(text)


def test_bytecode_and_text_parse_to_same_module():
    module = mlir.parse_module(jax.jit(lambda x: x * 2).lower(jnp.ones(3, jnp.float32)).as_text())
    again = mlir.parse_module(mlir.serialize_portable(module))
    assert mlir.module_text(again, debug_info=False) == mlir.module_text(module, debug_info=False)


def test_stablehlo_attributes_decode_to_fields():
    a, b = jnp.ones((2, 3, 4), jnp.float32), jnp.ones((2, 4, 5), jnp.float32)
    text = jax.jit(lambda a, b: jnp.einsum("bij,bjk->bik", a, b)).lower(a, b).as_text()
    module = mlir.parse_module(text)
    dot = next(
        mlir.Op(o) for o in mlir.walk_ops(mlir.main_function(module)) if o.name == "stablehlo.dot_general"
    )
    dims = dot.attr("dot_dimension_numbers")
    assert dims == {  # its fields, nothing else of the attribute's class
        "lhs_batching_dimensions": [0],
        "rhs_batching_dimensions": [0],
        "lhs_contracting_dimensions": [2],
        "rhs_contracting_dimensions": [1],
    }
    assert dot.result_type == mlir.TensorType((2, 3, 5), "float32")


@pytest.mark.parametrize(
    "funcs, found",
    [
        (["func.func @main", "func.func public @other"], "main"),
        (["func.func private @helper", "func.func public @entry"], "entry"),  # the only public one
        (["func.func @helper", "func.func private @other"], "helper"),  # no visibility: public
        (["func.func @one", "func.func @two"], "module has no @main and 2 public functions"),
        (["func.func private @one"], "module has no @main and 0 public functions"),
    ],
)
def test_main_function_is_main_else_the_only_public_one(funcs, found):
    body = "(%x: tensor<2xf32>) -> tensor<2xf32> {\n  return %x : tensor<2xf32>\n}"
    module = mlir.parse_module("module {\n" + "\n".join(f + body for f in funcs) + "\n}")
    if found.startswith("module has no"):
        with pytest.raises(ParseError, match=found):
            mlir.main_function(module)
    else:
        assert str(mlir.main_function(module).attributes["sym_name"]) == f'"{found}"'


def test_non_tensor_types_and_type_attributes():
    module = mlir.parse_module(
        "func.func @main(%x: tensor<2x?xf32>) -> !stablehlo.token {\n"
        "  %t = stablehlo.after_all : !stablehlo.token\n  return %t : !stablehlo.token\n}"
    )
    _KEEP_ALIVE.append(module)
    main = mlir.main_function(module)
    token = next(mlir.walk_ops(main))
    with pytest.raises(TypeError, match="expected a ranked tensor type, got !stablehlo.token"):
        mlir.tensor_type(token.results[0].type)
    # a TypeAttr (the function's type) decodes to the type itself
    ftype = mlir.decode_attribute(main.attributes["function_type"])
    assert str(ftype) == "(tensor<2x?xf32>) -> !stablehlo.token"
    assert mlir.tensor_type(ftype.inputs[0]) == mlir.TensorType((2, None), "float32")


_ALL_TO_ALL = """func.func @main(%a: tensor<4x4xf32>) -> tensor<8x2xf32> {
  %0 = "NAME"(%a) {split_dimension = 1 : i64, concat_dimension = 0 : i64, split_count = 2 : i64,
    replica_groups = GROUPS} : (tensor<4x4xf32>) -> tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}"""


@pytest.mark.parametrize(
    "name, groups",
    [
        ("stablehlo.all_to_all", "dense<> : tensor<0x0xi64>"),
        ("stablehlo.all\\5Fto_all", "dense<> : tensor<0x2xi64>"),  # the lexer unescapes op names
    ],
)
def test_all_to_all_without_groups_is_refused_before_the_verifier(name, groups):
    # jaxlib's verifier divides by the number of groups: without the check, SIGFPE kills pytest
    text = _ALL_TO_ALL.replace("NAME", name).replace("GROUPS", groups)
    refusal = r"^m\.shlo:2:8: stablehlo\.all_to_all with replica_groups of shape 0x"
    with pytest.raises(ParseError, match=refusal):
        mlir.parse_module(text, filename="m.shlo")


def test_all_to_all_with_groups_still_parses_and_errors_keep_positions():
    groups = "dense<[[0, 1]]> : tensor<1x2xi64>"
    text = _ALL_TO_ALL.replace("NAME", "stablehlo.all_to_all").replace("GROUPS", groups)
    module = mlir.parse_module(text)
    names = [o.name for o in mlir.walk_ops(mlir.main_function(module))]
    assert names == ["stablehlo.all_to_all", "func.return"]
    bad = text.replace("-> tensor<8x2xf32> {", "-> tensor<2x8xf32> {")  # the return's verifier fails
    with pytest.raises(ParseError, match=r"malformed StableHLO: loc\(\"-\":4:3\): type of return operand 0"):
        mlir.parse_module(bad)


def test_bytecode_naming_all_to_all_is_read_in_a_child_first(monkeypatch):
    import subprocess

    module = mlir.parse_module(jax.jit(lambda x: x * 2).lower(jnp.ones(3, jnp.float32)).as_text())
    data = mlir.serialize_portable(module)
    runs = []

    def run(args, *, input, **kw):
        runs.append(input)
        return subprocess.CompletedProcess(args, -8 if b"all_to_all" in input else 0)

    monkeypatch.setattr(mlir.subprocess, "run", run)
    mlir.parse_module(data)
    assert runs == []  # bytes without such an op: no child
    with pytest.raises(ParseError, match=r"verifier crashes \(SIGFPE\) reading this bytecode"):
        mlir.parse_module(data + b"all_to_all")
    assert runs == [data + b"all_to_all"]
    # a child that exits (0, or 1 on a Python error) did not crash: the bytes are read here
    groups = "dense<[[0, 1]]> : tensor<1x2xi64>"
    valid = mlir.serialize_portable(
        mlir.parse_module(_ALL_TO_ALL.replace("NAME", "stablehlo.all_to_all").replace("GROUPS", groups))
    )
    for code in (0, 1):
        monkeypatch.setattr(
            mlir.subprocess, "run", lambda args, code=code, **kw: subprocess.CompletedProcess(args, code)
        )
        read = mlir.parse_module(valid)
        names = [o.name for o in mlir.walk_ops(mlir.main_function(read))]
        assert names == ["stablehlo.all_to_all", "func.return"]


def test_quant_dialect_loads_once_and_stays_loaded():
    from converter import _jax_internal

    ctx = _jax_internal.make_ir_context()  # a context of its own: the first call loads it
    assert mlir._load_quant_dialect(ctx) and mlir._load_quant_dialect(ctx)
    ctx.dialects["quant"]  # loaded


def test_format_location_renders_name_and_first_file_position():
    from jaxlib.mlir import ir

    with mlir.context():
        file = ir.Location.file("m.py", 3, 4)
        cases = [
            (ir.Location.unknown(), ""),
            (ir.Location.file("-", 1, 2), ""),  # the parser's stdin: no position worth showing
            (file, "m.py:3"),  # a file position alone, not also read as a name
            (ir.Location.name("aten.add.Tensor[m.py:3]", childLoc=file), "aten.add.Tensor[m.py:3] @ m.py:3"),
            (ir.Location.name("", childLoc=file), "m.py:3"),
            (ir.Location.name("-"), ""),
            (ir.Location.name("jit(f)/sin"), "jit(f)/sin"),
            (ir.Location.name("x", childLoc=ir.Location.file("-", 1, 1)), "x"),
            (ir.Location.callsite(file, [ir.Location.file("b.py", 5, 6)]), "m.py:3"),
            (ir.Location.name("n", childLoc=ir.Location.callsite(file, [file])), "n @ m.py:3"),
        ]
        assert [mlir.format_location(loc) for loc, _ in cases] == [want for _, want in cases]
