"""The `stand` and `stance` keyframes of one fighter, completed by leg inverse kinematics.

A pose gives the upper-body angles, the pelvis height and heading, and where each foot stands
relative to the centre of mass. `keyframe` solves the twelve leg joints and the root x/y on the
compiled single-fighter model so that both soles lie flat on z = 0 at those places and the centre of
mass stands over the origin. The PD targets (ctrl) are the solved angles.
"""

from __future__ import annotations

import dataclasses
import functools

import mujoco
import numpy as np

from boxjax.mjcf import boxer
from boxjax.mjcf.joints import is_finger

POSE_NAMES = ("stand", "stance")


@dataclasses.dataclass(frozen=True)
class Pose:
    """A named pose: upper-body angles, pelvis height and heading, and where the feet stand."""

    yaw: float
    """Heading of the pelvis about +z (rad); 0 faces +x."""
    height: float
    """Height of the pelvis origin above the floor (m); sets the knee bend."""
    feet: tuple[tuple[float, float, float], tuple[float, float, float]]
    """(x, y, yaw) of the left and right foot's `FOOT_POINT`, relative to the centre of mass (m, rad)."""
    grip: float
    """Normalised finger closure in [-1, 1], as the grip action would set it."""
    joints: dict[str, float]
    """Upper-body angles (rad) by joint name; unlisted joints are 0, the legs are solved."""


_STAND = Pose(
    yaw=0.0,
    height=0.955,
    feet=((0.0, 0.1, 0.0), (0.0, -0.1, 0.0)),
    grip=-0.5,
    joints={
        **{f"shoulder_y_{s}": 0.25 for s in "lr"},
        **{f"shoulder_x_{s}": 0.1 for s in "lr"},
        **{f"elbow_{s}": 0.6 for s in "lr"},
    },
)

# Orthodox guard: left side and left foot forward, hips turned, chin behind the gloves.
_STANCE = Pose(
    yaw=-0.35,
    height=0.9,
    feet=((0.21, 0.12, -0.1), (-0.21, -0.14, -0.6)),
    grip=0.8,
    joints={
        "lumbar_y": 0.1,
        "lumbar_z": 0.1,
        "thorax_z": 0.1,
        "neck_z": 0.15,
        "shoulder_y_l": 0.85,
        "shoulder_x_l": 0.15,
        "shoulder_z_l": 0.35,
        "elbow_l": 2.2,
        "shoulder_y_r": 0.65,
        "shoulder_x_r": 0.15,
        "shoulder_z_r": 0.45,
        "elbow_r": 2.45,
    },
)

POSES = {"stand": _STAND, "stance": _STANCE}

FOOT_POINT = np.array([0.03, 0.0, -boxer.ANKLE_HEIGHT])
"""The point of each foot frame that `Pose.feet` places: on the sole, 3 cm ahead of the ankle.

Close to the ankles rather than mid-sole: the PD joints get no gravity offset, so every N·m the
ankles carry at rest becomes a lean that the compliant chain amplifies.
"""

_LEG = ("hip_z", "hip_x", "hip_y", "knee", "ankle_y", "ankle_x")


@dataclasses.dataclass(frozen=True)
class Keyframe:
    """A solved pose of the single-fighter model `boxer_spec(body).compile()`."""

    qpos: np.ndarray
    """(nq,) float64: root position and quaternion, then the hinges in model order."""
    ctrl: np.ndarray
    """(nu,) float64: the hinge angles as position targets, so the PD holds the pose."""


def _initial_qpos(model: mujoco.MjModel, pose: Pose) -> np.ndarray:
    qpos = model.qpos0.copy()
    qpos[2] = pose.height
    qpos[3:7] = [np.cos(pose.yaw / 2), 0.0, 0.0, np.sin(pose.yaw / 2)]
    for j in range(model.njnt):
        if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
            continue
        name = model.joint(j).name
        lo, hi = model.jnt_range[j]
        angle = lo + (pose.grip + 1) / 2 * (hi - lo) if is_finger(name) else pose.joints.get(name, 0.0)
        # Bent knees start the leg solve away from the straight-leg singularity.
        angle = 0.3 if name.startswith("knee") else angle
        qpos[model.jnt_qposadr[j]] = np.clip(angle, lo, hi)
    return qpos


def _residual(model, data, qpos, pose: Pose, foot_ids, root) -> np.ndarray:
    data.qpos[:] = qpos
    mujoco.mj_kinematics(model, data)
    mujoco.mj_comPos(model, data)
    com = data.subtree_com[root]
    res = [com[:2]]
    for b, (x, y, yaw) in zip(foot_ids, pose.feet, strict=True):
        rot = data.xmat[b].reshape(3, 3)
        point = data.xpos[b] + rot @ FOOT_POINT
        res += [point - [com[0] + x, com[1] + y, 0.0], rot[:2, 2], [np.arctan2(rot[1, 0], rot[0, 0]) - yaw]]
    return np.concatenate(res)


def _solve(model: mujoco.MjModel, pose: Pose) -> np.ndarray:
    """Leg inverse kinematics (Gauss-Newton, finite differences): feet flat and placed, CoM at 0."""
    qpos = _initial_qpos(model, pose)
    data = mujoco.MjData(model)
    legs = [model.jnt_qposadr[model.joint(f"{j}_{s}").id] for s in "lr" for j in _LEG]
    adr = np.array([0, 1, *legs])
    args = (pose, [model.body(f"foot_{s}").id for s in "lr"], model.body("pelvis").id)
    for _ in range(30):
        r = _residual(model, data, qpos, *args)
        if np.abs(r).max() < 1e-9:
            break
        jac = np.empty((r.size, adr.size))
        for k, a in enumerate(adr):
            probe = qpos.copy()
            probe[a] += 1e-6
            jac[:, k] = (_residual(model, data, probe, *args) - r) / 1e-6
        qpos[adr] -= np.linalg.lstsq(jac, r, rcond=None)[0]
    if np.abs(r).max() > 1e-6:
        raise RuntimeError(f"leg IK did not converge (residual {np.abs(r).max():.1e})")
    # Start 1 mm deep so that every sole contact is active at t = 0 and nothing rocks.
    qpos[2] -= 1e-3
    return qpos


@functools.cache
def _keyframe(body: str, name: str) -> Keyframe:
    model = boxer.boxer_spec(body).compile()
    qpos = _solve(model, POSES[name])
    ctrl = qpos[model.jnt_qposadr[model.actuator_trnid[:, 0]]]
    for a in (qpos, ctrl):
        a.flags.writeable = False
    return Keyframe(qpos=qpos, ctrl=ctrl)


def keyframe(body: str, name: str) -> Keyframe:
    """The solved pose `name` ("stand" or "stance") of `body` at the origin, facing +x.

    Args:
      body: one of `boxer.BODIES`.
      name: one of `POSE_NAMES`.

    Returns:
      A read-only `Keyframe` for the single-fighter model.
    """
    boxer.variant(body)
    if name not in POSES:
        raise ValueError(f"unknown pose {name!r}; choose one of {', '.join(POSE_NAMES)}")
    return _keyframe(body, name)
