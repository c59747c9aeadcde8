"""The stance task's training settings: the batch per platform, the PPO and task settings it solves fastest
with, its progress columns and its summary figures (what `boxjax train --task stance` starts from; the
command line's values go on top)."""

from __future__ import annotations

from typing import Any

CPU_WORLDS = 64
"""Default worlds per collector on the CPU path."""
GPU_SHAPE = dict(num_envs=2048, unroll_length=16, minibatch_size=2048)
"""The GPU run's batch: 2,048 worlds x 16 steps, 16 minibatches (H200, 2026-12-02: with `PPO_SETTINGS` and
`ENV_RECIPE` muscular-fast solved in 87.5 / 73.1 s, simple in 42.9 / 44.9 s with warm caches, two seeds
each; 1,024 x 32, the same batch, took 0.38 s per muscular-fast iteration against 0.19;
docs/benchmarks.md)."""
CPU_UNROLL = 16
"""Default control steps per world per iteration on the CPU path (a quarter of the batch per minibatch)."""
PPO_SETTINGS = {"init_log_std": -1.6, "desired_kl": 0.04}
"""PPO settings the stance solves fastest with (H200, 2026-12-01: with a one-episode window muscular-fast
1,024 x 32 solved in 111.9 / 104.9 s, simple 512 x 32 in 76.9 / 66.9 s, against 168.5 / 96.1 s with
`desired_kl` 0.02 and the library's window; docs/benchmarks.md)."""
ENV_RECIPE = {"wait_episodes": 0.5}
"""Stance settings of those solves: the curriculum judges a window of half an episode per world (and at least
one finished episode; the library's default waits two episodes; a one-episode window took 350 iterations
against 325 for muscular-fast at `GPU_SHAPE`)."""
RULES = ("fast", "seed")
"""Curriculum rules: "fast" judges each rise on `ENV_RECIPE`'s half-episode window (our recipe); "seed" waits
the seed's two episodes per world before each rise (the library's default). Either way a solve is the seed's
rule: episodes begun at full amplitude, one per world, at most 5 % falling."""


def ppo_defaults(platform: str, worlds: int, unroll: int | None) -> dict[str, Any]:
    """PPOConfig fields a stance run starts from: `GPU_SHAPE` on the GPU; on the CPU `worlds` x `unroll`
    (default `CPU_UNROLL`) in four minibatches; `PPO_SETTINGS` on both."""
    if platform == "gpu":
        return {**GPU_SHAPE, **PPO_SETTINGS}
    unroll = unroll or CPU_UNROLL
    return dict(num_envs=worlds, unroll_length=unroll, minibatch_size=worlds * unroll // 4, **PPO_SETTINGS)


def env_defaults(rule: str) -> dict[str, Any]:
    """StanceConfig fields of `rule` (one of `RULES`): `ENV_RECIPE` under "fast", the library's defaults
    under "seed"."""
    if rule not in RULES:
        raise ValueError(f"unknown curriculum rule {rule!r}; valid: {', '.join(RULES)}")
    return dict(ENV_RECIPE) if rule == "fast" else {}


def progress_columns(levels: int) -> tuple[tuple[str, str, str], ...]:
    """The progress line's stance column (figure, format, name): the curriculum level out of `levels`."""
    return (("curriculum/level", "amp {:.0f}/" + str(levels), "level"),)


def summary(history: list[dict[str, Any]], solved_at_s: float | None) -> dict[str, Any]:
    """The stance figures of a run's summary: solved, time to solve (from the process start) and the
    training part of it (set-up taken off)."""
    return {
        "solved": solved_at_s is not None,
        "time_to_solve_s": solved_at_s,
        "train_s_to_solve": None if solved_at_s is None else solved_at_s - history[0]["setup_s"],
    }
