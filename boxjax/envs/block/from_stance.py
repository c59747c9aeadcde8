"""The stance task's model as a start for the block task: the stance network's first layers and observation
statistics mapped onto the block observation (`map_first_layer`). The block env offers it as its model
adapter for stance checkpoints (`STANCE_ADAPTER`); `boxjax.rl.init_from` does the checkpoint work."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from boxjax.envs.stance.env import StanceConfig, StanceEnv
from boxjax.models.networks import Normalizer

STANCE_FIELDS = (
    "joints", "joint_vel", "ref_pose", "pose_error", "height", "gravity", "lin_vel", "ang_vel", "touch",
    "clock", "prev_action",
)  # fmt: skip
"""The stance observation's fields in order (`boxjax.envs.stance.shared.observe`)."""
SHARED_FIELDS = ("joints", "joint_vel", "height", "gravity", "lin_vel", "ang_vel", "touch", "prev_action")
"""Fields the stance and block observations share, with the same meaning and scale."""


def stance_slices(nu: int, action_size: int) -> dict[str, slice]:
    """Where each of `STANCE_FIELDS` sits in the stance observation of a body with `nu` actuators."""
    sizes = dict(joints=nu, joint_vel=nu, ref_pose=nu, pose_error=nu, height=1, gravity=3, lin_vel=3)
    sizes.update(ang_vel=3, touch=2, clock=3, prev_action=action_size)
    out, start = {}, 0
    for name in STANCE_FIELDS:
        out[name] = slice(start, start + sizes[name])
        start += sizes[name]
    return out


def map_first_layer(kernel, bias, stance_norm, env, prior_count: float):
    """A stance network's first Dense layer and observation statistics, mapped onto the block observation.

    The shared fields (`SHARED_FIELDS`) keep their weights and statistics. The stance-only inputs are
    folded in at the block task's reference (the guard, the stance curriculum's full amplitude): the
    reference pose and the amplitude are constants (into the bias), the pose error (joints - guard) is
    a linear function of the joints (into the joint weights and the bias), and the rhythm clock sits at
    its running mean (no contribution). Block-only fields (vision, task) start with zero weights, mean 0
    and variance 1. So the block network's output on a block observation equals the stance network's on
    the stance observation of the same body state at the guard, wherever no normalised input is clipped.

    Args:
      kernel: (stance_obs, H) float32; bias (H,).
      stance_norm: the stance run's `Normalizer`.
      env: the `BlockEnv`.
      prior_count: the count the mapped statistics get (the shared fields' history weighs this many
        samples, so the block-only fields find their own scale within a few iterations).

    Returns:
      (kernel (block_obs, H), bias (H,), block `Normalizer`).
    """

    s_slices = stance_slices(env.nu, env.action_size)
    b_slices = env.obs_slices
    mean, std = np.asarray(stance_norm.mean), np.asarray(stance_norm.std)
    count = float(stance_norm.count)
    var = np.asarray(stance_norm.m2) / max(count, 1.0)
    kernel, bias = np.asarray(kernel, np.float64), np.asarray(bias, np.float64).copy()
    new_kernel = np.zeros((env.observation_size, kernel.shape[1]))
    new_mean = np.zeros(env.observation_size)
    new_var = np.ones(env.observation_size)
    for f in SHARED_FIELDS:
        new_kernel[b_slices[f]] = kernel[s_slices[f]]
        new_mean[b_slices[f]], new_var[b_slices[f]] = mean[s_slices[f]], var[s_slices[f]]
    guard = np.asarray(env.me.stance_ctrl, np.float64)
    j, e, r, c = (s_slices[f] for f in ("joints", "pose_error", "ref_pose", "clock"))
    new_kernel[b_slices["joints"]] += kernel[e] * (std[j] / std[e])[:, None]
    bias += ((mean[j] - guard - mean[e]) / std[e]) @ kernel[e]
    bias += ((guard - mean[r]) / std[r]) @ kernel[r]
    amplitude = c.start + 2
    bias += (1.0 - mean[amplitude]) / std[amplitude] * kernel[amplitude]
    prior = min(count, prior_count)
    norm = Normalizer(
        count=jnp.asarray(prior, jnp.float32),
        mean=jnp.asarray(new_mean, jnp.float32),
        m2=jnp.asarray(new_var * prior, jnp.float32),
    )
    return jnp.asarray(new_kernel, jnp.float32), jnp.asarray(bias, jnp.float32), norm


@dataclasses.dataclass(frozen=True)
class StanceAdapter:
    """Starts the block task from a stance model (`boxjax.rl.init_from.prepare_init` calls it)."""

    source_task: str = "stance"

    def source_env(self, env) -> StanceEnv:
        """The stance env of the block env's body: the layout the stance model was trained on."""
        return StanceEnv(StanceConfig(body=env.config.body))

    def map_first_layer(self, kernel, bias, normalizer: Normalizer, env, prior_count: float):
        """`map_first_layer` of this module."""
        return map_first_layer(kernel, bias, normalizer, env, prior_count)


STANCE_ADAPTER = StanceAdapter()
