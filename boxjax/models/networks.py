"""Actor-critic networks (flax) and the running observation normaliser."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from boxjax.models import distributions

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
    """A policy MLP whose outputs an action distribution (`boxjax.models.distributions`) reads, and a
    separate value MLP. With the clipped normal the log std is one learnt vector (`init_log_std`); with the
    tanh-normal the MLP gives a state-dependent scale beside the mean."""

    action_size: int
    policy_hidden: Sequence[int]
    value_hidden: Sequence[int]
    init_log_std: float
    distribution: str = "clipped_normal"
    """The action distribution's name (`distributions.DISTRIBUTIONS`)."""
    weight_init: str = "orthogonal"
    """Weight initialisation of both MLPs (`INITS`)."""

    @property
    def dist(self) -> distributions.ClippedNormal | distributions.TanhNormal:
        """The action distribution."""
        return distributions.named(self.distribution)

    def setup(self) -> None:
        outputs = self.dist.head_size(self.action_size)
        self.policy = MLP(self.policy_hidden, outputs, head_scale=0.01, weight_init=self.weight_init)
        self.value = MLP(self.value_hidden, 1, head_scale=1.0, weight_init=self.weight_init)
        if not self.dist.state_dependent_scale:
            self.log_std = self.param(
                "log_std", nn.initializers.constant(self.init_log_std), (self.action_size,), jnp.float32
            )

    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """obs (..., obs_size) -> mean (..., A), log_std ((A,), or (..., A) with a state-dependent scale),
        value (...)."""
        mean, log_std = self.policy_only(obs)
        return mean, log_std, self.value(obs)[..., 0]

    def policy_only(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        """obs (..., obs_size) -> mean (..., A), log_std ((A,), or (..., A) with a state-dependent scale)."""
        log_std = None if self.dist.state_dependent_scale else self.log_std
        return self.dist.mean_and_log_std(self.policy(obs), log_std)

    def value_only(self, obs: jax.Array) -> jax.Array:
        """obs (..., obs_size) -> value (...)."""
        return self.value(obs)[..., 0]


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
