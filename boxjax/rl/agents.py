"""Several learners in one iteration: every agent an env names acts in one rollout, and each gets its own
PPO update (its own networks, optimiser, normaliser and minibatches) inside the same compiled program.

Task-free: the agents, their sizes, observations and rewards come from the env protocol
(`boxjax.envs.base`: `agents`, `State.others`), never from a task. The train state is the single-agent
`TrainState` whose `params`, `opt_state` and `normalizer` are dicts by agent name; the curriculum (the
env's), the iteration count and the key are the run's. `PPOConfig.frozen_agents` keeps agents from
learning; `PPOConfig.agent_turn_iterations` makes them take turns; `PPOConfig.pool_size` keeps a pool of
past models (fictitious self-play): at each reset a world may have one agent played by a snapshot, and that
agent learns nothing from that world's steps until the next reset (`rollout.Faces`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from boxjax.envs import base
from boxjax.models import checkpoint
from boxjax.models.networks import ActorCritic
from boxjax.rl import guard
from boxjax.rl.config import PPOConfig
from boxjax.rl.rollout import Faces, RolloutState, Transition, rollout, sample_action
from boxjax.rl.train_step import (
    IterationFn,
    Learned,
    Pool,
    TrainState,
    agent_network,
    iteration_metrics,
    learn,
    learning_rate,
)

PREFIX = "agent/"
"""Figures of one agent of several: `agent/<name>/reward` (its mean reward per world-step),
`agent/<name>/learns` (1.0 when it updated this iteration), `agent/<name>/snapshot_share` with a pool and,
for the co-agents, `agent/<name>/loss/...` and its guard's figures (the primary agent's loss figures keep
their single-agent names; the unprefixed guard figures are the largest over the agents, `guard_figures`).
The episode figures count every world, those where a snapshot plays a side too."""


def has_agents(train_state: TrainState) -> bool:
    """Whether `train_state` holds several agents' models (dicts by agent name)."""
    return isinstance(train_state.normalizer, dict)


def agent_state(train_state: TrainState, name: str) -> TrainState:
    """One agent's view of a several-agent train state: its params, optimiser state and normaliser."""
    if name not in train_state.normalizer:
        raise ValueError(
            f"no agent {name!r} in this train state; its agents: {sorted(train_state.normalizer)}"
        )
    return train_state.replace(
        params=train_state.params[name],
        opt_state=train_state.opt_state[name],
        normalizer=train_state.normalizer[name],
    )


def check_config(env: base.Env, config: PPOConfig) -> None:
    """Refuse, naming the field, what several learners cannot take: a frozen agent the env does not name, no
    agent left to learn, a pool beside frozen agents or with Brax's batch layout, several seeds or devices;
    and any option of several agents for an env with one."""
    names = [a.name for a in base.agents_of(env)]
    if len(names) == 1:
        options = ("frozen_agents", "agent_turn_iterations", "pool_size")
        given = {k: getattr(config, k) for k in options if getattr(config, k)}
        if given:
            raise ValueError(f"PPOConfig {given}: options of several agents; this env has one ({names[0]})")
        return
    unknown = sorted(set(config.frozen_agents) - set(names))
    if unknown:
        raise ValueError(f"PPOConfig.frozen_agents names {unknown}; the env's agents are {names}")
    if not set(names) - set(config.frozen_agents):
        raise ValueError(f"PPOConfig.frozen_agents freezes every agent ({names}): none would learn")
    if config.pool_size and config.frozen_agents:
        raise ValueError(
            f"PPOConfig.pool_size {config.pool_size} with frozen_agents {list(config.frozen_agents)}: the "
            "snapshots of a frozen agent are the agent itself, and those of a learner would face it alone"
        )
    if config.pool_size and config.batch_layout != "transitions":
        raise ValueError(
            f"PPOConfig.pool_size {config.pool_size} takes batch_layout 'transitions' (its loss leaves out "
            f"the transitions a snapshot acted for), not {config.batch_layout!r}"
        )
    if config.num_seeds != 1 or config.num_devices != 1:
        raise ValueError(
            f"an env with several agents ({names}) trains one seed on one device (PPOConfig.num_seeds "
            f"{config.num_seeds}, num_devices {config.num_devices})"
        )


def learners(config: PPOConfig, names: list[str]) -> list[str]:
    """The agents that may learn: `names` less `config.frozen_agents`, in the env's order."""
    return [n for n in names if n not in config.frozen_agents]


def learns_now(config: PPOConfig, names: list[str], iteration: jax.Array) -> dict[str, Any]:
    """Per agent whether it updates at `iteration`: False for a frozen agent, else a () bool (with
    `config.agent_turn_iterations` N, the learners take turns of N iterations in the env's order)."""
    learning = learners(config, names)
    turn = (iteration // max(config.agent_turn_iterations, 1)) % len(learning)
    out: dict[str, Any] = {}
    for name in names:
        if name not in learning:
            out[name] = False
        elif config.agent_turn_iterations == 0:
            out[name] = jnp.ones((), bool)
        else:
            out[name] = turn == learning.index(name)
    return out


def agents_policy(nets: dict[str, ActorCritic], train_state: TrainState, normalize: bool):
    """The rollout's policy of every agent (`boxjax.rl.rollout.PolicyFn` over dicts by agent name): each
    samples from its own network with its own normaliser and noise; with the worlds' `Faces` (a pool), an
    agent a snapshot plays in a world acts there by the snapshot's network, with the same noise."""
    pool = train_state.pool

    def act(obs: dict[str, jax.Array], key: jax.Array, faces: Faces | None = None):
        out = {}
        for i, name in enumerate(nets):
            noise_key = jax.random.fold_in(key, i)
            params, normalizer = train_state.params[name], train_state.normalizer[name]
            out[name] = sample_action(nets[name], params, normalizer, obs[name], noise_key, normalize)
            if faces is not None:
                out[name] = _snapshot_acts(
                    nets[name], pool, name, obs[name], noise_key, normalize, faces, i, out[name]
                )
        return tuple({name: out[name][part] for name in out} for part in range(3))

    return act


def _snapshot_acts(net, pool, name, obs, key, normalize, faces: Faces, index: int, current):
    """(raw, log prob, action) of agent `index` in every world: the snapshot's where a snapshot plays it
    (`faces`), `current` elsewhere. Every slot acts on every world (one batched pass), each world takes its
    slot's."""

    def by_slot(params, normalizer):
        return sample_action(net, params, normalizer, obs, key, normalize)

    every = jax.vmap(by_slot)(pool.params[name], pool.normalizer[name])
    worlds = jnp.arange(obs.shape[0])
    mine = faces.side == index
    return tuple(
        jnp.where(mine.reshape(mine.shape + (1,) * (now.ndim - 1)), slots[faces.slot, worlds], now)
        for slots, now in zip(every, current, strict=True)
    )


def redraw(config: PPOConfig, agents_count: int, filled: jax.Array):
    """The rollout's `redraw_faces` for a pool with `filled` snapshots: a world whose episode ended draws,
    with chance `config.pool_share` (none while the pool is empty), one agent evenly and a filled slot
    evenly for a snapshot to play; the others keep theirs."""

    def draw(key: jax.Array, done: jax.Array, faces: Faces) -> Faces:
        share_key, side_key, slot_key = jax.random.split(key, 3)
        worlds = done.shape[0]
        pooled = (jax.random.uniform(share_key, (worlds,)) < config.pool_share) & (filled > 0)
        side = jnp.where(pooled, jax.random.randint(side_key, (worlds,), 0, agents_count), -1)
        slot = jax.random.randint(slot_key, (worlds,), 0, jnp.maximum(filled, 1))
        ended = done > 0.5
        return Faces(side=jnp.where(ended, side, faces.side), slot=jnp.where(ended, slot, faces.slot))

    return draw


def snapshot(config: PPOConfig, train_state: TrainState) -> Pool:
    """The pool with every agent's current model put in its next slot at an iteration that is a multiple
    of `config.pool_every`; as it was otherwise."""
    pool = train_state.pool
    due = train_state.iteration % config.pool_every == 0

    def put(slots, now):
        return jnp.where(due, slots.at[pool.next_slot].set(now), slots)

    return pool.replace(
        params=jax.tree.map(put, pool.params, train_state.params),
        normalizer=jax.tree.map(put, pool.normalizer, train_state.normalizer),
        filled=jnp.where(due, jnp.minimum(pool.filled + 1, config.pool_size), pool.filled),
        next_slot=jnp.where(due, (pool.next_slot + 1) % config.pool_size, pool.next_slot),
    )


def agent_transition(traj: Transition, name: str, primary: str, index: int) -> Transition:
    """One agent's (T, N) transitions of a several-agent rollout, agent `index` in the env's order (the
    distillation targets are the primary agent's); with a pool, those a snapshot acted for weigh 0."""
    distill = name == primary
    weight = None if traj.side is None else (traj.side != index).astype(jnp.float32)
    return Transition(
        obs=traj.obs[name],
        action=traj.action[name],
        log_prob=traj.log_prob[name],
        reward=traj.reward[name],
        next_obs=traj.next_obs[name],
        termination=traj.termination,
        done=traj.done,
        distill_target=traj.distill_target if distill else None,
        distill_mask=traj.distill_mask if distill else None,
        weight=weight,
    )


def learn_or_keep(
    net: ActorCritic, config: PPOConfig, view: TrainState, traj: Transition, key: jax.Array, now: Any
) -> Learned:
    """`learn` where `now`, else the agent's model bit for bit as it was, its loss terms and figures 0 (its
    learning rate as it stands): a `lax.cond` for a traced `now` (a turn without an update costs none), no
    update at all for `now` False (a frozen agent)."""
    shapes = jax.eval_shape(lambda: learn(net, config, view, traj, key))

    def keep() -> Learned:
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        figures = {**zeros.figures, "loss/learning_rate": learning_rate(view.opt_state)}
        return zeros.replace(
            params=view.params, opt_state=view.opt_state, normalizer=view.normalizer, figures=figures
        )

    if now is False:
        return keep()
    return jax.lax.cond(now, lambda: learn(net, config, view, traj, key), keep)


def _agent_figures(name: str, learned: Learned, traj: Transition, now: jax.Array, primary: bool) -> dict:
    """An agent's figures under `PREFIX` (the primary agent's loss and guard figures keep their names); its
    reward per step over the steps it played itself (with a pool, not those a snapshot played for it)."""
    own = jnp.ones_like(traj.reward) if traj.weight is None else traj.weight
    reward = jnp.sum(traj.reward * own) / jnp.maximum(jnp.sum(own), 1.0)
    figures = {f"{PREFIX}{name}/reward": reward, f"{PREFIX}{name}/learns": jnp.float32(now)}
    if not primary:
        terms = {f"loss/{k}": getattr(learned.terms, k) for k in learned.terms.__dataclass_fields__}
        figures.update(
            {
                f"{PREFIX}{name}/{k}": jnp.asarray(v, jnp.float32)
                for k, v in {**terms, **learned.figures}.items()
            }
        )
    return figures


def train_iteration(
    env: base.Env, config: PPOConfig, train_state: TrainState, rollout_state: RolloutState, env_params: Any
) -> tuple[TrainState, RolloutState, dict[str, jax.Array]]:
    """One iteration of every agent: one rollout where all act, then each learner's update on its own
    transitions (`learn_or_keep`). Pure; jit it with `make_iteration`."""
    agents = base.agents_of(env)
    names, primary = [a.name for a in agents], agents[0].name
    nets = {a.name: agent_network(a, config) for a in agents}
    key, rollout_key, update_key = jax.random.split(train_state.key, 3)
    params_now = base.apply_curriculum(env, env_params, train_state.curriculum)
    draw = None
    if config.pool_size:
        if rollout_state.faces is None or train_state.pool is None:
            raise ValueError(
                "PPOConfig.pool_size > 0 needs states made for a pool (init_rollout(faces=True), "
                "init_train_state with the pool config)"
            )
        train_state = train_state.replace(pool=snapshot(config, train_state))
        draw = redraw(config, len(agents), train_state.pool.filled)
    rollout_state, traj, summary, env_metrics = rollout(
        env,
        params_now,
        agents_policy(nets, train_state, config.normalize_observations),
        rollout_state,
        rollout_key,
        config.unroll_length,
        distill=config.distill_coef > 0,
        reset_every=config.reset_every,
        restart_on_draw=config.restart_on_draw,
        primary=primary,
        redraw_faces=draw,
    )
    now = learns_now(config, names, train_state.iteration)
    learned, figures = {}, {}
    if config.pool_size:
        figures["pool/filled"] = train_state.pool.filled.astype(jnp.float32)
    for i, name in enumerate(names):
        mine = agent_transition(traj, name, primary, i)
        if mine.weight is not None:
            figures[f"{PREFIX}{name}/snapshot_share"] = 1.0 - jnp.mean(mine.weight)
        learned[name] = learn_or_keep(
            nets[name],
            config,
            agent_state(train_state, name),
            mine,
            jax.random.fold_in(update_key, i),
            now[name],
        )
        figures.update(_agent_figures(name, learned[name], mine, now[name], name == primary))
    curriculum = base.update_curriculum(env, train_state.curriculum, summary)
    solved = base.curriculum_solved(env, curriculum, summary)
    train_state = train_state.replace(
        params={n: learned[n].params for n in names},
        opt_state={n: learned[n].opt_state for n in names},
        normalizer={n: learned[n].normalizer for n in names},
        curriculum=curriculum,
        iteration=train_state.iteration + 1,
        key=key,
    )
    metrics = iteration_metrics(summary, env_metrics, learned[primary].terms, curriculum, solved)
    metrics.update(learned[primary].figures)
    metrics.update(figures)
    metrics.update(guard_figures(learned))
    return train_state, rollout_state, metrics


def guard_figures(learned: dict[str, Learned]) -> dict[str, jax.Array]:
    """The guard's figures (`boxjax.rl.guard`) of the iteration as the host's stop rules read them: each the
    largest over the agents (an agent without an update this iteration reports 0), so a co-agent whose
    updates go non-finite stops the run as the primary agent's would."""
    keys = [k for k in next(iter(learned.values())).figures if k.startswith(guard.PREFIX_ROOT)]
    return {k: jnp.max(jnp.stack([jnp.asarray(one.figures[k]) for one in learned.values()])) for k in keys}


def make_iteration(env: base.Env, config: PPOConfig) -> IterationFn:
    """`train_iteration` jitted once, the train and rollout states donated (as
    `boxjax.rl.train_step.make_train_iteration`)."""
    check_config(env, config)

    def fn(train_state: TrainState, rollout_state: RolloutState, env_params: Any):
        return train_iteration(env, config, train_state, rollout_state, env_params)

    return jax.jit(fn, donate_argnums=(0, 1))


def init_model(source: str, train_state: TrainState, meta: dict[str, Any], primary: str) -> dict[str, Any]:
    """The model a several-agent run seeded from `source` (`--init`) takes: every agent's from a checkpoint
    of the same agents (their names and sizes compared), or one agent's from a single-agent source (the
    agent a policy file of one agent names, else the primary one; the others start fresh), as
    `checkpoint.init_model` checks it."""
    saved = checkpoint.read_source_meta(source)
    if saved.get("agents") is not None:
        if saved["agents"] != meta.get("agents"):
            raise checkpoint.CheckpointMismatchError(
                f"cannot start from {source}: its agents {saved['agents']}, this run's {meta.get('agents')}"
            )
        return checkpoint.init_model(source, train_state, meta)
    name = saved.get("agent", primary)
    model = checkpoint.init_model(source, agent_state(train_state, name), agent_meta(meta, name))
    return {part: {**getattr(train_state, part), name: value} for part, value in model.items()}


def agent_meta(meta: dict[str, Any], name: str) -> dict[str, Any]:
    """The meta of agent `name` alone of a several-agent run's `meta` (a policy file of one agent, the meta
    its model is checked against): the `agents` list replaced by the agent's name and its observation and
    action sizes; a ValueError naming the run's agents where `name` is none of them."""
    chosen = next((a for a in meta.get("agents") or [] if a["name"] == name), None)
    if chosen is None:
        raise ValueError(
            f"agent {name!r}: the run's agents are {[a['name'] for a in meta.get('agents') or []]}"
        )
    rest = {k: v for k, v in meta.items() if k != "agents"}
    sizes = {k: chosen[k] for k in ("observation_size", "action_size")}
    return {**rest, **sizes, "agent": name}


def describe(env: base.Env) -> list[dict[str, Any]] | None:
    """The agents of `env` for a checkpoint's meta (name and sizes); None for a single-agent env."""
    agents = base.agents_of(env)
    if len(agents) == 1:
        return None
    return [
        {"name": a.name, "observation_size": a.observation_size, "action_size": a.action_size} for a in agents
    ]
