"""Observation geometry and reward terms shared by the tasks, each a tiny named function of plain arrays.

Every function takes arrays with any leading batch axes (`...`): one world's under `vmap`, or many at once.
Inputs are float32 and constants Python floats, so nothing is promoted to float64.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp


# -- geometry ---------------------------------------------------------------------------------------
def quat_rotate_inverse(quat: Any, vec: Any) -> Any:
    """World vectors `vec` (..., 3) in the frames of unit quaternions `quat` (..., 4) (w, x, y, z)."""
    w, q = quat[..., :1], quat[..., 1:4]
    t = 2.0 * jnp.cross(q, vec)
    return vec - w * t + jnp.cross(q, t)


def gravity_in_frame(quat: Any) -> Any:
    """Unit gravity direction (..., 3) seen from bodies with orientations `quat`: (0, 0, -1) when upright."""
    down = jnp.asarray([0.0, 0.0, -1.0], dtype=quat.dtype)
    return quat_rotate_inverse(quat, down)


# -- reward terms -----------------------------------------------------------------------------------
def pose_tracking(joint_pos: Any, ref_pos: Any, scale_rad2: float) -> Any:
    """exp(-sum of squared joint errors / scale): 1 on the reference pose. (..., n) -> (...)."""
    return jnp.exp(-jnp.sum(jnp.square(joint_pos - ref_pos), axis=-1) / scale_rad2)


def height_tracking(height_m: Any, ref_height_m: Any, scale_m2: float) -> Any:
    """exp(-(h - h_ref)^2 / scale) for the root height. (...) -> (...)."""
    return jnp.exp(-jnp.square(height_m - ref_height_m) / scale_m2)


def upright(gravity_local: Any) -> Any:
    """Cosine between the body's up axis and world up, in [-1, 1] (1 when upright). (..., 3) -> (...)."""
    return -gravity_local[..., 2]


def feet_support(touch_n: Any, body_weight_n: float) -> Any:
    """Share of the body weight on the feet, each foot capped at its half: 1 on two loaded feet.
    (..., 2) -> (...)."""
    share = jnp.clip(touch_n / (0.5 * body_weight_n), 0.0, 1.0)
    return jnp.mean(share, axis=-1)


def action_rate(action: Any, prev_action: Any) -> Any:
    """Mean squared change of the action since the last step (a penalty, >= 0). (..., A) -> (...)."""
    return jnp.mean(jnp.square(action - prev_action), axis=-1)


def root_velocity(root_vel: Any) -> Any:
    """Squared horizontal root speed in m^2/s^2 (a penalty, >= 0). (..., 3) -> (...)."""
    return jnp.sum(jnp.square(root_vel[..., :2]), axis=-1)
