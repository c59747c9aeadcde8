"""Orbax checkpoints of a whole run: learner state, environment state and the configs that made them.

A checkpoint directory holds numbered steps; each step has the `state` pytree (TrainState and
RolloutState) and a JSON `meta` (environment description, observation/action sizes, PPO config).
Orbax writes each step to a temporary folder and renames it when complete, so an interrupted save never
replaces a good checkpoint.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

# Fields that must match for a checkpoint to seed a new run (`init`); resuming needs the whole meta equal.
_MODEL_FIELDS = ("body", "observation_size", "action_size")
_NETWORK_FIELDS = ("policy_hidden", "value_hidden")


class CheckpointMismatchError(ValueError):
    """A checkpoint was made by another body, task or configuration than the run that loads it."""


def _manager(directory: str, max_to_keep: int | None = 3) -> ocp.CheckpointManager:
    options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True)
    return ocp.CheckpointManager(os.path.abspath(directory), options=options)


def _fill_empty(tree: Any) -> Any:
    """Orbax refuses zero-size arrays (e.g. `mjx.Data.act` of a body without actuator state): store a
    one-element stand-in instead; `restore` puts the template's empty array back."""
    return jax.tree.map(lambda x: np.zeros((1,), x.dtype) if np.size(x) == 0 else x, tree)


def save(directory: str, step: int, state: dict[str, Any], meta: dict[str, Any]) -> None:
    """Write `state` (a pytree of arrays) and `meta` (JSON) as checkpoint `step`; waits until written."""
    with _manager(directory) as mngr:
        mngr.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(_fill_empty(state)), meta=ocp.args.JsonSave(meta)
            ),
        )
        mngr.wait_until_finished()


def latest_step(directory: str) -> int:
    """Newest complete step in `directory`; a clear error if there is none."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"no checkpoint directory at {directory!r}")
    with _manager(directory, max_to_keep=None) as mngr:
        step = mngr.latest_step()
    if step is None:
        raise FileNotFoundError(f"no complete checkpoint in {directory!r}")
    return step


def read_meta(directory: str, step: int | None = None) -> dict[str, Any]:
    """The JSON meta of a checkpoint (newest step by default)."""
    step = latest_step(directory) if step is None else step
    with _manager(directory, max_to_keep=None) as mngr:
        restored = mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
    return dict(restored["meta"])


def restore(directory: str, template: dict[str, Any], step: int | None = None) -> dict[str, Any]:
    """Restore the `state` pytree with the structure, shapes and dtypes of `template`."""
    step = latest_step(directory) if step is None else step
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, _fill_empty(template))
    with _manager(directory, max_to_keep=None) as mngr:
        restored = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract)))
    return jax.tree.map(lambda t, r: t if np.size(t) == 0 else r, template, restored["state"])


def _diff(saved: dict, expected: dict, keys: tuple[str, ...]) -> list[str]:
    return [
        f"{k}: checkpoint has {saved.get(k)!r}, this run has {expected.get(k)!r}"
        for k in keys
        if saved.get(k) != expected.get(k)
    ]


def check_resume(saved: dict[str, Any], expected: dict[str, Any]) -> None:
    """Resuming needs the same task, body and configs, else `CheckpointMismatchError` names what differs."""
    keys = tuple(sorted((set(saved) | set(expected)) - {"boxjax_version"}))
    problems = _diff(saved, expected, keys)
    if problems:
        raise CheckpointMismatchError("cannot resume from this checkpoint:\n  " + "\n  ".join(problems))


def check_init(saved: dict[str, Any], expected: dict[str, Any]) -> None:
    """Starting from a checkpoint's model needs the same body, observation/action sizes and network."""
    problems = _diff(saved, expected, _MODEL_FIELDS)
    saved_ppo, expected_ppo = saved.get("ppo", {}), expected.get("ppo", {})
    problems += [f"ppo.{p}" for p in _diff(saved_ppo, expected_ppo, _NETWORK_FIELDS)]
    if problems:
        raise CheckpointMismatchError(
            "cannot start from this checkpoint's model:\n  " + "\n  ".join(problems)
        )
