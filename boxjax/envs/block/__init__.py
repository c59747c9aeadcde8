"""Block: mixed episodes around the guard; an opponent throws recorded punches, seen through delayed vision.

`env` composes the task from `config` (config, params, per-world state), `kinds` (the episode kinds),
`punch` (the opponent's punch clock and outcomes), `punches` (the punch library), `scoring` (the
19-path punch score), `vision` (rays, occlusion, delay), `opponent` (the opponent as a learner) and `ik`
(the arm fit of block presses; `ik_cpu` on MuJoCo's C engine). `cpu` holds its resets' arm fit for the CPU
path (`boxjax.envs.cpu`).
"""

from boxjax.envs.base import Task
from boxjax.envs.block.config import BlockConfig, BlockParams
from boxjax.envs.block.cpu import CpuTask
from boxjax.envs.block.env import BlockEnv

TASK = Task(config=BlockConfig, env=BlockEnv, cpu_env=CpuTask)

__all__ = ["TASK", "BlockConfig", "BlockEnv", "BlockParams"]
