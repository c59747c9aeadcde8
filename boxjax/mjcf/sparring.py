"""The block arena with a simulated opponent: two fighters whose contacts are real.

Our fighter (`red/`) and the opponent (`blue/`, any of the bodies) are both simulated. The opponent's hinges
are driven by his position actuators (force-limited, as ours) toward the punch library's joint angles, and
his pelvis is held to a mocap body (`ROOT_ANCHOR`) by a soft weld, so he need not balance: the anchor follows
the recorded root path (the guard's pelvis, moved with the scene toward our fighter). His geoms do not touch
the floor (`collision.clear_floor`): with his root held, feet on the floor would only drag as the anchor
moves. His bones, head and gloves touch our fighter at MuJoCo's default contact stiffness, so a glove that
meets our forearm is stopped or deflected by the physics (his shoulder and elbow torques are limited).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import mujoco
import numpy as np

from boxjax.mjcf import arena, boxer, indexing, puppet

ROOT_ANCHOR = "blue_anchor"
"""Mocap body the opponent's pelvis is welded to."""
WELD_ROWS = 6
"""Constraint rows the weld adds to every world."""


@dataclasses.dataclass(frozen=True, eq=False)
class SparringArena:
    """The two-fighter block arena and what the task reads about its opponent."""

    model: mujoco.MjModel
    index: indexing.ArenaIndex
    """Our fighter (`red`), the opponent (`blue`), the bag, the target."""
    opponent_body: str
    anchor_mocap: int
    """Row of `data.mocap_pos` / `mocap_quat` of `ROOT_ANCHOR`."""
    guard_qpos: np.ndarray
    """(nq,) the `stance` keyframe with the opponent at the punch library's distance."""
    anchor_pos: np.ndarray
    """(3,) float64 his pelvis in the guard (the anchor's pose in `guard_qpos`)."""
    anchor_quat: np.ndarray
    """(4,) float64 its orientation."""


def _add_anchor(spec: mujoco.MjSpec, pos: np.ndarray, quat: np.ndarray, timeconst_s: float) -> None:
    """The opponent's root anchor at (`pos`, `quat`) and the weld holding his pelvis to it (identity
    relative pose, solref time constant `timeconst_s`, critically damped)."""
    spec.worldbody.add_body(name=ROOT_ANCHOR, pos=pos.tolist(), quat=quat.tolist(), mocap=True)
    spec.add_equality(
        type=mujoco.mjtEq.mjEQ_WELD,
        name="blue_root_weld",
        objtype=mujoco.mjtObj.mjOBJ_BODY,
        name1=arena.BLUE + "pelvis",
        name2=ROOT_ANCHOR,
        data=[0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0],  # anchor, relative pose (pos, quat), torque scale
        solref=[timeconst_s, 1.0],
    )


def build(
    body: str,
    opponent_body: str = "simple",
    distance_m: float = arena.OPPONENT_DISTANCE,
    weld_timeconst_s: float = 0.02,
    frozen_rad: Mapping[str, float] | None = None,
) -> SparringArena:
    """The block arena with both fighters simulated, the opponent (`opponent_body`) `distance_m` away in
    the guard, his pelvis welded to the root anchor (solref time constant `weld_timeconst_s`), his hinges
    named in `frozen_rad` held at those angles (rad; `freeze.freeze_hinges`: his tree loses those dofs).

    Raises:
      ValueError: unknown body, or a time constant that is not positive.
    """
    boxer.variant(body)
    boxer.variant(opponent_body)
    if weld_timeconst_s <= 0:
        raise ValueError(f"weld_timeconst_s must be positive, got {weld_timeconst_s}")
    frozen = tuple(frozen_rad or ())

    def spec_of():
        return arena.arena_spec(
            body,
            opponent=True,
            bag=True,
            opponent_body=opponent_body,
            opponent_floor=False,
            opponent_frozen_rad=frozen_rad,
        )

    free = spec_of()
    arena.add_keyframes(free, free.compile(), body, True, opponent_body, frozen)
    free_model = free.compile()
    free_index = indexing.arena_index(free_model, body, opponent=True, bag=True)
    guard = puppet.place_opponent(
        free_model.key_qpos[free_index.keyframes["stance"]], free_index.blue, distance_m
    )
    data = mujoco.MjData(free_model)
    data.qpos[:] = guard
    mujoco.mj_kinematics(free_model, data)
    pelvis = free_index.blue.pelvis_body
    pos, quat = data.xpos[pelvis].copy(), data.xquat[pelvis].copy()
    spec = spec_of()
    _add_anchor(spec, pos, quat, weld_timeconst_s)
    arena.add_keyframes(spec, spec.compile(), body, True, opponent_body, frozen)
    model = spec.compile()
    index = indexing.arena_index(model, body, opponent=True, bag=True)
    anchor = model.body(ROOT_ANCHOR).id
    return SparringArena(
        model=model,
        index=index,
        opponent_body=opponent_body,
        anchor_mocap=int(model.body_mocapid[anchor]),
        guard_qpos=guard,
        anchor_pos=pos,
        anchor_quat=quat,
    )
