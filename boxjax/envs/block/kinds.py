"""The block task's episode kinds other than facing the opponent (command, walk, bag, shove): the kind's
draw at reset, and each kind's reward terms and success events per step. Pure functions of one world;
`boxjax.envs.block.env` composes them."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from boxjax.envs import frames
from boxjax.envs.block import vision
from boxjax.envs.block.config import BAG, COMMAND, KINDS, SHOVE, WALK, BlockConfig, BlockInfo


def sample_kind(key: jax.Array, weights: jax.Array) -> jax.Array:
    """() int32 episode kind drawn with probabilities proportional to `weights` (len(KINDS),); a zero
    weight is never drawn."""
    logits = jnp.where(weights > 0, jnp.log(jnp.maximum(weights, 1e-30)), -jnp.inf)
    return jax.random.categorical(key, logits).astype(jnp.int32)


def bag_gaps(gloves: vision.Capsules, bag: vision.Capsules) -> tuple[jax.Array, jax.Array]:
    """(gap (2,) from each glove's surface to the bag's, unit direction (2, 3) from each glove's centre
    toward the nearest point of the bag's axis)."""
    a, b = bag.start[0], bag.end[0]
    centre = 0.5 * (gloves.start + gloves.end)
    axis = b - a
    t = jnp.clip(((centre - a) @ axis) / jnp.maximum(axis @ axis, 1e-9), 0.0, 1.0)
    toward = a + t[:, None] * axis - centre
    direction = toward / jnp.maximum(jnp.linalg.norm(toward, axis=-1, keepdims=True), 1e-6)
    dist = jax.vmap(vision.segment_distance, in_axes=(0, 0, None, None))(gloves.start, gloves.end, a, b)
    return dist - gloves.radius - bag.radius[0], direction


def kind_task(
    cfg: BlockConfig,
    info: BlockInfo,
    fell: jax.Array,
    root: jax.Array,
    gloves_from_head: jax.Array,
    gloves: vision.Capsules,
    bag: vision.Capsules,
) -> tuple[dict[str, jax.Array], dict[str, jax.Array], BlockInfo]:
    """Reward terms (unweighted), events and info updates of the command, walk, bag and shove kinds, each
    masked to its own episodes: from our root (7,) (position, quaternion), our glove sites less our head's
    position (2, 3), and our gloves and the bag posed as capsules, after the physics step."""
    is_kind = [(info.kind == i).astype(jnp.float32) for i in range(len(KINDS))]
    yaw = frames.yaw(root[3:7])
    # command: gloves against their targets, in the heading frame, from the head
    offsets = frames.to_heading_frame(yaw, gloves_from_head)
    error = jnp.linalg.norm(offsets - info.command_offset, axis=-1)
    on_target = jnp.all(error <= cfg.command_tolerance_m) & (is_kind[COMMAND] > 0)
    hold = jnp.where(on_target, info.hold + 1, 0)
    held_now = is_kind[COMMAND] * (hold == cfg.steps(cfg.command_hold_s)) * (1.0 - info.held)
    # walk: progress toward the spot, arrival once
    dist = jnp.linalg.norm(info.spot - root[:2])
    speed = (info.spot_distance - dist) / cfg.control_dt_s
    goal = is_kind[WALK] * (dist <= cfg.walk_arrive_m) * (1.0 - info.reached)
    # bag: glove touches with their approach speed
    gap, toward = bag_gaps(gloves, bag)
    centre = 0.5 * (gloves.start + gloves.end)
    velocity = jnp.where(info.step > 1, (centre - info.glove_pos) / cfg.control_dt_s, 0.0)
    approach = jnp.maximum(jnp.sum(velocity * toward, -1), jnp.sum(info.glove_vel * toward, -1))
    touching = (gap <= cfg.bag_touch_m).astype(jnp.float32)
    hits = is_kind[BAG] * touching * (1.0 - info.touching) * (approach >= cfg.bag_hit_speed_mps)
    # shove: still standing recover_s after the kick
    recovered = is_kind[SHOVE] * (info.step == info.shove_step + 1 + cfg.steps(cfg.recover_s)) * (1.0 - fell)
    terms = {  # unweighted (`config.weighted_terms` weighs them)
        "command": is_kind[COMMAND] * jnp.exp(-jnp.sum(jnp.square(error)) / 0.01),
        "walk_progress": is_kind[WALK]
        * (1.0 - info.reached)
        * jnp.clip(speed / cfg.walk_speed_mps, -1.0, 1.0),
        "walk_goal": goal,
        "bag_reach": is_kind[BAG] * jnp.exp(-jnp.square(jnp.min(gap)) / 0.01),
        "bag_hit": jnp.sum(hits * jnp.minimum(approach / cfg.bag_hit_speed_mps, 2.0)),
        "recover": recovered,
    }
    events = {
        "success/goals": goal,
        "success/bag_hits": jnp.sum(hits),
        "success/recoveries": recovered,
        "success/commands_held": held_now,
        "command/ik_residual_m": is_kind[COMMAND] * info.ik_residual,
        "command/glove_error_m": is_kind[COMMAND] * jnp.max(error),
        "walk/distance_m": is_kind[WALK] * dist,
        "bag/hit_speed": jnp.sum(hits * approach),
    }
    info = info.replace(
        hold=hold, held=jnp.maximum(info.held, held_now), spot_distance=dist,
        reached=jnp.maximum(info.reached, goal), glove_pos=centre, glove_vel=velocity, touching=touching,
    )  # fmt: skip
    return terms, events, info
