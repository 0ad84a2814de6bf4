"""Optional dependencies, imported on use: a missing one is a
:class:`~converter.errors.MissingDependencyError` that names the extra installing it, never
a silently different result (``to_onnx`` without onnxruntime would skip constant folding)."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependencyError

#: importable module -> (distribution, extra of this project that installs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "onnx": ("onnx", "onnx"),
    "onnxruntime": ("onnxruntime", "onnx"),
}


def require(module: str, purpose: str) -> ModuleType:
    """``module`` imported (one of :data:`EXTRAS`).

    Raises:
        MissingDependencyError: it is not installed (or cannot be imported); the cause is
            the ``ImportError``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        package, extra = EXTRAS[module]
        raise MissingDependencyError(package, extra, purpose) from e
