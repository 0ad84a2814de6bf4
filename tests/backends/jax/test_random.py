"""stablehlo.rng_bit_generator through the JAX backend: the same XLA bits as the source."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import converter

from .helpers import assert_same

KEY = np.array([0xDEADBEEF, 0xFFFFFFFF, 0xFFFFFFFE, 0x80000001], np.uint32)


@pytest.mark.parametrize("algorithm", ["RNG_DEFAULT", "RNG_THREE_FRY", "RNG_PHILOX"])
def test_bits_and_state(algorithm):
    alg = getattr(lax.RandomAlgorithm, algorithm)

    def f(key):
        outs = []
        for shape, dtype in [((7,), jnp.uint8), ((3, 5), jnp.uint16), ((), jnp.uint32), ((5, 3), jnp.uint64)]:
            key, bits = lax.rng_bit_generator(key, shape, dtype, algorithm=alg)
            outs.append(bits)
        return key, outs

    assert_same(f, KEY)


def test_float_result_holds_the_unsigned_bits():
    """A float result is the bits XLA generates for the unsigned type of the same width."""
    st = "tensor<2xui64>"
    text = f"""
func.func public @main(%arg0: {st}) -> ({st}, tensor<5xf32>, tensor<5xui32>) {{
  %s, %o = stablehlo.rng_bit_generator %arg0, algorithm = PHILOX : ({st}) -> ({st}, tensor<5xf32>)
  %t, %u = stablehlo.rng_bit_generator %arg0, algorithm = PHILOX : ({st}) -> ({st}, tensor<5xui32>)
  return %s, %o, %u : {st}, tensor<5xf32>, tensor<5xui32>
}}"""
    state = np.array([3, 0xFFFFFFFFFFFFFFFF], np.uint64)
    new_state, floats, bits = (np.asarray(x) for x in converter.from_stablehlo(text).to_jax()(state))
    assert floats.dtype == np.float32
    np.testing.assert_array_equal(floats.view(np.uint32), bits)
    assert new_state.tolist() == [3, 1]  # Philox with a 2-word state: the low counter word wraps


def test_bfloat16_result_holds_the_uint16_bits():
    """A bfloat16 result is generated too (only bool and complex results are refused), as the
    bits of uint16: a dtype check by order rather than equality would refuse it."""
    st = "tensor<2xui64>"
    text = f"""
func.func public @main(%arg0: {st}) -> (tensor<6xbf16>, tensor<6xui16>) {{
  %s, %o = stablehlo.rng_bit_generator %arg0, algorithm = THREE_FRY : ({st}) -> ({st}, tensor<6xbf16>)
  %t, %u = stablehlo.rng_bit_generator %arg0, algorithm = THREE_FRY : ({st}) -> ({st}, tensor<6xui16>)
  return %o, %u : tensor<6xbf16>, tensor<6xui16>
}}"""
    state = np.array([7, 11], np.uint64)
    halves, bits = (np.asarray(x) for x in converter.from_stablehlo(text).to_jax()(state))
    assert halves.dtype.name == "bfloat16"
    np.testing.assert_array_equal(halves.view(np.uint16), bits)
    assert len(set(bits.tolist())) > 1


@pytest.mark.parametrize(("state", "values"), [("3xui64", [1, 2, 3]), ("4xui32", [1, 2, 3, 4])])
def test_state_other_than_two_uint64_words_refused(state, values):
    """The spec lets a Philox state hold three ``ui64`` words (and a producer may give other
    state types); ``jax.lax.rng_bit_generator`` takes only ``ui64[2]``: refused by name, with
    the state's type, never generated from another state."""
    st = f"tensor<{state}>"
    text = f"""
func.func public @main(%arg0: {st}) -> tensor<4xui32> {{
  %s, %o = stablehlo.rng_bit_generator %arg0, algorithm = PHILOX : ({st}) -> ({st}, tensor<4xui32>)
  return %o : tensor<4xui32>
}}"""
    arr = np.array(values, np.uint64 if "ui64" in state else np.uint32)
    with pytest.raises(
        converter.OpConversionError, match=r"rng_bit_generator with state .*JAX lowers only ui64\[2\]"
    ):
        converter.from_stablehlo(text).to_jax()(arr)


def test_rng_argument_forms():
    """``rng=`` takes an int seed (NumPy's too), a typed ``jax.random.key`` or a raw
    ``uint32[2]`` key, each as the raw key JAX makes of it; another shape or dtype is refused,
    naming what it got."""
    import jax
    from converter.backends.jax.function import raw_key

    from converter import SignatureMismatchError

    np.testing.assert_array_equal(raw_key(7), jax.random.PRNGKey(7))
    np.testing.assert_array_equal(raw_key(np.int64(3)), jax.random.PRNGKey(3))
    np.testing.assert_array_equal(raw_key(jax.random.key(5)), jax.random.key_data(jax.random.key(5)))
    raw = np.array([1, 2], np.uint32)
    assert raw_key(raw) is raw
    for bad, shown in [(np.zeros(3, np.uint32), r"uint32\[3\]"), (np.zeros(2, np.int32), r"int32\[2\]")]:
        with pytest.raises(
            SignatureMismatchError, match=rf"rng: expected an int seed .*, got ndarray {shown}"
        ):
            raw_key(bad)
