"""Muscle contacts with the convex-collision cap N against MuJoCo's 35, by MuJoCo Warp (Warp CPU device) and MuJoCo C,
at the states of tests/test_collision.py (rolled out on MuJoCo C as built). Usage: ccd_contacts.py N"""
import copy, sys; sys.path.insert(0, "tests")
import numpy as np, warp as wp
import mujoco.mjx.third_party.mujoco_warp as mjw
import test_collision as t
from boxjax.envs.block import BlockConfig
from boxjax.envs.block_cpu import BlockCpuEnv
cap = int(sys.argv[1])
env = BlockCpuEnv(BlockConfig(body="muscular"), num_worlds=t.WORLDS)
built = env.mj_model; built.opt.ccd_iterations = cap
default = copy.deepcopy(built); default.opt.ccd_iterations = 35
with wp.ScopedDevice("cpu"):
    wb, wd = mjw.put_model(built), mjw.put_model(default)
    env.reset(); noise = np.random.default_rng(0)
    for step in range(1, 151):
        env.step(np.clip(noise.normal(0.0, 0.3, (t.WORLDS, env.action_size)), -1.0, 1.0))
        if step not in t.CHECK_STEPS: continue
        for name, want, got in (("warp", t.warp_contacts(default, wd, env.worlds), t.warp_contacts(built, wb, env.worlds)),
                                ("c", t.c_contacts(default, env.worlds), t.c_contacts(built, env.worlds))):
            one = [(k, [round(d, 7) for d, _ in want.get(k, [])], [round(d, 7) for d, _ in got.get(k, [])]) for k in set(want) | set(got) if len(want.get(k, [])) != len(got.get(k, []))]
            both = [k for k in set(want) & set(got)]
            dd = max([abs(a[0]-b[0]) for k in both for a, b in zip(sorted(want[k], key=t._dist), sorted(got[k], key=t._dist))], default=0)
            dn = max([np.degrees(np.arccos(np.clip(abs(a[1]@b[1]), -1, 1))) for k in both for a, b in zip(sorted(want[k], key=t._dist), sorted(got[k], key=t._dist))], default=0)
            print(step, name, "pairs", len(both), "contacts", sum(len(v) for v in want.values()), "one-sided", one, f"max ddist {dd:.2e} m, dnormal {dn:.2f} deg")
