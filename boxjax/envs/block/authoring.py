"""How the punch files are made (`experiments/make_punches.py` writes them): the classic library, the
procedural punches' keyframe bank and the held-out set.

There is no motion capture here. Each punch is a few keyframes solved by inverse kinematics on the
arena with both fighters in the `stance` keyframe, a distance apart: the opponent's (blue) glove in
the guard, at an optional chamber point (hooks swing out to the side, uppercuts dip), on the target
(our head, or our chest for body shots), held there briefly, and back in the guard. The IK moves the
punching arm and the spine toward a per-kind style posture in the null space of the glove task, so a
hook keeps its bent elbow and a cross turns the hips. Between keyframes the joints follow
minimum-jerk segments (at rest at every keyframe).

The classic library (`build`): six kinds (jab, cross, lead/rear hook, lead/rear uppercut; orthodox, so the
left hand leads) x two targets x three speeds = 36 punches, checked by forward kinematics on every body: a
body is listed as valid when each punch's glove lands within `LAND_TOLERANCE_M` of where it lands on the
solving body. The bank (`build_bank`): for each kind and target the impact and chamber keyframes solved on a
grid of aims (`AIM_OFFSETS_RAD` about each kind's approach) and distances (`DISTANCE_OFFSETS_M`), checked on
every body likewise. The held-out sets: `HELDOUT_SEQUENCES` sequences drawn inside the held-out windows,
orthodox with `HELDOUT_SEED`, southpaw (every punch from the mirrored stance) with `HELDOUT_SOUTHPAW_SEED`
(`boxjax.envs.block.procedural.heldout_table`).
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from boxjax import mjcf
from boxjax.envs.block import procedural, punches
from boxjax.mjcf import puppet

LAND_TOLERANCE_M = 0.03
AIM_OFFSETS_RAD = {"azimuth": (-0.3, 0.0, 0.3), "elevation": (-0.25, 0.0, 0.25)}
"""The bank's aim grid: offsets added to each kind's approach (`Style.approach`) on the target's surface."""
DISTANCE_OFFSETS_M = (-0.08, 0.0, 0.08)
"""The bank's distance grid about `--distance`."""
CHAMBER_SCALES = (1.0, 0.85, 0.7, 0.55)
"""Shares of the chamber offset a bank entry tries in turn until the IK reaches it."""
HELDOUT_SEED = 20261207
HELDOUT_SOUTHPAW_SEED = 20261208
"""The southpaw held-out set's seed, not the orthodox one's; the windows keep both apart from training."""
HELDOUT_SEQUENCES = 400
SPEEDS = {"fast": 0.14, "medium": 0.2, "slow": 0.28}
"""Seconds from guard to impact of a straight punch; hooks and uppercuts take `CURVED_SLOWER` as long."""
CURVED_SLOWER = 1.6
RETRACT_SLOWER = 1.6
"""Retraction lasts this many times the extension."""
HOLD_S = 0.03
"""Time the glove is held on the target."""
CHAMBER_AT = 0.5
"""Fraction of the extension time spent reaching the chamber point (hooks, uppercuts)."""
SPINE = ("lumbar_y", "lumbar_z", "thorax_y", "thorax_z")
ARM = ("shoulder_y", "shoulder_x", "shoulder_z", "elbow")
JOINTS = (
    "lumbar_x",
    "lumbar_y",
    "lumbar_z",
    "thorax_x",
    "thorax_y",
    "thorax_z",
    "neck_x",
    "neck_y",
    "neck_z",
    *(f"{j}_{s}" for s in "lr" for j in (*ARM, "forearm", "wrist_y", "wrist_x")),
)
"""Joints the library stores: spine, neck and both arms (names shared by every body)."""


@dataclasses.dataclass(frozen=True)
class Style:
    """How one kind of punch moves: its hand, the posture the IK leans toward, and its chamber."""

    hand: str
    arm: tuple[float, float, float, float]
    """Posture of the punching arm's shoulder_y, shoulder_x, shoulder_z, elbow (rad)."""
    spine: tuple[float, float, float, float]
    """Posture of lumbar_y, lumbar_z, thorax_y, thorax_z (rad); +z turns the chest to the left."""
    chamber: tuple[float, float, float] | None
    """Chamber point relative to the impact point (back, outward, up) in the puncher's frame (m)."""
    approach: tuple[float, float] = (0.0, 0.0)
    """Where the glove lands on the target: azimuth toward the punching hand's side, elevation (rad)."""


STYLES = {
    "jab": Style("l", (1.45, 0.15, 0.3, 0.15), (0.1, -0.15, 0.05, -0.15), None),
    "cross": Style("r", (1.45, 0.15, 0.3, 0.15), (0.15, 0.35, 0.1, 0.35), None),
    "lead_hook": Style("l", (1.5, 0.5, 0.8, 1.0), (0.1, -0.25, 0.05, -0.3), (0.1, 0.25, 0.0), (0.8, 0.0)),
    "rear_hook": Style("r", (1.5, 0.5, 0.8, 1.0), (0.1, 0.35, 0.05, 0.4), (0.1, 0.25, 0.0), (0.8, 0.0)),
    "lead_uppercut": Style(
        "l", (0.9, 0.2, 0.3, 1.9), (0.2, -0.15, 0.1, -0.15), (0.1, 0.0, -0.2), (0.0, -0.5)
    ),
    "rear_uppercut": Style("r", (0.9, 0.2, 0.3, 1.9), (0.2, 0.3, 0.1, 0.3), (0.1, 0.0, -0.2), (0.0, -0.5)),
}


def min_jerk(q0: np.ndarray, q1: np.ndarray, n: int) -> np.ndarray:
    """(n, J) minimum-jerk path from q0 to q1 (at rest at both ends), n samples, excluding q0."""
    tau = np.arange(1, n + 1) / n
    s = 10 * tau**3 - 15 * tau**4 + 6 * tau**5
    return q0 + s[:, None] * (q1 - q0)


class Arena:
    """The two-fighter arena in the guard at a given distance, with helpers for blue's joints."""

    def __init__(self, body: str, distance_m: float):
        self.body = body
        self.model, index = mjcf.build(body, opponent=True)
        self.red, self.blue = index.red, index.blue
        self.data = mujoco.MjData(self.model)
        key = index.keyframes["stance"]
        self.guard = puppet.place_opponent(self.model.key_qpos[key], self.blue, distance_m)
        self.forward(self.guard)

    def qadr(self, name: str) -> int:
        """qpos address of one of blue's hinges."""
        return int(self.model.jnt_qposadr[self.model.joint("blue/" + name).id])

    def dadr(self, name: str) -> int:
        """dof address of one of blue's hinges."""
        return int(self.model.jnt_dofadr[self.model.joint("blue/" + name).id])

    def forward(self, qpos: np.ndarray) -> None:
        """Kinematics of `qpos` into `self.data`."""
        self.data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)

    def glove(self, hand: str) -> np.ndarray:
        """Blue's glove centre (after `forward`)."""
        return self.data.geom_xpos[self.blue.glove_geom_ids["lr".index(hand)]].copy()

    def target(self, target: str, hand: str, approach: tuple[float, float]) -> np.ndarray:
        """Where a punch aims on red: the head's or chest's surface, facing blue turned by `approach`."""
        gid = self.red.head_geom_id if target == "head" else self.model.geom("red/chest").id
        centre = self.data.geom_xpos[gid].copy()
        to_blue = self.data.xpos[self.blue.torso_body] - centre
        to_blue[2] = 0.0
        to_blue /= np.linalg.norm(to_blue)
        forward, left, _ = self.frame().T
        side = left if hand == "l" else -left
        azimuth, elevation = approach
        level = np.cos(azimuth) * to_blue + np.sin(azimuth) * side
        normal = np.cos(elevation) * level + np.array([0.0, 0.0, np.sin(elevation)])
        return centre + self.model.geom_size[gid, 0] * normal

    def frame(self) -> np.ndarray:
        """(3, 3) blue's pelvis frame: columns forward, left, up."""
        return self.data.xmat[self.blue.pelvis_body].reshape(3, 3)

    def to_joints(self, qpos: np.ndarray) -> np.ndarray:
        """(J,) the library joints of blue out of an arena qpos."""
        return qpos[[self.qadr(n) for n in JOINTS]]


def solve_ik(arena: Arena, start: np.ndarray, hand: str, goal: np.ndarray, posture: dict[str, float]):
    """Blue's arena qpos with its `hand` glove at `goal`, leaning toward `posture` in the null space.

    Damped least squares on the glove position; the posture pull acts in the Jacobian's null space
    during the first half of the iterations, the second half only closes the remaining gap.
    """
    names = [f"{j}_{hand}" for j in ARM] + list(SPINE)
    qadr = np.array([arena.qadr(n) for n in names])
    dadr = np.array([arena.dadr(n) for n in names])
    ranges = arena.model.jnt_range[[arena.model.joint("blue/" + n).id for n in names]]
    prior = np.array([posture[n] for n in names])
    gid = arena.blue.glove_geom_ids["lr".index(hand)]
    qpos = start.copy()
    qpos[qadr] = prior
    jacp = np.zeros((3, arena.model.nv))
    for it in range(200):
        arena.forward(qpos)
        err = goal - arena.data.geom_xpos[gid]
        mujoco.mj_jacGeom(arena.model, arena.data, jacp, None, gid)
        jac = jacp[:, dadr]
        pinv = jac.T @ np.linalg.inv(jac @ jac.T + 1e-4 * np.eye(3))
        step = pinv @ err + (np.eye(len(names)) - pinv @ jac) @ (
            (0.2 if it < 100 else 0.0) * (prior - qpos[qadr])
        )
        qpos[qadr] = np.clip(qpos[qadr] + step, ranges[:, 0], ranges[:, 1])
    arena.forward(qpos)
    miss = np.linalg.norm(goal - arena.data.geom_xpos[gid])
    if miss > 0.01:
        raise RuntimeError(f"IK missed the goal by {miss:.3f} m ({hand} glove, posture {posture})")
    return qpos


def posture_of(kind: str) -> dict[str, float]:
    """The posture the IK leans toward for `kind`: its punching arm's and the spine's style angles."""
    style = STYLES[kind]
    posture = dict(zip([f"{j}_{style.hand}" for j in ARM], style.arm, strict=True))
    posture.update(zip(SPINE, style.spine, strict=True))
    return posture


def keyframes(arena: Arena, kind: str, target: str, extend_s: float) -> list[tuple[float, np.ndarray]]:
    """[(time s, arena qpos)] of one punch: guard, [chamber], impact, hold, guard."""
    style = STYLES[kind]
    hand = style.hand
    posture = posture_of(kind)
    arena.forward(arena.guard)
    goal, frame = arena.target(target, hand, style.approach), arena.frame()
    impact = solve_ik(arena, arena.guard, hand, goal, posture)
    out = [(0.0, arena.guard)]
    if style.chamber is not None:
        back, outward, up = style.chamber
        side = frame[:, 1] if hand == "l" else -frame[:, 1]
        point = goal - back * frame[:, 0] + outward * side + up * frame[:, 2]
        out.append((CHAMBER_AT * extend_s, solve_ik(arena, arena.guard, hand, point, posture)))
    out += [(extend_s, impact), (extend_s + HOLD_S, impact)]
    out.append((extend_s + HOLD_S + RETRACT_SLOWER * extend_s, arena.guard))
    return out


def trajectory(arena: Arena, frames: list[tuple[float, np.ndarray]], rate_hz: float):
    """((T, J) joint angles, impact frame) by minimum-jerk segments between keyframes."""
    joints = [arena.to_joints(frames[0][1])]
    ticks = [0]
    for (t0, q0), (t1, q1) in zip(frames[:-1], frames[1:], strict=True):
        n = max(1, int(round((t1 - t0) * rate_hz)))
        joints.append(min_jerk(arena.to_joints(q0), arena.to_joints(q1), n))
        ticks.append(ticks[-1] + n)
    impact_key = len(frames) - 3  # the impact keyframe comes before the hold and the guard
    return np.concatenate([np.atleast_2d(j) for j in joints]), ticks[impact_key]


def glove_path(arena: Arena, joints: np.ndarray, hand: str) -> np.ndarray:
    """(T, 3) blue's glove centre along a trajectory."""
    path = []
    for q in joints:
        qpos = arena.guard.copy()
        qpos[[arena.qadr(n) for n in JOINTS]] = q
        arena.forward(qpos)
        path.append(arena.glove(hand))
    return np.array(path)


def build(body: str, distance_m: float, rate_hz: float) -> punches.PunchLibrary:
    """Solve every punch on `body` and validate it on every body."""
    arena = Arena(body, distance_m)
    rows = []
    for kind in STYLES:
        for target in punches.TARGETS:
            for speed, straight_s in SPEEDS.items():
                extend = straight_s * (1.0 if STYLES[kind].chamber is None else CURVED_SLOWER)
                joints, impact = trajectory(arena, keyframes(arena, kind, target, extend), rate_hz)
                path = glove_path(arena, joints, STYLES[kind].hand)
                peak = np.linalg.norm(np.diff(path, axis=0), axis=1).max() * rate_hz
                rows.append((f"{kind}-{target}-{speed}", kind, target, speed, joints, impact, peak))
    frames = max(len(r[4]) for r in rows)
    qpos = np.stack([np.concatenate([r[4], np.repeat(r[4][-1:], frames - len(r[4]), 0)]) for r in rows])
    lib = punches.PunchLibrary(
        qpos=qpos.astype(np.float32),
        length=np.array([len(r[4]) for r in rows], np.int32),
        impact=np.array([r[5] for r in rows], np.int32),
        rate_hz=rate_hz,
        joint_names=JOINTS,
        names=tuple(r[0] for r in rows),
        kind=tuple(r[1] for r in rows),
        hand=tuple(STYLES[r[1]].hand for r in rows),
        target=tuple(r[2] for r in rows),
        speed=tuple(r[3] for r in rows),
        peak_speed_mps=np.array([r[6] for r in rows], np.float32),
        body=body,
        bodies=(body,),
        distance_m=distance_m,
    )
    landing = impact_points(arena, lib)
    valid = [b for b in mjcf.BODIES if b == body or _lands(Arena(b, distance_m), lib, landing)]
    return dataclasses.replace(lib, bodies=tuple(valid))


def impact_points(arena: Arena, lib: punches.PunchLibrary) -> np.ndarray:
    """(P, 3) where each punch's glove is at its impact frame on `arena`'s body."""
    return np.array(
        [glove_path(arena, lib.qpos[p, [lib.impact[p]]], lib.hand[p])[0] for p in range(lib.size)]
    )


def _lands(arena: Arena, lib: punches.PunchLibrary, landing: np.ndarray) -> bool:
    err = np.linalg.norm(impact_points(arena, lib) - landing, axis=1).max()
    print(f"  {arena.body}: worst landing error {err:.3f} m")
    return bool(err < LAND_TOLERANCE_M)


def bank_keys(
    arena: Arena, kind: str, target: str, aim: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """((J,) impact, (J,) chamber) library joints of one bank entry: `kind` at `target` with its approach
    turned by `aim` (azimuth, elevation rad); a straight punch's chamber is its impact."""
    style = STYLES[kind]
    arena.forward(arena.guard)
    approach = (style.approach[0] + aim[0], style.approach[1] + aim[1])
    goal, frame = arena.target(target, style.hand, approach), arena.frame()
    impact = solve_ik(arena, arena.guard, style.hand, goal, posture_of(kind))
    if style.chamber is None:
        return arena.to_joints(impact), arena.to_joints(impact)
    back, outward, up = style.chamber
    side = frame[:, 1] if style.hand == "l" else -frame[:, 1]
    offset = -back * frame[:, 0] + outward * side + up * frame[:, 2]
    for scale in CHAMBER_SCALES:  # a far aim can put the full chamber point out of reach: swing less
        try:
            chamber = solve_ik(arena, arena.guard, style.hand, goal + scale * offset, posture_of(kind))
            return arena.to_joints(impact), arena.to_joints(chamber)
        except RuntimeError:
            continue
    raise RuntimeError(f"no reachable chamber for {kind} at {target}, aim {aim}")


def build_bank(body: str, distance_m: float) -> procedural.HostBank:
    """Solve every bank entry on `body` and check its landings on every body."""
    grid = (len(DISTANCE_OFFSETS_M), len(AIM_OFFSETS_RAD["azimuth"]), len(AIM_OFFSETS_RAD["elevation"]))
    shape = (len(STYLES), len(punches.TARGETS), *grid, len(JOINTS))
    impact, chamber = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    for d, offset in enumerate(DISTANCE_OFFSETS_M):
        arena = Arena(body, distance_m + offset)
        for k, kind in enumerate(STYLES):
            for g, target in enumerate(punches.TARGETS):
                for a, az in enumerate(AIM_OFFSETS_RAD["azimuth"]):
                    for e, el in enumerate(AIM_OFFSETS_RAD["elevation"]):
                        impact[k, g, d, a, e], chamber[k, g, d, a, e] = bank_keys(
                            arena, kind, target, (az, el)
                        )
    arena = Arena(body, distance_m)
    arrays = dict(
        guard=arena.to_joints(arena.guard).astype(np.float32),
        impact=impact,
        chamber=chamber,
        hand=np.array(["lr".index(STYLES[k].hand) for k in STYLES], np.int32),
        chambered=np.array([STYLES[k].chamber is not None for k in STYLES], np.float32),
        distance_m=(distance_m + np.array(DISTANCE_OFFSETS_M)).astype(np.float32),
    )
    bank = procedural.HostBank(arrays, JOINTS, tuple(STYLES), punches.TARGETS, body, (body,), distance_m)
    landing = bank_landings(arena, bank)
    valid = [b for b in mjcf.BODIES if b == body or _bank_lands(Arena(b, distance_m), bank, landing)]
    return dataclasses.replace(bank, bodies=tuple(valid))


def bank_landings(arena: Arena, bank: procedural.HostBank) -> np.ndarray:
    """(N, 3) where the glove of every bank entry at the centre distance is at impact on `arena`'s body."""
    impact = bank.arrays["impact"][:, :, len(DISTANCE_OFFSETS_M) // 2]
    hands = np.broadcast_to(bank.arrays["hand"][:, None, None, None], impact.shape[:-1]).reshape(-1)
    joints = impact.reshape(-1, impact.shape[-1])
    return np.array([glove_path(arena, q[None], "lr"[h])[0] for q, h in zip(joints, hands, strict=True)])


def _bank_lands(arena: Arena, bank: procedural.HostBank, landing: np.ndarray) -> bool:
    err = np.linalg.norm(bank_landings(arena, bank) - landing, axis=1).max()
    print(f"  {arena.body}: worst landing error {err:.3f} m")
    return bool(err < LAND_TOLERANCE_M)
