"""The block arena's opponent as a puppet: every body of the blue fighter as a mocap body.

The opponent only replays recorded punches, so nothing about him needs dynamics: simulating his 43- or
89-DoF tree (as a PD-driven body) doubled the physics of every block step. The puppet arena holds our
fighter (`red/`), the bag and one mocap body per body of the articulated opponent, with the same names
("blue/hand_l"), geoms and sites, so vision keypoints, glove capsules and the punch score resolve as
before. Its poses come from forward kinematics of the articulated opponent (`source`), done once on
the host per punch frame (`boxjax.envs.block.punches.device_table`), and are written to `data.mocap_pos` /
`mocap_quat` every control step.

Collisions: the puppet's bones, head and gloves touch our fighter; his muscles and feet are visual, and
he never touches the floor. A kinematic glove cannot be stopped, so a landed punch would keep pushing
with the full stiffness of a contact (~2 kN at MuJoCo's default 0.02 s time constant, enough to floor a
fighter standing in the guard); the puppet's contacts are softened instead (`contact_timeconst_s`, the
puppet geoms' solref time constant; MuJoCo averages it with our fighter's default 0.02 s through equal
`solmix` weights, so 0.2 gives an effective 0.11 s). The puppet's colliding geoms also meet the bag, which
never comes near him.
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from boxjax.mjcf import arena, collision, indexing

PREFIX = arena.BLUE


@dataclasses.dataclass(frozen=True, eq=False)
class PuppetIndex:
    """Where the puppet lives in the puppet arena. Arrays are numpy int32."""

    prefix: str
    """Name prefix of the puppet's bodies, geoms and sites (the articulated opponent's)."""
    body_ids: np.ndarray
    """(B,) the puppet's bodies."""
    mocap_ids: np.ndarray
    """(B,) their rows of `data.mocap_pos` / `mocap_quat`."""
    source_body_ids: np.ndarray
    """(B,) the same bodies in the articulated arena (`PuppetArena.source_model`)."""
    keypoint_site_ids: np.ndarray
    """(K,) keypoint sites, `indexing.KEYPOINTS` order."""
    glove_geom_ids: np.ndarray
    """(2,) left, right glove."""
    root_xy: np.ndarray
    """(2,) float64 his pelvis on the floor in the guard (the face position)."""


@dataclasses.dataclass(frozen=True, eq=False)
class PuppetArena:
    """The block arena with its puppet, and the articulated arena that poses him."""

    model: mujoco.MjModel
    index: indexing.ArenaIndex
    """Our fighter, the bag, the target (`blue` is None: see `puppet`)."""
    puppet: PuppetIndex
    source_model: mujoco.MjModel
    """The same arena with the articulated opponent (`boxjax.mjcf.build(body, opponent=True, bag=True)`)."""
    source_index: indexing.ArenaIndex
    guard_qpos: np.ndarray
    """(source nq,) the source's `stance` keyframe with the opponent at the puppet's distance."""


def _puppet_bits(contype: int, conaffinity: int) -> tuple[int, int]:
    """Collision bits of a puppet geom: the blue fighter's strike geoms touch red only (his gloves our muscles
    too); muscles (the `SELF` bit), feet and visual geoms touch nothing."""
    if contype & collision.SELF or not contype & collision.BLUE:
        return 0, 0
    return collision.BLUE, conaffinity & (collision.RED | collision.RED_MUSCLES)


def _add_body(
    spec: mujoco.MjSpec, model: mujoco.MjModel, data: mujoco.MjData, body: int, timeconst_s: float
) -> None:
    """One mocap body copying `body` of the articulated `model`, posed as in `data`; its colliding geoms'
    geoms have solref time constant `timeconst_s` (critically damped; mixed with the other geom's)."""
    mocap = spec.worldbody.add_body(
        name=model.body(body).name, pos=data.xpos[body].tolist(), quat=data.xquat[body].tolist(), mocap=True
    )
    for g in np.flatnonzero(model.geom_bodyid == body):
        contype, conaffinity = _puppet_bits(int(model.geom_contype[g]), int(model.geom_conaffinity[g]))
        mocap.add_geom(
            name=model.geom(g).name,
            type=mujoco.mjtGeom(int(model.geom_type[g])),
            size=model.geom_size[g].tolist(),
            pos=model.geom_pos[g].tolist(),
            quat=model.geom_quat[g].tolist(),
            rgba=model.geom_rgba[g].tolist(),
            group=int(model.geom_group[g]),
            contype=contype,
            conaffinity=conaffinity,
            solref=[timeconst_s, 1.0] if contype else model.geom_solref[g].tolist(),
        )
    for s in np.flatnonzero(model.site_bodyid == body):
        mocap.add_site(
            name=model.site(s).name,
            type=mujoco.mjtGeom(int(model.site_type[s])),
            size=model.site_size[s].tolist(),
            pos=model.site_pos[s].tolist(),
            quat=model.site_quat[s].tolist(),
            rgba=model.site_rgba[s].tolist(),
            group=int(model.site_group[s]),
        )


def place_opponent(qpos: np.ndarray, opponent: indexing.FighterIndex, distance_m: float) -> np.ndarray:
    """Arena qpos with the opponent moved along x so the fighters' centres of mass are `distance_m` apart.

    The arena's keyframes put them `arena.OPPONENT_DISTANCE` apart, the opponent facing -x.
    """
    out = np.array(qpos, copy=True)
    out[opponent.qpos_adr] -= arena.OPPONENT_DISTANCE - distance_m
    return out


def build(
    body: str, distance_m: float = arena.OPPONENT_DISTANCE, contact_timeconst_s: float = 0.2
) -> PuppetArena:
    """The block arena: our fighter, the bag, and the opponent as a puppet `distance_m` away in the guard,
    his colliding geoms with solref time constant `contact_timeconst_s` (see the module docstring).

    Raises:
      ValueError: unknown body, or a time constant that is not positive.
    """
    if contact_timeconst_s <= 0:
        raise ValueError(f"contact_timeconst_s must be positive, got {contact_timeconst_s}")
    source_model, source_index = arena.build(body, opponent=True, bag=True)
    blue = source_index.blue
    guard = place_opponent(source_model.key_qpos[source_index.keyframes["stance"]], blue, distance_m)
    data = mujoco.MjData(source_model)
    data.qpos[:] = guard
    mujoco.mj_kinematics(source_model, data)
    spec = arena.arena_spec(body, opponent=False, bag=True, bag_anchor=arena.BAG_ANCHOR[True])
    for b in blue.body_ids:
        _add_body(spec, source_model, data, int(b), contact_timeconst_s)
    arena.add_keyframes(spec, spec.compile(), body, opponent=False)
    model = spec.compile()
    index = indexing.arena_index(model, body, opponent=False, bag=True)
    body_ids = np.array([model.body(source_model.body(b).name).id for b in blue.body_ids], np.int32)
    site = mujoco.mjtObj.mjOBJ_SITE
    geom = mujoco.mjtObj.mjOBJ_GEOM
    puppet = PuppetIndex(
        prefix=PREFIX,
        body_ids=body_ids,
        mocap_ids=model.body_mocapid[body_ids].astype(np.int32),
        source_body_ids=np.asarray(blue.body_ids, np.int32),
        keypoint_site_ids=np.array(
            [mujoco.mj_name2id(model, site, PREFIX + k) for k in indexing.KEYPOINTS], np.int32
        ),
        glove_geom_ids=np.array(
            [mujoco.mj_name2id(model, geom, f"{PREFIX}glove_{s}") for s in "lr"], np.int32
        ),
        root_xy=guard[blue.qpos_adr : blue.qpos_adr + 2].copy(),
    )
    return PuppetArena(model, index, puppet, source_model, source_index, guard)
