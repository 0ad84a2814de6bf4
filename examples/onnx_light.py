"""The "light" ONNX models shipped in the onnx wheel, with seeded random weights.

The wheel (``onnx/backend/test/data/light``) ships AlexNet, DenseNet-121, Inception v1/v2,
ResNet-50, ShuffleNet, SqueezeNet, VGG-19 and ZFNet-512 with every weight replaced by a
``ConstantOfShape`` fill of 0.02, so their outputs are nearly constant (ResNet-50 gives 0.001
for every class) and matching them says little about numerics. :func:`load` keeps each graph
and replaces those fills with seeded random initializers scaled so that activations stay in
range (He scaling for weights, positive batch-norm scales and variances), which makes every
comparison against onnxruntime meaningful.

``python examples/onnx_light.py NAME OUT.onnx`` writes one such model.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

NAMES = (
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
)


def path(name: str) -> str:
    """The shipped model file of ``name`` (one of :data:`NAMES`)."""
    from onnx.backend.test.loader import DATA_DIR

    return os.path.join(DATA_DIR, "light", f"light_{name}.onnx")


def _consumer(graph: onnx.GraphProto, value: str) -> tuple[str, int]:
    """``(op_type, input index)`` of the first node that reads ``value``."""
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == value:
                return node.op_type, i
    return "", -1


def _weight(shape: tuple[int, ...], op: str, index: int, rng: np.random.Generator) -> np.ndarray:
    """A random tensor for an input ``index`` of an ``op`` node with ``shape``."""
    if len(shape) >= 2:  # conv / gemm weights: He scaling by fan-in
        fan_in = int(np.prod(shape[1:])) if op != "Gemm" else int(shape[-1])
        return rng.normal(0.0, np.sqrt(2.0 / max(fan_in, 1)), shape)
    if (op == "BatchNormalization" and index in (1, 4)) or op == "Mul":  # scales, variances
        return rng.uniform(0.5, 1.5, shape)
    return rng.normal(0.0, 0.1, shape)  # biases, means, shifts


def load(name: str, seed: int = 0, logits: bool = True) -> onnx.ModelProto:
    """The light model ``name`` with its ``ConstantOfShape`` weight fills replaced by seeded
    random initializers (float32) of the same shapes; the graph is otherwise unchanged.
    With ``logits``, a model that ends in ``Softmax`` also outputs the Softmax's input
    (a saturated softmax hides differences in everything before it).

    Raises:
        KeyError: ``name`` is not one of :data:`NAMES`.
        ValueError: a fill's shape is not a constant initializer.
    """
    if name not in NAMES:
        raise KeyError(f"{name!r} is not a light model; one of {', '.join(NAMES)}")
    model = onnx.load(path(name))
    onnx.checker.check_model(model)  # checked and shape-inferred before the weights are added:
    known = onnx.shape_inference.infer_shapes(model).graph.value_info  # both serialize them
    graph = model.graph
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in graph.initializer}
    keep_nodes, new_inits = [], []
    for node in graph.node:
        if node.op_type != "ConstantOfShape":
            keep_nodes.append(node)
            continue
        if node.input[0] not in inits:
            raise ValueError(f"{name}: ConstantOfShape {node.output[0]} has a computed shape")
        shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]))
        op, index = _consumer(graph, node.output[0])
        value = _weight(shape, op, index, rng).astype(np.float32)
        new_inits.append(numpy_helper.from_array(value, node.output[0]))
    del graph.node[:]
    graph.node.extend(keep_nodes)
    used = {i for n in graph.node for i in n.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept + new_inits)
    inputs = [v for v in graph.input if v.name in used]  # drop the fills' shape inputs
    del graph.input[:]
    graph.input.extend(inputs)
    model.ir_version = max(model.ir_version, 4)  # initializers need not be graph inputs
    if logits:
        _expose_logits(model, {v.name: v for v in known})
    return model


def _expose_logits(model: onnx.ModelProto, known: dict[str, onnx.ValueInfoProto]) -> None:
    graph = model.graph
    outputs = {o.name for o in graph.output}
    softmax_in = [n.input[0] for n in graph.node if n.op_type == "Softmax" and n.output[0] in outputs]
    graph.output.extend(known[name] for name in softmax_in)


def example_input(model: onnx.ModelProto) -> np.ndarray:
    """ONNX's runner input for the light models, ``arange(n).reshape(shape) / n`` (symbolic
    dimensions as 1), float32."""
    inits = {t.name for t in model.graph.initializer}
    (vi,) = [v for v in model.graph.input if v.name not in inits]
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


if __name__ == "__main__":
    onnx.save(load(sys.argv[1]), sys.argv[2])
