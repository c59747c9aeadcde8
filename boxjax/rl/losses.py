"""GAE and the clipped PPO loss: small pure functions, shapes in the docstrings."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from boxjax.models.distributions import CLIPPED_NORMAL, ClippedNormal, TanhNormal
from boxjax.rl.config import PPOConfig


def gae(
    reward: jax.Array,
    value: jax.Array,
    next_value: jax.Array,
    termination: jax.Array,
    done: jax.Array,
    gamma: float,
    lam: float,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation by a reverse scan over time.

    Args:
      reward: (T, N) rewards r_t.
      value: (T, N) V(s_t).
      next_value: (T, N) V(s'_t), the value of the state reached by step t *before* any auto-reset,
        so a time-limit truncation bootstraps from the true last state.
      termination: (T, N) 1.0 where s'_t is terminal (a fall): no bootstrap.
      done: (T, N) 1.0 where the episode ended at t (termination or truncation): the trace stops.
      gamma: discount.
      lam: GAE lambda.

    Returns:
      advantages (T, N) and value targets (T, N) = advantages + value.
    """
    delta = reward + gamma * (1.0 - termination) * next_value - value

    def backward(carry: jax.Array, xs: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        delta_t, done_t = xs
        adv = delta_t + gamma * lam * (1.0 - done_t) * carry
        return adv, adv

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(delta[0]), (delta, done), reverse=True)
    return advantages, advantages + value


def brax_gae(
    reward: jax.Array,
    value: jax.Array,
    bootstrap_value: jax.Array,
    termination: jax.Array,
    truncation: jax.Array,
    gamma: float,
    lam: float,
) -> tuple[jax.Array, jax.Array]:
    """Brax PPO's advantages over unrolls of consecutive steps (its `compute_gae`, written out).

    Within an unroll the next state's value is the value of the next step's observation (after an
    auto-reset, a fresh episode's: a terminal step does not bootstrap, a truncated one is masked out);
    the last step bootstraps from `bootstrap_value`. The lambda-return `vs` is the value target; the
    policy-gradient advantage is r + gamma * vs(s') - V(s), not GAE's sum of TD errors.

    Args:
      reward: (T, B) rewards (scaled).
      value: (T, B) V(s_t) of the current value network.
      bootstrap_value: (B,) V of the state reached by the last step.
      termination: (T, B) 1.0 where the step ended the episode by a fall.
      truncation: (T, B) 1.0 where it ended it by the time limit (the step is masked: advantage 0, target
        its own value).
      gamma: discount.
      lam: lambda.

    Returns:
      (vs, advantage), each (T, B), without gradient.
    """
    keep = 1.0 - truncation
    live = 1.0 - termination
    next_value = jnp.concatenate([value[1:], bootstrap_value[None]], axis=0)
    delta = (reward + gamma * live * next_value - value) * keep

    def backward(carry: jax.Array, xs: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array]:
        delta_t, live_t, keep_t = xs
        acc = delta_t + gamma * live_t * keep_t * lam * carry
        return acc, acc

    _, acc = jax.lax.scan(backward, jnp.zeros_like(bootstrap_value), (delta, live, keep), reverse=True)
    vs = acc + value
    next_vs = jnp.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    advantage = (reward + gamma * live * next_vs - value) * keep
    return jax.lax.stop_gradient(vs), jax.lax.stop_gradient(advantage)


@struct.dataclass
class UnitBatch:
    """Transitions in unrolls of consecutive steps of one world (Brax's minibatch layout): every field has
    leading shape (U,) unrolls, then (W,) steps where it is per step."""

    obs: jax.Array
    """(U, W, O) observation acted on."""
    action: jax.Array
    """(U, W, A) the policy's sample."""
    log_prob: jax.Array
    """(U, W) behaviour log probability."""
    reward: jax.Array
    """(U, W) reward, scaled."""
    termination: jax.Array
    """(U, W) 1.0 where the step ended its episode by a fall."""
    truncation: jax.Array
    """(U, W) 1.0 where it ended it otherwise (the time limit)."""
    last_next_obs: jax.Array
    """(U, O) the observation the unroll's last step reached (its bootstrap)."""
    entropy_noise: jax.Array | None = None
    """(U, W, A) standard normal noise for a squashed policy's entropy sample (as `LossBatch`'s)."""


@struct.dataclass
class LossBatch:
    """One minibatch of transitions, already flattened: every field has leading shape (B,)."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    advantage: jax.Array
    target: jax.Array
    distill_target: jax.Array | None = None
    """(B, A) what the policy mean should be (the env's `distill_target`), or None without distillation."""
    distill_mask: jax.Array | None = None
    """(B, A) 1.0 on the action dims the distillation pulls, 0.0 elsewhere (None without distillation)."""
    entropy_noise: jax.Array | None = None
    """(B, A) standard normal noise of each transition for a squashed policy's entropy sample (drawn per
    epoch, `train_step.transition_noise`); None for the clipped normal policy."""
    weight: jax.Array | None = None
    """(B,) 1.0 for a transition that counts, 0.0 for one that does not (an agent's step a snapshot acted
    for, `boxjax.rl.agents`): every mean of the loss is over the counted ones (a tanh-normal policy's
    sampled entropy bonus aside: it averages over every row); None: all count."""


@struct.dataclass
class LossTerms:
    """The scalar parts of the PPO loss, kept for logging."""

    total: jax.Array
    policy: jax.Array
    value: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_fraction: jax.Array
    distill: jax.Array
    """Distillation loss (`distill_loss`) before its weight; 0 when the batch has no distill target."""


def distill_loss(
    mean: jax.Array, target: jax.Array, mask: jax.Array, weight: jax.Array | None = None
) -> jax.Array:
    """Masked squared distance of the policy mean to a target, averaged over the batch.

    Args:
      mean: (B, A) policy means.
      target: (B, A) target means (a teacher's actions).
      mask: (B, A) 1.0 on the dims to pull, 0.0 elsewhere.
      weight: (B,) the transitions that count (`LossBatch.weight`); None: all.

    Returns:
      () mean over B (the counted transitions) of sum(mask * (mean - target)^2) / max(sum(mask), 1).
    """
    per_sample = jnp.sum(mask * jnp.square(mean - target), axis=-1)
    return weighted_mean(per_sample / jnp.maximum(jnp.sum(mask, axis=-1), 1.0), weight)


def weighted_mean(x: jax.Array, weight: jax.Array | None) -> jax.Array:
    """Mean of `x` (B,), over the transitions of weight 1 (`LossBatch.weight`; 0 where none counts); the
    plain mean without weights."""
    if weight is None:
        return jnp.mean(x)
    return jnp.sum(x * weight) / jnp.maximum(jnp.sum(weight), 1.0)


def ppo_loss(
    mean: jax.Array,
    log_std: jax.Array,
    value: jax.Array,
    batch: LossBatch,
    *,
    clip_eps: float,
    value_coef: float,
    entropy_coef: float,
    normalize_advantages: bool,
    distill_coef: float = 0.0,
    dist: ClippedNormal | TanhNormal = CLIPPED_NORMAL,
) -> LossTerms:
    """Clipped-surrogate PPO loss, plus the distillation term when the batch carries a target.

    Args:
      mean: (B, A) policy means for `batch.obs`.
      log_std: (A,) policy log std, or (B, A) for a state-dependent one.
      value: (B,) critic values for `batch.obs`.
      batch: the behaviour data.
      distill_coef: weight of `distill_loss` (used only when `batch.distill_target` is set).
      dist: the action distribution (`boxjax.models.distributions`): the log probabilities and the entropy
        (a tanh-normal's sampled with the batch's `entropy_noise`).

    Returns:
      LossTerms with `total` = policy + value_coef * value - entropy_coef * entropy
      [+ distill_coef * distill].
    """
    entropy_sample = dist.entropy_sample(mean, log_std, batch.entropy_noise)
    w = batch.weight
    adv = batch.advantage
    if normalize_advantages and w is None:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    elif normalize_advantages:  # the counted transitions' mean and std
        centre = weighted_mean(adv, w)
        adv = (adv - centre) / (jnp.sqrt(weighted_mean(jnp.square(adv - centre), w)) + 1e-8)
    log_prob = dist.log_prob(mean, log_std, batch.action)
    log_ratio = log_prob - batch.log_prob
    ratio = jnp.exp(log_ratio)
    surrogate = jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv)
    policy_loss = -weighted_mean(surrogate, w)
    value_loss = 0.5 * weighted_mean(jnp.square(value - batch.target), w)
    entropy = dist.entropy(log_std, entropy_sample)
    total = policy_loss + value_coef * value_loss - entropy_coef * entropy
    distill = jnp.zeros((), jnp.float32)
    if batch.distill_target is not None:
        distill = distill_loss(mean, batch.distill_target, batch.distill_mask, w)
        if distill_coef > 0:
            total = total + distill_coef * distill
    return LossTerms(
        total=total,
        policy=policy_loss,
        value=value_loss,
        entropy=entropy,
        approx_kl=weighted_mean((ratio - 1.0) - log_ratio, w),
        clip_fraction=weighted_mean((jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32), w),
        distill=distill,
    )


def configured_loss(
    config: PPOConfig,
    dist: ClippedNormal | TanhNormal,
    mean: jax.Array,
    log_std: jax.Array,
    value: jax.Array,
    batch: LossBatch,
    normalize_advantages: bool,
) -> LossTerms:
    """`ppo_loss` with `config`'s weights and the policy's action distribution `dist`."""
    return ppo_loss(
        mean,
        log_std,
        value,
        batch,
        clip_eps=config.clip_eps,
        value_coef=config.value_coef,
        entropy_coef=config.entropy_coef,
        normalize_advantages=normalize_advantages,
        distill_coef=config.distill_coef,
        dist=dist,
    )
