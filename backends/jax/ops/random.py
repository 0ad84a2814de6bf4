"""Random bits: ``stablehlo.rng_bit_generator`` (StableHLO spec section "rng_bit_generator")
through ``jax.lax.rng_bit_generator``, so XLA computes the very same bits."""

from __future__ import annotations

import numpy as np
from jax import lax

from converter import dtypes

from ..registry import register

_ALGORITHMS = {
    "DEFAULT": lax.RandomAlgorithm.RNG_DEFAULT,
    "THREE_FRY": lax.RandomAlgorithm.RNG_THREE_FRY,
    "PHILOX": lax.RandomAlgorithm.RNG_PHILOX,
}
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@register("stablehlo.rng_bit_generator")
def _rng_bit_generator(interp, op, state):
    """``(output_state, output)``; a signed or float ``output`` holds the raw bits XLA
    generates for the unsigned type of its width (what XLA itself returns for it).

    Raises:
        NotImplementedError: a state other than ``ui64[2]`` (``jax.lax`` lowers only that
            form; a ``ui64[3]`` Philox state has no JAX spelling), or a bool/complex output.
    """
    out_type = op.result_types[1]
    state_type = op.operand_type(0)
    if state_type.dtype != "uint64" or tuple(state_type.shape) != (2,):
        raise NotImplementedError(f"rng_bit_generator with state {state_type}: JAX lowers only ui64[2]")
    if out_type.dtype == "bool" or dtypes.is_complex(out_type.dtype):
        raise NotImplementedError(f"rng_bit_generator producing {out_type.dtype}")
    target = np.dtype(dtypes.to_numpy(out_type.dtype))
    bits_dtype = _UNSIGNED[target.itemsize]
    algorithm = _ALGORITHMS[str(op.attr("rng_algorithm"))]
    new_state, bits = lax.rng_bit_generator(state, tuple(out_type.shape), bits_dtype, algorithm=algorithm)
    if target != bits_dtype:
        bits = lax.bitcast_convert_type(bits, target)
    return [new_state, bits]
