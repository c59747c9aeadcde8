"""A tiny point-mass reaching task: a fast, physics-free environment for tests and notebooks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from boxjax.envs.base import State, Task


@struct.dataclass
class ReachParams:
    """Task constants (traced, so they could differ per world)."""

    dt_s: jax.Array
    max_steps: jax.Array
    bound_m: jax.Array


@struct.dataclass
class ReachInfo:
    """Typed task info of one world."""

    target: jax.Array
    step: jax.Array
    key: jax.Array


class PointReach:
    """Drive a point in the plane to a random target; leaving the arena ends the episode (a "fall").

    Observation: position (2), target (2), target - position (2). Action: velocity command (2) in [-1, 1] m/s.
    Reward: minus the distance to the target in metres.
    """

    observation_size = 6
    action_size = 2

    def default_params(self) -> ReachParams:
        """dt 0.1 s, 25-step episodes, a 2 m arena."""
        return ReachParams(dt_s=jnp.float32(0.1), max_steps=jnp.int32(25), bound_m=jnp.float32(2.0))

    def _obs(self, pos: jax.Array, target: jax.Array) -> jax.Array:
        return jnp.concatenate([pos, target, target - pos])

    def reset(self, params: ReachParams, key: jax.Array) -> State:
        """Start at the origin with a target within 1 m."""
        key, sub = jax.random.split(key)
        target = jax.random.uniform(sub, (2,), jnp.float32, -1.0, 1.0)
        pos = jnp.zeros((2,), jnp.float32)
        zero = jnp.zeros((), jnp.float32)
        return State(
            data=pos,
            obs=self._obs(pos, target),
            reward=zero,
            done=zero,
            truncation=zero,
            metrics={"distance_m": jnp.linalg.norm(target)},
            info=ReachInfo(target=target, step=jnp.zeros((), jnp.int32), key=key),
        )

    def step(self, params: ReachParams, state: State, action: jax.Array) -> State:
        """Move by `action * dt`; terminate outside the arena, truncate at `max_steps`."""
        pos = state.data + params.dt_s * jnp.clip(action, -1.0, 1.0)
        target = state.info.target
        distance = jnp.linalg.norm(target - pos)
        step = state.info.step + 1
        fell = (jnp.max(jnp.abs(pos)) > params.bound_m).astype(jnp.float32)
        timeout = (step >= params.max_steps).astype(jnp.float32)
        done = jnp.maximum(fell, timeout)
        return State(
            data=pos,
            obs=self._obs(pos, target),
            reward=-distance,
            done=done,
            truncation=timeout * (1.0 - fell),
            metrics={"distance_m": distance},
            info=state.info.replace(step=step),
        )


TASK = Task(config=None, env=PointReach)
