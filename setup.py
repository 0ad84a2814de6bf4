"""Package layout only (metadata lives in pyproject.toml): the repository keeps ``frontends/``
and ``backends/`` at its top level, and they install inside the ``converter`` namespace as
``converter.frontends`` and ``converter.backends``."""

from setuptools import find_packages, setup

LAYERS = ("frontends", "backends")
packages = find_packages(include=["converter", "converter.*"])
packages += [f"converter.{p}" for p in find_packages(include=[f"{layer}*" for layer in LAYERS])]
setup(packages=packages, package_dir={f"converter.{layer}": layer for layer in LAYERS})
