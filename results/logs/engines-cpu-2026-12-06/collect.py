"""States of muscular episodes of one kind on MuJoCo C (zero actions), saved for the engine comparison:
`python collect.py KIND PREFIX` (KIND face | shove) writes PREFIX-states.npz and PREFIX-model.mjb."""
import sys

import mujoco
import numpy as np

from boxjax.envs.block.env import BlockConfig
from boxjax.envs.cpu import CpuEnv

KIND_WEIGHTS = {"face": (1.0, 0.0, 0.0, 0.0, 0.0), "shove": (0.0, 0.0, 0.0, 0.0, 1.0)}
kind, prefix = sys.argv[1], sys.argv[2]
env = CpuEnv(BlockConfig(body="muscular", kind_weights=KIND_WEIGHTS[kind]), num_worlds=16, seed=1)
env.reset()
fields = ("ctrl", "qpos", "qvel", "mocap_pos", "mocap_quat")
kept = {name: [] for name in fields}
arrived = 0
for t in range(200):
    out = env.step(np.zeros((16, env.action_size), np.float32))
    arrived += out.metrics["punch/arrived"].sum()
    if t % 2 == 0:
        for name in fields:
            kept[name].append(np.array(getattr(env.worlds, name)))
states = {name: np.concatenate(rows) for name, rows in kept.items()}
np.savez(f"{prefix}-states.npz", **states)
mujoco.mj_saveModel(env.mj_model, f"{prefix}-model.mjb", None)
print("states", states["qpos"].shape, "arrived", arrived, "ngeom", env.mj_model.ngeom, "nv", env.mj_model.nv)
