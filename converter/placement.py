"""Host/device placement as the StableHLO records it: the vocabulary every layer reads.

JAX marks host computation with ``mhlo.frontend_attributes = {_xla_compute_type = "host"}``
(on a ``func.call`` or on loose ops) and host memory with ``mhlo.memory_kind`` attributes
and ``annotate_device_placement`` custom calls (``_xla_buffer_placement``). This module only
reads those marks; it imports nothing above ``converter``'s core, so the placement pass
(:mod:`converter.passes.placement`, which rewrites modules into one canonical form) and the
backends' placement rules (which run that form) share it without depending on each other.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from . import mlir
from .errors import ConversionError

FRONTEND_ATTRS = "mhlo.frontend_attributes"
COMPUTE_TYPE = "_xla_compute_type"
MEMORY_KIND = "mhlo.memory_kind"
#: every memory kind a buffer or ``@main`` argument/result can name
MEMORY_KINDS = ("device", "pinned_host", "unpinned_host")
#: the memory kinds in host memory
HOST_KINDS = ("pinned_host", "unpinned_host")


def is_host(op: ir.Operation) -> bool:
    """True when ``op`` carries ``_xla_compute_type = "host"``."""
    if FRONTEND_ATTRS not in op.attributes:
        return False
    attrs = mlir.decode_attribute(op.attributes[FRONTEND_ATTRS])
    return isinstance(attrs, dict) and attrs.get(COMPUTE_TYPE) == "host"


def host_functions(module: ir.Module) -> list[str]:
    """Names of the functions called with the host attribute."""
    names: list[str] = []
    for fn in mlir.functions(module).values():
        for op in mlir.walk_ops(fn):
            if op.name == "func.call" and is_host(op):
                callee = mlir.Op(op).attr("callee")
                if callee not in names:
                    names.append(callee)
    return names


def buffer_placement(op: mlir.Op) -> str:
    """The memory kind an ``annotate_device_placement`` custom call puts its operand in (its
    ``_xla_buffer_placement`` frontend attribute: ``device``, ``pinned_host`` or
    ``unpinned_host``), as JAX's ``wrap_with_memory_kind`` writes it.

    Raises:
        ConversionError: the attribute is missing or names another memory kind.
    """
    kind = (op.attr(FRONTEND_ATTRS) or {}).get("_xla_buffer_placement")
    if kind not in MEMORY_KINDS:
        raise ConversionError(
            f"annotate_device_placement with _xla_buffer_placement={kind!r}; expected one of {MEMORY_KINDS}"
        )
    return kind
