"""Test-session set-up: runs before any test module imports JAX."""

from boxjax import platform

platform.add_xla_flags(platform.CPU_XLA_FLAGS)
