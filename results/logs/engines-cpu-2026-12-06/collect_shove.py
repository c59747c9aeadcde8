"""States of muscular face episodes on MuJoCo C (zero actions), saved for the contact comparison."""
import numpy as np, mujoco
from boxjax.envs.block.env import BlockConfig
from boxjax.envs.cpu import CpuEnv
cfg = BlockConfig(body="muscular", kind_weights=(0.0, 0.0, 0.0, 0.0, 1.0))
env = CpuEnv(cfg, num_worlds=16, seed=1)
env.reset()
qpos, mocap_pos, mocap_quat, qvel, ctrl = [], [], [], [], []
arrived = 0
for t in range(200):
    out = env.step(np.zeros((16, env.action_size), np.float32))
    arrived += out.metrics["punch/arrived"].sum()
    if t % 2 == 0:
        w = env.worlds
        qpos.append(np.array(w.qpos)); qvel.append(np.array(w.qvel)); ctrl.append(np.array(w.ctrl)); mocap_pos.append(np.array(w.mocap_pos)); mocap_quat.append(np.array(w.mocap_quat))
np.savez("/tmp/engdiag/states_shove.npz", ctrl=np.concatenate(ctrl), qpos=np.concatenate(qpos), qvel=np.concatenate(qvel), mocap_pos=np.concatenate(mocap_pos), mocap_quat=np.concatenate(mocap_quat))
mujoco.mj_saveLastXML  # noqa
spec_xml = None
import pickle
with open("/tmp/engdiag/model_shove.mjb", "wb") as f:
    pass
mujoco.mj_saveModel(env.mj_model, "/tmp/engdiag/model_shove.mjb", None)
print("states", np.concatenate(qpos).shape, "arrived", arrived, "ngeom", env.mj_model.ngeom, "nv", env.mj_model.nv)
