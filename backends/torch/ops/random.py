"""Random bits: ``stablehlo.rng_bit_generator`` (StableHLO spec section "rng_bit_generator").

The spec fixes the two named algorithms (Threefry-2x32 and Philox-4x32, Salmon et al.,
"Parallel random numbers: as easy as 1, 2, 3", SC 2011) but not how XLA lays the counters
and the output out; the rule below reproduces XLA's CPU results bit for bit (checked against
``jax.lax.rng_bit_generator`` in tests/backends/torch/test_random.py). ``DEFAULT`` is Philox,
the algorithm XLA's CPU and GPU compilers substitute for it.

Layout (state ``s`` is ``ui64[k]``; ``s[0]`` is always the key and is returned unchanged):

* Threefry (``k == 2``): counter ``s[1]``. 64-bit outputs take one block per element, the
  two output words forming (low, high) of the element; narrower outputs take one block per
  *pair* of elements (the shape is halved along its first even dimension, else its largest
  one, and the two words of a block become neighbours along that dimension); 8/16-bit
  outputs are the low bits of the 32-bit ones. The new counter is ``s[1] + blocks``.
* Philox: a 128-bit counter, ``(low, high) = (s[1], s[2])`` when ``k == 3`` and
  ``(s[1], s[0])`` when ``k == 2`` (only the low word is returned then). Block ``i`` uses
  counter ``+ i`` and yields four 32-bit words that fill the flat output in order (two 64-bit
  values per block for 64-bit outputs); the new counter is advanced by the block count.

Everything is computed on 32-bit words held in ``int64`` tensors (so no product or shift
overflows), with torch ops only: it traces (``build_graph``) into a straight-line graph whose
size depends on the round count, not on the output size.
"""

from __future__ import annotations

import math

import torch

from .._util import BITS, result_name, storage_dtype
from ..registry import register

_M32 = 0xFFFFFFFF
_SIGNED = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}
_Words = tuple[torch.Tensor, ...]
_Pair = tuple[torch.Tensor, torch.Tensor]


def _split64(x: torch.Tensor) -> _Pair:
    """(low, high) 32-bit words (each in ``[0, 2**32)``) of 64-bit patterns held in int64."""
    return x & _M32, (x >> 32) & _M32


def _join64(low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """The int64 holding the 64-bit pattern ``high:low`` (computed without overflow)."""
    signed_high = (high ^ 0x80000000) - 0x80000000
    return signed_high * (1 << 32) + low


def _int_words(n: int) -> tuple[int, int]:
    """(low, high) 32-bit words of a non-negative Python int below ``2**64``."""
    return n & _M32, n >> 32


def _rotl32(x: torch.Tensor, r: int) -> torch.Tensor:
    return ((x << r) & _M32) | (x >> (32 - r))


def _mulhilo32(x: torch.Tensor, m: int) -> _Pair:
    """(high, low) words of the 64-bit product of 32-bit words ``x`` and constant ``m``,
    from 16-bit partial products (no int64 overflow)."""
    xl, xh = x & 0xFFFF, x >> 16
    ml, mh = m & 0xFFFF, m >> 16
    ll = xl * ml
    mid = xl * mh + xh * ml + (ll >> 16)
    low = ((mid & 0xFFFF) << 16) | (ll & 0xFFFF)
    return xh * mh + (mid >> 16), low


def _add_words(words: _Words, delta: _Words) -> _Words:
    """Multi-word unsigned addition (least significant word first, result modulo
    ``2**(32 * len(words))``); ``delta`` may have fewer words."""
    out, carry = [], 0
    for i, w in enumerate(words):
        t = w + carry + (delta[i] if i < len(delta) else 0)
        out.append(t & _M32)
        carry = t >> 32
    return tuple(out)


# ------------------------------------------------------------------ Threefry-2x32, 20 rounds

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry2x32(x: _Words, key: _Words) -> _Words:
    """Threefry-2x32 with 20 rounds on counter words ``x = (x0, x1)`` and key words
    ``key = (k0, k1)`` (32-bit words in int64 tensors, broadcastable). Returns two words."""
    k0, k1 = key
    ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA)
    x0, x1 = (x[0] + k0) & _M32, (x[1] + k1) & _M32
    for group in range(5):
        for r in _ROTATIONS[group % 2]:
            x0 = (x0 + x1) & _M32
            x1 = _rotl32(x1, r) ^ x0
        x0 = (x0 + ks[(group + 1) % 3]) & _M32
        x1 = (x1 + ks[(group + 2) % 3] + group + 1) & _M32
    return x0, x1


# ------------------------------------------------------------------ Philox-4x32, 10 rounds

_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def philox4x32(x: _Words, key: _Words) -> _Words:
    """Philox-4x32 with 10 rounds on counter words ``x = (x0..x3)`` and key words
    ``key = (k0, k1)`` (32-bit words in int64 tensors, broadcastable). Returns four words."""
    x0, x1, x2, x3 = x
    k0, k1 = key
    for _ in range(10):
        hi0, lo0 = _mulhilo32(x0, _PHILOX_M[0])
        hi1, lo1 = _mulhilo32(x2, _PHILOX_M[1])
        x0, x1, x2, x3 = hi1 ^ x1 ^ k0, lo1, hi0 ^ x3 ^ k1, lo0
        k0, k1 = (k0 + _PHILOX_W[0]) & _M32, (k1 + _PHILOX_W[1]) & _M32
    return x0, x1, x2, x3


# ------------------------------------------------------------------ output layouts


def _index_words(n: int, shape: tuple[int, ...], device: torch.device) -> _Words:
    """(low, high) words of ``0..n-1`` laid out in ``shape`` (row-major)."""
    idx = torch.arange(n, dtype=torch.int64, device=device).reshape(shape)
    return _split64(idx)


def _halved(shape: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """XLA's split of a shape into two halves: ``(half_shape, dim)`` where ``dim`` is the
    first even dimension (else the first largest) and ``half_shape`` has it halved (rounded
    up). A scalar becomes ``((1,), 0)``."""
    if not shape:
        return (1,), 0
    dim = next((i for i, d in enumerate(shape) if d % 2 == 0), None)
    if dim is None:
        dim = max(range(len(shape)), key=lambda i: (shape[i], -i))
    half = list(shape)
    half[dim] = math.ceil(shape[dim] / 2)
    return tuple(half), dim


def _threefry_bits(state: torch.Tensor, shape: tuple[int, ...], bits: int) -> _Pair:
    """(new state, words): 32-bit words (``bits <= 32``) or 64-bit patterns in int64."""
    key = _split64(state[0])
    counter = _split64(state[1])
    if bits == 64:
        block_shape, dim = shape, None
    else:
        block_shape, dim = _halved(shape)
    blocks = math.prod(block_shape)
    x0, x1 = threefry2x32(_add_words(counter, _index_words(blocks, block_shape, state.device)), key)
    new_state = torch.stack([state[0], _join64(*_add_words(counter, _int_words(blocks)))])
    if bits == 64:
        return new_state, _join64(x0, x1)
    if not shape:
        return new_state, x0.reshape(())
    pairs = torch.stack([x0, x1], dim=dim + 1)  # neighbours along the halved dimension
    full = list(shape)
    full[dim] = 2 * block_shape[dim]
    out = pairs.reshape(full).narrow(dim, 0, shape[dim])
    return new_state, out


def _philox_bits(state: torch.Tensor, shape: tuple[int, ...], bits: int) -> _Pair:
    """(new state, words) as :func:`_threefry_bits`, for Philox-4x32."""
    n = math.prod(shape)
    if state.shape[0] == 3:
        counter = (*_split64(state[1]), *_split64(state[2]))
    else:
        counter = (*_split64(state[1]), *_split64(state[0]))
    per_block = 2 if bits == 64 else 4
    blocks = -(-n // per_block)
    words = philox4x32(_add_words(counter, _index_words(blocks, (blocks,), state.device)), _split64(state[0]))
    new = _add_words(counter, _int_words(blocks))
    new_state = [state[0], _join64(new[0], new[1])]
    if state.shape[0] == 3:
        new_state.append(_join64(new[2], new[3]))
    if bits == 64:
        words = (_join64(words[0], words[1]), _join64(words[2], words[3]))
    flat = torch.stack(words, dim=1).reshape(-1)[:n]
    return torch.stack(new_state), flat.reshape(shape)


def _as_result(words: torch.Tensor, name: str) -> torch.Tensor:
    """Random words (32-bit words in int64, or 64-bit patterns) reinterpreted as the storage
    of dtype ``name``: unsigned values are the low bits, signed and float values the same
    bits (XLA produces the unsigned bits and the result type only renames them)."""
    bits = BITS[name]
    if bits == 64:
        return words if name in ("int64", "uint64") else words.view(storage_dtype(name))
    low = words & ((1 << bits) - 1)
    if name.startswith("uint"):
        return low.to(storage_dtype(name))
    signed = ((low ^ (1 << (bits - 1))) - (1 << (bits - 1))).to(_SIGNED[bits])
    return signed if name.startswith("int") else signed.view(storage_dtype(name))


_GENERATORS = {"THREE_FRY": _threefry_bits, "PHILOX": _philox_bits, "DEFAULT": _philox_bits}
_STATE_SIZES = {"THREE_FRY": (2,), "PHILOX": (2, 3), "DEFAULT": (2, 3)}
_OUTPUT_DTYPES = {
    "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "float16", "bfloat16", "float32", "float64",
}  # fmt: skip


@register("stablehlo.rng_bit_generator")
def _rng_bit_generator(interp, op, state):
    """``(output_state, output)`` of StableHLO ``rng_bit_generator`` as XLA computes them on
    CPU (see the module doc for the layout).

    ``state`` is the ``ui64[2]`` (or, for Philox, ``ui64[3]``) state held bit-for-bit in an
    int64 tensor; ``output`` has the result's shape and the storage dtype of its element type
    (8/16/32/64-bit unsigned, signed or float; a float or signed result holds the raw bits).

    Raises:
        NotImplementedError: an unknown algorithm, a state that is not ``ui64[2]``/``ui64[3]``
            as the algorithm requires, or an output dtype outside the list above (bool,
            complex).
    """
    algorithm = str(op.attr("rng_algorithm"))
    state_type, out_type = op.operand_type(0), op.result_types[1]
    name = result_name(op, 1)
    if algorithm not in _GENERATORS:
        raise NotImplementedError(f"rng_bit_generator algorithm {algorithm}")
    if state_type.dtype != "uint64" or tuple(state_type.shape) not in {(k,) for k in _STATE_SIZES[algorithm]}:
        raise NotImplementedError(f"rng_bit_generator {algorithm} with state {state_type}")
    if name not in _OUTPUT_DTYPES:
        raise NotImplementedError(f"rng_bit_generator producing {name}")
    bits = 64 if BITS[name] == 64 else 32
    new_state, words = _GENERATORS[algorithm](state, tuple(out_type.shape), bits)
    return [new_state, _as_result(words, name)]
