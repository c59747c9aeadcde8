"""Ellipsoid contacts of the muscular block world with MuJoCo's ccd settings (35 iterations, tolerance 1e-6)
against cheaper ones (MuJoCo Warp, CPU). Usage: ccd_accuracy.py [ITERATIONS:TOLERANCE ...]"""
import sys
import mujoco, numpy as np, warp as wp
import mujoco.mjx.third_party.mujoco_warp as mjw
from boxjax.envs.block_cpu import BlockCpuEnv
from boxjax.envs.block import BlockConfig
wp.config.quiet = True
K = 16
env = BlockCpuEnv(BlockConfig(body="muscular"), num_worlds=K)
m = env.mj_model
env.reset()
rng = np.random.default_rng(0)
VARIANTS = [tuple(float(x) for x in v.split(":")) for v in sys.argv[1:]] or [(16, 1e-6), (12, 1e-6), (8, 1e-6)]
models = {}
for it, tol in [(35, 1e-6), *VARIANTS]:
    m.opt.ccd_iterations, m.opt.ccd_tolerance = int(it), tol
    models[it, tol] = mjw.put_model(m)
m.opt.ccd_iterations, m.opt.ccd_tolerance = 35, 1e-6
d = mujoco.MjData(m)
def contacts(mw):
    out = []
    for w in range(K):
        d.qpos[:] = env.worlds.qpos[w]; d.qvel[:] = env.worlds.qvel[w]
        d.mocap_pos[:] = env.worlds.mocap_pos[w]; d.mocap_quat[:] = env.worlds.mocap_quat[w]
        mujoco.mj_kinematics(m, d)
        dw = mjw.put_data(m, d, nworld=1, naconmax=512, njmax=1024)
        mjw.kinematics(mw, dw); mjw.collision(mw, dw)
        n = int(dw.nacon.numpy()[0])
        c = dw.contact
        geom, dist, frame = c.geom.numpy()[:n], c.dist.numpy()[:n], c.frame.numpy()[:n]
        for g, dd, f in zip(geom, dist, frame):
            if mujoco.mjtGeom.mjGEOM_ELLIPSOID in (m.geom_type[g[0]], m.geom_type[g[1]]):
                out.append(((w, int(g[0]), int(g[1])), float(dd), f[0].copy()))
    return out
for step in range(151):
    if step % 25 == 0 and step:
        ref = {k: (dd, n) for k, dd, n in contacts(models[35, 1e-6])}
        line = f"step {step}: ellipsoid contacts {len(ref)}"
        for it, tol in VARIANTS:
            got = {k: (dd, n) for k, dd, n in contacts(models[it, tol])}
            common = set(ref) & set(got)
            ddist = max((abs(ref[k][0] - got[k][0]) for k in common), default=0.0)
            dang = max((float(np.degrees(np.arccos(np.clip(abs(ref[k][1] @ got[k][1]), -1, 1)))) for k in common), default=0.0)
            line += f" | {int(it)}:{tol:g}: missing {len(set(ref) - set(got))} extra {len(set(got) - set(ref))} max|ddist| {ddist:.2e} m max dnormal {dang:.2f} deg"
        print(line, flush=True)
    env.step(np.clip(rng.normal(0, 0.3, (K, env.action_size)), -1, 1))
