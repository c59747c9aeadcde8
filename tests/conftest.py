"""Test-session set-up: runs before any test module imports JAX."""

import jax

from boxjax import platform

platform.add_xla_flags(platform.CPU_XLA_FLAGS)
# Hermetic and as on a fresh CI machine: the training CLIs' `platform.configure` points JAX at the persistent
# compilation cache, which would otherwise fill ~/.cache/boxjax from the whole suite and feed later runs.
jax.config.update("jax_enable_compilation_cache", False)
