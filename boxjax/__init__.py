"""boxjax: train a physically simulated humanoid boxer with PPO on GPU (MJX-Warp) or CPU (MuJoCo).

Importing it adds the XLA flags the CPU needs to $XLA_FLAGS (`boxjax.platform.apply_cpu_flags`), so import
it before anything runs JAX.
"""

import os

from boxjax import platform as _platform

__version__ = "0.1.0"

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
"""The package's data: the punch library, the shipped walking teachers and trained blockers."""

_platform.apply_cpu_flags()
