"""The block task's training settings: the batch per platform (the seed's shape on the GPU), the teacher's
distillation weight, its progress columns and per-iteration event counts, and its summary figures (what
`boxjax train --task block` starts from; the command line's values go on top)."""

from __future__ import annotations

from typing import Any

GPU_SHAPE = dict(num_envs=2048, unroll_length=16, minibatch_size=2048, num_epochs=4)
"""The seed's blocking iteration: 2,048 worlds x 16 steps (32,768 steps), 4 epochs of minibatch 2,048."""
CPU_WORLDS = 8
"""Default worlds per collector on the CPU path (tiny: for trying the task, not for training it)."""
CPU_UNROLL = 8
"""Default control steps per world per iteration on the CPU path (half the batch per minibatch)."""
FUSED_CPU_SHAPE = dict(num_envs=8, unroll_length=8, minibatch_size=32, num_epochs=4)
"""The fused JAX iteration on the CPU (MJX's JAX physics, for comparisons and tests)."""
DISTILL_COEF = 0.1
"""Default weight of the walking teacher's pull on the leg actions when a teacher runs."""
COUNTS = (
    ("punches", "env/punch/arrived"),
    ("blocks", "env/success/blocks"),
    ("misses", "env/punch/missed"),
    ("hits", "env/punch/hit"),
    ("clean_hits", "env/punch/clean"),
    ("goals", "env/success/goals"),
    ("bag_hits", "env/success/bag_hits"),
    ("recoveries", "env/success/recoveries"),
    ("commands_held", "env/success/commands_held"),
)
"""Per-iteration event counts (`count/<name>`): the per-world-step mean times the batch size."""
PROGRESS = (
    ("count/punches", "punch {:.0f}", "punches arrived"),
    ("count/blocks", "block {:.0f}", "blocks"),
    ("count/misses", "miss {:.0f}", "punches that stopped out of reach"),
    ("count/hits", "hit {:.0f}", "hits (clean or partly through)"),
    ("count/clean_hits", "clean {:.0f}", "clean hits"),
    ("punch/hit_score", "score {:.2f}", "mean score of the hits (how much got through)"),
    ("count/goals", "goal {:.0f}", "walk spots reached"),
    ("count/bag_hits", "bag {:.0f}", "bag hits"),
    ("count/recoveries", "rec {:.0f}", "shove recoveries"),
    ("count/commands_held", "cmd {:.0f}", "commands held"),
    ("overflow", "ovf {:.0f}", "overflowing worlds"),
)
"""The progress line's block columns (figure, format, name); `add_counts` makes their figures."""
SELF_PLAY_PROGRESS = (
    ("agent/opponent/reward", "opp {:+.3f}", "self-play: the opponent's mean reward per step"),
    ("pool/filled", "pool {:.0f}", "self-play: snapshots in the pool"),
)
"""The progress line's columns of a run with the learned opponent (`opponent_policy` "learned")."""


def fused_ppo_defaults(platform: str, teacher: bool) -> dict[str, Any]:
    """PPOConfig fields a run of the fused iteration starts from: `GPU_SHAPE` on the GPU, `FUSED_CPU_SHAPE`
    on the CPU; `DISTILL_COEF` when a `teacher` runs."""
    shape = GPU_SHAPE if platform == "gpu" else FUSED_CPU_SHAPE
    return {**shape, "distill_coef": DISTILL_COEF if teacher else 0.0}


def workers_ppo_defaults(worlds: int, unroll: int | None, teacher: bool) -> dict[str, Any]:
    """PPOConfig fields a CPU-path run starts from: `worlds` x `unroll` (default `CPU_UNROLL`) steps in two
    minibatches, 4 epochs; `DISTILL_COEF` when a `teacher` runs."""
    unroll = unroll or CPU_UNROLL
    return dict(
        num_envs=worlds,
        unroll_length=unroll,
        minibatch_size=worlds * unroll // 2,
        num_epochs=4,
        distill_coef=DISTILL_COEF if teacher else 0.0,
    )


def add_counts(figures: dict[str, Any], batch_size: int) -> dict[str, Any]:
    """`figures` with `count/*` (events this iteration), `punch/hit_score` (the hits' mean score) and
    `overflow` (peak overflowing worlds) added."""
    for name, key in COUNTS:
        figures[f"count/{name}"] = figures.get(key, 0.0) * batch_size
    hits = figures.get("env/punch/hit", 0.0)
    figures["punch/hit_score"] = figures.get("env/punch/hit_score", 0.0) / hits if hits > 0 else 0.0
    figures["overflow"] = sum(v for k, v in figures.items() if k.startswith("env/overflow/"))
    return figures


def summary(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The block figures of a run's summary: the last iteration's event counts (`last_<count>`)."""
    return {f"last_{name}": history[-1][f"count/{name}"] for name, _ in COUNTS}
