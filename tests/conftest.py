"""Test-session set-up: runs before any test module imports JAX."""

import os
import shutil
import tempfile
from importlib.metadata import version

from boxjax import platform

LEGACY_FUSION_EMITTER = tuple(int(p) for p in version("jaxlib").split(".")[:2]) < (0, 11)
"""XLA knows `--xla_cpu_use_fusion_emitters` in jaxlib 0.10 (the CI's) but not in 0.11.2 (the GPU machine's),
where an unknown flag aborts the process."""
TEST_XLA_FLAGS = (
    "--xla_backend_optimization_level=0",
    "--xla_llvm_disable_expensive_passes=true",
    *(("--xla_cpu_use_fusion_emitters=false",) if LEGACY_FUSION_EMITTER else ()),
)
MADE_CACHE_DIR = "BOXJAX_TEST_CACHE_DIR" not in os.environ
if MADE_CACHE_DIR:
    os.environ["BOXJAX_TEST_CACHE_DIR"] = tempfile.mkdtemp(prefix="boxjax-test-cache-")
RUN_CACHE_DIR = os.environ["BOXJAX_TEST_CACHE_DIR"]
"""One compilation cache per test run: made by the first process (the controller), inherited through the
environment by its xdist workers and the subprocesses they start."""

platform.add_xla_flags(platform.CPU_XLA_FLAGS)
# Most of the suite's time is XLA compiling small programs that then run a few steps: less LLVM optimisation
# compiles them faster (a stance reset-and-step test: 29.7 -> 24.9 s on 2 cores), and the legacy fusion
# emitter compiles the block step in 21-24 s instead of 33 s (simple body, 2 worlds, 2 cores), at no cost to
# what is checked (XLA's own HLO passes, fusion included, are unchanged; no fast-math either way).
platform.add_xla_flags(TEST_XLA_FLAGS)
# Hermetic and as on a fresh CI machine: the cache starts empty with every run (the training CLIs'
# `platform.configure` would otherwise point JAX at ~/.cache/boxjax, filled by earlier runs), yet a program
# that several tests or processes compile alike (the same env and config) compiles once per run. Set through
# the environment so that subprocesses share it too (the two-device checks; a CLI's `platform.configure`
# still points at its own cache).
os.environ["JAX_COMPILATION_CACHE_DIR"] = RUN_CACHE_DIR
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "1.0"

import jax  # noqa: E402  (after the environment above, which JAX reads when it starts)

jax.config.update("jax_compilation_cache_dir", RUN_CACHE_DIR)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def pytest_unconfigure(config):
    """The process that made the run's cache (the controller, never an xdist worker) removes it at the end."""
    if MADE_CACHE_DIR:
        shutil.rmtree(RUN_CACHE_DIR, ignore_errors=True)
