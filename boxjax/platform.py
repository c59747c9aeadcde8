"""Process-wide set-up that must happen before JAX creates any array: platform choice and caches.

One cache folder (``BOXJAX_CACHE``, default ``~/.cache/boxjax``) holds JAX's persistent compilation cache
(``jax/``) and Warp's kernel cache (``warp/``), so a second run on the same machine skips both compiles.
"""

from __future__ import annotations

import os

PLATFORMS = ("cpu", "gpu")


def cache_dir() -> str:
    """The boxjax cache folder (``$BOXJAX_CACHE`` or ``~/.cache/boxjax``)."""
    return os.environ.get("BOXJAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "boxjax"))


def configure(platform: str, cache: str | None = None) -> str:
    """Select the JAX platform and point JAX's and Warp's caches at one folder; returns that folder.

    Call before importing anything that creates JAX arrays (`boxjax.envs`, `boxjax.rl`).
    """
    if platform not in PLATFORMS:
        raise ValueError(f"unknown platform {platform!r}; valid: {', '.join(PLATFORMS)}")
    cache = cache or cache_dir()
    os.makedirs(os.path.join(cache, "jax"), exist_ok=True)
    os.makedirs(os.path.join(cache, "warp"), exist_ok=True)
    os.environ["JAX_PLATFORMS"] = "cpu" if platform == "cpu" else "cuda"
    os.environ.setdefault("WARP_CACHE_PATH", os.path.join(cache, "warp"))
    if platform == "gpu":
        # Lets XLA graph-capture the small policy/glue kernels between MuJoCo Warp's FFI calls.
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_gpu_graph_min_graph_size" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " --xla_gpu_graph_min_graph_size=1").strip()
    import jax

    jax.config.update("jax_compilation_cache_dir", os.path.join(cache, "jax"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    try:
        import warp as wp

        wp.config.kernel_cache_dir = os.path.join(cache, "warp")
        wp.config.quiet = True
    except ImportError:
        pass
    return cache
