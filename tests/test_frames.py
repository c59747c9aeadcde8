"""The shared planar frames: yaw of a quaternion, the heading frame, turns about the vertical."""

import jax.numpy as jnp
import numpy as np
import pytest

from boxjax.envs import frames


def test_turns_and_the_heading_frame_agree():
    yaw = jnp.float32(0.7)
    identity = jnp.array([1.0, 0.0, 0.0, 0.0])
    turned = frames.turn_quat(identity, yaw)
    assert float(frames.yaw(turned)) == pytest.approx(0.7, abs=1e-6)
    forward = jnp.array([1.0, 0.0, 0.5])
    world = jnp.concatenate([frames.turn_xy(forward[:2], yaw), forward[2:]])
    np.testing.assert_allclose(frames.to_heading_frame(yaw, world), forward, atol=1e-6)
    batch = jnp.stack([world, 2 * world])
    np.testing.assert_allclose(
        frames.to_heading_frame(yaw, batch), jnp.stack([forward, 2 * forward]), atol=1e-6
    )
    root = jnp.array([5.0, 6.0, 0.9, 1.0, 0.0, 0.0, 0.0])
    moved = frames.turn_root(root, yaw, jnp.array([1.0, 2.0]))
    np.testing.assert_allclose(moved[:3], [1.0, 2.0, 0.9])
    np.testing.assert_allclose(moved[3:], turned, atol=1e-7)
