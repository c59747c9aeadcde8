"""PPO on CPUs: N collector processes and L learner processes around shared memory, or one serial process.

Layout (every size is configuration: `WorkersConfig` here, the batch in `PPOConfig`):

* N collectors, each one CPU environment of K = num_envs / N worlds (one `mujoco.batch.Batch` on its own
  threads) with one batched policy forward per step (`collector.py`);
* L learners, each pinned to M cores, running the GPU path's loss code and all-reducing gradients
  through `jax.distributed` with gloo collectives (`learner.py`);
* this process, the coordinator: the host loop. It times, logs, checkpoints (`boxjax.models.checkpoint`),
  keeps the curriculum and the PRNG key, and tells the workers what to do through pipes; parameters and
  experience travel through shared memory (`buffers.py`).

Decoupled mode overlaps the two halves: while the learners update on iteration i, the collectors already
collect iteration i + 1 with the policy the learners started from (a policy lag of one update, which
PPO's importance ratio absorbs). Serial mode (for small machines) collects then learns in this process,
without lag. With a pending collection, iteration i + 1 is collected with the policy after i updates,
and iteration i's update starts from that same state, so the first update of both modes is the same.

A worker that fails, dies or stops answering stops the run with `WorkerError`. Ctrl-C (or SIGTERM) stops
it after the iteration in flight (`boxjax.rl.interrupts`; a second Ctrl-C at once, with
`KeyboardInterrupt`). Either way the last completed iteration is checkpointed first, then every worker is
stopped (asked, then terminated, then killed) and the shared memory removed; workers also die with the
coordinator's process (`processes.py`). Episodes restart on resume (the MuJoCo state is not saved).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from boxjax.envs import base
from boxjax.envs.base import NONFINITE_METRIC
from boxjax.models import checkpoint
from boxjax.rl import guard, loop
from boxjax.rl.config import PPOConfig
from boxjax.rl.cpu.buffers import Buffers, EnvSizes, LearnerState
from boxjax.rl.cpu.collector import Collected, CollectorSpec, EnvFactory
from boxjax.rl.cpu.learner import DTYPES, LearnerSpec, LearnTimes
from boxjax.rl.cpu.teams import ProcessTeam, SerialTeam, WorkerError
from boxjax.rl.loop import RunOptions
from boxjax.rl.losses import LossTerms
from boxjax.rl.ppo import run_meta
from boxjax.rl.rollout import NONFINITE_WORLDS
from boxjax.rl.train_step import TrainState, init_train_state, iteration_metrics

__all__ = ["Layout", "RunOptions", "RunResult", "WorkerError", "WorkersConfig", "plan_layout", "train"]

MODES = ("auto", "serial", "decoupled")


@dataclasses.dataclass(frozen=True)
class WorkersConfig:
    """Processes and threads of the CPU path."""

    mode: str = "auto"
    """"serial", "decoupled", or "auto" (serial below 4 cores)."""
    collectors: int = 1
    """Collector processes N; each steps num_envs / N worlds."""
    collector_threads: int = 0
    """MuJoCo threads per collector (0: the cores the learners leave, shared out; serial: all cores)."""
    learners: int = 1
    """Learner processes L (decoupled mode), gradients all-reduced with gloo."""
    threads_per_learner: int = 0
    """Cores per learner M (0: a quarter of the cores, shared out, at least 1); enforced by pinning, so
    when the workers do not fit on the cores (unpinned) every process may use every core."""
    learner_dtype: str = "fp32"
    """Arithmetic of the update: "fp32" or "bf16" (parameters and optimiser stay float32)."""
    pin_cores: bool = True
    """Pin each worker to its own cores when they fit on this machine."""
    worker_timeout_s: float = 900.0
    """A worker silent for this long (while it owes an answer) counts as hung."""

    def __post_init__(self) -> None:
        """Reject unknown modes and dtypes and non-positive counts, naming the valid values."""
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; valid: {', '.join(MODES)}")
        if self.learner_dtype not in DTYPES:
            raise ValueError(f"unknown learner_dtype {self.learner_dtype!r}; valid: {', '.join(DTYPES)}")
        if self.collectors <= 0 or self.learners <= 0:
            raise ValueError("WorkersConfig: collectors and learners must be positive")
        if self.collector_threads < 0 or self.threads_per_learner < 0:
            raise ValueError("WorkersConfig: thread counts must be >= 0 (0 = automatic)")


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where every worker runs (a core tuple of () means unpinned)."""

    mode: str
    """"serial" or "decoupled"."""
    collector_threads: int
    """MuJoCo threads of each collector's batch."""
    collector_cores: tuple[tuple[int, ...], ...]
    """Cores of each collector."""
    threads_per_learner: int
    """Cores each learner is meant to use."""
    learner_cores: tuple[tuple[int, ...], ...]
    """Cores of each learner."""

    def describe(self) -> str:
        """One line for the log."""
        n, L = len(self.collector_cores), len(self.learner_cores)
        pinned = "pinned" if any(self.collector_cores) else "unpinned"
        return (
            f"{self.mode}: {n} collector(s) x {self.collector_threads} thread(s), "
            f"{L} learner(s) x {self.threads_per_learner} thread(s), {pinned}"
        )


def plan_layout(workers: WorkersConfig, cores: tuple[int, ...]) -> Layout:
    """Resolve the automatic sizes of `workers` on the cores `cores` this process may use."""
    n, N, L = len(cores), workers.collectors, workers.learners
    mode = workers.mode if workers.mode != "auto" else ("serial" if n < 4 else "decoupled")
    if mode == "serial":
        if L != 1:
            raise ValueError("serial mode runs one learner; use mode='decoupled' for several")
        threads = workers.collector_threads or n
        return Layout(mode, threads, ((),) * N, n, ((),))
    m = workers.threads_per_learner or max(1, n // (4 * L))
    c = workers.collector_threads or max(1, (n - L * m) // N)
    if not workers.pin_cores or L * m + N * c > n:
        return Layout(mode, c, ((),) * N, m, ((),) * L)
    learner = tuple(tuple(cores[i * m : (i + 1) * m]) for i in range(L))
    first = L * m
    collector = tuple(tuple(cores[first + i * c : first + (i + 1) * c]) for i in range(N))
    return Layout(mode, c, collector, m, learner)


@dataclasses.dataclass(frozen=True)
class RunResult:
    """State of a finished (or stopped) CPU run."""

    train_state: TrainState
    solved_at_s: float | None
    stopped_by: str | None = None
    """The signal ("SIGINT", "SIGTERM") that stopped the run after its last iteration, if one did."""


# -- bookkeeping --------------------------------------------------------------------------------------
def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds used so far by the processes `pids` (all their threads)."""
    if not os.path.exists("/proc/self/stat"):
        return time.process_time()
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, IndexError, ValueError):
            continue
    return total


def _counts(collected: list[Collected]) -> dict[str, jax.Array]:
    """The collectors' totals of the env's event counts (`base.COUNT_PREFIX`)."""
    names = [k for k in collected[0].metric_sums if k.startswith(base.COUNT_PREFIX)]
    return {k: jnp.float32(sum(c.metric_sums[k] for c in collected)) for k in names}


def _summary(collected: list[Collected], unroll: int) -> base.EpisodeSummary:
    f32 = jnp.float32
    return base.EpisodeSummary(
        episodes=f32(sum(c.episodes for c in collected)),
        terminated=f32(sum(c.terminated for c in collected)),
        return_sum=f32(sum(c.return_sum for c in collected)),
        length_sum=f32(sum(c.length_sum for c in collected)),
        world_steps=f32(unroll),
        worlds=f32(sum(c.samples for c in collected) / unroll),
        counts=_counts(collected),
    )


def _profile(collected: list[Collected], times: LearnTimes, wait_s: float, lag: int) -> dict[str, float]:
    samples = sum(c.samples for c in collected)
    return {
        "profile/collect_s": max(c.collect_s for c in collected),
        "profile/collector_step_s": max(c.step_s for c in collected),
        "profile/collector_policy_s": max(c.policy_s for c in collected),
        "profile/collector_wait_s": float(np.mean([c.wait_s for c in collected])),
        "profile/env_step_us_per_world": 1e6 * sum(c.step_s for c in collected) / samples,
        "profile/learner_update_s": times.update_s,
        "profile/allreduce_s": times.allreduce_s,
        "profile/learner_wait_s": wait_s,
        "profile/policy_lag": float(lag),
    }


def _initial_state(
    env: Any, config: PPOConfig, key: jax.Array, meta: dict, resume: str | None, init: str | None
) -> TrainState:
    state = init_train_state(env, config, key)
    if resume:
        checkpoint.check_resume(checkpoint.read_meta(resume), meta)
        return checkpoint.restore(resume, {"train": state})["train"]
    if init:  # a fused-path checkpoint holds more, a policy file less (no optimiser state)
        return state.replace(**checkpoint.init_model(init, state, meta))
    return state


@dataclasses.dataclass(frozen=True)
class _Completed:
    """What a checkpoint of the last completed iteration holds besides the learner state."""

    iteration: int
    curriculum: Any
    key: jax.Array


def _save(directory: str, buffers: Buffers, done: _Completed, meta: dict, keep: int | None = 3) -> bool:
    """Checkpoint the last completed iteration; refused (False, with a printed line) when any value is
    non-finite (`guard.refuse_checkpoint`)."""
    state = buffers.state[done.iteration % len(buffers.state)].read()
    train = TrainState(
        params=state.params,
        opt_state=state.opt_state,
        normalizer=state.normalizer,
        curriculum=jax.device_get(done.curriculum),
        iteration=np.int32(done.iteration),
        key=np.asarray(done.key),
    )
    if guard.refuse_checkpoint(done.iteration, {"train": train}):
        return False
    checkpoint.save(directory, done.iteration, {"train": train}, meta, keep)
    return True


def _specs(
    env_factory: EnvFactory,
    config: PPOConfig,
    workers: WorkersConfig,
    layout: Layout,
    sizes: EnvSizes,
    buffers,
    seed,
) -> tuple[list[CollectorSpec], list[LearnerSpec]]:
    worlds = config.num_envs // workers.collectors
    collectors = [
        CollectorSpec(i, env_factory, worlds, layout.collector_threads, seed, sizes, config, buffers.names)
        for i in range(workers.collectors)
    ]
    learners = [
        LearnerSpec(r, workers.learners, workers.learner_dtype, sizes, config, buffers.names)
        for r in range(workers.learners)
    ]
    return collectors, learners


def _iterations(
    team: SerialTeam | ProcessTeam,
    env: Any,
    config: PPOConfig,
    first: _Completed,
    iterations: int,
    lag: int,
    cores: int,
):
    """Run the pipeline; yield (the completed iteration, its figures) after every update.

    Iteration i is collected with the policy after i updates, or with `lag` (decoupled) while the learners
    make update i - 1, with the newest one published by then: after i - 1 updates (the run's first
    iteration always with its starting policy, the only one published)."""
    curriculum, run_key, pending = first.curriculum, first.key, False
    wall, cpu = time.perf_counter(), _cpu_seconds(team.pids())
    for i in range(first.iteration, iterations):
        tick = time.perf_counter()
        if not pending:
            team.start_collect(i, i, jax.device_get(curriculum))
        collected, pending = team.finish_collect(), False
        wait_s = time.perf_counter() - tick
        summary = _summary(collected, config.unroll_length)
        curriculum = base.update_curriculum(env, curriculum, summary)
        run_key, update_key = jax.random.split(run_key)
        if lag and i + 1 < iterations:  # collect the next iteration while the learners update
            team.start_collect(i + 1, i, jax.device_get(curriculum))
            pending = True
        team.start_learn(i, np.asarray(update_key))
        terms, times = team.finish_learn()
        figures = _figures(env, collected, summary, terms, curriculum)
        now, cpu_now = time.perf_counter(), _cpu_seconds(team.pids())
        figures.update(_profile(collected, times, wait_s, lag))
        figures.update(
            {"profile/cpu_util": (cpu_now - cpu) / max(now - wall, 1e-9) / cores},
            iteration=float(i + 1),
            s_per_iteration=now - tick,
            steps_per_s=config.batch_size / (now - tick),
            env_steps=float((i + 1) * config.batch_size),
        )
        wall, cpu = now, cpu_now
        yield _Completed(i + 1, curriculum, run_key), figures


def _cores() -> tuple[int, ...]:
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def train(
    env_factory: EnvFactory,
    config: PPOConfig,
    workers: WorkersConfig,
    key: jax.Array,
    options: RunOptions | None = None,
    *,
    log_fn: Any = print,
    **fields: Any,
) -> tuple[RunResult, list[dict[str, float]]]:
    """Train a CPU environment with PPO (see the module docstring) through the shared host loop
    (`boxjax.rl.loop`); `options` and `fields` as for `boxjax.rl.ppo.train`.

    Args:
      env_factory: (num_worlds, num_threads, seed) -> environment (`boxjax.envs.cpu.CpuEnv`);
        called here once with one world (sizes, curriculum, checkpoint meta) and in every collector.
      config: PPO hyper-parameters; `num_envs` (= N x K) worlds and `unroll_length` (T) steps per iteration.
      workers: processes and threads.
      key: PRNG key of the run.
      log_fn: where the one-line description of the layout goes.

    Returns:
      the final state and the list of per-iteration figures (`profile/*` among them).
    """
    options = loop.run_options(options, **fields)
    start = time.perf_counter() if options.start_time_s is None else options.start_time_s
    if config.num_envs % workers.collectors:
        raise ValueError(f"num_envs {config.num_envs} must be a multiple of collectors {workers.collectors}")
    if config.reset_every != 1 or config.restart_on_draw:
        raise ValueError(
            f"PPOConfig.reset_every {config.reset_every} / restart_on_draw {config.restart_on_draw}: the CPU "
            "path resets each world as its episode ends (1 / False); a reset pool is the fused GPU path's"
        )
    if config.action_distribution != "clipped_normal":
        raise ValueError(
            "PPOConfig.action_distribution: the CPU path's learners train the clipped normal policy only"
        )
    if config.batch_layout != "transitions":
        raise ValueError("PPOConfig.batch_layout: the CPU path's learners take single transitions only")
    if config.obs_normalizer != "boxjax":
        raise ValueError(
            f"PPOConfig.obs_normalizer {config.obs_normalizer!r}: the CPU path's learners keep boxjax's "
            "normaliser only"
        )
    cores = _cores()
    layout = plan_layout(workers, cores)
    env = env_factory(1, 1, 0)
    entered = time.perf_counter()  # the model and environment build counts as before training
    if config.distill_coef > 0 and not callable(getattr(env, "distill_target", None)):
        raise ValueError(
            f"PPOConfig.distill_coef {config.distill_coef} needs targets to distil: "
            f"{type(env).__name__} has no distill_target hook (no teacher)"
        )
    sizes = EnvSizes(env.observation_size, env.action_size)
    key = key if key.dtype == jnp.uint32 else jax.random.key_data(key)
    train_key, collect_key = jax.random.split(key)
    seed = int(jax.random.randint(collect_key, (), 0, 2**31 - 1))
    meta = run_meta(env, config)
    state = _initial_state(env, config, train_key, meta, options.resume, options.init)
    run = _WorkersRun(done=_Completed(int(state.iteration), state.curriculum, state.key))
    run.saved = run.done.iteration
    log_fn(f"cpu path: {layout.describe()}; {config.num_envs // workers.collectors} worlds per collector")
    buffers = Buffers.create(sizes, config)
    team = None
    try:
        buffers.publish(run.done.iteration, LearnerState.of(state))
        collectors, learners = _specs(env_factory, config, workers, layout, sizes, buffers, seed)
        team = (
            SerialTeam(collectors, learners[0])
            if layout.mode == "serial"
            else ProcessTeam(
                collectors, layout.collector_cores, learners, layout.learner_cores, workers.worker_timeout_s
            )
        )
        lag = int(layout.mode == "decoupled")
        run.pipeline = _iterations(team, env, config, run.done, options.iterations, lag, len(cores))
        stamps = loop.Stamps(start_s=start, entered_s=entered, ready_s=time.perf_counter())

        def save(step: int) -> bool:
            run.saved = step  # tried: a refused checkpoint is not tried again on the way out
            return _save(options.checkpoint_dir, buffers, run.done, meta, options.keep_checkpoints or None)

        sizes = (config.num_epochs * config.num_minibatches, config.batch_size)
        outcome = loop.drive(run.next_iteration, save, options, run.done.iteration, sizes, stamps)
    finally:  # on any exit, Ctrl-C and dead workers included: keep the last completed iteration
        if options.checkpoint_dir and run.done.iteration > run.saved:
            _save(options.checkpoint_dir, buffers, run.done, meta, options.keep_checkpoints or None)
        final = buffers.state[run.done.iteration % len(buffers.state)].read()
        if team is not None:
            team.close()
        buffers.close()
    done = run.done
    train_state = TrainState(
        params=final.params,
        opt_state=final.opt_state,
        normalizer=final.normalizer,
        curriculum=done.curriculum,
        iteration=jnp.int32(done.iteration),
        key=done.key,
    )
    return RunResult(train_state, outcome.solved_at_s, outcome.stopped_by), outcome.history


@dataclasses.dataclass
class _WorkersRun:
    """The CPU path's pipeline and its last completed iteration, for `loop.drive`."""

    done: _Completed
    saved: int = 0
    """The newest iteration checkpointed."""
    pipeline: Any = None
    """`_iterations`' generator."""

    def next_iteration(self) -> tuple[int, dict[str, float]]:
        """The pipeline's next completed iteration: (iterations done, its figures)."""
        self.done, figures = next(self.pipeline)
        return self.done.iteration, figures


def _figures(
    env: Any, collected: list[Collected], summary: base.EpisodeSummary, terms: dict, curriculum: Any
) -> dict[str, float]:
    """The GPU path's per-iteration figures (`train_step.iteration_metrics`) as host floats."""
    samples = sum(c.samples for c in collected)
    names = collected[0].metric_sums
    env_metrics = {k: jnp.float32(sum(c.metric_sums[k] for c in collected) / samples) for k in names}
    env_metrics.update(_counts(collected))
    env_metrics[NONFINITE_WORLDS] = jnp.float32(
        sum(c.metric_sums.get(NONFINITE_METRIC, 0.0) for c in collected)
    )
    loss = LossTerms(**{k: jnp.float32(v) for k, v in terms.items() if k in LossTerms.__dataclass_fields__})
    solved = base.curriculum_solved(env, curriculum, summary)
    metrics = iteration_metrics(summary, env_metrics, loss, curriculum, solved)
    metrics["loss/learning_rate"] = jnp.float32(terms["learning_rate"])
    metrics.update({k: jnp.float32(v) for k, v in terms.items() if k.startswith("guard/")})
    return {k: float(v) for k, v in jax.device_get(metrics).items()}
