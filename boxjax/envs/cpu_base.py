"""The protocol of environments on the CPU path (`boxjax.rl.cpu.workers`): one object steps many worlds.

A CPU environment is an object with

* ``observation_size``, ``action_size`` and ``num_worlds`` (ints);
* ``describe() -> dict``: what a checkpoint records about it;
* ``reset() -> obs``: every world afresh, (num_worlds, observation_size) float32;
* ``step(action) -> CpuStep``: all worlds one control step with actions (num_worlds, action_size) in
  [-1, 1]; worlds whose episode ended are reset at once (`CpuStep.obs` continues, `CpuStep.next_obs`
  is what they reached);
* ``apply_curriculum(curriculum)``: take the values of a curriculum state (numpy leaves);
* optionally ``distill_target() -> (target, mask)``, each (num_worlds, action_size) float32: what the
  policy mean should be on the observations about to be acted on, and on which dims (a teacher's actions);
  the collectors record it when `PPOConfig.distill_coef` > 0.

The curriculum state itself lives with the learner, as on the GPU path: the optional hooks
``init_curriculum``, ``update_curriculum`` and ``solved`` are those of `boxjax.envs.base`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclasses.dataclass(frozen=True)
class CpuStep:
    """What one step of all worlds returns (numpy, leading axis num_worlds)."""

    obs: np.ndarray
    """(K, O) float32 observation to act on next (a fresh episode's where one ended)."""
    next_obs: np.ndarray
    """(K, O) float32 observation reached by this step, before any reset (for bootstrapping)."""
    reward: np.ndarray
    """(K,) float32."""
    done: np.ndarray
    """(K,) float32 1.0 where the episode ended (terminated or truncated)."""
    truncation: np.ndarray
    """(K,) float32 1.0 where it ended by the time limit only."""
    metrics: dict[str, np.ndarray]
    """Named (K,) float32 per-step figures, averaged per iteration."""


@runtime_checkable
class CpuEnv(Protocol):
    """Structural type of a CPU-path environment (see the module docstring)."""

    observation_size: int
    action_size: int
    num_worlds: int

    def describe(self) -> dict: ...

    def reset(self) -> np.ndarray: ...

    def step(self, action: np.ndarray) -> CpuStep: ...

    def apply_curriculum(self, curriculum: Any) -> None: ...
