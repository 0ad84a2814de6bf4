"""XLA's fast-compile settings for the test processes.

XLA compiles took about 40% of the default test run's CPU (measured per compile: 506 of about
1,200 CPU seconds). The settings in :data:`FAST` cut that by about two thirds: LLVM at -O0
without its expensive passes, and XLA's classic elemental emitters instead of the MLIR fusion
emitters. Neither turns on fast-math; results differ from the default settings only in
rounding where -O2 contracts a multiply-add, and in a few elementwise kernels the classic
emitters compute differently (``cbrt`` of float16 rounds in float16, ``reduce_precision`` to
zero mantissa bits turns NaN into infinity, a conversion of -0.0 to a FNUZ float8 type gives
its NaN).

:func:`install` adds :data:`FAST` to the options of every XLA compile in this process, except
during a test marked ``xla_defaults``: a test whose expectation is XLA's own default-setting
output (bit-exact kernels, ulp-level tolerances) keeps the settings users get. Subprocesses
take :data:`FAST` from ``XLA_FLAGS`` (:func:`export_to_subprocesses`).

LLVM -O0 *with* the fusion emitters (what ``jax_disable_most_optimizations`` selects) is not
used: XLA miscompiles SqueezeNet's softmax there (its output NaN, or the logits zero,
depending on which values the program returns).

This module holds the tests' one use of a private JAX module (``jax._src.compiler``).
"""

from __future__ import annotations

import os

import jax
from jax._src import compiler

#: XLA debug options for a fast compile (the names of ``xla.DebugOptions`` fields).
FAST: dict[str, int | bool] = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
    # Eigen's own thread pool in matmuls and convolutions: 3 test processes share 2 cores,
    # where its threads only add hand-offs (about 8% of a torch- and ONNX-heavy file's CPU)
    "xla_cpu_multi_thread_eigen": False,
}

#: Whether compiles in this process take :data:`FAST` now (see :func:`install`).
enabled = True
#: Whether :func:`export_to_subprocesses` set ``XLA_FLAGS`` (the user had not).
exported = False
#: The environment variable that tells a test process the ``XLA_FLAGS`` it inherited are
#: :func:`flags` set by its parent test process, not the user's.
_MARK = "CONVERTER_TESTS_XLA_FLAGS"


def flags() -> str:
    """:data:`FAST` as ``XLA_FLAGS`` text, for a subprocess's environment."""
    return " ".join(f"--{k}={str(v).lower()}" for k, v in FAST.items())


def install() -> None:
    """Make every XLA compile of this process take :data:`FAST` while :data:`enabled`
    (idempotent)."""
    if getattr(compiler.get_compile_options, "_fast", False):
        return
    original = compiler.get_compile_options

    def get_compile_options(*args, **kwargs):
        options = original(*args, **kwargs)
        if enabled:
            given = dict(options.env_option_overrides)
            missing = [(k, v) for k, v in FAST.items() if k not in given]
            options.env_option_overrides = [*given.items(), *missing]
        return options

    get_compile_options._fast = True
    compiler.get_compile_options = get_compile_options


def use(fast: bool) -> None:
    """Compile with :data:`FAST` from now on (``fast``) or with XLA's defaults. On a change to
    the defaults, JAX's caches are cleared: an executable compiled with :data:`FAST` (a jitted
    function, an op run eagerly on the same shapes) would be reused otherwise. (The other way,
    an executable compiled with the defaults may serve a fast test: only slower to build.)"""
    global enabled
    if enabled and not fast:
        jax.clear_caches()
    enabled = fast


def export_to_subprocesses() -> None:
    """Put :func:`flags` in this process's ``XLA_FLAGS`` for the processes it starts, after
    creating JAX's CPU client (which has read ``XLA_FLAGS`` then, for good): this process's
    own compiles keep following :data:`enabled`. A ``XLA_FLAGS`` set by the user is left
    as it is. A test process started by another (a pytest-xdist worker) creates its client
    without the flags its parent exported, then exports them again."""
    global exported
    given = os.environ.get("XLA_FLAGS")
    # flags set by the test process that started this one (pytest-xdist's workers)
    if given is not None and given == os.environ.get(_MARK):
        del os.environ["XLA_FLAGS"]
    jax.devices("cpu")
    if "XLA_FLAGS" not in os.environ:
        os.environ["XLA_FLAGS"] = os.environ[_MARK] = flags()
        exported = True
