"""Narrowphase candidates per world in the muscular block world, by geom-type pair, along an episode."""
import collections, mujoco, numpy as np, warp as wp
import mujoco.mjx.third_party.mujoco_warp as mjw
from mujoco.mjx.third_party.mujoco_warp._src import collision_driver as cd_
from boxjax.envs.block_cpu import BlockCpuEnv
from boxjax.envs.block import BlockConfig
wp.config.quiet = True
K = 8
env = BlockCpuEnv(BlockConfig(body="muscular"), num_worlds=K)
m = env.mj_model
env.reset()
rng = np.random.default_rng(0)
d = mujoco.MjData(m)
mw = mjw.put_model(m)
name = lambda t: mujoco.mjtGeom(t).name[8:].lower()
for step in range(121):
    if step % 30 == 0:
        counts, ncon = collections.Counter(), []
        for w in range(K):
            d.qpos[:] = env.worlds.qpos[w]; d.qvel[:] = env.worlds.qvel[w]
            d.mocap_pos[:] = env.worlds.mocap_pos[w]; d.mocap_quat[:] = env.worlds.mocap_quat[w]
            mujoco.mj_forward(m, d)
            ncon.append(d.ncon)
            dw = mjw.put_data(m, d, nworld=1, naconmax=512, njmax=1024)
            ctx = cd_.create_collision_context(dw.naconmax)
            dw.ncollision.zero_()
            cd_.nxn_broadphase(mw, dw, ctx, None)
            n = int(dw.ncollision.numpy()[0])
            for g1, g2 in ctx.collision_pair.numpy()[:n]:
                counts[tuple(sorted((name(m.geom_type[g1]), name(m.geom_type[g2]))))] += 1
        print(f"step {step}: candidates/world {sum(counts.values())/K:.1f} C-contacts/world {np.mean(ncon):.1f}",
              {k: round(v / K, 1) for k, v in counts.most_common()}, flush=True)
    env.step(np.clip(rng.normal(0, 0.3, (K, env.action_size)), -1, 1))
