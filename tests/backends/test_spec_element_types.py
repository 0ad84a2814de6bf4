# ruff: noqa: E501 - one StableHLO op per line
"""Element types and elementwise semantics the StableHLO spec defines, checked on every backend
with one small module per case (the spec's examples; results as the spec and its reference
interpreter state them): ``i1`` arithmetic, ``real``/``imag`` of real tensors, integer
``power``, ``convert`` complex -> ``i1``, ``reduce_precision`` with no mantissa bits, sub-byte
integers and the narrow float types (a backend that cannot hold a type refuses it by name)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converter.errors import UnsupportedOpError
from tests.backends.spec_helpers import backends, expect_eq, run

_I1_OPS = {
    "add": [False, True, True, True],  # spec: logical OR on booleans
    "multiply": [False, False, False, True],  # logical AND
    "maximum": [False, True, True, True],
    "minimum": [False, False, False, True],
}
_I1 = """func.func @main() -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %a = stablehlo.constant dense<[false, false, true, true]> : tensor<4xi1>
  %b = stablehlo.constant dense<[false, true, false, true]> : tensor<4xi1>
  %r0 = stablehlo.add %a, %b : tensor<4xi1>
  %r1 = stablehlo.multiply %a, %b : tensor<4xi1>
  %r2 = stablehlo.maximum %a, %b : tensor<4xi1>
  %r3 = stablehlo.minimum %a, %b : tensor<4xi1>
  return %r0, %r1, %r2, %r3 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}"""


@backends
def test_i1_arithmetic(backend):
    for got, (op, want) in zip(run(_I1, backend), _I1_OPS.items(), strict=True):
        assert got.dtype == np.bool_, op
        expect_eq(got, want, np.bool_)


_REAL_IMAG = """func.func @main() -> (tensor<3xf32>, tensor<3xf32>) {
  %a = stablehlo.constant dense<[1.5, -0.0, 0x7FC00000]> : tensor<3xf32>
  %r = stablehlo.real %a : tensor<3xf32>
  %i = stablehlo.imag %a : tensor<3xf32>
  return %r, %i : tensor<3xf32>, tensor<3xf32>
}"""


_I1_REDUCE = """func.func @main(%a: tensor<3x3xi1>) -> tensor<3xi1> {
  %t = stablehlo.constant dense<INIT> : tensor<i1>
  %r = stablehlo.reduce(%a init: %t) applies stablehlo.BODY across dimensions = [1] : (tensor<3x3xi1>, tensor<i1>) -> tensor<3xi1>
  return %r : tensor<3xi1>
}"""


@backends
@pytest.mark.parametrize(
    "body,init", [("add", False), ("maximum", True), ("multiply", True), ("minimum", False)]
)
def test_i1_reduce_bodies(backend, body, init):
    """A reduce whose body is an arithmetic op on ``i1`` combines as that op does on booleans
    (``add``/``maximum``: OR, ``multiply``/``minimum``: AND), from the init."""
    rows = np.array([[False, False, False], [True, False, True], [True, True, True]])
    text = _I1_REDUCE.replace("INIT", str(init).lower()).replace("BODY", body)
    any_of = body in ("add", "maximum")
    want = [(row.any() or init) if any_of else (row.all() and init) for row in rows]
    (got,) = run(text, backend, rows)
    expect_eq(got, want, np.bool_)


@backends
def test_real_imag_of_real_tensor(backend):
    """Spec: ``real`` of a float tensor is the tensor, ``imag`` is zeros."""
    re, im = run(_REAL_IMAG, backend)
    expect_eq(re, [1.5, -0.0, np.nan], np.float32)
    expect_eq(im, [0.0, 0.0, 0.0], np.float32)


def _power_reference(x, y, dtype):
    """The spec's reference interpreter: squaring with wrap-around; a signed negative
    exponent gives 0 unless |x| == 1."""
    info = np.iinfo(dtype)
    out = []
    for a, b in zip(x.tolist(), y.tolist(), strict=True):
        if info.min < 0 and b < 0:
            if abs(a) != 1:
                out.append(0)
                continue
            b = -b
        e, r, base, m = b % (1 << info.bits), 1, a, 1 << info.bits
        while e:
            if e & 1:
                r = r * base % m
            base, e = base * base % m, e >> 1
        out.append(r)
    return np.array([v % (1 << info.bits) for v in out], np.uint64).astype(dtype)


_POWER_CASES = {
    "i32": (
        np.int32,
        [-1, -1, -2, 0, 1, 2, 3, -3, 0, 5, -2147483648, 2],
        [-3, -2, -1, -1, -5, 3, 21, 3, 0, 2, -2147483648, 31],
    ),
    "i8": (np.int8, [-1, 3, -2, 2, 0, 7], [-128, 5, 7, 8, -1, 127]),
    "ui8": (np.uint8, [0, 1, 2, 3, 255, 2], [0, 255, 3, 5, 2, 8]),
    "ui64": (np.uint64, [3, 1, 2, 0], [2**63 + 1, 2**64 - 1, 64, 0]),
    "i64": (np.int64, [-1, 3, 2, -2], [-(2**63), 41, 63, -2]),
}


def _power_module():
    args, body, results = [], [], []
    for i, (t, (_, x, _)) in enumerate(_POWER_CASES.items()):
        ty = f"tensor<{len(x)}x{t}>"
        args.append(f"%a{i}: {ty}, %b{i}: {ty}")
        body.append(f"  %r{i} = stablehlo.power %a{i}, %b{i} : {ty}")
        results.append((f"%r{i}", ty))
    return (
        f"func.func @main({', '.join(args)}) -> ({', '.join(ty for _, ty in results)}) {{\n"
        + "\n".join(body)
        + f"\n  return {', '.join(r for r, _ in results)} : {', '.join(ty for _, ty in results)}\n}}"
    )


@backends
def test_integer_power(backend):
    """Spec ``power`` on integers (signed and unsigned, negative exponents, wrap-around), one
    module for every type; the spec's example ``power([-2.0, -0.0, ...])`` covers floats,
    which every backend had."""
    args, wants = [], []
    for dtype, x, y in _POWER_CASES.values():
        x, y = np.array(x, dtype), np.array(y, dtype)
        args += [x, y]
        wants.append(_power_reference(x, y, dtype))
    outs = run(_power_module(), backend, *args)
    for t, got, want in zip(_POWER_CASES, outs, wants, strict=True):
        assert got.dtype == want.dtype, t
        expect_eq(got, want)
    expect_eq(outs[0][:6], [-1, 1, 0, 0, 1, 8])  # i32: a few values stated outright


_COMPLEX_TO_I1 = """func.func @main() -> tensor<5xi1> {
  %a = stablehlo.constant dense<[(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (0.0, -0.0), (-0.0, 2.5)]> : tensor<5xcomplex<f32>>
  %r = stablehlo.convert %a : (tensor<5xcomplex<f32>>) -> tensor<5xi1>
  return %r : tensor<5xi1>
}"""


@backends
def test_convert_complex_to_i1(backend):
    """Spec ``convert``: to a boolean, zero is false and any nonzero value true (a complex
    value is zero only when both parts are)."""
    (got,) = run(_COMPLEX_TO_I1, backend)
    expect_eq(got, [False, True, True, False, True], np.bool_)


_REDUCE_PRECISION_F64 = """func.func @main(%a: tensor<8xf64>) -> tensor<8xf64> {
  %r = stablehlo.reduce_precision %a, format = e11m0 : tensor<8xf64>
  return %r : tensor<8xf64>
}"""


@pytest.mark.xla_defaults
@backends
def test_reduce_precision_f64_zero_mantissa_bits(backend):
    """``reduce_precision`` to 0 mantissa bits keeps powers of two; others round to nearest,
    ties to even (the even one is the power of two with the even exponent field)."""
    x = np.array([1.0, 1.5, 3.0, 0.7, -2.9, 1e300, np.inf, np.nan], np.float64)
    (got,) = run(_REDUCE_PRECISION_F64, backend, x)
    expect_eq(got, [1.0, 2.0, 2.0, 0.5, -2.0, 2.0**996, np.inf, np.nan], np.float64)


# --------------------------------------------------------------------------- sub-byte integers


def _wrap(t):
    return f"""func.func @main() -> (tensor<4x{t}>, tensor<4x{t}>, tensor<4xi32>) {{
  %a = stablehlo.constant dense<A> : tensor<4x{t}>
  %b = stablehlo.constant dense<B> : tensor<4x{t}>
  %s = stablehlo.add %a, %b : tensor<4x{t}>
  %p = stablehlo.multiply %a, %b : tensor<4x{t}>
  %c = stablehlo.convert %s : (tensor<4x{t}>) -> tensor<4xi32>
  return %s, %p, %c : tensor<4x{t}>, tensor<4x{t}>, tensor<4xi32>
}}"""


_NARROW_INT = {
    # type: (a, b, a + b, a * b), wrapped modulo 2**bits
    "i4": ([7, -8, 5, -3], [1, -1, 5, 3], [-8, 7, -6, 0], [7, 8 - 16, 25 - 32, -9 + 16]),
    "ui4": ([15, 8, 3, 0], [1, 8, 4, 9], [0, 0, 7, 9], [15, 0, 12, 0]),
    "i2": ([1, -2, 1, -1], [1, -1, -1, -1], [-2, 1, 0, -2], [1, -2, -1, 1]),
    "ui2": ([3, 2, 1, 0], [1, 2, 1, 3], [0, 0, 2, 3], [3, 0, 1, 0]),
}


@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.parametrize("t", list(_NARROW_INT))
def test_sub_byte_integer_arithmetic(backend, t):
    """Sub-byte integers wrap modulo 2**bits (two's complement for ``i2``/``i4``); the torch
    backend carries them in int8/uint8 and returns them so."""
    a, b, s, p = _NARROW_INT[t]
    text = _wrap(t).replace("dense<A>", f"dense<{a}>").replace("dense<B>", f"dense<{b}>")
    got_s, got_p, got_c = run(text, backend)
    expect_eq(got_s.astype(np.int32), s)
    expect_eq(got_p.astype(np.int32), p)
    expect_eq(got_c, s, np.int32)
    if backend == "torch":
        assert got_s.dtype == (np.int8 if t.startswith("i") else np.uint8)


@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.parametrize(
    ("t", "x", "want"), [("i4", [7, -8, 5, -3], [7, -8, 5, 3]), ("i2", [1, -2, 0, -1], [1, -2, 0, 1])]
)
def test_sub_byte_integer_abs(backend, t, x, want):
    """``abs`` of signed sub-byte integers (JAX has no abs for them): the magnitude, and the
    most negative value wraps to itself as for every two's complement type."""
    text = f"""func.func @main() -> tensor<4xi32> {{
  %a = stablehlo.constant dense<{x}> : tensor<4x{t}>
  %b = stablehlo.abs %a : tensor<4x{t}>
  %c = stablehlo.convert %b : (tensor<4x{t}>) -> tensor<4xi32>
  return %c : tensor<4xi32>
}}"""
    (got,) = run(text, backend)
    expect_eq(got, want, np.int32)


@pytest.mark.parametrize("t", ["i4", "ui2"])
def test_sub_byte_integer_refused_by_onnx(t):
    """ONNX models cannot compute on sub-byte integers in onnxruntime: refused by name."""
    a, b, _, _ = _NARROW_INT[t]
    text = _wrap(t).replace("dense<A>", f"dense<{a}>").replace("dense<B>", f"dense<{b}>")
    with pytest.raises(UnsupportedOpError, match=r"stablehlo.add\[u?int[24]\]"):
        run(text, "onnx")


# --------------------------------------------------------------------------- narrow floats

_NARROW_FLOAT = {
    "f8E4M3FN": ml_dtypes.float8_e4m3fn,
    "f8E5M2": ml_dtypes.float8_e5m2,
    "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
    "f8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
    "f8E3M4": ml_dtypes.float8_e3m4,
    "f8E4M3": ml_dtypes.float8_e4m3,
    "f8E4M3B11FNUZ": ml_dtypes.float8_e4m3b11fnuz,
    "f6E2M3FN": ml_dtypes.float6_e2m3fn,
    "f6E3M2FN": ml_dtypes.float6_e3m2fn,
    "f4E2M1FN": ml_dtypes.float4_e2m1fn,
}


def _narrow_module(types):
    """One module: for each type, ``r = convert(x)`` and ``q = (convert(x) + k) * k`` read back
    as f32."""
    body, rets = [], []
    for i, t in enumerate(types):
        body.append(f"""  %k{i} = stablehlo.constant dense<[1.5, 0.5, -2.0, 3.0, 1.0, -0.5]> : tensor<6x{t}>
  %a{i} = stablehlo.convert %x : (tensor<6xf32>) -> tensor<6x{t}>
  %s{i} = stablehlo.add %a{i}, %k{i} : tensor<6x{t}>
  %p{i} = stablehlo.multiply %s{i}, %k{i} : tensor<6x{t}>
  %r{i} = stablehlo.convert %a{i} : (tensor<6x{t}>) -> tensor<6xf32>
  %q{i} = stablehlo.convert %p{i} : (tensor<6x{t}>) -> tensor<6xf32>""")
        rets += [f"%r{i}", f"%q{i}"]
    ty = ", ".join(["tensor<6xf32>"] * len(rets))
    return (
        f"func.func @main(%x: tensor<6xf32>) -> ({ty}) {{\n"
        + "\n".join(body)
        + f"\n  return {', '.join(rets)} : {ty}\n}}"
    )


def _narrow_expected(t, x):
    """Each op's exact result rounded to the type once (the spec's per-op semantics),
    computed with ml_dtypes."""
    ml = _NARROW_FLOAT[t]
    k = np.array([1.5, 0.5, -2.0, 3.0, 1.0, -0.5], np.float64).astype(ml)
    a = x.astype(ml)
    s = (a.astype(np.float64) + k.astype(np.float64)).astype(ml)
    p = (s.astype(np.float64) * k.astype(np.float64)).astype(ml)
    return a.astype(np.float32), p.astype(np.float32)


_X = np.array([0.3, 1.0, 2.7, -1.3, 0.0, 1.25], np.float32)


def test_narrow_float_types_read():
    """``from_stablehlo`` reads every float type of the spec (no internal KeyError)."""
    import converter

    m = converter.from_stablehlo(_narrow_module(list(_NARROW_FLOAT)))
    assert [o.dtype for o in m.signature.outputs] == ["float32"] * 2 * len(_NARROW_FLOAT)


def _check_narrow(backend, types):
    outs = run(_narrow_module(types), backend, _X)
    for i, t in enumerate(types):
        want_a, want_p = _narrow_expected(t, _X)
        expect_eq(outs[2 * i], want_a)
        expect_eq(outs[2 * i + 1], want_p)


def test_narrow_float_arithmetic_torch():
    """The torch backend carries narrow floats in float32, rounding after every op as
    ml_dtypes (and XLA) convert: values agree exactly (torch's own float8 types too, on
    which its CPU kernels do no arithmetic)."""
    _check_narrow("torch", list(_NARROW_FLOAT))


def test_narrow_float_arithmetic_jax():
    _check_narrow("jax", ["f8E4M3FN", "f8E3M4", "f8E4M3", "f8E4M3B11FNUZ", "f4E2M1FN"])


@pytest.mark.parametrize("t", ["f6E2M3FN", "f6E3M2FN"])
def test_float6_refused_by_jax(t):
    """XLA's CPU compiler cannot compile float6 (it aborts on a float6 constant): refused by
    name before anything is compiled."""
    with pytest.raises(UnsupportedOpError, match=r"\[float6_e"):
        run(_narrow_module([t]), "jax", _X)


@pytest.mark.parametrize("t", ["f8E4M3", "f4E2M1FN"])
def test_narrow_float_refused_by_onnx(t):
    with pytest.raises(UnsupportedOpError, match=r"stablehlo.add\[float"):
        run(_narrow_module([t]), "onnx", _X)


def test_narrow_float_rounding_edges_torch():
    """Ties to even, overflow (f8E4M3 has inf; f4E2M1FN saturates), denormals and signed
    zero, against ml_dtypes' conversion."""
    x = [0.0, -0.0, 1e-9, -1e-9, 240.0, 248.0, 1e6, np.inf, -np.inf, np.nan, 1.0625, 1.1875, 7.0, 5.0, 2.5]
    x = np.array(x, np.float32)
    types = ("f8E4M3", "f4E2M1FN", "f8E4M3B11FNUZ")
    body = "\n".join(
        f"""  %a{i} = stablehlo.convert %x : (tensor<15xf32>) -> tensor<15x{t}>
  %r{i} = stablehlo.convert %a{i} : (tensor<15x{t}>) -> tensor<15xf32>"""
        for i, t in enumerate(types)
    )
    ty = ", ".join(["tensor<15xf32>"] * len(types))
    text = f"func.func @main(%x: tensor<15xf32>) -> ({ty}) {{\n{body}\n  return %r0, %r1, %r2 : {ty}\n}}"
    for t, got in zip(types, run(text, "torch", x), strict=True):
        expect_eq(got, x.astype(_NARROW_FLOAT[t]).astype(np.float32))


_F8_ROUND_TRIP = """func.func @main(%x: tensor<3xf8E4M3FN>) -> (tensor<3xf8E4M3FN>, tensor<f8E4M3FN>, tensor<0xf8E4M3FN>) {
  %s = stablehlo.add %x, %x : tensor<3xf8E4M3FN>
  %c = stablehlo.constant dense<1.5> : tensor<f8E4M3FN>
  %d = stablehlo.multiply %c, %c : tensor<f8E4M3FN>
  %e = stablehlo.constant dense<> : tensor<0xf8E4M3FN>
  %f = stablehlo.add %e, %e : tensor<0xf8E4M3FN>
  return %s, %d, %f : tensor<3xf8E4M3FN>, tensor<f8E4M3FN>, tensor<0xf8E4M3FN>
}"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_float8_inputs_outputs_and_empty_operands(backend):
    """float8_e4m3fn in and out (torch returns ``torch.float8_e4m3fn`` tensors), 0-d and
    zero-size operands: 1.5 * 1.5 = 2.25 rounds to 2.25 (exact in e4m3), 240 + 240 to 448's
    neighbour 480 -> NaN (no infinity in e4m3fn)."""
    x = np.array([1.0, 240.0, -0.5], ml_dtypes.float8_e4m3fn)
    s, d, f = run(_F8_ROUND_TRIP, backend, x)
    assert s.dtype == np.dtype(ml_dtypes.float8_e4m3fn) and d.dtype == s.dtype and f.shape == (0,)
    expect_eq(s.astype(np.float32), [2.0, np.nan, -1.0], np.float32)
    expect_eq(d.astype(np.float32), 2.25, np.float32)


_EMPTY_AND_0D = """func.func @main(%a: tensor<i4>, %b: tensor<0xui2>, %c: tensor<f32>) -> (tensor<i4>, tensor<i4>, tensor<0xui2>, tensor<f32>, tensor<0xf32>) {
  %s = stablehlo.add %a, %a : tensor<i4>
  %n = stablehlo.negate %s : tensor<i4>
  %e = stablehlo.multiply %b, %b : tensor<0xui2>
  %p = stablehlo.power %c, %c : tensor<f32>
  %z = stablehlo.convert %b : (tensor<0xui2>) -> tensor<0xf32>
  %q = stablehlo.sqrt %z : tensor<0xf32>
  return %s, %n, %e, %p, %q : tensor<i4>, tensor<i4>, tensor<0xui2>, tensor<f32>, tensor<0xf32>
}"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_zero_d_and_zero_size_operands(backend):
    """0-d and zero-size operands of elementwise ops, sub-byte types included: 5 + 5 wraps to
    -6 in i4, and -(-6) is 6."""
    a = np.array(5, ml_dtypes.int4)
    b = np.zeros((0,), ml_dtypes.uint2)
    c = np.array(2.0, np.float32)
    s, n, e, p, q = run(_EMPTY_AND_0D, backend, a, b, c)
    assert s.shape == () and n.shape == () and e.shape == (0,) and q.shape == (0,)
    expect_eq(s.astype(np.int32), -6, np.int32)
    expect_eq(n.astype(np.int32), 6, np.int32)
    expect_eq(p, 4.0, np.float32)


_CONVERT_INTS = """func.func @main(%a: tensor<3xi32>) -> (tensor<3xui32>, tensor<3xui16>, tensor<3xi8>, tensor<3xf64>, tensor<3xf64>) {
  %u = stablehlo.convert %a : (tensor<3xi32>) -> tensor<3xui32>
  %h = stablehlo.convert %a : (tensor<3xi32>) -> tensor<3xui16>
  %b = stablehlo.convert %a : (tensor<3xi32>) -> tensor<3xi8>
  %uf = stablehlo.convert %u : (tensor<3xui32>) -> tensor<3xf64>
  %hf = stablehlo.convert %h : (tensor<3xui16>) -> tensor<3xf64>
  return %u, %h, %b, %uf, %hf : tensor<3xui32>, tensor<3xui16>, tensor<3xi8>, tensor<3xf64>, tensor<3xf64>
}"""


@backends
def test_convert_between_integer_types_wraps(backend):
    """Spec ``convert`` between integer types keeps the low bits (two's complement), into
    unsigned types torch stores in wider signed ones too, and the wrapped values are what
    later ops compute on (here a conversion to float64)."""
    a = np.array([-1, 70000, -129], np.int32)
    u, h, b, uf, hf = run(_CONVERT_INTS, backend, a)
    expect_eq(u, a.astype(np.uint32))
    expect_eq(h, a.astype(np.uint16))
    expect_eq(b, a.astype(np.int8))
    expect_eq(uf, a.astype(np.uint32).astype(np.float64))
    expect_eq(hf, a.astype(np.uint16).astype(np.float64))
