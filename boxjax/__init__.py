"""boxjax: train a physically simulated humanoid boxer with PPO on GPU (MJX-Warp) or CPU (MuJoCo)."""

import os

__version__ = "0.1.0"

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
"""The package's data: the punch library, the shipped walking teachers and trained blockers."""
