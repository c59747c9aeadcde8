"""Outcome shares of arriving punches, face episodes: our fighter holding a lean back (a constant action on
the lumbar pitch joint), against an opponent that follows (default) and a pinned one (opponent_follow_mps=0)."""
import time
import jax, jax.numpy as jnp, numpy as np, mujoco
from boxjax import envs
from boxjax.envs.wrappers import autoreset_step, batch_reset

W, STEPS = 16, 240
for follow in (1.0, 0.0):
    e = envs.make("block", body="simple", impl="jax", num_worlds=W, opponent_follow_mps=follow,
                  opponent_turn_radps=3.0 * follow, episode_s=STEPS * 0.025 + 1)
    m = e.mj_model
    jnt = m.joint(e.me.prefix + "lumbar_y").id
    act = [i for i, a in enumerate(e.me.actuator_ids) if m.actuator_trnid[a, 0] == jnt][0]
    dim = int(np.asarray(e.me.action_group)[act])
    p = e.default_params().replace(kind_weights=jnp.asarray(np.eye(5, dtype=np.float32)[0]))
    reset = jax.jit(lambda p, k: batch_reset(e, p, k))
    for lean in (0.0, -0.6):
        action = jnp.zeros((W, e.action_size)).at[:, dim].set(lean)
        def run(p, s):
            first = s
            def body(s, _):
                s, stepped = autoreset_step(e, p, s, first, action)
                m_ = stepped.metrics
                head = stepped.data.geom_xpos[:, e.me.head_geom_id, :2]
                pelvis = stepped.data.qpos[:, e.me.qpos_adr : e.me.qpos_adr + 2]
                return s, (jnp.stack([m_[k].sum() for k in ("punch/arrived", "punch/parried", "punch/missed", "punch/hit", "fall")]),
                           jnp.linalg.norm(head - pelvis, axis=-1).mean())
            _, (out, reach) = jax.lax.scan(body, s, None, length=STEPS)
            return out.sum(0), reach[-40:].mean()
        t = time.time()
        out, reach = jax.jit(run)(p, reset(p, jax.random.split(jax.random.PRNGKey(0), W)))
        a, par, miss, hit, fall = np.asarray(out)
        print(f"follow {follow} lean action {lean:+.1f} (head {float(reach):.2f} m from the pelvis, floor): arrived {a:.0f}  parried {par/a:.0%}  missed {miss/a:.0%}  hit {hit/a:.0%}  falls {fall:.0f}  ({time.time()-t:.0f} s)", flush=True)
