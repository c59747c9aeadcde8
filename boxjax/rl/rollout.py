"""Collecting one iteration's experience: a `lax.scan` over the unroll of the batched environment."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from boxjax.envs.base import COUNT_PREFIX, NONFINITE_METRIC, Env, EpisodeSummary, State
from boxjax.envs.wrappers import autoreset_step, batch_reset, summarize_episodes
from boxjax.models.networks import ActorCritic, Normalizer
from boxjax.rl.collectives import Shards


@struct.dataclass
class Faces:
    """Per world, which agent a snapshot from the pool plays (`boxjax.rl.agents`), until its next reset."""

    side: jax.Array
    """(N,) int32 the index of the agent (the env's order) a snapshot plays; -1: every agent is current."""
    slot: jax.Array
    """(N,) int32 the pool slot of that snapshot."""

    @classmethod
    def none(cls, num_envs: int) -> Faces:
        """Every world's agents current."""
        return cls(side=jnp.full((num_envs,), -1, jnp.int32), slot=jnp.zeros((num_envs,), jnp.int32))


@struct.dataclass
class RolloutState:
    """Environment state carried from one iteration to the next."""

    env: State
    """Batched environment state (N, ...)."""
    episode_return: jax.Array
    """(N,) undiscounted return of each world's running episode."""
    episode_length: jax.Array
    """(N,) control steps of each world's running episode."""
    reset_pool: State | None = None
    """(N, ...) the states finished worlds restart from, kept for `reset_every` iterations (`rollout`);
    None when they are drawn afresh every iteration."""
    reset_pool_age: jax.Array | None = None
    """() int32 iterations the pool has served (None without a pool)."""
    faces: Faces | None = None
    """Which agent a snapshot plays in each world (a several-agent run with a pool of snapshots); None
    without one."""


@struct.dataclass
class Transition:
    """Experience of one iteration; every field has leading shape (T, N)."""

    obs: jax.Array
    """(T, N, O) raw observation the action was chosen on."""
    action: jax.Array
    """(T, N, A) unclipped Gaussian sample."""
    log_prob: jax.Array
    """(T, N) behaviour log probability of `action`."""
    reward: jax.Array
    """(T, N) reward."""
    next_obs: jax.Array
    """(T, N, O) raw observation reached, before any auto-reset (for bootstrapping)."""
    termination: jax.Array
    """(T, N) 1.0 where the episode terminated (no bootstrap)."""
    done: jax.Array
    """(T, N) 1.0 where the episode ended for any reason."""
    distill_target: jax.Array | None = None
    """(T, N, A) the env's target for the policy mean on `obs` (`env.distill_target`); None without."""
    distill_mask: jax.Array | None = None
    """(T, N, A) the dims that target pulls (1.0) or not (0.0); None without distillation."""
    side: jax.Array | None = None
    """(T, N) int32 the agent a snapshot played at the step (`Faces.side`); None without a pool."""
    weight: jax.Array | None = None
    """(T, N) 1.0 where the transition is the learner's own, 0.0 where a snapshot acted for it (an agent's
    transitions, `boxjax.rl.agents.agent_transition`); None: every transition counts."""


def has_distill_target(env: Env) -> bool:
    """Whether `env` has the optional hook `distill_target(params, state) -> (target (A,), mask (A,))`:
    what the policy mean should be on the state it acts on (e.g. a teacher's action), and where."""
    return callable(getattr(env, "distill_target", None))


def distill_targets(env: Env, env_params: Any, state: State) -> tuple[jax.Array, jax.Array]:
    """The env's distillation targets and masks for a batch of worlds: (N, A) each, float32."""
    target, mask = jax.vmap(env.distill_target, in_axes=(None, 0))(env_params, state)
    return jnp.asarray(target, jnp.float32), jnp.asarray(mask, jnp.float32)


def world_keys(key: jax.Array, num_envs: int, shards: Shards | None = None) -> jax.Array:
    """One key per world (num_envs, ...); with `shards`, this device's slice of the keys of all
    `num_envs * shards.count` worlds, so each world draws what it would on a single device."""
    if shards is None:
        return jax.random.split(key, num_envs)
    return shards.local_rows(jax.random.split(key, num_envs * shards.count))


def init_rollout(
    env: Env,
    env_params: Any,
    key: jax.Array,
    num_envs: int,
    shards: Shards | None = None,
    reset_every: int = 1,
    faces: bool = False,
) -> RolloutState:
    """Fresh worlds for the first iteration (`num_envs` on this device; see `world_keys` for `shards`).

    With `reset_every` > 1 the state holds a reset pool (`rollout`), marked stale so that the first
    rollout draws it (its placeholder values are never used). With `faces`, it holds every world's `Faces`
    (all agents current) for a pool of snapshots."""
    if reset_every < 1:
        raise ValueError(f"reset_every must be >= 1, got {reset_every}")
    state = batch_reset(env, env_params, world_keys(key, num_envs, shards))
    pool, age = None, None
    if reset_every > 1:
        pool, age = jax.tree.map(jnp.zeros_like, state), jnp.asarray(reset_every, jnp.int32)
    return RolloutState(
        env=state,
        episode_return=jnp.zeros((num_envs,), jnp.float32),
        episode_length=jnp.zeros((num_envs,), jnp.float32),
        reset_pool=pool,
        reset_pool_age=age,
        faces=Faces.none(num_envs) if faces else None,
    )


def reset_states(
    env: Env,
    env_params: Any,
    state: RolloutState,
    key: jax.Array,
    reset_every: int,
    shards: Shards | None = None,
    restart_on_draw: bool = False,
) -> tuple[State, RolloutState]:
    """(the states finished worlds restart from in this rollout, `state` with its pool updated).

    Drawn from `key` every iteration (`reset_every` 1), or only when the pool has served `reset_every`
    iterations, reused otherwise: a draw is the same states the every-iteration rule would draw from the
    same key. A draw costs a reset of every world, which in some environments is long (Playground's
    CheetahRun settles its model for 200 physics steps) and otherwise dominates light iterations.

    With `restart_on_draw`, every world also restarts from a new draw (`restart_worlds`), as Brax's PPO
    resets all its environments after each epoch of training steps."""
    num_envs = state.episode_return.shape[0]

    def draw() -> State:
        return batch_reset(env, env_params, world_keys(key, num_envs, shards))

    def fresh() -> tuple[State, RolloutState]:
        first = draw()
        return first, restart_worlds(state, first) if restart_on_draw else state

    if reset_every == 1:
        return fresh()
    if state.reset_pool is None:
        raise ValueError(f"reset_every={reset_every} needs a rollout state made with it (`init_rollout`)")
    stale = state.reset_pool_age >= reset_every
    first, state = jax.lax.cond(stale, fresh, lambda: (state.reset_pool, state))
    age = jnp.where(stale, 0, state.reset_pool_age) + 1
    return first, state.replace(reset_pool=first, reset_pool_age=age)


def restart_worlds(state: RolloutState, first: State) -> RolloutState:
    """Every world restarts from `first`: its running episode is cut, not counted as one that ended."""
    zeros = jnp.zeros_like(state.episode_return)
    return state.replace(env=first, episode_return=zeros, episode_length=zeros)


def world_noise(key: jax.Array, shape: tuple[int, ...], shards: Shards | None) -> jax.Array:
    """Standard normal noise of `shape`, its leading axis the worlds; with `shards`, this device's worlds'
    rows of the noise all devices' worlds get (as on one device)."""
    if shards is None:
        return jax.random.normal(key, shape, jnp.float32)
    return shards.local_rows(jax.random.normal(key, (shape[0] * shards.count, *shape[1:]), jnp.float32))


def sample_action(
    net: ActorCritic,
    net_params: Any,
    normalizer: Normalizer,
    obs: jax.Array,
    key: jax.Array,
    normalize: bool,
    shards: Shards | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """obs (N, O) -> (raw action (N, A), its log prob (N,), the env's action in [-1, 1]), as the network's
    action distribution gives them.

    With `shards`, the noise is this device's slice of the noise of all devices' worlds.
    """
    mean, log_std = net.apply(net_params, normalizer(obs, normalize), method=ActorCritic.policy_only)
    raw = mean + jnp.exp(log_std) * world_noise(key, mean.shape, shards)
    return raw, net.dist.log_prob(mean, log_std, raw), net.dist.action(raw)


PolicyFn = Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array, jax.Array]]
"""A policy as the rollout acts with it: (obs (N, O), key) -> (raw action (N, A), its log prob (N,), the
env's action in [-1, 1])."""


def network_policy(
    net: ActorCritic, net_params: Any, normalizer: Normalizer, normalize: bool, shards: Shards | None = None
) -> PolicyFn:
    """The `PolicyFn` of a network and its parameters: `sample_action` with them bound."""

    def act(obs: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        return sample_action(net, net_params, normalizer, obs, key, normalize, shards)

    return act


PEAK_PREFIX = ("overflow/", "caps/")
"""Metrics under these prefixes count worlds (summed over worlds) and keep their peak over the unroll."""
NONFINITE_WORLDS = "nonfinite_worlds"
"""Figure: world-steps of the iteration whose state turned non-finite (each reset; summed, not averaged)."""
COUNTS = (NONFINITE_WORLDS,)
"""Figures that are totals over worlds and steps (summed over devices too)."""


SUM_PREFIX = (*PEAK_PREFIX, COUNT_PREFIX)
"""Figures summed over worlds (and over devices): world counts that peak over the unroll, and event
counts (`COUNT_PREFIX`) that add up over it."""


def _reduce_worlds(metrics: dict[str, jax.Array]) -> dict[str, jax.Array]:
    return {k: jnp.sum(v) if k.startswith(SUM_PREFIX) else jnp.mean(v) for k, v in metrics.items()}


def _accumulate(total: dict[str, jax.Array], now: dict[str, jax.Array]) -> dict[str, jax.Array]:
    return {
        k: jnp.maximum(total[k], v) if k.startswith(PEAK_PREFIX) else total[k] + v for k, v in now.items()
    }


def _per_iteration(metric_sum: dict[str, jax.Array], unroll_length: int) -> dict[str, jax.Array]:
    """Step sums to the iteration's figures: means over the unroll, but peaks and counts as they are."""
    return {k: v if k.startswith(SUM_PREFIX) else v / unroll_length for k, v in metric_sum.items()}


FACES_STREAM = 2**31 - 1
"""The number folded into a step's key for the draw of the worlds' `Faces` (a stream of its own)."""


def observed(state: State, primary: str | None) -> jax.Array | dict[str, jax.Array]:
    """The observations of `state`: the env's one observation, or with `primary` (`rollout`) every agent's
    by name."""
    if primary is None:
        return state.obs
    return {primary: state.obs, **{name: other.obs for name, other in state.others.items()}}


def rewarded(state: State, primary: str | None) -> jax.Array | dict[str, jax.Array]:
    """The rewards of `state`, as `observed` gives its observations."""
    if primary is None:
        return state.reward
    return {primary: state.reward, **{name: other.reward for name, other in state.others.items()}}


def rollout(
    env: Env,
    env_params: Any,
    policy: PolicyFn,
    state: RolloutState,
    key: jax.Array,
    unroll_length: int,
    shards: Shards | None = None,
    distill: bool = False,
    reset_every: int = 1,
    restart_on_draw: bool = False,
    primary: str | None = None,
    redraw_faces: Callable[[jax.Array, jax.Array, Faces], Faces] | None = None,
) -> tuple[RolloutState, Transition, EpisodeSummary, dict[str, jax.Array]]:
    """Step all worlds `unroll_length` times, acting with `policy` (`network_policy` for a network).

    With `primary` (the name of an env's first agent, for an env with several, `boxjax.envs.base`), the
    policy acts on every agent's observations by name and returns every agent's action by name, and the
    transitions' `obs`, `action`, `log_prob`, `reward` and `next_obs` are dicts by agent name
    (`boxjax.rl.agents`); the episode figures are the primary agent's. With a pool of snapshots (the
    state's `faces`), the policy also takes the worlds' `Faces`, `redraw_faces(key, done (N,), faces)` draws
    them anew for the worlds whose episode ended, and the transitions record each step's `side`.

    With `distill` (and an env that has the hook, `has_distill_target`) each transition also keeps the
    env's distillation target and mask for the state the policy acted on.

    Reset states are drawn once per iteration (not per step), or once every `reset_every` iterations
    (`reset_states`), and swapped in by mask where a world's episode ended; with `restart_on_draw` every
    world starts from each new draw. With `shards` (inside `shard_map`)
    the N worlds are this device's share; their random draws are those the same worlds get in the
    single-device program. Figures stay per device.

    Returns:
      the carried state, the (T, N) transitions, totals of the episodes that ended, and the env's
      per-step metrics averaged over worlds and steps (`overflow/*`, `caps/*`: peak number of worlds;
      `count/*`: totals, also in the summary's `counts`), with `NONFINITE_WORLDS`: world-steps whose state
      turned non-finite (reset, left out of the episode totals).
    """
    num_envs = state.episode_return.shape[0]
    reset_key, step_key = jax.random.split(key)
    first, state = reset_states(env, env_params, state, reset_key, reset_every, shards, restart_on_draw)
    zero_metrics = jax.tree.map(jnp.zeros_like, _reduce_worlds(state.env.metrics))
    distill = distill and has_distill_target(env)

    def body(carry, step_key):
        rs, summary, metric_sum, _ = carry
        faces = rs.faces
        if faces is None:
            raw, log_prob, action = policy(observed(rs.env, primary), step_key)
        else:
            raw, log_prob, action = policy(observed(rs.env, primary), step_key, faces)
        target, mask = distill_targets(env, env_params, rs.env) if distill else (None, None)
        nxt, stepped = autoreset_step(env, env_params, rs.env, first, action)
        ep_return = rs.episode_return + stepped.reward
        ep_length = rs.episode_length + 1.0
        bad = stepped.metrics[NONFINITE_METRIC]
        ended = summarize_episodes(stepped.done, stepped.truncation, ep_return, ep_length, bad)
        summary = jax.tree.map(jnp.add, summary, ended)
        metric_sum = _accumulate(metric_sum, _reduce_worlds(stepped.metrics))
        nonfinite_sum = carry[3] + jnp.sum(bad)
        keep = 1.0 - stepped.done
        rs = rs.replace(env=nxt, episode_return=ep_return * keep, episode_length=ep_length * keep)
        if faces is not None:
            faces_key = jax.random.fold_in(step_key, FACES_STREAM)
            rs = rs.replace(faces=redraw_faces(faces_key, stepped.done, faces))
        transition = Transition(
            obs=observed(carry[0].env, primary),
            action=raw,
            log_prob=log_prob,
            reward=rewarded(stepped, primary),
            next_obs=observed(stepped, primary),
            termination=stepped.done * (1.0 - stepped.truncation),
            done=stepped.done,
            distill_target=target,
            distill_mask=mask,
            side=None if faces is None else faces.side,
        )
        return (rs, summary, metric_sum, nonfinite_sum), transition

    keys = jax.random.split(step_key, unroll_length)
    zero_count = jnp.zeros((), jnp.float32)
    stepping = state.replace(reset_pool=None, reset_pool_age=None)  # the pool stays out of the scan's carry
    (stepping, summary, metric_sum, nonfinite_sum), traj = jax.lax.scan(
        body, (stepping, EpisodeSummary.zeros(), zero_metrics, zero_count), keys
    )
    state = stepping.replace(reset_pool=state.reset_pool, reset_pool_age=state.reset_pool_age)
    metric_mean = _per_iteration(metric_sum, unroll_length)
    metric_mean[NONFINITE_WORLDS] = nonfinite_sum
    counts = {k: v for k, v in metric_mean.items() if k.startswith(COUNT_PREFIX)}
    summary = summary.replace(worlds=jnp.float32(num_envs), counts=counts)
    return state, traj, summary, metric_mean
