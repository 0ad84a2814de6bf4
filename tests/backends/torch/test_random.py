"""stablehlo.rng_bit_generator in the torch backend: state and bits identical to XLA on CPU."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch
from jax import lax
from jax.extend import backend as jax_backend
from jaxlib import xla_client

import converter
from converter.errors import OpConversionError

from .helpers import numpy_of

# high bits set in every word, so unsigned carries and sign bits are exercised
KEY = np.array([0xDEADBEEF, 0xFFFFFFFF, 0xFFFFFFFE, 0x80000001], np.uint32)
# odd, even, scalar, unit, empty and multi-dimensional shapes (first even dim / largest dim splits)
SHAPES = [(), (1,), (7,), (8,), (3, 5), (5, 3, 2), (3, 1, 5), (0,)]
ALGORITHMS = [
    lax.RandomAlgorithm.RNG_DEFAULT,
    lax.RandomAlgorithm.RNG_THREE_FRY,
    lax.RandomAlgorithm.RNG_PHILOX,
]


#: The shapes for the other dtypes (each shape costs seconds of torch tracing): odd, even
#: split, multi-dimensional, empty.
SHORT_SHAPES = [(7,), (3, 5), (0,)]


def _chained(dtype, algorithm):
    """Shapes from one key (all of SHAPES for uint32, SHORT_SHAPES for the other widths),
    each call consuming the previous output state."""
    shapes = SHAPES if dtype == jnp.uint32 else SHORT_SHAPES

    def f(key):
        outs = []
        for shape in shapes:
            key, bits = lax.rng_bit_generator(key, shape, dtype, algorithm=algorithm)
            outs.append(bits)
        return key, outs

    return f


def _assert_identical(got, want):
    got = [numpy_of(g) for g in jax.tree_util.tree_leaves(got, is_leaf=lambda t: isinstance(t, torch.Tensor))]
    want = [np.asarray(w) for w in jax.tree_util.tree_leaves(want)]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("algorithm", ALGORITHMS, ids=str)
@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.uint16, jnp.uint32, jnp.uint64], ids=lambda d: d.__name__)
def test_bits_and_state_match_xla(algorithm, dtype):
    f = _chained(dtype, algorithm)
    module = converter.from_jax(f, KEY).to_torch()
    _assert_identical(module(torch.from_numpy(KEY.copy())), jax.jit(f)(KEY))


def _run_xla(text: str, *args: np.ndarray) -> list[np.ndarray]:
    """Compile StableHLO ``text`` with XLA CPU and run it (for forms JAX does not emit)."""
    backend = jax_backend.get_backend("cpu")
    devices = xla_client.DeviceList(tuple(backend.devices()[:1]))
    exe = backend.compile_and_load(text, devices, xla_client.CompileOptions())
    return [np.asarray(o) for o in exe.execute([jax.device_put(a) for a in args])]


_OTHER_FORMS = [
    # (state size, algorithm, result element type): a 3-word Philox state, signed and float results
    (3, "PHILOX", "ui32"), (3, "DEFAULT", "ui64"), (3, "PHILOX", "ui8"),
    (2, "PHILOX", "i32"), (2, "THREE_FRY", "f32"), (2, "PHILOX", "i8"), (2, "THREE_FRY", "f16"),
    (2, "PHILOX", "bf16"), (2, "THREE_FRY", "i64"), (3, "PHILOX", "f64"), (2, "THREE_FRY", "i16"),
]  # fmt: skip
_NP = {
    "ui8": np.uint8, "ui32": np.uint32, "ui64": np.uint64, "i8": np.int8, "i16": np.int16, "i32": np.int32,
    "i64": np.int64, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
}  # fmt: skip


def _module_text(k: int, algorithm: str, ety: str, shape=(3, 5)) -> str:
    dims = "x".join(map(str, shape))
    st, out = f"tensor<{k}xui64>", f"tensor<{dims}x{ety}>"
    return f"""
func.func public @main(%arg0: {st}) -> ({st}, {out}) {{
  %s, %o = stablehlo.rng_bit_generator %arg0, algorithm = {algorithm} : ({st}) -> ({st}, {out})
  return %s, %o : {st}, {out}
}}"""


@pytest.mark.parametrize("form", _OTHER_FORMS, ids=lambda f: "-".join(map(str, f)))
def test_three_word_state_and_typed_views_match_xla(form):
    """Forms JAX never emits, compiled directly by XLA: XLA returns the unsigned bits of the
    result's width, which the converted result must hold bit for bit."""
    k, algorithm, ety = form
    text = _module_text(k, algorithm, ety)
    state = np.array([0xFFFFFFFFFFFFFFFE, 0x7FFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF][:k], np.uint64)
    want_state, want_bits = _run_xla(text, state)
    module = converter.from_stablehlo(text).to_torch()
    got_state, got_bits = (numpy_of(t) for t in module(torch.from_numpy(state.copy())))
    np.testing.assert_array_equal(got_state.view(np.uint64), want_state)
    assert got_bits.dtype == _NP[ety] and got_bits.shape == (3, 5)
    np.testing.assert_array_equal(got_bits.view(want_bits.dtype), want_bits)


def test_unsupported_state_raises():
    """Threefry takes exactly a ui64[2] state (StableHLO spec, rng_bit_generator)."""
    module = converter.from_stablehlo(_module_text(3, "THREE_FRY", "ui32"))
    with pytest.raises(OpConversionError, match="rng_bit_generator"):
        module.to_torch()


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_jax_random_program_under_rbg(impl):
    """A jax.random program with the rbg PRNG implementations (bits from rng_bit_generator;
    split/fold_in through it too for unsafe_rbg) converted end to end."""

    def f(key_data):
        key = jax.random.wrap_key_data(key_data, impl=impl)
        k1, k2 = jax.random.split(key)
        return (
            jax.random.bits(key, (5,), jnp.uint32),
            jax.random.randint(k2, (6,), 0, 100),
            jax.random.uniform(k1, (3, 7), jnp.float32),
            jax.random.normal(k2, (9,), jnp.float32),
            jax.random.key_data(jax.random.fold_in(key, 3)),
        )

    key_data = np.asarray(jax.random.key_data(jax.random.key(42, impl=impl)))
    module = converter.from_jax(f, key_data)
    assert "stablehlo.rng_bit_generator" in module.text()
    got = [numpy_of(t) for t in module.to_torch()(torch.from_numpy(key_data.copy()))]
    want = [np.asarray(w) for w in jax.jit(f)(key_data)]
    for i in (0, 1, 2, 4):  # bits, integers, uniform floats and keys: identical
        np.testing.assert_array_equal(got[i], want[i])
    np.testing.assert_allclose(got[3], want[3], rtol=1e-6, atol=1e-6)  # normal: erf_inv rounding


def test_exports_and_compiles():
    """torch.export keeps the generator; torch.compile traces it (aot_eager here: inductor also
    matches, but compiling the ~400-node graph costs over a minute on a small machine)."""
    f = lambda key: lax.rng_bit_generator(key, (3, 4), jnp.uint32, algorithm=lax.RandomAlgorithm.RNG_PHILOX)  # noqa: E731
    module = converter.from_jax(f, KEY).to_torch()
    key = torch.from_numpy(KEY.copy())
    want = [numpy_of(t) for t in module(key)]
    exported = torch.export.export(module, (key,))
    for g, w in zip(exported.module()(key), want, strict=True):
        np.testing.assert_array_equal(numpy_of(g), w)
    for g, w in zip(torch.compile(module, backend="aot_eager")(key), want, strict=True):
        np.testing.assert_array_equal(numpy_of(g), w)


def test_threefry_words_match_jax_where_a_word_is_all_ones():
    """Threefry-2x32 against ``jax.extend.random.threefry_2x32`` on counters whose words are
    all ones (a rotation of 0xFFFFFFFF) or zero, besides random ones."""
    import torch
    from converter.backends.torch.ops.random import threefry2x32
    from jax.extend.random import threefry_2x32

    rng = np.random.default_rng(0)
    words = [0, 0xFFFFFFFF, 0x80000000, *rng.integers(0, 2**32, 5).tolist()]
    x0, x1 = np.array(words, np.uint32), np.array(words[::-1], np.uint32)
    for key in ([0, 0], [0xFFFFFFFF, 7], rng.integers(0, 2**32, 2).tolist()):
        want = np.asarray(threefry_2x32(np.array(key, np.uint32), np.concatenate([x0, x1])))
        as_words = lambda a: torch.tensor(a.astype(np.int64))  # noqa: E731
        got = threefry2x32((as_words(x0), as_words(x1)), tuple(torch.tensor(k) for k in key))
        np.testing.assert_array_equal(np.concatenate([g.numpy() for g in got]), want.astype(np.int64))
