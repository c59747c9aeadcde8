"""boxjax: train a physically simulated humanoid boxer with PPO on GPU (MJX-Warp) or CPU (MuJoCo)."""

__version__ = "0.1.0"
