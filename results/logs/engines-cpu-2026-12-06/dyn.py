"""Accelerations and steps of the same states: MuJoCo C against MuJoCo Warp (Warp's CPU device)."""
import sys
import numpy as np, mujoco, warp as wp
sys.path.insert(0, "/tmp/mjwsite")
import mujoco_warp as mjw
prefix = sys.argv[1]
mjm = mujoco.MjModel.from_binary_path(f"{prefix}-model.mjb")
s = np.load(f"{prefix}-states.npz")
N = int(sys.argv[2]); steps = int(sys.argv[3])
idx = np.linspace(0, len(s["qpos"]) - 1, N).astype(int)
mjd = mujoco.MjData(mjm)
c_qacc, c_qpos, c_ncon, c_nefc = [], [], [], []
for i in idx:
    mujoco.mj_resetData(mjm, mjd)
    mjd.qpos[:] = s["qpos"][i]; mjd.qvel[:] = s["qvel"][i]; mjd.mocap_pos[:] = s["mocap_pos"][i]; mjd.mocap_quat[:] = s["mocap_quat"][i]; mjd.ctrl[:] = s["ctrl"][i]
    mujoco.mj_forward(mjm, mjd); c_qacc.append(mjd.qacc.copy()); c_ncon.append(mjd.ncon); c_nefc.append(mjd.nefc)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    c_qpos.append(mjd.qpos.copy())
with wp.ScopedDevice("cpu"):
    m = mjw.put_model(mjm)
    d = mjw.make_data(mjm, nworld=N, nconmax=400, njmax=4000)
    for name in ("qpos", "qvel", "mocap_pos", "mocap_quat", "ctrl"):
        getattr(d, name).assign(s[name][idx].astype(np.float32))
    mjw.forward(m, d); w_qacc = d.qacc.numpy().copy()
    for _ in range(steps):
        mjw.step(m, d)
    w_qpos = d.qpos.numpy().copy()
c_qacc = np.array(c_qacc); c_qpos = np.array(c_qpos)
rel = np.linalg.norm(w_qacc - c_qacc, axis=1) / np.maximum(np.linalg.norm(c_qacc, axis=1), 1e-9)
print("ncon C mean", np.mean(c_ncon), "nefc C mean", np.mean(c_nefc))
print("qacc relative difference: median %.2e  90%% %.2e  max %.2e" % (np.median(rel), np.quantile(rel, 0.9), rel.max()))
dq = np.abs(w_qpos - c_qpos)[:, 7:]  # hinge angles etc. (past our free root)
print(f"after {steps} steps, |qpos| diff past the root: median {np.median(dq.max(1)):.2e} rad, 90% {np.quantile(dq.max(1),0.9):.2e}, max {dq.max():.2e}")
worst = np.argsort(-rel)[:3]
print("worst states", idx[worst], rel[worst], np.array(c_ncon)[worst])
