"""Stance: hold a boxing stance, keep the reference rhythm, survive shoves; the curriculum widens the stance.

`env` is the task (its step in two halves around the physics, so `boxjax.envs.cpu` runs it around MuJoCo's
C engine too), `shared` its math written once over numpy or jax.numpy.
"""

from boxjax.envs.base import Task
from boxjax.envs.stance.env import StanceConfig, StanceEnv, StanceParams

TASK = Task(config=StanceConfig, env=StanceEnv)

__all__ = ["TASK", "StanceConfig", "StanceEnv", "StanceParams"]
