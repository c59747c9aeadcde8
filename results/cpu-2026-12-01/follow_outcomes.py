"""Outcome shares of arriving punches, face episodes, zero action: at the guard and stepped back 0.2 m,
with the opponent following (default) and pinned (opponent_follow_mps=0)."""
import sys, time
import jax, jax.numpy as jnp, numpy as np
from boxjax import envs
from boxjax.envs import block
from boxjax.envs.wrappers import autoreset_step, batch_reset

W, STEPS = 16, 240
for follow in (1.0, 0.0):
    e = envs.make("block", body="simple", impl="jax", num_worlds=W, opponent_follow_mps=follow,
                  opponent_turn_radps=3.0 * follow, episode_s=STEPS * 0.025 + 1)
    p = e.default_params()
    p = p.replace(kind_weights=jnp.asarray(np.eye(5, dtype=np.float32)[0]))
    reset = jax.jit(lambda p, k: batch_reset(e, p, k))
    def run(p, s, shift):
        adr, root = e.me.qpos_adr, e.opponent.mocap_ids[0]
        ours, theirs = e.guard_qpos[adr : adr + 2], e.guard_mocap_pos[root, :2]
        away = jnp.asarray((ours - theirs) / np.linalg.norm(ours - theirs), jnp.float32)
        s = s.replace(data=s.data.replace(qpos=s.data.qpos.at[:, adr : adr + 2].add(-shift * away)))
        first = s
        def body(s, _):
            s, stepped = autoreset_step(e, p, s, first, jnp.zeros((W, e.action_size)))
            m = stepped.metrics
            return s, jnp.stack([m[k].sum() for k in ("punch/arrived", "punch/parried", "punch/blocked", "punch/missed", "punch/hit", "fall")])
        _, out = jax.lax.scan(body, s, None, length=STEPS)
        return out.sum(0)
    run = jax.jit(run)
    for shift in (0.0, -0.2):
        t = time.time()
        s = reset(p, jax.random.split(jax.random.PRNGKey(0), W))
        a, par, blk, miss, hit, fall = np.asarray(run(p, s, shift))
        print(f"follow {follow} shift {shift:+.1f} m: arrived {a:.0f}  parried {par/a:.0%}  blocked {blk/a:.0%}  missed {miss/a:.0%}  hit {hit/a:.0%}  falls {fall:.0f}  ({time.time()-t:.0f} s)", flush=True)
