"""Contacts of the same states: MuJoCo C (mj_fwdPosition) against MuJoCo Warp on Warp's CPU device."""
import sys, time, collections
import numpy as np, mujoco, warp as wp
sys.path.insert(0, "/tmp/mjwsite")
import mujoco_warp as mjw
wp.config.quiet = True
prefix = sys.argv[1]
mjm = mujoco.MjModel.from_binary_path(f"{prefix}-model.mjb")
s = np.load(f"{prefix}-states.npz")
N = int(sys.argv[2])
idx = np.linspace(0, len(s["qpos"]) - 1, N).astype(int)
names = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_GEOM, g) or f"g{g}" for g in range(mjm.ngeom)]
# C contacts
mjd = mujoco.MjData(mjm)
c_pairs = []
for i in idx:
    mjd.qpos[:] = s["qpos"][i]; mjd.qvel[:] = s["qvel"][i]; mjd.mocap_pos[:] = s["mocap_pos"][i]; mjd.mocap_quat[:] = s["mocap_quat"][i]
    mujoco.mj_fwdPosition(mjm, mjd)
    c_pairs.append({(min(c.geom), max(c.geom)): c.dist for c in mjd.contact[: mjd.ncon]} if mjd.ncon else {})
print("C mean ncon", np.mean([len(p) for p in c_pairs]), flush=True)
with wp.ScopedDevice("cpu"):
    t = time.time()
    m = mjw.put_model(mjm)
    d = mjw.make_data(mjm, nworld=N, nconmax=400, njmax=2000)
    d.qpos.assign(s["qpos"][idx].astype(np.float32)); d.qvel.assign(s["qvel"][idx].astype(np.float32))
    d.mocap_pos.assign(s["mocap_pos"][idx].astype(np.float32)); d.mocap_quat.assign(s["mocap_quat"][idx].astype(np.float32))
    mjw.fwd_position(m, d)
    print("warp fwd_position", time.time() - t, "s", flush=True)
    n = int(d.nacon.numpy()[0])
    geom = d.contact.geom.numpy()[:n]; dist = d.contact.dist.numpy()[:n]; world = d.contact.worldid.numpy()[:n]
w_pairs = [dict() for _ in range(N)]
for g, dd, w in zip(geom, dist, world):
    key = (int(min(g)), int(max(g)))
    w_pairs[w][key] = min(dd, w_pairs[w].get(key, 9))
print("Warp mean pairs", np.mean([len(p) for p in w_pairs]))
only_c, only_w, both = collections.Counter(), collections.Counter(), collections.Counter()
ddiff = []
for cp, wpairs in zip(c_pairs, w_pairs):
    for k in set(cp) | set(wpairs):
        label = f"{names[k[0]]}|{names[k[1]]}"
        if k in cp and k in wpairs:
            both[label] += 1; ddiff.append(abs(cp[k] - wpairs[k]))
        elif k in cp:
            only_c[label] += 1
        else:
            only_w[label] += 1
print("pairs in both", sum(both.values()), "only C", sum(only_c.values()), "only Warp", sum(only_w.values()))
print("dist |C-Warp| max", max(ddiff) if ddiff else None, "mean", np.mean(ddiff) if ddiff else None)
print("only C:", only_c.most_common(15))
print("only Warp:", only_w.most_common(15))
