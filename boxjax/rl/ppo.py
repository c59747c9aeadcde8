"""PPO's public API: `train`, `PPOConfig`, `Policy`, `make_policy`. This is the host loop.

The host loop is the one host/device boundary: it launches the jitted iteration, blocks on its figures once
per iteration, times it, logs, checkpoints and reports progress. Nothing inside the iteration does I/O.
`PPOConfig.num_devices` splits the worlds over several devices (`boxjax.rl.sharding`); the loop is the same.

    from boxjax import envs
    from boxjax.rl import ppo
    env = envs.make("stance", body="simple")
    policy, history = ppo.train(env, ppo.PPOConfig(num_envs=64, unroll_length=16, minibatch_size=256),
                                jax.random.key(0), iterations=20, progress_fn=print)
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import boxjax
from boxjax.envs import wrappers
from boxjax.envs.base import Env
from boxjax.models import checkpoint
from boxjax.models.networks import ActorCritic, Normalizer
from boxjax.physics import graphs
from boxjax.rl import guard, interrupts, sharding
from boxjax.rl.config import PPOConfig
from boxjax.rl.rollout import RolloutState, init_rollout
from boxjax.rl.train_step import TrainState, init_train_state, make_network, make_train_iteration

NonFiniteError = guard.NonFiniteError

__all__ = [
    "Evaluation",
    "NonFiniteError",
    "PPOConfig",
    "PhysicsOverflowError",
    "Policy",
    "TrainResult",
    "evaluate",
    "make_policy",
    "run_meta",
    "train",
]

OVERFLOW_PREFIX = "env/overflow/"


class PhysicsOverflowError(RuntimeError):
    """Some worlds ran out of contact or constraint slots and the run was asked to stop on overflow."""


def overflow_report(figures: dict[str, float]) -> str | None:
    """An `OVERFLOW ...` line naming each overflowing kind and its peak number of worlds, or None."""
    kinds = [
        f"{k[len(OVERFLOW_PREFIX) :]} in {int(v)} worlds"
        for k, v in figures.items()
        if k.startswith(OVERFLOW_PREFIX) and v > 0
    ]
    if not kinds:
        return None
    return f"OVERFLOW iteration {int(figures['iteration'])}: " + ", ".join(kinds)


GRAPH_CAPTURES = "warp/graph_captures"
"""Figure: CUDA graphs MuJoCo Warp captured during the iteration (`boxjax.physics.graphs`)."""
FUSED_FACTORIZATIONS = "physics/fused_factorizations"
"""Figure: world factorisations our kernel ran during the iteration (0 where MuJoCo Warp's own ran)."""
WARM_ITERATIONS = 2
"""Iterations that may capture graphs: the first (compile) and the second (the donated buffers' other set)."""


def capture_report(figures: dict[str, float]) -> str | None:
    """A `GRAPH CAPTURES ...` line when an iteration after the first `WARM_ITERATIONS` captured CUDA graphs
    (MuJoCo Warp capturing anew instead of replaying: slow), or None."""
    count = figures.get(GRAPH_CAPTURES, 0.0)
    if figures["iteration"] <= WARM_ITERATIONS or count <= 0:
        return None
    return (
        f"GRAPH CAPTURES iteration {int(figures['iteration'])}: {int(count)} new CUDA graphs "
        "(MuJoCo Warp got new buffer addresses; each capture costs far more than a replay)"
    )


ProgressFn = Callable[[dict[str, float]], None]


@struct.dataclass
class Policy:
    """What a trained agent needs to act: network parameters and observation statistics."""

    params: Any
    normalizer: Normalizer


@dataclasses.dataclass
class TrainResult:
    """State of a finished (or stopped) run, for resuming or inspection."""

    train_state: TrainState
    rollout_state: RolloutState
    solved_at_s: float | None
    stopped_by: str | None = None
    """The signal ("SIGINT", "SIGTERM") that stopped the run after its last iteration, if one did."""


def make_policy(env: Env, config: PPOConfig) -> Callable[[Policy, jax.Array], jax.Array]:
    """Deterministic policy: (policy, obs (..., O)) -> action (..., A) in [-1, 1]."""
    net = make_network(env, config)

    def act(policy: Policy, obs: jax.Array) -> jax.Array:
        normed = policy.normalizer(obs, config.normalize_observations)
        mean, _ = net.apply(policy.params, normed, method=ActorCritic.policy_only)
        return jnp.clip(mean, -1.0, 1.0)

    return act


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Figures of a deterministic evaluation (`evaluate`), host floats."""

    episodes: int
    """Episodes run (one per world)."""
    return_mean: float
    """Mean undiscounted return of the finished episodes."""
    return_std: float
    """Their standard deviation."""
    length_mean: float
    """Mean length in control steps."""
    fall_rate: float
    """Share of the episodes that ended by termination (a fall), not the time limit."""
    nonfinite: int
    """Episodes cut short by a non-finite state (left out of the figures above)."""


def _episode_steps(env: Env, max_steps: int | None) -> int:
    """`max_steps`, or the env's own episode length (`env.config.max_steps`), or an error saying so."""
    steps = max_steps or getattr(getattr(env, "config", None), "max_steps", None)
    if not steps or steps < 1:
        raise ValueError(
            f"evaluate: pass max_steps (>= 1): {type(env).__name__} does not say its episode length"
        )
    return int(steps)


def evaluate(
    env: Env,
    config: PPOConfig,
    policy: Policy,
    key: jax.Array,
    *,
    episodes: int = 64,
    env_params: Any = None,
    max_steps: int | None = None,
) -> Evaluation:
    """Run `episodes` episodes, one per world, with the policy's mean action (no exploration noise) until
    each ends or `max_steps` pass; the same key gives the same figures.

    Args:
      env, config: the environment and the PPO config the policy was trained with (its network sizes).
      policy: from `train` (or a checkpoint's params and normaliser).
      key: PRNG key of the resets.
      episodes: worlds, one episode each.
      env_params: default `env.default_params()` (a curriculum's values already applied, if any).
      max_steps: the episode cut-off; default the env's `config.max_steps`.
    """
    steps = _episode_steps(env, max_steps)
    if episodes < 1:
        raise ValueError(f"evaluate: episodes must be >= 1, got {episodes}")
    params = env.default_params() if env_params is None else env_params
    key = key if key.dtype == jnp.uint32 else jax.random.key_data(key)
    totals = _evaluation_totals(env, config, policy, params, key, episodes, steps)
    ret, length, fell, bad = (np.asarray(x) for x in jax.device_get(totals))
    good = ~bad
    count = max(int(good.sum()), 1)
    return Evaluation(
        episodes=episodes,
        return_mean=float(ret[good].sum() / count),
        return_std=float(ret[good].std()) if good.any() else 0.0,
        length_mean=float(length[good].sum() / count),
        fall_rate=float(fell[good].sum() / count),
        nonfinite=int(bad.sum()),
    )


@functools.partial(jax.jit, static_argnums=(0, 1, 5, 6))
def _evaluation_totals(env, config, policy, params, key, episodes: int, steps: int):
    """Per-world (return, length, fell, non-finite) of one deterministic episode each, (episodes,) arrays;
    compiled once per env, config and sizes."""
    act = make_policy(env, config)
    state = wrappers.batch_reset(env, params, jax.random.split(key, episodes))
    zeros = jnp.zeros((episodes,), jnp.float32)

    def body(carry, _):
        state, ret, length, ended, fell, bad = carry
        stepped = jax.vmap(env.step, in_axes=(None, 0, 0))(params, state, act(policy, state.obs))
        now_bad = jax.vmap(wrappers.nonfinite)(stepped) & ~ended
        # as in training: a non-finite world ends, truncated (no fall), with reward 0
        stepped = jax.vmap(wrappers.neutralize)(stepped, state, now_bad)
        live = (~ended).astype(jnp.float32)
        ret = ret + live * stepped.reward
        length = length + live
        fell = fell | (~ended & (stepped.done > 0.5) & (stepped.truncation < 0.5))
        bad = bad | now_bad
        ended = ended | (stepped.done > 0.5)
        state = jax.vmap(wrappers.select)(ended, state, stepped)  # a finished world stays as it ended
        return (state, ret, length, ended, fell, bad), None

    false = jnp.zeros((episodes,), bool)
    carry = (state, zeros, zeros, false, false, false)
    (_, ret, length, _, fell, bad), _ = jax.lax.scan(body, carry, None, length=steps)
    return ret, length, fell, bad


def run_meta(env: Env, config: PPOConfig) -> dict[str, Any]:
    """The JSON description stored with every checkpoint of this run."""
    describe = getattr(env, "describe", None)
    meta = dict(describe()) if describe else {"env": type(env).__name__, "body": None}
    meta.update(
        observation_size=int(env.observation_size),
        action_size=int(env.action_size),
        ppo=config.to_dict(),
        boxjax_version=boxjax.__version__,
    )
    return meta


def _to_host(metrics: dict[str, jax.Array]) -> dict[str, float]:
    host = jax.device_get(metrics)
    return {k: float(np.asarray(v)) for k, v in host.items()}


def own_buffers(tree: Any) -> Any:
    """Copy every leaf to the default device, committed, so no two leaves share a buffer (the iteration
    donates them all) and the first call sees the same argument placement as the later ones (no retrace)."""
    device = jax.devices()[0]
    return jax.tree.map(lambda x: jax.device_put(jnp.array(x, copy=True), device), tree)


def fresh_rollout(env: Env, env_params: Any, key: jax.Array, num_envs: int) -> RolloutState:
    """`num_envs` freshly reset worlds, jitted: op by op the vmapped reset (MJX forward, IK in some tasks)
    took a minute on the CPU."""
    return jax.jit(lambda p, k: init_rollout(env, p, k, num_envs))(env_params, key)


def _initial_state(
    env: Env,
    config: PPOConfig,
    env_params: Any,
    key: jax.Array,
    resume: str | None,
    init: str | None,
    dp: sharding.DataParallel | None,
) -> tuple[TrainState, RolloutState]:
    """Fresh, resumed or seeded states; on one device (`dp` None) or placed on `dp`'s mesh."""
    train_key, env_key = jax.random.split(key)
    train_state = init_train_state(env, config, train_key)
    if dp is None:
        rollout_state = fresh_rollout(env, env_params, env_key, config.num_envs)
        template = rollout_state
    else:
        rollout_state = dp.init_rollout(env_key)
        template = dp.host_template(env_key)
    meta = run_meta(env, config)
    if resume:
        checkpoint.check_resume(checkpoint.read_meta(resume), meta)
        restored = checkpoint.restore(resume, {"train": train_state, "rollout": template})
        if dp is not None:
            return dp.from_host(restored["train"], restored["rollout"], rollout_state)
        world = sharding.world_leaves(env, env_params)
        return restored["train"], sharding.refresh_scratch(world, restored["rollout"], rollout_state)
    if init:
        checkpoint.check_init(checkpoint.read_meta(init), meta)
        train_state = train_state.replace(**checkpoint.restore_model(init, train_state))  # its model only
    if dp is not None:
        train_state = dp.replicate(train_state)
    return train_state, rollout_state


def _save(
    directory: str,
    step: int,
    train_state: TrainState,
    rollout_state: RolloutState,
    meta: dict[str, Any],
    dp: sharding.DataParallel | None,
) -> bool:
    """Checkpoint `step`, always in the one-device layout; refused (with a printed line, False) when any
    value is not finite, so the newest checkpoint on disk is always the last good one."""
    if dp is not None:
        train_state, rollout_state = dp.to_host(train_state, rollout_state)
    state = jax.device_get({"train": train_state, "rollout": rollout_state})
    bad = guard.nonfinite_leaves(state)
    if bad:
        print(
            f"CHECKPOINT {step} not written: non-finite values in {', '.join(bad[:3])}"
            f"{' and more' if len(bad) > 3 else ''}; the newest checkpoint on disk is the last good one",
            flush=True,
        )
        return False
    checkpoint.save(directory, step, state, meta)
    return True


CAPS_PREFIX = "env/caps/"


def caps_summary(history: list[dict[str, float]]) -> str | None:
    """One `SOLVER CAPS ...` line summing up the run's solver-cap figures (worlds whose solver stopped at
    MuJoCo Warp's iteration or line-search cap), or None when no iteration had any."""
    names = sorted({k for row in history for k in row if k.startswith(CAPS_PREFIX)})
    parts = []
    for name in names:
        counts = [row.get(name, 0.0) for row in history]
        hit = sum(c > 0 for c in counts)
        if hit:
            label = name[len(CAPS_PREFIX) :].replace("_", " ")
            parts.append(f"{label} cap in {hit} of {len(counts)} iterations (peak {int(max(counts))} worlds)")
    return "SOLVER CAPS: " + "; ".join(parts) if parts else None


def train(
    env: Env,
    config: PPOConfig,
    key: jax.Array,
    *,
    iterations: int = 100,
    minutes: float | None = None,
    env_params: Any = None,
    progress_fn: ProgressFn | None = None,
    checkpoint_dir: str | None = None,
    checkpoint_every: int = 50,
    resume: str | None = None,
    init: str | None = None,
    stop_when_solved: bool = False,
    stop_on_overflow: bool = False,
    stop_on_nan: bool = False,
    max_skipped_updates: int = 5,
    start_time_s: float | None = None,
) -> tuple[Policy, list[dict[str, float]]]:
    """Train `env` with PPO.

    Args:
      env: any environment following `boxjax.envs.base`'s protocol.
      config: PPO hyper-parameters and sizes.
      key: PRNG key (e.g. `jax.random.key(0)` or `jax.random.PRNGKey(0)`).
      iterations: stop after this many iterations in total (counting resumed ones).
      minutes: also stop after this much wall time.
      env_params: environment params (default `env.default_params()`).
      progress_fn: called with each iteration's figures (host floats).
      checkpoint_dir: where to write checkpoints (every `checkpoint_every` iterations and at the end).
      resume: a checkpoint directory to continue exactly (same body, task and configs, else an error).
      init: a checkpoint directory whose model (params, optimiser, normaliser) starts this run.
      stop_when_solved: stop at the first iteration whose `solved` figure is 1.
      stop_on_overflow: raise `PhysicsOverflowError` (after checkpointing) when any world overflows; an
        `OVERFLOW` line is printed every iteration with an overflow either way.
      stop_on_nan: raise `guard.NonFiniteError` (after checkpointing) at the first iteration with a
        non-finite world or gradient step; a `NAN` line is printed for each such iteration either way.
      max_skipped_updates: raise `guard.NonFiniteError` after this many consecutive iterations whose
        update was skipped as non-finite (each gradient step is applied only when finite).
      start_time_s: `time.perf_counter()` at process start, so set-up time counts imports and model build.

    SIGINT or SIGTERM stops the run after the iteration in flight, checkpointed (`TrainResult.stopped_by`).

    Returns:
      the final policy and the list of per-iteration figures.
    """
    result, history = train_run(
        env,
        config,
        key,
        iterations=iterations,
        minutes=minutes,
        env_params=env_params,
        progress_fn=progress_fn,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
        resume=resume,
        init=init,
        stop_when_solved=stop_when_solved,
        stop_on_overflow=stop_on_overflow,
        stop_on_nan=stop_on_nan,
        max_skipped_updates=max_skipped_updates,
        start_time_s=start_time_s,
    )
    ts = result.train_state
    policy = Policy(params=ts.params, normalizer=ts.normalizer)
    if len(ts.iteration.sharding.device_set) > 1:
        policy = sharding.DataParallel.first_device(policy)
    return policy, history


def setup_phases(start_s: float, entered_s: float, ready_s: float, first_done_s: float) -> dict[str, float]:
    """Where the set-up time went, from `time.perf_counter()` stamps: before training (imports, model and
    environment build), the initial state (params, reset, or a checkpoint's restore; on the CPU path also the
    workers started), and the first iteration (its compile or compilation-cache load, then one run). They add
    up to `setup_s`."""
    return {
        "setup/before_train_s": entered_s - start_s,
        "setup/initial_state_s": ready_s - entered_s,
        "setup/first_iteration_s": first_done_s - ready_s,
    }


def train_run(
    env: Env,
    config: PPOConfig,
    key: jax.Array,
    *,
    iterations: int = 100,
    minutes: float | None = None,
    env_params: Any = None,
    progress_fn: ProgressFn | None = None,
    checkpoint_dir: str | None = None,
    checkpoint_every: int = 50,
    resume: str | None = None,
    init: str | None = None,
    stop_when_solved: bool = False,
    stop_on_overflow: bool = False,
    stop_on_nan: bool = False,
    max_skipped_updates: int = 5,
    start_time_s: float | None = None,
) -> tuple[TrainResult, list[dict[str, float]]]:
    """Like `train`, but returns the full `TrainResult` (train and rollout state) for further use.

    With `config.num_devices` other than 1 the worlds are split over that many devices
    (`boxjax.rl.sharding`); the result's states then live on the mesh (rollout leaves (devices, ...)).
    For MuJoCo Warp, build `env` with `sharding.worlds_per_device(config, devices)` worlds.
    """
    start = time.perf_counter() if start_time_s is None else start_time_s
    entered = time.perf_counter()
    monitor = guard.Guard(max_skipped_updates, stop_on_nan)
    env_params = env.default_params() if env_params is None else env_params
    key = key if key.dtype == jnp.uint32 else jax.random.key_data(key)
    devices = sharding.resolve_devices(config.num_devices)
    dp = sharding.DataParallel(env, config, env_params, devices) if len(devices) > 1 else None
    if dp is None:
        states = own_buffers(_initial_state(env, config, env_params, key, resume, init, None))
        iteration_fn = make_train_iteration(env, config)
    else:
        states = _initial_state(env, config, env_params, key, resume, init, dp)
        iteration_fn, env_params = dp.iteration, dp.env_params
    train_state, rollout_state = jax.block_until_ready(states)
    ready = time.perf_counter()
    meta = run_meta(env, config)
    history: list[dict[str, float]] = []
    solved_at, stopped_by = None, None
    done_iterations = saved = int(train_state.iteration)
    with interrupts.deferred() as stop:
        while done_iterations < iterations:
            tick = time.perf_counter()
            captured_before, factored_before = graphs.capture_keys(), graphs.fused_factorizations()
            train_state, rollout_state, metrics = iteration_fn(train_state, rollout_state, env_params)
            figures = _to_host(metrics)
            now = time.perf_counter()
            figures[GRAPH_CAPTURES] = float(graphs.new_captures(captured_before))
            figures[FUSED_FACTORIZATIONS] = float(graphs.fused_factorizations() - factored_before)
            done_iterations = int(train_state.iteration)
            figures.update(
                iteration=float(done_iterations),
                s_per_iteration=now - tick,
                steps_per_s=config.batch_size / (now - tick),
                env_steps=float(done_iterations * config.batch_size),
                time_s=now - start,
            )
            if not history:
                figures.update(setup_s=now - start, **setup_phases(start, entered, ready, now))
            history.append(figures)
            if progress_fn:
                progress_fn(figures)
            error = _report(figures, monitor, stop_on_overflow, config.num_epochs * config.num_minibatches)
            due = done_iterations % checkpoint_every == 0 or error is not None or bool(stop)
            if (
                checkpoint_dir
                and due
                and _save(checkpoint_dir, done_iterations, train_state, rollout_state, meta, dp)
            ):
                saved = done_iterations
            if error is not None:
                raise error
            if stop:
                stopped_by = stop.signal_name
                written = checkpoint_dir if saved == done_iterations else None
                print(interrupts.stopped_line(stop, done_iterations, written), flush=True)
                break
            if figures["solved"] > 0.5 and solved_at is None:
                solved_at = figures["time_s"]
                if stop_when_solved:
                    break
            if minutes is not None and now - start > 60.0 * minutes:
                break
    if checkpoint_dir and done_iterations > saved:
        _save(checkpoint_dir, done_iterations, train_state, rollout_state, meta, dp)
    summary = caps_summary(history)
    if summary:
        print(summary, flush=True)
    return TrainResult(train_state, rollout_state, solved_at, stopped_by), history


def _report(
    figures: dict[str, float], monitor: guard.Guard, stop_on_overflow: bool, steps_per_update: int
) -> Exception | None:
    """Print the iteration's `OVERFLOW`, `NAN` and `GRAPH CAPTURES` lines; the error to stop with, if any."""
    overflow = overflow_report(figures)
    nan_line, error = monitor.check(figures, steps_per_update)
    for line in (overflow, nan_line, capture_report(figures)):
        if line:
            print(line, flush=True)
    if overflow and stop_on_overflow:
        return PhysicsOverflowError(overflow)
    return error
