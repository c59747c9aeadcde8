"""PPO configurations from other libraries' settings: `from_brax` maps a Brax PPO configuration (the keys of
`brax.training.agents.ppo.train`, as MuJoCo Playground publishes one per environment) onto a `PPOConfig` that
runs Brax's algorithm (its policy, initialisation, observation statistics, update layout and reset cadence;
docs/playground.md). It needs no Brax installed: the configuration is a plain mapping."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from boxjax.rl.config import PPOConfig

BRAX_NETWORK_DEFAULTS = {
    "policy_hidden_layer_sizes": (32,) * 4,
    "value_hidden_layer_sizes": (256,) * 5,
    "distribution_type": "tanh_normal",
}
"""`brax.training.agents.ppo.networks.make_ppo_networks`' widths and action distribution when a configuration
names none (brax 0.14.2; `tests/test_compare_brax.py` checks them against the installed Brax)."""
UNMAPPED_BRAX_DEFAULTS = {
    "bootstrap_on_timeout": False,
    "clipping_epsilon_value": None,
    "use_distributional_critic": False,
    "normalize_observations_std_eps": 0.0,
    "normalize_observations_mode": "welford",
    "normalize_until_count": None,
}
"""Brax PPO `train()` arguments boxjax has no counterpart for, at the values it matches (Brax 0.14.2's
defaults; no Playground configuration sets them): any other value is refused by `from_brax`."""
NO_CLIP = 1e9
"""boxjax's `max_grad_norm` for Brax's None (no gradient clip)."""


def from_brax(brax: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> PPOConfig:
    """The `PPOConfig` matched to a Brax PPO configuration `brax` (its `num_envs`, `unroll_length`,
    `batch_size`, `num_minibatches`, learning rate, ... as `brax.training.agents.ppo.train` takes them,
    with `num_timesteps`, `num_evals` and `action_repeat` for the reset cadence), then `overrides` (fields of
    `PPOConfig`); Brax settings it cannot match are a ValueError naming them."""
    overrides = dict(overrides or {})
    unmatched = {k: brax[k] for k, v in UNMAPPED_BRAX_DEFAULTS.items() if k in brax and brax[k] != v}
    if unmatched:
        raise ValueError(f"Brax settings boxjax does not match (only Brax's defaults): {unmatched}")
    networks = {**BRAX_NETWORK_DEFAULTS, **dict(brax.get("network_factory", {}))}
    schedule = getattr(brax.get("learning_rate_schedule"), "value", brax.get("learning_rate_schedule"))
    fields = dict(
        num_envs=brax["num_envs"],
        unroll_length=brax["unroll_length"] * brax_unrolls_per_update(brax),
        gae_window=brax["unroll_length"],
        minibatch_size=brax["batch_size"] * brax["unroll_length"],
        num_epochs=brax["num_updates_per_batch"],
        learning_rate=brax["learning_rate"],
        learning_rate_bounds=(
            brax.get("learning_rate_schedule_min_lr", 1e-5),
            brax.get("learning_rate_schedule_max_lr", 1e-2),
        ),
        desired_kl=brax.get("desired_kl", 0.01) if schedule == "ADAPTIVE_KL" else 0.0,
        gamma=brax["discounting"],
        gae_lambda=brax.get("gae_lambda", 0.95),
        clip_eps=brax.get("clipping_epsilon", 0.3),
        value_coef=brax.get("vf_loss_coefficient", 0.5),
        entropy_coef=brax["entropy_cost"],
        max_grad_norm=brax.get("max_grad_norm") or NO_CLIP,
        reward_scale=brax["reward_scaling"],
        normalize_observations=brax.get("normalize_observations", False),
        normalize_advantages=brax.get("normalize_advantage", True),
        policy_hidden=tuple(networks["policy_hidden_layer_sizes"]),
        value_hidden=tuple(networks["value_hidden_layer_sizes"]),
        action_distribution="tanh_normal"
        if brax_distribution(networks) == "tanh_normal"
        else "clipped_normal",
        restart_on_draw=brax.get("num_resets_per_eval", 0) > 0,
        network_init="lecun_uniform",
        obs_normalizer="brax",
        batch_layout="unrolls",
    )
    if (
        fields["action_distribution"] == "clipped_normal"
    ):  # Brax's normal: one learnt scale starting at init_noise_std
        fields["init_log_std"] = math.log(networks.get("init_noise_std", 1.0))
    fields.update(overrides)
    if "reset_every" not in overrides:  # Brax's reset cadence in iterations of the final size
        steps = fields["num_envs"] * fields["unroll_length"] * brax["action_repeat"]
        fields["reset_every"] = brax_reset_every(brax, steps)
    return PPOConfig(**fields)


def brax_distribution(networks: Mapping[str, Any]) -> str:
    """Brax's action distribution in a network configuration, or an error naming an unknown one (as Brax
    refuses it)."""
    kind = networks["distribution_type"]
    if kind not in ("tanh_normal", "normal"):
        raise ValueError(f"unknown Brax distribution_type {kind!r}; valid: tanh_normal, normal")
    return kind


def brax_unrolls_per_update(brax: Mapping[str, Any]) -> int:
    """Unrolls of every environment Brax's PPO collects per training step (`batch_size * num_minibatches /
    num_envs`), or an error naming the sizes Brax itself would refuse."""
    unrolls, rest = divmod(brax["batch_size"] * brax["num_minibatches"], brax["num_envs"])
    if rest or not unrolls:
        raise ValueError(
            f"Brax's batch_size x num_minibatches ({brax['batch_size']} x {brax['num_minibatches']}) must be "
            f"a positive multiple of num_envs ({brax['num_envs']})"
        )
    return unrolls


def brax_reset_every(brax: Mapping[str, Any], per_iteration: int) -> int:
    """boxjax iterations of `per_iteration` environment steps between Brax's draws of reset states: Brax's
    PPO draws them at the start and anew after each of the `num_resets_per_eval` epochs of training steps
    in an evaluation period (`brax_schedule`), or never again when that is 0 (then one draw serves the
    whole run)."""
    spacing, total = brax_schedule(brax)
    resets = brax.get("num_resets_per_eval", 0)
    between = spacing // resets if resets > 0 else total + per_iteration
    return max(1, round(between / per_iteration))


def brax_schedule(brax: Mapping[str, Any]) -> tuple[int, int]:
    """(environment steps between evaluation points, environment steps in all) as Brax's PPO runs them:
    `num_evals - 1` periods of whole training steps (`batch_size * unroll_length * num_minibatches *
    action_repeat` steps each), `num_timesteps` rounded up to fill them."""
    if brax["num_evals"] < 3:
        raise ValueError(f"--evals must be >= 3 (steady steps/s needs two points after the start), got "
                         f"{brax['num_evals']}")  # fmt: skip
    per_update = brax["batch_size"] * brax["unroll_length"] * brax["num_minibatches"] * brax["action_repeat"]
    periods, resets = brax["num_evals"] - 1, max(brax.get("num_resets_per_eval", 0), 1)
    updates = math.ceil(brax["num_timesteps"] / (periods * per_update * resets))
    spacing = updates * per_update * resets
    return spacing, spacing * periods
