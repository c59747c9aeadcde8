"""Hinges held at fixed angles, baked into the body tree: fewer dofs, the same pose.

A body's hinges act in order, each a rotation about its anchor and axis in the frame the earlier ones left.
Freezing hinge k at angle a replaces it with the constant rigid motion F_k; pushing F_k past the kept hinges
before it (each conjugated by F_k, so its anchor and axis are re-expressed) leaves one constant motion at the
front, which folds into the body's offset from its parent. Geoms, sites, inertia and child bodies keep their
local frames, so every kept joint at every angle places them exactly where the full body did with the frozen
hinges at their angles.
"""

from __future__ import annotations

from collections.abc import Mapping

import mujoco
import numpy as np

_HINGE = mujoco.mjtJoint.mjJNT_HINGE


def _quat_axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    quat = np.empty(4)
    mujoco.mju_axisAngle2Quat(quat, axis, angle)
    return quat


def _rotate(quat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    out = np.empty(3)
    mujoco.mju_rotVecQuat(out, vec, quat)
    return out


def _mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(4)
    mujoco.mju_mulQuat(out, a, b)
    return out


def _inverse(quat: np.ndarray) -> np.ndarray:
    out = np.empty(4)
    mujoco.mju_negQuat(out, quat)
    return out


def freeze_hinges(spec: mujoco.MjSpec, angles_rad: Mapping[str, float]) -> None:
    """Removes the hinges named in `angles_rad` from `spec` (in place), each held at its angle (rad, measured
    from the joint's reference as `qpos` is), with the actuators that drive them.

    Raises:
      ValueError: a name that is not a hinge of `spec`, or a sensor, tendon or equality that uses one.
    """
    model = spec.compile()
    frozen = {}
    for name, angle in angles_rad.items():
        j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if j < 0 or model.jnt_type[j] != _HINGE:
            raise ValueError(f"freeze_hinges: {name!r} is not a hinge of the body")
        frozen[name] = float(angle)
    _refuse_users(spec, set(frozen))
    for body in spec.bodies:
        joints = list(body.joints)
        if any(j.name in frozen for j in joints):
            _bake(model, body, joints, frozen)
    for actuator in [a for a in spec.actuators if a.target in frozen]:
        spec.delete(actuator)
    for joint in [j for j in spec.joints if j.name in frozen]:
        spec.delete(joint)


def _refuse_users(spec: mujoco.MjSpec, frozen: set[str]) -> None:
    """Raise ValueError when an element other than an actuator refers to a frozen hinge."""
    users = [s.name for s in spec.sensors if s.objname in frozen]
    users += [e.name for e in spec.equalities if {e.name1, e.name2} & frozen]
    if users or spec.tendons:
        raise ValueError(
            f"freeze_hinges: {users or 'tendons'} use the frozen hinges; freeze only plain hinges"
        )


def _bake(model: mujoco.MjModel, body, joints: list, frozen: Mapping[str, float]) -> None:
    """Folds the frozen hinges of `body` (its `joints`, in order) into its offset and re-expresses the kept
    ones."""
    lead_pos, lead_quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
    kept: list[tuple[object, np.ndarray, np.ndarray]] = []
    for joint in joints:
        j = model.joint(joint.name).id
        anchor, axis = model.jnt_pos[j].copy(), model.jnt_axis[j].copy()
        if joint.name not in frozen:
            kept.append((joint, anchor, axis))
            continue
        turn = _quat_axis_angle(axis, frozen[joint.name])
        shift = anchor - _rotate(turn, anchor)
        lead_pos = lead_pos + _rotate(lead_quat, shift)
        lead_quat = _mul(lead_quat, turn)
        back = _inverse(turn)
        kept = [(k, _rotate(back, a - shift), _rotate(back, x)) for k, a, x in kept]
    b = model.body(body.name).id
    body.pos = (model.body_pos[b] + _rotate(model.body_quat[b], lead_pos)).tolist()
    body.quat = _mul(model.body_quat[b], lead_quat).tolist()
    for joint, anchor, axis in kept:
        joint.pos, joint.axis = anchor.tolist(), axis.tolist()
