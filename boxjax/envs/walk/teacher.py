"""The walking teacher: a trained `walk` policy that other tasks run beside theirs for policy distillation.

`load_teacher` reads the network and observation statistics of a `walk` checkpoint (and nothing else of
it, so a teacher trained with MuJoCo Warp loads on a CPU run and the reverse), or of a teacher file that
`export_teacher` wrote (a few hundred kB of msgpack, the form shipped in `boxjax/data/teachers/`);
`shipped_teacher(body)` names the shipped one; `teacher_action` is its deterministic action for a
`boxjax.envs.walk.env.walk_observation`. A `Teacher` is a pytree: put it in an
env's params and call `teacher_action` inside the jitted, vmapped step, e.g. in the env hook

    def distill_target(self, params, state):
        obs = walk.walk_observation(self.me, state.data, state.info.walk_command)
        return teacher.teacher_action(params.teacher, obs), params.teacher.leg_mask
"""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
from flax import serialization, struct

import boxjax
from boxjax import mjcf
from boxjax.envs.walk import env as walk
from boxjax.models import checkpoint
from boxjax.models.networks import ActorCritic, Normalizer

TASK = "walk"
"""The task a teacher checkpoint must come from."""
SHIPPED_DIR = os.path.join(boxjax.DATA_DIR, "teachers")
"""Where the package's trained teachers live, one `walk-<body>.msgpack` per body."""


@struct.dataclass
class Teacher:
    """A walking policy frozen for acting: parameters, observation statistics and the legs' action dims."""

    params: Any
    """Actor-critic parameters (flax) of the walk policy."""
    normalizer: Normalizer
    """Its running observation statistics."""
    leg_mask: jax.Array
    """(A,) float32 1.0 on the action dims of hips, knees, ankles and toes."""
    policy_hidden: tuple[int, ...] = struct.field(pytree_node=False)
    """Hidden widths of the policy MLP (static)."""
    value_hidden: tuple[int, ...] = struct.field(pytree_node=False)
    """Hidden widths of the value MLP (static; only to rebuild the module)."""
    normalize: bool = struct.field(pytree_node=False)
    """Whether the policy was trained on normalised observations (static)."""
    action_scale_rad: float = struct.field(pytree_node=False, default=0.4)
    """Joint-target offset from the guard of its action 1 in the walk task (static): a task with another
    scale rescales the teacher's actions into its own."""

    @property
    def action_size(self) -> int:
        """Action dims of the body."""
        return int(self.leg_mask.shape[-1])

    def network(self) -> ActorCritic:
        """The flax module the parameters belong to."""
        return ActorCritic(
            action_size=self.action_size,
            policy_hidden=self.policy_hidden,
            value_hidden=self.value_hidden,
            init_log_std=0.0,
        )


def teacher_action(teacher: Teacher, walk_obs: jax.Array) -> jax.Array:
    """The teacher's deterministic action: its policy mean clipped to [-1, 1].

    Args:
      teacher: from `load_teacher`.
      walk_obs: (..., O) `walk.walk_observation` of the fighter (one world, or a batch).

    Returns:
      (..., A) float32 action for every dim of the body (mask with `teacher.leg_mask`).
    """
    normed = teacher.normalizer(jnp.asarray(walk_obs, jnp.float32), teacher.normalize)
    mean, _ = teacher.network().apply(teacher.params, normed, method=ActorCritic.policy_only)
    return jnp.clip(mean, -1.0, 1.0)


def _mismatch(directory: str, problems: list[str]) -> None:
    if problems:
        raise checkpoint.CheckpointMismatchError(
            f"cannot load a walking teacher from {directory!r}:\n  " + "\n  ".join(problems)
        )


def _check_task(directory: str, meta: dict[str, Any], body: str) -> None:
    """Refuse a checkpoint of another task or body, naming both."""
    problems = []
    if meta.get("env") != TASK:
        problems.append(f"task: checkpoint is {meta.get('env')!r}, a teacher must be {TASK!r}")
    if meta.get("body") != body:
        problems.append(f"body: checkpoint has {meta.get('body')!r}, this run has {body!r}")
    distribution = meta.get("ppo", {}).get("action_distribution", "clipped_normal")
    if distribution != "clipped_normal":
        problems.append(
            f"ppo.action_distribution: checkpoint has {distribution!r}, a teacher acts with clipped_normal"
        )
    _mismatch(directory, problems)


def _check_sizes(directory: str, meta: dict[str, Any], obs_size: int, act_size: int) -> None:
    """Refuse a walker whose observation or action size differs from this code's (an older walk task)."""
    sizes = (("observation_size", obs_size), ("action_size", act_size))
    problems = [
        f"{k}: checkpoint has {meta.get(k)!r}, the walk task of this body now has {v}"
        for k, v in sizes
        if meta.get(k) != v
    ]
    _mismatch(directory, problems)


def _restore_policy(directory: str, step: int, abstract: dict[str, Any]) -> dict[str, Any]:
    """Only the `train.params` and `train.normalizer` leaves of a checkpoint's state (partial restore)."""
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    targets = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device), abstract)
    restore_args = ocp.checkpoint_utils.construct_restore_args(targets)
    args = ocp.args.PyTreeRestore(item=targets, restore_args=restore_args, partial_restore=True)
    options = ocp.CheckpointManagerOptions(create=False)
    with ocp.CheckpointManager(os.path.abspath(directory), options=options) as mngr:
        restored = mngr.restore(step, args=ocp.args.Composite(state=args))
    return restored["state"]


def _template(body: str, meta: dict[str, Any], source: str) -> tuple[Teacher, dict[str, Any]]:
    """An empty teacher for `body` checked against `meta`, and the abstract tree of what to restore."""
    if body not in mjcf.BODIES:
        raise ValueError(f"unknown body {body!r}; valid: {', '.join(mjcf.BODIES)}")
    _check_task(source, meta, body)
    model, arena = mjcf.build(body)
    obs_size = walk.walk_observation_size(arena.red)
    _check_sizes(source, meta, obs_size, int(arena.red.action_size))
    ppo = meta.get("ppo", {})
    teacher = Teacher(
        params=None,
        normalizer=Normalizer.create(obs_size, ppo.get("obs_normalizer", "boxjax")),
        leg_mask=jnp.asarray(walk.leg_action_mask(model, arena.red)),
        policy_hidden=tuple(ppo.get("policy_hidden", (256, 256))),
        value_hidden=tuple(ppo.get("value_hidden", (256, 256))),
        normalize=bool(ppo.get("normalize_observations", True)),
        action_scale_rad=float(meta.get("config", {}).get("action_scale_rad", 0.4)),
    )
    params = jax.eval_shape(
        lambda: teacher.network().init(jax.random.PRNGKey(0), jnp.zeros((1, obs_size), jnp.float32))
    )
    return teacher, {"params": params, "normalizer": teacher.normalizer}


def _zeros(abstract: Any) -> Any:
    return jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), abstract)


def load_teacher(source: str, body: str, step: int | None = None) -> Teacher:
    """Load a walking teacher for fighters of `body`.

    Args:
      source: a checkpoint directory written by `boxjax train --task walk` (or `ppo.train` on `walk`), or a
        teacher file written by `export_teacher`.
      body: the body of the fighters it will teach (must be the one it was trained on).
      step: checkpoint step (default: the newest; ignored for a teacher file).

    Returns:
      The `Teacher` (arrays on the default device for a checkpoint, numpy for a teacher file).

    Raises:
      FileNotFoundError: no checkpoint or file there.
      boxjax.models.checkpoint.CheckpointMismatchError: a checkpoint of another task or body, or of another
        observation or action size than this body's walk observation.
    """
    if os.path.isfile(source):
        meta, stored = checkpoint.read_policy_file(source)
        teacher, abstract = _template(body, meta, source)
        restored = serialization.from_state_dict(_zeros(abstract), stored)
    else:
        step = checkpoint.latest_step(source) if step is None else step
        meta = checkpoint.read_meta(source, step)
        teacher, abstract = _template(body, meta, source)
        restored = _restore_policy(source, step, {"train": abstract})["train"]
    return teacher.replace(params=restored["params"], normalizer=restored["normalizer"])


def untrained_teacher(body: str, hidden: tuple[int, ...] = (256, 256), seed: int = 0) -> Teacher:
    """A walking teacher of `body` with fresh weights and unit observation statistics: the shape and
    cost of a trained one (for benchmarks of bodies without a shipped teacher), not its behaviour."""
    if body not in mjcf.BODIES:
        raise ValueError(f"unknown body {body!r}; valid: {', '.join(mjcf.BODIES)}")
    _, arena = mjcf.build(body)
    meta = {
        "env": TASK,
        "body": body,
        "observation_size": walk.walk_observation_size(arena.red),
        "action_size": int(arena.red.action_size),
        "ppo": {"policy_hidden": list(hidden), "value_hidden": list(hidden)},
    }
    teacher, _ = _template(body, meta, "untrained")
    obs = jnp.zeros((1, teacher.normalizer.mean.shape[-1]), jnp.float32)
    return teacher.replace(params=teacher.network().init(jax.random.PRNGKey(seed), obs))


def export_teacher(checkpoint_dir: str, body: str, path: str, step: int | None = None) -> dict[str, Any]:
    """Write the policy of a walk checkpoint (parameters, observation statistics, meta) to one small file.

    Returns the meta written (with `source_step`). The file loads with `load_teacher(path, body)`."""
    step = checkpoint.latest_step(checkpoint_dir) if step is None else step
    teacher = load_teacher(checkpoint_dir, body, step)
    meta = {**checkpoint.read_meta(checkpoint_dir, step), "source_step": int(step)}
    checkpoint.save_policy(path, {"params": teacher.params, "normalizer": teacher.normalizer}, meta)
    return meta


def teacher_for(source: str, body: str) -> Teacher | None:
    """The teacher `source` names for `body` (`BlockConfig.teacher`): None for '', fresh weights for
    'untrained' (`untrained_teacher`), else the shipped one ('shipped'), a teacher file or a checkpoint."""
    if not source:
        return None
    if source == "untrained":
        return untrained_teacher(body)
    return load_teacher(resolve(source, body), body)


def resolve(source: str, body: str) -> str:
    """The teacher file or checkpoint directory `source` names: 'shipped' is the package's for `body`."""
    return shipped_teacher(body) if source == "shipped" else source


def shipped_teacher(body: str) -> str:
    """Path of the package's trained walking teacher for `body`.

    Raises:
      FileNotFoundError: none is shipped for that body (name the bodies that have one).
    """
    path = os.path.join(SHIPPED_DIR, f"walk-{body}.msgpack")
    if not os.path.isfile(path):
        files = os.listdir(SHIPPED_DIR) if os.path.isdir(SHIPPED_DIR) else []
        have = sorted(f[5:-8] for f in files if f.startswith("walk-") and f.endswith(".msgpack"))
        raise FileNotFoundError(
            f"no walking teacher shipped for body {body!r} (shipped: {', '.join(have) or 'none'}); "
            "train one with `boxjax train --task walk` and pass its checkpoint directory"
        )
    return path
