"""boxjax environments. `make(name, body=..., **options)` builds one by name."""

from __future__ import annotations

import dataclasses
from typing import Any

from boxjax.envs.base import Env, EpisodeSummary, State, from_playground

TASKS = ("stance", "block", "walk", "reach")

__all__ = ["TASKS", "Env", "EpisodeSummary", "State", "from_playground", "make"]


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
    physics = dict(
        impl=impl,
        num_worlds=num_worlds,
        fused_factor=fused_factor,
        graph_mode=graph_mode,
        substeps_in_one_call=substeps_in_one_call,
    )
    if name == "reach":
        from boxjax.envs.toy import PointReach

        return PointReach()
    if name == "stance":
        from boxjax import mjcf
        from boxjax.envs.stance import StanceConfig, StanceEnv

        config = _config(StanceConfig, body=body, **options)
        return StanceEnv(config, _physics(mjcf.CONTACT_BUDGET[config.body], **physics))
    if name == "walk":
        from boxjax import mjcf
        from boxjax.envs.walk import WalkConfig, WalkEnv

        config = _config(WalkConfig, body=body, **options)
        return WalkEnv(config, _physics(mjcf.CONTACT_BUDGET[config.body], **physics))
    if name == "block":
        from boxjax import mjcf
        from boxjax.envs.block import BlockConfig, BlockEnv

        config = _config(BlockConfig, body=body, **options)
        return BlockEnv(config, _physics(mjcf.PAIR_BUDGET[config.body], **physics))
    raise ValueError(f"unknown task {name!r}; valid: {', '.join(TASKS)}")


def _physics(budget: Any, impl: str | None, **physics: Any) -> Any:
    """The physics configuration of a task: this machine's implementation, slots from the body's budget."""
    from boxjax.physics import mjx

    return mjx.PhysicsConfig(
        impl=mjx.resolve_impl(impl),
        contacts_per_world=budget.ncon_per_world,
        njmax=budget.njmax,
        **physics,
    )


def _config(cls: type, **values: Any) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - names
    if unknown:
        raise ValueError(f"unknown {cls.__name__} options {sorted(unknown)}; valid: {sorted(names)}")
    return cls(**values)
