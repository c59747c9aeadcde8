"""The fused PPO iteration: rollout -> GAE -> epochs x minibatches of updates, one XLA program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from boxjax.envs import base
from boxjax.rl.config import PPOConfig
from boxjax.rl.losses import LossBatch, LossTerms, gae, ppo_loss
from boxjax.rl.networks import ActorCritic, Normalizer
from boxjax.rl.rollout import RolloutState, Transition, rollout


@struct.dataclass
class TrainState:
    """Everything the learner carries between iterations (checkpointed as one pytree)."""

    params: Any
    """Actor-critic parameters."""
    opt_state: Any
    """Adam state."""
    normalizer: Normalizer
    """Running observation statistics."""
    curriculum: Any
    """The environment's curriculum state."""
    iteration: jax.Array
    """() int32 iterations completed."""
    key: jax.Array
    """PRNG key for the next iteration."""


IterationFn = Callable[[TrainState, RolloutState, Any], tuple[TrainState, RolloutState, dict]]


def make_network(env: base.Env, config: PPOConfig) -> ActorCritic:
    """The actor-critic sized for `env`."""
    return ActorCritic(
        action_size=env.action_size,
        policy_hidden=tuple(config.policy_hidden),
        value_hidden=tuple(config.value_hidden),
        init_log_std=config.init_log_std,
    )


def make_optimizer(config: PPOConfig) -> optax.GradientTransformation:
    """Gradient clipping then Adam."""
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(config.learning_rate))


def init_train_state(env: base.Env, config: PPOConfig, key: jax.Array) -> TrainState:
    """Fresh parameters, optimiser, normaliser and curriculum."""
    net = make_network(env, config)
    init_key, key = jax.random.split(key)
    params = net.init(init_key, jnp.zeros((1, env.observation_size), jnp.float32))
    return TrainState(
        params=params,
        opt_state=make_optimizer(config).init(params),
        normalizer=Normalizer.create(env.observation_size),
        curriculum=base.init_curriculum(env),
        iteration=jnp.zeros((), jnp.int32),
        key=key,
    )


def _flatten_time(x: jax.Array) -> jax.Array:
    return x.reshape((-1,) + x.shape[2:])


def minibatches(batch: LossBatch, key: jax.Array, num_minibatches: int) -> LossBatch:
    """One permutation of the (B, ...) batch, reshaped to (num_minibatches, B / num_minibatches, ...)."""
    perm = jax.random.permutation(key, batch.obs.shape[0])
    return jax.tree.map(lambda x: x[perm].reshape((num_minibatches, -1) + x.shape[1:]), batch)


def update(
    net: ActorCritic, config: PPOConfig, train_state: TrainState, batch: LossBatch, key: jax.Array
) -> tuple[Any, Any, LossTerms]:
    """Epochs x minibatches of clipped-PPO gradient steps (nested scans).

    Returns:
      new params, new optimiser state, and the loss terms averaged over all gradient steps.
    """
    optimizer = make_optimizer(config)
    normalizer = train_state.normalizer

    def loss_fn(params, mb: LossBatch) -> tuple[jax.Array, LossTerms]:
        mean, log_std, value = net.apply(params, normalizer(mb.obs, config.normalize_observations))
        terms = ppo_loss(
            mean,
            log_std,
            value,
            mb,
            clip_eps=config.clip_eps,
            value_coef=config.value_coef,
            entropy_coef=config.entropy_coef,
            normalize_advantages=config.normalize_advantages,
        )
        return terms.total, terms

    def sgd_step(carry, mb: LossBatch):
        params, opt_state = carry
        grads, terms = jax.grad(loss_fn, has_aux=True)(params, mb)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), terms

    def epoch(carry, epoch_key):
        shuffled = minibatches(batch, epoch_key, config.num_minibatches)
        return jax.lax.scan(sgd_step, carry, shuffled)

    carry = (train_state.params, train_state.opt_state)
    (params, opt_state), terms = jax.lax.scan(epoch, carry, jax.random.split(key, config.num_epochs))
    return params, opt_state, jax.tree.map(jnp.mean, terms)


def advantages_and_batch(
    net: ActorCritic, config: PPOConfig, params: Any, normalizer: Normalizer, traj: Transition
) -> LossBatch:
    """Values of the (T, N) trajectory in one batched pass, GAE, then a flat (T*N, ...) loss batch."""
    norm = config.normalize_observations
    value = net.apply(params, normalizer(traj.obs, norm), method=ActorCritic.value_only)
    next_value = net.apply(params, normalizer(traj.next_obs, norm), method=ActorCritic.value_only)
    advantage, target = gae(
        traj.reward * config.reward_scale,
        value,
        next_value,
        traj.termination,
        traj.done,
        config.gamma,
        config.gae_lambda,
    )
    flat = LossBatch(
        obs=traj.obs, action=traj.action, log_prob=traj.log_prob, advantage=advantage, target=target
    )
    return jax.tree.map(_flatten_time, flat)


def _named_leaves(prefix: str, tree: Any) -> dict[str, jax.Array]:
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {
        prefix + jax.tree_util.keystr(path, simple=True, separator="/"): jnp.asarray(v, jnp.float32)
        for path, v in leaves
    }


def iteration_metrics(
    summary: base.EpisodeSummary, env_metrics: dict, terms: LossTerms, curriculum: Any, solved: jax.Array
) -> dict[str, jax.Array]:
    """The figures read back to the host once per iteration (all () float32)."""
    episodes = jnp.maximum(summary.episodes, 1.0)
    metrics = {
        "episode/count": summary.episodes,
        "episode/return": summary.return_sum / episodes,
        "episode/length": summary.length_sum / episodes,
        "episode/fall_rate": summary.terminated / episodes,
        "solved": solved.astype(jnp.float32),
    }
    metrics.update({f"env/{k}": v for k, v in env_metrics.items()})
    metrics.update(_named_leaves("loss/", {k: getattr(terms, k) for k in terms.__dataclass_fields__}))
    metrics.update(_named_leaves("curriculum/", curriculum))
    return metrics


def train_iteration(
    env: base.Env,
    config: PPOConfig,
    train_state: TrainState,
    rollout_state: RolloutState,
    env_params: Any,
) -> tuple[TrainState, RolloutState, dict[str, jax.Array]]:
    """One whole PPO iteration (collect, then update). Pure; jit it with `make_train_iteration`."""
    net = make_network(env, config)
    key, rollout_key, update_key = jax.random.split(train_state.key, 3)
    params_now = base.apply_curriculum(env, env_params, train_state.curriculum)
    rollout_state, traj, summary, env_metrics = rollout(
        env,
        params_now,
        net,
        train_state.params,
        train_state.normalizer,
        config.normalize_observations,
        rollout_state,
        rollout_key,
        config.unroll_length,
    )
    normalizer = train_state.normalizer
    if config.normalize_observations:
        normalizer = normalizer.update(traj.obs)
    train_state = train_state.replace(normalizer=normalizer)
    batch = advantages_and_batch(net, config, train_state.params, normalizer, traj)
    params, opt_state, terms = update(net, config, train_state, batch, update_key)
    curriculum = base.update_curriculum(env, train_state.curriculum, summary)
    solved = base.curriculum_solved(env, curriculum, summary)
    train_state = train_state.replace(
        params=params,
        opt_state=opt_state,
        curriculum=curriculum,
        iteration=train_state.iteration + 1,
        key=key,
    )
    metrics = iteration_metrics(summary, env_metrics, terms, curriculum, solved)
    return train_state, rollout_state, metrics


def make_train_iteration(env: base.Env, config: PPOConfig) -> IterationFn:
    """`train_iteration` jitted once, with the train and rollout states donated.

    The env params (the MJX model among them) are not donated, so their device buffers, which MJX-Warp's
    captured CUDA graphs point at, stay put from one iteration to the next.
    """

    def fn(train_state: TrainState, rollout_state: RolloutState, env_params: Any):
        return train_iteration(env, config, train_state, rollout_state, env_params)

    return jax.jit(fn, donate_argnums=(0, 1))
