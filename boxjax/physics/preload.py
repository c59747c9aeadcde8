"""Compile MuJoCo Warp's kernel modules in parallel before the first step captures them.

On a cold start Warp compiles each module the step launches one after another, inside the first CUDA-graph
capture, most of a cold set-up (figures in docs/history.md). The modules that MuJoCo
Warp defines at module level are known before the first step, so they can be compiled side by side on a
thread pool first (from the cache this only loads them, as the first step would). Kernels MuJoCo Warp builds
per model (its cached factories) still compile one by one inside the capture. `BOXJAX_WARP_PRELOAD=0` turns
the preload off.
"""

from __future__ import annotations

import os
import time

from boxjax.physics.factor_patch import MJWARP_PACKAGE

STEP_MODULES = tuple(
    f"{MJWARP_PACKAGE}._src.{name}"
    for name in ("smooth", "forward", "passive", "sensor", "solver", "support", "constraint")
)
"""MuJoCo Warp's modules whose module-level kernels one step loads: listed from the modules that one step of
the simple stance model and of the muscular block arena loaded on Warp's CPU device (mujoco 3.17.0). There
they took 17.1 s of the simple model's 24.6 s of compiling (smooth alone 6.7 s); the per-model kernels the
other 7.5 s."""


def enabled() -> bool:
    """Whether to preload (``$BOXJAX_WARP_PRELOAD`` is not "0")."""
    return os.environ.get("BOXJAX_WARP_PRELOAD", "1") != "0"


def load_modules(names: tuple[str, ...], devices: list) -> float:
    """Load (compiling when not cached) the named Warp modules on every device, side by side; returns seconds.

    A name without Warp kernels is an error naming it (a renamed MuJoCo Warp module must not silently drop
    out of the preload).
    """
    import warp as wp

    modules = [wp.get_module(name) for name in names]
    empty = [name for name, module in zip(names, modules, strict=True) if not module.kernels]
    if empty:
        raise ValueError(f"no Warp kernels in module {', '.join(empty)} (renamed, or not imported?)")
    start = time.perf_counter()
    wp.force_load(device=devices, modules=modules, max_workers=len(modules) * len(devices))
    return time.perf_counter() - start


def preload_step_modules() -> float:
    """Load `STEP_MODULES` on every CUDA device when enabled; returns seconds (0.0 when nothing was done)."""
    import importlib

    import warp as wp

    devices = wp.get_cuda_devices()
    if not enabled() or not devices:
        return 0.0
    importlib.import_module(MJWARP_PACKAGE)  # defines the modules
    return load_modules(STEP_MODULES, devices)
