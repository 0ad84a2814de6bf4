"""ONNX models whose shapes come from input values: specialized per value at call time.

An ONNX graph may compute a shape, axes, a count or sizes from a graph *input*'s value:
``Reshape(x, shape)``, ``Expand``, ``ConstantOfShape``, ``Slice`` with ``starts``/``ends``
inputs, ``TopK`` with a ``k`` input, ``Resize`` with ``sizes``. StableHLO (like ``jax.jit``)
needs those values at compile time. :func:`converter.frontends.onnx.from_onnx` then returns a
:class:`ValueSpecializedModel` instead of a :class:`converter.Module`: it has no single
StableHLO module (so no ``mlir``/``text``/``save``), but :meth:`ValueSpecializedModel.to_jax`
/ :meth:`~ValueSpecializedModel.to_torch` take those inputs' *values* at call time and
specialize on them, as ``jax.jit``'s static arguments: one conversion
(``from_onnx(..., static_inputs=values)``, a :class:`~converter.Module`) per distinct value,
cached; the other inputs are ordinary arrays. Under ``jax.jit`` or ``torch.export`` tracing
such an input must be a concrete array (a tracer raises
:class:`converter.errors.SignatureMismatchError` naming it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx

from converter.errors import ConversionError, SignatureMismatchError
from converter.module import Module
from converter.signature import Signature, input_path

from .graph import StaticValueRequired


def graph_input_sources(graph: onnx.GraphProto, names: list[str], inputs: set[str]) -> list[str]:
    """The graph inputs among ``inputs`` that the values ``names`` are computed from (their
    ancestors through ``graph``'s nodes, subgraphs' captured values included), in graph
    input order."""
    found = value_sources(graph, names, inputs)
    return [vi.name for vi in graph.input if vi.name in found]


def value_sources(graph: onnx.GraphProto, names: list[str], sources: set[str]) -> set[str]:
    """The names among ``sources`` (graph inputs, initializers) that the values ``names``
    are computed from: their ancestors through ``graph``'s nodes, subgraphs' captured values
    included."""
    producer: dict[str, onnx.NodeProto] = {o: n for n in graph.node for o in n.output if o}
    seen: set[str] = set()
    found: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in sources:
            found.add(name)
            continue
        node = producer.get(name)
        if node is None:
            continue
        stack.extend(i for i in node.input if i)
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                stack.extend(i for n in sub.node for i in n.input if i)
    return found


def _key(value: Any) -> tuple:
    arr = np.asarray(value)
    return (str(arr.dtype), arr.shape, arr.tobytes())


def _concrete(path: str, name: str, value: Any) -> np.ndarray:
    """``value`` as a NumPy array, refusing a tracer (``jax.jit``) or a fake tensor
    (``torch.export``): the input sets shapes, so its value must be known."""
    import jax

    if isinstance(value, jax.core.Tracer):
        raise SignatureMismatchError(
            f"{path} ({name!r}): the model computes shapes from this input's value, so it must be a "
            "concrete array, not a traced one (pass it as a static argument of jax.jit)"
        )
    try:
        import torch

        if isinstance(value, torch.Tensor):
            from converter._torch_internal import FakeTensor

            if isinstance(value, FakeTensor) or value.device.type == "meta":
                raise SignatureMismatchError(
                    f"{path} ({name!r}): the model computes shapes from this input's value, so it "
                    "must be a concrete tensor; torch.export cannot trace it as an input"
                )
            return value.detach().cpu().numpy()
    except ImportError:  # torch is optional here
        pass
    return np.asarray(value)


class ValueSpecializedModel:
    """An ONNX model whose shapes (axes, counts, sizes) are computed from the values of some
    graph inputs, :attr:`value_inputs` (see the module docstring): what
    :func:`converter.frontends.onnx.from_onnx` returns for such a model instead of a
    :class:`converter.Module`, as ``jax.jit`` with static arguments is a function of their
    values rather than one compiled program.

    :meth:`specialize_values` converts it for given values of those inputs into a
    :class:`~converter.Module` (cached per value); :meth:`to_jax` and :meth:`to_torch` do so
    at each call. :meth:`to_onnx` returns the source model (already ONNX). It is not a
    Module: it has no single StableHLO module, so no ``mlir``, ``text``, ``save`` or
    ``specialize`` (``from_onnx(..., static_inputs=...)`` gives a Module).

    Attributes:
        value_inputs: the graph inputs whose values the conversion needs (grows when a
            specialization finds another).
        signature: every graph input (``signature.inputs``) and the parameters; the outputs
            as ONNX shape inference declares them (a dimension it cannot tell is None).
        params: the ONNX initializers by name.
        onnx_model: the source ``onnx.ModelProto``.
        source: ``"onnx"``.
        meta: provenance (``onnx_version``, ``producer``, ``graph``, ``value_inputs``).
    """

    def __init__(
        self,
        model: onnx.ModelProto,
        signature: Signature,
        params: dict[str, np.ndarray],
        value_inputs: list[str],
        convert: Callable[[dict[str, np.ndarray]], Module],
        meta: dict[str, Any] | None = None,
    ):
        self.signature = signature
        self.params = dict(params)
        self.source = "onnx"
        self.meta = dict(meta or {})
        self.meta["value_inputs"] = list(value_inputs)
        self.value_inputs = list(value_inputs)
        self.onnx_model = model
        self._convert = convert
        self._cache: dict[tuple, Module] = {}

    def _not_one_module(self, what: str) -> ConversionError:
        return ConversionError(
            f"this ONNX model computes shapes from the values of inputs {self.value_inputs}, so it {what}: "
            "call to_jax()/to_torch() (specialized per value at call time), or convert with "
            "from_onnx(..., static_inputs={name: array}) / specialize_values({name: array})"
        )

    def __repr__(self) -> str:
        s = self.signature
        return (
            f"<converter.ValueSpecializedModel from onnx: {len(s.params)} params, {len(s.inputs)} inputs, "
            f"shapes from the values of {self.value_inputs}>"
        )

    # ------------------------------------------------------------------ specialization

    def specialize_values(self, values: dict[str, Any]) -> Module:
        """The model converted with ``values`` (name → array) of :attr:`value_inputs` folded
        in as constants (``from_onnx(..., static_inputs=values)``); cached per value. Its
        signature has the other inputs only.

        Raises:
            SignatureMismatchError: a value input is missing from ``values``.
            StaticValueRequired: the conversion needs the value of another graph input
                (then it is added to :attr:`value_inputs`; the callers of ``to_jax`` and
                ``to_torch`` pass every input and never see this).
        """
        missing = [n for n in self.value_inputs if n not in values]
        if missing:
            raise SignatureMismatchError(
                f"no values for the inputs {missing}, from whose values the model computes shapes"
            )
        static = {n: np.asarray(values[n]) for n in self.value_inputs}
        key = tuple((n, *_key(static[n])) for n in self.value_inputs)
        if key not in self._cache:
            self._cache[key] = self._convert(static)
        return self._cache[key]

    def _specialized(self, leaves: list[Any]) -> tuple[Module, list[Any]]:
        """The specialization for the call's input ``leaves`` (one per graph input) and the
        leaves its signature takes (the non-value inputs)."""
        names = [s.name for s in self.signature.inputs]
        by_name = dict(zip(names, leaves, strict=True))
        while True:
            values = {
                n: _concrete(input_path(f"[0][{names.index(n)}]"), n, by_name[n]) for n in self.value_inputs
            }
            try:
                module = self.specialize_values(values)
                break
            except StaticValueRequired as e:
                graph = self.onnx_model.graph
                more = graph_input_sources(graph, e.names, set(names) - set(self.value_inputs))
                if not more:
                    raise
                self.value_inputs += [n for n in names if n in more]
                self.meta["value_inputs"] = list(self.value_inputs)
        rest = [by_name[s.name] for s in module.signature.inputs]
        return module, rest

    def _leaves(self, args: tuple, kwargs: dict) -> list[Any]:
        if kwargs:
            raise SignatureMismatchError(
                f"unexpected keyword arguments {sorted(kwargs)} (inputs are positional)"
            )
        n = len(self.signature.inputs)
        if len(args) != n:
            raise SignatureMismatchError(f"expected {n} positional inputs, got {len(args)}")
        return list(args)

    # ------------------------------------------------------------------ backends

    def to_jax(self, **kwargs: Any) -> ValueSpecializedFunction:
        """A callable of every graph input (in order) that converts per value of
        :attr:`value_inputs` (cached) and runs the JAX function of that specialization
        (``to_jax(**kwargs)`` of it, also cached)."""
        return ValueSpecializedFunction(self, kwargs)

    def to_torch(self, *, input_shapes: Any = None, **kwargs: Any) -> Any:
        """A ``torch.nn.Module`` of every graph input (in order) that converts per value of
        :attr:`value_inputs` (cached) and runs that specialization's ``to_torch(**kwargs)``;
        the ONNX initializers are one set of parameters shared by every specialization.

        Raises:
            ConversionError: ``input_shapes`` given (the shapes depend on values).
        """
        if input_shapes is not None:
            raise self._not_one_module("cannot be specialized by shapes alone")
        from .values_torch import ValueSpecializedTorchModule

        return ValueSpecializedTorchModule(self, kwargs)

    def to_onnx(self, *, path: Any = None, opset: int | None = None, **kwargs: Any) -> onnx.ModelProto:
        """The source model (a copy): it is ONNX already, and no single StableHLO module
        stands for it; written to ``path`` too when given (``onnx.save_model``).

        Raises:
            ConversionError: ``opset`` differs from the model's (no conversion is done).
        """
        out = onnx.ModelProto()
        out.CopyFrom(self.onnx_model)
        have = next((o.version for o in out.opset_import if o.domain in ("", "ai.onnx")), None)
        if opset is not None and opset != have:
            raise self._not_one_module(f"is not converted to opset {opset} (it is opset {have})")
        if path is not None:
            from converter.fileio import atomic_path

            with atomic_path(path) as tmp:
                onnx.save_model(out, os.fspath(tmp))
        return out


class ValueSpecializedFunction:
    """``ValueSpecializedModel.to_jax()``: ``f(*inputs)`` specializes on the values of the
    model's :attr:`~ValueSpecializedModel.value_inputs` (one conversion and one JAX function
    per distinct value, cached in :attr:`functions`) and returns that function's outputs."""

    def __init__(self, module: ValueSpecializedModel, options: dict[str, Any]):
        self.module = module
        self.options = options
        self.functions: dict[int, Any] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        specialized, rest = self.module._specialized(self.module._leaves(args, kwargs))
        fn = self.functions.get(id(specialized))
        if fn is None:
            fn = self.functions[id(specialized)] = specialized.to_jax(**self.options)
        return fn(*rest)


#: the former name of :class:`ValueSpecializedModel` (a Module subclass until it became a
#: type of its own)
ValueDependentModule = ValueSpecializedModel

__all__ = ["ValueDependentModule", "ValueSpecializedFunction", "ValueSpecializedModel", "graph_input_sources"]
