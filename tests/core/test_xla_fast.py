"""The suite's XLA settings (tests/xla_fast.py): fast ones for every compile, XLA's defaults
for a test marked ``xla_defaults``."""

import subprocess
import sys

import pytest
from jax._src import compiler

from tests import xla_fast


def test_unmarked_tests_compile_with_the_fast_settings():
    assert dict(compiler.get_compile_options(1, 1).env_option_overrides) == xla_fast.FAST


def test_options_given_by_the_caller_win():
    given = compiler.get_compile_options(1, 1, env_options_overrides={"xla_cpu_use_fusion_emitters": True})
    assert dict(given.env_option_overrides)["xla_cpu_use_fusion_emitters"] is True


@pytest.mark.xla_defaults
def test_marked_tests_compile_with_xla_defaults():
    assert compiler.get_compile_options(1, 1).env_option_overrides == []


def test_flags_for_subprocesses():
    assert xla_fast.flags().split() == [
        "--xla_backend_optimization_level=0",
        "--xla_llvm_disable_expensive_passes=true",
        "--xla_cpu_use_fusion_emitters=false",
        "--xla_cpu_multi_thread_eigen=false",
    ]


def test_subprocesses_inherit_the_fast_settings():
    if not xla_fast.exported:
        pytest.skip("XLA_FLAGS was set by the user: left as it is")
    script = "import os; print(os.environ['XLA_FLAGS'])"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == xla_fast.flags().split()


@pytest.mark.xla_defaults
def test_a_worker_process_compiles_at_defaults_when_marked():
    """This process's CPU client was made without the exported flags, also in a pytest-xdist
    worker, which inherits them from the controller: XLA's classic emitter turns NaN into
    infinity in ``reduce_precision`` to no mantissa bits, its default one keeps NaN."""
    import jax
    import numpy as np
    from jax import lax

    got = jax.jit(lambda x: lax.reduce_precision(x, exponent_bits=11, mantissa_bits=0))(np.array([np.nan]))
    assert np.isnan(np.asarray(got)).all()


def test_switching_settings_drops_executables_compiled_under_the_other():
    """An op run eagerly reuses its cached executable by shape and dtype: after a switch it is
    compiled again, so a marked test never runs code compiled with the fast settings. (XLA
    0.10's classic emitter turns NaN into infinity here, its default one keeps NaN.)"""
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    x = np.array([np.nan, 1.5], np.float64)
    try:
        fast = lax.reduce_precision(jnp.asarray(x), exponent_bits=11, mantissa_bits=0)
        xla_fast.use(fast=False)
        default = lax.reduce_precision(jnp.asarray(x), exponent_bits=11, mantissa_bits=0)
    finally:
        xla_fast.use(fast=True)
    assert not np.isnan(np.asarray(fast)[0]) and np.isnan(np.asarray(default)[0])
