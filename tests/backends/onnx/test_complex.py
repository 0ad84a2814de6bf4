"""Complex values through the ONNX backend as real pairs (backends/onnx/ops/complex.py), compared
with ``jax.jit`` (XLA CPU) on edge values: zeros of both signs, negative reals on the branch
cuts of sqrt and log, magnitudes near the float range, and infinities and NaNs where XLA's own
result is well-defined."""

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from converter.backends.onnx import realpairs
from jax import lax

import converter
from converter.errors import OpConversionError, UnsupportedOpError

from .helpers import run_onnx, run_session

INF, NAN = np.inf, np.nan
# finite edge values: signed zeros, negative reals (both zero signs), large and small magnitudes
FINITE = [
    0j,
    complex(-0.0, 0.0),
    complex(0.0, -0.0),
    complex(-0.0, -0.0),
    -4 + 0j,
    complex(-4, -0.0),
    complex(-1e-3, 0.0),
    3 + 4j,
    -3 - 4j,
    1 + 1e-4j,
    0.6 + 0.8j,
    1e30 + 1e30j,
    -3e38 + 1e38j,
    1e-30 - 2e-30j,
    2.5e-20 + 7e-21j,
    -0.5 + 2j,
    7 - 1e-6j,
]
# non-finite values, where XLA's CPU results are checked in the tests below
NONFINITE = [
    complex(INF, 1),
    complex(-INF, 1),
    complex(1, INF),
    complex(-1, -INF),
    complex(INF, INF),
    complex(NAN, 1),
    complex(1, NAN),
    complex(NAN, INF),
]


def _pairs(values):
    return [realpairs.to_pairs(v) if np.iscomplexobj(v) else v for v in values]


def _assert_same(fn, *args, rtol, atol=0.0):
    """``fn`` through ONNX and through XLA: same dtypes and shapes; real and imaginary parts
    within ``rtol``/``atol`` separately (NaN where XLA has NaN)."""
    got, want = run_onnx(fn, *args)
    assert [(g.dtype, g.shape) for g in got] == [(w.dtype, w.shape) for w in want]
    for g, w in zip(_pairs(got), _pairs(want), strict=True):
        if np.issubdtype(w.dtype, np.inexact):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


def _c(values, dtype=np.complex64):
    return np.asarray(values, dtype)


# --------------------------------------------------------------------------- elementwise

UNARY = {"exp": jnp.exp, "log": jnp.log, "sqrt": jnp.sqrt, "abs": jnp.abs, "sign": jnp.sign}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_finite_edges(name):
    values = FINITE if name != "exp" else [z for z in FINITE if abs(z.real) < 80]
    _assert_same(UNARY[name], _c(values), rtol=2e-6, atol=1e-37)


@pytest.mark.parametrize("name", ["log", "sqrt", "abs", "sign"])
def test_unary_nonfinite(name):
    """Infinities and NaNs as XLA's CPU backend gives them (abs: NaN beside an infinite
    part; sqrt: (inf, ±inf) on an infinite imaginary part; sign: inf/inf is NaN)."""
    _assert_same(UNARY[name], _c(NONFINITE), rtol=1e-6)


def test_exp_nonfinite():
    # inf * cos(1) and inf * sin(1), 0 at -inf, NaN for an infinite imaginary part
    _assert_same(
        jnp.exp, _c([complex(INF, 1), complex(-INF, 1), complex(1, INF), complex(NAN, 1)]), rtol=1e-6
    )


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_complex128(name):
    rng = np.random.default_rng(0)
    z = rng.normal(size=40) * 10 ** rng.uniform(-5, 5, 40) + 1j * rng.normal(size=40)
    z = np.concatenate([z, np.asarray(FINITE + [1e200 + 1e200j, -1e300 + 1e-300j], np.complex128)])
    if name == "exp":
        z = z[np.abs(z.real) < 700]
    # log's real part near |z| = 1 (0.6 + 0.8j) is within 1e-16 absolute, not relative
    atol = 1e-16 if name == "log" else 1e-300
    _assert_same(UNARY[name], z.astype(np.complex128), rtol=1e-13, atol=atol)


def _binary_edges(dtype):
    # products and quotients within the float32 range (an overflowing product's parts depend
    # on XLA's FMA contraction order: not compared)
    a = [1 + 1j, 1e30 + 1e30j, 1e-30 + 1e-30j, 1 + 0j, 3 + 4j, -2 + 5j, 1e15 - 3e15j, 0j, 7 + 0j, -1 - 1j]
    b = [
        1e30 + 1e30j,
        1 + 1j,
        1e30 + 1e-30j,
        2 - 1j,
        1e-30 + 2e-32j,
        -3e-20 + 1e-20j,
        4e19 + 1e19j,
        5 + 0j,
        0 + 7j,
        1e-3 + 2e3j,
    ]
    return _c(a, dtype), _c(b, dtype)


@pytest.mark.parametrize(
    "fn",
    [jnp.add, jnp.subtract, jnp.multiply, jnp.divide, jnp.equal, jnp.not_equal],
    ids=lambda f: f.__name__,
)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["c64", "c128"])
def test_binary(fn, dtype):
    a, b = _binary_edges(dtype)
    if fn in (jnp.equal, jnp.not_equal):
        b = np.where(np.arange(len(a)) % 3 == 0, a, b).astype(dtype)
        b[1] = complex(a[1].real, -a[1].imag)  # same real part, different imaginary
    _assert_same(fn, a, b, rtol=2e-6 if dtype == np.complex64 else 1e-14, atol=1e-37)


def test_divide_nonfinite():
    """Zero divisors give ``copysign(inf, c) * (a, b)``, infinite dividends infinite parts,
    infinite divisors zeros, as XLA (C99 Annex G's recovery)."""
    a = _c([1 + 0j, complex(INF, 1), 1 + 1j, 0j, 1 + 1j, -2 + 1j, complex(1, -INF)])
    b = _c([0j, 1 + 1j, complex(INF, 1), 0j, complex(NAN, 0), complex(-0.0, 0.0), complex(-INF, 3)])
    _assert_same(jnp.divide, a, b, rtol=1e-6)


def test_multiply_large_and_nonfinite():
    a = _c([1e30 + 1e30j, complex(INF, 1), 1 + 1j, -2e-10 + 3e-10j])
    b = _c([1 + 1j, 1 + 1j, complex(NAN, 0), 1e-10 + 1e-10j])
    _assert_same(jnp.multiply, a, b, rtol=1e-6)


def test_multiply_cancelling_parts_are_exact():
    """complex64 products are formed in float64, so parts that cancel come out as the exact
    product rounded once (XLA's FMA-contracted float32 gives -1.25e29 for the imaginary part
    of (3e18 - 3e18j)(3e18 + 3e18j), which is 0)."""
    a = _c([3e18 - 3e18j, 1.1 + 1.3j, 1e-3 + 7j])
    b = _c([3e18 + 3e18j, 1.3 + 1.1j, 7 + 1e-3j])
    (got,), _ = run_onnx(jnp.multiply, a, b)
    exact = (a.astype(np.complex128) * b.astype(np.complex128)).astype(np.complex64)
    np.testing.assert_array_equal(realpairs.to_pairs(got), realpairs.to_pairs(exact))


def test_parts_and_construction():
    z = _c(FINITE)
    x = np.linspace(-3, 3, len(FINITE)).astype(np.float32)
    _assert_same(lambda z: (jnp.real(z), jnp.imag(z), jnp.conj(z), jnp.angle(z)), z, rtol=1e-6)
    _assert_same(lambda x, y: lax.complex(x, y), x, x[::-1].copy(), rtol=0)
    _assert_same(lambda x: x.astype(jnp.complex64) * (1 + 2j), x, rtol=1e-6)
    _assert_same(lambda z: z.astype(jnp.complex128), z, rtol=0)


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
def test_convert_complex_to_real_takes_the_real_part():
    z = _c([1.5 - 2j, -3.25 + 1j, 0j])
    _assert_same(lambda z: lax.convert_element_type(z, jnp.float32), z, rtol=0)
    _assert_same(lambda z: lax.convert_element_type(z, jnp.int32), z, rtol=0)


# --------------------------------------------------------------------------- data movement


def test_shape_ops():
    rng = np.random.default_rng(1)
    z = (rng.normal(size=(2, 3, 4)) + 1j * rng.normal(size=(2, 3, 4))).astype(np.complex64)

    def fn(z):
        a = jnp.transpose(z, (2, 0, 1)).reshape(4, 6)
        b = jnp.concatenate([z[:, 1:, ::2], jnp.flip(z, 1)[:, :2, 1:3]], axis=1)
        c = jnp.pad(z, ((0, 1), (2, 0), (1, 1)), constant_values=1 - 2j)
        d = lax.pad(z, jnp.complex64(3j), [(0, 0, 1), (1, -1, 0), (0, 0, 2)])
        e = jnp.broadcast_to(z[:, :1, :], (5, 2, 3, 4))
        f = jnp.where(jnp.abs(z) > 1, z, 2 * z)
        return a, b, c, d, e, f

    _assert_same(fn, z, rtol=1e-6)


def test_indexing_ops():
    rng = np.random.default_rng(2)
    z = (rng.normal(size=(5, 4)) + 1j * rng.normal(size=(5, 4))).astype(np.complex64)
    idx = np.array([4, 0, 2, 2], np.int32)
    start = np.array(3, np.int64)

    def fn(z, idx, start):
        g = z[idx]
        s = lax.dynamic_slice(z, (start, 1), (2, 3))
        u = lax.dynamic_update_slice(z, jnp.full((2, 2), 5 - 1j, z.dtype), (start, start))
        sc = z.at[idx, 1].add(1 + 1j)
        return g, s, u, sc

    _assert_same(fn, z, idx, start, rtol=1e-6)


@pytest.mark.xla_defaults
def test_reductions():
    rng = np.random.default_rng(3)
    z = (rng.normal(size=(3, 5, 4)) + 1j * rng.normal(size=(3, 5, 4))).astype(np.complex64)
    # the products of 12 and 5 values are padded with ones to 16 and 8 (with one and no kept dimension)
    _assert_same(
        lambda z: (jnp.sum(z, 1), jnp.sum(z), jnp.prod(z, (0, 2)), jnp.prod(z[0, 0]), jnp.prod(z[0, :, 0])),
        z,
        rtol=1e-5,
    )


def test_complex_reduce_with_another_body_is_refused():
    """A complex reduce whose body is neither add nor multiply (here subtract, which XLA
    folds in its own order) is refused by name, not converted."""
    z = _c([1 + 1j, 2 - 1j, 3j])
    text = jax.jit(lambda z: lax.reduce(z, np.complex64(0), lax.sub, (0,))).lower(z).as_text()
    with pytest.raises(OpConversionError, match="reduce with a general body on complex values"):
        converter.from_stablehlo(text).to_onnx()


def test_complex_product_with_an_init():
    """The product times the init (not one: one more complex product)."""
    z = _c([1 + 1j, 2 - 1j, 0.5j, -1.5 + 0.25j])
    _assert_same(lambda z: lax.reduce(z, np.complex64(2 + 1j), lax.mul, (0,)), z, rtol=1e-6)


_SYM = jax.ShapeDtypeStruct  # shorthand for the symbolic-shape forms below


def _compare_lt_text():
    c = "tensor<3xcomplex<f32>>"
    return f"""func.func public @main(%a: {c}, %b: {c}) -> tensor<3xi1> {{
  %0 = stablehlo.compare LT, %a, %b : ({c}, {c}) -> tensor<3xi1>
  return %0 : tensor<3xi1>
}}"""


_PRODUCT_TEXT = """func.func public @main(%a: tensor<?x3xcomplex<f32>>) -> tensor<?xcomplex<f32>> {
  %one = stablehlo.constant dense<(1.0, 0.0)> : tensor<complex<f32>>
  %0 = stablehlo.reduce(%a init: %one) applies stablehlo.multiply across dimensions = [1]
    : (tensor<?x3xcomplex<f32>>, tensor<complex<f32>>) -> tensor<?xcomplex<f32>>
  return %0 : tensor<?xcomplex<f32>>
}"""

#: complex forms the backend has no exact rule for: form -> (module, message)
_REFUSED = {
    "scatter multiply": (
        lambda: converter.from_jax(lambda z: z.at[1].multiply(2j), _SYM((3,), np.complex64)),
        "scatter with a mul body on complex values",
    ),
    "compare LT": (lambda: converter.from_stablehlo(_compare_lt_text()), "compare LT on complex values"),
    "product on a dynamic shape": (
        lambda: converter.from_stablehlo(_PRODUCT_TEXT),
        "complex product reduce on dynamic shapes",
    ),
}


@pytest.mark.parametrize("form", list(_REFUSED))
def test_complex_forms_without_an_exact_rule_are_refused_by_name(form):
    module, message = _REFUSED[form]
    with pytest.raises(OpConversionError, match=message):
        module().to_onnx()


def test_token_values_are_not_complex():
    """An op with a token result is no complex op: refused as an op without a rule."""
    text = """func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.after_all : !stablehlo.token
  return %a : tensor<3xf32>
}"""
    with pytest.raises(UnsupportedOpError, match="stablehlo.after_all"):
        converter.from_stablehlo(text).to_onnx()


def test_empty_complex_result():
    z = _c([1 + 1j, 2 - 1j])
    _assert_same(lambda z: (z[:0] * 2, jnp.zeros((0, 3), jnp.complex64)), z, rtol=0)


# --------------------------------------------------------------------------- contractions


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["c64", "c128"])
def test_batched_matmul(dtype):
    rng = np.random.default_rng(4)
    a = (rng.normal(size=(3, 4, 5)) + 1j * rng.normal(size=(3, 4, 5))).astype(dtype)
    b = (rng.normal(size=(3, 5, 2)) + 1j * rng.normal(size=(3, 5, 2))).astype(dtype)
    rtol = 1e-5 if dtype == np.complex64 else 1e-13
    _assert_same(jnp.matmul, a, b, rtol=rtol, atol=rtol)
    real = b.real.copy()
    _assert_same(jnp.matmul, a, real, rtol=rtol, atol=rtol)
    _assert_same(
        lambda x, y: jnp.einsum("bij,bjk->bki", x, y),
        real.transpose(0, 2, 1).copy(),
        a.transpose(0, 2, 1).copy(),
        rtol=rtol,
        atol=rtol,
    )


# --------------------------------------------------------------------------- fft

FFTS = {
    "fft": jnp.fft.fft,
    "ifft": jnp.fft.ifft,
    "rfft": lambda z: jnp.fft.rfft(z.real),
    "irfft_even": lambda z: jnp.fft.irfft(z),
    "irfft_odd": lambda z: jnp.fft.irfft(z, n=2 * z.shape[-1] - 1),
    "fft2": jnp.fft.fft2,
    "ifft2": jnp.fft.ifft2,
    "rfftn": lambda z: jnp.fft.rfftn(z.real),
    "irfftn": jnp.fft.irfftn,
    "fft_n": lambda z: jnp.fft.fft(z, n=7),
}


@pytest.mark.parametrize("n", [8, 6], ids=["pow2", "n6"])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["c64", "c128"])
@pytest.mark.parametrize("name", list(FFTS))
def test_fft(name, dtype, n):
    """Every fft kind, 1-D and over two axes, on lengths that are powers of two (ONNX
    ``DFT``) and not (a DFT matrix): within float rounding of XLA's ducc FFT, relative to
    the largest output."""
    rng = np.random.default_rng(5)
    z = (rng.normal(size=(2, 3, n)) + 1j * rng.normal(size=(2, 3, n))).astype(dtype)
    got, want = run_onnx(FFTS[name], z)
    assert [(g.dtype, g.shape) for g in got] == [(w.dtype, w.shape) for w in want]
    eps = 4e-7 if dtype == np.complex64 else 1e-15
    scale = np.abs(want[0]).max()
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=20 * eps * scale)


def test_fft_at_opset_20_takes_the_axis_as_input():
    z = (np.arange(24).reshape(3, 8) * (1 - 0.5j)).astype(np.complex64)
    for fn in (jnp.fft.fft2, jnp.fft.irfft, lambda z: jnp.fft.rfft(z.real)):
        got, want = run_onnx(fn, z, opset=20)
        np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-5 * np.abs(want[0]).max())


def test_long_fft_that_is_no_power_of_two_is_refused():
    z = np.ones(2049, np.complex64)
    module = converter.from_jax(jnp.fft.fft, z)
    with pytest.raises(converter.errors.OpConversionError, match="length 2049"):
        module.to_onnx()


def test_long_fft_of_a_power_of_two_takes_the_onnx_dft():
    """A power of two over the DFT matrix's limit (4096 > 2048) is ONNX ``DFT``'s, exact
    there: converted, not refused as a length that is no power of two."""
    z = np.exp(1j * np.arange(4096) ** 2 / 7.0).astype(np.complex64)
    got, want = run_onnx(jnp.fft.fft, z)
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=20 * 4e-7 * np.abs(want[0]).max())


# --------------------------------------------------------------------------- boundary


def test_boundary_is_real_pairs_and_recorded():
    z = _c([[1 + 2j, 3 - 1j]])
    module = converter.from_jax(lambda z, x: (z * x, jnp.abs(z), x + 1), z, np.ones(2, np.float32))
    model = module.to_onnx()
    ins = {i.name: i.type.tensor_type for i in model.graph.input}
    outs = [o.type.tensor_type for o in model.graph.output]
    assert ins["args[0]"].elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_value for d in ins["args[0]"].shape.dim] == [1, 2, 2]
    assert outs[0].elem_type == onnx.TensorProto.FLOAT and len(outs[0].shape.dim) == 3
    record = realpairs.complex_as_real({p.key: p.value for p in model.metadata_props})
    names = [o.name for o in model.graph.output]
    assert record == {"inputs": ["args[0]"], "outputs": [names[0]], "initializers": []}
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = run_session(sess, [z, np.ones(2, np.float32) * 2])
    assert got[0].dtype == np.complex64
    np.testing.assert_allclose(got[0], z * 2)
    np.testing.assert_allclose(got[1], np.abs(z), rtol=1e-6)


def test_complex_parameters_are_real_pair_initializers():
    w = _c([1 + 1j, 2 - 3j, -1j])
    module = converter.from_jax(lambda p, x: p["w"] * x, np.arange(3, dtype=np.float32), params={"w": w})
    model = module.to_onnx()
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    record = realpairs.complex_as_real({p.key: p.value for p in model.metadata_props})
    assert record["initializers"] and all(inits[n].shape == (3, 2) for n in record["initializers"])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = run_session(sess, [np.arange(3, dtype=np.float32)])
    np.testing.assert_allclose(got, w * np.arange(3))


@pytest.mark.parametrize("complex_lhs", [True, False], ids=["complex_real", "real_complex"])
def test_dot_of_a_complex_and_a_real_operand(complex_lhs):
    """StableHLO's ``dot_general`` of mixed element types (JAX promotes first; a module may
    not): two real contractions."""
    rng = np.random.default_rng(5)
    z = (rng.normal(size=(2, 3)) + 1j * rng.normal(size=(2, 3))).astype(np.complex64)
    r = rng.normal(size=(3, 2)).astype(np.float32)
    a, b = (z, r) if complex_lhs else (r.T.copy(), z.T.copy())
    c, f = "tensor<2x3xcomplex<f32>>", "tensor<3x2xf32>"
    lhs, rhs = (c, f) if complex_lhs else ("tensor<2x3xf32>", "tensor<3x2xcomplex<f32>>")
    out = "tensor<2x2xcomplex<f32>>"
    text = f"""func.func public @main(%a: {lhs}, %b: {rhs}) -> {out} {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : ({lhs}, {rhs}) -> {out}
  return %0 : {out}
}}"""
    model = converter.from_stablehlo(text).to_onnx()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = run_session(sess, [a, b])
    np.testing.assert_allclose(got, a.astype(np.complex128) @ b, rtol=1e-5)


def test_irfft_of_length_zero_is_empty():
    """``IRFFT`` with ``fft_length = [0]``, the one length with fewer output than input
    elements: an empty result."""
    text = """func.func public @main(%a: tensor<2x1xcomplex<f32>>) -> tensor<2x0xf32> {
  %0 = stablehlo.fft %a, type = IRFFT, length = [0] : (tensor<2x1xcomplex<f32>>) -> tensor<2x0xf32>
  return %0 : tensor<2x0xf32>
}"""
    model = converter.from_stablehlo(text).to_onnx()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = run_session(sess, [np.ones((2, 1), np.complex64)])
    assert got.shape == (2, 0) and got.dtype == np.float32


def test_ops_without_a_real_pair_rule_are_all_named():
    z = _c([1 + 1j])
    module = converter.from_jax(lambda z: jnp.tanh(z) + z**z + jnp.cos(z.real), z)
    with pytest.raises(UnsupportedOpError) as e:
        module.to_onnx()
    names = {m.name for m in e.value.missing}
    assert {"stablehlo.power[complex]", "stablehlo.tanh[complex]"} <= names, names
    assert "stablehlo.cosine" not in names


def test_from_onnx_reads_real_pairs_back_as_complex():
    z = _c([1 + 2j, -3 + 0.5j])
    module = converter.from_jax(lambda z: (jnp.fft.fft(z), jnp.abs(z)), z)
    back = converter.from_onnx(module.to_onnx())
    assert [(s.dtype, tuple(s.shape)) for s in back.signature.inputs] == [("complex64", (2,))]
    got = back.to_jax()(z)
    np.testing.assert_allclose(np.asarray(got[0]), np.fft.fft(z), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got[1]), np.abs(z), rtol=1e-6)


def _dynamic_complex_text() -> tuple[str, list[str]]:
    """A module applying each complex rule declared dynamic to ``tensor<?xcomplex<f32>>``
    operands; (text, result types)."""
    c, f, b = "tensor<?xcomplex<f32>>", "tensor<?xf32>", "tensor<?xi1>"
    ops = [f"stablehlo.{o} %z : {c}" for o in ("negate", "sign", "exponential", "sqrt", "log")]
    ops += [f"stablehlo.{o} %z, %w : {c}" for o in ("add", "subtract", "multiply", "divide")]
    ops += [
        f"stablehlo.real %z : ({c}) -> {f}",
        f"stablehlo.imag %z : ({c}) -> {f}",
        f"stablehlo.abs %z : ({c}) -> {f}",
        f"stablehlo.complex %x, %x : {c}",
        f"stablehlo.convert %x : ({f}) -> {c}",
        f"stablehlo.convert %z : ({c}) -> {b}",
        f"stablehlo.compare EQ, %z, %w : ({c}, {c}) -> {b}",
        f"stablehlo.select %p, %z, %w : {b}, {c}",
        f"stablehlo.reverse %z, dims = [0] : {c}",
        f"stablehlo.dot_general %z, %w, contracting_dims = [0] x [0] : ({c}, {c}) -> tensor<complex<f32>>",
    ]
    types = [o.rsplit(" ", 1)[-1] for o in ops]
    sig = f"%z: {c}, %w: {c}, %x: {f}, %p: {b}"
    lines = [f"func.func public @main({sig}) -> ({', '.join(types)}) {{"]
    lines += [f"  %r{k} = {o}" for k, o in enumerate(ops)]
    lines += [f"  return {', '.join(f'%r{k}' for k in range(len(ops)))} : {', '.join(types)}", "}"]
    return "\n".join(lines), types


def test_complex_rules_on_a_dynamic_dimension():
    """Each complex rule declared dynamic converts on operands of a dynamic dimension (no
    DynamicShapeError): complex results are real pairs ``[?, 2]``, the others keep their
    type. (Values: the static tests above; the simplifier is skipped to keep this cheap.)"""
    text, types = _dynamic_complex_text()
    model = converter.from_stablehlo(text).to_onnx(optimize=False)
    outputs = [v.type.tensor_type for v in model.graph.output]
    elem = {
        "complex<f32>": onnx.TensorProto.FLOAT,
        "f32": onnx.TensorProto.FLOAT,
        "i1": onnx.TensorProto.BOOL,
    }
    for t, out in zip(types, outputs, strict=True):
        ety = t.removeprefix("tensor<").removeprefix("?x").removesuffix(">")
        assert out.elem_type == elem[ety], (t, out)
        dims = [d.dim_value if d.HasField("dim_value") else "?" for d in out.shape.dim]
        assert dims == ["?"] * ("?x" in t) + [2] * ety.startswith("complex"), (t, dims)


_COMPARE_AND_TRUTH = """func.func public @main(%z: tensor<5xcomplex<f32>>, %w: tensor<5xcomplex<f32>>)
    -> (tensor<5xi1>, tensor<5xi1>, tensor<5xi1>) {
  %0 = stablehlo.compare EQ, %z, %w : (tensor<5xcomplex<f32>>, tensor<5xcomplex<f32>>) -> tensor<5xi1>
  %1 = stablehlo.compare NE, %z, %w : (tensor<5xcomplex<f32>>, tensor<5xcomplex<f32>>) -> tensor<5xi1>
  %2 = stablehlo.convert %z : (tensor<5xcomplex<f32>>) -> tensor<5xi1>
  return %0, %1, %2 : tensor<5xi1>, tensor<5xi1>, tensor<5xi1>
}"""


def test_complex_compare_and_convert_to_bool():
    """StableHLO spec: complex ``compare`` EQ holds when both parts are equal, NE when either
    differs; ``convert`` to ``i1`` is true when either part is nonzero (NaN too), false for
    zeros of either sign. Against NumPy."""
    z = _c([1 + 2j, 1 + 3j, 5 + 2j, complex(-0.0, 0.0), complex(0.0, NAN)])
    w = _c([1 + 2j, 1 + 2j, 1 + 2j, 0j, 1j])
    sess = ort.InferenceSession(
        converter.from_stablehlo(_COMPARE_AND_TRUTH).to_onnx().SerializeToString(),
        providers=["CPUExecutionProvider"],
    )
    eq, ne, truth = run_session(sess, (z, w))
    np.testing.assert_array_equal(eq, z == w)
    np.testing.assert_array_equal(ne, z != w)
    np.testing.assert_array_equal(truth, z.astype(bool))
    assert truth.tolist() == [True, True, True, False, True]


def test_real_pairs_helpers_keep_the_layout_and_dtypes():
    """``to_pairs``/``from_pairs`` (``torch.view_as_real``'s layout: real then imaginary on a
    new last axis) keep the precision; other values pass unchanged; the metadata record has
    every kind, empty when absent."""
    z = np.array([[1 + 2j, -3.5j]], np.complex64)
    pairs = realpairs.to_pairs(z)
    assert pairs.dtype == np.float32 and pairs.shape == (1, 2, 2)
    np.testing.assert_array_equal(pairs, [[[1, 2], [0, -3.5]]])
    back = realpairs.from_pairs(pairs)
    assert back.dtype == np.complex64 and back.shape == (1, 2)
    np.testing.assert_array_equal(back, z)
    assert realpairs.from_pairs(realpairs.to_pairs(np.complex128(1 - 1j))) == np.complex128(1 - 1j)
    assert realpairs.from_pairs(np.zeros((2,), np.float64)).dtype == np.complex128
    assert realpairs.to_pairs(2j).dtype == np.float64 and realpairs.to_pairs(2j).tolist() == [0.0, 2.0]
    real = np.ones(3, np.float32)
    assert realpairs.to_pairs(real) is real and realpairs.to_pairs(1.5) == 1.5
    for bad in (
        np.zeros((2, 3), np.float32),
        np.zeros((2,), np.int32),
        np.float32(1),
        np.zeros((), np.float64),  # 0-d: no last axis (a ValueError, not an IndexError)
        np.zeros((2, 2), np.float16),
    ):
        with pytest.raises(ValueError, match="not a real-pair array"):
            realpairs.from_pairs(bad)
    assert realpairs.complex_as_real({}) == {"inputs": [], "outputs": [], "initializers": []}
    record = realpairs.complex_as_real({realpairs.COMPLEX_AS_REAL_KEY: '{"outputs": ["y"]}'})
    assert record == {"inputs": [], "outputs": ["y"], "initializers": []}
