"""The block task's opponent as a learner (`BlockConfig.opponent_policy` "learned"): what he sees, how his
action steers his punches and what he is rewarded for. Pure functions of one world; `env.BlockEnv` composes
them into its step.

His action is one offset per actuator (his position targets), in [-1, 1], scaled by `opponent_offset_rad`
and added to the PD targets of the scripted punch at that frame (library table or procedural punch): at
zero offsets he throws exactly the scripted punch. Outside face episodes he is parked and his action is
ignored.

He sees our fighter as exact keypoints (`SEEN_KEYPOINTS`, in his pelvis frame), delayed by the same
`vision_delay_s` as our fighter's vision, rather than through rays: exact points are a gather where a
second set of 32 rays per world would double the rays' cost, and all they leave out is our guard hiding
parts of our body from him (what gets past the guard is the 19-path score's to judge); the equal delay
keeps the two fighters' reactions symmetric.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from boxjax.envs.block import punches
from boxjax.envs.block.punch import CurrentPunch
from boxjax.mjcf.indexing import FighterIndex

SEEN_KEYPOINTS = (
    "kp_head", "kp_chest", "kp_pelvis", "kp_shoulder_l", "kp_shoulder_r",
    "kp_elbow_l", "kp_elbow_r", "kp_glove_l", "kp_glove_r",
)  # fmt: skip
"""Our fighter's keypoint sites the learned opponent sees (`boxjax.mjcf.indexing.KEYPOINTS` names)."""
VIEW_SIZE = 3 * len(SEEN_KEYPOINTS)
"""Floats in one frame of his view: each seen keypoint's position (m) in his pelvis frame."""
PHASE_SIZE = 5 + len(punches.TARGETS) + len(punches.HANDS)
"""Floats of the punch phase (`punch_phase`)."""
METRICS = ("opponent/reward", "opponent/effort")
"""His per-step figures (learned opponent only): his reward, and his `effort` before its weight."""


@dataclasses.dataclass(frozen=True, eq=False)
class OpponentIndex:
    """What the learned opponent's observation and action read from the model, resolved once."""

    site_ids: np.ndarray
    """(K,) int32 our fighter's `SEEN_KEYPOINTS` sites."""
    pelvis_body: int
    """His pelvis: the frame he sees our fighter in."""
    qpos_adr: np.ndarray
    """(U,) int32 qpos address of each of his actuated hinges."""
    dof_adr: np.ndarray
    """(U,) int32 their dof addresses."""
    ctrl_range: np.ndarray
    """(U, 2) float32 his actuators' target ranges (rad)."""
    guard_ctrl: np.ndarray
    """(U,) float32 his PD targets in the guard."""


def opponent_index(me: FighterIndex, him: FighterIndex) -> OpponentIndex:
    """The learned opponent's ids: our keypoints he sees, his pelvis, hinges and actuators."""
    sites = [me.keypoint_site_ids[me.keypoint_names.index(name)] for name in SEEN_KEYPOINTS]
    return OpponentIndex(
        site_ids=np.asarray(sites, np.int32),
        pelvis_body=int(him.pelvis_body),
        qpos_adr=np.asarray(him.act_qpos_adr, np.int32),
        dof_adr=np.asarray(him.act_dof_adr, np.int32),
        ctrl_range=np.asarray(him.ctrl_range, np.float32),
        guard_ctrl=np.asarray(him.stance_ctrl, np.float32),
    )


def observation_size(index: OpponentIndex) -> int:
    """Floats in his observation (`observe`): joints, velocities and scripted targets, view, phase."""
    return 3 * int(index.qpos_adr.shape[0]) + VIEW_SIZE + PHASE_SIZE


def view(site_xpos, xpos, xmat, index: OpponentIndex) -> jax.Array:
    """(VIEW_SIZE,) float32 our fighter's seen keypoints in his pelvis frame (m), from posed sites
    `site_xpos` (nsite, 3) and bodies `xpos` (nbody, 3), `xmat` (nbody, 3, 3) or (nbody, 9)."""
    origin = jnp.asarray(xpos[index.pelvis_body], jnp.float32)
    rot = jnp.asarray(xmat[index.pelvis_body], jnp.float32).reshape(3, 3)
    points = jnp.asarray(site_xpos[index.site_ids], jnp.float32)
    return ((points - origin) @ rot).reshape(-1)


def steered_targets(scripted: jax.Array, action: jax.Array, offset_rad: float, index: OpponentIndex):
    """(U,) his PD targets: the `scripted` ones (U,) plus `offset_rad` times his `action` (U,) clipped to
    [-1, 1], clipped to his actuators' ranges."""
    lo, hi = jnp.asarray(index.ctrl_range[:, 0]), jnp.asarray(index.ctrl_range[:, 1])
    return jnp.clip(scripted + offset_rad * jnp.clip(action, -1.0, 1.0), lo, hi)


def punch_phase(current: CurrentPunch, frame: jax.Array, face: jax.Array, control_dt_s: float) -> jax.Array:
    """(PHASE_SIZE,) float32 where his punch stands: face episode, waiting in the guard, progress through
    the punch (frame / length), seconds until he throws, seconds from now to the impact frame, the
    target's one-hot (`punches.TARGETS`) and the hand's (`punches.HANDS`)."""
    started = jnp.maximum(frame, 0)
    scalars = jnp.stack(
        [
            jnp.asarray(face, jnp.float32),
            (frame < 0).astype(jnp.float32),
            started / jnp.maximum(current.length, 1),
            jnp.maximum(-frame, 0) * control_dt_s,
            (current.impact - started) * control_dt_s,
        ]
    )
    target = jax.nn.one_hot(current.target, len(punches.TARGETS), dtype=jnp.float32)
    hand = jax.nn.one_hot(current.hand, len(punches.HANDS), dtype=jnp.float32)
    return jnp.concatenate([scalars.astype(jnp.float32), target, hand])


def observe(qpos, qvel, scripted, seen, phase, index: OpponentIndex) -> jax.Array:
    """(observation_size,) float32 his observation: his hinge angles (rad) and velocities (x 0.1, rad/s),
    the scripted punch's targets of this frame less his guard's (rad), his delayed view of our fighter
    (`view`) and the punch phase (`punch_phase`)."""
    parts = [
        qpos[jnp.asarray(index.qpos_adr)],
        0.1 * qvel[jnp.asarray(index.dof_adr)],
        scripted - jnp.asarray(index.guard_ctrl),
        seen,
        phase,
    ]
    return jnp.concatenate([jnp.asarray(p, jnp.float32).reshape(-1) for p in parts])


def effort(action: jax.Array) -> jax.Array:
    """() float32 mean squared action (clipped to [-1, 1]): his effort cost before its weight."""
    return jnp.mean(jnp.square(jnp.clip(action, -1.0, 1.0)))


def reward(events: dict, action: jax.Array, clean_bonus: float, w_effort: float) -> jax.Array:
    """() float32 his reward of one step: the 19-path score of a punch of his that lands (a hit, credited at
    the step it is judged: `events["punch/hit_score"]`), `clean_bonus` for a clean hit (`"punch/clean"`),
    less `w_effort` times `effort`. `events` are the step's `punch/*` figures (zero outside face
    episodes)."""
    landed = events["punch/hit_score"] + clean_bonus * events["punch/clean"]
    return (landed - w_effort * effort(action)).astype(jnp.float32)
