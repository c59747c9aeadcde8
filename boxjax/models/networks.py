"""Actor-critic networks (flax) and the running observation normaliser."""

from __future__ import annotations

import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

_LOG_2PI = math.log(2.0 * math.pi)  # plain Python: importing must not start a JAX backend
MIN_STD = 0.001
"""Smallest scale of a squashed (tanh-normal) policy, as Brax's `NormalTanhDistribution`."""
OBS_STD_FLOOR = 0.1
"""Smallest standard deviation the normaliser divides by. A feature that was constant for hundreds of
iterations (a curriculum amplitude, a reference pose at level 0) would otherwise jump by thousands of
standard deviations when the curriculum first moves it, and the policy collapses (every world fell within
a few steps of the first rise)."""


INITS = ("orthogonal", "lecun_uniform")
"""Weight initialisations of `MLP`: boxjax's orthogonal (gain sqrt 2 hidden, `head_scale` on the head), or
Brax's lecun-uniform on every layer (its networks' default)."""


class MLP(nn.Module):
    """Plain MLP with SiLU activations and a linear head; weights initialised as `weight_init` (one of
    `INITS`), biases zero."""

    hidden: Sequence[int]
    out_size: int
    head_scale: float = 1.0
    weight_init: str = "orthogonal"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        if self.weight_init not in INITS:
            raise ValueError(f"unknown network init {self.weight_init!r}; valid: {', '.join(INITS)}")
        lecun = self.weight_init == "lecun_uniform"
        hidden_init = nn.initializers.lecun_uniform() if lecun else nn.initializers.orthogonal(jnp.sqrt(2.0))
        head_init = nn.initializers.lecun_uniform() if lecun else nn.initializers.orthogonal(self.head_scale)
        for width in self.hidden:
            x = nn.silu(nn.Dense(width, kernel_init=hidden_init)(x))
        return nn.Dense(self.out_size, kernel_init=head_init)(x)


class ActorCritic(nn.Module):
    """Gaussian policy and a separate value MLP. The policy's log std is one learnt vector (`init_log_std`),
    its actions the samples clipped to [-1, 1]; or, with `squash`, Brax's tanh-normal: the MLP gives a
    state-dependent scale (softplus + `MIN_STD`) beside the mean, and actions are tanh of the samples."""

    action_size: int
    policy_hidden: Sequence[int]
    value_hidden: Sequence[int]
    init_log_std: float
    squash: bool = False
    weight_init: str = "orthogonal"
    """Weight initialisation of both MLPs (`INITS`)."""

    def setup(self) -> None:
        outputs = 2 * self.action_size if self.squash else self.action_size
        self.policy = MLP(self.policy_hidden, outputs, head_scale=0.01, weight_init=self.weight_init)
        self.value = MLP(self.value_hidden, 1, head_scale=1.0, weight_init=self.weight_init)
        if not self.squash:
            self.log_std = self.param(
                "log_std", nn.initializers.constant(self.init_log_std), (self.action_size,), jnp.float32
            )

    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """obs (..., obs_size) -> mean (..., A), log_std ((A,), or (..., A) with `squash`), value (...)."""
        mean, log_std = self.policy_only(obs)
        return mean, log_std, self.value(obs)[..., 0]

    def policy_only(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        """obs (..., obs_size) -> mean (..., A), log_std ((A,), or (..., A) with `squash`)."""
        if not self.squash:
            return self.policy(obs), self.log_std
        mean, scale = jnp.split(self.policy(obs), 2, axis=-1)
        return mean, jnp.log(jax.nn.softplus(scale) + MIN_STD)

    def value_only(self, obs: jax.Array) -> jax.Array:
        """obs (..., obs_size) -> value (...)."""
        return self.value(obs)[..., 0]


def env_action(raw: jax.Array, squash: bool) -> jax.Array:
    """A policy's sample (or mean) as the action the environment takes, in [-1, 1]: tanh of it for a
    squashed policy (`ActorCritic.squash`), else clipped."""
    return jnp.tanh(raw) if squash else jnp.clip(raw, -1.0, 1.0)


def tanh_log_det(raw: jax.Array) -> jax.Array:
    """log |d tanh(x) / dx| = log(1 - tanh(x)^2), elementwise, in a form stable for large |x|."""
    return 2.0 * (math.log(2.0) - raw - jax.nn.softplus(-2.0 * raw))


def squashed_entropy(log_std: jax.Array, raw: jax.Array) -> jax.Array:
    """Brax's estimate of a tanh-normal policy's entropy, averaged over the batch: the Gaussian's entropy
    plus the tanh's log-Jacobian at a sample `raw` of it (drawn reparametrised, so it carries gradients);
    log_std, raw (B, A) -> ()."""
    return jnp.mean(jnp.sum(log_std + 0.5 * (1.0 + _LOG_2PI) + tanh_log_det(raw), axis=-1))


def gaussian_log_prob(mean: jax.Array, log_std: jax.Array, action: jax.Array) -> jax.Array:
    """Log density of a diagonal Gaussian, summed over the last axis: (..., A) -> (...)."""
    z = (action - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z * z - log_std - 0.5 * _LOG_2PI, axis=-1)


def gaussian_entropy(log_std: jax.Array) -> jax.Array:
    """Entropy of a diagonal Gaussian with per-dimension log std (A,) -> ()."""
    return jnp.sum(log_std + 0.5 * (1.0 + _LOG_2PI))


NORMALIZERS = ("boxjax", "brax")
"""Observation normalisers (`Normalizer.create`): boxjax's (std floored at `OBS_STD_FLOOR`, clipped at
±`OBS_CLIP`), or Brax's running statistics (floored at 1e-6, not clipped, unit std before any data)."""
OBS_CLIP = 10.0
"""boxjax's normalised observations are clipped to ±this."""


@struct.dataclass
class Normalizer:
    """Running mean and variance of observations (Chan's parallel update); how it normalises (floor, clip,
    before any data) is static, fixed by `create`."""

    count: jax.Array
    mean: jax.Array
    m2: jax.Array
    std_floor: float = struct.field(pytree_node=False, default=OBS_STD_FLOOR)
    """Smallest standard deviation it divides by."""
    clip: float | None = struct.field(pytree_node=False, default=OBS_CLIP)
    """Normalised observations are clipped to ±this (None: not clipped)."""
    unit_before_data: bool = struct.field(pytree_node=False, default=False)
    """Before any data (count 0) the std is 1 (Brax's), else the floor."""

    @classmethod
    def create(cls, size: int, kind: str = "boxjax") -> Normalizer:
        """Empty statistics for observations of `size` features, normalising as `kind` (`NORMALIZERS`)."""
        zeros = jnp.zeros((size,), jnp.float32)
        empty = cls(count=jnp.zeros((), jnp.float32), mean=zeros, m2=zeros)
        if kind == "boxjax":
            return empty
        if kind == "brax":
            return empty.replace(std_floor=1e-6, clip=None, unit_before_data=True)
        raise ValueError(f"unknown observation normalizer {kind!r}; valid: {', '.join(NORMALIZERS)}")

    def update(self, batch: jax.Array) -> Normalizer:
        """Fold a batch (..., size) into the statistics."""
        flat = batch.reshape(-1, batch.shape[-1])
        n = jnp.float32(flat.shape[0])
        batch_mean = flat.mean(axis=0)
        batch_m2 = jnp.sum(jnp.square(flat - batch_mean), axis=0)
        total = self.count + n
        delta = batch_mean - self.mean
        mean = self.mean + delta * n / total
        m2 = self.m2 + batch_m2 + jnp.square(delta) * self.count * n / total
        return self.replace(count=total, mean=mean, m2=m2)

    @property
    def std(self) -> jax.Array:
        """Standard deviation per feature, floored so constant features do not blow up."""
        var = self.m2 / jnp.maximum(self.count, 1.0)
        std = jnp.maximum(jnp.sqrt(var), self.std_floor)
        return jnp.where(self.count > 0, std, 1.0) if self.unit_before_data else std

    def __call__(self, obs: jax.Array, enabled: bool = True) -> jax.Array:
        """Normalised (and clipped, unless `clip` is None) observations (same shape as `obs`)."""
        if not enabled:
            return obs
        normed = (obs - self.mean) / self.std
        return normed if self.clip is None else jnp.clip(normed, -self.clip, self.clip)
