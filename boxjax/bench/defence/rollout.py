"""Rolling a block policy out for `boxjax eval`: N worlds x T control steps of one episode kind, every
finished world restarting at once, each step's figures counted into a `tally.Tally`.

Two engines, one count: `cpu_tally` steps MuJoCo's C engine through `boxjax.envs.cpu.CpuEnv` (the task's
own halves around it), acting from the host; `jax_tally` runs the task's JAX env (MJX, `impl` "warp" on a
GPU or Warp's CPU device, or "jax") as one compiled `lax.scan` whose step acts, steps, restarts and counts.
Either way the punch tags are read on the state each world reached, before any restart.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from boxjax.bench.defence import tally as tally_lib
from boxjax.cli.policies import forced_kind
from boxjax.envs import wrappers
from boxjax.envs.base import NONFINITE_METRIC
from boxjax.envs.cpu import CpuEnv

Act = Callable[[Any, jax.Array, jax.Array], jax.Array]
"""How a policy acts: (policy, obs (N, O), key) -> action (N, A) in [-1, 1]."""
FIGURES = (*tally_lib.PUNCH_EVENTS, *tally_lib.TASK_FIGURES, NONFINITE_METRIC)
"""The per-step figures a tally reads."""
PROGRESS_EVERY = 100
"""Control steps between two progress calls of the CPU path."""


@functools.cache
def actor(env: Any, config: Any, stochastic: bool) -> Act:
    """The policy's mean action (`ppo.make_policy`, as `boxjax watch` acts), or with `stochastic` a sample of
    its action distribution (as the training's rollout draws it); with no PPO config (`config` None), the
    zero action: the guard the task's PD base holds. One function per (env, config, stochastic), so that a
    compiled rollout serves every checkpoint of a run."""
    if config is None:
        return lambda policy, obs, key: jnp.zeros((obs.shape[0], env.action_size), jnp.float32)
    if not stochastic:
        from boxjax.rl.ppo import make_policy

        act = make_policy(env, config)
        return lambda policy, obs, key: act(policy, obs)
    from boxjax.rl.rollout import sample_action
    from boxjax.rl.train_step import make_network

    net = make_network(env, config)

    def sample(policy, obs, key):
        return sample_action(net, policy.params, policy.normalizer, obs, key, config.normalize_observations)[
            2
        ]

    return sample


@functools.cache
def agents_actor(env: Any, config: Any) -> Act:
    """Every agent's mean action in an env with several learners (`ppo.make_agents_policy`): (policies by
    agent name, observations by agent name, key) -> actions by agent name; an agent whose policy is None
    takes its zero action (the block task's opponent then throws the scripted punch)."""
    from boxjax.rl.ppo import make_agents_policy

    act = make_agents_policy(env, config)
    return lambda policies, obs, key: act(policies, obs)


def _tags(task: Any, params: Any, state: Any) -> dict[str, jax.Array]:
    return jax.vmap(task.punch_tags, in_axes=(None, 0))(params, state)


_TAGS = jax.jit(_tags, static_argnums=0)
_ADD = jax.jit(tally_lib.add)


def cpu_tally(
    config: Any,
    act: Act,
    policy: Any,
    kind: str,
    worlds: int,
    steps: int,
    seed: int,
    progress: Callable[[int], None] | None = None,
) -> tally_lib.Tally:
    """Counts of `worlds` MuJoCo C worlds of the task `config` playing `kind` episodes only for `steps`
    control steps, acting by `act` (the episodes are those of `CpuEnv`'s `seed`; a stochastic policy's
    noise comes from the same seed); `progress(step)` every `PROGRESS_EVERY` steps."""
    env = CpuEnv(config, num_worlds=worlds, seed=seed)
    env.params = forced_kind(env.params, kind)
    act = jax.jit(act)
    obs, key = env.reset(), jax.random.fold_in(jax.random.PRNGKey(seed), 1)
    counts = tally_lib.Tally.zeros(worlds)
    for step in range(1, steps + 1):
        key, k_act = jax.random.split(key)
        out = env.step(np.asarray(act(policy, obs, k_act)))
        tags = _TAGS(env.task, env.params, env.reached)
        figures = {name: out.metrics[name] for name in FIGURES}
        counts = _ADD(counts, figures, tags, out.done, out.truncation)
        obs = out.obs
        if progress is not None and step % PROGRESS_EVERY == 0:
            progress(step)
    return jax.device_get(counts)


def jax_tally(
    env: Any, act: Act, policy: Any, kind: str, worlds: int, steps: int, seed: int
) -> tally_lib.Tally:
    """Counts of `worlds` worlds of the JAX env `env` playing `kind` episodes only for `steps` control
    steps, acting by `act`: one compiled program (the resets drawn from `seed`), compiled once for an env,
    actor and size (the kind, the policy's parameters and the seed are its arguments)."""
    params = forced_kind(env.default_params(), kind)
    return jax.device_get(_SCAN(env, act, worlds, steps, policy, params, jax.random.PRNGKey(seed)))


def _scan(env: Any, act: Act, worlds: int, steps: int, policy: Any, params: Any, key: jax.Array):
    """The rollout of `jax_tally`: a `lax.scan` over the steps; finished worlds restart from fresh resets,
    drawn in a step where any world finished. In an env with several learners the actor sees every agent's
    observations by name (`agents_actor`)."""
    from boxjax.rl.ppo import primary_agent
    from boxjax.rl.rollout import observed

    primary = primary_agent(env)
    reset_key, step_key = jax.random.split(key)
    state = wrappers.batch_reset(env, params, jax.random.split(reset_key, worlds))

    def restart(stepped, ended, key):
        fresh = wrappers.batch_reset(env, params, jax.random.split(key, worlds))
        return jax.vmap(wrappers.select)(ended, fresh, stepped)

    def body(carry, key):
        state, counts = carry
        k_act, k_reset = jax.random.split(key)
        action = act(policy, observed(state, primary), k_act)
        stepped = jax.vmap(env.step, in_axes=(None, 0, 0))(params, state, action)
        stepped = jax.vmap(wrappers.neutralize)(stepped, state, jax.vmap(wrappers.nonfinite)(stepped))
        tags = jax.vmap(env.punch_tags, in_axes=(None, 0))(params, stepped)
        counts = tally_lib.add(counts, stepped.metrics, tags, stepped.done, stepped.truncation)
        ended = stepped.done > 0.5
        state = jax.lax.cond(
            jnp.any(ended), restart, lambda stepped, ended, key: stepped, stepped, ended, k_reset
        )
        return (state, counts), None

    start = (state, tally_lib.Tally.zeros(worlds))
    (_, counts), _ = jax.lax.scan(body, start, jax.random.split(step_key, steps))
    return counts


_SCAN = jax.jit(_scan, static_argnums=(0, 1, 2, 3))
