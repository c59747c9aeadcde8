"""The host loop every training path shares: the fused (one device or sharded) iteration and the CPU workers.

A path supplies two functions: ``next_iteration() -> (iterations done, figures)`` runs one iteration (its
figures already hold ``iteration``, ``s_per_iteration``, ``steps_per_s`` and ``env_steps``) and
``save(iterations done) -> bool`` checkpoints the last completed one (False: refused). `drive` does the
rest, the same way for every path: time since process start and the set-up split, the per-iteration report
lines (`OVERFLOW`, `NAN`, `GRAPH CAPTURES`), the non-finite guard, checkpoints every
`RunOptions.checkpoint_every` iterations and at the end, the policy handed to `RunOptions.policy_fn` (an
evaluation, say) where the path can give it, stopping when solved, out of time, on overflow or
NaN when asked, and after the iteration in flight on SIGINT/SIGTERM (`boxjax.rl.interrupts`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from boxjax.rl import guard, interrupts

ProgressFn = Callable[[dict[str, float]], None]
PolicyFn = Callable[[int, Any], None]

OVERFLOW_PREFIX = "env/overflow/"
CAPS_PREFIX = "env/caps/"
GRAPH_CAPTURES = "warp/graph_captures"
"""Figure: CUDA graphs MuJoCo Warp captured during the iteration, which the environment's engine reports
(`boxjax.envs.base.host_figures`); the same name as `boxjax.physics.graphs.GRAPH_CAPTURES`."""
WARM_ITERATIONS = 2
"""Iterations that may capture graphs: the first (compile) and the second (the donated buffers' other set)."""


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How a training run is driven, on any path (`boxjax.rl.ppo.train`, `boxjax.rl.cpu.workers.train`)."""

    iterations: int = 100
    """Stop after this many iterations in total (counting resumed ones)."""
    minutes: float | None = None
    """Also stop after this much wall time since process start."""
    progress_fn: ProgressFn | None = None
    """Called with each iteration's figures (host floats)."""
    policy_fn: PolicyFn | None = None
    """Called with (iterations done, the current policy) every `policy_every` iterations and after the last
    one (not after a run stopped by a signal), after that iteration's checkpoint: an evaluation during
    training, say. Its time counts in `time_s`, not in `s_per_iteration`. The fused path only
    (`boxjax.rl.ppo.train`; seed 0's policy when it trains several, `boxjax.rl.seeds`); the CPU workers
    keep their policy in the learner processes."""
    policy_every: int = 1
    """Iterations between `policy_fn` calls."""
    checkpoint_dir: str | None = None
    """Where checkpoints go: every `checkpoint_every` iterations and at the end."""
    checkpoint_every: int = 50
    keep_checkpoints: int = 3
    """Newest checkpoints kept on disk; 0 keeps every one (a skill curve, `boxjax eval RUN --checkpoints`)."""
    resume: str | None = None
    """A checkpoint directory to continue exactly (same body, task and configs, else an error)."""
    init: str | None = None
    """A checkpoint directory whose model (params, optimiser, normaliser) starts this run."""
    stop_when_solved: bool = False
    """Stop at the first iteration whose `solved` figure is 1."""
    stop_on_overflow: bool = False
    """Raise `PhysicsOverflowError` (after checkpointing) when any world overflows; an `OVERFLOW` line is
    printed for every iteration with an overflow either way."""
    stop_on_nan: bool = False
    """Raise `guard.NonFiniteError` (after checkpointing) at the first iteration with a non-finite world or
    gradient step; a `NAN` line is printed for each such iteration either way."""
    max_skipped_updates: int = 5
    """Raise `guard.NonFiniteError` after this many consecutive iterations whose update was skipped as
    non-finite."""
    start_time_s: float | None = None
    """`time.perf_counter()` at process start, so set-up time counts imports and model build."""

    def __post_init__(self) -> None:
        """Reject sizes that cannot drive a run, naming the field."""
        if self.iterations < 0:
            raise ValueError(f"RunOptions.iterations must be >= 0, got {self.iterations}")
        if self.checkpoint_every <= 0:
            raise ValueError(f"RunOptions.checkpoint_every must be positive, got {self.checkpoint_every}")
        if self.keep_checkpoints < 0:
            raise ValueError(f"RunOptions.keep_checkpoints must be >= 0, got {self.keep_checkpoints}")
        if self.policy_every <= 0:
            raise ValueError(f"RunOptions.policy_every must be positive, got {self.policy_every}")
        if self.max_skipped_updates <= 0:
            raise ValueError(
                f"RunOptions.max_skipped_updates must be positive, got {self.max_skipped_updates}"
            )
        if self.minutes is not None and self.minutes <= 0:
            raise ValueError(f"RunOptions.minutes must be positive, got {self.minutes}")


def run_options(options: RunOptions | None, **fields) -> RunOptions:
    """`options` (default `RunOptions()`) with `fields` replaced; an unknown field is named."""
    names = {f.name for f in dataclasses.fields(RunOptions)}
    unknown = sorted(set(fields) - names)
    if unknown:
        raise TypeError(f"unknown run options {unknown}; valid: {sorted(names)}")
    return dataclasses.replace(options or RunOptions(), **fields)


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


def report(
    figures: dict[str, float], monitor: guard.Guard, stop_on_overflow: bool, sizes: tuple[int, int]
) -> Exception | None:
    """Print the iteration's `OVERFLOW`, `NAN` and `GRAPH CAPTURES` lines; the error to stop with, if any
    (`sizes`: gradient steps per update, world-steps per iteration)."""
    overflow = overflow_report(figures)
    nan_line, error = monitor.check(figures, *sizes)
    for line in (overflow, nan_line, capture_report(figures)):
        if line:
            print(line, flush=True)
    if overflow and stop_on_overflow:
        return PhysicsOverflowError(overflow)
    return error


@dataclasses.dataclass(frozen=True)
class Stamps:
    """`time.perf_counter()` stamps of a run's set-up."""

    start_s: float
    """Process start (`RunOptions.start_time_s`), or when training was called."""
    entered_s: float
    """When the training function began (after imports and the environment's build)."""
    ready_s: float
    """When the initial state was ready."""


@dataclasses.dataclass
class Outcome:
    """How `drive` ended."""

    history: list[dict[str, float]]
    """Every iteration's figures."""
    done: int
    """Iterations completed (counting resumed ones)."""
    solved_at_s: float | None
    """`time_s` of the first iteration whose `solved` figure was 1."""
    stopped_by: str | None
    """The signal that stopped the run after its last iteration, if one did."""


def drive(
    next_iteration: Callable[[], tuple[int, dict[str, float]]],
    save: Callable[[int], bool],
    options: RunOptions,
    first: int,
    sizes: tuple[int, int],
    stamps: Stamps,
    policy: Callable[[], Any] | None = None,
) -> Outcome:
    """Run iterations from `first` completed ones until `options` says stop (see the module docstring);
    `sizes` are (gradient steps per update, world-steps per iteration) for the guard; `policy()` gives the
    current policy for `options.policy_fn` (a path without it refuses that option)."""
    if options.policy_fn is not None and policy is None:
        raise ValueError("RunOptions.policy_fn: this training path cannot hand its policy over")
    handed = first
    monitor = guard.Guard(options.max_skipped_updates, options.stop_on_nan)
    outcome = Outcome(history=[], done=first, solved_at_s=None, stopped_by=None)
    saved = first
    with interrupts.deferred() as stop:
        while outcome.done < options.iterations:
            outcome.done, figures = next_iteration()
            now = time.perf_counter()
            figures["time_s"] = now - stamps.start_s
            if not outcome.history:
                phases = setup_phases(stamps.start_s, stamps.entered_s, stamps.ready_s, now)
                figures.update(setup_s=figures["time_s"], **phases)
            outcome.history.append(figures)
            if options.progress_fn:
                options.progress_fn(figures)
            error = report(figures, monitor, options.stop_on_overflow, sizes)
            due = outcome.done % options.checkpoint_every == 0 or error is not None or bool(stop)
            if options.checkpoint_dir and due and save(outcome.done):
                saved = outcome.done
            if error is not None:
                raise error
            if options.policy_fn and not stop and outcome.done % options.policy_every == 0:
                options.policy_fn(outcome.done, policy())  # after the checkpoint: its failure loses none
                handed = outcome.done
            if stop:
                outcome.stopped_by = stop.signal_name
                written = options.checkpoint_dir if saved == outcome.done else None
                print(interrupts.stopped_line(stop, outcome.done, written), flush=True)
                break
            if figures["solved"] > 0.5 and outcome.solved_at_s is None:
                outcome.solved_at_s = figures["time_s"]
                if options.stop_when_solved:
                    break
            if options.minutes is not None and figures["time_s"] > 60.0 * options.minutes:
                break
    if options.checkpoint_dir and outcome.done > saved:
        save(outcome.done)
    if options.policy_fn and outcome.done > handed and outcome.stopped_by is None:
        options.policy_fn(outcome.done, policy())
    summary = caps_summary(outcome.history)
    if summary:
        print(summary, flush=True)
    return outcome
