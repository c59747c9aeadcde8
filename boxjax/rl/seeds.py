"""Seeds as a batch dimension: K independent runs of the fused iteration in one compiled program.

With `PPOConfig.num_seeds` K > 1 every seed has its own train state (network parameters, optimiser state,
observation statistics, curriculum, key) and rollout state (worlds), stacked on a leading seed axis, and
the fused iteration (`train_step.train_iteration`) is `jax.vmap`ped over that axis inside one jit; the env
params are shared. Seed s starts as a plain run (`boxjax.rl.ppo.train`) of key `seed_keys(key, K)[s]`
starts: seed 0 takes the run's key unchanged, seed s > 0 takes `jax.random.fold_in(key, s)`. So each seed
of a batched run is the plain run of its own key (`tests/test_seeds.py`), and K = 1 is the plain run.

The host reads every seed's figures, as `seed<s>/NAME`, and one figure across the seeds under the plain
NAME (`aggregate`), so progress lines, curves, the guard and the overflow reports read a batched run as
they read a plain one. Checkpoints hold the stacked states; `boxjax.rl.ppo.policy_of` takes one seed's
policy. One device, the fused path: the CPU workers and the multi-device program train one seed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from boxjax.envs import base
from boxjax.models import checkpoint
from boxjax.rl.config import PPOConfig
from boxjax.rl.rollout import RolloutState, init_rollout
from boxjax.rl.train_step import IterationFn, TrainState, init_train_state, train_iteration

SEED_PREFIX = "seed{}/"
"""Prefix of one seed's figures: `seed0/episode/return`, ... (a prefix, so that the reports that scan the
figures by name prefix, `env/overflow/` say, see each quantity once: across the seeds)."""
WORST_PREFIXES = ("guard/", "env/overflow/", "env/caps/", "env/nonfinite_worlds")
"""Figures whose value across the seeds is the worst seed's (the largest): the guard and the overflow
reports then stop or warn on any seed as they would on its own run."""
EVERY_SEED = ("solved",)
"""Figures whose value across the seeds is the smallest: a batched run is solved when every seed is."""
EPISODE_PREFIX = "episode/"
EPISODE_COUNT = "episode/count"


def seed_keys(key: jax.Array, num_seeds: int) -> list[jax.Array]:
    """The key each seed's run starts from: `key` for seed 0, `jax.random.fold_in(key, s)` for seed s."""
    return [key if s == 0 else jax.random.fold_in(key, s) for s in range(num_seeds)]


def one_seed(config: PPOConfig) -> PPOConfig:
    """`config` for one seed's part of the batched run (`num_seeds` 1)."""
    return dataclasses.replace(config, num_seeds=1)


def stack(trees: Sequence[Any]) -> Any:
    """Trees of one structure stacked leaf by leaf on a new leading (seed) axis."""
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


def take(tree: Any, seed: int) -> Any:
    """Seed `seed`'s part of a tree with a leading seed axis."""
    return jax.tree.map(lambda x: x[seed], tree)


def has_seed_axis(train_state: TrainState) -> bool:
    """Whether `train_state` holds several seeds (its iteration counter has the seed axis)."""
    return np.ndim(train_state.iteration) == 1


def iterations_done(train_state: TrainState) -> int:
    """Iterations completed, with or without a seed axis (every seed has done as many)."""
    return int(np.asarray(jax.device_get(train_state.iteration)).reshape(-1)[0])


def fresh_states(
    env: base.Env, config: PPOConfig, env_params: Any, key: jax.Array
) -> tuple[TrainState, RolloutState]:
    """A fresh (train, rollout) state per seed of `config.num_seeds`, stacked: seed s's is what a plain run
    of key `seed_keys(key)[s]` starts from (its key split as `boxjax.rl.ppo` splits it), the reset compiled
    once for all seeds."""
    one = one_seed(config)
    reset = jax.jit(lambda p, k: init_rollout(env, p, k, one.num_envs, reset_every=one.reset_every))
    states = []
    for seed_key in seed_keys(key, config.num_seeds):
        train_key, env_key = jax.random.split(seed_key)
        states.append((init_train_state(env, one, train_key), reset(env_params, env_key)))
    return stack(states)


def init_model(source: str, train_state: TrainState, meta: dict[str, Any]) -> dict[str, Any]:
    """The model `source` (`RunOptions.init`) gives the seeds of `train_state`: a one-seed model for every
    seed, or a batched run's model seed by seed (as many seeds only)."""
    stored = checkpoint.read_source_meta(source).get("ppo", {}).get("num_seeds", 1)
    seeds = int(np.shape(train_state.iteration)[0])
    if stored not in (1, seeds):
        raise ValueError(f"init {source}: it holds {stored} seeds' models, this run trains {seeds}")
    model = checkpoint.init_model(source, take(train_state, 0), meta)
    return {
        field: jax.tree.map(
            lambda x, like: jnp.broadcast_to(x, like.shape), value, getattr(train_state, field)
        )
        for field, value in model.items()
    }


def make_iteration(env: base.Env, config: PPOConfig) -> IterationFn:
    """`train_iteration` vmapped over the leading seed axis of the train and rollout states (env params
    shared), jitted once with both states donated; its figures have the seed axis, (K,) each."""
    one = one_seed(config)

    def fn(train_state: TrainState, rollout_state: RolloutState, env_params: Any):
        def seed_iteration(ts: TrainState, rs: RolloutState):
            return train_iteration(env, one, ts, rs, env_params)

        return jax.vmap(seed_iteration)(train_state, rollout_state)

    return jax.jit(fn, donate_argnums=(0, 1))


def aggregate(name: str, values: np.ndarray, episodes: np.ndarray) -> float:
    """The figure `name` across the seeds from its (K,) `values`: the worst seed's for `WORST_PREFIXES`,
    the least for `EVERY_SEED`, else the mean; an episode figure's mean is over the seeds whose episodes
    ended (`episodes` (K,) of them each; a seed without any holds 0 placeholders), 0 when none did."""
    if name.startswith(WORST_PREFIXES):
        return float(np.max(values))
    if name in EVERY_SEED:
        return float(np.min(values))
    if name.startswith(EPISODE_PREFIX) and name != EPISODE_COUNT:
        ended = episodes > 0
        return float(np.mean(values[ended])) if ended.any() else 0.0
    return float(np.mean(values))


def host_figures(metrics: dict[str, jax.Array]) -> dict[str, float]:
    """The batched iteration's (K,) figures as host floats: `aggregate`d under their own names, then each
    seed's under `SEED_PREFIX` (the very values a plain run of that seed reads)."""
    host = {name: np.asarray(value) for name, value in jax.device_get(metrics).items()}
    count = next(iter(host.values())).shape[0]
    episodes = host.get(EPISODE_COUNT, np.ones(count, np.float32))
    figures = {name: aggregate(name, values, episodes) for name, values in host.items()}
    for seed in range(count):
        prefix = SEED_PREFIX.format(seed)
        figures.update({prefix + name: float(values[seed]) for name, values in host.items()})
    return figures
