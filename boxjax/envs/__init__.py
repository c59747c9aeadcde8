"""boxjax environments. `make(name, body=..., **options)` builds one by name.

Each task is a package (or module) with a `TASK` (`boxjax.envs.base.Task`); `REGISTRY` names where it lives:
adding a task is its package and one line here.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from boxjax.envs.base import Env, EpisodeSummary, State, Task, from_playground

REGISTRY = {
    "stance": "boxjax.envs.stance",
    "block": "boxjax.envs.block",
    "walk": "boxjax.envs.walk",
    "reach": "boxjax.envs.toy",
}
"""Task name -> the module holding its `TASK` (imported when the task is first built)."""
TASKS = tuple(REGISTRY)

__all__ = [
    "REGISTRY", "TASKS", "Env", "EpisodeSummary", "State", "Task",
    "from_playground", "make", "task", "task_of",
]  # fmt: skip


def task(name: str) -> Task:
    """The `Task` registered as `name`; raises `ValueError` naming the valid ones."""
    if name not in REGISTRY:
        raise ValueError(f"unknown task {name!r}; valid: {', '.join(TASKS)}")
    return importlib.import_module(REGISTRY[name]).TASK


def task_of(config: Any) -> Task:
    """The registered `Task` whose config class `config` is; raises `ValueError` for any other object."""
    for name in REGISTRY:
        spec = task(name)
        if spec.config is not None and type(config) is spec.config:
            return spec
    raise ValueError(f"{type(config).__name__} is no registered task's config; tasks: {', '.join(TASKS)}")


def make(
    name: str,
    *,
    body: str = "simple",
    impl: str | None = None,
    num_worlds: int = 1,
    fused_factor: bool | None = None,
    graph_mode: str | None = None,
    substeps_in_one_call: bool = False,
    **options: Any,
) -> Env:
    """Build a task environment.

    Args:
      name: one of `TASKS` ("reach" is a physics-free toy for tests).
      body: boxer body for physics tasks (see `boxjax.mjcf.BODIES`).
      impl: physics implementation, "jax", "warp", or None/"auto" for this machine's default.
      num_worlds: worlds stepped together (sizes MuJoCo Warp's shared contact pool).
      fused_factor: MuJoCo Warp only: our one-launch factorisation on/off (None: on for the 89-DoF bodies).
      graph_mode: MuJoCo Warp only: CUDA graph mode (`boxjax.physics.mjx.GRAPH_MODES`; None: MJX's default).
      substeps_in_one_call: MuJoCo Warp only: a control step's physics substeps in one FFI call (same result).
      options: fields of the task's config dataclass (e.g. `episode_s=5.0`).
    """
    spec = task(name)
    if spec.config is None:
        return spec.env()
    config = _config(spec.config, body=body, **options)
    physics = dict(
        impl=impl,
        num_worlds=num_worlds,
        fused_factor=fused_factor,
        graph_mode=graph_mode,
        substeps_in_one_call=substeps_in_one_call,
    )
    return spec.env(config, _physics(config.contact_budget(), **physics))


def _physics(slots: Any, impl: str | None, **physics: Any) -> Any:
    """The physics configuration of a task: this machine's implementation, `slots` (a `ContactBudget`)."""
    from boxjax.physics import mjx

    return mjx.PhysicsConfig(
        impl=mjx.resolve_impl(impl),
        contacts_per_world=slots.ncon_per_world,
        njmax=slots.njmax,
        **physics,
    )


def _config(cls: type, **values: Any) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - names
    if unknown:
        raise ValueError(f"unknown {cls.__name__} options {sorted(unknown)}; valid: {sorted(names)}")
    return cls(**values)
