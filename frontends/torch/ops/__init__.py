"""ATen → JAX rules, one module per op family; importing this package registers all."""

from . import elementwise, linalg, shape  # noqa: F401
