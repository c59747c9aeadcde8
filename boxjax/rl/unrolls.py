"""Brax PPO's update layout (`PPOConfig.batch_layout` "unrolls"): minibatches of whole unrolls of consecutive
steps of one world, their advantages computed in the loss with the current value network at every gradient
step (`losses.brax_gae`), as Brax's `compute_ppo_loss` does. The fused iteration's default computes GAE
once per iteration and shuffles single transitions (`train_step.advantages_and_batch`)."""

from __future__ import annotations

from typing import Any

import jax

from boxjax.models.networks import ActorCritic, Normalizer
from boxjax.rl.config import PPOConfig
from boxjax.rl.losses import LossBatch, LossTerms, UnitBatch, brax_gae, configured_loss
from boxjax.rl.rollout import Transition


def to_units(x: jax.Array, window: int) -> jax.Array:
    """(T, N, ...) -> (T / window * N, window, ...): each `window` consecutive steps of a world one unroll,
    unrolls ordered by window, then world."""
    steps, worlds = x.shape[:2]
    cut = x.reshape(steps // window, window, worlds, *x.shape[2:]).swapaxes(1, 2)
    return cut.reshape(steps // window * worlds, window, *x.shape[2:])


def unit_batch(config: PPOConfig, traj: Transition) -> UnitBatch:
    """The (T, N) trajectory as unrolls of `config.gae_window` steps (`to_units`), rewards scaled; nothing
    of the networks is computed here (the loss does it)."""
    window = config.gae_window
    units = {
        "obs": traj.obs,
        "action": traj.action,
        "log_prob": traj.log_prob,
        "reward": traj.reward * config.reward_scale,
        "termination": traj.termination,
        "truncation": traj.done - traj.termination,
    }
    units = {k: to_units(v, window) for k, v in units.items()}
    return UnitBatch(**units, last_next_obs=to_units(traj.next_obs, window)[:, -1])


def unit_noise(noise: jax.Array, config: PPOConfig) -> jax.Array:
    """Entropy noise of the flat (T * N, A) layout (`train_step.transition_noise`) in the unrolls' layout
    (U, W, A): each transition keeps its own draw."""
    steps = config.unroll_length
    return to_units(noise.reshape(steps, -1, noise.shape[-1]), config.gae_window)


def unit_loss(
    net: ActorCritic, config: PPOConfig, params: Any, normalizer: Normalizer, mb: UnitBatch
) -> tuple[jax.Array, LossTerms]:
    """(total, terms) of the PPO loss on a minibatch of unrolls: values of every step and the bootstrap
    with `params`, Brax's advantages and value targets (`brax_gae`), then the clipped loss over all their
    steps (`losses.ppo_loss`, advantages standardised over the minibatch as Brax's)."""
    norm = config.normalize_observations
    mean, log_std, value = net.apply(params, normalizer(mb.obs, norm))
    bootstrap = net.apply(params, normalizer(mb.last_next_obs, norm), method=ActorCritic.value_only)
    target, advantage = brax_gae(
        *(x.T for x in (mb.reward, value)),
        bootstrap,
        *(x.T for x in (mb.termination, mb.truncation)),
        config.gamma,
        config.gae_lambda,
    )
    actions = net.action_size
    mean, value = mean.reshape(-1, actions), value.reshape(-1)
    log_std = net.dist.batch_log_std(log_std, actions)
    flat = LossBatch(
        obs=mb.obs.reshape(-1, mb.obs.shape[-1]),
        action=mb.action.reshape(-1, actions),
        log_prob=mb.log_prob.reshape(-1),
        advantage=advantage.T.reshape(-1),
        target=target.T.reshape(-1),
        entropy_noise=None if mb.entropy_noise is None else mb.entropy_noise.reshape(-1, actions),
    )
    terms = configured_loss(config, net.dist, mean, log_std, value, flat, config.normalize_advantages)
    return terms.total, terms
