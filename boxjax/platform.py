"""Process-wide set-up that must happen before JAX creates any array: platform choice and caches.

One cache folder (``BOXJAX_CACHE``, default ``~/.cache/boxjax``) holds JAX's persistent compilation cache
(``jax/``) and Warp's kernel cache (``warp/``), so a second run on the same machine skips both compiles.
"""

from __future__ import annotations

import os
import sys
import warnings

PLATFORMS = ("cpu", "gpu")


class PlatformError(RuntimeError):
    """The platform asked for cannot run on this machine (no GPU, or the GPU extra not installed)."""


CPU_XLA_FLAGS = ("--xla_cpu_enable_concurrency_optimized_scheduler=false",)
"""jax 0.10's CPU scheduler deadlocks the MJX step at >= 48 worlds (every thread idle, the result never
ready); the plain scheduler runs it (measured on 2 cores, jaxlib 0.10.2). ``import boxjax`` sets them
(`apply_cpu_flags`), so a notebook or script needs no command to."""
GPU_XLA_FLAGS = ("--xla_gpu_graph_min_graph_size=1",)
"""Lets XLA graph-capture the small policy/glue kernels between MuJoCo Warp's FFI calls."""


def flag_name(flag: str) -> str:
    """The name of one XLA flag, its value left off (``--xla_foo=1`` -> ``--xla_foo``)."""
    return flag.split("=", 1)[0]


def merge_xla_flags(current: str, flags: tuple[str, ...]) -> str:
    """`current` (an $XLA_FLAGS value) with each of `flags` appended unless a flag of that name is set
    already: every flag of `current` stays as the user wrote it (a user's value wins), none is added twice.

    XLA reads a value that does not start with "-" as the name of a file of flags: that is left as it is.
    """
    if current.strip() and not current.lstrip().startswith("-"):
        return current
    words = current.split()
    names = {flag_name(w) for w in words}
    for flag in flags:
        if flag_name(flag) not in names:
            words.append(flag)
            names.add(flag_name(flag))
    return " ".join(words)


def add_xla_flags(flags: tuple[str, ...]) -> None:
    """Merge XLA flags into $XLA_FLAGS (`merge_xla_flags`); effective only before JAX starts its backends."""
    os.environ["XLA_FLAGS"] = merge_xla_flags(os.environ.get("XLA_FLAGS", ""), flags)


def jax_started() -> bool:
    """Whether JAX has started its backends, found without starting them (a JAX not yet imported has not).

    XLA reads $XLA_FLAGS once, when the first backend starts, not when jax is imported: this is the moment
    after which a flag set here no longer counts."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    started = getattr(bridge, "backends_are_initialized", None)
    return bool(started and started())


class LateFlagsWarning(RuntimeWarning):
    """JAX's CPU backend started before boxjax could set `CPU_XLA_FLAGS`: CPU training may hang."""


def late_flags_message(missing: tuple[str, ...]) -> str:
    """What to do when JAX's CPU backend started without `missing` (some of `CPU_XLA_FLAGS`)."""
    flags = " ".join(missing)
    return (
        f"JAX's CPU backend started before boxjax was imported, without XLA_FLAGS={flags}: training on the "
        "CPU with a few dozen worlds or more can hang (every thread idle). Restart the interpreter and "
        f"import boxjax before anything runs JAX, or set XLA_FLAGS='{flags}' (added to your own) before "
        "importing jax."
    )


def apply_cpu_flags() -> None:
    """Add `CPU_XLA_FLAGS` to $XLA_FLAGS if JAX has not started yet (run by ``import boxjax``, so the library
    needs no command to set them); if it has, on the CPU and without them, warn (`LateFlagsWarning`) with
    what to do instead of letting training hang."""
    if not jax_started():
        add_xla_flags(CPU_XLA_FLAGS)
        return
    names = {flag_name(w) for w in os.environ.get("XLA_FLAGS", "").split()}
    missing = tuple(f for f in CPU_XLA_FLAGS if flag_name(f) not in names)
    if missing and sys.modules["jax"].default_backend() == "cpu":
        warnings.warn(late_flags_message(missing), LateFlagsWarning, stacklevel=2)


def cache_dir() -> str:
    """The boxjax cache folder (``$BOXJAX_CACHE`` or ``~/.cache/boxjax``)."""
    return os.environ.get("BOXJAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "boxjax"))


def configure(platform: str, cache: str | None = None) -> str:
    """Select the JAX platform and point JAX's and Warp's caches at one folder; returns that folder.
    For "gpu", `check_gpu` first makes sure there is one (`PlatformError` otherwise).

    Call before anything creates JAX arrays (JAX may be imported already: its platform option is set too).
    """
    if platform not in PLATFORMS:
        raise ValueError(f"unknown platform {platform!r}; valid: {', '.join(PLATFORMS)}")
    cache = cache or cache_dir()
    os.makedirs(os.path.join(cache, "jax"), exist_ok=True)
    os.makedirs(os.path.join(cache, "warp"), exist_ok=True)
    os.environ["JAX_PLATFORMS"] = "cpu" if platform == "cpu" else "cuda"
    os.environ.setdefault("WARP_CACHE_PATH", os.path.join(cache, "warp"))
    add_xla_flags(CPU_XLA_FLAGS if platform == "cpu" else GPU_XLA_FLAGS)
    import jax

    # JAX reads $JAX_PLATFORMS when it is imported: set the option too, so the choice holds for a JAX that a
    # command's own imports (a task's training defaults, `boxjax.envs`) brought in first
    jax.config.update("jax_platforms", os.environ["JAX_PLATFORMS"])
    jax.config.update("jax_compilation_cache_dir", os.path.join(cache, "jax"))
    # every program, however quick to compile: the many small ones (inits, resets, the CPU path's worker
    # functions) add up; on the CPU block path this halved the warm set-up (10.9 s -> 5.5-6.5 s)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    try:
        import warp as wp

        wp.config.kernel_cache_dir = os.path.join(cache, "warp")
        wp.config.quiet = True
    except ImportError:
        pass
    if platform == "gpu":
        check_gpu()
    return cache


def check_gpu() -> None:
    """Raise `PlatformError` (one sentence: what to install, or to use the CPU) unless JAX sees a CUDA GPU
    and MuJoCo Warp imports. Call after `configure("gpu")`."""
    import jax

    try:
        found = bool(jax.devices("cuda"))
    except Exception:  # noqa: BLE001 - a missing CUDA plugin raises a bare AssertionError in jax 0.10
        found = False
    if not found:
        raise PlatformError(
            "--platform gpu needs an NVIDIA GPU and JAX's CUDA build, and JAX found none here: on a GPU "
            "machine install the extra with pip install -e '.[gpu]', or run with --platform cpu"
        )
    try:
        import warp  # noqa: F401
        from mujoco.mjx.third_party import mujoco_warp  # noqa: F401
    except ImportError as err:
        raise PlatformError(
            f"--platform gpu needs MuJoCo Warp ({err}): install warp-lang and mujoco-mjx "
            "(pip install -e '.[gpu]'), or run with --platform cpu"
        ) from err


GL_BACKENDS = ("egl", "osmesa")
"""MuJoCo's offscreen OpenGL backends (`MUJOCO_GL`), in the order tried: EGL (a GPU's, or Mesa's on a CPU
machine), then OSMesa (Mesa's software renderer)."""
GL_PACKAGES = {"egl": "libegl1", "osmesa": "libosmesa6"}
"""The Debian/Ubuntu package that provides each backend's library."""
_GL_PROBE = (
    "import mujoco\n"
    "m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size=\"1\"/></worldbody></mujoco>')\n"
    "with mujoco.Renderer(m, 8, 8) as r:\n"
    "    r.update_scene(mujoco.MjData(m))\n"
    "    r.render()\n"
)
"""A tiny offscreen render: run in a child process, since MuJoCo binds its backend when first imported."""


def gl_works(backend: str, timeout_s: float = 60.0) -> bool:
    """Whether MuJoCo renders offscreen with `backend` (`MUJOCO_GL`) here, tried in a child process."""
    import subprocess
    import sys

    env = {**os.environ, "MUJOCO_GL": backend}
    env.pop("PYOPENGL_PLATFORM", None)  # MuJoCo sets it to match the backend
    try:
        done = subprocess.run(
            [sys.executable, "-c", _GL_PROBE], env=env, capture_output=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def choose_gl(preset: str | None, works=gl_works) -> str:
    """The GL backend to render with: `preset` (the user's `MUJOCO_GL`) if set, else the first of
    `GL_BACKENDS` that `works`; `PlatformError` naming what to install when none (or not the preset) does."""
    if preset:
        if works(preset):
            return preset
        raise PlatformError(
            f"MUJOCO_GL={preset} cannot render here; unset it to try {', '.join(GL_BACKENDS)}"
        )
    for backend in GL_BACKENDS:
        if works(backend):
            return backend
    install = " or ".join(f"apt install {GL_PACKAGES[b]} ({b})" for b in GL_BACKENDS)
    raise PlatformError(f"no OpenGL backend for MuJoCo's offscreen renderer works here: {install}")


def select_gl() -> str:
    """Choose the GL backend (`choose_gl`) and set `MUJOCO_GL` to it; returns it. Call before anything
    imports mujoco (`boxjax.envs`, `boxjax.mjcf`): MuJoCo binds its backend on import."""
    import sys

    if "mujoco" in sys.modules and not os.environ.get("MUJOCO_GL"):
        raise PlatformError("select_gl() must run before mujoco is imported (or set MUJOCO_GL yourself)")
    backend = choose_gl(os.environ.get("MUJOCO_GL"))
    os.environ["MUJOCO_GL"] = backend
    return backend
