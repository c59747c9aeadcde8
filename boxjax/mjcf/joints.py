"""Hinge joints: PD gains, limits and passive parameters by joint group, read from the joint name."""

from __future__ import annotations

import dataclasses

import mujoco

FINGERS = ("thumb", "index", "middle", "ring", "little")
"""First word of every coupled finger joint name (`index_pip_l`)."""

_HINGE = mujoco.mjtJoint.mjJNT_HINGE
_TRUE = mujoco.mjtLimited.mjLIMITED_TRUE


@dataclasses.dataclass(frozen=True)
class JointGroup:
    """PD and passive parameters shared by a group of hinges."""

    kp: float
    """Actuator stiffness (N·m/rad); the damping is critical (`dampratio` = 1)."""
    torque: float
    """Actuator force limit (N·m)."""
    damping: float
    """Passive joint damping (N·m·s/rad)."""
    armature: float
    """Rotor inertia added to the dof (kg·m²); keeps light joints stable at dt = 5 ms."""


JOINT_GROUPS = {
    "lumbar": JointGroup(kp=600.0, torque=300.0, damping=2.0, armature=0.04),
    "thorax": JointGroup(kp=300.0, torque=250.0, damping=2.0, armature=0.03),
    "neck": JointGroup(kp=60.0, torque=50.0, damping=1.0, armature=0.02),
    "head": JointGroup(kp=40.0, torque=30.0, damping=0.5, armature=0.02),
    "clavicle": JointGroup(kp=80.0, torque=60.0, damping=1.0, armature=0.02),
    "shoulder": JointGroup(kp=300.0, torque=150.0, damping=1.0, armature=0.03),
    "elbow": JointGroup(kp=200.0, torque=120.0, damping=1.0, armature=0.02),
    "forearm": JointGroup(kp=20.0, torque=20.0, damping=0.5, armature=0.01),
    "wrist": JointGroup(kp=25.0, torque=25.0, damping=0.5, armature=0.01),
    "finger": JointGroup(kp=2.0, torque=3.0, damping=0.05, armature=0.01),
    "hip": JointGroup(kp=1600.0, torque=400.0, damping=2.0, armature=0.1),
    "knee": JointGroup(kp=1600.0, torque=400.0, damping=2.0, armature=0.1),
    "ankle": JointGroup(kp=1600.0, torque=300.0, damping=2.0, armature=0.1),
    "toe": JointGroup(kp=200.0, torque=100.0, damping=0.5, armature=0.02),
}


def joint_group(joint_name: str) -> str:
    """The `JOINT_GROUPS` key of a hinge, read from its name (`knee_l` -> "knee")."""
    head = joint_name.split("_")[0]
    return "finger" if head in FINGERS else head


def hinge(spec_body, name: str, axis, limits) -> None:
    """Adds a limited, damped hinge whose parameters come from `JOINT_GROUPS` by its name."""
    g = JOINT_GROUPS[joint_group(name)]
    spec_body.add_joint(
        name=name,
        type=_HINGE,
        axis=list(axis),
        range=list(limits),
        limited=_TRUE,
        damping=g.damping,
        armature=g.armature,
    )


def is_finger(joint_name: str) -> bool:
    """True for the coupled finger joints, which one grip action per hand drives."""
    return joint_name.split("_")[0] in FINGERS
