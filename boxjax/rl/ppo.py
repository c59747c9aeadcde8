"""PPO's public API: `train`, `PPOConfig`, `RunOptions`, `Policy`, `make_policy`, `evaluate`.

`train` drives the jitted iteration with the host loop every path shares (`boxjax.rl.loop`): the one
host/device boundary, which launches the iteration, blocks on its figures once per iteration, times it,
logs, checkpoints and reports progress. Nothing inside the iteration does I/O. `PPOConfig.num_devices`
splits the worlds over several devices (`boxjax.rl.sharding`), `PPOConfig.num_seeds` trains several seeds
in one program (`boxjax.rl.seeds`); the loop is the same.

    from boxjax import envs
    from boxjax.rl import ppo
    env = envs.make("stance", body="simple")
    policy, history = ppo.train(env, ppo.PPOConfig(num_envs=64, unroll_length=16, minibatch_size=256),
                                jax.random.key(0), iterations=20, progress_fn=print)
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import boxjax
from boxjax.envs import base as env_base
from boxjax.envs import wrappers
from boxjax.envs.base import Env
from boxjax.models import checkpoint
from boxjax.models.networks import ActorCritic, Normalizer
from boxjax.rl import agents, guard, loop, seeds, sharding
from boxjax.rl.config import PPOConfig
from boxjax.rl.loop import PhysicsOverflowError, RunOptions
from boxjax.rl.rollout import RolloutState, init_rollout
from boxjax.rl.train_step import (
    TrainState,
    agent_network,
    init_train_state,
    make_network,
    make_train_iteration,
)

NonFiniteError = guard.NonFiniteError

__all__ = [
    "Evaluation",
    "NonFiniteError",
    "PPOConfig",
    "PhysicsOverflowError",
    "Policy",
    "RunOptions",
    "TrainResult",
    "evaluate",
    "make_policy",
    "policy_of",
    "run_meta",
    "train",
]


@struct.dataclass
class Policy:
    """What a trained agent needs to act: network parameters and observation statistics."""

    params: Any
    normalizer: Normalizer


@dataclasses.dataclass
class TrainResult:
    """State of a finished (or stopped) run, for resuming or inspection."""

    train_state: TrainState
    rollout_state: RolloutState
    solved_at_s: float | None
    stopped_by: str | None = None
    """The signal ("SIGINT", "SIGTERM") that stopped the run after its last iteration, if one did."""


def make_policy(env: Env, config: PPOConfig) -> Callable[[Policy, jax.Array], jax.Array]:
    """Deterministic policy: (policy, obs (..., O)) -> action (..., A) in [-1, 1]."""
    net = make_network(env, config)

    def act(policy: Policy, obs: jax.Array) -> jax.Array:
        return mean_action(net, config, policy, obs)

    return act


def mean_action(net: ActorCritic, config: PPOConfig, policy: Policy, obs: jax.Array) -> jax.Array:
    """obs (..., O) -> the action (..., A) in [-1, 1] at the mean of `policy`'s distribution on `net`."""
    normed = policy.normalizer(obs, config.normalize_observations)
    mean, _ = net.apply(policy.params, normed, method=ActorCritic.policy_only)
    return net.dist.action(mean)


def make_agents_policy(env: Env, config: PPOConfig) -> Callable[[dict, dict], dict]:
    """Every agent's deterministic policy in an env with several learners (`boxjax.rl.agents`): (policies by
    agent name, observations by agent name) -> actions by agent name in [-1, 1]; an agent whose policy is
    missing or None takes its zero action."""
    nets = {a.name: agent_network(a, config) for a in env_base.agents_of(env)}

    def act(policies: dict, obs: dict) -> dict:
        out = {}
        for agent in env_base.agents_of(env):
            policy, seen = policies.get(agent.name), obs[agent.name]
            if policy is None:
                out[agent.name] = jnp.zeros((*seen.shape[:-1], agent.action_size), jnp.float32)
            else:
                out[agent.name] = mean_action(nets[agent.name], config, policy, seen)
        return out

    return act


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Figures of a deterministic evaluation (`evaluate`), host floats."""

    episodes: int
    """Episodes run (one per world)."""
    return_mean: float
    """Mean undiscounted return of the finished episodes."""
    return_std: float
    """Their standard deviation."""
    length_mean: float
    """Mean length in control steps."""
    fall_rate: float
    """Share of the episodes that ended by termination (a fall), not the time limit."""
    nonfinite: int
    """Episodes cut short by a non-finite state (left out of the figures above)."""


def _episode_steps(env: Env, max_steps: int | None) -> int:
    """`max_steps`, or the env's own episode length (`env.config.max_steps`), or an error saying so."""
    steps = max_steps or getattr(getattr(env, "config", None), "max_steps", None)
    if not steps or steps < 1:
        raise ValueError(
            f"evaluate: pass max_steps (>= 1): {type(env).__name__} does not say its episode length"
        )
    return int(steps)


def evaluate(
    env: Env,
    config: PPOConfig,
    policy: Policy,
    key: jax.Array,
    *,
    episodes: int = 64,
    env_params: Any = None,
    max_steps: int | None = None,
) -> Evaluation:
    """Run `episodes` episodes, one per world, with the policy's mean action (no exploration noise) until
    each ends or `max_steps` pass; the same key gives the same figures.

    Args:
      env, config: the environment and the PPO config the policy was trained with (its network sizes).
      policy: from `train` (or a checkpoint's params and normaliser).
      key: PRNG key of the resets.
      episodes: worlds, one episode each.
      env_params: default `env.default_params()` (a curriculum's values already applied, if any).
      max_steps: the episode cut-off; default the env's `config.max_steps`.
    """
    steps = _episode_steps(env, max_steps)
    if episodes < 1:
        raise ValueError(f"evaluate: episodes must be >= 1, got {episodes}")
    params = env.default_params() if env_params is None else env_params
    key = key if key.dtype == jnp.uint32 else jax.random.key_data(key)
    totals = _evaluation_totals(env, config, policy, params, key, episodes, steps)
    ret, length, fell, bad = (np.asarray(x) for x in jax.device_get(totals))
    good = ~bad
    count = max(int(good.sum()), 1)
    return Evaluation(
        episodes=episodes,
        return_mean=float(ret[good].sum() / count),
        return_std=float(ret[good].std()) if good.any() else 0.0,
        length_mean=float(length[good].sum() / count),
        fall_rate=float(fell[good].sum() / count),
        nonfinite=int(bad.sum()),
    )


@functools.partial(jax.jit, static_argnums=(0, 1, 5, 6))
def _evaluation_totals(env, config, policy, params, key, episodes: int, steps: int):
    """Per-world (return, length, fell, non-finite) of one deterministic episode each, (episodes,) arrays;
    compiled once per env, config and sizes."""
    act = make_policy(env, config)
    state = wrappers.batch_reset(env, params, jax.random.split(key, episodes))
    zeros = jnp.zeros((episodes,), jnp.float32)

    def body(carry, _):
        state, ret, length, ended, fell, bad = carry
        stepped = jax.vmap(env.step, in_axes=(None, 0, 0))(params, state, act(policy, state.obs))
        now_bad = jax.vmap(wrappers.nonfinite)(stepped) & ~ended
        # as in training: a non-finite world ends, truncated (no fall), with reward 0
        stepped = jax.vmap(wrappers.neutralize)(stepped, state, now_bad)
        live = (~ended).astype(jnp.float32)
        ret = ret + live * stepped.reward
        length = length + live
        fell = fell | (~ended & (stepped.done > 0.5) & (stepped.truncation < 0.5))
        bad = bad | now_bad
        ended = ended | (stepped.done > 0.5)
        state = jax.vmap(wrappers.select)(ended, state, stepped)  # a finished world stays as it ended
        return (state, ret, length, ended, fell, bad), None

    false = jnp.zeros((episodes,), bool)
    carry = (state, zeros, zeros, false, false, false)
    (_, ret, length, _, fell, bad), _ = jax.lax.scan(body, carry, None, length=steps)
    return ret, length, fell, bad


def run_meta(env: Env, config: PPOConfig) -> dict[str, Any]:
    """The JSON description stored with every checkpoint of this run."""
    describe = getattr(env, "describe", None)
    meta = dict(describe()) if describe else {"env": type(env).__name__, "body": None}
    meta.update(
        observation_size=int(env.observation_size),
        action_size=int(env.action_size),
        ppo=config.to_dict(),
        boxjax_version=boxjax.__version__,
    )
    named = agents.describe(env)
    if named is not None:
        meta["agents"] = named
    return meta


def _to_host(metrics: dict[str, jax.Array]) -> dict[str, float]:
    host = jax.device_get(metrics)
    return {k: float(np.asarray(v)) for k, v in host.items()}


def own_buffers(tree: Any) -> Any:
    """Copy every leaf to the default device, committed, so no two leaves share a buffer (the iteration
    donates them all) and the first call sees the same argument placement as the later ones (no retrace)."""
    device = jax.devices()[0]
    return jax.tree.map(lambda x: jax.device_put(jnp.array(x, copy=True), device), tree)


def fresh_rollout(
    env: Env, env_params: Any, key: jax.Array, num_envs: int, reset_every: int = 1, faces: bool = False
) -> RolloutState:
    """`num_envs` freshly reset worlds (`init_rollout`, with `faces` for a pool of snapshots), jitted: op by
    op the vmapped reset (MJX forward, IK in some tasks) took a minute on the CPU."""

    def fresh(p, k):
        return init_rollout(env, p, k, num_envs, reset_every=reset_every, faces=faces)

    return jax.jit(fresh)(env_params, key)


def _initial_state(
    env: Env,
    config: PPOConfig,
    env_params: Any,
    key: jax.Array,
    resume: str | None,
    init: str | None,
    dp: sharding.DataParallel | None,
) -> tuple[TrainState, RolloutState]:
    """Fresh, resumed or seeded states; on one device (`dp` None) or placed on `dp`'s mesh; with a leading
    seed axis for `config.num_seeds` > 1 (`seeds.fresh_states`)."""
    train_key, env_key = jax.random.split(key)
    if config.num_seeds > 1:  # one device (`PPOConfig` refuses more)
        train_state, rollout_state = seeds.fresh_states(env, config, env_params, key)
    else:
        train_state = init_train_state(env, config, train_key)
        if dp is None:
            faces = config.pool_size > 0
            rollout_state = fresh_rollout(
                env, env_params, env_key, config.num_envs, config.reset_every, faces
            )
        else:
            rollout_state = dp.init_rollout(env_key)
    template = rollout_state if dp is None else dp.host_template(env_key)
    meta = run_meta(env, config)
    if resume:
        checkpoint.check_resume(checkpoint.read_meta(resume), meta)
        restored = checkpoint.restore(resume, {"train": train_state, "rollout": template})
        if dp is not None:
            return dp.from_host(restored["train"], restored["rollout"], rollout_state)
        world = sharding.world_leaves(env, env_params, config.reset_every, config.pool_size > 0)
        return restored["train"], sharding.refresh_scratch(world, restored["rollout"], rollout_state)
    if init:  # its model only (a policy file's without an optimiser state)
        train_state = train_state.replace(**model_from(init, env, train_state, meta))
    if dp is not None:
        train_state = dp.replicate(train_state)
    return train_state, rollout_state


def model_from(source: str, env: Env, train_state: TrainState, meta: dict[str, Any]) -> dict[str, Any]:
    """The model a run of `env` seeded from `source` (`--init`: a checkpoint directory or a policy file)
    takes, shaped as `train_state`'s: every seed's (`seeds.init_model`), the primary agent's or every
    agent's (`agents.init_model`), or the one model (`checkpoint.init_model`), once its meta fits `meta`."""
    if agents.has_agents(train_state):
        return agents.init_model(source, train_state, meta, primary_agent(env))
    if seeds.has_seed_axis(train_state):
        return seeds.init_model(source, train_state, meta)
    return checkpoint.init_model(source, train_state, meta)


def _save(
    directory: str,
    step: int,
    train_state: TrainState,
    rollout_state: RolloutState,
    meta: dict[str, Any],
    dp: sharding.DataParallel | None,
    keep: int | None,
) -> bool:
    """Checkpoint `step`, always in the one-device layout; refused (with a printed line, False) when any
    value is not finite, so the newest checkpoint on disk is always the last good one."""
    if dp is not None:
        train_state, rollout_state = dp.to_host(train_state, rollout_state)
    state = jax.device_get({"train": train_state, "rollout": rollout_state})
    if guard.refuse_checkpoint(step, state):
        return False
    checkpoint.save(directory, step, state, meta, keep)
    return True


def train(
    env: Env,
    config: PPOConfig,
    key: jax.Array,
    options: RunOptions | None = None,
    *,
    env_params: Any = None,
    **fields: Any,
) -> tuple[Policy, list[dict[str, float]]]:
    """Train `env` with PPO.

    Args:
      env: any environment following `boxjax.envs.base`'s protocol.
      config: PPO hyper-parameters and sizes.
      key: PRNG key (e.g. `jax.random.key(0)` or `jax.random.PRNGKey(0)`).
      options: how the run is driven (`boxjax.rl.loop.RunOptions`: iterations, time limit, checkpoints,
        resume/init, stop rules, progress callback); `fields` replace single ones (``iterations=20``).
      env_params: environment params (default `env.default_params()`).

    SIGINT or SIGTERM stops the run after the iteration in flight, checkpointed (`TrainResult.stopped_by`).

    Returns:
      the final policy (seed 0's with `config.num_seeds` > 1: `policy_of` takes another's from
      `train_run`'s states) and the list of per-iteration figures (`boxjax.rl.seeds.host_figures`: each
      seed's under `seed<s>/`).
    """
    result, history = train_run(env, config, key, options, env_params=env_params, **fields)
    return policy_of(result.train_state, agent=primary_agent(env)), history


def primary_agent(env: Env) -> str | None:
    """The name of the primary agent of an env with several learners (`boxjax.rl.agents`); None with one."""
    named = getattr(env, "agents", None) or ()
    return named[0].name if len(named) > 1 else None


def policy_of(train_state: TrainState, seed: int = 0, agent: str | None = None) -> Policy:
    """The policy a train state holds (on the first device when sharded); seed `seed`'s when it holds
    several (`PPOConfig.num_seeds` > 1); agent `agent`'s when it holds several agents (`boxjax.rl.agents`,
    which then must be named)."""
    if agents.has_agents(train_state):
        if agent is None:
            raise ValueError(
                f"policy_of: name the agent; this train state holds {sorted(train_state.normalizer)}"
            )
        train_state = agents.agent_state(train_state, agent)
    elif agent is not None:
        raise ValueError(f"policy_of: agent {agent!r} of a train state of one agent")
    if seeds.has_seed_axis(train_state):
        train_state = seeds.take(train_state, seed)
    elif seed:
        raise ValueError(f"policy_of: seed {seed} of a train state of one seed")
    policy = Policy(params=train_state.params, normalizer=train_state.normalizer)
    if len(train_state.iteration.sharding.device_set) > 1:
        policy = sharding.DataParallel.first_device(policy)
    return policy


def train_run(
    env: Env,
    config: PPOConfig,
    key: jax.Array,
    options: RunOptions | None = None,
    *,
    env_params: Any = None,
    **fields: Any,
) -> tuple[TrainResult, list[dict[str, float]]]:
    """Like `train`, but returns the full `TrainResult` (train and rollout state) for further use.

    With `config.num_devices` other than 1 the worlds are split over that many devices
    (`boxjax.rl.sharding`); the result's states then live on the mesh (rollout leaves (devices, ...)).
    For MuJoCo Warp, build `env` with `sharding.worlds_per_device(config, devices)` worlds.
    """
    options = loop.run_options(options, **fields)
    start = time.perf_counter() if options.start_time_s is None else options.start_time_s
    entered = time.perf_counter()
    env_params = env.default_params() if env_params is None else env_params
    key = key if key.dtype == jnp.uint32 else jax.random.key_data(key)
    agents.check_config(env, config)
    devices = sharding.resolve_devices(config.num_devices)
    dp = sharding.DataParallel(env, config, env_params, devices) if len(devices) > 1 else None
    if dp is None:
        states = own_buffers(_initial_state(env, config, env_params, key, options.resume, options.init, None))
        make = seeds.make_iteration if config.num_seeds > 1 else make_train_iteration
        iteration_fn = make(env, config)
    else:
        states = _initial_state(env, config, env_params, key, options.resume, options.init, dp)
        iteration_fn, env_params = dp.iteration, dp.env_params
    states = jax.block_until_ready(states)
    run = _FusedRun(
        env, iteration_fn, env_params, config.batch_size, *states, config.num_seeds, primary_agent(env)
    )
    stamps = loop.Stamps(start_s=start, entered_s=entered, ready_s=time.perf_counter())
    meta = run_meta(env, config)

    def save(step: int) -> bool:
        keep = options.keep_checkpoints or None
        return _save(options.checkpoint_dir, step, run.train_state, run.rollout_state, meta, dp, keep)

    first = seeds.iterations_done(run.train_state)
    sizes = (config.num_epochs * config.num_minibatches, config.batch_size)
    outcome = loop.drive(run.next_iteration, save, options, first, sizes, stamps, run.policy)
    result = TrainResult(run.train_state, run.rollout_state, outcome.solved_at_s, outcome.stopped_by)
    return result, outcome.history


@dataclasses.dataclass
class _FusedRun:
    """The fused path's states and its one-iteration function for `loop.drive`."""

    env: Env
    """The environment: its engine's host-side counts join each iteration's figures."""
    iteration_fn: Any
    env_params: Any
    batch_size: int
    train_state: TrainState
    rollout_state: RolloutState
    num_seeds: int = 1
    """Seeds the states hold (`boxjax.rl.seeds`): their figures come per seed and across the seeds, and
    `steps_per_s` counts every seed's world-steps (`env_steps` one seed's)."""
    agent: str | None = None
    """The primary agent's name where the env has several (`primary_agent`): the policy is its."""

    def policy(self) -> Policy:
        """A copy of the current policy (`policy_of` the train state): the next iteration donates the
        train state's buffers, so a reference would be deleted under whoever kept it."""
        return jax.tree.map(lambda x: jnp.array(x, copy=True), policy_of(self.train_state, agent=self.agent))

    def next_iteration(self) -> tuple[int, dict[str, float]]:
        """One jitted iteration; (iterations done, its figures as host floats)."""
        tick = time.perf_counter()
        engine_before = env_base.host_snapshot(self.env)
        self.train_state, self.rollout_state, metrics = self.iteration_fn(
            self.train_state, self.rollout_state, self.env_params
        )
        figures = _to_host(metrics) if self.num_seeds == 1 else seeds.host_figures(metrics)
        now = time.perf_counter()
        figures.update(env_base.host_figures(self.env, engine_before))
        done = seeds.iterations_done(self.train_state)
        figures.update(
            iteration=float(done),
            s_per_iteration=now - tick,
            steps_per_s=self.num_seeds * self.batch_size / (now - tick),
            env_steps=float(done * self.batch_size),
        )
        return done, figures
