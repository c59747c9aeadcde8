"""The punch score: how much of an arriving punch got through our guard.

When a punch arrives, 19 paths fan out from the centre of the opponent's glove to the target (our head,
or our chest for body shots). They end on a hexagonal pattern in the disc through the target's centre,
perpendicular to the line from the glove: the centre, 6 points at half the target's radius and 12 at
its full radius. The score is the fraction of paths that no blocker (our gloves and forearms) crosses:
1 for a clean hit, 0 when the guard shadows the whole target from the glove (a glove pressed against
the incoming one does), in between when the punch gets partly past the guard.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from boxjax.envs.block.vision import Capsules, segments_blocked

NUM_PATHS = 19


def path_offsets() -> np.ndarray:
    """(19, 2) float32 points of the unit disc: centre, 6 at radius 1/2, 12 at radius 1."""
    inner = np.arange(6) * np.pi / 3
    outer = np.arange(12) * np.pi / 6
    rings = [np.zeros((1, 2)), 0.5 * np.stack([np.cos(inner), np.sin(inner)], 1)]
    rings.append(np.stack([np.cos(outer), np.sin(outer)], 1))
    return np.concatenate(rings).astype(np.float32)


def perpendicular_basis(direction: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Two unit vectors (3,) perpendicular to the unit `direction` and to each other."""
    helper = jnp.where(jnp.abs(direction[2]) < 0.9, jnp.array([0.0, 0.0, 1.0]), jnp.array([1.0, 0.0, 0.0]))
    u = jnp.cross(direction, helper)
    u = u / jnp.linalg.norm(u)
    return u, jnp.cross(direction, u)


def punch_paths(
    glove: jax.Array, target: jax.Array, target_radius_m: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(starts (19, 3), ends (19, 3)) of the paths from a glove centre (3,) to a target centre (3,)."""
    line = target - glove
    direction = line / jnp.maximum(jnp.linalg.norm(line), 1e-6)
    u, v = perpendicular_basis(direction)
    disc = jnp.asarray(path_offsets())
    spread = disc[:, :1] * u + disc[:, 1:] * v
    return jnp.broadcast_to(glove, spread.shape), target + target_radius_m * spread


def punch_score(
    glove: jax.Array, target: jax.Array, target_radius_m: jax.Array, blockers: Capsules
) -> jax.Array:
    """() float32 fraction of the 19 paths from the glove centre (3,) to the target (centre (3,) and
    radius) that no blocker crosses."""
    starts, ends = punch_paths(glove, target, target_radius_m)
    return 1.0 - jnp.mean(segments_blocked(starts, ends, blockers).astype(jnp.float32))
