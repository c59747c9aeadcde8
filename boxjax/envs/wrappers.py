"""Batched stepping with per-world auto-reset by mask (never a host-side "did any world fall?"), and the
guard that resets a world whose state turned non-finite without counting it as a fall."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from mujoco import mjx

from boxjax.envs.base import NONFINITE_METRIC, AgentStep, Env, EpisodeSummary, State


def _is_mjx_data(x: Any) -> bool:
    return isinstance(x, mjx.Data)


def select(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Per-world `where` over a pytree; `mjx.Data` leaves use `Data.where` (MJX-Warp safe).

    Call inside `vmap`, where `pred` is a scalar.
    """

    def pick(a: Any, b: Any) -> Any:
        if _is_mjx_data(a):
            return b.where(pred, a)
        return jnp.where(pred, a, b)

    return jax.tree.map(pick, on_true, on_false, is_leaf=_is_mjx_data)


def batch_reset(env: Env, params: Any, keys: jax.Array) -> State:
    """Reset every world: keys (N, 2) -> State with leading axis N, its figures including
    `NONFINITE_METRIC` (0 where the task has none), as every stepped state's do (`autoreset_step`)."""
    states = jax.vmap(env.reset, in_axes=(None, 0))(params, keys)
    if NONFINITE_METRIC in states.metrics:
        return states
    zeros = jnp.zeros(states.reward.shape, jnp.float32)
    return states.replace(metrics={**states.metrics, NONFINITE_METRIC: zeros})


def nonfinite(state: State) -> jax.Array:
    """() bool: one world's stepped state is unusable: an observation or reward (the co-agents' too) is not
    finite, or the task's own guard reported non-finite physics (its `NONFINITE_METRIC` figure)."""
    bad = ~jnp.all(jnp.isfinite(state.obs)) | ~jnp.isfinite(state.reward)
    for other in (state.others or {}).values():
        bad = bad | ~jnp.all(jnp.isfinite(other.obs)) | ~jnp.isfinite(other.reward)
    flag = state.metrics.get(NONFINITE_METRIC)
    return bad if flag is None else bad | (flag > 0.5)


def neutralize(stepped: State, before: State, bad: jax.Array) -> State:
    """One world's stepped state as the learner sees it: where `bad`, the episode ends without a fall
    (done and truncated, so bootstrapped from the observation before the step, which stands in for the
    unusable one), with reward 0 and `NONFINITE_METRIC` 1; non-finite figures read 0 everywhere."""
    flag = bad.astype(jnp.float32)
    metrics = {k: jnp.where(jnp.isfinite(v), v, 0.0) for k, v in stepped.metrics.items()}
    metrics[NONFINITE_METRIC] = flag
    others = None
    if stepped.others is not None:
        others = {
            name: AgentStep(
                obs=jnp.where(bad, before.others[name].obs, now.obs), reward=jnp.where(bad, 0.0, now.reward)
            )
            for name, now in stepped.others.items()
        }
    return stepped.replace(
        others=others,
        obs=jnp.where(bad, before.obs, stepped.obs),
        reward=jnp.where(bad, 0.0, stepped.reward),
        done=jnp.maximum(stepped.done, flag),
        truncation=jnp.where(bad, 1.0, stepped.truncation),
        metrics=metrics,
    )


def autoreset_step(
    env: Env, params: Any, state: State, first: State, action: jax.Array
) -> tuple[State, State]:
    """Step every world, then swap finished worlds for their reset state. A world whose state turned
    non-finite (`nonfinite`) is reset too, as an ended episode that is no fall (`neutralize`).

    Args:
      state: batched current state (N, ...).
      first: batched fresh reset states (N, ...), drawn by the caller once per iteration or per reset
        pool (`boxjax.rl.rollout.reset_states`).
      action: (N, A) actions in [-1, 1].

    Returns:
      (next_state, stepped): `stepped` is the state each world reached *before* any reset (its obs is the
      terminal observation of finished worlds, for bootstrapping); `next_state` continues the episodes.
    """

    def one(s: State, f: State, a: jax.Array) -> tuple[State, State]:
        stepped = env.step(params, s, a)
        stepped = neutralize(stepped, s, nonfinite(stepped))
        continued = select(stepped.done > 0.5, f, stepped)
        return continued, stepped

    return jax.vmap(one)(state, first, action)


def summarize_episodes(
    done: jax.Array,
    truncation: jax.Array,
    episode_return: jax.Array,
    episode_length: jax.Array,
    nonfinite_worlds: jax.Array | None = None,
) -> EpisodeSummary:
    """Totals over worlds whose episode ended at this step; all inputs (N,). Episodes cut short by a
    non-finite state (`nonfinite_worlds` 1.0) are left out: neither falls nor finished episodes."""
    if nonfinite_worlds is not None:
        done = done * (1.0 - nonfinite_worlds)
    return EpisodeSummary(
        episodes=done.sum(),
        terminated=(done * (1.0 - truncation)).sum(),
        return_sum=(done * episode_return).sum(),
        length_sum=(done * episode_length).sum(),
        world_steps=jnp.ones((), jnp.float32),
    )
