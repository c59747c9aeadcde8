"""Muscular body: the CPU path's task on MuJoCo C against the fused task on MJX-JAX through identical face
episodes (zero actions), as tests/test_block_outcomes.py does for the simple body; also the observations:
`python paired_muscular.py WORLDS STEPS SEED face|mix`."""
import sys, time
import jax, jax.numpy as jnp, numpy as np
sys.path.insert(0, "/work/main/tests")
import test_block_outcomes as t
from boxjax.envs.block import env as block
from boxjax.envs.block.env import BlockConfig
from boxjax.envs.cpu import CpuEnv
MIX = {"face": {"kind_weights": (1.0, 0.0, 0.0, 0.0, 0.0)}, "mix": {}}  # "mix": the task's default kinds
W, STEPS, SEED = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cfg = BlockConfig(body="muscular", **MIX[sys.argv[4]])
cpu = CpuEnv(cfg, num_worlds=W, seed=SEED); cpu.reset()
task = block.BlockEnv(cfg); params = task.default_params()
step = jax.jit(jax.vmap(task.step, in_axes=(None, 0, 0)))
ref = t._as_mjx(params, cpu.state)
totals = {s: dict.fromkeys((*t.OUTCOMES, "fall"), 0.0) for s in ("c", "jax")}
obs_diff, q_diff = [], []
t0 = time.time()
for i in range(STEPS):
    a = np.zeros((W, cpu.action_size), np.float32)
    out = cpu.step(a); ref = step(params, ref, a)
    if i == 0: print("first step (compile) %.0f s" % (time.time() - t0), flush=True)
    m = jax.device_get(ref.metrics)
    for name in t.OUTCOMES:
        totals["c"][name] += float(np.sum(out.metrics[f"punch/{name}"])); totals["jax"][name] += float(np.sum(m[f"punch/{name}"]))
    totals["c"]["fall"] += float(np.sum(out.metrics["fall"])); totals["jax"]["fall"] += float(np.sum(m["fall"]))
    live = ~((out.done > 0.5) | (np.asarray(ref.done) > 0.5))
    obs_diff.append(np.abs(out.next_obs - np.asarray(ref.obs))[live].max() if live.any() else 0.0)
    q_diff.append(np.abs(np.asarray(cpu.worlds.qpos) - np.asarray(ref.data.qpos))[live].max() if live.any() else 0.0)
    ended = ~live
    if ended.any():
        ref = t._where(ended, t._as_mjx(params, cpu.state), ref.replace(metrics={}))
print("steps", STEPS, "time %.0f s" % (time.time() - t0))
print("totals", totals)
print("obs |C-JAX| max over live worlds: median %.2e, max %.2e; qpos max %.2e" % (np.median(obs_diff), max(obs_diff), max(q_diff)))
