"""Cross-device reductions used inside the data-parallel iteration (run under `shard_map`).

Each device holds an equal share of the worlds. Everything the learner keeps (parameters, optimiser,
normaliser, curriculum) is reduced here so it is the same on every device; `boxjax.rl.sharding` builds the
mesh and the compiled program around it. With `shards=None` nothing here is called and the single-device
program is unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from boxjax.envs.base import EpisodeSummary
from boxjax.models.networks import Normalizer


@dataclasses.dataclass(frozen=True)
class Shards:
    """The mesh axis the worlds are split along, as seen from inside `shard_map`."""

    axis: str
    """Mesh axis name."""
    count: int
    """Devices along it."""

    def index(self) -> jax.Array:
        """() int32 position of this device on the axis."""
        return jax.lax.axis_index(self.axis)

    def sum(self, tree: Any) -> Any:
        """Sum of every leaf over the devices."""
        return jax.lax.psum(tree, self.axis)

    def mean(self, tree: Any) -> Any:
        """Mean of every leaf over the devices."""
        return jax.lax.pmean(tree, self.axis)

    def local_rows(self, x: jax.Array) -> jax.Array:
        """This device's share (count-th part) of a global (count * n, ...) array: (n, ...).

        Used for random draws: generating the whole batch's keys or noise and keeping one slice gives
        every world the same numbers as in the single-device program.
        """
        n = x.shape[0] // self.count
        return jax.lax.dynamic_slice_in_dim(x, self.index() * n, n)


def standardize(x: jax.Array, shards: Shards) -> jax.Array:
    """(x - mean) / (std + 1e-8) with the mean and std of all devices' x together (equal sizes)."""
    mean = shards.mean(jnp.mean(x))
    var = shards.mean(jnp.mean(jnp.square(x - mean)))
    return (x - mean) / (jnp.sqrt(var) + 1e-8)


def update_normalizer(normalizer: Normalizer, batch: jax.Array, shards: Shards) -> Normalizer:
    """`Normalizer.update` with the batch of every device: batch (..., size) on each.

    The batch mean and sum of squared deviations are all-reduced (two passes, so the result equals the
    single-device update up to summation order), then merged as in `Normalizer.update` (Chan et al.).
    """
    flat = batch.reshape(-1, batch.shape[-1])
    n = jnp.float32(flat.shape[0] * shards.count)
    batch_mean = shards.sum(flat.sum(axis=0)) / n
    batch_m2 = shards.sum(jnp.sum(jnp.square(flat - batch_mean), axis=0))
    total = normalizer.count + n
    delta = batch_mean - normalizer.mean
    mean = normalizer.mean + delta * n / total
    m2 = normalizer.m2 + batch_m2 + jnp.square(delta) * normalizer.count * n / total
    return normalizer.replace(count=total, mean=mean, m2=m2)


def sum_episodes(summary: EpisodeSummary, shards: Shards) -> EpisodeSummary:
    """Episode totals of all devices' worlds, so the curriculum judges every world.

    `world_steps` counts control steps *per world* and is the same on every device: it is not summed.
    """
    total = shards.sum(summary)
    return total.replace(world_steps=summary.world_steps)


def reduce_env_metrics(
    metrics: dict[str, jax.Array], shards: Shards, peak_prefix: tuple[str, ...], counts: tuple[str, ...] = ()
) -> dict[str, jax.Array]:
    """World means averaged over devices; figures under `peak_prefix` summed (world counts: the sum of
    per-device peaks over the unroll is an upper bound of the simultaneous count, exact when one device
    overflows; event counts: exact), and the totals named in `counts` summed."""
    return {
        k: shards.sum(v) if k.startswith(peak_prefix) or k in counts else shards.mean(v)
        for k, v in metrics.items()
    }
