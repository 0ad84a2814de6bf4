"""The "light" real models shipped in the onnx wheel (``onnx/backend/test/data/light``) match
their shipped outputs through ``from_onnx`` → ``to_jax`` and → ``to_torch``.

The wheel ships each model with its weights replaced by ``ConstantOfShape`` fills and one
expected output, no input: ONNX's backend runner feeds ``arange(n).reshape(shape) / n``
(``Runner.generate_dummy_data(random=False)``), so this test does the same. Tolerances are
the ones ``onnx.backend.test.case.model.collect_testcases`` gives each model. Each model is
converted once for both backends.

SqueezeNet used to come out all-NaN in some processes: two XLA CPU faults, worked around in
the ONNX frontend (``tests/frontends/onnx/xla_cpu_repro.py`` reproduces both);
:func:`test_squeezenet_logits_match_onnxruntime` guards the one the softmax hides.
"""

from __future__ import annotations

import os
from functools import cache

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper
from onnx.backend.test.loader import DATA_DIR

import converter

LIGHT = os.path.join(DATA_DIR, "light")
MODELS = {  # name: rtol (atol is 1e-7 for all), from onnx.backend.test.case.model
    "bvlc_alexnet": 1e-3,
    "densenet121": 2e-3,
    "inception_v1": 1e-3,
    "inception_v2": 1e-3,
    "resnet50": 1e-3,
    "shufflenet": 1e-3,
    "squeezenet": 1e-3,
    "vgg19": 1e-3,
    "zfnet512": 1e-3,
}


def dummy_input(vi: onnx.ValueInfoProto) -> np.ndarray:
    """ONNX's runner input for the light models: ``arange(n) / n`` (symbolic dims → 1)."""
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


@cache
def _converted(name: str) -> tuple[converter.Module, list[np.ndarray], np.ndarray]:
    """The module, the runner's inputs and the shipped output of light model ``name``."""
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    model = onnx.load(path)
    inits = {t.name for t in model.graph.initializer}
    feeds = [dummy_input(vi) for vi in model.graph.input if vi.name not in inits]
    expected = numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT, f"light_{name}_output_0.pb")))
    return converter.from_onnx(path), feeds, expected


def _run(module: converter.Module, feeds: list[np.ndarray], backend: str) -> np.ndarray:
    if backend == "jax":
        (out,) = module.to_jax()(*feeds)
        return np.asarray(out)
    threads = torch.get_num_threads()
    # one intra-op thread: on a loaded (or xdist-shared) 2-core machine torch's OpenMP
    # threads spin while waiting for a core, several times the CPU of the model itself
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            out = module.to_torch()(*(torch.from_numpy(x) for x in feeds))
    finally:
        torch.set_num_threads(threads)
    return (out[0] if isinstance(out, (tuple, list)) else out).numpy()


#: The default run leaves out the models ``tests/models/test_roundtrip.py`` converts through
#: the same backends (with random weights instead of fills) and DenseNet-121 (the heaviest, no
#: op the others lack; with AlexNet and Inception v2 it runs under ``ROUNDTRIP_ONNX=all``);
#: ``LIGHT_MODELS=all`` runs all nine.
NAMES = sorted(
    MODELS
    if os.environ.get("LIGHT_MODELS") == "all"
    else set(MODELS) - {"bvlc_alexnet", "inception_v2", "densenet121"}
)


#: ``(name, backend)`` pairs: every model on both backends, except in the default run
#: Inception v1 on JAX (XLA compiles its 57 convolutions for a third of this file's time; every
#: op it has but its asymmetric-padded AveragePool is in the other models, and that one's
#: lowering is the frontend's, checked against the expected output on the torch backend) and
#: SqueezeNet on JAX (:func:`test_squeezenet_logits_match_onnxruntime` checks its output too)
CASES = [
    (n, b)
    for n in NAMES
    for b in ("jax", "torch")
    if (n, b) not in {("inception_v1", "jax"), ("squeezenet", "jax")}
    or os.environ.get("LIGHT_MODELS") == "all"
]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("name", "backend"), CASES, ids=[f"{n}-{b}" for n, b in CASES])
def test_light_model(name: str, backend: str) -> None:
    module, feeds, expected = _converted(name)
    out = _run(module, feeds, backend)
    np.testing.assert_allclose(out, expected, rtol=MODELS[name], atol=1e-7)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_squeezenet_logits_match_onnxruntime() -> None:
    """SqueezeNet's softmax input (its global average pool) matches onnxruntime through
    ``to_jax``, and its output the shipped one. All 1000 logits are equal, so the softmax
    output alone would not notice them being wrong -- as they were when XLA's YNNPACK reduce
    fusion summed a convolution whose kernel was a splat constant."""
    import onnxruntime as ort

    model = onnx.load(os.path.join(LIGHT, "light_squeezenet.onnx"))
    model.graph.output.append(
        onnx.helper.make_tensor_value_info("r65", onnx.TensorProto.FLOAT, [1, 1000, 1, 1])
    )
    x = dummy_input(next(vi for vi in model.graph.input if vi.name == "data_0"))
    (want,) = ort.InferenceSession(model.SerializeToString()).run(["r65"], {"data_0": x})
    module = converter.from_onnx(model)
    assert any(p.kind == "constant" for p in module.signature.params)  # the fills are parameters
    out, logits = module.to_jax()(x)
    np.testing.assert_allclose(np.asarray(logits), want, rtol=1e-5)
    expected = numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT, "light_squeezenet_output_0.pb")))
    np.testing.assert_allclose(np.asarray(out), expected, rtol=MODELS["squeezenet"], atol=1e-7)
    assert float(np.abs(want).min()) > 1e9  # large enough that a wrong sum is not near it
