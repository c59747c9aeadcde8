"""The arena: floor, our fighter (`red/`), optionally the opponent (`blue/`) and a punching bag.

One boxer spec is attached once per fighter with a name prefix; the blue copy gets its team bits
swapped so that the fighters collide with each other and never with themselves. The `stand` and
`stance` keyframes place every fighter at once, the opponent facing ours.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import mujoco
import numpy as np

from boxjax.mjcf import boxer, collision, freeze, indexing, poses

RED = "red/"
BLUE = "blue/"
OPPONENT_DISTANCE = 1.1
"""Distance (m) between the fighters' centres of mass in the keyframes; blue faces -x."""
BAG_ANCHOR = {False: (0.75, 0.0, 2.3), True: (0.6, 1.1, 2.3)}
"""Where the bag hangs from, by whether an opponent is present (then the bag hangs to the side)."""
TARGET_POS = (0.8, 0.0, 1.5)
"""Initial position of the mocap target marker (m)."""


def _floor(spec: mujoco.MjSpec) -> None:
    spec.worldbody.add_light(pos=[0, 0, 4], dir=[0, 0, -1])
    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[8, 8, 0.1],
        contype=collision.FLOOR_GEOM[0],
        conaffinity=collision.FLOOR_GEOM[1],
        rgba=[0.45, 0.5, 0.55, 1],
    )


def _bag(spec: mujoco.MjSpec, anchor) -> None:
    bag = spec.worldbody.add_body(name="bag", pos=list(anchor))
    bag.add_joint(name="bag", type=mujoco.mjtJoint.mjJNT_BALL, damping=2.0, armature=0.1)
    bag.add_geom(
        name="bag_chain",
        type=mujoco.mjtGeom.mjGEOM_CAPSULE,
        fromto=[0, 0, 0, 0, 0, -0.5],
        size=[0.01, 0, 0],
        mass=0.5,
        contype=0,
        conaffinity=0,
    )
    bag.add_geom(
        name="bag",
        type=mujoco.mjtGeom.mjGEOM_CAPSULE,
        fromto=[0, 0, -0.65, 0, 0, -1.35],
        size=[0.17, 0, 0],
        mass=30.0,
        contype=collision.BAG_GEOM[0],
        conaffinity=collision.BAG_GEOM[1],
        rgba=[0.5, 0.3, 0.15, 1],
    )


def _target(spec: mujoco.MjSpec) -> None:
    target = spec.worldbody.add_body(name="target", pos=list(TARGET_POS), mocap=True)
    target.add_site(name="target", size=[0.03, 0, 0], rgba=[1, 0.9, 0, 0.7])


def arena_spec(
    body: str,
    *,
    opponent: bool,
    bag: bool,
    bag_anchor=None,
    opponent_body: str | None = None,
    opponent_floor: bool = True,
    opponent_frozen_rad: Mapping[str, float] | None = None,
) -> mujoco.MjSpec:
    """The arena's spec before keyframes: floor, our fighter, optionally the opponent (body `opponent_body`,
    default ours; touching the floor unless `opponent_floor` is False; the hinges named in
    `opponent_frozen_rad` held at those angles, `freeze.freeze_hinges`) and the bag (hung at `bag_anchor`,
    default `BAG_ANCHOR[opponent]`), and the mocap target."""
    spec = mujoco.MjSpec()
    spec.modelname = f"arena-{body}"
    spec.compiler.degree = False
    spec.copy_during_attach = True
    boxer.set_options(spec)
    _floor(spec)
    fighter = boxer.boxer_spec(body)
    spec.attach(fighter, prefix=RED, frame=spec.worldbody.add_frame())
    if opponent:
        rival = boxer.boxer_spec(opponent_body or body)
        collision.swap_team(rival)
        if not opponent_floor:
            collision.clear_floor(rival)
        if opponent_frozen_rad:
            freeze.freeze_hinges(rival, opponent_frozen_rad)
        frame = spec.worldbody.add_frame(pos=[OPPONENT_DISTANCE, 0, 0], quat=[0, 0, 0, 1])
        spec.attach(rival, prefix=BLUE, frame=frame)
    if bag:
        _bag(spec, BAG_ANCHOR[opponent] if bag_anchor is None else bag_anchor)
    _target(spec)
    return spec


def _yaw_pi(qpos: np.ndarray) -> np.ndarray:
    """Turns a fighter's qpos half a turn about z and moves it `OPPONENT_DISTANCE` along +x."""
    out = qpos.copy()
    out[0:2] = [OPPONENT_DISTANCE - qpos[0], -qpos[1]]
    w, x, y, z = qpos[3:7]
    out[3:7] = [-z, -y, x, w]  # (0, 0, 0, 1) * q
    return out


def _place(model, single, prefix: str, key: poses.Keyframe, qpos, ctrl, frozen: Collection[str] = ()) -> None:
    """Writes one fighter's keyframe into the arena qpos/ctrl, matching joints and actuators by name (the
    `frozen` hinges, absent from the arena, skipped)."""
    for j in range(single.njnt):
        if single.joint(j).name in frozen:
            continue
        src, n = single.jnt_qposadr[j], 7 if j == 0 else 1
        dst = model.jnt_qposadr[model.joint(prefix + single.joint(j).name).id]
        qpos[dst : dst + n] = key.qpos[src : src + n]
    for a in range(single.nu):
        if single.actuator(a).name not in frozen:
            ctrl[model.actuator(prefix + single.actuator(a).name).id] = key.ctrl[a]


def add_keyframes(
    spec: mujoco.MjSpec,
    model: mujoco.MjModel,
    body: str,
    opponent: bool,
    opponent_body: str | None = None,
    opponent_frozen: Collection[str] = (),
) -> None:
    """Adds the `POSE_NAMES` keyframes to `spec` (compiled as `model`): every fighter placed (the opponent's
    body `opponent_body`, default ours, less his `opponent_frozen` hinges), every mocap body where the spec
    puts it."""
    rival = opponent_body or body
    single = boxer.boxer_spec(body).compile()
    single_rival = single if rival == body else boxer.boxer_spec(rival).compile()
    mocap = np.argsort(model.body_mocapid)[np.sort(model.body_mocapid) >= 0]
    for name in poses.POSE_NAMES:
        key = poses.keyframe(body, name)
        qpos, ctrl = model.qpos0.copy(), np.zeros(model.nu)
        _place(model, single, RED, key, qpos, ctrl)
        if opponent:
            theirs = poses.keyframe(rival, name)
            mirrored = poses.Keyframe(qpos=_yaw_pi(theirs.qpos), ctrl=theirs.ctrl)
            _place(model, single_rival, BLUE, mirrored, qpos, ctrl, opponent_frozen)
        spec.add_key(
            name=name,
            qpos=qpos.tolist(),
            ctrl=ctrl.tolist(),
            mpos=model.body_pos[mocap].ravel().tolist(),
            mquat=model.body_quat[mocap].ravel().tolist(),
        )


def build(
    body: str, *, opponent: bool = False, bag: bool = False, opponent_body: str | None = None
) -> tuple[mujoco.MjModel, indexing.ArenaIndex]:
    """Compiles the arena with one or two fighters and resolves its index.

    Args:
      body: one of `BODIES` ("muscular", "muscular-fast", "simple").
      opponent: add the blue fighter `OPPONENT_DISTANCE` in front of ours, facing it.
      bag: add a punching bag hanging from a ball joint.
      opponent_body: the blue fighter's body (one of `BODIES`; default ours).

    Returns:
      (model, index): the compiled model with keyframes "stand" and "stance", and its `ArenaIndex`.
    """
    boxer.variant(body)
    if opponent_body is not None:
        boxer.variant(opponent_body)
    spec = arena_spec(body, opponent=opponent, bag=bag, opponent_body=opponent_body)
    add_keyframes(spec, spec.compile(), body, opponent, opponent_body)
    model = spec.compile()
    return model, indexing.arena_index(model, body, opponent=opponent, bag=bag)
