"""Batched stepping with per-world auto-reset by mask (never a host-side "did any world fall?")."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from mujoco import mjx

from boxjax.envs.base import Env, EpisodeSummary, State


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
    """Reset every world: keys (N, 2) -> State with leading axis N."""
    return jax.vmap(env.reset, in_axes=(None, 0))(params, keys)


def autoreset_step(
    env: Env, params: Any, state: State, first: State, action: jax.Array
) -> tuple[State, State]:
    """Step every world, then swap finished worlds for their reset state.

    Args:
      state: batched current state (N, ...).
      first: batched fresh reset states (N, ...), refreshed once per iteration by the caller.
      action: (N, A) actions in [-1, 1].

    Returns:
      (next_state, stepped): `stepped` is the state each world reached *before* any reset (its obs is the
      terminal observation of finished worlds, for bootstrapping); `next_state` continues the episodes.
    """

    def one(s: State, f: State, a: jax.Array) -> tuple[State, State]:
        stepped = env.step(params, s, a)
        continued = select(stepped.done > 0.5, f, stepped)
        return continued, stepped

    return jax.vmap(one)(state, first, action)


def summarize_episodes(
    done: jax.Array, truncation: jax.Array, episode_return: jax.Array, episode_length: jax.Array
) -> EpisodeSummary:
    """Totals over worlds whose episode ended at this step; all inputs (N,)."""
    return EpisodeSummary(
        episodes=done.sum(),
        terminated=(done * (1.0 - truncation)).sum(),
        return_sum=(done * episode_return).sum(),
        length_sum=(done * episode_length).sum(),
        world_steps=jnp.ones((), jnp.float32),
    )
