"""``from_torch`` copies the parameters into 64-byte aligned NumPy arrays (a snapshot of the
torch model): bit-exact for every dtype, contiguous or not."""

from __future__ import annotations

import pytest
import torch

from frontends.torch import _to_numpy

DTYPES = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int64,
    torch.int8,
    torch.uint8,
    torch.bool,
    torch.complex64,
    torch.float8_e4m3fn,
]


def _bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "scalar", "empty"])
def test_copy_is_bit_exact_aligned_and_independent(dtype, layout):
    torch.manual_seed(0)
    source = {
        "contiguous": torch.randn(5, 7) * 10,
        "transposed": (torch.randn(7, 5) * 10).t(),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 3),
    }[layout]
    t = source.to(dtype) if layout != "transposed" else source.t().to(dtype).t()
    assert t.is_contiguous() == (layout != "transposed")
    want = _bytes(t)
    out = _to_numpy(t)
    assert out.shape == tuple(t.shape) and out.flags.c_contiguous
    assert out.size == 0 or out.ctypes.data % 64 == 0
    assert out.tobytes() == want
    t.copy_(torch.zeros_like(source).to(dtype))  # the torch model changes afterwards
    assert out.tobytes() == want  # a copy, not a view
