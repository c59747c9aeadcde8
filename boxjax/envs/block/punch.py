"""The opponent's punches in the block task: his punch clock, where his recorded scene stands, and how a
punch that arrives is judged (parried on its way, missed, blocked by the guard, or a hit). Pure functions
of one world; `boxjax.envs.block.env` composes them."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from boxjax.envs import frames
from boxjax.envs.block import punches, scoring, vision


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
    gloves: vision.Capsules, blockers: vision.Capsules, hand: jax.Array, previous: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Whether the opponent's `hand` glove (of `gloves`), swept from `previous` (3,) to where it is now,
    touched one of our `blockers`: (() float32 1.0 if so, (3,) its centre now)."""
    glove = 0.5 * (gloves.start[hand] + gloves.end[hand])
    dist = jax.vmap(vision.segment_distance, in_axes=(None, None, 0, 0))(
        previous, glove, blockers.start, blockers.end
    )
    touched = jnp.any(dist <= blockers.radius + gloves.radius[hand])
    return touched.astype(jnp.float32), glove


def judge_punch(
    gloves: vision.Capsules,
    goals: vision.Capsules,
    blockers: vision.Capsules,
    hand: jax.Array,
    target: jax.Array,
    reach_m: float,
) -> tuple[jax.Array, jax.Array]:
    """The opponent's `hand` glove (of `gloves`) against our `target` (of `goals`), past our `blockers`:
    (() score, 0 when out of reach; () float32 1.0 when the glove is within `reach_m` of the target's
    surface)."""
    glove, glove_r = gloves.start[hand], gloves.radius[hand]
    goal, goal_r = goals.start[target], goals.radius[target]
    clear = scoring.punch_score(glove, goal, goal_r, blockers)
    reached = (jnp.linalg.norm(goal - glove) - glove_r - goal_r <= reach_m).astype(jnp.float32)
    return clear * reached, reached


def punch_events(
    table: punches.PunchTable, punch, frame, score, reached, parried, lag_steps: int, block_max_score: float
) -> dict[str, jax.Array]:
    """() float32 flags of this step: thrown, arrived (`lag_steps` after the impact frame), and of an
    arrival one of blocked (parried on its way, or scored up to `block_max_score`), missed (out of reach)
    or hit; of the blocks those parried; the score of a hit."""
    arrival = jnp.minimum(table.impact[punch] + lag_steps, table.length[punch] - 1)
    arrived = (frame == arrival).astype(jnp.float32)
    stopped = arrived * parried
    landed = (arrived - stopped) * reached
    hit = landed * (score > block_max_score)
    return {
        "punch/thrown": (frame == 0).astype(jnp.float32),
        "punch/arrived": arrived,
        "punch/blocked": stopped + landed - hit,
        "punch/parried": stopped,
        "punch/missed": arrived - stopped - landed,
        "punch/hit": hit,
        "punch/hit_score": hit * score,
    }
