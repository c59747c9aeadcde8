"""A synthetic 89-DoF single-tree humanoid (hinge joints, capsules) for factorisation tests and benchmarks.

Shaped like the muscular boxer where it matters for the mass matrix: one kinematic tree above MuJoCo Warp's
dense-block limit (64 DoF), a long trunk, and long, thin branches (fingers) making the tree ~27 levels deep.
"""

from __future__ import annotations

import mujoco
import numpy as np

NV = 89
"""Degrees of freedom of the default synthetic tree (6 free + 83 hinges)."""

_X, _Y, _Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)


def _link(parent, name: str, pos, tip, axes, radius: float = 0.03, density: float = 1000.0):
    """A child body at `pos` with one hinge per axis and a capsule from its origin to `tip`."""
    body = parent.add_body(name=name, pos=pos)
    for n, axis in enumerate(axes):
        body.add_joint(
            name=f"{name}_{n}",
            type=mujoco.mjtJoint.mjJNT_HINGE,
            axis=axis,
            range=[-1.2, 1.2],
            limited=mujoco.mjtLimited.mjLIMITED_TRUE,
        )
    body.add_geom(
        type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=[0, 0, 0, *tip], size=[radius, 0, 0], density=density
    )
    return body


def _hand(wrist, sign: float, side: str) -> None:
    """Five fingers of four hinges each (spread, three flexions); 20 DoF."""
    for f in range(5):
        base = _link(
            wrist, f"{side}f{f}a", [0, sign * 0.08, 0.02 * (f - 2)], [0, sign * 0.025, 0], [_Z, _X], 0.008
        )
        mid = _link(base, f"{side}f{f}b", [0, sign * 0.025, 0], [0, sign * 0.02, 0], [_X], 0.007)
        _link(mid, f"{side}f{f}c", [0, sign * 0.02, 0], [0, sign * 0.018, 0], [_X], 0.006)


def _arm(chest, sign: float, side: str) -> None:
    """Clavicle 1 + shoulder 3 + elbow 1 + forearm roll 1 + wrist 2 + hand 20 = 28 DoF."""
    clav = _link(chest, f"{side}clav", [0, sign * 0.05, 0.15], [0, sign * 0.12, 0], [_X], 0.03)
    upper = _link(clav, f"{side}upper", [0, sign * 0.14, 0], [0, sign * 0.26, 0], [_X, _Y, _Z], 0.04)
    fore = _link(upper, f"{side}fore", [0, sign * 0.28, 0], [0, sign * 0.24, 0], [_Z, _Y], 0.035)
    wrist = _link(fore, f"{side}wrist", [0, sign * 0.26, 0], [0, sign * 0.06, 0], [_X, _Z], 0.03)
    _hand(wrist, sign, side)


def _leg(pelvis, sign: float, side: str) -> None:
    """Hip 3 + knee 1 + ankle 2 + toe 1 = 7 DoF."""
    thigh = _link(pelvis, f"{side}thigh", [0, sign * 0.1, -0.05], [0, 0, -0.38], [_X, _Y, _Z], 0.06)
    shin = _link(thigh, f"{side}shin", [0, 0, -0.4], [0, 0, -0.38], [_Y], 0.05)
    foot = _link(shin, f"{side}foot", [0, 0, -0.4], [0.15, 0, -0.03], [_Y, _X], 0.04)
    _link(foot, f"{side}toe", [0.16, 0, -0.03], [0.05, 0, 0], [_Y], 0.03)


def tree_spec(free: bool = True, floor: bool = False) -> mujoco.MjSpec:
    """The synthetic humanoid tree: 89 DoF with a free root (83 when `free` is False).

    Geoms do not collide with each other (contype/conaffinity 0) unless `floor` adds a ground plane that
    collides with the feet only, so without a floor an episode has no contacts at all.
    """
    spec = mujoco.MjSpec()
    spec.option.timestep = 0.005
    spec.option.iterations = 4
    spec.option.ls_iterations = 8
    spec.default.joint.damping = [0.5, 0.0, 0.0]
    spec.default.joint.armature = 0.01
    spec.default.geom.contype = 0
    spec.default.geom.conaffinity = 0
    world = spec.worldbody
    if floor:
        world.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5, 5, 0.1], contype=1, conaffinity=1)
    pelvis = world.add_body(name="pelvis", pos=[0, 0, 1.1])
    if free:
        pelvis.add_freejoint(name="root")
    pelvis.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=[0, -0.1, 0, 0, 0.1, 0], size=[0.08, 0, 0])
    spine = pelvis
    for n in range(3):
        spine = _link(spine, f"spine{n}", [0, 0, 0.12 if n else 0.08], [0, 0, 0.1], [_X, _Y, _Z], 0.08)
    head = _link(spine, "neck", [0, 0, 0.2], [0, 0, 0.15], [_X, _Y, _Z], 0.05)
    _link(head, "jaw", [0.05, 0, 0.05], [0.05, 0, 0], [_Y], 0.02)
    for sign, side in ((1.0, "l"), (-1.0, "r")):
        _arm(spine, sign, side)
        _leg(pelvis, sign, side)
    if floor:
        for side in "lr":
            for name in (f"{side}foot", f"{side}toe"):
                for geom in spec.body(name).geoms:
                    geom.contype, geom.conaffinity = 1, 1
    for joint in spec.joints:
        if joint.type == mujoco.mjtJoint.mjJNT_HINGE:
            spec.add_actuator(
                name=joint.name,
                target=joint.name,
                trntype=mujoco.mjtTrn.mjTRN_JOINT,
                gaintype=mujoco.mjtGain.mjGAIN_FIXED,
                biastype=mujoco.mjtBias.mjBIAS_AFFINE,
                gainprm=[20.0] + [0.0] * 9,
                biasprm=[0.0, -20.0, -1.0] + [0.0] * 7,
                ctrlrange=[-1.0, 1.0],
                ctrllimited=mujoco.mjtLimited.mjLIMITED_TRUE,
            )
    return spec


def tree_model(free: bool = True, floor: bool = False) -> mujoco.MjModel:
    """The compiled synthetic humanoid tree (see `tree_spec`)."""
    return tree_spec(free, floor).compile()


def random_qpos(mj_model: mujoco.MjModel, key: np.random.Generator) -> np.ndarray:
    """(nq,) a random configuration: hinges uniform in range, a random unit quaternion at free roots."""
    qpos = mj_model.qpos0.copy()
    for j in range(mj_model.njnt):
        adr = mj_model.jnt_qposadr[j]
        kind = mj_model.jnt_type[j]
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            qpos[adr : adr + 3] = key.uniform(-1.0, 1.0, 3)
            quat = key.normal(size=4)
            qpos[adr + 3 : adr + 7] = quat / np.linalg.norm(quat)
        elif kind == mujoco.mjtJoint.mjJNT_BALL:
            quat = key.normal(size=4)
            qpos[adr : adr + 4] = quat / np.linalg.norm(quat)
        else:
            lo, hi = mj_model.jnt_range[j] if mj_model.jnt_limited[j] else (-np.pi, np.pi)
            qpos[adr] = key.uniform(lo, hi)
    return qpos
