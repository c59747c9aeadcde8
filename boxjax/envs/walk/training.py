"""The walking teacher's training settings: the batch per platform, its progress columns (the
command-tracking errors) and its summary figures (what `boxjax train --task walk` starts from)."""

from __future__ import annotations

import os
from typing import Any

GPU_SHAPE = dict(num_envs=2048, unroll_length=32, minibatch_size=4096)
"""The GPU run's batch: 2,048 worlds x 32 steps, 16 minibatches."""
CPU_SHAPE = dict(num_envs=16, unroll_length=16, minibatch_size=64)
"""The CPU run's batch (the fused iteration on MJX's JAX physics): 16 worlds x 16 steps."""
PROGRESS = (
    ("env/walk/lin_error", "verr {:.2f}m/s", "velocity error"),
    ("env/walk/yaw_error", "yerr {:.2f}rad/s", "yaw-rate error"),
    ("env/walk/speed", "v {:.2f}m/s", "speed"),
)
"""The progress line's tracking columns (figure, format, name); all of them are in the JSONL."""


def ppo_defaults(platform: str) -> dict[str, Any]:
    """PPOConfig fields a walk run starts from: `GPU_SHAPE` on the GPU, `CPU_SHAPE` on the CPU."""
    return dict(GPU_SHAPE if platform == "gpu" else CPU_SHAPE)


def summary(history: list[dict[str, Any]], out: str) -> dict[str, Any]:
    """The walk figures of a run's summary: training time, the last fall rate and tracking errors, and
    where its checkpoints (the teacher `boxjax.envs.walk.teacher.load_teacher` reads) are."""
    last = history[-1]
    return {
        "train_s": last["time_s"] - history[0]["setup_s"],
        "last_fall_rate": last["episode/fall_rate"],
        "last_lin_error_mps": last["env/walk/lin_error"],
        "last_yaw_error_radps": last["env/walk/yaw_error"],
        "checkpoints": os.path.join(out, "checkpoints"),
    }
