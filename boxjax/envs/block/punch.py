"""The opponent's punches in the block task: his punch clock, where his recorded scene stands, and how a
punch that arrives is judged (blocked by the guard, missed, or a hit, clean or partly through) from its
glove's path: the closest approach to its target since it was thrown, and whether it touched our guard on
the way. Pure functions of one world; `boxjax.envs.block.env` composes them."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from boxjax.envs import frames
from boxjax.envs.block import punches, scoring, vision

NO_GAP_M = 1e3
"""The closest approach of a punch not yet thrown (and of every punch with the score ablated)."""


class CurrentPunch(NamedTuple):
    """What judging one world's current punch needs, from a table row or a procedural punch."""

    length: jax.Array
    """() int32 control steps of the punch."""
    impact: jax.Array
    """() int32 control step at which the glove is commanded onto the target."""
    hand: jax.Array
    """() int32 0 left glove, 1 right."""
    target: jax.Array
    """() int32 index into `punches.TARGETS`."""
    feint: jax.Array | None = None
    """() float32 1 for a feint, which is thrown but never arrives; None: no feints."""


def table_punch(table: punches.PunchTable, punch) -> CurrentPunch:
    """Row `punch` of a punch table."""
    return CurrentPunch(table.length[punch], table.impact[punch], table.hand[punch], table.target[punch])


def advance_punch(table: punches.PunchTable, punch, frame, key, gap_steps: tuple[int, int]):
    """The opponent's punch clock one control step on: (punch, frame).

    A finished punch is followed by a new one sampled uniformly from the table, after a gap drawn
    uniformly from `gap_steps` (inclusive) during which `frame` counts up from minus the gap.
    """
    k_punch, k_gap = jax.random.split(key)
    frame = frame + 1
    over = frame >= table.length[punch]
    new_punch = jax.random.randint(k_punch, (), 0, table.length.shape[0])
    gap = jax.random.randint(k_gap, (), gap_steps[0], gap_steps[1] + 1)
    return jnp.where(over, new_punch, punch), jnp.where(over, -gap, frame)


def follow_anchor(anchor: jax.Array, target: jax.Array, max_step_m: float, max_turn_rad: float) -> jax.Array:
    """The opponent's anchor (3,) (x m, y m, turn rad) moved toward `target` (3,): at most `max_step_m`
    on the floor and `max_turn_rad` about z (the shorter way round)."""
    gap = target[:2] - anchor[:2]
    dist = jnp.linalg.norm(gap)
    move = gap * jnp.minimum(1.0, max_step_m / jnp.maximum(dist, 1e-9))
    dyaw = target[2] - anchor[2]
    turn = jnp.clip(jnp.arctan2(jnp.sin(dyaw), jnp.cos(dyaw)), -max_turn_rad, max_turn_rad)
    return jnp.concatenate([anchor[:2] + move, anchor[2:] + turn])


def place_scene(
    pos: jax.Array, quat: jax.Array, ref_xy: jax.Array, anchor: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Recorded body positions (B, 3) and orientations (B, 4) moved with the scene: turned by anchor[2]
    about the vertical through `ref_xy` (2,), then `ref_xy` moved to anchor[:2]. Heights are kept."""
    xy = frames.turn_xy(pos[:, :2] - ref_xy, anchor[2]) + anchor[:2]
    return jnp.concatenate([xy, pos[:, 2:]], axis=-1), frames.turn_quat(quat, anchor[2])


def guard_contact(
    gloves: vision.Capsules, blockers: vision.Capsules, hand: jax.Array, previous: jax.Array, margin_m: float
) -> tuple[jax.Array, jax.Array]:
    """Whether the opponent's `hand` glove (of `gloves`), swept from `previous` (3,) to where it is now,
    came within the two radii plus `margin_m` of one of our `blockers`: (() float32 1.0 if so, (3,) its
    centre now)."""
    glove = 0.5 * (gloves.start[hand] + gloves.end[hand])
    dist = jax.vmap(vision.segment_distance, in_axes=(None, None, 0, 0))(
        previous, glove, blockers.start, blockers.end
    )
    touched = jnp.any(dist <= blockers.radius + gloves.radius[hand] + margin_m)
    return touched.astype(jnp.float32), glove


def judge_punch(
    gloves: vision.Capsules,
    goals: vision.Capsules,
    blockers: vision.Capsules,
    hand: jax.Array,
    target: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """The opponent's `hand` glove (of `gloves`) against our `target` (of `goals`), past our `blockers`:
    (() the 19-path score, () metres from the glove's surface to the target's)."""
    glove, glove_r = gloves.start[hand], gloves.radius[hand]
    goal, goal_r = goals.start[target], goals.radius[target]
    clear = scoring.punch_score(glove, goal, goal_r, blockers)
    return clear, jnp.linalg.norm(goal - glove) - glove_r - goal_r


def closest_approach(frame, gap, score, best_gap, best_score) -> tuple[jax.Array, jax.Array]:
    """The punch's closest approach (gap m, score there) with this step's `gap` and `score`: restarted
    while he waits or throws (frame <= 0), tracked from frame 1 on."""
    started = frame > 0
    closer = started & (gap < best_gap)
    best_gap = jnp.where(started, jnp.minimum(best_gap, gap), NO_GAP_M)
    return best_gap, jnp.where(closer, score, jnp.where(started, best_score, 0.0))


def punch_events(
    current: CurrentPunch,
    frame,
    score,
    reached,
    touched,
    lag_steps: int,
    block_max_score: float,
    clean_hit_score: float,
    touch_blocks: bool,
) -> dict[str, jax.Array]:
    """() float32 flags of this step for the `current` punch at `frame`: thrown, arrived (`lag_steps` after
    the impact frame; a feint never arrives), and of an arrival exactly one of blocked, missed or hit (clean
    at `clean_hit_score` or more); of the blocks those whose glove `touched` our guard on its way (parried);
    the score of a hit.

    `score` is the 19-path score at the punch's closest approach, `reached` whether that came within
    reach. A reached punch scoring above `block_max_score` is a hit; any other punch that touched the
    guard or reached is blocked, the rest missed. With `touch_blocks` (the puppet, whose glove passes
    through a guard) a touch blocks the punch whatever its score.
    """
    arrival = jnp.minimum(current.impact + lag_steps, current.length - 1)
    arrived = (frame == arrival).astype(jnp.float32)
    if current.feint is not None:
        arrived = arrived * (1.0 - current.feint)
    through = reached * (score > block_max_score)
    if touch_blocks:
        through = through * (1.0 - touched)
    hit = arrived * through
    blocked = arrived * (1.0 - through) * jnp.maximum(touched, reached)
    return {
        "punch/thrown": (frame == 0).astype(jnp.float32),
        "punch/arrived": arrived,
        "punch/blocked": blocked,
        "punch/parried": blocked * touched,
        "punch/missed": arrived - blocked - hit,
        "punch/hit": hit,
        "punch/clean": hit * (score >= clean_hit_score),
        "punch/hit_score": hit * score,
    }
