"""Kept for imports of the old location: the torch internals live in
:mod:`converter._torch_internal` (the one module that touches them)."""

from converter._torch_internal import _CACHE, cached_cia_ops, lazy_clone  # noqa: F401
