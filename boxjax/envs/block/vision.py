"""Vision: 32 rays from our fighter's eyes to points of the opponent, hidden behind our own gloves, delayed.

The 32 target points are the opponent's 17 keypoint sites (`boxjax.mjcf.indexing.KEYPOINTS`) and the 15
`EXTRA_POINTS`, fixed offsets in his bodies that add detail where blocking needs it: the face (nose,
chin, crown), both arms (wrist, mid forearm, mid upper arm, glove front) and the legs (mid thigh, mid
shin). A point is hidden when the segment from our eyes to it passes through one of OUR gloves; the
test is analytic (segment against sphere or capsule, in JAX on the geom poses MuJoCo already computed),
so it costs the same on both physics implementations and needs no ray kernel.

One frame of vision is (32, 4): each point in the eyes' frame (m) and a visibility flag; a hidden
point keeps its row with zeros and flag 0. The policy sees the frame from `delay_steps` control steps
ago, kept in a ring buffer in the environment state.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct

from boxjax.mjcf.indexing import FighterIndex

EXTRA_POINTS = (
    ("nose", "head", (0.125, 0.0, 0.11)),
    ("chin", "head", (0.08, 0.0, 0.02)),
    ("crown", "head", (0.01, 0.0, 0.225)),
    *((f"wrist_{s}", f"hand_{s}", (0.0, 0.0, 0.0)) for s in "lr"),
    *((f"mid_forearm_{s}", f"forearm_{s}", (0.0, 0.0, -0.13)) for s in "lr"),
    *((f"mid_upper_arm_{s}", f"upper_arm_{s}", (0.0, 0.0, -0.15)) for s in "lr"),
    *((f"glove_front_{s}", f"hand_{s}", (0.01, 0.0, -0.135)) for s in "lr"),
    *((f"mid_thigh_{s}", f"thigh_{s}", (0.0, 0.0, -0.2)) for s in "lr"),
    *((f"mid_shin_{s}", f"shin_{s}", (0.0, 0.0, -0.2)) for s in "lr"),
)
"""(name, unprefixed body, offset in the body frame (m)) of the 15 points added to the 17 keypoints."""
NUM_POINTS = 32
FRAME_SIZE = 4 * NUM_POINTS
"""Floats in one flattened vision frame."""

_SPHERE = int(mujoco.mjtGeom.mjGEOM_SPHERE)
_CAPSULE = int(mujoco.mjtGeom.mjGEOM_CAPSULE)


@dataclasses.dataclass(frozen=True, eq=False)
class CapsuleIndex:
    """Sphere and capsule geoms (gloves, forearms, head, chest), each a capsule (a sphere has length 0)."""

    geom_ids: np.ndarray
    """(G,) int32 geom ids."""
    half_length_m: np.ndarray
    """(G,) float32 capsule half-length along the geom's z axis (0 for spheres)."""
    radius_m: np.ndarray
    """(G,) float32 radius."""


@struct.dataclass
class Capsules:
    """Capsules posed in the world: segments with a radius."""

    start: jax.Array
    """(G, 3) one end of each axis segment."""
    end: jax.Array
    """(G, 3) the other end."""
    radius: jax.Array
    """(G,) radius (m)."""


@dataclasses.dataclass(frozen=True, eq=False)
class VisionIndex:
    """What our vision reads from the model, resolved once."""

    eyes_site: int
    """Our `eyes` site; its frame is the frame the points are reported in."""
    site_ids: np.ndarray
    """(17,) int32 the opponent's keypoint sites."""
    body_ids: np.ndarray
    """(15,) int32 the opponent's bodies carrying `EXTRA_POINTS`."""
    body_offsets_m: np.ndarray
    """(15, 3) float32 offsets of the extra points in those bodies."""
    gloves: CapsuleIndex
    """Our gloves: the only geoms that hide a point."""


def capsule_index(model: mujoco.MjModel, geom_ids: np.ndarray) -> CapsuleIndex:
    """Sizes of sphere and capsule geoms; raises `ValueError` for a geom of any other type."""
    geom_ids = np.asarray(geom_ids, np.int32)
    types = model.geom_type[geom_ids]
    bad = [model.geom(g).name for g, t in zip(geom_ids, types, strict=True) if t not in (_SPHERE, _CAPSULE)]
    if bad:
        raise ValueError(f"blocker geoms must be spheres or capsules: {bad}")
    size = model.geom_size[geom_ids]
    return CapsuleIndex(
        geom_ids=geom_ids,
        half_length_m=np.where(types == _CAPSULE, size[:, 1], 0.0).astype(np.float32),
        radius_m=size[:, 0].astype(np.float32),
    )


def vision_index(model: mujoco.MjModel, me: FighterIndex, opponent: FighterIndex) -> VisionIndex:
    """Resolve our eyes, the opponent's 32 points and our gloves in an arena model."""
    bodies = [model.body(opponent.prefix + body).id for _, body, _ in EXTRA_POINTS]
    return VisionIndex(
        eyes_site=int(me.eyes_site),
        site_ids=np.asarray(opponent.keypoint_site_ids, np.int32),
        body_ids=np.asarray(bodies, np.int32),
        body_offsets_m=np.asarray([off for _, _, off in EXTRA_POINTS], np.float32),
        gloves=capsule_index(model, me.glove_geom_ids),
    )


def pose_capsules(geom_xpos: jax.Array, geom_xmat: jax.Array, geoms: CapsuleIndex) -> Capsules:
    """World capsules of `geoms` from the geom poses (ngeom, 3) and (ngeom, 3, 3) or (ngeom, 9)."""
    ids = jnp.asarray(geoms.geom_ids)
    centre = geom_xpos[ids]
    axis = geom_xmat[ids].reshape(-1, 3, 3)[:, :, 2]
    half = jnp.asarray(geoms.half_length_m)[:, None] * axis
    return Capsules(start=centre - half, end=centre + half, radius=jnp.asarray(geoms.radius_m))


def segment_distance(p0: jax.Array, p1: jax.Array, q0: jax.Array, q1: jax.Array) -> jax.Array:
    """() closest distance between segments [p0, p1] and [q0, q1] (each (3,)); either may be a point.

    Closest points of two segments (Ericson, Real-Time Collision Detection 5.1.9), branch-free.
    """
    eps = 1e-12
    d1, d2, r = p1 - p0, q1 - q0, p0 - q0
    a, e = jnp.dot(d1, d1), jnp.dot(d2, d2)
    b, c, f = jnp.dot(d1, d2), jnp.dot(d1, r), jnp.dot(d2, r)
    safe_a, safe_e = jnp.maximum(a, eps), jnp.maximum(e, eps)
    denom = a * e - b * b
    s = jnp.where(denom > eps, jnp.clip((b * f - c * e) / jnp.maximum(denom, eps), 0.0, 1.0), 0.0)
    t = (b * s + f) / safe_e
    s = jnp.where(
        t < 0.0, jnp.clip(-c / safe_a, 0.0, 1.0), jnp.where(t > 1.0, jnp.clip((b - c) / safe_a, 0.0, 1.0), s)
    )
    t = jnp.clip(t, 0.0, 1.0)
    # Degenerate segments: a point against a segment (or a point).
    s = jnp.where(e <= eps, jnp.clip(-c / safe_a, 0.0, 1.0), s)
    t = jnp.where(e <= eps, 0.0, t)
    s = jnp.where(a <= eps, 0.0, s)
    t = jnp.where(a <= eps, jnp.clip(f / safe_e, 0.0, 1.0), t)
    return jnp.linalg.norm((p0 + s * d1) - (q0 + t * d2))


def segments_blocked(starts: jax.Array, ends: jax.Array, blockers: Capsules) -> jax.Array:
    """(S,) bool: whether segment i ((S, 3) starts and ends) passes through (or ends in) any blocker."""

    def one(p0, p1):
        dist = jax.vmap(segment_distance, in_axes=(None, None, 0, 0))(p0, p1, blockers.start, blockers.end)
        return jnp.any(dist <= blockers.radius)

    return jax.vmap(one)(starts, ends)


def target_points(site_xpos: jax.Array, xpos: jax.Array, xmat: jax.Array, index: VisionIndex) -> jax.Array:
    """(32, 3) the opponent's points in the world: keypoint sites, then `EXTRA_POINTS`."""
    ids = jnp.asarray(index.body_ids)
    rot = xmat[ids].reshape(-1, 3, 3)
    extra = xpos[ids] + jnp.einsum("bij,bj->bi", rot, jnp.asarray(index.body_offsets_m))
    return jnp.concatenate([site_xpos[jnp.asarray(index.site_ids)], extra], axis=0)


def see(data, index: VisionIndex) -> jax.Array:
    """(FRAME_SIZE,) one vision frame of `data` (an `mjx.Data` after kinematics): per point x, y, z in
    the eyes' frame and 1.0 if visible; hidden points are (0, 0, 0, 0)."""
    points = target_points(data.site_xpos, data.xpos, data.xmat, index)
    eyes = data.site_xpos[index.eyes_site]
    eyes_rot = data.site_xmat[index.eyes_site].reshape(3, 3)
    gloves = pose_capsules(data.geom_xpos, data.geom_xmat, index.gloves)
    hidden = segments_blocked(jnp.broadcast_to(eyes, points.shape), points, gloves)
    local = (points - eyes) @ eyes_rot
    visible = (~hidden).astype(jnp.float32)[:, None]
    return jnp.concatenate([local * visible, visible], axis=1).reshape(-1)


def delay_steps(delay_s: float, control_dt_s: float) -> int:
    """Control steps of delay closest to `delay_s` (0.1 s at 40 Hz: 4)."""
    return int(round(delay_s / control_dt_s))


def delay_init(frame: jax.Array, steps: int) -> jax.Array:
    """(max(steps, 1), F) a ring buffer full of `frame`: the first `steps` outputs repeat it."""
    return jnp.broadcast_to(frame, (max(steps, 1), frame.shape[0]))


def delay_push(buffer: jax.Array, slot: jax.Array, frame: jax.Array, steps: int):
    """Push this step's frame, pop the one from `steps` steps ago.

    Args:
      buffer: (max(steps, 1), F) ring buffer; `slot` () int32 indexes its oldest frame.
      frame: (F,) the frame seen now.
      steps: the delay in control steps (static); 0 passes `frame` straight through.

    Returns:
      (buffer, slot, delayed frame (F,)).
    """
    if steps == 0:
        return buffer, slot, frame
    delayed = buffer[slot]
    return buffer.at[slot].set(frame), (slot + 1) % steps, delayed
