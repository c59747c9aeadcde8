"""Ids and addresses resolved once, by name, from a compiled arena model.

Task code reads everything it needs about a fighter from a `FighterIndex` instead of looking names up
at run time. Every name must resolve; a missing one raises `KeyError` naming it.
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from boxjax.mjcf.joints import is_finger

KEYPOINTS = (
    "kp_head",
    "kp_neck",
    "kp_chest",
    "kp_stomach",
    "kp_pelvis",
    *(f"kp_{part}_{s}" for part in ("shoulder", "elbow", "glove", "hip", "knee", "foot") for s in "lr"),
)
"""Keypoint sites the opponent's vision sees (17), in observation order."""

_OBJ = mujoco.mjtObj
_NQ = {int(mujoco.mjtJoint.mjJNT_FREE): 7, int(mujoco.mjtJoint.mjJNT_BALL): 4}
_i32 = np.int32


def _id(model: mujoco.MjModel, obj: mujoco.mjtObj, name: str) -> int:
    i = mujoco.mj_name2id(model, obj, name)
    if i < 0:
        kind = obj.name.removeprefix("mjOBJ_").lower()
        raise KeyError(f"{kind} {name!r} not found in the model")
    return i


def _ids(model, obj, names) -> np.ndarray:
    return np.array([_id(model, obj, n) for n in names], dtype=_i32)


@dataclasses.dataclass(frozen=True, eq=False)
class FighterIndex:
    """Where one fighter lives in the model. Arrays are numpy int32/float32."""

    prefix: str
    """Name prefix of this fighter ("red/" or "blue/")."""
    qpos_adr: int
    """First qpos of the fighter (its free joint); the fighter's qpos are contiguous."""
    nq: int
    """Number of qpos of the fighter (7 + hinges)."""
    dof_adr: int
    """First dof of the fighter (its free joint); the fighter's dofs are contiguous."""
    nv: int
    """Number of dofs of the fighter (6 + hinges)."""
    pelvis_body: int
    head_body: int
    torso_body: int
    """The `chest` body."""
    body_ids: np.ndarray
    """(nbody_f,) every body of the fighter."""
    foot_body_ids: np.ndarray
    """(4,) foot_l, toes_l, foot_r, toes_r: the only bodies allowed on the floor when standing."""
    actuator_ids: np.ndarray
    """(nu,) actuator ids in model order."""
    act_qpos_adr: np.ndarray
    """(nu,) qpos address of each actuator's joint."""
    act_dof_adr: np.ndarray
    """(nu,) dof address of each actuator's joint."""
    action_group: np.ndarray
    """(nu,) which policy action dimension drives each actuator (finger joints share a grip dim)."""
    action_size: int
    """Number of policy action dimensions."""
    ctrl_range: np.ndarray
    """(nu, 2) float32 control (joint target) range of each actuator."""
    eyes_site: int
    """Site whose +x axis is the gaze direction."""
    keypoint_names: tuple[str, ...]
    """Unprefixed keypoint site names, as `KEYPOINTS`."""
    keypoint_site_ids: np.ndarray
    """(K,) keypoint site ids."""
    glove_geom_ids: np.ndarray
    """(2,) left, right glove."""
    forearm_geom_ids: np.ndarray
    """(2,) left, right forearm bone."""
    head_geom_id: int
    foot_geom_ids: np.ndarray
    """(2,) left, right `foot_*` geom."""
    touch_sensor_adr: np.ndarray
    """(2,) address of touch_foot_l/r in sensordata."""
    muscle_geom_ids: np.ndarray
    """(M,) muscle geoms (M = 63 for the detailed bodies, 0 for simple)."""
    stand_ctrl: np.ndarray
    """(nu,) float32 PD targets of the `stand` keyframe."""
    stance_ctrl: np.ndarray
    """(nu,) float32 PD targets of the `stance` keyframe."""
    stand_qpos: np.ndarray
    """(nq,) float32 this fighter's qpos in the `stand` keyframe."""
    stance_qpos: np.ndarray
    """(nq,) float32 this fighter's qpos in the `stance` keyframe."""


@dataclasses.dataclass(frozen=True, eq=False)
class ArenaIndex:
    """Where everything in an arena model lives."""

    body: str
    """Body variant of the fighters."""
    red: FighterIndex
    blue: FighterIndex | None
    floor_geom: int
    bag_body: int
    """-1 without a bag."""
    bag_geom: int
    """-1 without a bag."""
    target_mocap: int
    """Mocap index (into `data.mocap_pos`) of the `target` body."""
    target_site: int
    keyframes: dict[str, int]
    """Keyframe id by name ("stand", "stance")."""


def _action_groups(names: list[str]) -> tuple[np.ndarray, int]:
    """One action dim per non-finger actuator, in order, then one grip dim per hand."""
    plain = [n for n in names if not is_finger(n)]
    hands = sorted({n.rsplit("_", 1)[-1] for n in names if is_finger(n)})
    group = [plain.index(n) if not is_finger(n) else len(plain) + hands.index(n[-1]) for n in names]
    return np.array(group, dtype=_i32), len(plain) + len(hands)


def _actuators(model: mujoco.MjModel, p: str) -> dict:
    ids = np.array([a for a in range(model.nu) if model.actuator(a).name.startswith(p)], dtype=_i32)
    joints = model.actuator_trnid[ids, 0]
    group, size = _action_groups([model.actuator(a).name[len(p) :] for a in ids])
    return dict(
        actuator_ids=ids,
        act_qpos_adr=model.jnt_qposadr[joints].astype(_i32),
        act_dof_adr=model.jnt_dofadr[joints].astype(_i32),
        action_group=group,
        action_size=size,
        ctrl_range=model.actuator_ctrlrange[ids].astype(np.float32),
    )


def _keyed(model: mujoco.MjModel, p: str, qpos_adr: int, nq: int, ids: np.ndarray) -> dict:
    out = {}
    for name in ("stand", "stance"):
        k = _id(model, _OBJ.mjOBJ_KEY, name)
        out[f"{name}_ctrl"] = model.key_ctrl[k, ids].astype(np.float32)
        out[f"{name}_qpos"] = model.key_qpos[k, qpos_adr : qpos_adr + nq].astype(np.float32)
    return out


def fighter_index(model: mujoco.MjModel, prefix: str) -> FighterIndex:
    """Resolves one fighter's ids by name.

    Args:
      model: a compiled arena model.
      prefix: "red/" or "blue/".
    """
    p = prefix
    root = _id(model, _OBJ.mjOBJ_JOINT, p + "root")
    pelvis = _id(model, _OBJ.mjOBJ_BODY, p + "pelvis")
    bodies = np.flatnonzero(model.body_rootid == pelvis).astype(_i32)
    dofs = np.flatnonzero(np.isin(model.dof_bodyid, bodies))
    joints = np.unique(model.dof_jntid[dofs])
    nq = int(sum(_NQ.get(int(model.jnt_type[j]), 1) for j in joints))
    acts = _actuators(model, p)
    sensors = _ids(model, _OBJ.mjOBJ_SENSOR, [f"{p}touch_foot_{s}" for s in "lr"])
    muscles = [g for g in range(model.ngeom) if model.geom(g).name.startswith(p + "muscle_")]
    return FighterIndex(
        prefix=p,
        qpos_adr=int(model.jnt_qposadr[root]),
        nq=nq,
        dof_adr=int(model.jnt_dofadr[root]),
        nv=int(dofs.size),
        pelvis_body=pelvis,
        head_body=_id(model, _OBJ.mjOBJ_BODY, p + "head"),
        torso_body=_id(model, _OBJ.mjOBJ_BODY, p + "chest"),
        body_ids=bodies,
        foot_body_ids=_ids(model, _OBJ.mjOBJ_BODY, [f"{p}{b}_{s}" for s in "lr" for b in ("foot", "toes")]),
        **acts,
        eyes_site=_id(model, _OBJ.mjOBJ_SITE, p + "eyes"),
        keypoint_names=KEYPOINTS,
        keypoint_site_ids=_ids(model, _OBJ.mjOBJ_SITE, [p + k for k in KEYPOINTS]),
        glove_geom_ids=_ids(model, _OBJ.mjOBJ_GEOM, [f"{p}glove_{s}" for s in "lr"]),
        forearm_geom_ids=_ids(model, _OBJ.mjOBJ_GEOM, [f"{p}forearm_{s}" for s in "lr"]),
        head_geom_id=_id(model, _OBJ.mjOBJ_GEOM, p + "head"),
        foot_geom_ids=_ids(model, _OBJ.mjOBJ_GEOM, [f"{p}foot_{s}" for s in "lr"]),
        touch_sensor_adr=model.sensor_adr[sensors].astype(_i32),
        muscle_geom_ids=np.array(muscles, dtype=_i32),
        **_keyed(model, p, int(model.jnt_qposadr[root]), nq, acts["actuator_ids"]),
    )


def arena_index(model: mujoco.MjModel, body: str, *, opponent: bool, bag: bool) -> ArenaIndex:
    """Resolves the arena's ids by name; see `ArenaIndex`."""
    target = _id(model, _OBJ.mjOBJ_BODY, "target")
    return ArenaIndex(
        body=body,
        red=fighter_index(model, "red/"),
        blue=fighter_index(model, "blue/") if opponent else None,
        floor_geom=_id(model, _OBJ.mjOBJ_GEOM, "floor"),
        bag_body=_id(model, _OBJ.mjOBJ_BODY, "bag") if bag else -1,
        bag_geom=_id(model, _OBJ.mjOBJ_GEOM, "bag") if bag else -1,
        target_mocap=int(model.body_mocapid[target]),
        target_site=_id(model, _OBJ.mjOBJ_SITE, "target"),
        keyframes={model.key(k).name: k for k in range(model.nkey)},
    )
