"""The stance task's math: observation, reward, reference, controls, shove and reset pose.

Every function takes arrays with any leading batch axes (`...`): the environment calls them for one world
under `vmap`. Inputs are float32 and constants are Python floats, so nothing is promoted to float64. Random
draws stay with the caller; what is done with a draw is here. Geometry and reward terms are the tasks'
shared ones (`boxjax.envs.rewards`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import mujoco
import numpy as np

from boxjax.envs.rewards import (
    action_rate,
    feet_support,
    gravity_in_frame,
    height_tracking,
    pose_tracking,
    quat_rotate_inverse,
    root_velocity,
    upright,
)
from boxjax.mjcf import FighterIndex

TERMS = ("alive", "pose", "height", "upright", "feet", "action_rate", "root_speed")
"""Reward terms, in the order they are summed."""


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """Where the stance math finds the fighter in qpos, qvel and sensordata, and its constants (numpy)."""

    root_q: int
    """qpos address of the root free joint."""
    root_v: int
    """qvel address of the root free joint."""
    act_qpos_adr: np.ndarray
    """(nu,) qpos address of each actuated joint."""
    act_dof_adr: np.ndarray
    """(nu,) qvel address of each actuated joint."""
    touch_adr: np.ndarray
    """(2,) sensordata address of the left and right foot touch sensors."""
    action_group: np.ndarray
    """(nu,) action dimension driving each actuator."""
    ctrl_lo: np.ndarray
    """(nu,) float32 lowest joint target."""
    ctrl_hi: np.ndarray
    """(nu,) float32 highest joint target."""
    rhythm_steps: int
    """Control steps per period of the reference bounce."""
    body_weight_n: float
    """Weight of the whole model in newtons (the feet term's scale)."""

    @property
    def nu(self) -> int:
        """Actuated joints."""
        return int(self.act_qpos_adr.shape[0])

    @classmethod
    def build(cls, model: mujoco.MjModel, index: FighterIndex, rhythm_steps: int) -> Layout:
        """The layout of `index`'s fighter in `model`."""
        return cls(
            root_q=int(index.qpos_adr),
            root_v=int(index.dof_adr),
            act_qpos_adr=np.asarray(index.act_qpos_adr),
            act_dof_adr=np.asarray(index.act_dof_adr),
            touch_adr=np.asarray(index.touch_sensor_adr),
            action_group=np.asarray(index.action_group),
            ctrl_lo=np.asarray(index.ctrl_range[:, 0], np.float32),
            ctrl_hi=np.asarray(index.ctrl_range[:, 1], np.float32),
            rhythm_steps=rhythm_steps,
            body_weight_n=float(model.body_subtreemass[0] * -model.opt.gravity[2]),
        )


# -- the task -----------------------------------------------------------------------------------------
def reference(row: Any, amplitude: Any, nu: int) -> tuple[Any, Any]:
    """Reference joint targets (..., nu) and root height (...) from table rows (..., 2 nu + 2)."""
    stand, stance, heights = row[..., :nu], row[..., nu : 2 * nu], row[..., 2 * nu :]
    height = heights[..., 0] + amplitude * (heights[..., 1] - heights[..., 0])
    return stand + amplitude * (stance - stand), height


def joint_targets(ref_pose: Any, action: Any, layout: Layout, action_scale_rad: float) -> Any:
    """Actuator targets (..., nu): the reference plus the scaled action, clipped to the control range."""
    per_actuator = action[..., layout.action_group]
    return jnp.clip(ref_pose + action_scale_rad * per_actuator, layout.ctrl_lo, layout.ctrl_hi)


def shove_velocity(angle_rad: Any, speed_mps: Any) -> Any:
    """Horizontal root-velocity kick (..., 2) of a shove with direction `angle_rad` and `speed_mps` (...)."""
    return speed_mps[..., None] * jnp.stack([jnp.cos(angle_rad), jnp.sin(angle_rad)], axis=-1)


def initial_pose(index: FighterIndex, amplitude: Any, noise_rad: Any) -> tuple[Any, Any]:
    """Root qpos (..., 7) and joint angles (..., nu) of a reset at `amplitude`, plus joint noise (..., nu)."""
    stand, stance = jnp.asarray(index.stand_ctrl), jnp.asarray(index.stance_ctrl - index.stand_ctrl)
    joints = stand + amplitude * stance + noise_rad
    root = jnp.asarray(index.stand_qpos[:7]) + amplitude * jnp.asarray(
        index.stance_qpos[:7] - index.stand_qpos[:7]
    )
    quat = root[..., 3:7] / jnp.linalg.norm(root[..., 3:7], axis=-1, keepdims=True)
    return jnp.concatenate([root[..., :3], quat], axis=-1), joints


def observe(
    qpos: Any,
    qvel: Any,
    touch_n: Any,
    ref_pose: Any,
    ref_height: Any,
    amplitude: Any,
    phase: Any,
    prev_action: Any,
    layout: Layout,
) -> Any:
    """The observation (..., 4 nu + 15 + A), float32.

    Args:
      qpos, qvel: (..., nq), (..., nv) float32 physics state.
      touch_n: (..., 2) foot touch forces.
      ref_pose, ref_height: (..., nu), (...) the reference (`reference`).
      amplitude: () or (...) stance amplitude.
      phase: (...) int rhythm step.
      prev_action: (..., A) the action that led here.
    """
    lay = layout
    quat = qpos[..., lay.root_q + 3 : lay.root_q + 7]
    lin_vel = quat_rotate_inverse(quat, qvel[..., lay.root_v : lay.root_v + 3])
    angle = 2.0 * np.pi * phase.astype(jnp.float32) / lay.rhythm_steps
    joints = qpos[..., lay.act_qpos_adr]
    clock = [jnp.sin(angle), jnp.cos(angle), jnp.broadcast_to(amplitude, angle.shape)]
    parts = [
        joints,
        0.1 * qvel[..., lay.act_dof_adr],
        ref_pose,
        joints - ref_pose,
        (qpos[..., lay.root_q + 2] - ref_height)[..., None],
        gravity_in_frame(quat),
        lin_vel,
        0.25 * qvel[..., lay.root_v + 3 : lay.root_v + 6],
        touch_n / lay.body_weight_n,
        jnp.stack(clock, axis=-1),
        prev_action,
    ]
    return jnp.concatenate([jnp.asarray(p, jnp.float32) for p in parts], axis=-1)


def score(
    qpos: Any,
    qvel: Any,
    touch_n: Any,
    ref_pose: Any,
    ref_height: Any,
    action: Any,
    prev_action: Any,
    layout: Layout,
    config: Any,
) -> tuple[dict[str, Any], Any]:
    """Weighted reward terms {name: (...)} (`TERMS`) and the fall flag (...), all float32.

    `config` is a `StanceConfig` (weights and fall thresholds).
    """
    cfg, lay = config, layout
    quat = qpos[..., lay.root_q + 3 : lay.root_q + 7]
    gravity = gravity_in_frame(quat)
    height = qpos[..., lay.root_q + 2]
    joints = qpos[..., lay.act_qpos_adr]
    terms = {
        "alive": jnp.full(height.shape, cfg.w_alive, jnp.float32),
        "pose": cfg.w_pose * pose_tracking(joints, ref_pose, 0.05 * lay.nu),
        "height": cfg.w_height * height_tracking(height, ref_height, 0.01),
        "upright": cfg.w_upright * upright(gravity),
        "feet": cfg.w_feet * feet_support(touch_n, lay.body_weight_n),
        "action_rate": -cfg.w_action_rate * action_rate(action, prev_action),
        "root_speed": -cfg.w_root_speed * root_velocity(qvel[..., lay.root_v : lay.root_v + 3]),
    }
    fell = (height < cfg.fall_height_fraction * ref_height) | (upright(gravity) < cfg.fall_upright_cos)
    return {k: jnp.asarray(terms[k], jnp.float32) for k in TERMS}, jnp.asarray(fell, jnp.float32)


def total_reward(terms: dict[str, Any], fell: Any, w_fall: float) -> Any:
    """Sum of the terms (in `TERMS` order) minus the fall penalty."""
    return sum(terms[k] for k in TERMS) - w_fall * fell
