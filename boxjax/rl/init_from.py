"""Start a run from another task's model: `prepare_init` takes a checkpoint of the run's own task as it is,
and one of another task through the environment's model adapter for it (`Env.model_adapters`, e.g. the block
task's for stance models), written as a checkpoint of the run's task. The PPO layer knows no task: what
maps one observation onto the other is the adapter's."""

from __future__ import annotations

import os
from typing import Any, Protocol

import jax

from boxjax.models import checkpoint
from boxjax.models.networks import Normalizer
from boxjax.rl import ppo
from boxjax.rl.train_step import init_train_state, make_optimizer

NETWORK_FIELDS = ("policy_hidden", "value_hidden", "action_distribution")
"""PPO fields a source model must share with the run: the same networks but for the first layer's inputs."""


class ModelAdapter(Protocol):
    """How an environment takes the model of another task (`source_task`)."""

    source_task: str

    def source_env(self, env: Any) -> Any:
        """The source task's env for `env`'s body: the observation layout the source model was trained on."""

    def map_first_layer(
        self, kernel: Any, bias: Any, normalizer: Normalizer, env: Any, prior_count: float
    ) -> tuple[Any, Any, Normalizer]:
        """The source network's first Dense layer (kernel (source_obs, H), bias (H,)) and observation
        statistics, mapped onto `env`'s observation; the statistics weigh `prior_count` samples."""


def prepare_init(path: str | None, env: Any, config: ppo.PPOConfig, out: str, seed: int) -> str | None:
    """The checkpoint `ppo.train_run(init=...)` (or `workers.train(init=...)`) should start from, or None.

    A checkpoint (directory or policy file) of `env`'s own task is used as it is once `checkpoint.check_init`
    accepts it; one of a task `env` has a model adapter for is converted (`convert`) into
    `out`/init-from-<task>. Anything else raises `CheckpointMismatchError` naming what differs.
    """
    if not path:
        return None
    saved, expected = checkpoint.read_source_meta(path), ppo.run_meta(env, config)
    task = saved.get("env")
    if task == expected.get("env"):
        checkpoint.check_init(saved, expected)
        return path
    adapter = getattr(env, "model_adapters", {}).get(task)
    if adapter is None:
        raise checkpoint.CheckpointMismatchError(
            f"a {task!r} checkpoint cannot start the {expected.get('env')} task"
        )
    target = os.path.join(out, f"init-from-{task}")
    convert(adapter, path, saved, env, config, target, seed)
    return target


def _problems(adapter: ModelAdapter, saved: dict, expected: dict, source_env: Any) -> list[str]:
    """What keeps a source checkpoint (meta `saved`) from starting the run (meta `expected`)."""
    source = adapter.source_task
    problems = [
        f"{k}: {source} checkpoint has {saved.get(k)!r}, this run has {expected.get(k)!r}"
        for k in ("body", "action_size")
        if saved.get(k) != expected.get(k)
    ]
    saved_ppo, expected_ppo = saved.get("ppo", {}), expected["ppo"]
    problems += [
        f"ppo.{k}: {source} checkpoint has {saved_ppo.get(k)!r}, this run has {expected_ppo.get(k)!r}"
        for k in NETWORK_FIELDS
        if saved_ppo.get(k) != expected_ppo.get(k)
    ]
    if not problems and saved.get("observation_size") != source_env.observation_size:
        problems.append(
            f"observation_size: {source} checkpoint has {saved.get('observation_size')}, the {source} layout "
            f"this code maps has {source_env.observation_size}"
        )
    return problems


def convert(
    adapter: ModelAdapter, path: str, saved: dict, env: Any, config: ppo.PPOConfig, target: str, seed: int
) -> None:
    """Write a checkpoint of `env`'s task at `target` whose model is the source checkpoint's at `path`,
    mapped by `adapter` (policy and value), with a fresh optimiser state and no rollout state (an `init`
    checkpoint: both paths take only its model). Refuses another body or network."""
    expected = ppo.run_meta(env, config)
    source_env = adapter.source_env(env)
    problems = _problems(adapter, saved, expected, source_env)
    if problems:
        raise checkpoint.CheckpointMismatchError(
            f"cannot start from this {adapter.source_task} checkpoint:\n  " + "\n  ".join(problems)
        )
    key = jax.random.PRNGKey(seed)
    train = init_train_state(source_env, ppo.PPOConfig.from_dict(saved["ppo"]), key)
    # only the model: the fused path also stores a rollout state, whose structure depends on the physics
    # implementation it ran on (MuJoCo Warp's data is not MJX-JAX's), and a curriculum of its version
    seed_state = train.replace(**checkpoint.read_model(path, train))  # its model, whatever else it holds
    params = jax.tree.map(lambda x: x, seed_state.params)
    for net in ("policy", "value"):
        layer = params["params"][net]["Dense_0"]
        kernel, bias, norm = adapter.map_first_layer(
            layer["kernel"], layer["bias"], seed_state.normalizer, env, float(config.batch_size)
        )
        params["params"][net]["Dense_0"] = {"kernel": kernel, "bias": bias}
    state = init_train_state(env, config, key)
    state = state.replace(params=params, opt_state=make_optimizer(config).init(params), normalizer=norm)
    source = {"task": adapter.source_task, "path": os.path.abspath(path)}
    checkpoint.save(target, 0, {"train": state}, {**expected, "converted_from": source})
    task = expected.get("env")
    print(
        f"{task}: mapped the {adapter.source_task} model of {path} onto the {task} observation -> {target}",
        flush=True,
    )
