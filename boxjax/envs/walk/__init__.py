"""Walk: follow a velocity command in the guard; its trained policy is the block task's walking teacher.

`env` is the task, `teacher` loads a trained walker and gives its leg targets inside another task's step.
"""

from boxjax.envs.base import Task
from boxjax.envs.walk.env import WalkConfig, WalkEnv, WalkParams

TASK = Task(config=WalkConfig, env=WalkEnv)

__all__ = ["TASK", "WalkConfig", "WalkEnv", "WalkParams"]
