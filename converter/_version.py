"""The project's one version number: ``pyproject.toml`` reads it (setuptools' dynamic
``version``), ``converter.__version__`` and ``convert --version`` show it."""

__version__ = "0.1.0"
