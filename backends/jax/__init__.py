"""StableHLO → JAX: interpret a :class:`converter.Module` op by op into ``jax.lax``.

The result is an ordinary traceable JAX function, so ``jax.jit``, ``jax.grad`` and
``jax.vmap`` apply to it.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from converter import dtypes
from converter.interpreter import Interpreter
from converter.module import Module
from converter.signature import Signature, check_leaf, flatten, input_path, unflatten

from . import ops  # noqa: F401 - registers the rules
from .registry import JAX_RULES


class JaxInterpreter(Interpreter):
    """Evaluates StableHLO ops with :data:`backends.jax.registry.JAX_RULES`."""

    registry = JAX_RULES
    direction = "JAX backend"


def ensure_x64(signature: Signature) -> None:
    """Turn on ``jax_enable_x64`` when the signature has 64-bit types.

    Torch models take int64 indices by default; without x64, JAX would silently narrow them
    to int32. The flag is process-wide (JAX has no narrower scope that survives ``jit``), so
    it is switched on only when a converted module needs it.
    """
    wide = {"int64", "uint64", "float64", "complex128"}
    if any(leaf.dtype in wide for leaf in signature.all_args + signature.outputs):
        jax.config.update("jax_enable_x64", True)


class JaxFunction:
    """A converted module as a JAX callable.

    ``fn(*args, **kwargs)`` takes the same user inputs as the source model (arrays with the
    signature's shapes and dtypes) and returns its outputs with the source's pytree
    structure (custom output classes come back as dicts). Parameters are bound from
    :attr:`params`; :meth:`apply` is the pure form ``apply(params, *args, **kwargs)`` for
    ``jax.grad`` and training.

    Attributes:
        params: parameters and buffers by name (torch names for torch models), as jax Arrays.
        signature: the module's :class:`converter.signature.Signature`.

    Raises:
        SignatureMismatchError: on call, for inputs of the wrong structure, shape or dtype
            (names the argument path, e.g. ``args[1]['mask']``).
    """

    def __init__(self, module: Module, device: jax.Device | None = None):
        self.module = module
        self.signature = module.signature
        ensure_x64(self.signature)
        JaxInterpreter(module.mlir).check_supported()
        self.device = device
        self.params = {
            p.name: jax.device_put(np.asarray(module.params[p.name]), device) for p in self.signature.params
        }
        self._jitted = jax.jit(self.apply)

    def apply(self, params: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        """Run the module with explicit ``params`` (pure; differentiable in ``params``)."""
        sig = self.signature
        leaves = flatten((args, kwargs), sig.in_tree)
        if len(leaves) != len(sig.inputs):
            raise ValueError(f"expected {len(sig.inputs)} input leaves, got {len(leaves)}")
        for (path, value), spec in zip(leaves, sig.inputs):
            check_leaf(input_path(path), value, spec)
        missing = [p.name for p in sig.params if p.name not in params]
        if missing:
            raise KeyError(f"params is missing {missing}")
        flat = [params[p.name] for p in sig.params] + [v for _, v in leaves]
        if sig.kept_var_idx is not None:
            flat = [flat[i] for i in sig.kept_var_idx]
        outs = JaxInterpreter(self.module.mlir).run(*flat)
        return unflatten(sig.out_tree, outs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._jitted(self.params, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<JaxFunction of {self.module!r}>"


def to_jax(module: Module, *, device: jax.Device | None = None) -> JaxFunction:
    """Convert a :class:`converter.Module` to a JAX callable.

    Args:
        module: the module.
        device: where to put the parameters (default: JAX's default device).

    Raises:
        UnsupportedOpError: listing every StableHLO op (and custom_call target) without a rule.
    """
    return JaxFunction(module, device)


__all__ = ["JaxFunction", "JaxInterpreter", "to_jax", "dtypes"]
