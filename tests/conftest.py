"""Test-session set-up: runs before any test module imports JAX."""

import jax

from boxjax import platform

TEST_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true")

platform.add_xla_flags(platform.CPU_XLA_FLAGS)
# Most of the suite's time is XLA compiling small programs that then run a few steps: less LLVM optimisation
# compiles them faster (a stance reset-and-step test: 29.7 -> 24.9 s on 2 cores) at no cost to what is
# checked (XLA's own HLO passes, fusion included, are unchanged; no fast-math either way).
platform.add_xla_flags(TEST_XLA_FLAGS)
# Hermetic and as on a fresh CI machine: the training CLIs' `platform.configure` points JAX at the persistent
# compilation cache, which would otherwise fill ~/.cache/boxjax from the whole suite and feed later runs.
jax.config.update("jax_enable_compilation_cache", False)
