"""The physics backend a task receives: what a task needs of a physics engine, and nothing of which one.

Two implementations: `boxjax.physics.mjx.MjxBackend` (MJX, ``impl`` "warp" for MuJoCo Warp on a GPU or
"jax"), stepped inside the task's jitted step, and `boxjax.physics.cpu.CBackend` (MuJoCo's C engine on
`mujoco.batch`), which steps outside any trace: `boxjax.envs.cpu.CpuEnv` runs a task's two step halves
around it. A task builds its params with `put_model` and `make_data`, steps with `step` (the MJX backend;
the C one refuses, naming the adapter), and reports the backend's per-world read-out (`figures`: contact
and constraint overflow, solver caps) with its step's metrics; `is_finite` feeds the task's NaN guard.
Tasks import only this module; `make` picks the implementation.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
import mujoco

IMPLS = ("jax", "warp", "mujoco-c")
"""Backends `make` builds: MJX in JAX, MJX on MuJoCo Warp, MuJoCo's C engine."""


class Backend(Protocol):
    """A physics engine as a task sees it (one world; the caller vmaps or batches)."""

    impl: str
    """One of `IMPLS`."""
    substeps_in_one_call: bool
    """Whether `step` runs all substeps in one engine call (MuJoCo Warp only)."""

    @property
    def figure_names(self) -> tuple[str, ...]:
        """The names of `figures`' entries."""
        ...

    def put_model(self, mj_model: mujoco.MjModel) -> Any:
        """The model as `step` takes it (None where the engine holds it outside the params)."""
        ...

    def make_data(self, mj_model: mujoco.MjModel) -> Any:
        """A one-world physics-state template at the model's default state."""
        ...

    def step(self, model: Any, data: Any, substeps: int) -> Any:
        """`substeps` physics steps of one world."""
        ...

    def figures(self, data: Any) -> dict[str, jax.Array]:
        """() float32 per entry of `figure_names`: this world's overflow and solver-cap flags."""
        ...

    def is_finite(self, data: Any) -> jax.Array:
        """() bool: the world's state holds no NaN or inf."""
        ...

    def host_snapshot(self) -> Any:
        """What the engine counted on the host so far (CUDA graphs captured, our kernel's factorisations),
        for `host_figures`."""
        ...

    def host_figures(self, before: Any) -> dict[str, float]:
        """The host-side counts since the `host_snapshot` `before`, as figures (empty where the engine keeps
        none)."""
        ...


def is_finite(data: Any) -> jax.Array:
    """() bool: a world's state (anything with `qpos` and `qvel`) holds no NaN or inf."""
    return jnp.all(jnp.isfinite(data.qpos)) & jnp.all(jnp.isfinite(data.qvel))


def make(
    impl: str | None,
    contacts_per_world: int,
    njmax: int,
    *,
    derived: tuple[str, ...] = (),
    **options: Any,
) -> Backend:
    """The backend of `impl` ("jax", "warp", "mujoco-c"; None or "auto": "warp" on a GPU, else "jax").

    `contacts_per_world` and `njmax` are the task's slots (MJX); `derived` the fields a task reads from the
    C engine's worlds besides the state and sensors (its env's `cpu_derived`); `options` the other
    `boxjax.physics.mjx.PhysicsConfig` fields (MJX only).
    """
    if impl not in (None, "auto", *IMPLS):
        raise ValueError(f"unknown physics impl {impl!r}; valid: auto, {', '.join(IMPLS)}")
    if impl == "mujoco-c":
        from boxjax.physics import cpu

        if options:
            raise ValueError(f"MuJoCo's C engine takes no MJX options, got {sorted(options)}")
        return cpu.CBackend(derived=tuple(derived))
    from boxjax.physics import mjx

    config = mjx.PhysicsConfig(
        impl=mjx.resolve_impl(impl), contacts_per_world=contacts_per_world, njmax=njmax, **options
    )
    return mjx.MjxBackend(config)
