"""MuJoCo C's step of the muscular block world with the convex-collision cap 35 (MuJoCo's default) and 16
(boxer.CCD_ITERATIONS), from the same rollout states. Usage: ccd_cpu_step.py [WORLDS] [REPEATS]"""
import sys
import time

import mujoco
import numpy as np

from boxjax.envs.block import BlockConfig
from boxjax.envs.block_cpu import BlockCpuEnv

WORLDS = int(sys.argv[1]) if len(sys.argv) > 1 else 16
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
env = BlockCpuEnv(BlockConfig(body="muscular"), num_worlds=WORLDS)
m = env.mj_model
substeps = 5
env.reset()
rng = np.random.default_rng(0)
states = []
for step in range(1, 151):
    env.step(np.clip(rng.normal(0, 0.3, (WORLDS, env.action_size)), -1, 1))
    if step % 25 == 0:
        w = env.worlds
        states += [(w.qpos[i].copy(), w.qvel[i].copy(), w.mocap_pos[i].copy(), w.mocap_quat[i].copy(),
                    w.ctrl[i].copy()) for i in range(WORLDS)]
d = mujoco.MjData(m)


def time_all(cap: int) -> float:
    """Median over repeats of the mean seconds of one control step (substeps mj_step) per state."""
    m.opt.ccd_iterations = cap
    runs = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for qpos, qvel, mpos, mquat, ctrl in states:
            d.qpos[:], d.qvel[:], d.mocap_pos[:], d.mocap_quat[:], d.ctrl[:] = qpos, qvel, mpos, mquat, ctrl
            mujoco.mj_step(m, d, nstep=substeps)
        runs.append((time.perf_counter() - start) / len(states))
    return float(np.median(runs))


for cap in (35, 16, 35, 16):
    print(f"ccd_iterations {cap}: {1e6 * time_all(cap):.1f} us per control step ({substeps} physics steps), "
          f"{len(states)} states", flush=True)
