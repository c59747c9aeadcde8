"""Observation and reward math written once, over an array namespace (`jax.numpy` or `numpy`).

Each reward term is a tiny named function of plain arrays; the JAX environments and the CPU (numpy) path
call the same functions with `xp=jnp` or `xp=np`. Inputs are float32; constants are Python floats so
nothing is promoted to float64.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp


def quat_rotate_inverse(quat: Any, vec: Any, xp: Any = jnp) -> Any:
    """Rotate world vector `vec` (3,) into the frame of unit quaternion `quat` (w, x, y, z)."""
    w, q = quat[0], quat[1:4]
    t = 2.0 * xp.cross(q, vec)
    return vec - w * t + xp.cross(q, t)


def gravity_in_frame(quat: Any, xp: Any = jnp) -> Any:
    """Unit gravity direction (3,) seen from a body with orientation `quat`: (0, 0, -1) when upright."""
    down = xp.asarray([0.0, 0.0, -1.0], dtype=quat.dtype)
    return quat_rotate_inverse(quat, down, xp)


def pose_tracking(joint_pos: Any, ref_pos: Any, scale_rad2: float, xp: Any = jnp) -> Any:
    """exp(-sum of squared joint errors / scale): 1 on the reference pose."""
    return xp.exp(-xp.sum(xp.square(joint_pos - ref_pos)) / scale_rad2)


def height_tracking(height_m: Any, ref_height_m: Any, scale_m2: float, xp: Any = jnp) -> Any:
    """exp(-(h - h_ref)^2 / scale) for the root height."""
    return xp.exp(-xp.square(height_m - ref_height_m) / scale_m2)


def upright(gravity_local: Any, xp: Any = jnp) -> Any:
    """Cosine between the body's up axis and world up, in [-1, 1] (1 when upright)."""
    return -gravity_local[2]


def feet_support(touch_n: Any, body_weight_n: float, xp: Any = jnp) -> Any:
    """Share of the body weight carried by the feet, each foot capped at its half: 1 on two loaded feet."""
    share = xp.clip(touch_n / (0.5 * body_weight_n), 0.0, 1.0)
    return xp.mean(share)


def action_rate(action: Any, prev_action: Any, xp: Any = jnp) -> Any:
    """Mean squared change of the action since the last step (a penalty, >= 0)."""
    return xp.mean(xp.square(action - prev_action))


def root_velocity(root_vel: Any, xp: Any = jnp) -> Any:
    """Squared horizontal speed of the root in m^2/s^2 (a penalty, >= 0)."""
    return xp.sum(xp.square(root_vel[:2]))
