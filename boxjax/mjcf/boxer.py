"""One boxer as a `mujoco.MjSpec`: skeleton, bones, feet, sites, sensors and PD actuators.

The fighter faces +x with +y to its left, standing on z = 0 at qpos0. Left/right joints share one
sign convention (x and z axes are mirrored on the right), so the same angle on both sides is a
mirrored pose. Every hinge gets one `position` actuator named after it.
"""

from __future__ import annotations

import dataclasses

import mujoco

from boxjax.mjcf import collision, hands, muscles
from boxjax.mjcf.joints import JOINT_GROUPS, hinge, joint_group

BODIES = ("muscular", "muscular-fast", "simple")

_HINGE = mujoco.mjtJoint.mjJNT_HINGE
_CAPSULE = mujoco.mjtGeom.mjGEOM_CAPSULE
_SPHERE = mujoco.mjtGeom.mjGEOM_SPHERE
_BOX = mujoco.mjtGeom.mjGEOM_BOX
_TRUE = mujoco.mjtLimited.mjLIMITED_TRUE

ANKLE_HEIGHT = 0.08
"""Height of the ankle joint above the sole when the foot is flat (m)."""


@dataclasses.dataclass(frozen=True)
class Variant:
    """What distinguishes the three bodies."""

    name: str
    """Body name, one of `BODIES`."""
    detailed: bool
    """Clavicles, fingers and 63 muscle geoms (nv = 89) instead of the 43-dof skeleton."""
    box_feet: bool
    """Box feet (as the heavy original) instead of capsules."""
    muscle_contacts: str
    """"full": muscles touch floor, opponent and each other; "none": muscles are visual only."""


_VARIANTS = {
    "muscular": Variant("muscular", detailed=True, box_feet=True, muscle_contacts="full"),
    "muscular-fast": Variant("muscular-fast", detailed=True, box_feet=False, muscle_contacts="none"),
    "simple": Variant("simple", detailed=False, box_feet=False, muscle_contacts="none"),
}


def variant(body: str) -> Variant:
    """Returns the `Variant` of a body name; raises `ValueError` naming the valid choices."""
    if body not in _VARIANTS:
        raise ValueError(f"unknown body {body!r}; choose one of {', '.join(BODIES)}")
    return _VARIANTS[body]


def bone(spec_body, name: str, fromto, radius: float, mass: float, bits: tuple[int, int], **kw):
    """Adds a mass-carrying capsule with the given (contype, conaffinity)."""
    return spec_body.add_geom(
        name=name,
        type=_CAPSULE,
        fromto=list(fromto),
        size=[radius, 0, 0],
        mass=mass,
        contype=bits[0],
        conaffinity=bits[1],
        rgba=[0.85, 0.7, 0.55, 1],
        **kw,
    )


def site(spec_body, name: str, pos, size: float = 0.02) -> None:
    """Adds a small sphere site (keypoints, eyes)."""
    spec_body.add_site(name=name, pos=list(pos), size=[size, 0, 0], rgba=[0.2, 0.8, 0.2, 0.6], group=3)


def _torso(spec: mujoco.MjSpec, v: Variant):
    strike = collision.STRIKE
    pelvis = spec.worldbody.add_body(name="pelvis", pos=[0, 0, 0.97])
    pelvis.add_freejoint(name="root")
    bone(pelvis, "pelvis", [0, -0.08, 0, 0, 0.08, 0], 0.09, 11.0, strike)
    site(pelvis, "kp_pelvis", [0.05, 0, 0])

    lumbar = pelvis.add_body(name="lumbar", pos=[0, 0, 0.08])
    hinge(lumbar, "lumbar_x", [1, 0, 0], [-0.5, 0.5])
    hinge(lumbar, "lumbar_y", [0, 1, 0], [-0.5, 0.9])
    hinge(lumbar, "lumbar_z", [0, 0, 1], [-0.6, 0.6])
    bone(lumbar, "lumbar", [0, -0.075, 0.07, 0, 0.075, 0.07], 0.085, 6.0, strike)
    site(lumbar, "kp_stomach", [0.09, 0, 0.06])

    chest = lumbar.add_body(name="chest", pos=[0, 0, 0.17])
    hinge(chest, "thorax_x", [1, 0, 0], [-0.4, 0.4])
    hinge(chest, "thorax_y", [0, 1, 0], [-0.4, 0.6])
    hinge(chest, "thorax_z", [0, 0, 1], [-0.5, 0.5])
    mass = 17.0 if v.detailed else 18.0
    bone(chest, "chest", [0, -0.09, 0.13, 0, 0.09, 0.13], 0.12, mass, strike)
    site(chest, "kp_chest", [0.12, 0, 0.14])

    neck = chest.add_body(name="neck", pos=[0, 0, 0.25])
    hinge(neck, "neck_x", [1, 0, 0], [-0.6, 0.6])
    hinge(neck, "neck_y", [0, 1, 0], [-0.6, 0.9])
    hinge(neck, "neck_z", [0, 0, 1], [-1.0, 1.0])
    bone(neck, "neck", [0, 0, 0, 0, 0, 0.08], 0.05, 1.2, collision.NONE)
    site(neck, "kp_neck", [0.0, 0, 0.04])

    head = neck.add_body(name="head", pos=[0, 0, 0.08])
    if v.detailed:
        hinge(head, "head_y", [0, 1, 0], [-0.5, 0.5])
        hinge(head, "head_x", [1, 0, 0], [-0.4, 0.4])
    head.add_geom(
        name="head",
        type=_SPHERE,
        pos=[0.01, 0, 0.11],
        size=[0.115, 0, 0],
        mass=5.0,
        contype=strike[0],
        conaffinity=strike[1],
        rgba=[0.85, 0.7, 0.55, 1],
    )
    site(head, "kp_head", [0.01, 0, 0.11])
    # The eyes look along the head's +x axis, which is the world +x at qpos0.
    head.add_site(name="eyes", pos=[0.11, 0, 0.13], size=[0.01, 0, 0], group=3)
    return pelvis, chest


def _arm(chest, v: Variant, s: str, sign: float) -> None:
    strike = collision.STRIKE
    if v.detailed:
        clav = chest.add_body(name=f"clavicle_{s}", pos=[0, 0.02 * sign, 0.22])
        hinge(clav, f"clavicle_z_{s}", [0, 0, sign], [-0.3, 0.3])
        hinge(clav, f"clavicle_x_{s}", [sign, 0, 0], [-0.2, 0.4])
        bone(clav, f"clavicle_{s}", [0, 0, 0, -0.02, 0.15 * sign, 0.01], 0.025, 0.5, collision.NONE)
        upper = clav.add_body(name=f"upper_arm_{s}", pos=[-0.02, 0.17 * sign, 0])
    else:
        upper = chest.add_body(name=f"upper_arm_{s}", pos=[-0.02, 0.19 * sign, 0.22])
    hinge(upper, f"shoulder_y_{s}", [0, -1, 0], [-1.0, 3.0])
    hinge(upper, f"shoulder_x_{s}", [sign, 0, 0], [-0.5, 2.5])
    hinge(upper, f"shoulder_z_{s}", [0, 0, -sign], [-1.0, 1.2])
    bone(upper, f"upper_arm_{s}", [0, 0, -0.02, 0, 0, -0.28], 0.045, 2.2, strike)
    site(upper, f"kp_shoulder_{s}", [0, 0, 0])

    fore = upper.add_body(name=f"forearm_{s}", pos=[0, 0, -0.30])
    hinge(fore, f"elbow_{s}", [0, -1, 0], [0.0, 2.6])
    hinge(fore, f"forearm_{s}", [0, 0, sign], [-1.2, 1.2])
    bone(fore, f"forearm_{s}", [0, 0, -0.02, 0, 0, -0.24], 0.038, 1.3, strike)
    site(fore, f"kp_elbow_{s}", [0, 0, 0])

    hand = fore.add_body(name=f"hand_{s}", pos=[0, 0, -0.26])
    hinge(hand, f"wrist_y_{s}", [0, -1, 0], [-1.0, 1.0])
    hinge(hand, f"wrist_x_{s}", [sign, 0, 0], [-0.4, 0.5])
    palm_mass = 0.35 if v.detailed else 0.5
    bone(hand, f"palm_{s}", [0, 0, -0.01, 0, 0, -0.07], 0.03, palm_mass, collision.NONE)
    # A 10 oz glove: the glove is the only part of the hand that touches anything.
    hand.add_geom(
        name=f"glove_{s}",
        type=_SPHERE,
        pos=[0.01, 0, -0.07],
        size=[0.065, 0, 0],
        mass=0.3,
        contype=collision.GLOVE[0],
        conaffinity=collision.GLOVE[1],
        rgba=[0.8, 0.1, 0.1, 1] if s == "l" else [0.6, 0.05, 0.05, 1],
    )
    site(hand, f"kp_glove_{s}", [0.01, 0, -0.07])
    if v.detailed:
        hands.add_fingers(hand, s, sign)


def _foot_geoms(foot, toes, v: Variant, s: str) -> None:
    floor = collision.FLOOR_ONLY
    # Stiff sole contacts (timeconst 2*dt): soft soles in series with the PD ankles let a statue topple.
    common = dict(
        contype=floor[0],
        conaffinity=floor[1],
        friction=[1.2, 0.02, 0.002],
        solref=[0.01, 1.0],
        solimp=[0.95, 0.99, 0.001, 0.5, 2.0],
        rgba=[0.2, 0.2, 0.2, 1],
    )
    if v.box_feet:
        foot.add_geom(
            name=f"foot_{s}", type=_BOX, pos=[0.04, 0, -0.055], size=[0.09, 0.05, 0.025], mass=1.0, **common
        )
        toes.add_geom(
            name=f"toes_{s}", type=_BOX, pos=[0.03, 0, -0.005], size=[0.03, 0.045, 0.015], mass=0.2, **common
        )
        return
    # Capsules across the sole at the ball and heel: a rectangle of four contacts, no box collisions.
    r = 0.03
    foot.add_geom(
        name=f"foot_{s}",
        type=_CAPSULE,
        fromto=[0.1, -0.04, -0.05, 0.1, 0.04, -0.05],
        size=[r, 0, 0],
        mass=0.6,
        **common,
    )
    foot.add_geom(
        name=f"heel_{s}",
        type=_CAPSULE,
        fromto=[-0.02, -0.03, -0.05, -0.02, 0.03, -0.05],
        size=[r, 0, 0],
        mass=0.4,
        **common,
    )
    toes.add_geom(
        name=f"toes_{s}",
        type=_CAPSULE,
        fromto=[0.04, -0.035, -0.005, 0.04, 0.035, -0.005],
        size=[0.015, 0, 0],
        mass=0.2,
        **common,
    )


def _leg(pelvis, v: Variant, s: str, sign: float, spec: mujoco.MjSpec) -> None:
    strike = collision.STRIKE
    thigh = pelvis.add_body(name=f"thigh_{s}", pos=[0, 0.09 * sign, -0.05])
    hinge(thigh, f"hip_z_{s}", [0, 0, -sign], [-0.6, 0.6])
    hinge(thigh, f"hip_x_{s}", [sign, 0, 0], [-0.4, 0.8])
    hinge(thigh, f"hip_y_{s}", [0, -1, 0], [-0.5, 2.0])
    bone(thigh, f"thigh_{s}", [0, 0, -0.02, 0, 0, -0.40], 0.07, 9.0, strike)
    site(thigh, f"kp_hip_{s}", [0, 0, 0])

    shin = thigh.add_body(name=f"shin_{s}", pos=[0, 0, -0.42])
    hinge(shin, f"knee_{s}", [0, 1, 0], [0.0, 2.5])
    bone(shin, f"shin_{s}", [0, 0, -0.02, 0, 0, -0.38], 0.05, 3.5, strike)
    site(shin, f"kp_knee_{s}", [0.03, 0, 0])

    foot = shin.add_body(name=f"foot_{s}", pos=[0, 0, -0.42])
    hinge(foot, f"ankle_y_{s}", [0, 1, 0], [-0.6, 0.8])
    hinge(foot, f"ankle_x_{s}", [sign, 0, 0], [-0.4, 0.4])
    toes = foot.add_body(name=f"toes_{s}", pos=[0.13, 0, -0.06])
    hinge(toes, f"toe_{s}", [0, 1, 0], [-0.6, 0.5])
    _foot_geoms(foot, toes, v, s)
    site(foot, f"kp_foot_{s}", [0.04, 0, -0.04])
    # The touch site straddles the sole so that every foot-floor contact point falls inside it.
    foot.add_site(
        name=f"sole_{s}",
        type=_BOX,
        pos=[0.04, 0, -ANKLE_HEIGHT],
        size=[0.11, 0.07, 0.025],
        rgba=[0.1, 0.1, 0.9, 0.3],
        group=4,
    )
    spec.add_sensor(
        name=f"touch_foot_{s}",
        type=mujoco.mjtSensor.mjSENS_TOUCH,
        objtype=mujoco.mjtObj.mjOBJ_SITE,
        objname=f"sole_{s}",
    )


CCD_ITERATIONS = 16
"""Cap on the convex-collision (GJK/EPA) iterations, MuJoCo's default 35. Most muscle-against-muscle
candidates are separated ellipsoids, for which GJK converges slowly and runs to the cap; on the GPU a
convex-collision launch lasts as long as its slowest pair. 16 keeps the contacts found (within 1e-5 m and 1
degree, grazing ones aside; `tests/test_collision.py`) and shortens the muscular blocking iteration
(`docs/benchmarks.md`)."""


SOLVER_TOLERANCE = 1e-6
"""The constraint solver's convergence tolerance, MuJoCo's default 1e-8. MuJoCo Warp solves in float32,
which cannot resolve 1e-8, so at MuJoCo's default every world runs to the iteration cap; MuJoCo Warp floors
its own models' tolerance at 1e-6, which MJX's model conversion skips. In float64 (MuJoCo C) Newton converges
past both in as many iterations, so the step is the same (`tests/test_collision.py`)."""


SOLVER_ITERATIONS = 4
"""Cap on the constraint solver's iterations (Newton): the seed's setting. Tasks may lower it as a named
option (`TaskConfig.solver_iterations`), which changes the physics."""


def set_options(spec: mujoco.MjSpec) -> None:
    """Sets the solver options every boxjax model uses (dt 5 ms, Newton `SOLVER_ITERATIONS`/8 to
    `SOLVER_TOLERANCE`, pyramidal cone, convex collision capped at `CCD_ITERATIONS`)."""
    spec.option.timestep = 0.005
    spec.option.iterations = SOLVER_ITERATIONS
    spec.option.ls_iterations = 8
    spec.option.tolerance = SOLVER_TOLERANCE
    spec.option.solver = mujoco.mjtSolver.mjSOL_NEWTON
    spec.option.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    spec.option.ccd_iterations = CCD_ITERATIONS


def _actuators(spec: mujoco.MjSpec) -> None:
    for joint in spec.joints:
        if joint.type != _HINGE:
            continue
        g = JOINT_GROUPS[joint_group(joint.name)]
        act = spec.add_actuator(name=joint.name, target=joint.name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=g.kp, dampratio=1.0)
        act.ctrlrange = list(joint.range)
        act.ctrllimited = _TRUE
        act.forcerange = [-g.torque, g.torque]
        act.forcelimited = _TRUE


def boxer_spec(body: str) -> mujoco.MjSpec:
    """Builds one fighter (no floor) as an `MjSpec` rooted at the body `pelvis`.

    Args:
      body: one of `BODIES`.

    Returns:
      A fresh spec; geoms collide as the red fighter (`collision.swap_team` makes it blue).
    """
    v = variant(body)
    spec = mujoco.MjSpec()
    spec.modelname = f"boxer-{body}"
    spec.compiler.degree = False
    set_options(spec)
    pelvis, chest = _torso(spec, v)
    for s, sign in (("l", 1.0), ("r", -1.0)):
        _arm(chest, v, s, sign)
        _leg(pelvis, v, s, sign, spec)
    if v.detailed:
        muscles.add_muscles(spec, v.muscle_contacts == "full")
    _actuators(spec)
    return spec
