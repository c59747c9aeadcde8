"""Planar frames shared by the tasks: a body's yaw, the heading frame, turns about the vertical."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def yaw(quat: jax.Array) -> jax.Array:
    """() heading (rad about +z, 0 = +x) of a body's +x axis projected on the floor, from (w, x, y, z)."""
    w, x, y, z = quat[0], quat[1], quat[2], quat[3]
    return jnp.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def to_heading_frame(yaw_rad: jax.Array, vec: jax.Array) -> jax.Array:
    """World vectors (..., 3) in the frame turned by `yaw_rad` about z (x forward, y left, z up)."""
    c, s = jnp.cos(yaw_rad), jnp.sin(yaw_rad)
    x, y = vec[..., 0], vec[..., 1]
    return jnp.stack([c * x + s * y, c * y - s * x, vec[..., 2]], axis=-1)


def turn_quat(quat: jax.Array, yaw_rad: jax.Array) -> jax.Array:
    """Orientations (..., 4) (w, x, y, z) turned by `yaw_rad` about the world z axis."""
    h = 0.5 * yaw_rad
    w, z = jnp.cos(h), jnp.sin(h)
    q0, q1, q2, q3 = quat[..., 0], quat[..., 1], quat[..., 2], quat[..., 3]
    return jnp.stack([w * q0 - z * q3, w * q1 - z * q2, w * q2 + z * q1, w * q3 + z * q0], axis=-1)


def turn_xy(xy: jax.Array, yaw_rad: jax.Array) -> jax.Array:
    """Floor vectors (..., 2) turned by `yaw_rad` about z."""
    c, s = jnp.cos(yaw_rad), jnp.sin(yaw_rad)
    return jnp.stack([c * xy[..., 0] - s * xy[..., 1], s * xy[..., 0] + c * xy[..., 1]], axis=-1)


def turn_root(root: jax.Array, yaw_rad: jax.Array, xy: jax.Array) -> jax.Array:
    """Free-joint qpos (7,) turned by `yaw_rad` about z and moved to floor position `xy`."""
    return jnp.concatenate([xy, root[2:3], turn_quat(root[3:7], yaw_rad)])
