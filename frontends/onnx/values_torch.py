"""``ValueSpecializedModel.to_torch()``: a ``torch.nn.Module`` specializing on input values
(see :mod:`converter.frontends.onnx.values`); imported only when asked for, so the ONNX frontend does
not load torch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .values import ValueSpecializedModel


class ValueSpecializedTorchModule(torch.nn.Module):
    """``forward(*inputs)``: the graph inputs in order; the values of
    ``module.value_inputs`` select (and on first sight build) a specialization, a
    :class:`converter.backends.torch.TorchModule` held in :attr:`specializations`, which runs on the
    other inputs.

    Parameters: the ONNX initializers (``signature.params`` of kind ``parameter``) are one
    set, registered by the first specialization and shared by the later ones (training
    through any of them updates the same tensors); constants a specialization folds from the
    values are its own.
    """

    def __init__(self, module: ValueSpecializedModel, options: dict[str, Any]):
        super().__init__()
        self.module = module
        self.options = options
        self.specializations = torch.nn.ModuleDict()
        self._index: dict[int, str] = {}
        self._shared: dict[str, torch.Tensor] = {}

    def _get(self, specialized: Any) -> torch.nn.Module:
        key = self._index.get(id(specialized))
        if key is not None:
            return self.specializations[key]
        sub = specialized.to_torch(**self.options)
        kinds = {p.name: p.kind for p in specialized.signature.params}
        for attr, name in sub.param_names.items():
            if kinds.get(name) != "parameter":
                continue
            if name in self._shared:
                shared = self._shared[name]
                if isinstance(shared, torch.nn.Parameter):
                    setattr(sub, attr, shared)
                else:
                    sub.register_buffer(attr, shared)
            else:
                self._shared[name] = getattr(sub, attr)
        key = self._index[id(specialized)] = f"values_{len(self.specializations)}"
        self.specializations[key] = sub
        return sub

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        specialized, rest = self.module._specialized(self.module._leaves(args, kwargs))
        return self._get(specialized)(*rest)


__all__ = ["ValueSpecializedTorchModule"]
