"""A deterministic rollout that keeps what each step looked like: the input of a video or an inspection.

`evaluate` in `boxjax.rl.ppo` sums each episode up; `trace` keeps, for every control step, what a `record`
function picks from the state (joint angles, a task's overlays), so the host can replay the episodes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from boxjax.envs import wrappers
from boxjax.envs.base import Env, State
from boxjax.rl.config import PPOConfig
from boxjax.rl.ppo import Policy, make_agents_policy, make_policy, primary_agent
from boxjax.rl.rollout import observed

__all__ = ["trace"]

Record = Callable[[State], Any]
"""What to keep of one world's state: a pytree of arrays (traced, vmapped over the worlds)."""


def trace(
    env: Env,
    config: PPOConfig,
    policy: Policy | dict[str, Policy],
    key: jax.Array,
    record: Record,
    *,
    episodes: int,
    steps: int,
    env_params: Any = None,
) -> tuple[Any, np.ndarray]:
    """Run `episodes` episodes, one per world, with the policy's mean action for at most `steps` control
    steps, keeping `record(state)` of the reset and of every step; a finished world stays as it ended (one
    whose state turned non-finite ends there, as in training).

    Args:
      env, config: the environment and the PPO config the policy was trained with (its network sizes).
      policy: the network parameters and observation statistics; in an env with several learners, a dict
        of every agent's by name (`ppo.make_agents_policy`: a missing one takes its zero action).
      key: PRNG key of the resets; the same key gives the same trace.
      record: what to keep of a world's state (see `Record`); compiled into the rollout.
      episodes: worlds, one episode each.
      steps: the episode cut-off in control steps.
      env_params: default `env.default_params()`.

    Returns:
      (the records as numpy, each leaf (steps + 1, episodes, ...), the reset first; (episodes,) int32 frames
      of each episode: 1 + the control steps until it ended or the cut-off).
    """
    if episodes < 1 or steps < 1:
        raise ValueError(f"trace: episodes and steps must be >= 1, got {episodes} and {steps}")
    params = env.default_params() if env_params is None else env_params
    key = key if key.dtype == jnp.uint32 else jax.random.key_data(key)
    run = jax.jit(functools.partial(_trace, env, config, record, episodes, steps))
    records, ended_at = jax.device_get(run(policy, params, key))
    frames = np.where(ended_at > 0, ended_at, steps) + 1
    return jax.tree.map(np.asarray, records), frames.astype(np.int32)


def _trace(env: Env, config: PPOConfig, record: Record, episodes: int, steps: int, policy, params, key):
    """(records (steps + 1, episodes, ...), (episodes,) the step each episode ended at, 0 if it did not)."""
    primary = primary_agent(env) if isinstance(policy, dict) else None
    act = make_agents_policy(env, config) if primary else make_policy(env, config)
    state = wrappers.batch_reset(env, params, jax.random.split(key, episodes))
    keep = jax.vmap(record)

    def body(carry, step):
        state, ended_at = carry
        action = act(policy, observed(state, primary))
        stepped = jax.vmap(env.step, in_axes=(None, 0, 0))(params, state, action)
        running = ended_at == 0
        # as in training and `evaluate`: a world whose state turned non-finite ends there, not a fall
        stepped = jax.vmap(wrappers.neutralize)(stepped, state, jax.vmap(wrappers.nonfinite)(stepped))
        ended_at = jnp.where(running & (stepped.done > 0.5), step, ended_at)
        state = jax.vmap(wrappers.select)(running, stepped, state)
        return (state, ended_at), keep(state)

    start = (state, jnp.zeros((episodes,), jnp.int32))
    (_, ended_at), records = jax.lax.scan(body, start, jnp.arange(1, steps + 1, dtype=jnp.int32))
    first = keep(state)
    records = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, records)
    return records, ended_at
