"""The policy's action distributions: how the policy network's outputs become a sampled action, its log
probability, entropy and the KL between two policies. `ClippedNormal` is boxjax's (a Gaussian with one learnt
log std, actions clipped to [-1, 1]); `TanhNormal` is Brax PPO's (`NormalTanhDistribution`: a
state-dependent scale, actions the tanh of the sample, the entropy estimated at a sample).

Log probabilities are the Gaussian's of the raw (pre-squash) sample for both: in a PPO ratio of the same
raw sample under two policies the tanh's Jacobian cancels, as it does in Brax's."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

MIN_STD = 0.001
"""Smallest scale of `TanhNormal`, as Brax's `NormalTanhDistribution`."""
_LOG_2PI = math.log(2.0 * math.pi)  # plain Python: importing must not start a JAX backend


def gaussian_log_prob(mean: jax.Array, log_std: jax.Array, action: jax.Array) -> jax.Array:
    """Log density of a diagonal Gaussian, summed over the last axis: (..., A) -> (...)."""
    z = (action - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z * z - log_std - 0.5 * _LOG_2PI, axis=-1)


def gaussian_entropy(log_std: jax.Array) -> jax.Array:
    """Entropy of a diagonal Gaussian with per-dimension log std (A,) -> ()."""
    return jnp.sum(log_std + 0.5 * (1.0 + _LOG_2PI))


def tanh_log_det(raw: jax.Array) -> jax.Array:
    """log |d tanh(x) / dx| = log(1 - tanh(x)^2), elementwise, in a form stable for large |x|."""
    return 2.0 * (math.log(2.0) - raw - jax.nn.softplus(-2.0 * raw))


def squashed_entropy(log_std: jax.Array, raw: jax.Array) -> jax.Array:
    """Brax's estimate of a tanh-normal policy's entropy, averaged over the batch: the Gaussian's entropy
    plus the tanh's log-Jacobian at a sample `raw` of it (drawn reparametrised, so it carries gradients);
    log_std, raw (B, A) -> ()."""
    return jnp.mean(jnp.sum(log_std + 0.5 * (1.0 + _LOG_2PI) + tanh_log_det(raw), axis=-1))


class ClippedNormal:
    """A Gaussian whose log std is one learnt vector (A,); the environment takes the sample clipped to
    [-1, 1]."""

    name = "clipped_normal"
    state_dependent_scale = False
    """The scale is a parameter of the network, not an output of its MLP."""
    sampled_entropy = False
    """The entropy is exact: the loss needs no noise for it."""

    def head_size(self, action_size: int) -> int:
        """Outputs of the policy MLP: the mean."""
        return action_size

    def mean_and_log_std(self, head: jax.Array, log_std: jax.Array | None) -> tuple[jax.Array, jax.Array]:
        """(mean (..., A), log std (A,)) from the MLP's output and the learnt log std."""
        return head, log_std

    def action(self, raw: jax.Array) -> jax.Array:
        """A sample (or the mean) as the environment's action in [-1, 1]."""
        return jnp.clip(raw, -1.0, 1.0)

    def log_prob(self, mean: jax.Array, log_std: jax.Array, raw: jax.Array) -> jax.Array:
        """(...) log density of the raw sample."""
        return gaussian_log_prob(mean, log_std, raw)

    def entropy_sample(self, mean: jax.Array, log_std: jax.Array, noise: jax.Array | None) -> None:
        """None: the entropy is exact, it takes no sample."""
        return None

    def entropy(self, log_std: jax.Array, sample: None = None) -> jax.Array:
        """() the Gaussian's entropy."""
        return gaussian_entropy(log_std)

    def kl(self, mean_p, log_std_p, mean_q, log_std_q) -> jax.Array:
        """() mean KL(p || q) over the batch of two policies sharing the learnt log std."""
        return jnp.mean(0.5 * jnp.sum(jnp.square(mean_q - mean_p) * jnp.exp(-2.0 * log_std_p), axis=-1))

    def batch_log_std(self, log_std: jax.Array, action_size: int) -> jax.Array:
        """The log std as a flattened batch's loss takes it: (A,) as it is."""
        return log_std


class TanhNormal:
    """Brax's tanh-normal: the MLP gives the mean and a scale (softplus + `MIN_STD`); the environment takes
    tanh of the sample; the entropy is estimated at a fresh reparametrised sample."""

    name = "tanh_normal"
    state_dependent_scale = True
    sampled_entropy = True
    """The loss needs standard normal noise per transition for the entropy's sample."""

    def head_size(self, action_size: int) -> int:
        """Outputs of the policy MLP: the mean and the scale."""
        return 2 * action_size

    def mean_and_log_std(self, head: jax.Array, log_std: jax.Array | None) -> tuple[jax.Array, jax.Array]:
        """(mean (..., A), log std (..., A)) from the MLP's output."""
        mean, scale = jnp.split(head, 2, axis=-1)
        return mean, jnp.log(jax.nn.softplus(scale) + MIN_STD)

    def action(self, raw: jax.Array) -> jax.Array:
        """tanh of a sample (or of the mean), in [-1, 1]."""
        return jnp.tanh(raw)

    def log_prob(self, mean: jax.Array, log_std: jax.Array, raw: jax.Array) -> jax.Array:
        """(...) the Gaussian's log density of the raw (pre-tanh) sample."""
        return gaussian_log_prob(mean, log_std, raw)

    def entropy_sample(self, mean: jax.Array, log_std: jax.Array, noise: jax.Array | None) -> jax.Array:
        """(B, A) the reparametrised sample `mean + std * noise` (before the tanh) the entropy is estimated
        at, from standard normal `noise` (B, A)."""
        if noise is None:
            raise ValueError(
                "a tanh-squashed policy's loss needs the batch's entropy_noise (its entropy is sampled)"
            )
        return mean + jnp.exp(log_std) * noise

    def entropy(self, log_std: jax.Array, sample: jax.Array) -> jax.Array:
        """() Brax's estimate at `entropy_sample`'s sample (`squashed_entropy`)."""
        return squashed_entropy(log_std, sample)

    def kl(self, mean_p, log_std_p, mean_q, log_std_q) -> jax.Array:
        """() mean KL(p || q) over the batch of the two Gaussians before the tanh (scales differ too)."""
        ratio = jnp.exp(2.0 * (log_std_p - log_std_q))
        shift = jnp.square(mean_q - mean_p) * jnp.exp(-2.0 * log_std_q)
        per_dim = log_std_q - log_std_p + 0.5 * (ratio + shift) - 0.5
        return jnp.mean(jnp.sum(per_dim, axis=-1))

    def batch_log_std(self, log_std: jax.Array, action_size: int) -> jax.Array:
        """The log std as a flattened batch's loss takes it: (..., A) -> (N, A)."""
        return log_std.reshape(-1, action_size)


CLIPPED_NORMAL = ClippedNormal()
TANH_NORMAL = TanhNormal()
DISTRIBUTIONS = {d.name: d for d in (CLIPPED_NORMAL, TANH_NORMAL)}
"""The action distributions by name."""


def named(name: str) -> ClippedNormal | TanhNormal:
    """The distribution called `name` (`DISTRIBUTIONS`); an unknown one is a ValueError naming the valid."""
    if name not in DISTRIBUTIONS:
        raise ValueError(f"unknown action distribution {name!r}; valid: {', '.join(DISTRIBUTIONS)}")
    return DISTRIBUTIONS[name]
