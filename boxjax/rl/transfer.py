"""Start the block task from a stance checkpoint: its networks' first layers and observation statistics
mapped onto the block observation (`map_first_layer`), written as a block checkpoint (`stance_init`);
`prepare_init` picks what a `--init` path needs."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from boxjax.envs.stance.env import StanceConfig, StanceEnv
from boxjax.models import checkpoint
from boxjax.models.networks import Normalizer
from boxjax.rl import ppo
from boxjax.rl.train_step import init_train_state, make_optimizer

STANCE_FIELDS = (
    "joints", "joint_vel", "ref_pose", "pose_error", "height", "gravity", "lin_vel", "ang_vel", "touch",
    "clock", "prev_action",
)  # fmt: skip
"""The stance observation's fields in order (`boxjax.envs.stance.shared.observe`)."""
SHARED_FIELDS = ("joints", "joint_vel", "height", "gravity", "lin_vel", "ang_vel", "touch", "prev_action")
"""Fields the stance and block observations share, with the same meaning and scale."""


def prepare_init(path: str | None, env, config, out: str, seed: int) -> str | None:
    """The checkpoint `ppo.train_run(init=...)` (or `workers.train(init=...)`) should start from, or None.

    A block checkpoint (directory or policy file) is used as it is once `checkpoint.check_init` accepts
    it; a stance one is converted (`stance_init`) into `out`/init-from-stance.
    Anything else raises `CheckpointMismatchError` naming what differs. `env` is the `BlockEnv`.
    """
    if not path:
        return None
    saved, expected = checkpoint.read_source_meta(path), ppo.run_meta(env, config)
    task = saved.get("env")
    if task == "block":
        checkpoint.check_init(saved, expected)
        return path
    if task != "stance":
        raise checkpoint.CheckpointMismatchError(f"a {task!r} checkpoint cannot start the block task")
    target = os.path.join(out, "init-from-stance")
    stance_init(path, saved, env, config, target, seed)
    return target


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


def stance_init(path: str, saved: dict, env, config, target: str, seed: int) -> None:
    """Write a block-shaped checkpoint at `target` whose model is the stance checkpoint's at `path`, mapped
    (`map_first_layer`, policy and value), with a fresh optimiser state and no rollout state (an `init`
    checkpoint: both paths take only its model). Refuses another body or network.
    """

    expected = ppo.run_meta(env, config)
    problems = [
        f"{k}: stance checkpoint has {saved.get(k)!r}, this run has {expected.get(k)!r}"
        for k in ("body", "action_size")
        if saved.get(k) != expected.get(k)
    ]
    saved_ppo, expected_ppo = saved.get("ppo", {}), expected["ppo"]
    problems += [
        f"ppo.{k}: stance checkpoint has {saved_ppo.get(k)!r}, this run has {expected_ppo.get(k)!r}"
        for k in ("policy_hidden", "value_hidden", "tanh_policy")
        if saved_ppo.get(k) != expected_ppo.get(k)
    ]
    stance = StanceEnv(StanceConfig(body=env.config.body))
    if not problems and saved.get("observation_size") != stance.observation_size:
        problems.append(
            f"observation_size: stance checkpoint has {saved.get('observation_size')}, the stance layout "
            f"this code maps has {stance.observation_size}"
        )
    if problems:
        raise checkpoint.CheckpointMismatchError(
            "cannot start from this stance checkpoint:\n  " + "\n  ".join(problems)
        )
    stance_config = ppo.PPOConfig.from_dict(saved["ppo"])
    key = jax.random.PRNGKey(seed)
    train = init_train_state(stance, stance_config, key)
    # only the model: the fused path also stores a rollout state, whose structure depends on the physics
    # implementation it ran on (MuJoCo Warp's data is not MJX-JAX's), and a curriculum of its version
    seed_state = train.replace(**checkpoint.read_model(path, train))  # its model, whatever else it holds
    params = jax.tree.map(lambda x: x, seed_state.params)
    prior = float(config.batch_size)
    for net in ("policy", "value"):
        layer = params["params"][net]["Dense_0"]
        kernel, bias, norm = map_first_layer(
            layer["kernel"], layer["bias"], seed_state.normalizer, env, prior
        )
        params["params"][net]["Dense_0"] = {"kernel": kernel, "bias": bias}
    state = init_train_state(env, config, key)
    state = state.replace(params=params, opt_state=make_optimizer(config).init(params), normalizer=norm)
    meta = {**ppo.run_meta(env, config), "converted_from": {"task": "stance", "path": os.path.abspath(path)}}
    checkpoint.save(target, 0, {"train": state}, meta)
    print(f"block: mapped the stance model of {path} onto the block observation -> {target}", flush=True)
