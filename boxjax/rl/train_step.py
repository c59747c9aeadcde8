"""The fused PPO iteration: rollout -> GAE -> epochs x minibatches of updates, one XLA program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from boxjax.envs import base
from boxjax.models.networks import ActorCritic, Normalizer
from boxjax.rl import collectives, guard, unrolls
from boxjax.rl.collectives import Shards
from boxjax.rl.config import PPOConfig
from boxjax.rl.losses import LossBatch, LossTerms, UnitBatch, configured_loss, gae
from boxjax.rl.rollout import (
    COUNTS,
    SUM_PREFIX,
    RolloutState,
    Transition,
    network_policy,
    rollout,
    world_noise,
)


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
    pool: Pool | None = None
    """Snapshots of every agent's model, for a several-agent run with `PPOConfig.pool_size` > 0
    (`boxjax.rl.agents`); None otherwise."""


@struct.dataclass
class Pool:
    """Snapshots of every agent's model (fictitious self-play): leaves (pool_size, ...) by agent name."""

    params: dict[str, Any]
    normalizer: dict[str, Normalizer]
    filled: jax.Array
    """() int32 slots holding a snapshot (they fill from slot 0)."""
    next_slot: jax.Array
    """() int32 the slot the next snapshot replaces (the oldest once full)."""

    @classmethod
    def empty(cls, params: dict[str, Any], normalizer: dict[str, Normalizer], size: int) -> Pool:
        """`size` zeroed slots shaped as the agents' `params` and `normalizer`, none filled."""
        zeros = jax.tree.map(
            lambda x: jnp.zeros((size, *jnp.shape(x)), jnp.asarray(x).dtype), (params, normalizer)
        )
        none = jnp.zeros((), jnp.int32)
        return cls(params=zeros[0], normalizer=zeros[1], filled=none, next_slot=none)


IterationFn = Callable[[TrainState, RolloutState, Any], tuple[TrainState, RolloutState, dict]]


def make_network(env: base.Env, config: PPOConfig) -> ActorCritic:
    """The actor-critic sized for `env` (its primary agent's, `base.agents_of`)."""
    return agent_network(base.agents_of(env)[0], config)


def agent_network(agent: base.Agent, config: PPOConfig) -> ActorCritic:
    """The actor-critic sized for one agent of an env."""
    return ActorCritic(
        action_size=agent.action_size,
        policy_hidden=tuple(config.policy_hidden),
        value_hidden=tuple(config.value_hidden),
        init_log_std=config.init_log_std,
        distribution=config.action_distribution,
        weight_init=config.network_init,
    )


def make_optimizer(config: PPOConfig) -> optax.GradientTransformation:
    """Gradient clipping then Adam, its step size kept in the optimiser state (see `adapt_learning_rate`)."""
    adam = optax.inject_hyperparams(optax.adam)(learning_rate=config.learning_rate)
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), adam)


def learning_rate(opt_state: Any) -> jax.Array:
    """() the step size held in an optimiser state made by `make_optimizer`."""
    return opt_state[1].hyperparams["learning_rate"]


def adapt_learning_rate(config: PPOConfig, opt_state: Any, approx_kl: jax.Array) -> Any:
    """The optimiser state with its step size moved toward `config.desired_kl` (unchanged when it is 0).

    A step too far from the rollout policy (KL above twice the target) divides the step size by 1.5; a
    timid one (below half) multiplies it by 1.5, within `learning_rate_bounds` (as in rsl_rl's PPO).
    """
    if config.desired_kl <= 0:
        return opt_state
    lr = learning_rate(opt_state)
    lr = jnp.where(approx_kl > 2.0 * config.desired_kl, lr / 1.5, lr)
    lr = jnp.where(approx_kl < 0.5 * config.desired_kl, lr * 1.5, lr)
    lr = jnp.clip(lr, *config.learning_rate_bounds).astype(jnp.float32)
    adam_state = opt_state[1]
    return (opt_state[0], adam_state._replace(hyperparams={**adam_state.hyperparams, "learning_rate": lr}))


def init_train_state(env: base.Env, config: PPOConfig, key: jax.Array) -> TrainState:
    """Fresh parameters, optimiser, normaliser and curriculum of one seed (several seeds' stacked states are
    `boxjax.rl.seeds.fresh_states`; a path that trains one seed refuses `num_seeds` > 1 here)."""
    if config.num_seeds > 1:
        raise ValueError(
            f"PPOConfig.num_seeds {config.num_seeds}: only the fused path on one device "
            "(boxjax.rl.ppo.train) trains several seeds; the CPU workers, model conversion and one-seed "
            "tools take num_seeds 1"
        )
    init_key, key = jax.random.split(key)
    agents = base.agents_of(env)
    models = {
        a.name: fresh_model(a, config, init_key if i == 0 else jax.random.fold_in(init_key, i))
        for i, a in enumerate(agents)
    }
    if len(agents) == 1:
        params, opt_state, normalizer = models[agents[0].name]
    else:  # several learners: each part a dict by agent name (`boxjax.rl.agents`)
        params, opt_state, normalizer = ({k: v[part] for k, v in models.items()} for part in range(3))
    if config.pool_size and len(agents) == 1:
        raise ValueError(
            f"PPOConfig.pool_size {config.pool_size}: a pool of snapshots needs an env with several agents"
        )
    return TrainState(
        params=params,
        opt_state=opt_state,
        normalizer=normalizer,
        curriculum=base.init_curriculum(env),
        iteration=jnp.zeros((), jnp.int32),
        key=key,
        pool=Pool.empty(params, normalizer, config.pool_size) if config.pool_size else None,
    )


def fresh_model(agent: base.Agent, config: PPOConfig, key: jax.Array) -> tuple[Any, Any, Normalizer]:
    """Fresh (parameters, optimiser state, normaliser) of one agent."""
    params = agent_network(agent, config).init(key, jnp.zeros((1, agent.observation_size), jnp.float32))
    normalizer = Normalizer.create(agent.observation_size, config.obs_normalizer)
    return params, make_optimizer(config).init(params), normalizer


def _flatten_time(x: jax.Array) -> jax.Array:
    return x.reshape((-1,) + x.shape[2:])


def minibatches(batch: LossBatch, key: jax.Array, num_minibatches: int) -> LossBatch:
    """One permutation of the (B, ...) batch, reshaped to (num_minibatches, B / num_minibatches, ...)."""
    perm = jax.random.permutation(key, batch.obs.shape[0])
    return jax.tree.map(lambda x: x[perm].reshape((num_minibatches, -1) + x.shape[1:]), batch)


def minibatch_loss(
    net: ActorCritic,
    config: PPOConfig,
    params: Any,
    normalizer: Normalizer,
    mb: LossBatch,
    *,
    normalize_advantages: bool,
    compute_dtype: Any = jnp.float32,
) -> tuple[jax.Array, LossTerms]:
    """(total, terms) of the PPO loss on one minibatch; the network runs in `compute_dtype`, the loss in
    float32. Shared by the fused iteration and the CPU learners. A tanh-squashed policy
    (`config.action_distribution` "tanh_normal") needs the batch's `entropy_noise`: its entropy is estimated
    at a fresh sample, as Brax's."""
    obs = normalizer(mb.obs, config.normalize_observations)
    if compute_dtype != jnp.float32:
        params = jax.tree.map(lambda x: x.astype(compute_dtype), params)
        obs = obs.astype(compute_dtype)
    mean, log_std, value = jax.tree.map(lambda x: x.astype(jnp.float32), net.apply(params, obs))
    terms = configured_loss(config, net.dist, mean, log_std, value, mb, normalize_advantages)
    return terms.total, terms


def transition_noise(
    key: jax.Array, steps: int, worlds: int, action_size: int, shards: Shards | None = None
) -> jax.Array:
    """(steps * worlds, A) standard normal noise, one row per transition of the flat (T*N) batch; with
    `shards`, this device's worlds' rows of the noise all devices' worlds get, so each transition draws
    what it would on one device."""
    noise = world_noise(key, (worlds, steps, action_size), shards)
    return noise.swapaxes(0, 1).reshape(steps * worlds, action_size)


def apply_gradient(
    config: PPOConfig,
    optimizer: optax.GradientTransformation,
    params: Any,
    opt_state: Any,
    grads: Any,
    approx_kl: jax.Array,
) -> tuple[Any, Any]:
    """One optimiser step, its step size first adapted to the minibatch's KL; (params, opt_state)."""
    opt_state = adapt_learning_rate(config, opt_state, approx_kl)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def update(
    net: ActorCritic,
    config: PPOConfig,
    train_state: TrainState,
    batch: LossBatch | UnitBatch,
    key: jax.Array,
    shards: Shards | None = None,
) -> tuple[Any, Any, LossTerms]:
    """Epochs x minibatches of clipped-PPO gradient steps (nested scans).

    With `shards`, `batch` is this device's share: each device shuffles its own transitions into
    `num_minibatches` slices of `minibatch_size / shards.count`, advantages are standardised over the
    global minibatch, and gradients are averaged over the devices before the (identical) optimiser step.

    A gradient step whose loss or gradients are not finite is skipped (`step_flags`); parameters or
    optimiser state left non-finite by the update as a whole are replaced by the ones it started from
    (`guard.finite_or`).

    Returns:
      new params, new optimiser state, the loss terms averaged over the applied gradient steps, and the
      guard's figures (`boxjax.rl.guard`: skipped steps and what was non-finite).
    """
    optimizer = make_optimizer(config)
    normalizer = train_state.normalizer
    local_advantages = config.normalize_advantages and shards is None
    in_unrolls = config.batch_layout == "unrolls"
    if in_unrolls and shards is not None:
        raise ValueError("PPOConfig.batch_layout 'unrolls' runs on one device")

    def loss_fn(params, mb: LossBatch | UnitBatch) -> tuple[jax.Array, LossTerms]:
        if in_unrolls:
            return unrolls.unit_loss(net, config, params, normalizer, mb)
        return minibatch_loss(net, config, params, normalizer, mb, normalize_advantages=local_advantages)

    def sgd_step(carry, mb: LossBatch | UnitBatch):
        params, opt_state = carry
        if shards is not None and config.normalize_advantages:
            mb = mb.replace(advantage=collectives.standardize(mb.advantage, shards))
        grads, terms = jax.grad(loss_fn, has_aux=True)(params, mb)
        kl, total = terms.approx_kl, terms.total
        if shards is not None:
            grads, kl, total = shards.mean((grads, kl, total))
        params, opt_state, flags, applied = guarded_step(
            config, optimizer, params, opt_state, grads, kl, total
        )
        return (params, opt_state), (terms, flags, applied)

    def epoch(carry, epoch_key):
        data = batch
        if net.dist.sampled_entropy:  # fresh entropy noise per transition and epoch, drawn before the shuffle
            noise_key = jax.random.fold_in(epoch_key, 1)
            transitions = batch.log_prob.size
            worlds = transitions // config.unroll_length
            noise = transition_noise(noise_key, config.unroll_length, worlds, net.action_size, shards)
            data = batch.replace(entropy_noise=unrolls.unit_noise(noise, config) if in_unrolls else noise)
        if shards is not None:
            epoch_key = jax.random.fold_in(epoch_key, shards.index())
        shuffled = minibatches(data, epoch_key, config.num_minibatches)
        return jax.lax.scan(sgd_step, carry, shuffled)

    carry = (train_state.params, train_state.opt_state)
    keys = jax.random.split(key, config.num_epochs)
    (params, opt_state), (terms, flags, applied) = jax.lax.scan(epoch, carry, keys)
    terms, applied = jax.tree.map(_flatten_time, (terms, applied))
    terms = guard.masked_mean(terms, applied)
    (params, opt_state), finite = guard.finite_or((params, opt_state), carry)  # once, after every step
    figures = {guard.PREFIX + k: jnp.sum(v) for k, v in flags.items()}
    figures[guard.PREFIX + "parameters"] = (~finite).astype(jnp.float32)
    applied = applied * finite
    figures[guard.SKIPPED_STEPS] = jnp.sum(1.0 - applied)
    figures[guard.UPDATE_SKIPPED] = (jnp.sum(applied) == 0).astype(jnp.float32)
    return params, opt_state, terms if shards is None else shards.mean(terms), figures


def guarded_step(
    config: PPOConfig,
    optimizer: optax.GradientTransformation,
    params: Any,
    opt_state: Any,
    grads: Any,
    approx_kl: jax.Array,
    total: jax.Array,
) -> tuple[Any, Any, dict[str, jax.Array], jax.Array]:
    """`apply_gradient`, applied only when the step's loss and gradients are finite: (params, opt_state, the
    step's `step_flags`, () 1.0 if it was applied). The flags are read before the update, so the choice
    between the new and the old values joins the update's own elementwise work instead of a pass over every
    leaf after a check of its results. Shared by the fused iteration and the CPU learners."""
    flags = step_flags(total, grads)
    applied = 1.0 - jnp.max(jnp.stack(list(flags.values())))
    new = apply_gradient(config, optimizer, params, opt_state, grads, approx_kl)
    new_params, new_opt_state = guard.keep_if(applied > 0, new, (params, opt_state))
    return new_params, new_opt_state, flags, applied


def step_flags(total: jax.Array, grads: Any) -> dict[str, jax.Array]:
    """() float32 flags of one gradient step: 1.0 where its loss is not finite, or its gradients' global
    norm (NaN or inf when any gradient is, and inf when their squares overflow float32: above about 1e19,
    no step to apply either) is not; the step is then not applied."""
    return {
        "loss": (~jnp.isfinite(total)).astype(jnp.float32),
        "gradients": (~jnp.isfinite(optax.tree.norm(grads))).astype(jnp.float32),
    }


def to_windows(x: jax.Array, window: int) -> jax.Array:
    """(T, N, ...) -> (window, T / window * N, ...): each `window` steps of a world's unroll a column of its
    own, so a scan over time stops at window ends (`from_windows` inverts it)."""
    steps, worlds = x.shape[:2]
    cut = x.reshape(steps // window, window, worlds, *x.shape[2:]).swapaxes(0, 1)
    return cut.reshape(window, steps // window * worlds, *x.shape[2:])


def from_windows(x: jax.Array, steps: int) -> jax.Array:
    """Inverse of `to_windows`: (window, T / window * N, ...) -> (T, N, ...)."""
    window = x.shape[0]
    worlds = x.shape[1] * window // steps
    cut = x.reshape(window, steps // window, worlds, *x.shape[2:]).swapaxes(0, 1)
    return cut.reshape(steps, worlds, *x.shape[2:])


def advantages_and_batch(
    net: ActorCritic, config: PPOConfig, params: Any, normalizer: Normalizer, traj: Transition
) -> LossBatch:
    """Values of the (T, N) trajectory in one batched pass, GAE (in windows of `config.gae_window` steps,
    `to_windows`), then a flat (T*N, ...) loss batch (carrying the trajectory's distillation targets, when
    it has them)."""
    norm = config.normalize_observations
    value = net.apply(params, normalizer(traj.obs, norm), method=ActorCritic.value_only)
    next_value = net.apply(params, normalizer(traj.next_obs, norm), method=ActorCritic.value_only)
    steps = traj.reward.shape[0]
    window = config.gae_window or steps
    inputs = (traj.reward * config.reward_scale, value, next_value, traj.termination, traj.done)
    advantage, target = gae(*(to_windows(x, window) for x in inputs), config.gamma, config.gae_lambda)
    advantage, target = from_windows(advantage, steps), from_windows(target, steps)
    flat = LossBatch(
        obs=traj.obs,
        action=traj.action,
        log_prob=traj.log_prob,
        advantage=advantage,
        target=target,
        distill_target=traj.distill_target,
        distill_mask=traj.distill_mask,
        weight=traj.weight,
    )
    return jax.tree.map(_flatten_time, flat)


def make_batch(
    net: ActorCritic, config: PPOConfig, params: Any, normalizer: Normalizer, traj: Transition
) -> LossBatch | UnitBatch:
    """The update's batch of the trajectory: single transitions with their GAE (`advantages_and_batch`), or
    with `config.batch_layout` "unrolls" unrolls whose advantages the loss computes (`unrolls.unit_batch`)."""
    if config.batch_layout == "unrolls":
        return unrolls.unit_batch(config, traj)
    return advantages_and_batch(net, config, params, normalizer, traj)


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


def obs_stats_kl(
    net: ActorCritic, params: Any, before: Normalizer, after: Normalizer, obs: jax.Array
) -> jax.Array:
    """Mean KL between the policy (same `params`) normalising `obs` (..., O) with `before` and with `after`:
    how far new observation statistics alone move the policy."""
    mean_before, log_std = net.apply(params, before(obs), method=ActorCritic.policy_only)
    mean_after, log_std_after = net.apply(params, after(obs), method=ActorCritic.policy_only)
    return net.dist.kl(mean_before, log_std, mean_after, log_std_after)


def next_normalizer(
    net: ActorCritic,
    config: PPOConfig,
    params: Any,
    normalizer: Normalizer,
    obs: jax.Array,
    shards: Shards | None,
) -> tuple[Normalizer, dict[str, jax.Array]]:
    """The statistics the next rollout acts with (`normalizer` having taken in `obs`, over all devices with
    `shards`) and the figure of how far that alone moves the policy of `params` (`loss/kl_from_obs_stats`):
    the updated policy in boxjax's order; with `config.stats_before_update` the rollout's, taken in before
    the update, so the figure is the part of the update's own KL the statistics cause. `normalizer`
    unchanged and no figure when the config does not normalise observations."""
    if not config.normalize_observations:
        return normalizer, {}
    if shards is None:
        after = normalizer.update(obs)
    else:
        after = collectives.update_normalizer(normalizer, obs, shards)
    stats_kl = obs_stats_kl(net, params, normalizer, after, obs)
    return after, {"loss/kl_from_obs_stats": stats_kl if shards is None else shards.mean(stats_kl)}


def train_iteration(
    env: base.Env,
    config: PPOConfig,
    train_state: TrainState,
    rollout_state: RolloutState,
    env_params: Any,
    shards: Shards | None = None,
) -> tuple[TrainState, RolloutState, dict[str, jax.Array]]:
    """One whole PPO iteration (collect, then update). Pure; jit it with `make_train_iteration`.

    The update sees observations normalised with the statistics the rollout acted with, so its ratios and
    approximate KL measure the parameter change alone (the step size adapts to what it controls); the
    statistics take in the rollout's observations after the update, for the next rollout (the policy shift
    that alone causes is logged as `loss/kl_from_obs_stats`). With `config.stats_before_update` (Brax's
    normaliser and a fixed step size) they take them in before the update instead, which then sees them.

    With `shards` it is one device's part of the data-parallel iteration (`boxjax.rl.sharding`): the
    rollout state holds this device's worlds; the normaliser, gradients, episode totals and figures are
    reduced over the devices, so the returned train state and figures are the same on every device.
    """
    net = make_network(env, config)
    key, rollout_key, update_key = jax.random.split(train_state.key, 3)
    params_now = base.apply_curriculum(env, env_params, train_state.curriculum)
    rollout_state, traj, summary, env_metrics = rollout(
        env,
        params_now,
        network_policy(
            net, train_state.params, train_state.normalizer, config.normalize_observations, shards
        ),
        rollout_state,
        rollout_key,
        config.unroll_length,
        shards,
        distill=config.distill_coef > 0,
        reset_every=config.reset_every,
        restart_on_draw=config.restart_on_draw,
    )
    learned = learn(net, config, train_state, traj, update_key, shards)
    if shards is not None:
        summary = collectives.sum_episodes(summary, shards)
        env_metrics = collectives.reduce_env_metrics(env_metrics, shards, SUM_PREFIX, COUNTS)
    curriculum = base.update_curriculum(env, train_state.curriculum, summary)
    solved = base.curriculum_solved(env, curriculum, summary)
    train_state = train_state.replace(
        params=learned.params,
        opt_state=learned.opt_state,
        normalizer=learned.normalizer,
        curriculum=curriculum,
        iteration=train_state.iteration + 1,
        key=key,
    )
    metrics = iteration_metrics(summary, env_metrics, learned.terms, curriculum, solved)
    metrics.update(learned.figures)
    return train_state, rollout_state, metrics


@struct.dataclass
class Learned:
    """One agent's model after an iteration's update (`learn`), and the update's figures."""

    params: Any
    opt_state: Any
    normalizer: Normalizer
    terms: LossTerms
    """The loss terms averaged over the applied gradient steps."""
    figures: dict[str, jax.Array]
    """The learning rate, the observation statistics' KL and the guard's figures (names as in
    `train_iteration`'s)."""


def learn(
    net: ActorCritic,
    config: PPOConfig,
    train_state: TrainState,
    traj: Transition,
    key: jax.Array,
    shards: Shards | None = None,
) -> Learned:
    """One agent's update from its (T, N) trajectory: the batch, epochs x minibatches of PPO steps, and the
    observation statistics for the next rollout (in the order `train_iteration` describes); `train_state`
    holds that agent's params, optimiser state and normaliser (the one the rollout acted with)."""
    acted = train_state.normalizer
    if config.stats_before_update:  # Brax's order: the update sees the statistics with this rollout's in
        normalizer, stats_metrics = next_normalizer(net, config, train_state.params, acted, traj.obs, shards)
        normalizer, stats_ok = guard.finite_or(normalizer, acted)
        train_state = train_state.replace(normalizer=normalizer)
    batch = make_batch(net, config, train_state.params, train_state.normalizer, traj)
    params, opt_state, terms, figures = update(net, config, train_state, batch, key, shards)
    if not config.stats_before_update:
        normalizer, stats_metrics = next_normalizer(net, config, params, acted, traj.obs, shards)
        normalizer, stats_ok = guard.finite_or(normalizer, acted)
    figures[guard.PREFIX + "observation_statistics"] = (~stats_ok).astype(jnp.float32)
    observations_ok = guard.all_finite(traj.obs)
    if shards is not None:
        observations_ok = shards.mean(observations_ok.astype(jnp.float32)) == 1.0
    figures[guard.PREFIX + "observations"] = (~observations_ok).astype(jnp.float32)
    figures["loss/learning_rate"] = learning_rate(opt_state)
    figures.update(stats_metrics)
    return Learned(params=params, opt_state=opt_state, normalizer=normalizer, terms=terms, figures=figures)


def make_train_iteration(env: base.Env, config: PPOConfig) -> IterationFn:
    """`train_iteration` jitted once, with the train and rollout states donated (one device; for several
    see `boxjax.rl.sharding.DataParallel`); for an env with several learners, `boxjax.rl.agents`'s.

    The env params (the MJX model among them) are not donated, so their device buffers, which MJX-Warp's
    captured CUDA graphs point at, stay put from one iteration to the next.
    """

    if base.co_agents(env):
        from boxjax.rl import agents  # it builds on this module

        return agents.make_iteration(env, config)

    def fn(train_state: TrainState, rollout_state: RolloutState, env_params: Any):
        return train_iteration(env, config, train_state, rollout_state, env_params)

    return jax.jit(fn, donate_argnums=(0, 1))
