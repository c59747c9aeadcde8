"""Guard poses by inverse kinematics on the device: damped least squares over a fixed number of iterations.

A guard command names where the two gloves should be, as offsets in our fighter's heading frame (x forward,
y left, z up) from the head. `solve_arms` turns glove targets into shoulder and elbow angles for one world:
a fixed number of damped-least-squares steps, each on one pass of MJX's own kinematics (`impl="jax"`, so it
runs on any device), joint limits enforced by clipping. The Jacobian is the hinge formula on that pass's
joint axes and anchors (`glove_jacobian`: column j = axis_j x (glove - anchor_j) for the glove's own arm),
which equals differentiating the kinematics (tested against `jax.jacfwd`) at a fraction of the compile time.
Everything is a pure function of arrays, so it vmaps over worlds inside the jitted iteration.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

from boxjax.mjcf.indexing import FighterIndex

ARM_JOINTS = ("shoulder_y", "shoulder_x", "shoulder_z", "elbow")
"""Joints the IK moves, per side (the wrists and fingers keep their pose)."""

GUARD_POSES: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "high_guard": ((0.16, 0.09, -0.04), (0.14, -0.09, -0.06)),
    "cover_left": ((0.06, 0.13, 0.0), (0.14, -0.06, -0.08)),
    "cover_right": ((0.14, 0.06, -0.08), (0.06, -0.13, 0.0)),
    "body_guard": ((0.18, 0.08, -0.30), (0.18, -0.08, -0.30)),
    "long_guard": ((0.38, 0.05, -0.08), (0.16, -0.09, -0.06)),
}
"""Glove targets (left, right) in metres from the head, in the heading frame; the order is the command id."""


@dataclasses.dataclass(frozen=True)
class ArmIK:
    """What one fighter's arm IK needs, resolved once from the compiled model."""

    model: mjx.Model
    """The arena on MJX's JAX implementation (its kinematics run on any device)."""
    qpos_adr: np.ndarray
    """(J,) qpos addresses of the arm joints (left side first)."""
    joint_ids: np.ndarray
    """(J,) their joint ids."""
    side: np.ndarray
    """(J,) 0 for a left-arm joint, 1 for a right-arm joint."""
    lower: np.ndarray
    """(J,) joint lower limits (rad)."""
    upper: np.ndarray
    """(J,) joint upper limits (rad)."""
    glove_site_ids: np.ndarray
    """(2,) glove keypoint sites (left, right)."""
    head_body: int
    pelvis_body: int
    targets_m: np.ndarray
    """(P, 2, 3) glove offsets of every guard pose, `GUARD_POSES` order."""


def _ancestors(model: mujoco.MjModel, body: int) -> set[int]:
    """`body` and every body above it."""
    out = {body}
    while body:
        body = int(model.body_parentid[body])
        out.add(body)
    return out


def make_arm_ik(mj_model: mujoco.MjModel, fighter: FighterIndex) -> ArmIK:
    """Resolve the arm joints, glove sites and guard targets of `fighter` in `mj_model`.

    Raises:
      ValueError: an arm joint that is not a hinge above its glove (the Jacobian's formula needs both).
    """
    names = [f"{fighter.prefix}{j}_{s}" for s in "lr" for j in ARM_JOINTS]
    joints = [mj_model.joint(n) for n in names]
    sites = [mj_model.site(f"{fighter.prefix}kp_glove_{s}").id for s in "lr"]
    side = np.repeat(np.arange(2, dtype=np.int32), len(ARM_JOINTS))
    for joint, s in zip(joints, side, strict=True):
        above = _ancestors(mj_model, int(mj_model.site_bodyid[sites[s]]))
        if joint.type[0] != mujoco.mjtJoint.mjJNT_HINGE or int(joint.bodyid[0]) not in above:
            raise ValueError(f"IK arm joint {joint.name!r} must be a hinge above its glove")
    return ArmIK(
        model=mjx.put_model(mj_model, impl="jax"),
        qpos_adr=np.array([j.qposadr[0] for j in joints], np.int32),
        joint_ids=np.array([j.id for j in joints], np.int32),
        side=side,
        lower=np.array([j.range[0] for j in joints], np.float32),
        upper=np.array([j.range[1] for j in joints], np.float32),
        glove_site_ids=np.array(sites, np.int32),
        head_body=fighter.head_body,
        pelvis_body=fighter.pelvis_body,
        targets_m=np.array(list(GUARD_POSES.values()), np.float32),
    )


def _kinematics(ik: ArmIK, qpos: jax.Array) -> mjx.Data:
    data = mjx.make_data(ik.model).replace(qpos=qpos)
    return mjx.kinematics(ik.model, data)


def glove_positions(ik: ArmIK, qpos: jax.Array) -> jax.Array:
    """(2, 3) world positions of the left and right glove for full configuration `qpos`."""
    return _kinematics(ik, qpos).site_xpos[ik.glove_site_ids]


def glove_jacobian(ik: ArmIK, data: mjx.Data) -> jax.Array:
    """(6, J) d(left glove, right glove) / d(arm angles) at the kinematics `data`: for each hinge, its axis
    crossed with the lever from its anchor to its own side's glove; the other side's glove does not move."""
    joints, side = jnp.asarray(ik.joint_ids), jnp.asarray(ik.side)
    gloves = data.site_xpos[jnp.asarray(ik.glove_site_ids)]
    columns = jnp.cross(data.xaxis[joints], gloves[side] - data.xanchor[joints])  # (J, 3)
    own = (side[None, :] == jnp.arange(2)[:, None]).astype(columns.dtype)  # (2, J)
    return (own[:, None, :] * columns.T[None, :, :]).reshape(6, -1)


def guard_targets(ik: ArmIK, qpos: jax.Array, pose: jax.Array, jitter_m: jax.Array) -> jax.Array:
    """(2, 3) world glove targets of guard `pose` (int) for a fighter in `qpos`, plus `jitter_m` (2, 3)."""
    data = _kinematics(ik, qpos)
    forward = data.xmat[ik.pelvis_body][:, 0]
    yaw = jnp.arctan2(forward[1], forward[0])
    c, s = jnp.cos(yaw), jnp.sin(yaw)
    heading = jnp.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], jnp.float32)
    offsets = jnp.asarray(ik.targets_m)[pose] + jitter_m
    return data.xpos[ik.head_body] + offsets @ heading.T


def solve_arms(
    ik: ArmIK, qpos: jax.Array, targets: jax.Array, iterations: int = 12, damping: float = 0.05
) -> tuple[jax.Array, jax.Array]:
    """Arm angles that bring the gloves to `targets` (2, 3), starting from `qpos`.

    Returns:
      (angles (J,) in `ik.qpos_adr` order, residual distance in metres of the worse glove).
    """
    adr = jnp.asarray(ik.qpos_adr)
    lower, upper = jnp.asarray(ik.lower), jnp.asarray(ik.upper)
    goal = targets.reshape(-1)

    def gloves(angles: jax.Array) -> jax.Array:
        return glove_positions(ik, qpos.at[adr].set(angles)).reshape(-1)

    def step(angles: jax.Array, _) -> tuple[jax.Array, None]:
        data = _kinematics(ik, qpos.at[adr].set(angles))
        error = goal - data.site_xpos[jnp.asarray(ik.glove_site_ids)].reshape(-1)
        jac = glove_jacobian(ik, data)
        damped = jac @ jac.T + damping**2 * jnp.eye(goal.shape[0], dtype=jnp.float32)
        angles = jnp.clip(angles + jac.T @ jnp.linalg.solve(damped, error), lower, upper)
        return angles, None

    with jax.default_matmul_precision("highest"):
        angles, _ = jax.lax.scan(step, qpos[adr], None, length=iterations)
        residual = jnp.max(jnp.linalg.norm((goal - gloves(angles)).reshape(2, 3), axis=-1))
    return angles, residual
