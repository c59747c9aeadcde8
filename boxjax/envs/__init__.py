"""boxjax environments. `make(name, body=..., **options)` builds one by name.

Each task is a package (or module) with a `TASK` (`boxjax.envs.base.Task`); `REGISTRY` names where it lives:
adding a task is its package and one line here.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from boxjax.envs.base import Env, EpisodeSummary, State, Task, from_playground
from boxjax.physics import backend as physics_backend

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
    "from_playground", "make", "on_c_engine", "task", "task_of",
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
    fused_factor_trees: str | None = None,
    graph_mode: str | None = None,
    solver_loop: str | None = None,
    block_dims: tuple[tuple[str, int], ...] = (),
    substeps_in_one_call: bool = False,
    **options: Any,
) -> Env:
    """Build a task environment.

    Args:
      name: one of `TASKS` ("reach" is a physics-free toy for tests).
      body: boxer body for physics tasks (see `boxjax.mjcf.BODIES`).
      impl: physics backend (`boxjax.physics.backend.IMPLS`): "jax", "warp", None/"auto" for this machine's
        default, or "mujoco-c" (MuJoCo's C engine: the env's halves, stepped by `boxjax.envs.cpu.CpuEnv`).
      num_worlds: worlds stepped together (sizes MuJoCo Warp's shared contact pool).
      fused_factor: MuJoCo Warp only: our one-launch factorisation on/off (None: on for the 89-DoF bodies).
      fused_factor_trees: MuJoCo Warp with our factorisation on only: "all" (every tree of more than 6 dofs,
        the block world's opponent too; None: this where it runs) or "large" (the 89-DoF trees alone;
        `boxjax.physics.mjx.FACTOR_TREES`).
      graph_mode: MuJoCo Warp only: CUDA graph mode (`boxjax.physics.mjx.GRAPH_MODES`; None: MJX's default).
      solver_loop: MuJoCo Warp only: how its constraint solver repeats its iterations
        (`boxjax.physics.mjx.SOLVER_LOOPS`; None: MuJoCo Warp's default; the same result either way).
      block_dims: MuJoCo Warp only: (kernel, threads) launch block sizes (`boxjax.physics.mjx.PhysicsConfig`;
        empty: MuJoCo Warp's own; the same equations).
      substeps_in_one_call: MuJoCo Warp only: a control step's physics substeps in one FFI call (same result).
      options: fields of the task's config dataclass (e.g. `episode_s=5.0`).
    """
    spec = task(name)
    if spec.config is None:
        return spec.env()
    config = _config(spec.config, body=body, **options)
    mjx_options = dict(
        fused_factor=fused_factor,
        fused_factor_trees=fused_factor_trees,
        graph_mode=graph_mode,
        solver_loop=solver_loop,
        block_dims=tuple(block_dims),
        substeps_in_one_call=substeps_in_one_call,
    )
    if impl == "mujoco-c":
        given = {k: v for k, v in mjx_options.items() if v}  # None, False and () ask for nothing
        return on_c_engine(config, **given)  # the C engine takes none: named if given
    slots = config.contact_budget()
    backend = physics_backend.make(
        impl, slots.ncon_per_world, slots.njmax, num_worlds=num_worlds, **mjx_options
    )
    return spec.env(config, backend)


def on_c_engine(config: Any, **options: Any) -> Env:
    """The env of `config`'s task on MuJoCo's C engine (`boxjax.physics.cpu.CBackend`): its `Task.cpu_env`
    (else its env) with the derived fields it reads (`cpu_derived`), for `boxjax.envs.cpu.CpuEnv` to step
    between its halves (its own `step` refuses: the C engine cannot step inside a trace). `options` are
    refused by name (MJX options have no meaning there)."""
    spec = task_of(config)
    cls = spec.cpu_env or spec.env
    return cls(config, physics_backend.make("mujoco-c", 0, 0, derived=tuple(cls.cpu_derived), **options))


def _config(cls: type, **values: Any) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - names
    if unknown:
        raise ValueError(f"unknown {cls.__name__} options {sorted(unknown)}; valid: {sorted(names)}")
    return cls(**values)
