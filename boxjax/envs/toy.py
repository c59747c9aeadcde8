"""A tiny point-mass reaching task: a fast, physics-free environment for tests and notebooks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from boxjax.envs.base import Agent, AgentStep, State, Task, split_action


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


@struct.dataclass
class ChaseData:
    """Positions (2,) of the two points of one world."""

    runner: jax.Array
    chaser: jax.Array


class PointChase:
    """Two learners in one world, for tests of `boxjax.rl.agents`: the runner (primary) drives to a random
    target as in `PointReach`; the chaser, starting 1 m away, is rewarded for closing on the runner.

    Runner: observation its position, the target, target - position, chaser - position (8); action its
    velocity (2) in [-1, 1] m/s; reward minus its distance to the target. Chaser: observation its position
    and runner - chaser (4); action its velocity (2); reward minus its distance to the runner. The episode
    ends when the runner leaves the arena (a "fall") or at `max_steps`.
    """

    AGENTS = (Agent("runner", 8, 2), Agent("chaser", 4, 2))
    """Both points' agents, whether or not this env trains them both (`agents`)."""
    agents = AGENTS
    observation_size = 8
    action_size = 2

    def default_params(self) -> ReachParams:
        """As `PointReach`'s: dt 0.1 s, 25-step episodes, a 2 m arena."""
        return PointReach().default_params()

    def _state(self, data: ChaseData, info: ReachInfo, reward, chaser_reward, done, truncation) -> State:
        target, gap = info.target, data.chaser - data.runner
        runner_obs = jnp.concatenate([data.runner, target, target - data.runner, gap])
        chaser_obs = jnp.concatenate([data.chaser, -gap])
        return State(
            data=data,
            obs=runner_obs,
            reward=reward,
            done=done,
            truncation=truncation,
            metrics={"distance_m": jnp.linalg.norm(target - data.runner), "gap_m": jnp.linalg.norm(gap)},
            info=info,
            others={"chaser": AgentStep(obs=chaser_obs, reward=chaser_reward)},
        )

    def reset(self, params: ReachParams, key: jax.Array) -> State:
        """The runner at the origin, the chaser 1 m along x, a target within 1 m."""
        key, sub = jax.random.split(key)
        target = jax.random.uniform(sub, (2,), jnp.float32, -1.0, 1.0)
        data = ChaseData(runner=jnp.zeros((2,), jnp.float32), chaser=jnp.array([1.0, 0.0], jnp.float32))
        zero = jnp.zeros((), jnp.float32)
        info = ReachInfo(target=target, step=jnp.zeros((), jnp.int32), key=key)
        return self._state(data, info, zero, zero, zero, zero)

    def step(self, params: ReachParams, state: State, action) -> State:
        """Both points move by their action * dt (the runner's action alone: the chaser stands)."""
        moves = split_action(self.AGENTS, action)
        data = ChaseData(
            runner=state.data.runner + params.dt_s * jnp.clip(moves["runner"], -1.0, 1.0),
            chaser=state.data.chaser + params.dt_s * jnp.clip(moves["chaser"], -1.0, 1.0),
        )
        step = state.info.step + 1
        fell = (jnp.max(jnp.abs(data.runner)) > params.bound_m).astype(jnp.float32)
        timeout = (step >= params.max_steps).astype(jnp.float32)
        reward = -jnp.linalg.norm(state.info.target - data.runner)
        chaser_reward = -jnp.linalg.norm(data.chaser - data.runner)
        info = state.info.replace(step=step)
        return self._state(
            data, info, reward, chaser_reward, jnp.maximum(fell, timeout), timeout * (1.0 - fell)
        )


TASK = Task(config=None, env=PointReach)
