"""The round-trip suite (issue 6): every model through every available path and round trip.

Sources are torch models (the examples and small transformers), Flax models and the light
ONNX models of the onnx wheel with seeded random weights (:mod:`examples.onnx_light`; the
shipped constant weights make their outputs nearly constant), checked against onnxruntime on
the original graph. Each path converts the source, runs it on the source's example inputs, and
compares every output leaf, matched by pytree path, within float32 tolerance. The terminal
summary prints one table row per (model, path).

Two light models run by default (AlexNet and Inception v2: random-weight logits that stay
O(1), so the float32 tolerance is meaningful; DenseNet-121, the third such model, adds ~40
CPU seconds and no op the other two lack); ``ROUNDTRIP_ONNX=all`` runs all nine.
"""

from __future__ import annotations

import functools
import os

import jax
import numpy as np
import onnxruntime as ort
import pytest
import torch

import converter
from converter.signature import flatten, leaf_paths
from examples import models as example_models
from examples import onnx_light
from tests.examples_converted import torch_example

RTOL = ATOL = 1e-5  # float32, every path and round trip (worst seen: 1.9e-6, ViT → ONNX)


TORCH_MODELS = list(example_models.TORCH_MODELS)
FLAX_MODELS = ("mlp", "cnn", "decoder_block")
TORCH_PATHS = ("jax", "torch", "onnx", "jax->torch", "onnx->torch")
JAX_PATHS = ("jax", "torch", "onnx", "torch->jax")
ONNX_MODELS = (
    onnx_light.NAMES if os.environ.get("ROUNDTRIP_ONNX") == "all" else ("bvlc_alexnet", "inception_v2")
)
ONNX_PATHS = ("jax", "torch", "onnx", "jax->torch")


# ---------------------------------------------------------------------------- sources


@functools.cache
def torch_source(name):
    model, args, module = torch_example(name)
    with torch.no_grad():
        ref = model(*args)
    return module, [a.numpy() for a in args], _by_path(ref, module.signature.out_tree)


@functools.cache
def jax_source(name):
    from examples import flax_models

    apply, params, args = flax_models.FACTORIES[name]()
    module = converter.from_jax(apply, *args, params=params)
    return module, list(args), _by_path(apply(params, *args), module.signature.out_tree)


@functools.cache
def onnx_source(name):
    model = onnx_light.load(name)
    x = onnx_light.example_input(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = session.run(None, {session.get_inputs()[0].name: x})
    module = converter.from_onnx(model)
    return module, [x], dict(zip(leaf_paths(module.signature.out_tree), ref, strict=True))


SOURCES = {"torch": torch_source, "jax": jax_source, "onnx": onnx_source}


def _by_path(out, tree):
    return {p: np.asarray(v.detach() if isinstance(v, torch.Tensor) else v) for p, v in flatten(out, tree)}


# ---------------------------------------------------------------------------- paths


def _run_jax(module, args):
    return _by_path(module.to_jax()(*args), module.signature.out_tree)


def _run_torch(module, args):
    with torch.no_grad():
        out = module.to_torch()(*[torch.from_numpy(np.asarray(a)) for a in args])
    return _by_path(out, module.signature.out_tree)


_ONNX: dict[int, tuple] = {}


def _to_onnx(module):
    """``module.to_onnx()``, once per (cached, so long-lived) source module: the ``onnx`` path
    and the ``onnx->torch`` round trip start from the same export."""
    if id(module) not in _ONNX:
        _ONNX[id(module)] = (module, module.to_onnx())
    return _ONNX[id(module)][1]


def _run_onnx(module, args):
    sess = ort.InferenceSession(_to_onnx(module).SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: np.asarray(a) for i, a in zip(sess.get_inputs(), args, strict=True)})
    return dict(zip(leaf_paths(module.signature.out_tree), got, strict=True))


def _via_jax_to_torch(module, args):
    fn = module.to_jax()
    again = converter.from_jax(fn.apply, *args, params=fn.params)
    return _relabel(_run_torch(again, args), module)


def _via_onnx_to_torch(module, args):
    again = converter.from_onnx(_to_onnx(module))
    return _relabel(_run_torch(again, args), module)


def _via_torch_to_jax(module, args):
    tm = module.to_torch()
    again = converter.from_torch(tm, tuple(torch.from_numpy(np.asarray(a)) for a in args))
    return _relabel(_run_jax(again, args), module)


def _relabel(values, module):
    """A round trip's outputs keyed by the source's paths (the leaf order is preserved)."""
    return dict(zip(leaf_paths(module.signature.out_tree), values.values(), strict=True))


PATHS = {
    "jax": _run_jax,
    "torch": _run_torch,
    "onnx": _run_onnx,
    "jax->torch": _via_jax_to_torch,
    "onnx->torch": _via_onnx_to_torch,
    "torch->jax": _via_torch_to_jax,
}
CASES = (
    [("torch", m, p) for m in TORCH_MODELS for p in TORCH_PATHS]
    + [("jax", m, p) for m in FLAX_MODELS for p in JAX_PATHS]
    + [("onnx", m, p) for m in ONNX_MODELS for p in ONNX_PATHS]
)


@pytest.mark.parametrize("source,model,path", CASES, ids=[f"{s}-{m}-{p}" for s, m, p in CASES])
def test_roundtrip(source, model, path, record_property):
    module, args, ref = SOURCES[source](model)
    got = PATHS[path](module, args)
    assert set(got) == set(ref)
    worst = max(float(np.max(np.abs(got[k].astype(np.float64) - ref[k]), initial=0.0)) for k in ref)
    record_property("roundtrip", (f"{source}:{model}", path, worst, f"{RTOL:g}"))
    for key in ref:
        assert got[key].shape == ref[key].shape, key
        np.testing.assert_allclose(got[key], ref[key], rtol=RTOL, atol=ATOL, err_msg=f"{model} {path} {key}")


jax.config.update("jax_enable_x64", True)
