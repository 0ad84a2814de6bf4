"""Reduced-precision accumulation (issue 27): float16 and bfloat16 sums, means, variances,
norms, cumulative sums, products and pooled averages whose partial sums in the narrow type
overflow (float16: 4096 values of ~30 sum to ~125k > 65504) or stall (bfloat16: 1000 ones
stop growing at 256 when added one by one in bfloat16). The source frameworks accumulate in
float32 and round once; every backend must give their result, not the narrow one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

import converter

N = {"float16": 4096, "bfloat16": 1000}


def _input(dtype: str) -> np.ndarray:
    """Two rows: constant, and alternating (so sums, means and variances all matter)."""
    n = N[dtype]
    v = np.full((2, n), 30.0 if dtype == "float16" else 1.0, np.float32)
    v[1, ::2] = 31.0 if dtype == "float16" else 1.5
    return v


class Reductions(torch.nn.Module):
    def forward(self, x):
        w = torch.ones(x.shape[-1], 2, dtype=x.dtype)
        return (
            x.sum(-1),
            x.mean(-1),
            x.mean(),
            x.var(-1),
            torch.linalg.vector_norm(x, dim=-1) / 64,
            x.cumsum(-1)[:, -1] if x.dtype == torch.bfloat16 else x.cumsum(-1)[:, 100],
            x @ w,
            torch.nn.functional.avg_pool1d(x.unsqueeze(1), x.shape[-1]).flatten(),
            torch.nn.functional.layer_norm(x, x.shape[-1:])[:, :4],
            torch.einsum("bi,bi->b", x, x) / x.shape[-1],
        )


def _close(got, want, what):
    np.testing.assert_allclose(
        np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=1e-2, atol=1e-2, err_msg=what
    )


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_source_reductions_accumulate_wide(dtype):
    tdt = getattr(torch, dtype)
    v = _input(dtype)
    x = torch.from_numpy(v).to(tdt)
    with torch.no_grad():
        want = [w.float().numpy() for w in Reductions()(x)]
    assert np.isfinite(want[1]).all() and np.isfinite(want[2]).all()  # means fit where sums may not
    m = converter.from_torch(Reductions(), (x,))
    narrow = v.astype(getattr(ml_dtypes, dtype) if dtype == "bfloat16" else np.float16)
    got = {"jax": m.to_jax()(narrow), "torch": [g.float() for g in m.to_torch()(x)]}
    if dtype == "float16":  # onnxruntime takes no bfloat16 NumPy arrays
        sess = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
        got["onnx"] = sess.run(None, {sess.get_inputs()[0].name: narrow})
    for backend, outs in got.items():
        for i, (g, w) in enumerate(zip(outs, want, strict=True)):
            _close(
                np.asarray(g, np.float32) if not isinstance(g, torch.Tensor) else g.numpy(),
                w,
                f"{backend} {i}",
            )


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_jax_source_reductions_accumulate_wide(dtype):
    v = jnp.asarray(_input(dtype), dtype)

    def fn(x):
        return jnp.sum(x, -1), jnp.mean(x, -1), jnp.var(x, -1), x @ jnp.ones((x.shape[-1], 2), x.dtype)

    want = [np.asarray(w, np.float32) for w in jax.jit(fn)(v)]
    assert np.isfinite(want[1]).all()
    m = converter.from_jax(fn, v)
    outs = {
        "jax": m.to_jax()(v),
        "torch": m.to_torch()(torch.from_numpy(_input(dtype)).to(getattr(torch, dtype))),
    }
    for backend, got in outs.items():
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            g = g.float().numpy() if isinstance(g, torch.Tensor) else np.asarray(g, np.float32)
            _close(g, w, f"{backend} {i}")


def test_onnx_source_float16_reduce_mean_matches_onnxruntime():
    """ONNX ReduceSum/ReduceMean on float16 (onnxruntime accumulates wide too)."""
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["x", "axes"], ["mean"], keepdims=0),
            helper.make_node("ReduceSum", ["x", "axes"], ["sum"], keepdims=0),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, N["float16"]])],
        [
            helper.make_tensor_value_info("mean", TensorProto.FLOAT16, [2]),
            helper.make_tensor_value_info("sum", TensorProto.FLOAT16, [2]),
        ],
        initializer=[helper.make_tensor("axes", TensorProto.INT64, [1], [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    x = _input("float16").astype(np.float16) / 16  # sums of ~7.7k fit float16; partial ones too
    x[:, :8] = 60000.0  # ...but not the first eight added in float16: 4.8e5 would overflow
    x[:, 8:16] = -60000.0
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    want_wide = [x.astype(np.float64).mean(-1), x.astype(np.float64).sum(-1)]
    for w, ww in zip(want, want_wide, strict=True):
        _close(w, ww, "onnxruntime")  # the reference itself accumulates wide
    got = converter.from_onnx(model).to_jax()(x)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        _close(np.asarray(g, np.float32), w, f"output {i}")
