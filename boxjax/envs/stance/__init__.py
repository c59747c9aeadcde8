"""Stance: hold a boxing stance, keep the reference rhythm, survive shoves; the curriculum widens the stance.

`env` is the JAX task (MJX), `shared` its math written once over numpy or jax.numpy, `cpu` the numpy
twin that steps many worlds around MuJoCo's C engine.
"""

from boxjax.envs.base import Task
from boxjax.envs.stance.env import StanceConfig, StanceEnv, StanceParams

TASK = Task(config=StanceConfig, env=StanceEnv)

__all__ = ["TASK", "StanceConfig", "StanceEnv", "StanceParams"]
