"""One registry class shared by every IR's rule table.

Each conversion direction owns one :class:`Registry` (ATen ops → JAX, StableHLO ops → jax.lax,
ONNX ops → JAX, ...). Rules are added with the :meth:`Registry.register` decorator, keyed by the
source op; registering a key twice is an error, like ``jax.interpreters.mlir.register_lowering``
refusing silent overrides.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class RegistryCollisionError(KeyError):
    """A key was registered twice in the same registry."""


class Registry:
    """A mapping from source-op keys to conversion rules.

    Args:
        name: a human-readable name used in error messages (``"ATen → JAX"``).
    """

    def __init__(self, name: str):
        self.name = name
        self._rules: dict[Hashable, Callable[..., Any]] = {}

    def register(self, *keys: Hashable) -> Callable[[F], F]:
        """Decorator: register the decorated rule under every key in ``keys``.

        Raises:
            RegistryCollisionError: a key already has a rule.
        """

        def deco(rule: F) -> F:
            for key in keys:
                self.add(key, rule)
            return rule

        return deco

    def add(self, key: Hashable, rule: Callable[..., Any]) -> None:
        """Register ``rule`` for ``key``; raises :class:`RegistryCollisionError` on a repeat."""
        if key in self._rules:
            raise RegistryCollisionError(
                f"{self.name}: {key!r} is already registered to {self._rules[key].__qualname__}"
            )
        self._rules[key] = rule

    def get(self, key: Hashable) -> Callable[..., Any] | None:
        """The rule for ``key``, or None."""
        return self._rules.get(key)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._rules

    def keys(self) -> Iterable[Hashable]:
        """Every registered key."""
        return self._rules.keys()

    def __len__(self) -> int:
        return len(self._rules)
