"""Host/device placement in the torch backend (issue 4, parts 2 and 5).

A module is converted for one device (``to_torch(device=...)``, default CPU). Its canonical
placement (:mod:`converter.passes.placement`) maps onto torch devices:

- a ``func.call`` carrying ``_xla_compute_type = "host"`` computes on CPU tensors: its
  operands are copied to CPU before the callee runs (factory ops inside it create CPU
  tensors) and its results are copied back to the module's device afterwards (the pass
  outlines host ops inside ``while``/``if``/``case`` regions into host calls there too; a
  loose host-marked op the interpreter still meets is placed the same way on its own);
- an ``annotate_device_placement`` left in the middle of a function copies its operand to
  CPU for a host memory kind and back to the device for ``device`` (``ops/placement.py``);
- a ``@main`` argument or result whose ``memory_kind`` is ``pinned_host``/``unpinned_host``
  lives on CPU (host-memory arguments are copied to the device to be computed on, as XLA
  does; host-memory results are copied to CPU at the end). torch has no memory kinds: on a
  CUDA module ``pinned_host`` results and parameters are page-locked (``pin_memory``), on any
  other device both kinds are plain CPU tensors.

Every copy is an explicit ``Tensor.to`` while tracing, so it is an ``aten._to_copy`` node with
a ``device`` in the GraphModule (and in ``torch.export``/``torch.compile`` graphs). A copy to
the device the value is already on is no copy at all: on a CPU module the graph has none.
A value copied to the device and later needed on CPU again reuses its CPU original, so no
value crosses twice (consecutive host calls, a host-memory argument read by a host call).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from converter.errors import ConversionError, SignatureMismatchError
from converter.placement import HOST_KINDS
from converter.signature import LeafSpec

CPU = torch.device("cpu")
aten = torch.ops.aten


def resolve_device(device: torch.device | str | None) -> torch.device:
    """``device`` as a ``torch.device`` (``None`` is CPU); a CUDA device without an index gets
    the current one, so it compares equal to the devices tensors report."""
    device = torch.device("cpu" if device is None else device)
    if device.type == "cuda" and device.index is None and torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def home(spec: LeafSpec, device: torch.device) -> torch.device:
    """Where an argument or result of ``spec`` lives: CPU for a host memory kind, else
    ``device``."""
    return CPU if spec.memory_kind in HOST_KINDS else device


def same_device(a: torch.device, b: torch.device) -> bool:
    """``a`` and ``b`` are the same device (a missing index means index 0)."""
    return a.type == b.type and (a.index or 0) == (b.index or 0)


def check_device(path: str, value: torch.Tensor, spec: LeafSpec, device: torch.device) -> None:
    """Inputs are never moved implicitly.

    Raises:
        SignatureMismatchError: ``value`` is not on ``home(spec, device)``; names ``path``.
    """
    want = home(spec, device)
    if not same_device(value.device, want):
        where = f"memory kind {spec.memory_kind}" if want == CPU and want != device else "the module"
        raise SignatureMismatchError(
            f"{path}: input is on {value.device}, but {where} is on {want} (move it with .to({str(want)!r}))"
        )


def check_parameter(name: str, value: torch.Tensor, spec: LeafSpec, device: torch.device) -> None:
    """The graph was traced for ``device``: a parameter moved elsewhere (``module.to(...)``)
    cannot be computed on.

    Raises:
        ConversionError: ``value`` is not on ``home(spec, device)``; names the parameter.
    """
    want = home(spec, device)
    if not same_device(value.device, want):
        raise ConversionError(
            f"parameter {name} is on {value.device}, but the module was converted for {want}: "
            "convert again with to_torch(device=...) instead of moving the module"
        )


def place_parameter(value: torch.Tensor, spec: LeafSpec, device: torch.device) -> torch.Tensor:
    """A parameter value on its home device; pinned when it is ``pinned_host`` on CUDA."""
    value = value.to(home(spec, device))
    if spec.memory_kind == "pinned_host" and device.type == "cuda":
        value = value.pin_memory()
    return value


class Placer:
    """Moves values between the module's device and CPU while the interpreter is traced.

    ``current`` is the device ops compute on now (CPU inside a host call).
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.current = device
        self._origin: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def to(self, value: Any, device: torch.device, *, pin: bool = False) -> Any:
        """``value`` (a tensor, or a tuple of them) on ``device``."""
        if isinstance(value, (tuple, list)):
            return type(value)(self.to(v, device, pin=pin) for v in value)
        if not isinstance(value, torch.Tensor) or same_device(value.device, device):
            return value
        seen = self._origin.get(id(value))
        if seen is not None and seen[0] is value and same_device(seen[1].device, device):
            return seen[1]
        if pin and device.type == "cpu" and value.device.type == "cuda":  # page-locked copy
            moved = torch.empty_like(value, device=device, pin_memory=True).copy_(value)
        else:
            moved = value.to(device)
        self._origin[id(moved)] = (moved, value)
        return moved

    @contextmanager
    def on(self, device: torch.device) -> Iterator[None]:
        """Compute on ``device``: factory ops default to it and constants are put there."""
        saved, self.current = self.current, device
        try:
            if device == CPU and self.device == CPU:  # all on CPU: the default already
                yield
            else:
                with torch.device(device):
                    yield
        finally:
            self.current = saved

    def host_call(self, run: Callable[[list[Any]], list[Any]], operands: list[Any]) -> list[Any]:
        """Run a host-placed call: ``run(operands)`` on CPU copies, results back on the
        device the caller computes on."""
        caller = self.current
        with self.on(CPU):
            out = run(self.to(operands, CPU))
        return [self.to(v, caller) for v in out]

    def main(
        self,
        run: Callable[..., list[Any]],
        args: Sequence[Any],
        arg_specs: Sequence[LeafSpec],
        out_specs: Sequence[LeafSpec],
    ) -> tuple[Any, ...]:
        """Run ``@main``: host-memory arguments (on CPU) are copied to the device, host-memory
        results copied to CPU (page-locked for ``pinned_host`` on CUDA)."""
        with self.on(self.device):
            args = [
                self.to(a, self.device) if s.memory_kind in HOST_KINDS else a
                for a, s in zip(args, arg_specs, strict=True)
            ]
            outs = list(run(*args))
        for i, spec in enumerate(out_specs[: len(outs)]):
            if spec.memory_kind in HOST_KINDS:
                outs[i] = self.to(outs[i], CPU, pin=spec.memory_kind == "pinned_host")
        return tuple(outs)


def fold_constant_transfers(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Constants come from NumPy on CPU and are copied to the module's device when used
    there; do that copy once now: the ``_tensor_constant`` buffer is stored on the device and
    its ``_to_copy`` node removed. Unused nodes (copies nothing reads) are removed too."""
    for sub in gm.modules():
        if not isinstance(sub, torch.fx.GraphModule):
            continue
        for node in list(sub.graph.nodes):
            src = _constant_copied(node)
            if src is None:
                continue
            get_attr = src if src.op == "get_attr" else src.args[0]
            value = getattr(sub, get_attr.target)
            setattr(sub, get_attr.target, value.to(node.kwargs["device"]))
            node.replace_all_uses_with(src)
            sub.graph.erase_node(node)
        sub.graph.eliminate_dead_code()
        sub.recompile()
    return gm


def _constant_copied(node: torch.fx.Node) -> torch.fx.Node | None:
    """For ``_to_copy(device=d)`` of a constant (``get_attr``, maybe via ``lift_fresh_copy``)
    used only there and keeping its dtype: the node the copy reads. Else ``None``."""
    if node.op != "call_function" or node.target is not aten._to_copy.default:
        return None
    if set(node.kwargs) - {"dtype", "layout", "device"} or "device" not in node.kwargs:
        return None
    src = node.args[0]
    chain = [src]
    if src.op == "call_function" and src.target is aten.lift_fresh_copy.default:
        chain.append(src.args[0])
    if chain[-1].op != "get_attr" or any(len(n.users) != 1 for n in chain):
        return None
    val = node.meta.get("val")
    if val is None or val.dtype != src.meta.get("val", val).dtype:
        return None
    return src


__all__ = [
    "CPU",
    "HOST_KINDS",
    "Placer",
    "check_device",
    "check_parameter",
    "fold_constant_transfers",
    "home",
    "place_parameter",
    "resolve_device",
    "same_device",
]
