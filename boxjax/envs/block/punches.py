"""The punch library: joint trajectories the opponent replays, its file format, loader and device table.

File format (``.npz``, no pickled objects; `save` writes it, `load` reads and validates it). ``P`` punches,
``T`` frames (the longest punch), ``J`` joints:

==================  ==============  ================================================================
key                 dtype, shape    meaning
==================  ==============  ================================================================
``format_version``  int32 ()        `FORMAT_VERSION`
``qpos``            float32 (P,T,J) hinge angles (rad) of the joints in ``joint_names``; frames past
                                    ``length`` repeat the last one. Frame 0 and the last frame are
                                    the guard (the `stance` keyframe), so punches chain seamlessly.
``length``          int32 (P,)      frames of each punch
``impact``          int32 (P,)      frame at which the glove is commanded onto the target
``rate_hz``         float32 ()      frames per second
``joint_names``     str (J,)        unprefixed hinge names ("shoulder_y_l"); every other joint of the
                                    opponent holds its `stance` angle
``names``           str (P,)        unique punch names ("jab-head-fast")
``kind``            str (P,)        one of `KINDS`
``hand``            str (P,)        "l" or "r"
``target``          str (P,)        one of `TARGETS`
``speed``           str (P,)        speed label ("slow", "medium", "fast")
``peak_speed_mps``  float32 (P,)    peak glove speed of the trajectory (forward kinematics)
``body``            str ()          body the trajectories were solved on
``bodies``          str (B,)        bodies the library is valid for (the glove lands within tolerance)
``distance_m``      float32 ()      distance between the fighters' centres of mass the punches aim at
==================  ==============  ================================================================

Real recordings replace the generated file by writing the same keys: retarget the recording onto the
named hinges, resample to any fixed rate, start and end each punch in the guard, and mark the impact
frame. The environment resamples to its control rate (`resample`) and poses the opponent by name
as the PD targets of his actuators (`ctrl_table`, the simulated opponent of `boxjax.mjcf.sparring`) or,
through forward kinematics frame by frame, as the body poses of his puppet (`device_table`,
`boxjax.mjcf.puppet`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct

import boxjax
from boxjax.mjcf import boxer, poses
from boxjax.mjcf.indexing import FighterIndex
from boxjax.mjcf.puppet import PuppetArena

FORMAT_VERSION = 1
KINDS = ("jab", "cross", "lead_hook", "rear_hook", "lead_uppercut", "rear_uppercut")
TARGETS = ("head", "body")
HANDS = ("l", "r")
SPEEDS = ("fast", "medium", "slow")
"""Speed labels, fastest first (a procedural punch gets the label of its extension time's band)."""
TAGS = {"kind": KINDS, "target": TARGETS, "speed": SPEEDS}
"""What a punch is tagged with for per-punch figures (`BlockEnv.punch_tags`): each tag's names, by index."""
DEFAULT_PATH = os.path.join(boxjax.DATA_DIR, "punches.npz")
"""The generated library shipped with the package (`experiments/make_punches.py`)."""

_STRING_KEYS = ("names", "kind", "hand", "target", "speed")


@dataclasses.dataclass(frozen=True, eq=False)
class PunchLibrary:
    """A punch library in host memory (numpy); see the module docstring for each field."""

    qpos: np.ndarray
    length: np.ndarray
    impact: np.ndarray
    rate_hz: float
    joint_names: tuple[str, ...]
    names: tuple[str, ...]
    kind: tuple[str, ...]
    hand: tuple[str, ...]
    target: tuple[str, ...]
    speed: tuple[str, ...]
    peak_speed_mps: np.ndarray
    body: str
    bodies: tuple[str, ...]
    distance_m: float

    @property
    def size(self) -> int:
        """Number of punches."""
        return int(self.qpos.shape[0])

    def duration_s(self) -> np.ndarray:
        """(P,) seconds each punch lasts."""
        return self.length / self.rate_hz


@struct.dataclass
class PunchTable:
    """The library on the device, at the control rate: the simulated opponent's joint targets
    (`ctrl_table`) or the puppet's body poses (`device_table`); the other is None."""

    length: jax.Array
    """(P,) int32 control steps of each punch."""
    impact: jax.Array
    """(P,) int32 control step at which the glove is commanded onto the target."""
    hand: jax.Array
    """(P,) int32 0 = left glove, 1 = right glove."""
    target: jax.Array
    """(P,) int32 index into `TARGETS`."""
    ctrl: jax.Array | None = None
    """(P, T, U) float32 the simulated opponent's PD targets per control step, his actuators in model order
    (past a punch's end: the guard)."""
    body_pos: jax.Array | None = None
    """(P, T, B, 3) float32 world position of each puppet body per control step, the opponent in the face
    position (past a punch's end: the guard)."""
    body_quat: jax.Array | None = None
    """(P, T, B, 4) float32 their orientations (w, x, y, z)."""


def tag_indices(lib: PunchLibrary) -> dict[str, np.ndarray]:
    """(P,) int32 index of each punch's kind, target and speed label in `TAGS` (a speed label outside
    `SPEEDS` is -1)."""
    return {
        name: np.array([names.index(v) if v in names else -1 for v in getattr(lib, name)], np.int32)
        for name, names in TAGS.items()
    }


def validate(lib: PunchLibrary) -> None:
    """Raise `ValueError` naming the first inconsistency (shapes, dtypes, ranges, labels)."""
    if lib.qpos.ndim != 3:
        raise ValueError(f"punch library: qpos must be (punches, frames, joints), got shape {lib.qpos.shape}")
    p, t, j = lib.qpos.shape
    if j != len(lib.joint_names):
        raise ValueError(f"punch library: qpos has {j} joints but joint_names lists {len(lib.joint_names)}")
    for name in ("length", "impact", "peak_speed_mps"):
        if getattr(lib, name).shape != (p,):
            raise ValueError(f"punch library: {name} must have shape ({p},), got {getattr(lib, name).shape}")
    for name in _STRING_KEYS:
        if len(getattr(lib, name)) != p:
            raise ValueError(f"punch library: {name} must list {p} entries, got {len(getattr(lib, name))}")
    if len(set(lib.names)) != p:
        raise ValueError("punch library: punch names must be unique")
    if np.any(lib.length < 2) or np.any(lib.length > t):
        raise ValueError(f"punch library: lengths must lie in [2, {t}]")
    if np.any(lib.impact < 1) or np.any(lib.impact >= lib.length):
        raise ValueError("punch library: impact frames must lie inside each punch (1 <= impact < length)")
    for name, valid in (("kind", KINDS), ("hand", HANDS), ("target", TARGETS)):
        bad = sorted(set(getattr(lib, name)) - set(valid))
        if bad:
            raise ValueError(f"punch library: unknown {name} {bad}; valid: {', '.join(valid)}")
    if not np.all(np.isfinite(lib.qpos)) or lib.rate_hz <= 0 or lib.distance_m <= 0:
        raise ValueError("punch library: qpos must be finite, rate_hz and distance_m positive")


def save(path: str, lib: PunchLibrary) -> None:
    """Write `lib` in the documented format (compressed)."""
    validate(lib)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    np.savez_compressed(
        path,
        format_version=np.int32(FORMAT_VERSION),
        qpos=lib.qpos.astype(np.float32),
        length=lib.length.astype(np.int32),
        impact=lib.impact.astype(np.int32),
        rate_hz=np.float32(lib.rate_hz),
        joint_names=np.array(lib.joint_names),
        peak_speed_mps=lib.peak_speed_mps.astype(np.float32),
        body=np.array(lib.body),
        bodies=np.array(lib.bodies),
        distance_m=np.float32(lib.distance_m),
        **{k: np.array(getattr(lib, k)) for k in _STRING_KEYS},
    )


def load(path: str | None = None, body: str | None = None) -> PunchLibrary:
    """Read and validate a library file.

    Args:
      path: the ``.npz`` file (default: the shipped `DEFAULT_PATH`).
      body: if given, the body the library must be valid for.

    Raises:
      ValueError: wrong format version, missing keys, inconsistent shapes, or a body it was not made for.
    """
    path = path or DEFAULT_PATH
    with np.load(path, allow_pickle=False) as f:
        version = int(f["format_version"]) if "format_version" in f else -1
        if version != FORMAT_VERSION:
            raise ValueError(f"{path}: punch library format {version}, expected {FORMAT_VERSION}")
        missing = {"qpos", "length", "impact", "rate_hz", "joint_names", "peak_speed_mps", "body", "bodies"}
        missing = sorted((missing | {"distance_m", *_STRING_KEYS}) - set(f.files))
        if missing:
            raise ValueError(f"{path}: punch library lacks {missing}")
        lib = PunchLibrary(
            qpos=np.asarray(f["qpos"], np.float32),
            length=np.asarray(f["length"], np.int32),
            impact=np.asarray(f["impact"], np.int32),
            rate_hz=float(f["rate_hz"]),
            joint_names=tuple(str(s) for s in f["joint_names"]),
            peak_speed_mps=np.asarray(f["peak_speed_mps"], np.float32),
            body=str(f["body"]),
            bodies=tuple(str(s) for s in f["bodies"]),
            distance_m=float(f["distance_m"]),
            **{k: tuple(str(s) for s in f[k]) for k in _STRING_KEYS},
        )
    validate(lib)
    if body is not None:
        require_body(lib, body, path)
    return lib


def require_body(lib: PunchLibrary, body: str, path: str | None = None) -> None:
    """Raise ValueError naming the library (`path`, default the shipped one) when it was not made for
    `body`."""
    if body not in lib.bodies:
        raise ValueError(
            f"{path or DEFAULT_PATH}: punch library made for bodies {list(lib.bodies)}, not {body!r}"
        )


def resample(lib: PunchLibrary, rate_hz: float) -> PunchLibrary:
    """The library at another frame rate (linear interpolation; impact frames rounded).

    Lengths round up, so every punch still ends exactly on its last (guard) frame.
    """
    duration = (lib.length - 1) / lib.rate_hz
    length = np.maximum(2, np.ceil(duration * rate_hz - 1e-6).astype(np.int32) + 1)
    frames = int(length.max())
    out = np.empty((lib.size, frames, lib.qpos.shape[2]), np.float32)
    for p in range(lib.size):
        src_t = np.arange(lib.length[p]) / lib.rate_hz
        dst_t = np.minimum(np.arange(frames) / rate_hz, src_t[-1])
        for j in range(lib.qpos.shape[2]):
            out[p, :, j] = np.interp(dst_t, src_t, lib.qpos[p, : lib.length[p], j])
    impact = np.clip(np.round(lib.impact * rate_hz / lib.rate_hz).astype(np.int32), 1, length - 1)
    return dataclasses.replace(lib, qpos=out, length=length, impact=impact, rate_hz=float(rate_hz))


IDLE_RANGE_RAD = 1e-6
"""A library joint whose angle varies by at most this over every frame of every punch is idle."""


def _idle_angle(lib: PunchLibrary, name: str) -> float | None:
    """The angle a library joint keeps in every frame, or None when it moves (more than `IDLE_RANGE_RAD`)."""
    values = lib.qpos[..., lib.joint_names.index(name)]
    return float(values.flat[0]) if float(values.max() - values.min()) <= IDLE_RANGE_RAD else None


def idle_hinges(lib: PunchLibrary, body: str) -> dict[str, float]:
    """The hinges of `body` (unprefixed names) that the opponent holds still through every punch of `lib`,
    each with the angle he holds (rad): library joints that never move, at their angle clipped to the
    joint's range (as his PD target is), and every hinge outside the library at its `stance` target."""
    model = boxer.boxer_spec(body).compile()
    stance = poses.keyframe(body, "stance")
    out = {}
    for a in range(model.nu):
        name = model.actuator(a).name
        if name not in lib.joint_names:
            out[name] = float(stance.ctrl[a])
        elif (angle := _idle_angle(lib, name)) is not None:
            out[name] = float(np.clip(angle, *model.actuator_ctrlrange[a]))
    return out


def _labels(lib: PunchLibrary) -> dict[str, jax.Array]:
    """The table fields every opponent shares: lengths, impact frames, hands, targets."""
    return dict(
        length=jnp.asarray(lib.length, jnp.int32),
        impact=jnp.asarray(lib.impact, jnp.int32),
        hand=jnp.asarray([HANDS.index(h) for h in lib.hand], jnp.int32),
        target=jnp.asarray([TARGETS.index(t) for t in lib.target], jnp.int32),
    )


def ctrl_table(
    lib: PunchLibrary, model: mujoco.MjModel, fighter: FighterIndex, frozen: Mapping[str, float] | None = None
) -> PunchTable:
    """The library as the simulated opponent's PD targets: his `stance` targets with the library's joints
    set, clipped to their actuators' control ranges.

    Args:
      lib: the library, already at the control rate (`resample`).
      model: the two-fighter arena (`boxjax.mjcf.sparring.build`).
      fighter: the opponent's index in it.
      frozen: his hinges fixed in his body and their angles (`idle_hinges`), left out of the table.

    Raises:
      ValueError: a library joint the opponent's body does not actuate, or one frozen in his body that the
        library moves.
    """
    frozen = frozen or {}
    names = [model.actuator(a).name.removeprefix(fighter.prefix) for a in fighter.actuator_ids]
    missing = [n for n in lib.joint_names if n not in names and n not in frozen]
    if missing:
        raise ValueError(f"punch library joints {missing} are not actuated joints of the opponent's body")
    moved = [n for n in lib.joint_names if n in frozen and _idle_angle(lib, n) is None]
    if moved:
        raise ValueError(f"punch library moves joints {moved} that are frozen in the opponent's body")
    used = [j for j, n in enumerate(lib.joint_names) if n in names]
    cols = np.array([names.index(lib.joint_names[j]) for j in used], dtype=int)
    ctrl = np.broadcast_to(fighter.stance_ctrl, (*lib.qpos.shape[:2], len(names))).copy()
    ctrl[..., cols] = np.clip(lib.qpos[..., used], *fighter.ctrl_range[cols].T)
    return PunchTable(ctrl=jnp.asarray(ctrl, jnp.float32), **_labels(lib))


def device_table(lib: PunchLibrary, arena: PuppetArena) -> PunchTable:
    """The library as puppet poses on the device: forward kinematics of the articulated opponent.

    Every frame poses the opponent of `arena.source_model` in the guard (`arena.guard_qpos`) with the
    library's joints set (clipped to their ranges, as his PD targets were), and keeps the world poses of
    the bodies `arena.puppet` mirrors.

    Args:
      lib: the library, already at the control rate (`resample`).
      arena: the block arena (`boxjax.mjcf.puppet.build`).

    Raises:
      ValueError: a library joint the opponent's body does not have.
    """
    model, blue = arena.source_model, arena.source_index.blue
    joints = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, blue.prefix + n) for n in lib.joint_names]
    missing = [n for n, j in zip(lib.joint_names, joints, strict=True) if j < 0]
    if missing:
        raise ValueError(f"punch library joints {missing} are not joints of the {arena.index.body!r} body")
    adr, bodies = model.jnt_qposadr[joints], arena.puppet.source_body_ids
    angles = np.clip(lib.qpos, *model.jnt_range[joints].T)
    data = mujoco.MjData(model)
    pos = np.empty((*lib.qpos.shape[:2], bodies.shape[0], 3), np.float32)
    quat = np.empty((*lib.qpos.shape[:2], bodies.shape[0], 4), np.float32)
    for p in range(lib.size):
        for t in range(lib.qpos.shape[1]):
            data.qpos[:] = arena.guard_qpos
            data.qpos[adr] = angles[p, t]
            mujoco.mj_kinematics(model, data)
            pos[p, t], quat[p, t] = data.xpos[bodies], data.xquat[bodies]
    return PunchTable(body_pos=jnp.asarray(pos), body_quat=jnp.asarray(quat), **_labels(lib))
