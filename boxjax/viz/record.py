"""What a video keeps of each traced step (`boxjax.rl.trace.Record` functions): what poses the world, and
what the block task's overlays need that the pose does not say (the episode's kind, the command, the punch
figures). The overlays' geometry is computed from the pose being drawn (`boxjax.viz.overlays`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from boxjax.envs.base import State
from boxjax.envs.block.config import COMMAND, FACE

PUNCH_FLAGS = ("blocked", "parried", "missed", "hit", "clean", "hit_score")
"""The block task's `punch/*` step figures a video labels (`boxjax.envs.block.punch.punch_events`)."""


def pose_record(state: State) -> dict[str, jax.Array]:
    """What poses a world for rendering: qpos (nq,), and mocap_pos (nmocap, 3), mocap_quat (nmocap, 4)
    (empty in a model without mocap bodies); velocities are not needed to draw it."""
    data = state.data
    return {"qpos": data.qpos, "mocap_pos": data.mocap_pos, "mocap_quat": data.mocap_quat}


def block_record(state: State) -> dict[str, jax.Array]:
    """`pose_record` of a block world plus face, command () bool (the episode's kind), command_offset
    (2, 3) (the command's glove targets from the head, heading frame) and this step's `PUNCH_FLAGS`."""
    info = state.info
    return {
        **pose_record(state),
        "face": info.kind == FACE,
        "command": info.kind == COMMAND,
        "command_offset": info.command_offset,
        **{name: state.metrics[f"punch/{name}"] for name in PUNCH_FLAGS},
    }


def block_recorder(env: Any, params: Any) -> Callable[[State], dict[str, jax.Array]]:
    """The record of a world of the block task `env` with `params`: `block_record` plus target, () int32
    the current punch's target (an index into `boxjax.envs.block.punches.TARGETS`, `BlockEnv.punch_tags`),
    which the outcome labels name."""

    def record(state: State) -> dict[str, jax.Array]:
        return {**block_record(state), "target": env.punch_tags(params, state)["target"]}

    return record
