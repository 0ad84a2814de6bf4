"""Run one ONNX backend node-test case through ``from_onnx`` and a backend, and compare at
the case's own rtol/atol (``onnx.backend.test.loader.load_model_tests(kind="node")``)."""

from __future__ import annotations

from functools import cache, lru_cache

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.loader import load_model_tests

from frontends.onnx import StaticValueRequired, from_onnx
from tests.compare import assert_complex_close


@cache
def node_cases() -> dict:
    """Every node test case by name."""
    return {c.name: c for c in load_model_tests(kind="node")}


def _value(v):
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, onnx.SequenceProto):
        return [numpy_helper.to_array(t) for t in v.tensor_values]
    if isinstance(v, onnx.OptionalProto):
        return _value(v.tensor_value) if v.HasField("tensor_value") else None
    return v


def convert_case(case):
    """Convert a case's model; graph inputs that are sequences/optionals, or whose values a
    rule needs at conversion time (shapes, axes), are passed as ``static_inputs``.
    Returns ``(module, runtime input names, inputs by name, expected outputs)``."""
    model = case.model
    inputs, expected = case.data_sets[0]
    inits = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    feed = dict(zip(names, (_value(v) for v in inputs), strict=False))
    static = {n: v for n, v in feed.items() if v is None or isinstance(v, list)}
    for _ in range(8):
        try:
            module = from_onnx(
                model,
                static_inputs=static,
                input_shapes={n: np.shape(v) for n, v in feed.items() if n not in static},
                values_at_call=False,
            )
            break
        except StaticValueRequired as e:
            wanted = [n for n in e.names if n in feed and n not in static]
            if not wanted:
                wanted = [n for n, v in feed.items() if n not in static and np.asarray(v).dtype.kind in "iub"]
            if not wanted:
                wanted = [n for n in feed if n not in static]
            if not wanted:
                raise
            static.update({n: feed[n] for n in wanted})
    else:
        raise RuntimeError("static inputs did not converge")
    runtime = [n for n in names if n not in static]
    return module, runtime, feed, [_value(v) for v in expected]


def check_outputs(actual, expected, rtol: float, atol: float, where: str = "output") -> None:
    """Outputs match in count, dtype, shape and value (NaNs equal); sequences element-wise,
    an empty optional is None."""
    assert len(actual) == len(expected), f"{where}: {len(actual)} values, expected {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        if isinstance(e, list) or e is None:
            assert (a is None) == (e is None), f"{where} {i}: {a!r}, expected {e!r}"
            if e is not None:
                check_outputs(list(a), e, rtol, atol, f"{where} {i} element")
            continue
        a = np.asarray(a)
        e = np.asarray(e)
        assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype}, expected {e.dtype}"
        assert a.shape == e.shape, f"output {i}: shape {a.shape}, expected {e.shape}"
        if e.dtype.kind == "c":  # astype(float64) would drop the imaginary part
            assert_complex_close(a, e, rtol, atol, err_msg=f"output {i}")
        elif e.dtype.kind == "f" or e.dtype.name.startswith(("bfloat", "float8")):
            np.testing.assert_allclose(
                a.astype(np.float64),
                e.astype(np.float64),
                rtol=rtol,
                atol=atol,
                equal_nan=True,
                err_msg=f"output {i}",
            )
        else:
            np.testing.assert_array_equal(a, e, err_msg=f"output {i}")


_TORCH_VIEWS = {  # ml_dtypes arrays reach torch through a same-width integer view
    "bfloat16": ("bfloat16", np.uint16),
    "float8_e4m3fn": ("float8_e4m3fn", np.uint8),
    "float8_e5m2": ("float8_e5m2", np.uint8),
    "float8_e4m3fnuz": ("float8_e4m3fnuz", np.uint8),
    "float8_e5m2fnuz": ("float8_e5m2fnuz", np.uint8),
}


def _to_torch(a):
    import torch

    a = np.array(a, copy=True)  # C-contiguous, keeps 0-d (np.ascontiguousarray makes it 1-d)
    if a.dtype.name in _TORCH_VIEWS:
        tname, view = _TORCH_VIEWS[a.dtype.name]
        return torch.from_numpy(a.view(view)).view(getattr(torch, tname))
    return torch.from_numpy(a)


def _from_torch(t):
    import ml_dtypes
    import torch

    if isinstance(t, (list, tuple)):
        return [_from_torch(v) for v in t]
    if t is None or not isinstance(t, torch.Tensor):
        return t
    name = str(t.dtype).removeprefix("torch.")
    if name in _TORCH_VIEWS:
        view = _TORCH_VIEWS[name][1]
        return (
            t.detach()
            .contiguous()
            .view(getattr(torch, np.dtype(view).name))
            .numpy()
            .view(getattr(ml_dtypes, name))
        )
    return t.detach().numpy()


@lru_cache(maxsize=4)
def converted(name: str):
    """:func:`convert_case` of case ``name``, kept for the next backend: the conformance test
    runs each case's backends one after the other, so it converts each case once."""
    return convert_case(node_cases()[name])


def run_case(name: str, backend: str = "jax") -> None:
    """Convert (once per case, :func:`converted`) and run one case on ``backend`` (``jax``
    or ``torch``)."""
    case = node_cases()[name]
    module, runtime, feed, expected = converted(name)
    args = [feed[n] for n in runtime]
    if backend == "jax":
        out = list(module.to_jax()(*args))
    elif backend == "torch":
        fn = module.to_torch()
        out = fn(*[_to_torch(a) for a in args])
        out = [_from_torch(o) for o in (out if isinstance(out, (tuple, list)) else [out])]
    else:
        raise ValueError(backend)
    check_outputs(out, expected, case.rtol, case.atol)
