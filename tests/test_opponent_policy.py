"""The block task's learned opponent (`BlockConfig.opponent_policy` "learned") on the CPU (simple body, two
face worlds, MJX's JAX physics): at zero offsets his world steps bit for bit like the scripted one, his
action moves his joint targets, his observation and reward are what the env's own figures say, and the
config errors are named.

One scan of `STEPS` control steps is compiled per env (scripted, learned) for the whole file (`rollouts`).
Both worlds face the same forced punch with our fighter's arms hanging (`BLOCKED_PUNCH` of tests/test_block.py
lands clean there); in the learned world the opponent of world 0 takes the zero action, that of world 1
`OFFSET_ACTION`.
"""

import concurrent.futures

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from boxjax import envs
from boxjax.envs import base
from boxjax.envs.block import opponent as block_opponent
from boxjax.envs.block.config import KINDS, BlockConfig
from boxjax.envs.wrappers import batch_reset

WORLDS = 2
STEPS = 24
"""Control steps of each rollout: the punch, thrown at step 1, is judged at step 17 (impact 8 + lag 8)."""
OPTIONS = {"episode_s": 1.0, "ablate": ("ik",)}
"""Face episodes never use the command's arm fit: without it the programs compile in half the time."""
PUNCH = "cross-body-medium"
"""Lands clean on a fighter whose arms hang (tests/test_block.py's `BLOCKED_PUNCH`)."""
OFFSET_ACTION = 0.5
"""World 1's opponent action, every actuator."""


def _face_params(env):
    weights = np.eye(len(KINDS), dtype=np.float32)[KINDS.index("face")]
    return env.default_params().replace(kind_weights=jnp.asarray(weights))


def _arms_down(env, state):
    """`state` with both worlds' reference pose arms down and `PUNCH` thrown at the next step."""
    names = [env.mj_model.actuator(int(a)).name for a in env.me.actuator_ids]
    down = env.me.stance_ctrl.copy()
    for joint in ("shoulder_y", "shoulder_x", "elbow"):
        for side in "lr":
            down[names.index(f"red/{joint}_{side}")] = 0.0
    info = state.info.replace(
        pose_ref=jnp.broadcast_to(jnp.asarray(down, jnp.float32), state.info.pose_ref.shape),
        punch=jnp.full((WORLDS,), env.library.names.index(PUNCH), jnp.int32),
        frame=jnp.full((WORLDS,), -1, jnp.int32),
    )
    return state.replace(info=info)


def _steps(env, params, state, his=None):
    """`STEPS` steps of every world from `state`, our fighter at the zero action and the learned opponent
    at `his` (WORLDS, A2) (None: the plain array action), in one scan: the stacked stepped states."""
    mine = jnp.zeros((WORLDS, env.action_size), jnp.float32)

    def one(s, _):
        action = mine if his is None else {"blocker": mine, "opponent": his}
        s = jax.vmap(env.step, in_axes=(None, 0, 0))(params, s, action)
        return s, s

    return jax.lax.scan(one, state, None, length=STEPS)[1]


def _as_scripted(state):
    """A learned world's state as the scripted env's: without his view buffer, observation and figures (the
    rest is the same reset's, drawn alike)."""
    metrics = {k: v for k, v in state.metrics.items() if k not in block_opponent.METRICS}
    return state.replace(others=None, metrics=metrics, info=state.info.replace(opponent_view=None))


@pytest.fixture(scope="module")
def rollouts():
    """{"learned" | "scripted": (env, reset state, stepped states)}: the learned world reset, its punch forced
    and stepped in one program; the scripted world stepped from that same state in another. The two
    programs compile side by side (XLA compiles outside the interpreter lock): on 2 cores, in the time of
    one."""
    learned = envs.make(
        "block", body="simple", impl="jax", num_worlds=WORLDS, opponent_policy="learned", **OPTIONS
    )
    size = learned.agents[1].action_size
    his = jnp.stack([jnp.zeros(size), jnp.full(size, OFFSET_ACTION)]).astype(jnp.float32)
    params = _face_params(learned)

    def run(keys):
        state = _arms_down(learned, batch_reset(learned, params, keys))
        return state, _steps(learned, params, state, his)

    keys = jax.random.split(jax.random.PRNGKey(3), WORLDS)
    learned_program = jax.jit(run).lower(keys)
    scripted = envs.make("block", body="simple", impl="jax", num_worlds=WORLDS, **OPTIONS)
    scripted_params = _face_params(scripted)
    start_shape = _as_scripted(learned_program.out_info[0])
    scripted_program = jax.jit(lambda s: _steps(scripted, scripted_params, s)).lower(start_shape)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        programs = (learned_program, scripted_program)
        run_learned, run_scripted = pool.map(lambda program: program.compile(), programs)
    first, states = run_learned(keys)
    start = _as_scripted(first)
    return {"learned": (learned, first, states), "scripted": (scripted, start, run_scripted(start))}


def test_agents_only_with_the_learned_opponent(rollouts):
    scripted, first, states = rollouts["scripted"]
    learned = rollouts["learned"][0]
    assert [a.name for a in base.agents_of(scripted)] == [base.PRIMARY_AGENT]
    assert states.others is None
    assert not any(k.startswith("opponent/") for k in scripted.metric_names())
    blocker, opponent = base.agents_of(learned)
    assert (blocker.name, blocker.observation_size, blocker.action_size) == (
        "blocker", scripted.observation_size, scripted.action_size,
    )  # fmt: skip
    assert opponent.name == "opponent" and opponent.action_size == len(learned.opponent.actuator_ids)
    assert opponent.observation_size == block_opponent.observation_size(learned.opponent_index)
    # the simple opponent body: 37 actuators; he sees 3 x 37 joint figures, 9 keypoints and a 9-float phase
    assert (opponent.observation_size, opponent.action_size) == (3 * 37 + 27 + 9, 37)
    assert set(learned.metric_names()) == set(scripted.metric_names()) | set(block_opponent.METRICS)


def test_zero_offsets_step_bit_for_bit_like_the_scripted_opponent(rollouts):
    _, _, want = rollouts["scripted"]
    _, _, got = rollouts["learned"]
    for name in ("obs", "reward", "done", "truncation"):
        np.testing.assert_array_equal(getattr(got, name)[:, 0], getattr(want, name)[:, 0], err_msg=name)
    np.testing.assert_array_equal(got.data.qpos[:, 0], want.data.qpos[:, 0])
    for name, value in want.metrics.items():
        np.testing.assert_array_equal(got.metrics[name][:, 0], value[:, 0], err_msg=name)
    assert float(want.metrics["punch/hit"][:, 0].sum()) == 1.0  # the punch landed in the compared steps


def test_the_plain_array_action_is_the_opponents_zero_action(rollouts, monkeypatch):
    """`step` given our fighter's (A,) action hands its halves the dict with the opponent's zeros (the action
    whose world steps bit for bit like the scripted one); a dict must name every agent."""

    class Handed(Exception):
        pass

    def before_physics(params, state, action):
        raise Handed(action)

    env = rollouts["learned"][0]
    monkeypatch.setattr(env, "before_physics", before_physics)
    mine = jnp.ones((env.action_size,), jnp.float32)
    with pytest.raises(Handed) as handed:
        env.step(None, None, mine)
    action = handed.value.args[0]
    assert sorted(action) == ["blocker", "opponent"] and action["blocker"] is mine
    assert action["opponent"].dtype == jnp.float32
    np.testing.assert_array_equal(action["opponent"], np.zeros(env.agents[1].action_size))
    with pytest.raises(ValueError, match="the env's agents are"):
        env.step(None, None, {"blocker": mine})


def test_his_action_offsets_his_joint_targets(rollouts):
    env, _, states = rollouts["learned"]
    _, _, scripted = rollouts["scripted"]
    opp = np.asarray(env.opponent.actuator_ids)
    lo, hi = env.opponent.ctrl_range.T
    base_ctrl = np.asarray(scripted.data.ctrl[:, 1][:, opp])
    want = np.clip(base_ctrl + env.config.opponent_offset_rad * OFFSET_ACTION, lo, hi)
    # the first step: both worlds equal before it, so his targets differ by the offset alone
    np.testing.assert_allclose(np.asarray(states.data.ctrl[0, 1][opp]), want[0], atol=1e-6)
    assert np.abs(want[0] - base_ctrl[0]).max() > 0.1
    q = slice(env.opponent.qpos_adr, env.opponent.qpos_adr + env.opponent.nq)
    moved = np.abs(np.asarray(states.data.qpos[:, 1, q] - scripted.data.qpos[:, 1, q])).max()
    assert moved > 0.05, moved


def test_his_observation_and_reward(rollouts):
    env, first, states = rollouts["learned"]
    size = env.agents[1].observation_size
    for s in (first, states):
        his = s.others["opponent"]
        assert his.obs.shape[-1] == size and his.obs.dtype == jnp.float32 and his.reward.dtype == jnp.float32
        assert his.reward.shape == s.reward.shape
        assert bool(jnp.all(jnp.isfinite(his.obs))) and bool(jnp.all(jnp.isfinite(his.reward)))
    m, cfg = states.metrics, env.config
    reward = np.asarray(states.others["opponent"].reward)
    want = (
        m["punch/hit_score"]
        + cfg.opponent_clean_bonus * m["punch/clean"]
        - cfg.w_opponent_effort * m["opponent/effort"]
    )
    np.testing.assert_allclose(reward, want, atol=1e-6)
    np.testing.assert_allclose(reward, m["opponent/reward"])
    np.testing.assert_allclose(m["opponent/effort"][:, 1], OFFSET_ACTION**2, rtol=1e-6)
    landed = np.asarray(m["punch/hit"][:, 0]) > 0
    assert landed.sum() == 1 and reward[landed, 0][0] > cfg.block_max_score  # the zero-action world's hit
    assert np.all(reward[~landed, 0] == 0.0)
    # his delayed view: the keypoints he saw `delay_steps` steps before, in his pelvis frame
    seen = slice(3 * env.agents[1].action_size, 3 * env.agents[1].action_size + block_opponent.VIEW_SIZE)
    delay = env.delay_steps
    np.testing.assert_array_equal(np.asarray(first.others["opponent"].obs[0, seen]), env.opponent_guard_view)
    data = jax.tree.map(lambda x: x[STEPS - 1 - delay, 0], states.data)
    now = block_opponent.view(data.site_xpos, data.xpos, data.xmat, env.opponent_index)
    np.testing.assert_allclose(np.asarray(states.others["opponent"].obs[-1, 0, seen]), now, atol=1e-6)


def test_config_errors_are_named():
    with pytest.raises(ValueError, match="opponent_policy.*'nope'.*scripted, learned"):
        BlockConfig(opponent_policy="nope")
    for fields in ({"opponent": "puppet"}, {"opponent_freeze_idle": True}):
        with pytest.raises(ValueError, match="opponent='simulated', opponent_freeze_idle=false"):
            BlockConfig(opponent_policy="learned", **fields)
    with pytest.raises(ValueError, match="opponent_offset_rad"):
        BlockConfig(opponent_policy="learned", opponent_offset_rad=0.0)
    with pytest.raises(ValueError, match="opponent_policy='learned' runs on the JAX/MJX path"):
        envs.on_c_engine(BlockConfig(opponent_policy="learned"))


def test_old_runs_describe_themselves_as_before():
    """A default config leaves the new fields out of its description (an older run's checkpoint resumes);
    a learned one names what differs."""
    assert not {"opponent_policy", "opponent_offset_rad", "w_opponent_effort", "opponent_clean_bonus"} & set(
        BlockConfig().to_dict()
    )
    assert (
        BlockConfig(opponent_policy="learned", opponent_offset_rad=0.2).to_dict()["opponent_offset_rad"]
        == 0.2
    )
