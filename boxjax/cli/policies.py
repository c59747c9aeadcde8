"""Finding and loading a trained policy, shared by `boxjax watch`, `boxjax export` and `boxjax eval`: a run
folder, a checkpoint directory, a policy file (`boxjax export`) or a shipped blocker; the task config its
meta describes; the network and observation statistics of its newest (or a given) checkpoint."""

from __future__ import annotations

import os
from typing import Any

import boxjax

SHIPPED_DIR = os.path.join(boxjax.DATA_DIR, "blockers")
"""Where the package's trained blockers are: block-BODY.msgpack policy files (what `--body BODY` plays)."""
DEFENCE_BLOCKER = os.path.join(SHIPPED_DIR, "defence-muscular.msgpack")
"""The muscular blocker trained for defence from block-muscular.msgpack (its training and evaluation rows:
docs/defence.md); a policy file, played or measured by its path, no `--body`."""


def shipped_bodies() -> list[str]:
    """The bodies whose trained blocker ships with the package (`SHIPPED_DIR`), sorted."""
    files = os.listdir(SHIPPED_DIR) if os.path.isdir(SHIPPED_DIR) else []
    return sorted(
        f[len("block-") : -len(".msgpack")]
        for f in files
        if f.startswith("block-") and f.endswith(".msgpack")
    )


def shipped_blocker(body: str | None) -> str:
    """The package's trained blocker of `body` (a policy file); a clear error without a body or one."""
    have = shipped_bodies()
    if body is None:
        shipped = ", ".join(have) or "none shipped"
        raise ValueError(
            f"give a run, checkpoint or policy file, or --body for a shipped blocker ({shipped})"
        )
    path = os.path.join(SHIPPED_DIR, f"block-{body}.msgpack")
    if not os.path.isfile(path):
        raise ValueError(f"no trained blocker ships for body {body!r}; shipped: {', '.join(have) or 'none'}")
    return path


def checkpoint_dir(path: str) -> str:
    """The checkpoint directory of a run folder (its checkpoints/), or `path` itself."""
    inner = os.path.join(path, "checkpoints")
    return inner if os.path.isdir(inner) else path


def checkpoint_steps(directory: str) -> list[int]:
    """The complete checkpoint steps in `directory`, oldest first; a clear error where there are none."""
    import orbax.checkpoint as ocp

    if not os.path.isdir(directory):
        raise FileNotFoundError(f"no checkpoint directory at {directory!r}")
    options = ocp.CheckpointManagerOptions(read_only=True)
    with ocp.CheckpointManager(os.path.abspath(directory), options=options) as manager:
        steps = sorted(manager.all_steps())
    if not steps:
        raise FileNotFoundError(f"no complete checkpoint in {directory!r}")
    return steps


def read_meta(source: str, step: int | None = None) -> dict:
    """The meta of a policy file, or of a checkpoint directory's newest (or `step`) checkpoint."""
    from boxjax.models import checkpoint

    if os.path.isfile(source):
        return checkpoint.read_policy_meta(source)
    return checkpoint.read_meta(source, step)


def task_options(meta: dict) -> dict:
    """The task config fields of a checkpoint's meta, lists back to tuples; the block task's walking teacher
    left out: it only pulls the training's leg actions, and its file may not be on this machine."""
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["config"].items()}
    if meta["env"] == "block":
        options["teacher"] = ""
    return options


def check_task(source: str, meta: dict) -> None:
    """Refuse a checkpoint whose meta names no task with a body (a toy's, or one without a config)."""
    from boxjax import envs

    if "config" not in meta or meta["env"] not in envs.TASKS:
        raise ValueError(f"{source}: a checkpoint of {meta.get('env')!r}, not of a task with a body to draw")


def restore(source: str, meta: dict, env: Any, step: int | None = None, agent: str | None = None):
    """(PPOConfig, Policy) of a policy file or of a checkpoint directory's newest (or `step`) checkpoint,
    for `env` (any object with the task's observation and action sizes and `describe`: a task env or a
    `boxjax.envs.cpu.CpuEnv`'s task); a network or body other than `env`'s is refused, naming it. Of a
    checkpoint of several agents (`boxjax.rl.agents`) the policy is `agent`'s (default the primary one's),
    also where `env` has that agent alone (a self-play run's blocker against scripted punches); a policy
    file holds one agent's."""
    import dataclasses

    import jax

    from boxjax.models import checkpoint
    from boxjax.rl import agents, ppo
    from boxjax.rl.train_step import init_train_state

    config = ppo.PPOConfig.from_dict(meta["ppo"])
    one = meta.get("agent")  # the agent a policy file of one agent of a several-agent run holds
    if one is not None and agent not in (None, one):
        raise ValueError(f"{source} holds agent {one!r}'s policy, not {agent!r}'s")
    expected = ppo.run_meta(env, config)
    checkpoint.check_init(
        meta, agents.agent_meta(expected, one) if one and expected.get("agents") else expected
    )
    template = init_train_state(env, dataclasses.replace(config, pool_size=0), jax.random.PRNGKey(0))
    if agents.has_agents(template):
        agent = agent or one or ppo.primary_agent(env)
        if not meta.get("agents"):  # a policy file of one agent of a several-agent task
            template = agents.agent_state(template, agent)
    elif meta.get("agents"):  # one agent of a several-agent checkpoint, in an env of that agent alone
        agent = agent or meta["agents"][0]["name"]
        template = template.replace(
            **{part: {agent: getattr(template, part)} for part in checkpoint.MODEL_PARTS}
        )
    if os.path.isfile(source):
        model = checkpoint.load_policy(source, template)
    else:
        model = checkpoint.restore_model(source, template, step)
    params, normalizer = model["params"], model["normalizer"]
    if isinstance(normalizer, dict):
        params, normalizer = params[agent], normalizer[agent]
    return config, ppo.Policy(params=params, normalizer=normalizer)


def load(
    source: str, meta: dict, worlds: int, impl: str = "jax", step: int | None = None, agent: str | None = None
):
    """(env, PPOConfig, Policy) of the newest (or `step`) checkpoint in `source`, or of a policy file: the
    environment its meta describes, `worlds` worlds on MJX's `impl` physics (JAX's by default), and the
    checkpoint's network and observation statistics (`agent`'s of several, `restore`)."""
    from boxjax import envs

    check_task(source, meta)
    env = envs.make(meta["env"], impl=impl, num_worlds=worlds, **task_options(meta))
    config, policy = restore(source, meta, env, step, agent)
    return env, config, policy


def forced_kind(params, kind: str):
    """Block params whose every episode is of `kind`, one of `KINDS` (its weight 1, the others 0)."""
    import jax.numpy as jnp

    from boxjax.envs.block.config import KINDS

    return params.replace(kind_weights=jnp.asarray([k == kind for k in KINDS], jnp.float32))
